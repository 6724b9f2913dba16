"""NAS-Bench-201 supernet: the cell's 6 edges are mixed operations over the 5 operations
(DARTS, Liu et al., ICLR 2019; as in NAS-Bench-201's own DARTS/GDAS baselines).

All cells share the architecture (one decision per edge), each cell has its own weights. The
macro skeleton is NAS-Bench-201's with configurable width and depth: ``channels`` C (stages C,
2C, 4C; 16 in the benchmark) and ``cells`` N per stage (5 in the benchmark). The derived cell is a
NAS-Bench-201 arch string, so the benchmark's table accuracy and the recorded device
latencies (measured for C=16, N=5) apply to it.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from hwnas.spaces.base import Arch, SearchSpace
from hwnas.spaces.nasbench201.model import (
    NasBench201Network,
    ResidualReduction,
    make_operation,
)
from hwnas.supernet.base import MixedChoice, Path, Supernet, inherit
from hwnas.supernet.settings import supernet_defaults

DEFAULTS = supernet_defaults("nasbench201")
"""Size settings and their defaults (declared in :mod:`hwnas.supernet.settings`)."""


class SuperCell(nn.Module):
    """A NAS-Bench-201 cell with a :class:`MixedChoice` on every edge."""

    def __init__(self, operations: tuple[str, ...], channels: int, num_nodes: int = 4):
        super().__init__()
        self.num_nodes = num_nodes
        self.edges = nn.ModuleDict()
        k = 0
        for j in range(1, num_nodes):
            for i in range(j):
                self.edges[f"{j}_{i}"] = MixedChoice(
                    k,
                    {
                        op: None if op == "none" else make_operation(op, channels)
                        for op in operations
                    },
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

    Config keys: ``channels`` (C, default 8), ``cells`` (N per stage, default 1).
    Input (B, 3, H, W), output (B, num_classes).
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
        self.stage_channels = (c, 2 * c, 4 * c)
        self.stem = nn.Sequential(nn.Conv2d(3, c, 3, padding=1, bias=False), nn.BatchNorm2d(c))
        layers: list[nn.Module] = []
        c_prev = c
        for s, cs in enumerate(self.stage_channels):
            if s > 0:
                layers.append(ResidualReduction(c_prev, cs))
            layers.extend(SuperCell(space.operations, cs) for _ in range(n))
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

        def rename(key: str) -> str:
            parts = key.split(".")
            if parts[0] == "cells" and len(parts) > 3 and parts[2] == "edges":
                return ".".join([*parts[:4], "ops", edge_op[parts[3]], *parts[4:]])
            return key

        return inherit(static, self.state_dict(), rename)
