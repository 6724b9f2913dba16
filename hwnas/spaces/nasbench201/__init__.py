"""NAS-Bench-201 cell search space (Dong & Yang, "NAS-Bench-201: Extending the Scope of
Reproducible Neural Architecture Search", ICLR 2020).

Architectures are cells of 4 nodes whose 6 edges each take one of 5 operations; the network
repeats the cell in a fixed macro skeleton (see :mod:`hwnas.spaces.nasbench201.model`).
There are 5**6 = 15,625 architectures; their official index order and their trained
accuracies come from the shipped table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import HwnasError, UnknownNameError
from hwnas.spaces.base import Arch, DatasetSpec, SearchSpace
from hwnas.tables import read_table


def _paths(edges: Sequence[tuple[int, int]], num_nodes: int) -> list[tuple[int, ...]]:
    """Every input-to-output path of the cell DAG, as tuples of edge positions."""
    out: list[tuple[int, ...]] = []

    def walk(node: int, taken: tuple[int, ...]) -> None:
        if node == num_nodes - 1:
            out.append(taken)
            return
        for k, (j, i) in enumerate(edges):
            if i == node:
                walk(j, (*taken, k))

    walk(0, ())
    return out


def _effective(ops: np.ndarray, edges, num_nodes: int) -> np.ndarray:
    """Vectorised :meth:`NasBench201Space.effective_ops` on operation indices, (n, 6) -> (n, 6)
    (index 0 is ``none``)."""
    live = ops != 0
    reach = np.zeros((len(ops), num_nodes), dtype=bool)
    reach[:, 0] = True
    for k, (j, i) in enumerate(edges):
        reach[:, j] |= live[:, k] & reach[:, i]
    useful = np.zeros_like(reach)
    useful[:, num_nodes - 1] = True
    for k, (j, i) in reversed(list(enumerate(edges))):
        useful[:, i] |= live[:, k] & useful[:, j]
    keep = np.stack([reach[:, i] & useful[:, j] for j, i in edges], axis=1)
    return np.where(keep, ops, 0)


def _function_features(eff: np.ndarray, edges) -> np.ndarray:
    """The columns of :meth:`NasBench201Space.surrogate_features` from effective operation
    indices (0 none, 1 skip, 2 conv 1x1, 3 conv 3x3, 4 pool), shape (n, 6) -> (n, 149): every
    column but the zero-cost proxy."""
    n = len(eff)
    paths = _paths(edges, 4)
    conv = (eff == 2) | (eff == 3)
    weight = np.where(eff == 3, 2, np.where(eff == 2, 1, 0))
    offset = np.array([0, 1, 4, 13])  # canonical paths by length: 1, 3, 9, 27 kinds
    canon = np.zeros((n, 40))
    per_path, depth, depth3, pooled = [], np.full(n, -1.0), np.full(n, -1.0), np.zeros(n)
    for path in paths:
        cols = list(path)
        live = np.all(eff[:, cols] != 0, axis=1)
        code, length = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
        for k in cols:
            kept = eff[:, k] >= 2  # skips drop out of the canonical path
            code = np.where(kept, code * 3 + eff[:, k] - 2, code)
            length += kept
        np.add.at(canon, (np.flatnonzero(live), (offset[length] + code)[live]), 1.0)
        convs = conv[:, cols].sum(1)
        per_path += [live, live * convs, live * weight[:, cols].sum(1)]
        depth = np.where(live, np.maximum(depth, convs), depth)
        depth3 = np.where(live, np.maximum(depth3, (eff[:, cols] == 3).sum(1)), depth3)
        pooled += live & (eff[:, cols] == 4).any(1)
    counts = [(eff == k).sum(1) for k in (1, 2, 3, 4)]
    shape = np.stack(
        [
            *per_path,
            *counts,
            eff[:, 3] == 1,
            canon[:, 0] > 0,
            (canon > 0).sum(1),
            canon.sum(1),
            depth,
            depth3,
            pooled,
        ],
        axis=1,
    ).astype(float)
    shape = (shape - shape.mean(0)) / np.where(shape.std(0) > 0, shape.std(0), 1.0)
    residual = shape[:, [16, 17]]  # skip on the input-output edge; an identity path
    paired = (residual[:, :, None] * shape[:, None, :]).reshape(n, -1)
    return np.hstack([canon, canon > 0, shape, paired]).astype(np.float32)


ZERO_COST_WEIGHT = 3.0
"""Scale of the standardised SynFlow column in ``surrogate_features`` (the path columns are
counts and unit-variance columns; at 3 the one proxy column weighs like a few of them under
``frontier``'s one prior precision). Measured at 3 (experiments/zero_cost_feature.py)."""


PARSED_KEPT = 1 << 16
"""How many parsed arch strings a :class:`NasBench201Space` keeps (the space has 15,625 cells;
the rest is room for the same cells written with other spacing)."""


class ArchStringError(HwnasError):
    """A malformed NAS-Bench-201 arch string."""


class NasBench201Space(SearchSpace):
    """The NAS-Bench-201 space.

    Choice dimensions are the 6 edges, named ``"j<-i"`` (from node i into node j), in the order
    of the arch string: 1<-0, 2<-0, 2<-1, 3<-0, 3<-1, 3<-2. Each takes one of
    ``none, skip_connect, nor_conv_1x1, nor_conv_3x3, avg_pool_3x3``.

    Args:
        config: the parsed ``space.yaml``.
        root: the folder holding ``space.yaml`` and its tables.
    """

    name = "nasbench201"

    def __init__(self, config: dict[str, Any], root: Path):
        self.config = config
        self.root = root
        self.operations: tuple[str, ...] = tuple(config["operations"])
        self.num_nodes: int = int(config["nodes"])
        self.edges: tuple[tuple[int, int], ...] = tuple(
            (j, i) for j in range(1, self.num_nodes) for i in range(j)
        )
        self._datasets = {
            name: DatasetSpec(name, int(d["classes"]), tuple(d["input_shape"]))
            for name, d in config["datasets"].items()
        }
        # valid arch strings already parsed: a search encodes every cell of the space for its
        # candidate pool, and reads each cell's operations many times over
        self._parsed: dict[str, tuple[str, ...]] = {}

    # -- SearchSpace ------------------------------------------------------------------------

    def parse(self, text: str) -> Arch:
        """Parse ``|op~0|+|op~0|op~1|+|op~0|op~1|op~2|`` into an :class:`Arch`.

        Raises:
            ArchStringError: the message names the bad token and what was expected.
        """
        return self.from_ops(self._parse_ops(text))

    def _parse_ops(self, text: str) -> tuple[str, ...]:
        if not isinstance(text, str):
            raise ArchStringError(f"arch must be a string, got {type(text).__name__}")
        ops = self._parsed.get(text)
        if ops is None:
            ops = self._parse_new(text)
            if len(self._parsed) < PARSED_KEPT:  # a bound on what strings handed in can fill
                self._parsed[text] = ops
        return ops

    def _parse_new(self, text: str) -> tuple[str, ...]:
        s = text.strip()
        groups = s.split("+")
        if len(groups) != self.num_nodes - 1:
            raise ArchStringError(
                f"malformed NAS-Bench-201 arch string '{text}': expected "
                f"{self.num_nodes - 1} node groups joined by '+', found {len(groups)}"
            )
        ops: list[str] = []
        for j, group in enumerate(groups, start=1):
            if not (group.startswith("|") and group.endswith("|")) or len(group) < 2:
                raise ArchStringError(
                    f"malformed NAS-Bench-201 arch string '{text}': node group '{group}' "
                    "must start and end with '|'"
                )
            tokens = group[1:-1].split("|")
            if len(tokens) != j:
                raise ArchStringError(
                    f"malformed NAS-Bench-201 arch string '{text}': node {j} group '{group}' "
                    f"needs {j} 'op~input' tokens, found {len(tokens)}"
                )
            for i, token in enumerate(tokens):
                op, sep, src = token.partition("~")
                if not sep or src != str(i):
                    raise ArchStringError(
                        f"malformed NAS-Bench-201 arch string '{text}': bad token '{token}' "
                        f"(expected '<operation>~{i}' for the edge {i}->{j})"
                    )
                if op not in self.operations:
                    raise ArchStringError(
                        f"malformed NAS-Bench-201 arch string '{text}': unknown operation "
                        f"'{op}' in token '{token}'; operations: {', '.join(self.operations)}"
                    )
                ops.append(op)
        return tuple(ops)

    def choices(self) -> dict[str, tuple[str, ...]]:
        return {f"{j}<-{i}": self.operations for j, i in self.edges}

    def from_choices(self, values: dict[str, str]) -> Arch:
        return self.from_ops(tuple(values[f"{j}<-{i}"] for j, i in self.edges))

    def to_choices(self, arch: Arch) -> dict[str, str]:
        return {f"{j}<-{i}": op for (j, i), op in zip(self.edges, self.ops(arch))}

    def dataset(self, name: str) -> DatasetSpec:
        try:
            return self._datasets[name]
        except KeyError:
            raise UnknownNameError("dataset", name, list(self._datasets)) from None

    def datasets(self) -> list[str]:
        """Dataset names the space has accuracies for."""
        return list(self._datasets)

    def build(self, arch: Arch, dataset: str, num_classes: int | None = None):
        from hwnas.spaces.nasbench201.model import NasBench201Network

        macro = self.config["macro"]
        spec = self.dataset(dataset)
        return NasBench201Network(
            self.ops(arch),
            num_classes=num_classes or spec.num_classes,
            stem_channels=int(macro["stem_channels"]),
            stage_channels=tuple(macro["stage_channels"]),
            cells_per_stage=int(macro["cells_per_stage"]),
        ).eval()

    # -- NAS-Bench-201 specifics ------------------------------------------------------------

    def from_ops(self, ops: Sequence[str]) -> Arch:
        """The arch whose edges (in arch-string order) take ``ops``."""
        if len(ops) != len(self.edges) or any(op not in self.operations for op in ops):
            raise ArchStringError(f"need {len(self.edges)} operations from {self.operations}")
        groups, k = [], 0
        for j in range(1, self.num_nodes):
            groups.append("|" + "|".join(f"{ops[k + i]}~{i}" for i in range(j)) + "|")
            k += j
        return Arch(self.name, "+".join(groups))

    def ops(self, arch: Arch) -> tuple[str, ...]:
        """The 6 operations of ``arch`` in arch-string order."""
        self._check(arch)
        return self._parse_ops(arch.text)

    def effective_ops(self, arch: Arch) -> tuple[str, ...]:
        """The operations that can change the network's output; the others become ``none``.

        An edge i->j matters only if node i is reachable from the input and node j reaches the
        output through non-``none`` edges; an operation on any other edge sees an all-zero input
        (and adds at most a constant) or feeds a node whose value never reaches the output.
        Architectures with equal effective operations compute the same function family, so
        their trained accuracies differ only by training noise.
        """
        ops = self.ops(arch)
        reach, useful = {0}, {self.num_nodes - 1}
        for (j, i), op in zip(self.edges, ops):
            if op != "none" and i in reach:
                reach.add(j)
        for (j, i), op in reversed(list(zip(self.edges, ops))):
            if op != "none" and j in useful:
                useful.add(i)
        return tuple(
            op if (i in reach and j in useful) else "none" for (j, i), op in zip(self.edges, ops)
        )

    def unique_str(self, arch: Arch) -> str:
        """NAS-Bench-201's own isomorphism key of ``arch``: ``Structure.to_unique_str(
        consider_zero=True)`` of its API (Dong & Yang, ICLR 2020), which groups the 15,625
        cells into the 6,466 "unique" ones the paper counts.

        Each node is the sorted ``+``-sum of its inputs' terms: ``#`` for a ``none`` edge or a
        zero input, the input's own term for ``skip_connect``, ``(term)@op`` otherwise; the key
        is the output node's sum. Cells with equal keys compute the same function, but not
        with the same operations: one may run convolutions whose results are discarded. A
        table that measures one cell per key and copies its value to the others
        (HW-NAS-Bench-360) therefore holds one measurement per key, not one per cell.
        """
        ops = self.ops(arch)
        nodes, k = ["0"], 0
        for j in range(1, self.num_nodes):
            terms = []
            for i in range(j):
                op, src = ops[k], nodes[i]
                k += 1
                if op == "none" or src == "#":
                    terms.append("#")
                elif op == "skip_connect":
                    terms.append(src)
                else:
                    terms.append(f"({src})@{op}")
            nodes.append("+".join(sorted(terms)))
        return nodes[-1]

    def surrogate_features(self, archs: Sequence[Arch]) -> np.ndarray:
        """Features of the function each cell computes, for accuracy surrogates, shape
        (n, 150), float32.

        A cell's output is the sum of its input-to-output paths (4 of them), each a chain of
        its edges' operations, so cells with the same live paths compute the same function
        family even when their edges differ (a ``skip`` chain is an identity path wherever it
        lies). Columns: for each canonical path (its non-``skip`` operations in order, 1 + 3 +
        9 + 27 = 40 kinds) how many live paths are that path (40) and whether any is (40); for
        each of the 4 paths whether it is live, its convolutions and its convolution weight
        (3x3 = 2, 1x1 = 1) (12); the count of each effective operation kind (4); a skip on the
        input-to-output edge (1); and whether the cell has an identity path, how many distinct
        live paths, how many operations on live paths, the most convolutions and 3x3
        convolutions on one live path, and how many live paths pool (6); then the products of
        two residual columns (the input-to-output skip, an identity path) with each of those 23
        scaled columns (46). Columns that are not counts of paths are scaled to unit variance
        over the whole space. The last column is a zero-cost proxy, SynFlow's logarithm
        (:mod:`hwnas.spaces.zero_cost`; read from the space's ``zero_cost_table``), averaged
        over the cells with the same paths, standardised and weighted by
        :data:`ZERO_COST_WEIGHT`: it carries what the paths do not (how the convolutions'
        widths and the skips compound through the whole network). With it, ``frontier``'s
        first 100 queries reach 98.80% of the true front's hypervolume on HELP's six unseen
        devices against 98.66% without, and 98.98% against 98.64% on seven devices never
        used to tune it (medians of 10 and 5 seeds, docs/benchmarks.md).

        Raises:
            HwnasError: the zero-cost table does not hold one row per index.
        """
        table = self._function_features
        rows = [self.index(a) for a in archs]
        return table[rows]

    @cached_property
    def _function_features(self) -> np.ndarray:
        code = {op: i for i, op in enumerate(self.operations)}
        tokens = re.findall(r"([^|~+]+)~", "+".join(self._table["arch"]))  # table strings are valid
        ops = np.array([code[t] for t in tokens]).reshape(len(self), len(self.edges))
        paths = _function_features(_effective(ops, self.edges, self.num_nodes), self.edges)
        return np.hstack([paths, self._zero_cost_column(paths)[:, None]]).astype(np.float32)

    def synflow_scores(self) -> np.ndarray:
        """SynFlow of every cell at initialisation (:mod:`hwnas.spaces.zero_cost`), from the
        space's ``zero_cost_table``, shape (15625,), in index order; 0 for the cells whose
        output ignores the input.

        Raises:
            HwnasError: the table does not hold one row per index, in order.
        """
        name = self.config["zero_cost_table"]
        table = read_table(self.root / name)
        if not np.array_equal(table["index"], np.arange(len(self))):
            raise HwnasError(f"{name}: need one row per index 0..{len(self) - 1}, in order")
        return np.asarray(table["synflow"], dtype=float)

    def _zero_cost_column(self, paths: np.ndarray) -> np.ndarray:
        """SynFlow's log (:meth:`synflow_scores`), averaged over the cells with the same path
        columns (they compute the same function; their scores differ only through dead edges'
        parameters, sd 0.02 of the log's 20), standardised over the space, times
        :data:`ZERO_COST_WEIGHT`; cells scored 0 (their output ignores the input) take the
        lowest score, shape (15625,)."""
        score = self.synflow_scores()
        positive = score > 0
        log = np.log(np.where(positive, score, 1.0))
        log = np.where(positive, log, log[positive].min())
        _, cls = np.unique(paths, axis=0, return_inverse=True)
        cls = cls.ravel()
        log = (np.bincount(cls, weights=log) / np.bincount(cls))[cls]
        return ZERO_COST_WEIGHT * (log - log.mean()) / log.std()

    def _check(self, arch: Arch) -> None:
        if arch.space != self.name:
            raise HwnasError(f"architecture of space '{arch.space}' given to {self.name}")

    @cached_property
    def _table(self) -> dict[str, np.ndarray]:
        return read_table(self.root / self.config["accuracy_table"])

    @cached_property
    def _index(self) -> dict[str, int]:
        return {a: int(i) for i, a in zip(self._table["index"], self._table["arch"])}

    def __len__(self) -> int:
        return len(self._table["arch"])

    def index(self, arch: Arch) -> int:
        """Official NAS-Bench-201 index (0..15,624) of ``arch``."""
        self._check(arch)
        return self._index[arch.text]

    def arch_at(self, index: int) -> Arch:
        """The architecture with official index ``index``.

        Raises:
            HwnasError: index out of range.
        """
        if not 0 <= index < len(self):
            raise HwnasError(f"NAS-Bench-201 index {index} out of range 0..{len(self) - 1}")
        return Arch(self.name, str(self._table["arch"][index]))

    def all_archs(self) -> list[Arch]:
        """All 15,625 architectures in index order."""
        return list(self._all_archs)

    @cached_property
    def _all_archs(self) -> tuple[Arch, ...]:
        return tuple(Arch(self.name, str(a)) for a in self._table["arch"])

    def table_accuracy(self, dataset: str, epochs: int = 200) -> np.ndarray:
        """Trained accuracy (%) of every architecture, shape (15625,), in index order.

        ``epochs=200`` gives the test accuracy after the full 200-epoch schedule (mean over
        seeds); ``epochs=12`` the 12-epoch validation accuracy (low fidelity).

        Raises:
            UnknownNameError: unknown dataset.
            HwnasError: epochs not 200 or 12.
        """
        self.dataset(dataset)
        key = {200: "accuracy", 12: "accuracy_12ep"}.get(epochs)
        if key is None:
            raise HwnasError(f"NAS-Bench-201 accuracies exist for 200 and 12 epochs, not {epochs}")
        return self._table[self.config["datasets"][dataset][key]]

    def accuracy_source(self, dataset: str, epochs: int = 200) -> str:
        """Where :meth:`table_accuracy` comes from, as a short label."""
        column = self.config["datasets"][dataset]["accuracy" if epochs == 200 else "accuracy_12ep"]
        return f"nasbench201-table:{column}"
