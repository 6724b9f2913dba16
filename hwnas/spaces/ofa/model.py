"""PyTorch MobileNetV3 network of an OFA architecture (Cai et al., ICLR 2020; Howard et al.,
"Searching for MobileNetV3", ICCV 2019), width multiplier 1.0.

3x3 conv stem (stride 2) + BN + h-swish, a fixed 3x3 depthwise-separable block (16 channels),
five stages of MBConv blocks (24/40/80/112/160 channels, strides 2/2/2/1/2, ReLU in the first two
stages and h-swish after, squeeze-and-excitation in stages 2, 4, 5), a 1x1 conv to 960 + BN +
h-swish, global average pooling, a 1x1 conv to 1280 + h-swish, and a linear classifier.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hwnas.spaces.base import make_divisible  # torch-free: the declared spaces' counts use it


def activation(name: str) -> nn.Module:
    return {"relu": nn.ReLU(inplace=True), "h_swish": nn.Hardswish(inplace=True)}[name]


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation (Hu et al., CVPR 2018) with reduction 4 and hard sigmoid."""

    def __init__(self, channels: int):
        super().__init__()
        mid = make_divisible(channels // 4)
        self.fc = nn.Sequential(
            nn.AdaptiveAvgPool2d(1),
            nn.Conv2d(channels, mid, 1),
            nn.ReLU(inplace=True),
            nn.Conv2d(mid, channels, 1),
            nn.Hardsigmoid(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.fc(x)


class MBConv(nn.Module):
    """Inverted residual (MobileNetV2/V3): (B, c_in, H, W) -> (B, c_out, H/stride, W/stride).

    The expansion 1x1 conv is left out when ``expand`` is 1; the residual is added when the
    shapes match.
    """

    def __init__(
        self, c_in: int, c_out: int, kernel: int, stride: int, expand: int, act: str, se: bool
    ):
        super().__init__()
        mid = make_divisible(c_in * expand)
        layers: list[nn.Module] = []
        if expand != 1:
            layers += [nn.Conv2d(c_in, mid, 1, bias=False), nn.BatchNorm2d(mid), activation(act)]
        layers += [
            nn.Conv2d(mid, mid, kernel, stride, kernel // 2, groups=mid, bias=False),
            nn.BatchNorm2d(mid),
            activation(act),
        ]
        if se:
            layers.append(SqueezeExcite(mid))
        layers += [nn.Conv2d(mid, c_out, 1, bias=False), nn.BatchNorm2d(c_out)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


def ofa_head(
    c_in: int, macro: dict[str, Any], num_classes: int
) -> tuple[nn.Module, nn.Module, nn.Module, nn.Linear]:
    """MobileNetV3's head after the last block, as OFA builds it (Cai et al., ICLR 2020):
    ``final_expand`` (1x1 conv to ``macro["final_expand_channels"]``, BN, HardSwish), global
    average ``pool``, ``feature_mix`` (1x1 conv to ``macro["feature_mix_channels"]``, HardSwish)
    and the linear ``classifier``; (B, c_in, H, W) -> (B, num_classes) in that order. The
    supernet and its subnets build the same modules under the same names, so a subnet inherits
    the head's weights by name."""
    c_final, c_mix = int(macro["final_expand_channels"]), int(macro["feature_mix_channels"])
    final_expand = nn.Sequential(
        nn.Conv2d(c_in, c_final, 1, bias=False),
        nn.BatchNorm2d(c_final),
        nn.Hardswish(inplace=True),
    )
    feature_mix = nn.Sequential(
        nn.Conv2d(c_final, c_mix, 1, bias=False), nn.Hardswish(inplace=True)
    )
    return final_expand, nn.AdaptiveAvgPool2d(1), feature_mix, nn.Linear(c_mix, num_classes)


class OFAMobileNetV3(nn.Module):
    """Network of one OFA architecture: input (B, 3, r, r), output (B, num_classes) logits.

    Args:
        cfg: the decoded architecture (:class:`hwnas.spaces.ofa.OFAConfig`).
        num_classes: classifier width (1000 for ImageNet).
        macro: the ``macro`` section of the space definition.
    """

    def __init__(self, cfg: Any, num_classes: int, macro: dict[str, Any]):
        super().__init__()
        c0 = int(macro["first_channels"])
        self.stem = nn.Sequential(
            nn.Conv2d(3, c0, 3, 2, 1, bias=False), nn.BatchNorm2d(c0), nn.Hardswish(inplace=True)
        )
        blocks: list[nn.Module] = [MBConv(c0, c0, 3, 1, 1, "relu", False)]
        c_prev, max_depth = c0, int(macro["max_depth"])
        for s, (c, stride, act, se) in enumerate(
            zip(
                macro["stage_channels"],
                macro["stage_strides"],
                macro["stage_activations"],
                macro["stage_se"],
            )
        ):
            for i in range(cfg.d[s]):
                b = s * max_depth + i
                blocks.append(
                    MBConv(c_prev, c, cfg.ks[b], stride if i == 0 else 1, cfg.e[b], act, se)
                )
                c_prev = c
        self.blocks = nn.Sequential(*blocks)
        self.final_expand, self.pool, self.feature_mix, self.classifier = ofa_head(
            c_prev, macro, num_classes
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.final_expand(self.blocks(self.stem(x))))
        return self.classifier(torch.flatten(self.feature_mix(x), 1))
