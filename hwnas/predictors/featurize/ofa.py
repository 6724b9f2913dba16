"""OFA MobileNetV3 features: per-block costs depend on (block, kernel, expansion, resolution),
so the graph features are a masked sum of table rows built once per input resolution."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

from hwnas.predictors.featurize.base import Featurizer
from hwnas.predictors.graph import GRAPH_COLUMNS, GraphAccumulator
from hwnas.spaces import Arch
from hwnas.spaces.ofa.model import make_divisible


def _out(hw: int, kernel: int, stride: int) -> int:
    return (hw + 2 * (kernel // 2) - kernel) // stride + 1


class OFAFeaturizer(Featurizer):
    """Features of OFA MobileNetV3 subnets (ImageNet classifier, input r x r)."""

    dataset = "imagenet"
    structural_names = (
        "n_blocks",
        "n_k3",
        "n_k5",
        "n_k7",
        "n_e3",
        "n_e4",
        "n_e6",
        "resolution_sq",
    )

    def decoded(self, archs: Sequence[Arch]) -> tuple[np.ndarray, ...]:
        """(ks (n, 20), e (n, 20), active (n, 20) bool, r (n,))."""
        cfgs = [self.space.decode(a) for a in archs]
        ks = np.array([c.ks for c in cfgs], dtype=np.int64).reshape(len(cfgs), -1)
        e = np.array([c.e for c in cfgs], dtype=np.int64).reshape(len(cfgs), -1)
        active = np.array([c.active(self.space.max_depth) for c in cfgs], dtype=bool)
        r = np.array([c.r for c in cfgs], dtype=np.int64)
        return ks, e, active.reshape(len(cfgs), -1), r

    def structural(self, archs: Sequence[Arch]) -> np.ndarray:
        ks, e, active, r = self.decoded(archs)
        cols = [active.sum(1)]
        cols += [((ks == k) & active).sum(1) for k in self.space.kernel_sizes]
        cols += [((e == x) & active).sum(1) for x in self.space.expand_ratios]
        cols.append((r / 224.0) ** 2)
        return np.stack(cols, 1).astype(np.float64)

    @cache  # noqa: B019 - one featurizer per process
    def _tables(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """(fixed part, table of shape (20, len(ks), len(e), len(GRAPH_COLUMNS))) at input r."""
        macro = self.space.macro
        nk, ne = len(self.space.kernel_sizes), len(self.space.expand_ratios)
        table = np.zeros((self.space.num_blocks, nk, ne, len(GRAPH_COLUMNS)))
        fixed = GraphAccumulator()
        fixed.add("input_elems", 3 * r * r)
        c0 = int(macro["first_channels"])
        hw = _out(r, 3, 2)
        fixed.conv(3, c0, 3, 1, (r, r), (hw, hw))
        fixed.elementwise("act", c0 * hw * hw)
        self._mbconv(fixed, c0, c0, 3, 1, 1, False, hw)  # the fixed first block
        c_prev = c0
        for s, (c, stride, se) in enumerate(
            zip(macro["stage_channels"], macro["stage_strides"], macro["stage_se"])
        ):
            for i in range(self.space.max_depth):
                st = int(stride) if i == 0 else 1
                for ki, k in enumerate(self.space.kernel_sizes):
                    for ei, x in enumerate(self.space.expand_ratios):
                        acc = GraphAccumulator()
                        self._mbconv(acc, c_prev, int(c), k, st, x, bool(se), hw)
                        table[s * self.space.max_depth + i, ki, ei] = acc.values
                if i == 0:  # later blocks of the stage see the first block's output
                    hw, c_prev = _out(hw, 1, st), int(c)
        c_final, c_mix = int(macro["final_expand_channels"]), int(macro["feature_mix_channels"])
        fixed.conv(c_prev, c_final, 1, 1, (hw, hw), (hw, hw))
        fixed.elementwise("act", c_final * hw * hw)
        fixed.add("n_global_pool", 1)
        fixed.conv(c_final, c_mix, 1, 1, (1, 1), (1, 1))
        fixed.elementwise("act", c_mix)
        fixed.gemm(c_mix, self.space.dataset(self.dataset).num_classes)
        return fixed.values, table

    @staticmethod
    def _mbconv(
        acc: GraphAccumulator, c_in: int, c_out: int, k: int, stride: int, e: int, se: bool, hw
    ) -> None:
        mid = make_divisible(c_in * e)
        if e != 1:
            acc.conv(c_in, mid, 1, 1, (hw, hw), (hw, hw))
            acc.elementwise("act", mid * hw * hw)
        ho = _out(hw, k, stride)
        acc.conv(mid, mid, k, mid, (hw, hw), (ho, ho))
        acc.elementwise("act", mid * ho * ho)
        if se:
            red = make_divisible(mid // 4)
            acc.add("n_global_pool", 1)
            acc.conv(mid, red, 1, 1, (1, 1), (1, 1))
            acc.elementwise("act", red)
            acc.conv(red, mid, 1, 1, (1, 1), (1, 1))
            acc.elementwise("act", mid)
            acc.elementwise("mul", mid * ho * ho)
        acc.conv(mid, c_out, 1, 1, (ho, ho), (ho, ho))
        if stride == 1 and c_in == c_out:
            acc.elementwise("add", c_out * ho * ho)

    def graph(self, archs: Sequence[Arch]) -> np.ndarray:
        ks, e, active, r = self.decoded(archs)
        kpos = {k: i for i, k in enumerate(self.space.kernel_sizes)}
        epos = {x: i for i, x in enumerate(self.space.expand_ratios)}
        ki = np.vectorize(kpos.__getitem__)(ks)
        ei = np.vectorize(epos.__getitem__)(e)
        out = np.zeros((len(archs), len(GRAPH_COLUMNS)))
        blocks = np.arange(ks.shape[1])[None, :]
        for res in np.unique(r):
            rows = np.nonzero(r == res)[0]
            fixed, table = self._tables(int(res))
            per_block = table[blocks, ki[rows], ei[rows]]  # (m, 20, F)
            out[rows] = fixed + (per_block * active[rows][:, :, None]).sum(1)
        return out
