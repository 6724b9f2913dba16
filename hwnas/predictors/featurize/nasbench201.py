"""NAS-Bench-201 features, vectorised over architectures.

A cell's six edges are analysed the way the exported graph runs them (see
:mod:`hwnas.spaces.nasbench201.model`): a node with no incoming operation is zero; an operation
whose result cannot reach the cell output is dead code and absent from the ONNX graph; an
operation whose source node is zero still runs (on a zero tensor); each node sums its inputs
with (inputs - 1) additions. The structural counts also give the operations on input-to-output
paths, because runtimes that fold constants (TFLite on phones and the Raspberry Pi) skip
everything else, and whether the cell output is connected to its input at all. The merged
counts give what a runtime that merges identical computations runs of NAS-Bench-201's own
network code (which HW-NAS-Bench and HW-NAS-Bench-360 measured: every edge runs, a ``none`` edge
multiplies its input by zero): PyTorch Mobile runs a parameter-free operation (pooling, the
zeroing, the ReLU that opens a convolution) once per distinct input tensor (common-subexpression
elimination), so a cell's cost there follows those counts, not its edges' operations (Raspberry
Pi 5 with PyTorch Mobile: least squares on the one-hot encoding reaches Spearman rho 0.943 on
half of its measured cells, with the three counts added 0.997).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

import numpy as np

from hwnas.predictors.featurize.base import Featurizer
from hwnas.predictors.graph import GRAPH_COLUMNS, GraphAccumulator
from hwnas.spaces import Arch

EDGES = ((1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (3, 2))
OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")


class NasBench201Featurizer(Featurizer):
    """Features of NAS-Bench-201 cells in the CIFAR macro skeleton (32x32 input)."""

    dataset = "cifar100"
    structural_names = (
        *(f"n_{op}" for op in OPS[1:]),
        *(f"n_{op}_on_path" for op in OPS[1:]),
        "connected",
    )
    merged_names = (
        "reference_net_distinct_pools",
        "reference_net_distinct_zeros",
        "reference_net_distinct_relus",
    )

    # -- ops as integer arrays -------------------------------------------------------------

    @cached_property
    def _table_ops(self) -> np.ndarray:
        """(15625, 6) operation indices of every architecture, in index order."""
        code = {op: i for i, op in enumerate(OPS)}
        return np.array(
            [[code[o] for o in self.space.ops(a)] for a in self.space.all_archs()], dtype=np.int8
        )

    def ops_array(self, archs: Sequence[Arch]) -> np.ndarray:
        """(n, 6) operation indices (0 none, 1 skip, 2 conv 1x1, 3 conv 3x3, 4 pool)."""
        rows = np.fromiter((self.space.index(a) for a in archs), dtype=np.int64, count=len(archs))
        return self._table_ops[rows]

    def encoding(self, archs: Sequence[Arch]) -> np.ndarray:
        """One-hot encoding (same columns as :meth:`SearchSpace.encode`), vectorised."""
        ops = self.ops_array(archs)
        order = {op: i for i, op in enumerate(self.space.operations)}
        remap = np.array([order[op] for op in OPS])
        n_ops = len(self.space.operations)
        out = np.zeros((len(ops), ops.shape[1] * n_ops), dtype=np.float32)
        cols = np.arange(ops.shape[1]) * n_ops + remap[ops]
        out[np.arange(len(ops))[:, None], cols] = 1.0
        return out

    # -- structure -----------------------------------------------------------------------------

    @staticmethod
    def _analyse(ops: np.ndarray) -> dict[str, np.ndarray]:
        nn = ops != 0  # (n, 6) edge has an operation
        exists = [np.ones(len(ops), bool), nn[:, 0], nn[:, 1] | nn[:, 2], nn[:, 3:].any(1)]
        used3 = np.ones(len(ops), bool)
        used2 = nn[:, 5]
        used1 = (nn[:, 2] & used2) | nn[:, 4]
        used = [None, used1, used2, used3]
        # reachable from the input through operations
        reach = [np.ones(len(ops), bool), nn[:, 0]]
        reach.append((nn[:, 1]) | (nn[:, 2] & reach[1]))
        reach.append(nn[:, 3] | (nn[:, 4] & reach[1]) | (nn[:, 5] & reach[2]))
        # reaches the output through operations
        to_out = [None, nn[:, 4] | (nn[:, 2] & nn[:, 5]), nn[:, 5].copy(), used3]
        live = np.stack([nn[:, k] & used[j] for k, (j, _) in enumerate(EDGES)], 1)
        on_path = np.stack([nn[:, k] & reach[i] & to_out[j] for k, (j, i) in enumerate(EDGES)], 1)
        return {
            "nn": nn,
            "exists": np.stack(exists, 1),
            "used": np.stack([used3, used1, used2, used3], 1),
            "live": live,
            "on_path": on_path,
            "connected": reach[3],
        }

    def structural(self, archs: Sequence[Arch]) -> np.ndarray:
        ops = self.ops_array(archs)
        a = self._analyse(ops)
        counts = [(ops == k).sum(1) for k in range(1, 5)]
        path = [((ops == k) & a["on_path"]).sum(1) for k in range(1, 5)]
        return np.stack([*counts, *path, a["connected"]], 1).astype(np.float64)

    def merged(self, archs: Sequence[Arch]) -> np.ndarray:
        """:meth:`reference_net_counts` of ``archs``, (n, 3)."""
        return np.stack(self.reference_net_counts(self.ops_array(archs)), 1).astype(np.float64)

    @staticmethod
    def reference_net_counts(ops: np.ndarray) -> list[np.ndarray]:
        """(n, 6) operations -> [distinct poolings, distinct zeroings, distinct ReLUs], each
        (n,), in NAS-Bench-201's own network code after common-subexpression elimination.

        There every edge runs (``none`` is ``x.mul(0.)``) and every node sums all its inputs,
        so node 2 and node 3 are always new tensors and node 1 is node 0's tensor when its one
        edge is a skip. A parameter-free operation runs once per distinct input tensor: a
        pooling (``avg_pool_3x3``), a zeroing (``none``), a ReLU (the first step of each
        convolution); convolutions have their own weights and never merge."""
        source = np.zeros((len(ops), 3), np.int64)  # tensor id of nodes 0, 1, 2 as inputs
        source[:, 1] = np.where(ops[:, 0] == 1, 0, 1)
        source[:, 2] = 2
        rows = np.arange(len(ops))
        out = []
        for selected in (ops == 4, ops == 0, (ops == 2) | (ops == 3)):
            seen = np.zeros((len(ops), 3), bool)
            for k, (_, i) in enumerate(EDGES):
                hit = selected[:, k]
                seen[rows[hit], source[hit, i]] = True
            out.append(seen.sum(1))
        return out

    # -- graph features --------------------------------------------------------------------

    @staticmethod
    def cell_counts(ops: np.ndarray) -> dict[str, np.ndarray]:
        """Per-cell counts of what the exported graph runs: live 1x1 and 3x3 convolutions,
        additions, poolings and ReLUs. The exporter merges identical computations, so there is
        one pooling per distinct source of live pooling edges and one ReLU per distinct source of
        live convolutions (zero sources share one zero tensor)."""
        a = NasBench201Featurizer._analyse(ops)
        live, exists = a["live"], a["exists"]
        conv = live & ((ops == 2) | (ops == 3))
        adds = np.zeros(len(ops))
        for j in (1, 2, 3):
            incoming = a["nn"][:, [k for k, (jj, _) in enumerate(EDGES) if jj == j]].sum(1)
            adds += np.where(a["used"][:, j] & exists[:, j], np.maximum(incoming - 1, 0), 0)
        canon = NasBench201Featurizer._tensor_ids(ops, exists)
        relu_sources = _distinct_sources(conv, canon)
        pool_sources = _distinct_sources(live & (ops == 4), canon)
        return {
            "conv1": (live & (ops == 2)).sum(1),
            "conv3": (live & (ops == 3)).sum(1),
            "pool": pool_sources,
            "add": adds,
            "relu": relu_sources,
        }

    @staticmethod
    def _tensor_ids(ops: np.ndarray, exists: np.ndarray) -> np.ndarray:
        """(n, 4) tensor id of each node's value: a node whose only operation is a skip from
        node i holds node i's tensor (the identity returns it), a node without operations
        the shared zero tensor (id 3)."""
        canon = np.zeros((len(ops), 4), np.int64)
        canon[:, 0] = 0
        for j in (1, 2, 3):
            ks = [k for k, (jj, _) in enumerate(EDGES) if jj == j]
            incoming = (ops[:, ks] != 0).sum(1)
            canon[:, j] = np.where(exists[:, j], j, 3)
            for k in ks:
                i = EDGES[k][1]
                alias = (incoming == 1) & (ops[:, k] == 1)
                src = canon[:, i] if i > 0 else np.zeros(len(ops), np.int64)
                canon[:, j] = np.where(alias, src, canon[:, j])
        return canon

    @cached_property
    def _fixed_and_stages(self) -> tuple[np.ndarray, list[tuple[int, int]]]:
        macro = self.space.config["macro"]
        c_in, hw = self.space.dataset(self.dataset).input_shape[0:2]
        acc = GraphAccumulator()
        acc.add("input_elems", c_in * hw * hw)
        stem = int(macro["stem_channels"])
        acc.conv(c_in, stem, 3, 1, (hw, hw), (hw, hw))
        stages, c_prev = [], stem
        for s, c in enumerate(macro["stage_channels"]):
            if s > 0:  # residual reduction block
                half = hw // 2
                acc.elementwise("act", c_prev * hw * hw)
                acc.conv(c_prev, c, 3, 1, (hw, hw), (half, half))
                acc.elementwise("act", c * half * half)
                acc.conv(c, c, 3, 1, (half, half), (half, half))
                acc.elementwise("pool", c_prev * half * half)
                acc.conv(c_prev, c, 1, 1, (half, half), (half, half))
                acc.elementwise("add", c * half * half)
                hw = half
            stages.append((int(c), hw))
            c_prev = int(c)
        acc.elementwise("act", c_prev * hw * hw)  # BN + ReLU before pooling
        acc.add("n_global_pool", 1)
        acc.gemm(c_prev, self.space.dataset(self.dataset).num_classes)
        return acc.values, stages

    def flops(self, archs: Sequence[Arch]) -> np.ndarray:
        """MACs of the PyTorch network, which runs every operation of the cell (also those
        whose result is unused), as NAS-Bench-201 counts FLOPs."""
        ops = self.ops_array(archs)
        fixed, stages = self._fixed_and_stages
        col = {n: i for i, n in enumerate(GRAPH_COLUMNS)}
        macs = fixed[[col[c] for c in col if c.startswith("macs_")]].sum()
        cells = int(self.space.config["macro"]["cells_per_stage"])
        n1, n3 = (ops == 2).sum(1), (ops == 3).sum(1)
        out = np.full(len(ops), float(macs))
        for c, hw in stages:
            out += cells * (n1 + 9 * n3) * c * c * hw * hw
        return out

    def graph(self, archs: Sequence[Arch]) -> np.ndarray:
        counts = self.cell_counts(self.ops_array(archs))
        fixed, stages = self._fixed_and_stages
        cells = int(self.space.config["macro"]["cells_per_stage"])
        out = np.tile(fixed, (len(archs), 1))
        col = {n: i for i, n in enumerate(GRAPH_COLUMNS)}
        for c, hw in stages:
            plane = c * hw * hw
            n1, n3 = cells * counts["conv1"], cells * counts["conv3"]
            out[:, col["macs_conv_pointwise"]] += n1 * c * plane
            out[:, col["macs_conv_dense"]] += n3 * 9 * c * plane
            out[:, col["params"]] += n1 * c * c + n3 * 9 * c * c
            out[:, col["n_conv"]] += n1 + n3
            out[:, col["conv_in_elems"]] += (n1 + n3) * plane
            out[:, col["conv_out_elems"]] += (n1 + n3) * plane
            out[:, col["n_pool"]] += cells * counts["pool"]
            out[:, col["pool_out_elems"]] += cells * counts["pool"] * plane
            out[:, col["n_add"]] += cells * counts["add"]
            out[:, col["add_elems"]] += cells * counts["add"] * plane
            out[:, col["n_act"]] += cells * counts["relu"]
            out[:, col["act_elems"]] += cells * counts["relu"] * plane
        return out


def _distinct_sources(edges: np.ndarray, canon: np.ndarray) -> np.ndarray:
    """Number of distinct source tensors of the selected edges, (n, 6) bool -> (n,).

    ``canon`` (n, 4) gives each node's tensor id: 0..2 for nodes, 3 for the zero tensor.
    """
    sources = np.zeros((len(edges), 4), bool)
    rows = np.arange(len(edges))
    for k, (_, i) in enumerate(EDGES):
        hit = edges[:, k]
        sources[rows[hit], canon[hit, i]] = True
    return sources.sum(1)
