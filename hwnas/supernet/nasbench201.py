"""NAS-Bench-201 supernet: the cell's 6 edges are mixed operations over the 5 operations
(DARTS, Liu et al., ICLR 2019; as in NAS-Bench-201's own DARTS/GDAS baselines).

All cells share the architecture (one decision per edge), each cell has its own weights. The
macro skeleton is NAS-Bench-201's with configurable width and depth: ``channels`` C (stages C,
2C, 4C; 16 in the benchmark) and ``cells`` N per stage (5 in the benchmark). The derived cell is a
NAS-Bench-201 arch string, so the benchmark's table accuracy and the recorded device
latencies (measured for C=16, N=5) apply to it.

``partial_channels`` K > 1 gives PC-DARTS's partial channel connections (Xu et al., ICLR 2020;
yuhuixu1993/PC-DARTS ``model_search.py``): on every edge only the first C/K channels go through
the candidate operations (built for C/K channels), the others bypass them, and a channel shuffle
with K groups mixes the two; the strategy adds PC-DARTS's edge normalisation (a softmax over the
edges entering each node, :attr:`NasBench201Supernet.edge_groups`). Memory of the mixed
operations drops about K-fold. The derived network is NAS-Bench-201's at full width: its cell
operations start from fresh weights (PC-DARTS retrains the derived network; here fine-tuning
trains them), everything else is inherited.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch, SearchSpace
from hwnas.spaces.mixed import Choice, MixedChoice, Path
from hwnas.spaces.nasbench201.model import (
    NasBench201Network,
    ResidualReduction,
    make_operation,
)
from hwnas.supernet.base import Supernet, inherit
from hwnas.supernet.settings import supernet_defaults

DEFAULTS = supernet_defaults("nasbench201")
"""Size settings and their defaults (declared in :mod:`hwnas.supernet.settings`)."""


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """ShuffleNet's channel shuffle (Zhang et al., CVPR 2018): (B, C, H, W) -> (B, C, H, W),
    channel g * (C / groups) + i moved to i * groups + g."""
    b, c, h, w = x.shape
    return x.view(b, groups, c // groups, h, w).transpose(1, 2).reshape(b, c, h, w)


class PartialMixedChoice(MixedChoice):
    """A mixed operation with PC-DARTS's partial channel connection (Xu et al., ICLR 2020).

    (B, C, H, W) -> (B, C, H, W): the first C/K channels go through the active candidates
    (built for C/K channels) weighted as in :class:`MixedChoice`; the other channels bypass
    them, scaled by the sum of the decision's weights (1 for a distribution; the edge's weight
    when the strategy folds PC-DARTS's edge normalisation into the weights); then a channel
    shuffle with K groups.

    Args:
        decision: index of the decision this mixed operation follows.
        candidates: name -> module for C/K channels (None for the zero operation).
        k: the partial-channel ratio K.
    """

    def __init__(self, decision: int, candidates: dict[str, nn.Module | None], k: int):
        super().__init__(decision, candidates)
        self.k = k

    def forward(self, x: torch.Tensor, choice: Choice) -> torch.Tensor:
        part = x.shape[1] // self.k
        y = super().forward(x[:, :part], choice)
        rest = x[:, part:] * choice.weights.sum()
        return channel_shuffle(torch.cat([y, rest], dim=1), self.k)


class SuperCell(nn.Module):
    """A NAS-Bench-201 cell with a :class:`MixedChoice` on every edge (a
    :class:`PartialMixedChoice` when ``partial`` K > 1)."""

    def __init__(
        self, operations: tuple[str, ...], channels: int, num_nodes: int = 4, partial: int = 1
    ):
        super().__init__()
        self.num_nodes = num_nodes
        self.edges = nn.ModuleDict()
        width = channels // partial
        k = 0
        for j in range(1, num_nodes):
            for i in range(j):
                ops = {op: None if op == "none" else make_operation(op, width) for op in operations}
                self.edges[f"{j}_{i}"] = (
                    PartialMixedChoice(k, ops, partial) if partial > 1 else MixedChoice(k, ops)
                )
                k += 1

    def forward(self, x: torch.Tensor, path: Path) -> torch.Tensor:
        nodes = [x]
        k = 0
        for j in range(1, self.num_nodes):
            total = None
            for i in range(j):
                y = self.edges[f"{j}_{i}"](nodes[i], path[k])
                total = y if total is None else total + y
                k += 1
            nodes.append(total)
        return nodes[-1]


class NasBench201Supernet(Supernet):
    """NAS-Bench-201 supernet.

    Config keys: ``channels`` (C, default 8), ``cells`` (N per stage, default 1),
    ``partial_channels`` (K, default 1: every channel through the mixed operations).
    Input (B, 3, H, W), output (B, num_classes).

    Attributes:
        edge_groups: with partial channels, the decisions (edges) entering each node, whose
            outputs PC-DARTS's edge normalisation weights by a softmax per node; else empty.
    """

    def __init__(
        self,
        space: SearchSpace,
        num_classes: int,
        image_shape: tuple[int, int, int],
        config: dict[str, Any],
    ):
        config = {**DEFAULTS, **config}
        super().__init__(space, num_classes, image_shape, config)
        c, n = int(config["channels"]), int(config["cells"])
        partial = int(config["partial_channels"])
        if partial > 1 and c % partial:
            raise HwnasError(f"partial_channels={partial}: channels ({c}) must be a multiple of it")
        self.partial = partial
        if partial > 1:  # node j sums edges j_0 .. j_{j-1}: decisions in the space's order
            self.edge_groups = ((0,), (1, 2), (3, 4, 5))
        self.stage_channels = (c, 2 * c, 4 * c)
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        layers: list[nn.Module] = []
        c_prev = c
        for s, cs in enumerate(self.stage_channels):
            if s > 0:
                layers.append(ResidualReduction(c_prev, cs))
            layers.extend(SuperCell(space.operations, cs, partial=partial) for _ in range(n))
            c_prev = cs
        self.cells = nn.Sequential(*layers)
        self.lastact = nn.Sequential(nn.BatchNorm2d(c_prev), nn.ReLU(inplace=False))
        self.global_pooling = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c_prev, num_classes)

    def forward(self, x: torch.Tensor, path: Path) -> torch.Tensor:
        x = self.stem(x)
        for layer in self.cells:
            x = layer(x, path) if isinstance(layer, SuperCell) else layer(x)
        x = self.lastact(x)
        return self.classifier(torch.flatten(self.global_pooling(x), 1))

    def input_shape(self, arch: Arch) -> tuple[int, int, int]:
        return self.image_shape  # type: ignore[return-value]

    def extract(self, arch: Arch) -> nn.Module:
        ops = self.space.ops(arch)
        static = NasBench201Network(
            ops,
            num_classes=self.num_classes,
            stem_channels=self.stage_channels[0],
            stage_channels=self.stage_channels,
            cells_per_stage=int(self.config["cells"]),
        )
        edge_op = {}
        k = 0
        for j in range(1, 4):
            for i in range(j):
                edge_op[f"{j}_{i}"] = ops[k]
                k += 1

        fresh = static.state_dict()

        def rename(key: str) -> str | torch.Tensor:
            parts = key.split(".")
            if parts[0] == "cells" and len(parts) > 3 and parts[2] == "edges":
                if self.partial > 1:  # trained on C/K channels: the full-width op starts anew
                    return fresh[key]
                return ".".join([*parts[:4], "ops", edge_op[parts[3]], *parts[4:]])
            return key

        return inherit(static, self.state_dict(), rename)
