"""FBNet supernet (Wu et al., CVPR 2019): 22 layers, each a mixed operation over the 9 blocks.

The macro skeleton is the space's (HW-NAS-Bench CIFAR-100 setting: stem stride 1, stage strides
1,1,2,2,1,2,1) with every width multiplied by ``width`` and rounded to a multiple of 4 (1.0 is
the benchmark's network). The derived architecture is an FBNet arch string, so recorded device
latencies (for width 1.0) and additive lookup tables fitted on them apply to it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hwnas.spaces.base import Arch, SearchSpace
from hwnas.spaces.fbnet.model import FBNetBlock, FBNetNetwork, conv_bn
from hwnas.spaces.mixed import MixedChoice, Path
from hwnas.supernet.base import Supernet, inherit
from hwnas.supernet.settings import supernet_defaults

DEFAULTS = supernet_defaults("fbnet")
"""Size settings and their defaults (declared in :mod:`hwnas.supernet.settings`)."""


def scaled(channels: int, width: float) -> int:
    """Channels times ``width``, rounded to a multiple of 4 (at least 4; grouped blocks need
    even widths)."""
    return max(4, int(round(channels * width / 4.0)) * 4)


class FBNetSupernet(Supernet):
    """FBNet supernet.

    Config keys: ``width`` (multiplier, default 0.25), ``profile`` (which dataset's strides and
    head width to use: "cifar100" or "imagenet", default "cifar100").

    One-shot training (``oneshot``) starts every residual candidate as the identity
    (:meth:`init_for_one_shot`).
    """

    one_shot_caveat = (
        "one-shot training (--strategy oneshot) does not yet rank FBNet's subnets: its 6 "
        "layers without a shortcut keep the supernet near chance on digits (docs/supernets.md, "
        "'One-shot training on FBNet'); search this space with --strategy fbnet, gdas, darts "
        "or proxyless, or by table search"
    )

    def __init__(
        self,
        space: SearchSpace,
        num_classes: int,
        image_shape: tuple[int, int, int],
        config: dict[str, Any],
    ):
        config = {**DEFAULTS, **config}
        super().__init__(space, num_classes, image_shape, config)
        w = float(config["width"])
        macro, d = space.config["macro"], space.config["datasets"][config["profile"]]
        self.static_kwargs = dict(
            num_classes=num_classes,
            stem_channels=scaled(int(macro["stem_channels"]), w),
            stem_stride=int(d["stem_stride"]),
            layers_per_stage=tuple(macro["layers_per_stage"]),
            stage_channels=tuple(scaled(int(c), w) for c in macro["stage_channels"]),
            stage_strides=tuple(d["stage_strides"]),
            head_channels=scaled(int(d["head_channels"]), w),
        )
        kw = self.static_kwargs
        self.stem = conv_bn(3, kw["stem_channels"], 3, kw["stem_stride"])
        blocks, c_prev, k = [], kw["stem_channels"], 0
        for n, c, s in zip(kw["layers_per_stage"], kw["stage_channels"], kw["stage_strides"]):
            for i in range(n):
                stride = s if i == 0 else 1
                blocks.append(
                    MixedChoice(k, {b: FBNetBlock(b, c_prev, c, stride) for b in space.blocks})
                )
                c_prev, k = c, k + 1
        self.blocks = nn.ModuleList(blocks)
        self.head = conv_bn(c_prev, kw["head_channels"], 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(kw["head_channels"], num_classes)

    def init_for_one_shot(self) -> None:
        """Zero the scale of the last batch norm of every residual candidate (zero-gamma, Goyal
        et al. 2017, as BigNAS, Yu et al., ECCV 2020, starts its one-shot supernets), so that
        each starts as the identity: with scale 1, every one of the 16 residual layers added
        its sampled candidate's unrelated unit-variance map to the features. Extracted
        subnets keep the architecture; only these scales start at 0."""
        for mixed in self.blocks:
            for op in mixed.ops.values():
                if op.residual:
                    last = [m for m in op.body.modules() if isinstance(m, nn.BatchNorm2d)][-1]
                    nn.init.zeros_(last.weight)

    def forward(self, x: torch.Tensor, path: Path) -> torch.Tensor:
        x = self.stem(x)
        for i, block in enumerate(self.blocks):
            x = block(x, path[i])
        x = self.head(x)
        return self.classifier(torch.flatten(self.pool(x), 1))

    def input_shape(self, arch: Arch) -> tuple[int, int, int]:
        return self.image_shape  # type: ignore[return-value]

    def extract(self, arch: Arch) -> nn.Module:
        layers = self.space.layers(arch)
        static = FBNetNetwork(layers, **self.static_kwargs)

        def rename(key: str) -> str:
            parts = key.split(".")
            if parts[0] == "blocks":
                return ".".join(["blocks", parts[1], "ops", layers[int(parts[1])], *parts[2:]])
            return key

        return inherit(static, self.state_dict(), rename)
