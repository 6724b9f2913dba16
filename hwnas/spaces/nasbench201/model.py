"""PyTorch network for a NAS-Bench-201 cell, in the benchmark's macro skeleton.

Follows the reference implementation of NAS-Bench-201 (Dong & Yang, ICLR 2020): a 3x3 conv
stem with batch norm, three stages of N cells (16/32/64 channels by default), a residual
reduction block (ResNet basic block, stride 2) between stages, then BN + ReLU, global average
pooling and a linear classifier. Operations: ``nor_conv_kxk`` = ReLU -> Conv(k, no bias) -> BN;
``avg_pool_3x3`` = 3x3 average pooling, stride 1, padding excluded from the mean;
``skip_connect`` = identity; ``none`` = zero.

A ``none`` edge adds nothing to its node, so it is left out of the graph; a node with no
incoming operation is exactly zero, as in the reference implementation.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


class ReLUConvBN(nn.Sequential):
    """ReLU -> Conv2d (no bias) -> BatchNorm2d. Shapes (B, C_in, H, W) -> (B, C_out, H/s, W/s)."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int):
        super().__init__(
            nn.ReLU(inplace=False),
            nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=kernel // 2, bias=False),
            nn.BatchNorm2d(c_out),
        )


def make_operation(name: str, channels: int) -> nn.Module:
    """One cell operation at stride 1, (B, C, H, W) -> (B, C, H, W).

    Raises:
        ValueError: ``name`` is ``none`` (it has no module) or unknown.
    """
    if name == "skip_connect":
        return nn.Identity()
    if name == "nor_conv_1x1":
        return ReLUConvBN(channels, channels, 1, 1)
    if name == "nor_conv_3x3":
        return ReLUConvBN(channels, channels, 3, 1)
    if name == "avg_pool_3x3":
        return nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
    raise ValueError(f"no module for operation {name!r}")


class Cell(nn.Module):
    """A NAS-Bench-201 cell: node j = sum over i < j of op_{i->j}(node i); output node 3.

    Args:
        ops: the 6 operations in arch-string order (1<-0, 2<-0, 2<-1, 3<-0, 3<-1, 3<-2).
        channels: C; input and output are (B, C, H, W).
    """

    def __init__(self, ops: Sequence[str], channels: int, num_nodes: int = 4):
        super().__init__()
        self.num_nodes = num_nodes
        self.edges = nn.ModuleDict()
        k = 0
        for j in range(1, num_nodes):
            for i in range(j):
                if ops[k] != "none":
                    self.edges[f"{j}_{i}"] = make_operation(ops[k], channels)
                k += 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        nodes: list[torch.Tensor | None] = [x]
        for j in range(1, self.num_nodes):
            total = None
            for i in range(j):
                op = self.edges[f"{j}_{i}"] if f"{j}_{i}" in self.edges else None
                if op is None:
                    continue
                src = nodes[i] if nodes[i] is not None else torch.zeros_like(x)
                out = op(src)
                total = out if total is None else total + out
            nodes.append(total)
        return nodes[-1] if nodes[-1] is not None else torch.zeros_like(x)


class ResidualReduction(nn.Module):
    """ResNet basic block with stride 2 between stages: (B, C, H, W) -> (B, 2C, H/2, W/2)."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.conv_a = ReLUConvBN(c_in, c_out, 3, 2)
        self.conv_b = ReLUConvBN(c_out, c_out, 3, 1)
        self.downsample = nn.Sequential(
            nn.AvgPool2d(kernel_size=2, stride=2, padding=0),
            nn.Conv2d(c_in, c_out, 1, stride=1, padding=0, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.downsample(x) + self.conv_b(self.conv_a(x))


class NasBench201Network(nn.Module):
    """The NAS-Bench-201 network for one cell.

    Input (B, 3, H, W) float32 images (32x32 for CIFAR, 16x16 for ImageNet16-120); output
    (B, num_classes) logits.

    Args:
        ops: the cell's 6 operations in arch-string order.
        num_classes: 10 (CIFAR-10), 100 (CIFAR-100) or 120 (ImageNet16-120).
        stem_channels: width of the stem and the first stage.
        stage_channels: width of each stage.
        cells_per_stage: N, the number of cells in each stage.
    """

    def __init__(
        self,
        ops: Sequence[str],
        num_classes: int,
        stem_channels: int = 16,
        stage_channels: Sequence[int] = (16, 32, 64),
        cells_per_stage: int = 5,
    ):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, stem_channels, 3, padding=1, bias=False), nn.BatchNorm2d(stem_channels)
        )
        layers: list[nn.Module] = []
        c_prev = stem_channels
        for s, c in enumerate(stage_channels):
            if s > 0:
                layers.append(ResidualReduction(c_prev, c))
            layers.extend(Cell(ops, c) for _ in range(cells_per_stage))
            c_prev = c
        self.cells = nn.Sequential(*layers)
        self.lastact = nn.Sequential(nn.BatchNorm2d(c_prev), nn.ReLU(inplace=False))
        self.global_pooling = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Linear(c_prev, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.lastact(self.cells(self.stem(x)))
        return self.classifier(torch.flatten(self.global_pooling(x), 1))
