"""FBNet features: every searchable layer's cost depends only on (layer, block), so the graph
features are a sum of per-layer table rows (built once from the macro skeleton)."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np

from hwnas.predictors.featurize.base import Featurizer
from hwnas.predictors.graph import GRAPH_COLUMNS, GraphAccumulator
from hwnas.spaces import Arch
from hwnas.spaces.fbnet.blocks import block_spec


def _out(hw: int, kernel: int, stride: int) -> int:
    pad = kernel // 2
    return (hw + 2 * pad - kernel) // stride + 1


class FBNetFeaturizer(Featurizer):
    """Features of FBNet networks for CIFAR-100 (32x32 input, the HW-NAS-Bench setting)."""

    dataset = "cifar100"

    @cached_property
    def structural_names(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(f"n_{b}" for b in self.space.blocks)

    def block_indices(self, archs: Sequence[Arch]) -> np.ndarray:
        """(n, 22) block index of every layer."""
        code = {b: i for i, b in enumerate(self.space.blocks)}
        return np.array([[code[b] for b in self.space.layers(a)] for a in archs], dtype=np.int64)

    def encoding(self, archs: Sequence[Arch]) -> np.ndarray:
        """One-hot encoding (same columns as :meth:`SearchSpace.encode`), vectorised."""
        idx = self.block_indices(archs)
        nb = len(self.space.blocks)
        out = np.zeros((len(idx), idx.shape[1] * nb), dtype=np.float32)
        out[np.arange(len(idx))[:, None], np.arange(idx.shape[1]) * nb + idx] = 1.0
        return out

    def structural(self, archs: Sequence[Arch]) -> np.ndarray:
        idx = self.block_indices(archs)
        return np.stack([(idx == b).sum(1) for b in range(len(self.space.blocks))], 1).astype(
            np.float64
        )

    @cached_property
    def _tables(self) -> tuple[np.ndarray, np.ndarray]:
        """(fixed part, per-layer table of shape (22, 9, len(GRAPH_COLUMNS)))."""
        cfg, macro = self.space.config, self.space.config["macro"]
        d = cfg["datasets"][self.dataset]
        c_img, hw = self.space.dataset(self.dataset).input_shape[0:2]
        fixed = GraphAccumulator()
        fixed.add("input_elems", c_img * hw * hw)
        stem, s0 = int(macro["stem_channels"]), int(d["stem_stride"])
        h1 = _out(hw, 3, s0)
        fixed.conv(c_img, stem, 3, 1, (hw, hw), (h1, h1))
        fixed.elementwise("act", stem * h1 * h1)
        hw, c_prev = h1, stem
        table = np.zeros((self.space.num_layers, len(self.space.blocks), len(GRAPH_COLUMNS)))
        layer = 0
        for n, c, s in zip(macro["layers_per_stage"], macro["stage_channels"], d["stage_strides"]):
            for i in range(n):
                stride = int(s) if i == 0 else 1
                for b, name in enumerate(self.space.blocks):
                    acc = GraphAccumulator()
                    spec = block_spec(name)
                    ho = _out(hw, 1, stride)
                    if spec is None:
                        if stride != 1 or c_prev != c:  # conv + BN + ReLU (HW-NAS-Bench)
                            acc.conv(c_prev, c, 1, 1, (hw, hw), (ho, ho))
                            acc.elementwise("act", c * ho * ho)
                    else:
                        k, e, g = spec
                        mid = c_prev * e
                        ho = _out(hw, k, stride)
                        acc.conv(c_prev, mid, 1, g, (hw, hw), (hw, hw))
                        acc.elementwise("act", mid * hw * hw)
                        if g > 1:
                            acc.elementwise("transpose", mid * hw * hw)
                        acc.conv(mid, mid, k, mid, (hw, hw), (ho, ho))
                        acc.elementwise("act", mid * ho * ho)
                        acc.conv(mid, c, 1, g, (ho, ho), (ho, ho))
                        if stride == 1 and c_prev == c:
                            acc.elementwise("add", c * ho * ho)
                    table[layer, b] = acc.values
                hw = _out(hw, 1, stride)
                c_prev, layer = int(c), layer + 1
        head = int(d["head_channels"])
        fixed.conv(c_prev, head, 1, 1, (hw, hw), (hw, hw))
        fixed.elementwise("act", head * hw * hw)
        fixed.add("n_global_pool", 1)
        fixed.gemm(head, self.space.dataset(self.dataset).num_classes)
        return fixed.values, table

    def graph(self, archs: Sequence[Arch]) -> np.ndarray:
        fixed, table = self._tables
        idx = self.block_indices(archs)
        return fixed + table[np.arange(idx.shape[1])[None, :], idx].sum(1)
