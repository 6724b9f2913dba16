"""PyTorch network for an FBNet architecture (Wu et al., CVPR 2019; HW-NAS-Bench setting).

Stem 3x3 conv + BN + ReLU, 22 searchable layers in 7 stages (16/24/32/64/112/184/352
channels), a 1x1 head conv + BN + ReLU (1504 channels for CIFAR-100), global average pooling and
a linear classifier. A block ``k{k}_e{e}[_g{g}]`` is an inverted residual: 1x1 (grouped) conv to
e*C_in + BN + ReLU, channel shuffle when grouped, k x k depthwise conv (stride s) + BN + ReLU,
1x1 (grouped) conv to C_out + BN, plus the input when the shapes match. ``skip`` is the identity,
or a 1x1 conv + BN + ReLU when the layer changes width or resolution (HW-NAS-Bench's
``FBNet_Infer``, whose networks the recorded FBNet latencies were measured on).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from hwnas.spaces.fbnet.blocks import block_spec


class ChannelShuffle(nn.Module):
    """Channel shuffle (ShuffleNet, Zhang et al., CVPR 2018) for ``groups`` groups."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        return x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(b, c, h, w)


def conv_bn(
    c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1, relu: bool = True
):
    """Conv (no bias) + BN (+ ReLU): (B, c_in, H, W) -> (B, c_out, H/stride, W/stride)."""
    layers: list[nn.Module] = [
        nn.Conv2d(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False),
        nn.BatchNorm2d(c_out),
    ]
    if relu:
        layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class FBNetBlock(nn.Module):
    """One searchable layer: (B, c_in, H, W) -> (B, c_out, H/stride, W/stride).

    Args:
        name: block name ("k3_e6", "k5_e1_g2", "skip", ...).
        c_in: input channels.
        c_out: output channels.
        stride: 1 or 2.
    """

    def __init__(self, name: str, c_in: int, c_out: int, stride: int):
        super().__init__()
        spec = block_spec(name)
        self.residual = spec is not None and stride == 1 and c_in == c_out
        if spec is None:
            self.body = (
                nn.Identity()
                if (stride == 1 and c_in == c_out)
                else conv_bn(c_in, c_out, 1, stride)  # conv + BN + ReLU, as HW-NAS-Bench
            )
            return
        kernel, expansion, groups = spec
        mid = c_in * expansion
        layers: list[nn.Module] = [conv_bn(c_in, mid, 1, groups=groups)]
        if groups > 1:
            layers.append(ChannelShuffle(groups))
        layers += [
            conv_bn(mid, mid, kernel, stride, groups=mid),
            conv_bn(mid, c_out, 1, groups=groups, relu=False),
        ]
        self.body = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class FBNetNetwork(nn.Module):
    """The FBNet network for one architecture: input (B, 3, H, W), output (B, num_classes)."""

    def __init__(
        self,
        layers: Sequence[str],
        num_classes: int,
        stem_channels: int,
        stem_stride: int,
        layers_per_stage: Sequence[int],
        stage_channels: Sequence[int],
        stage_strides: Sequence[int],
        head_channels: int,
    ):
        super().__init__()
        self.stem = conv_bn(3, stem_channels, 3, stem_stride)
        blocks, c_prev, k = [], stem_channels, 0
        for n, c, s in zip(layers_per_stage, stage_channels, stage_strides):
            for i in range(n):
                blocks.append(FBNetBlock(layers[k], c_prev, c, s if i == 0 else 1))
                c_prev, k = c, k + 1
        self.blocks = nn.Sequential(*blocks)
        self.head = conv_bn(c_prev, head_channels, 1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(head_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.blocks(self.stem(x)))
        return self.classifier(torch.flatten(self.pool(x), 1))
