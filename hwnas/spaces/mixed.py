"""Mixed operations: the candidates of one decision in one place of a network, run under a
:class:`Choice` (which candidates to compute, and the weight of each output), as in DARTS.

A supernet (:mod:`hwnas.supernet.base`) runs forward under a :data:`Path`, one choice per
decision of its space; a space's own network can be built from mixed operations too (a declared
space's one class for standalone networks and supernets: :mod:`hwnas.spaces.declared.network`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class Choice:
    """What one decision computes.

    Attributes:
        weights: float tensor (K,) over the decision's K candidates; candidate k's output is
            scaled by ``weights[k]`` (1.0 in value for a sampled path, with gradient).
        active: candidate indices to compute (others contribute nothing).
    """

    weights: torch.Tensor
    active: tuple[int, ...]


Path = list[Choice]
"""One :class:`Choice` per decision, in the order of the space's choices."""


def one_hot_path(indices: Sequence[int], sizes: Sequence[int]) -> Path:
    """The path of one architecture (given as candidate indices), with constant weights."""
    out = []
    for k, n in zip(indices, sizes):
        w = torch.zeros(n)
        w[k] = 1.0
        out.append(Choice(w, (int(k),)))
    return out


class MixedChoice(nn.Module):
    """Candidates of one decision in one place of the network (a mixed operation, DARTS).

    Output = sum over active k of ``weights[k] * candidate_k(x)``; a candidate that is None (the
    NAS-Bench-201 ``none`` operation) is the zero tensor.

    Args:
        decision: index of the decision this mixed operation follows.
        candidates: name -> module (None for the zero operation), in candidate order.
    """

    def __init__(self, decision: int, candidates: dict[str, nn.Module | None]):
        super().__init__()
        self.decision = decision
        self.names = tuple(candidates)
        self.ops = nn.ModuleDict({n: m for n, m in candidates.items() if m is not None})
        self.last_input_shape: tuple[int, ...] | None = None

    def forward(self, x: torch.Tensor, choice: Choice) -> torch.Tensor:
        self.last_input_shape = tuple(x.shape)
        out = None
        for k in choice.active:
            name = self.names[k]
            if name not in self.ops:
                continue
            y = self.ops[name](x) * choice.weights[k]
            out = y if out is None else out + y
        if out is None:  # only the zero operation
            return torch.zeros_like(x)
        return out
