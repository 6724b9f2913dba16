"""The supernet of every declared space (:mod:`hwnas.spaces.declared`), from its file alone.

One :class:`~hwnas.spaces.declared.network.DeclaredNetwork` built with every candidate of every
decision: elastic kernels share a superkernel (a smaller kernel is its centre), elastic
expansions, heads, MLP ratios and widths share the first channels of the widest variant
(Once-for-All, Cai et al., ICLR 2020; AutoFormer's weight entanglement, Chen et al., ICCV
2021), elastic depth keeps a stage's first layers, categorical block choices (FBNet) hold one
module per candidate (DARTS's mixed operation). A one-candidate path computes exactly the
extracted subnet; a mixture weights the candidates' outputs (kernels, blocks, depths) or nested
channel masks (widths), so every strategy (DARTS, GDAS, FBNet, ProxylessNAS, one-shot) searches
any declared space. Decisions that cannot be mixed are ``hard_only``: the input resolution
(images are resized to ``round(r * resolution_scale)``) and widths feeding layer-normalised
blocks (a transformer's embedding width).

Size settings (``--set``): ``width`` multiplies every channel count and head width (rounded to
the space's ``channel_divisor``; 1.0 = as declared), ``profile`` picks the dataset whose skeleton
(strides, ``by_dataset`` values) the supernet uses (default: the dataset with the smallest
images, a CIFAR-sized skeleton for CPU training), ``resolution_scale`` maps a resolution
decision to the trained input side. The derived arch string is the space's, so a network built
with ``space.build`` is the full-size version of the same architecture.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch, SearchSpace
from hwnas.spaces.declared.network import DeclaredNetwork, extract_state
from hwnas.spaces.mixed import Path
from hwnas.supernet.base import Supernet
from hwnas.supernet.settings import supernet_defaults

DEFAULTS = supernet_defaults("declared")
"""Size settings and their defaults (declared in :mod:`hwnas.supernet.settings`)."""


def default_profile(space: Any) -> str:
    """The dataset whose skeleton a CPU supernet uses: the one with the smallest images."""
    return min(space.datasets(), key=lambda d: space.dataset(d).input_shape[1])


class DeclaredSupernet(Supernet):
    """Supernet of a declared space.

    Input (B, *image_shape); with a resolution decision, images are resized to the sampled
    resolution's side. Output (B, num_classes) logits.
    """

    def __init__(
        self,
        space: SearchSpace,
        num_classes: int,
        image_shape: tuple[int, int, int],
        config: dict[str, Any],
    ):
        config = {**DEFAULTS, **config}
        self.check_config(space, config)
        config["profile"] = config["profile"] or default_profile(space)
        super().__init__(space, num_classes, image_shape, config)
        self.profile = config["profile"]
        self.width = float(config["width"])
        decs = space.decisions  # type: ignore[attr-defined]
        self.r_dim = self.dims.index("r") if "r" in self.dims else None
        self.hard_only = frozenset(self.dims.index(k) for k in space.hard_only_keys)  # type: ignore[attr-defined]
        shape = self.image_shape
        if self.r_dim is not None:
            side = self.side(max(decs[self.r_dim].values))
            shape = (shape[0], side, side)
        self.net = DeclaredNetwork(
            space,  # type: ignore[arg-type]
            self.profile,
            {d.key: d.values for d in decs},
            self.width,
            num_classes,
            shape,  # type: ignore[arg-type]
        )

    @classmethod
    def check_config(cls, space: SearchSpace, config: dict[str, Any]) -> None:
        """Check size settings against the space before any work.

        Raises:
            HwnasError: a ``profile`` that is not one of the space's datasets.
        """
        profile = config.get("profile") or ""
        if profile and profile not in space.datasets():
            raise HwnasError(
                f"--set profile={profile}: the {space.name} space has datasets "
                f"{', '.join(space.datasets())}"
            )

    def size_warnings(self) -> list[str]:
        """Width decisions whose candidates round to the same channel count at ``--set
        width`` (16 and 24 channels at 0.25, divisor 8: both 8): the search would score the
        same network under two arch strings and credit the one it names to a width it never
        built."""
        if self.width == 1.0:
            return []
        from hwnas.spaces.ofa.model import make_divisible

        divisor = self.space.spec.channel_divisor  # type: ignore[attr-defined]
        lines = []
        for d in self.space.decisions:  # type: ignore[attr-defined]
            if d.kind != "width":
                continue
            scaled = [make_divisible(v * self.width, divisor) for v in d.values]
            if len(set(scaled)) < len(scaled):
                lines.append(
                    f"{d.key}: {'/'.join(d.labels)} channels are {'/'.join(map(str, scaled))} "
                    f"at --set width={self.width:g} (channel_divisor {divisor}): candidates "
                    "that build the same network; a larger --set width tells them apart"
                )
        return lines

    def side(self, r: int) -> int:
        """Trained input side for the resolution decision's value ``r``."""
        return max(8, int(round(r * float(self.config["resolution_scale"]))))

    def forward(self, x: torch.Tensor, path: Path) -> torch.Tensor:
        if self.r_dim is None:
            return self.net(x, path)
        rc = path[self.r_dim]
        if len(rc.active) != 1:
            raise ValueError("a declared supernet computes one resolution at a time")
        side = self.side(self.space.decisions[self.r_dim].values[rc.active[0]])  # type: ignore[attr-defined]
        if x.shape[-1] != side or x.shape[-2] != side:
            x = F.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
        return self.net(x, path) * rc.weights[rc.active[0]]

    def input_shape(self, arch: Arch) -> tuple[int, int, int]:
        if self.r_dim is None:
            return self.image_shape  # type: ignore[return-value]
        s = self.side(int(self.space.values(arch)["r"]))  # type: ignore[attr-defined]
        return (self.image_shape[0], s, s)

    def extract(self, arch: Arch) -> nn.Module:
        values = {k: (v,) for k, v in self.space.values(arch).items()}  # type: ignore[attr-defined]
        static = DeclaredNetwork(
            self.space,  # type: ignore[arg-type]
            self.profile,
            values,
            self.width,
            self.num_classes,
            self.input_shape(arch),
        )
        return extract_state(static, self.state_dict(), prefix="net.")
