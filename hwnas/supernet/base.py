"""The supernet interface: one weight-sharing network over a search space.

A supernet exposes the space's categorical decisions (the dimensions of
:meth:`hwnas.spaces.SearchSpace.choices`, in that order) and runs forward under a
:class:`~hwnas.spaces.mixed.Path`: for every decision, the candidate indices to compute and the
weight each candidate's output gets. A soft mixture (DARTS, FBNet) activates every candidate
with its softmax weight; a sampled path (GDAS, ProxylessNAS, SPOS) activates one (or two)
candidates whose weights carry straight-through gradients to the architecture parameters.
Three things are required of a concrete supernet: :meth:`Supernet.forward`,
:meth:`Supernet.extract` (a standalone ``nn.Module`` of one architecture with the inherited
weights) and :meth:`Supernet.input_shape`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hwnas.spaces.base import Arch, SearchSpace
from hwnas.spaces.mixed import MixedChoice, Path, one_hot_path


class Supernet(nn.Module):
    """A weight-sharing network over a search space.

    Args:
        space: the search space.
        num_classes: classifier width.
        image_shape: (C, H, W) of the training images.
        config: the supernet's size settings (channels, depth, width multiplier, ...).

    Attributes:
        dims: decision names (the space's choice dimensions), in order.
        options: the candidates of each decision.
        hard_only: decisions that can only be computed one candidate at a time (the strategy
            samples them even in soft-mixture mode).
    """

    hard_only: frozenset[int] = frozenset()
    one_shot_caveat: str | None = None
    """Said as a warning before one-shot training (``oneshot``) where that training is known
    not to rank this supernet's subnets yet; None: none known."""
    edge_groups: tuple[tuple[int, ...], ...] = ()
    """Groups of decisions whose outputs are summed into one node and weighted by a softmax
    over the group (PC-DARTS edge normalisation, applied by the strategy); empty: none."""

    def __init__(
        self,
        space: SearchSpace,
        num_classes: int,
        image_shape: tuple[int, int, int],
        config: dict[str, Any],
    ):
        super().__init__()
        self.space = space
        self.num_classes = num_classes
        self.image_shape = tuple(image_shape)
        self.config = dict(config)
        choices = space.choices()
        self.dims: list[str] = list(choices)
        self.options: list[tuple[str, ...]] = [choices[d] for d in self.dims]

    def init_for_one_shot(self) -> None:
        """Initialise the weights for one-shot training, where every step trains one sampled
        subnet (called by the ``oneshot`` strategy before training; by default nothing)."""

    def size_warnings(self) -> list[str]:
        """Lines on what the supernet's size settings do to the space (decisions whose
        candidates build the same network at that size); none by default."""
        return []

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Every concrete ``extract`` tags the module it returns with :meth:`build_info`
        (``hwnas_build``), so a zoo card can say how to rebuild it for ``weights.pt``."""
        super().__init_subclass__(**kwargs)
        inner = cls.__dict__.get("extract")
        if inner is None or getattr(inner, "__isabstractmethod__", False):
            return

        def extract(self: Supernet, arch: Arch) -> nn.Module:
            module = inner(self, arch)
            module.hwnas_build = self.build_info(arch)
            return module

        extract.__doc__ = inner.__doc__
        extract.__name__ = inner.__name__
        cls.extract = extract  # type: ignore[method-assign]

    def build_info(self, arch: Arch) -> dict[str, Any]:
        """How to rebuild the extracted subnet of ``arch`` (:func:`hwnas.zoo.load`): build this
        supernet (space, classes, image shape, config) and extract ``arch``."""
        return {
            "kind": "supernet",
            "space": self.space.name,
            "arch": arch.text,
            "num_classes": int(self.num_classes),
            "image_shape": [int(v) for v in self.image_shape],
            "config": dict(self.config),
        }

    @classmethod
    def check_config(cls, space: SearchSpace, config: dict[str, Any]) -> None:
        """Check size settings against ``space`` before any work (default: nothing to check;
        the declared settings' types and ranges are checked by :mod:`hwnas.supernet.settings`).

        Raises:
            hwnas.errors.HwnasError: a setting the space cannot take.
        """

    @property
    def sizes(self) -> list[int]:
        """Number of candidates of each decision."""
        return [len(o) for o in self.options]

    @abstractmethod
    def forward(self, x: torch.Tensor, path: Path) -> torch.Tensor:
        """Logits (B, num_classes) of images ``x`` (B, *image_shape) under ``path``."""

    @abstractmethod
    def extract(self, arch: Arch) -> nn.Module:
        """Standalone network of ``arch`` with the supernet's weights (a copy, eval mode).

        Its input is (B, *self.input_shape(arch)); its batch-norm statistics are the
        supernet's: recalibrate with :func:`hwnas.loops.recalibrate_bn`.
        """

    @abstractmethod
    def input_shape(self, arch: Arch) -> tuple[int, int, int]:
        """(C, H, W) input of the extracted network of ``arch``."""

    # -- derived -------------------------------------------------------------------------------

    def indices(self, arch: Arch) -> list[int]:
        """Candidate index of every decision for ``arch``."""
        values = self.space.to_choices(arch)
        return [self.options[i].index(values[d]) for i, d in enumerate(self.dims)]

    def arch(self, indices: Sequence[int]) -> Arch:
        """The architecture taking candidate ``indices[i]`` for decision i."""
        return self.space.from_choices(
            {d: self.options[i][int(k)] for i, (d, k) in enumerate(zip(self.dims, indices))}
        )

    def path_of(self, arch: Arch) -> Path:
        """The one-candidate path of ``arch``."""
        return one_hot_path(self.indices(arch), self.sizes)

    def mixed_choices(self) -> list[MixedChoice]:
        """Every mixed operation in the network (for per-block lookup tables)."""
        return [m for m in self.modules() if isinstance(m, MixedChoice)]

    def describe(self) -> dict[str, Any]:
        return {
            "space": self.space.name,
            "config": self.config,
            "image_shape": list(self.image_shape),
            "num_classes": self.num_classes,
            "parameters": sum(p.numel() for p in self.parameters()),
        }


def inherit(static: nn.Module, source: dict[str, torch.Tensor], rename) -> nn.Module:
    """Load ``static``'s every parameter and buffer from the supernet state ``source``.

    Args:
        static: the standalone network.
        source: the supernet's ``state_dict()``.
        rename: static key -> supernet tensor (a key of ``source`` or a tensor already sliced).

    Raises:
        KeyError: a static tensor has no supernet counterpart (a bug, not a user error).
    """
    state = {}
    for key, value in static.state_dict().items():
        got = rename(key)
        tensor = source[got] if isinstance(got, str) else got
        if tuple(tensor.shape) != tuple(value.shape):
            raise KeyError(f"shape mismatch for {key}: {tuple(tensor.shape)} vs {value.shape}")
        state[key] = tensor.detach().clone()
    static.load_state_dict(state, strict=True)
    return static.eval()
