"""The hardware cost term: expected device cost under the architecture distribution.

A :class:`CostModel` answers two questions: the cost of one architecture (:meth:`cost`, ms or
mJ or MFLOPs) and the expected cost under independent categorical distributions over the
decisions (:meth:`expected`, a torch scalar differentiable w.r.t. the probabilities and so
w.r.t. the architecture parameters; FBNet, Wu et al. CVPR 2019; ProxylessNAS, Cai et al. ICLR
2019).

The implementation here is a *multilinear lookup table*: cost = bias + sum over terms of
``w_t * prod_f g_f(choice of decision d_f)``. Because decisions are independent under the
distribution, the expectation is the same polynomial evaluated at per-decision expectations,
exact and cheap. With one factor per term this is the additive per-choice table (FBNet's
latency LUT); the OFA space adds a resolution-squared factor and the stage-depth factor to each
block's term (latency of a block scales with the pixels it processes, and only counts if the
stage is deep enough to use it). Three ways to fill it:

- :func:`fit_table_lut`: least squares on a recorded device's table (every architecture the
  table has); the fit's held-out R^2, Spearman rho and MAPE are kept in ``fit``.
- :func:`measured_block_lut`: FBNet-paper style, each candidate block timed in its layer context
  (input shape) on a live device through the :class:`hwnas.measure.Profiler` and its store,
  plus a scale and offset fitted on a few whole subnets measured the same way.
- :func:`flops_lut`: FLOPs (multiply-accumulates) of sampled subnets, the fallback.

The meta-learned predictors (``hwnas.predictors``) can stand behind the same interface.

A fitted table keeps what it was fitted on as its ``truth`` (a recorded device's table, exact
for the architectures it has; a calibrated predictor): target-mode derivation
(:func:`constrained_choice`) judges candidates by it and trusts the table's own value only
within its measured error. The hardware term (:class:`HardwareLoss`) combines with the task
loss in one of the forms of :data:`HW_FORMS`: additive, FBNet's or ProxylessNAS's
multiplicative.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwnas.engine.costs import CostModel, CostRequest, make_cost_model, table_costs
from hwnas.errors import HwnasError
from hwnas.spaces import CostTermsSpace, IndexedSpace, ability
from hwnas.spaces.base import Arch, SearchSpace

Factor = tuple[int, np.ndarray]
"""(decision index, value of the factor for each candidate of that decision)."""
Term = tuple[Factor, ...]


@dataclass
class MultilinearLUT(CostModel):
    """bias + sum_t weights[t] * prod over the term's factors of g(choice).

    Args:
        space: the search space.
        terms: the terms (see module docstring).
        weights: one weight per term.
        bias: constant part.
        metric: what is predicted.
        source: where the weights come from.
    """

    lookup_table = True  # the ability (hwnas.engine.costs.CostModel.lookup_table)

    space: SearchSpace
    terms: list[Term]
    weights: np.ndarray
    bias: float
    metric: str = "latency_ms"
    source: str = ""
    fit: dict[str, Any] = field(default_factory=dict)
    truth: CostModel | None = None
    """What the table approximates, where it has values (a recorded device's table: exact; a
    calibrated predictor): target-mode derivation judges candidates by it (NaN: unknown)."""
    truth_covers: str = "all"
    """Which architectures :attr:`truth` has values for: ``all``, or ``index`` (only the
    space's indexed ones, as a recorded table)."""
    truth_judges: bool = True
    """Whether :meth:`judged` and :meth:`enumeration` consult :attr:`truth` candidate by
    candidate. False for a truth that is slow to query (its ``lut_samples`` set: the
    kernel-level predictor builds, exports and reads each deployed network), which a
    derivation would ask for thousands of candidates (minutes and gigabytes for mobilenetv4
    on a live CPU); those are judged by the table and its margin, and the derived network is
    measured anyway. Its values are predictions too, never exact."""
    floor: float = 0.0
    """No cost is predicted below this (ms or mJ): a least-squares table extrapolates below
    zero for architectures cheaper than those it was fitted on (NAS-Bench-201's all-``none``
    cell on the Pixel 3: -0.9 ms), and a hardware term would reward them without end.
    :func:`fit_lut` and a calibrated block table set it to half the least value fitted."""

    def __post_init__(self) -> None:
        dims = list(self.space.choices())
        self.dims = dims
        self.sizes = [len(v) for v in self.space.choices().values()]
        # per decision: a (K_d, m_d) matrix of the factor vectors that use it
        cols: list[list[np.ndarray]] = [[] for _ in dims]
        index: list[list[int]] = []
        for term in self.terms:
            row = []
            for d, g in term:
                row.append((d, len(cols[d])))
                cols[d].append(np.asarray(g, dtype=np.float64))
            index.append(row)  # type: ignore[arg-type]
        self._mats = [
            np.stack(c, axis=1) if c else np.zeros((self.sizes[d], 0)) for d, c in enumerate(cols)
        ]
        offsets = np.cumsum([0] + [m.shape[1] for m in self._mats])
        width = max(1, max((len(t) for t in self.terms), default=1))
        one = int(offsets[-1])  # position of a constant 1 after all factor values
        self._gather = np.full((len(self.terms), width), one, dtype=np.int64)
        for t, row in enumerate(index):
            for f, (d, c) in enumerate(row):
                self._gather[t, f] = offsets[d] + c
        self._torch_cache: dict[Any, Any] = {}

    # -- evaluation -----------------------------------------------------------------------------

    def features(self, indices: np.ndarray, chunk: int = 1024) -> np.ndarray:
        """Term values of architectures given as candidate indices, (N, D) -> (N, T)
        (computed ``chunk`` rows at a time to bound memory)."""
        indices = np.atleast_2d(indices)
        out = np.empty((len(indices), len(self.terms)))
        for start in range(0, len(indices), chunk):
            rows = indices[start : start + chunk]
            vals = [self._mats[d][rows[:, d]] for d in range(len(self.dims))]
            flat = np.concatenate([*vals, np.ones((len(rows), 1))], axis=1)
            out[start : start + chunk] = np.prod(flat[:, self._gather], axis=2)
        return out

    def cost_indices(self, indices: np.ndarray) -> np.ndarray:
        """Cost of each row of candidate indices (N, D) -> (N,), at least :attr:`floor`."""
        return np.maximum(self.bias + self.features(indices) @ self.weights, self.floor)

    def indices(self, archs: Sequence[Arch]) -> np.ndarray:
        """Candidate index of every decision of each architecture, shape (len(archs), D)."""
        rows = getattr(self, "_rows", None)
        if rows is not None and len(rows[0]) == len(archs) and list(rows[0]) == list(archs):
            return rows[1]
        opts = list(self.space.choices().values())
        rows = []
        for arch in archs:
            values = self.space.to_choices(arch)
            rows.append([opts[i].index(values[d]) for i, d in enumerate(self.dims)])
        return np.array(rows, dtype=np.int64).reshape(len(rows), len(self.dims))

    def predict(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        return self.cost_indices(self.indices(archs)), np.zeros(len(archs))

    def cost(self, arch: Arch) -> float:
        return float(self.cost_indices(self.indices([arch]))[0])

    def expected(self, probs: Sequence[Any]) -> Any:
        import torch

        device, dtype = probs[0].device, probs[0].dtype
        key = (device, dtype)
        if key not in self._torch_cache:
            self._torch_cache[key] = (
                [torch.as_tensor(m, dtype=dtype, device=device) for m in self._mats],
                torch.as_tensor(self._gather, device=device),
                torch.as_tensor(self.weights, dtype=dtype, device=device),
            )
        mats, gather, weights = self._torch_cache[key]
        parts = [p @ m for p, m in zip(probs, mats)]
        flat = torch.cat([*parts, torch.ones(1, dtype=dtype, device=device)])
        return (self.bias + (flat[gather].prod(dim=1) * weights).sum()).clamp(min=self.floor)

    def describe(self) -> dict[str, Any]:
        out = {"metric": self.metric, "source": self.source, "terms": len(self.terms), **self.fit}
        if self.truth is not None:
            out["truth"] = self.truth.source
        return out

    # -- judging candidates (target-mode derivation) ---------------------------------------------

    @property
    def margin(self) -> float:
        """Relative error of the table where :attr:`truth` has no value: the 90th percentile of
        ``|LUT - value| / value`` on the fit's held-out pairs (else the calibration MAPE of a
        measured table, else 0)."""
        if "rel_err_p90" in self.fit:
            return float(self.fit["rel_err_p90"])
        return float(self.fit.get("calibration_mape_pct", 0.0)) / 100.0

    def archs_of(self, indices: np.ndarray) -> list[Arch]:
        """Architectures of candidate-index rows (N, D)."""
        opts = list(self.space.choices().values())
        out = []
        for row in np.atleast_2d(indices):
            values = {d: opts[j][int(k)] for j, (d, k) in enumerate(zip(self.dims, row))}
            out.append(self.space.from_choices(values))
        return out

    def judged(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cost of candidate-index rows (N, D) -> ((N,) cost, (N,) bool exact): the value of
        :attr:`truth` where it has one (exact), else the table's."""
        indices = np.atleast_2d(indices)
        cost = self.cost_indices(indices)
        exact = np.zeros(len(cost), dtype=bool)
        if self.truth is None or not self.truth_judges or not len(cost):
            return cost, exact
        if self.truth_covers == "index":  # look the rows up among the indexed ones
            self.known_indices()
            true = np.array([self._known_cost.get(tuple(r), np.nan) for r in indices.tolist()])
        else:
            true = np.asarray(self.truth.predict(self.archs_of(indices))[0], dtype=np.float64)
        exact = np.isfinite(true)
        return np.where(exact, true, cost), exact

    def enumeration(self, limit: int = 200_000) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(indices (N, D), cost (N,), exact (N,)) of every architecture of the space when its
        index lists the whole space and holds at most ``limit`` architectures (NAS-Bench-201's
        15,625), else None; computed once."""
        if not hasattr(self, "_enumerated"):
            self._enumerated = None
            indexed = ability(self.space, IndexedSpace)
            total = int(np.prod(self.sizes, dtype=np.float64)) if self.sizes else 0
            if indexed is not None and len(indexed) == total and total <= limit:
                archs = indexed.all_archs()
                idx = self.indices(archs)
                cost, exact = self.cost_indices(idx), np.zeros(len(archs), dtype=bool)
                if self.truth is not None and self.truth_judges:
                    true = np.asarray(self.truth.predict(archs)[0], dtype=np.float64)
                    exact = np.isfinite(true)
                    cost = np.where(exact, true, cost)
                self._enumerated = (idx, cost, exact)
        return self._enumerated

    def min_cost(self) -> float:
        """The cheapest architecture's cost under the table: exact for an enumerable space or an
        additive table, else the best of two coordinate descents."""
        enum = self.enumeration()
        if enum is not None:
            return float(self.cost_indices(enum[0]).min())
        if not self.sizes:
            return max(self.bias, self.floor)
        zero = [np.zeros(n) for n in self.sizes]
        starts = [np.zeros(len(self.sizes), dtype=int), np.array(self.sizes) - 1]
        ends = np.stack([_coordinate_ascent(zero, self, s, 1.0, 1.0) for s in starts])
        return float(self.cost_indices(ends).min())

    def cost_bounds(self, joint_limit: int = 4096) -> tuple[float, float]:
        """A lower and an upper bound of the table's cost over every architecture of the space,
        without listing them (OFA's 1e19, FBNet's 9.8e20): exact for an additive table (each
        decision's cheapest and dearest choice summed), else the terms grouped by the
        decisions they read, each group's extremes over its decisions' joint choices, summed
        for each choice of the decision most groups share (OFA's resolution). Both at least
        :attr:`floor`, as every cost is."""
        groups: dict[tuple[int, ...], list[int]] = {}
        for t, term in enumerate(self.terms):
            groups.setdefault(tuple(sorted({d for d, _ in term})), []).append(t)
        keys = sorted(groups, key=len, reverse=True)
        merged: dict[tuple[int, ...], list[int]] = {}
        for key in keys:  # a group within a larger one's decisions joins it (tighter)
            home = next((k for k in merged if set(key) <= set(k)), key)
            merged.setdefault(home, []).extend(groups[key])
        shared: dict[int, int] = {}
        for key in merged:
            for d in key:
                shared[d] = shared.get(d, 0) + 1
        pivot = max(shared, key=lambda d: shared[d], default=None)
        if pivot is not None and shared[pivot] < 2:
            pivot = None
        lows, highs = [], []
        for c in range(self.sizes[pivot]) if pivot is not None else [None]:
            lo = hi = self.bias
            for key, ts in merged.items():
                a, b = self._group_extremes(key, ts, pivot, c, joint_limit)
                lo, hi = lo + a, hi + b
            lows.append(lo)
            highs.append(hi)
        return max(min(lows), self.floor), max(max(highs), self.floor)

    def _group_extremes(
        self, key: tuple[int, ...], ts: list[int], pivot: int | None, c: int | None, limit: int
    ) -> tuple[float, float]:
        """(least, largest) of the sum of terms ``ts`` (reading decisions ``key``) over their
        joint choices, ``pivot`` fixed at ``c``; each term's own extremes summed where the
        joint choices are more than ``limit``."""
        dims = [d for d in key if d != pivot]
        fixed = {pivot: np.array([c])} if pivot in key else {}
        count = int(np.prod([self.sizes[d] for d in dims], dtype=np.float64))
        if count <= limit:
            grid = np.indices([self.sizes[d] for d in dims]).reshape(len(dims), -1)
            pick = {d: grid[i] for i, d in enumerate(dims)} | fixed
            total = np.zeros(grid.shape[1] if dims else 1)
            for t in ts:
                value = np.full(total.shape, float(self.weights[t]))
                for d, g in self.terms[t]:
                    value = value * np.asarray(g, dtype=np.float64)[pick[d]]
                total += value
            return float(total.min()), float(total.max())
        lo = hi = 0.0
        for t in ts:  # a product is extreme where each factor is at an end of its range
            ends = [
                (float(g[c]),) if d == pivot else (float(np.min(g)), float(np.max(g)))
                for d, g in self.terms[t]
            ]
            corners = [float(self.weights[t]) * float(np.prod(p)) for p in _product(ends)]
            lo, hi = lo + min(corners), hi + max(corners)
        return lo, hi

    def known_indices(self) -> np.ndarray:
        """Candidate-index rows (N, D) of the architectures :attr:`truth` has values for, when it
        is a table over the space's index (FBNet's and OFA's 5,000 sampled architectures), else
        an empty (0, D) array; computed once."""
        if not hasattr(self, "_known"):
            self._known = np.zeros((0, len(self.dims)), dtype=np.int64)
            self._known_cost: dict[tuple[int, ...], float] = {}
            indexed = ability(self.space, IndexedSpace)
            if (
                self.truth is not None
                and self.truth_judges
                and indexed is not None
                and len(indexed) <= 200_000
            ):
                archs = indexed.all_archs()
                true = np.asarray(self.truth.predict(archs)[0], dtype=np.float64)
                ok = np.isfinite(true)
                if ok.any():
                    self._known = self.indices([a for a, k in zip(archs, ok) if k])
                    self._known_cost = dict(zip(map(tuple, self._known.tolist()), true[ok]))
        return self._known


def _product(ends: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """Every combination of one value from each of ``ends`` (itertools.product, listed)."""
    import itertools

    return list(itertools.product(*ends))


# -- term structures ------------------------------------------------------------------------


def additive_terms(space: SearchSpace) -> list[Term]:
    """One indicator term per (decision, candidate): the additive per-choice table."""
    terms: list[Term] = []
    for d, opts in enumerate(space.choices().values()):
        for c in range(len(opts)):
            g = np.zeros(len(opts))
            g[c] = 1.0
            terms.append(((d, g),))
    return terms


def pairwise_terms(space: SearchSpace) -> list[Term]:
    """One term per pair of decisions and pair of candidates, 1[d1=c1] * 1[d2=c2] (exact in
    expectation too: different decisions are independent)."""
    opts = list(space.choices().values())
    terms: list[Term] = []
    for d1 in range(len(opts)):
        for d2 in range(d1 + 1, len(opts)):
            for c1 in range(len(opts[d1])):
                for c2 in range(len(opts[d2])):
                    terms.append(((d1, np.eye(len(opts[d1]))[c1]), (d2, np.eye(len(opts[d2]))[c2])))
    return terms


def lut_terms(space: SearchSpace, pairs: int = 0) -> list[Term]:
    """The term structure used for ``space``: its own where it has one
    (:class:`hwnas.spaces.CostTermsSpace`: OFA's :func:`hwnas.spaces.ofa.terms.ofa_terms`, a
    declared space's depth- and resolution-aware indicators, :mod:`hwnas.spaces.declared.terms`,
    a module space's depth-aware ones); else additive, plus the
    pairwise terms when ``pairs`` (the number of measured architectures to fit on) is at least
    20 per term (NAS-Bench-201's full tables: latency on phones depends on which edges meet)."""
    own = ability(space, CostTermsSpace)
    if own is not None:  # OFA's, declared spaces', module spaces' own structure
        return own.lut_terms()
    terms = additive_terms(space)
    pairwise = pairwise_terms(space) if len(space.choices()) <= 8 else []
    if pairwise and pairs >= 20 * (len(terms) + len(pairwise)):
        terms += pairwise
    return terms


# -- fitting --------------------------------------------------------------------------------


FLOOR_SHARE = 0.5
"""A fitted table predicts no cost below this share of the least value it was fitted on."""

BLOCK_CALIBRATION = 8
"""Whole subnets :func:`measured_block_lut` measures to fit its scale and bias (and, each left
out in turn, its margin); 3 before 2026-12-06, when the margin was their in-sample error."""


def fit_lut(
    space: SearchSpace,
    archs: Sequence[Arch],
    values: np.ndarray,
    metric: str,
    source: str,
    holdout: float = 0.2,
    seed: int = 0,
    ridge: float = 1e-6,
) -> MultilinearLUT:
    """Least-squares fit of :func:`lut_terms` on (architecture, value) pairs.

    The fit statistics (R^2, Spearman rho, MAPE in %, "±10% accuracy") are measured on a random
    ``holdout`` share of the pairs with a model fitted on the rest; the returned model is then
    refitted on all pairs.

    Raises:
        HwnasError: fewer than 3 pairs (unless they are every architecture of a space of 1 or
            2) or non-finite values.
    """
    values = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(values) & (values > 0)
    archs = [a for a, k in zip(archs, ok) if k]
    values = values[ok]
    if len(values) < 3 and len({a.text for a in archs}) < space.num_architectures():
        raise HwnasError(f"need at least 3 measured architectures to fit a cost model for {metric}")
    terms = lut_terms(space, pairs=len(values))
    lut = MultilinearLUT(space, terms, np.zeros(len(terms)), 0.0, metric, source)
    opts = list(space.choices().values())
    dims = list(space.choices())
    idx = np.array(
        [[opts[i].index(c[d]) for i, d in enumerate(dims)] for c in map(space.to_choices, archs)]
    )
    lut._rows = (archs, idx)  # reused when the same architectures are judged again
    phi = np.concatenate([lut.features(idx), np.ones((len(idx), 1))], axis=1)

    def solve(rows: np.ndarray) -> np.ndarray:
        a = phi[rows]
        reg = ridge * np.eye(a.shape[1]) * max(1.0, float(np.mean(a * a)))
        return np.linalg.solve(a.T @ a + reg, a.T @ values[rows])

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(values))
    from scipy.stats import spearmanr

    n_test = int(len(values) * holdout)
    fit: dict[str, Any] = {"pairs": int(len(values))}
    if n_test >= 3:
        coef = solve(order[n_test:])
        pred, true = phi[order[:n_test]] @ coef, values[order[:n_test]]
        fit.update(
            holdout_pairs=n_test,
            r2=float(1 - ((pred - true) ** 2).sum() / ((true - true.mean()) ** 2).sum()),
            spearman_rho=float(spearmanr(pred, true)[0]),
            mape_pct=float(np.mean(np.abs(pred - true) / true) * 100),
            within_10pct=float(np.mean(np.abs(pred - true) <= 0.1 * true)),
            rel_err_p90=float(np.quantile(np.abs(pred - true) / true, 0.9)),
        )
    coef = solve(np.arange(len(values)))
    lut.weights, lut.bias, lut.fit = coef[:-1], float(coef[-1]), fit
    lut.floor = FLOOR_SHARE * float(values.min())
    return lut


def fit_table_lut(space: SearchSpace, device: Any, metric: str = "latency_ms") -> MultilinearLUT:
    """Fit the lookup table on every architecture of a recorded device's table.

    Raises:
        HwnasError: the device has no table for the space and metric, or the space cannot
            list its architectures.
    """
    column = device.table(space.name, metric)
    indexed = ability(space, IndexedSpace)
    if column is None or indexed is None:
        raise HwnasError(
            f"device '{device.name}' has no recorded {metric} for space '{space.name}'"
        )
    archs = indexed.all_archs()
    source = device.table_source(space.name, metric)
    lut = fit_lut(space, archs, np.asarray(column, dtype=np.float64), metric, f"lut-fit:{source}")
    lut.truth, lut.truth_covers = table_costs(space, device, metric), "index"
    return lut


def flops_lut(supernet: Any, samples: int = 48, seed: int = 0) -> MultilinearLUT:
    """Fallback: the lookup table fitted on MFLOPs of ``samples`` random subnets of the
    supernet's size (multiply-accumulates of conv and linear layers, batch 1)."""
    from hwnas.export import count_params_flops

    space = supernet.space
    archs = space.sample(np.random.default_rng(seed), samples)
    values = []
    for a in archs:
        _, macs = count_params_flops(supernet.extract(a), (1, *supernet.input_shape(a)))
        values.append(macs / 1e6)
    return fit_lut(space, archs, np.array(values), "mflops", "flops:supernet-subnets")


def subnet_workload(supernet: Any, arch: Arch, model: Any = None):
    """The :class:`~hwnas.devices.Workload` of the extracted subnet of ``arch`` (batch 1) at the
    supernet's size; its hash depends on (space, arch, supernet config, input shape)."""
    from hwnas.devices.base import Workload
    from hwnas.export import content_hash, export_onnx

    shape = (1, *supernet.input_shape(arch))

    def factory() -> bytes:
        net = model if model is not None else supernet.extract(arch)
        return export_onnx(net, shape)

    key = content_hash(
        "supernet-subnet",
        supernet.space.identity,
        arch.text,
        json.dumps(supernet.config, sort_keys=True),
        str(supernet.num_classes),
        "x".join(map(str, shape)),
    )
    return Workload(key, arch.text, shape, arch=arch, onnx_factory=factory)


def measured_block_lut(
    supernet: Any,
    profiler: Any,
    metric: str = "latency_ms",
    calibration: int = BLOCK_CALIBRATION,
    seed: int = 0,
    on_measured: Callable[[str], None] | None = None,
) -> MultilinearLUT:
    """Per-block lookup table measured on a live device (FBNet, Wu et al. CVPR 2019).

    Each candidate module of each mixed operation is exported alone at its input shape (batch
    1) and measured through ``profiler`` (so the store keeps it and identical blocks are timed
    once); a table entry is the sum over the places the decision acts on. A scale and a bias
    (>= 0) are then fitted on ``calibration`` whole subnets measured the same way
    (:func:`block_calibration`), which absorbs the stem, head and per-call overhead that a sum
    of blocks misses; each subnet predicted by the fit on the others gives the table's
    :attr:`MultilinearLUT.margin` (``rel_err_p90``, from 4 subnets up).

    Raises:
        HwnasError: the supernet has no mixed operations (use :func:`fit_lut` on measured
            subnets instead).
    """
    import copy

    import torch

    from hwnas.devices.base import Workload
    from hwnas.export import content_hash, export_onnx

    space = supernet.space
    mixed = supernet.mixed_choices()
    if not mixed:
        raise HwnasError(f"the {space.name} supernet has no per-block mixed operations to time")
    sizes = supernet.sizes
    was_training = supernet.training
    supernet.eval()
    with torch.no_grad():  # record every mixed operation's input shape
        arch = space.sample(np.random.default_rng(seed), 1)[0]
        supernet(torch.zeros(1, *supernet.image_shape), supernet.path_of(arch))
    supernet.train(was_training)
    tables = [np.zeros(n) for n in sizes]
    for m in mixed:
        shape = (1, *m.last_input_shape[1:])
        for c, name in enumerate(m.names):
            if name not in m.ops:
                continue
            module = copy.deepcopy(m.ops[name]).eval()
            text = repr(module)

            def factory(module=module, shape=shape) -> bytes:
                return export_onnx(module, shape)

            key = content_hash("block", text, "x".join(map(str, shape)))
            wl = Workload(
                key, f"{space.name}:{name}@{'x'.join(map(str, shape))}", shape, onnx_factory=factory
            )
            tables[m.decision][c] += profiler.measure(wl, metric).value
            if on_measured:
                on_measured(f"block {wl.label}")
    terms = additive_terms(space)
    weights = np.concatenate(tables)
    lut = MultilinearLUT(
        space, terms, weights, 0.0, metric, f"lut-measured:{profiler.device.name}:blocks"
    )
    archs = space.sample(np.random.default_rng(seed + 1), max(0, calibration))
    if archs:
        sums = np.array([lut.cost(a) for a in archs])
        meas = np.array(
            [profiler.measure(subnet_workload(supernet, a), metric).value for a in archs]
        )
        scale, bias = block_calibration(sums, meas)
        lut.weights = weights * scale
        lut.bias = bias
        lut.floor = FLOOR_SHARE * float(meas.min())
        pred = scale * sums + bias
        lut.fit = {
            "calibration_subnets": len(archs),
            "scale": float(scale),
            "bias_ms": float(bias),
            "calibration_mape_pct": float(np.mean(np.abs(pred - meas) / meas) * 100),
        }
        if len(archs) >= 4:  # the margin: each subnet predicted by the fit on the others
            loo = np.empty(len(archs))
            for i in range(len(archs)):
                rest = np.arange(len(archs)) != i
                s_i, b_i = block_calibration(sums[rest], meas[rest])
                loo[i] = abs(s_i * sums[i] + b_i - meas[i]) / meas[i]
            lut.fit["rel_err_p90"] = float(np.quantile(loo, 0.9))
    return lut


def block_calibration(sums: np.ndarray, measured: np.ndarray) -> tuple[float, float]:
    """(scale, bias) of ``measured ≈ scale * sums + bias`` (ms or mJ, (n,) each) minimising the
    relative squared error, with ``scale >= 0.05`` and ``bias >= 0``: the stem, head and
    per-call overhead a sum of blocks misses cost time, they never save it (an unconstrained
    line through 3 subnets of a 16x16 supernet on the CPU went below zero for a fifth of the
    cells, which the floor then priced at half the fastest subnet's latency)."""
    from scipy.optimize import lsq_linear

    if len(sums) < 2 or np.ptp(sums) <= 0:
        return 1.0, max(0.0, float(np.mean(measured - sums)))
    a = np.stack([sums, np.ones_like(sums)], axis=1) / measured[:, None]
    res = lsq_linear(a, np.ones(len(sums)), bounds=([0.05, 0.0], [np.inf, np.inf]))
    return float(res.x[0]), float(res.x[1])


def measured_subnet_lut(
    supernet: Any, profiler: Any, metric: str = "latency_ms", samples: int = 24, seed: int = 0
) -> MultilinearLUT:
    """Lookup table fitted on ``samples`` random subnets measured on a live device (for
    supernets without per-block mixed operations, such as OFA's elastic blocks)."""
    from hwnas.errors import CandidateError

    archs = supernet.space.sample(np.random.default_rng(seed), samples)
    kept, values, skipped, in_a_row = [], [], 0, 0
    for a in archs:  # a subnet too noisy to time is left out, as a search skips a candidate
        try:
            values.append(profiler.measure(subnet_workload(supernet, a), metric).value)
            kept.append(a)
            in_a_row = 0
        except CandidateError:
            skipped, in_a_row = skipped + 1, in_a_row + 1
            if in_a_row >= 5:
                raise
    lut = fit_lut(
        supernet.space,
        kept,
        np.array(values),
        metric,
        f"lut-fit:measured:{profiler.device.name}:{len(kept)}-subnets",
    )
    lut.fit["noisy_skipped"] = skipped
    return lut


COST_KINDS = ("auto", "table", "measured", "flops", "predicted", "kernel")
"""``--set cost=`` values of a supernet search (:data:`hwnas.engine.costs.COST_MODELS` and
``auto``)."""


def lut_of(
    model: CostModel,
    space: SearchSpace,
    samples: int = 4000,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    status: Callable[[str], None] | None = None,
) -> MultilinearLUT:
    """The lookup table fitted on ``model``'s costs of every architecture of an enumerable
    space (or ``samples`` random ones): a supernet's hardware term needs the expected cost,
    which only a lookup table gives. A model that is slow to query (its ``lut_samples`` set:
    the kernel-level predictor) is asked for its reference networks and ``lut_samples`` random
    architectures, and the table's fit is also reported against the reference networks'
    measured costs (``truth_r2``, ``truth_rho``; the model's own as
    ``<source kind>_model_truth_r2``); ``log`` gets a line when it starts, ``status`` the
    network it is at.
    """
    if model.lut_samples is not None:
        quiet = lambda _m: None  # noqa: E731
        return _sampled_lut(model, space, seed, log or quiet, status or quiet)
    indexed = ability(space, IndexedSpace)
    if indexed is not None and len(indexed) <= 20000:
        pool = indexed.all_archs()
    else:
        pool = list(dict.fromkeys(space.sample(np.random.default_rng(seed), samples)))
    mean, _std = model.predict(pool)
    refs = model.fit.get("calibration_archs", 0)
    lut = fit_lut(space, pool, mean, model.metric, f"lut-fit:{model.source}:{refs}-refs")
    lut.truth = model
    return lut


def _sampled_lut(
    model: CostModel,
    space: SearchSpace,
    seed: int,
    log: Callable[[str], None],
    status: Callable[[str], None],
) -> MultilinearLUT:
    from scipy.stats import spearmanr

    refs, ref_values = model.reference or ([], np.zeros(0))
    rng = np.random.default_rng(seed)
    pool = list(dict.fromkeys([*refs, *space.sample(rng, model.lut_samples)]))
    kind = model.source.split(":")[0]
    what = f"{kind}-level cost: predicting {len(pool)} deployed networks for the lookup table"
    log(what)
    mean = np.zeros(len(pool))
    for i, arch in enumerate(pool):  # one at a time: a new network's kernels are timed first
        status(f"{what}: network {i + 1}/{len(pool)}")
        mean[i] = model.predict([arch])[0][0]
    lut = fit_lut(space, pool, mean, model.metric, f"lut-fit:{model.source}:{len(pool)}-archs",
                  seed=seed)  # fmt: skip
    lut.truth, lut.truth_judges = model, False  # one network's prediction is seconds
    if len(refs):
        lut_refs = lut.predict(refs)[0]
        r2 = 1 - ((lut_refs - ref_values) ** 2).sum() / max(
            ((ref_values - ref_values.mean()) ** 2).sum(), 1e-12
        )
        lut.fit.update({
            **model.fit,
            "truth_r2": float(r2),
            "truth_rho": float(spearmanr(lut_refs, ref_values)[0]),
            f"{kind}_model_truth_r2": model.fit.get("truth_r2"),
        })  # fmt: skip
    return lut


def predicted_lut(
    space: SearchSpace,
    profiler: Any,
    metric: str = "latency_ms",
    predictor: str | None = None,
    samples: int = 4000,
    seed: int = 0,
) -> MultilinearLUT:
    """The lookup table fitted on a meta-learned predictor's costs: the few-shot path.

    Takes the space's reference architectures on the device through ``profiler`` (10 full
    networks timed on a live device, or 10 values read from a recorded table), adapts the
    predictor artifact to them (HELP, Lee et al., NeurIPS 2021; :func:`hwnas.engine.costs.
    calibrate`), and fits :func:`fit_lut` on its predictions (:func:`lut_of`). Costs are those
    of the space's full-size networks, as for a table.

    Raises:
        HwnasError: unknown predictor, one of another space, a space without a reference set,
            or a device that cannot measure the reference set.
    """
    request = CostRequest(space, profiler.device, profiler, metric, predictor, seed=seed)
    model = make_cost_model("predicted", request)  # calibrated on the reference set
    return lut_of(model, space, samples, seed)


def measured_model(request: CostRequest) -> MultilinearLUT:
    """``measured``: a supernet's blocks timed in context on a live device (or, without mixed
    operations, whole subnets), through the profiler and its store.

    Raises:
        HwnasError: no supernet (a table search measures each candidate itself), or a device
            that cannot run models (:func:`check_measured_cost`).
    """
    if request.supernet is None:
        raise HwnasError("cost=measured is for supernets: a table search measures each candidate")
    check_measured_cost(request.device)
    if request.supernet.mixed_choices():
        return measured_block_lut(
            request.supernet, request.profiler, request.metric,
            on_measured=request.extra.get("on_measured"),
        )  # fmt: skip
    return measured_subnet_lut(request.supernet, request.profiler, request.metric)


def check_measured_cost(device: Any) -> None:
    """Refuse ``cost=measured`` on a device that cannot run models, before any work.

    Raises:
        HwnasError: a recorded table, or a device of imported values (named as such, with the
            cost models it can give).
    """
    if device.runs_models:
        return
    what = (
        "is a recorded table" if device.table_spaces
        else "holds only the values imported into it (hwnas measure import)"
    )  # fmt: skip
    raise HwnasError(
        f"device '{device.name}' {what}: it cannot time blocks (cost=measured); use "
        "cost=auto or cost=predicted (a predictor calibrated on its values), or cost=flops"
    )


def flops_model(request: CostRequest) -> MultilinearLUT:
    """``flops``: the lookup table fitted on MFLOPs of sampled subnets of the supernet."""
    if request.supernet is None:
        raise HwnasError("cost=flops is for supernets")
    return flops_lut(request.supernet)


def cost_model_for(
    supernet: Any,
    device: Any,
    profiler: Any,
    metric: str = "latency_ms",
    kind: str = "auto",
    predictor: str | None = None,
    log: Callable[[str], None] | None = None,
    on_measured: Callable[[str], None] | None = None,
    status: Callable[[str], None] | None = None,
) -> CostModel:
    """The cost model of a supernet search (:func:`hwnas.engine.costs.make_cost_model` with the
    supernet): a fitted table LUT for recorded devices, a measured LUT for live ones, FLOPs when
    asked (``kind="flops"``), the LUT fitted on a meta-learned predictor calibrated on the
    reference set (``kind="predicted"``), or on the kernel-level predictor at the space's
    deployment size (``kind="kernel"``, the default for declared spaces on a live ONNX Runtime
    device); ``log`` receives progress lines, ``status`` the current one (not kept),
    ``on_measured`` the label of each measurement taken (a block, a kernel).

    Raises:
        HwnasError: an unknown kind, or a kind the device cannot give.
    """
    if kind not in COST_KINDS:
        raise HwnasError(f"unknown cost model '{kind}'; known: {', '.join(COST_KINDS)}")
    callbacks = (("log", log), ("on_measured", on_measured), ("status", status))
    extra = {k: v for k, v in callbacks if v is not None}
    request = CostRequest(supernet.space, device, profiler, metric, predictor, supernet=supernet,
                          extra=extra)  # fmt: skip
    model = make_cost_model(kind, request)
    if model.lookup_table:  # measured, flops, kernel: fitted for the supernet already
        return model
    # a supernet's hardware term needs the expected cost, which only a lookup table gives
    if model.full_table() is not None:  # the device's table: fitted on its every value
        return fit_table_lut(supernet.space, device, metric)
    return lut_of(model, supernet.space, seed=request.seed, log=log, status=status)


# -- the hardware loss ----------------------------------------------------------------------


@dataclass
class HardwareLoss:
    """The hardware term of the architecture objective.

    Modes (at most one of ``weight`` and ``target`` is set; neither: accuracy only):

    - target T: ``task + strength * |E[cost] / T - 1|`` (the absolute-value reward of TuNAS,
      Bender et al., CVPR 2020), pulling the distribution's expected cost to T from both
      sides; the same for every strategy and form (derivation then enforces the band, see
      :func:`constrained_choice`).
    - weight W, in the form ``form`` (:data:`HW_FORMS`; set by the strategy from its
      ``hw_form`` setting):

      - ``additive``: ``task + W * E[cost] / reference``, ``reference`` the expected cost
        under the uniform distribution (W is unit-free);
      - ``fbnet``: ``task * alpha * ln(E[cost])^W`` (FBNet, Wu et al., CVPR 2019, eq. 3:
        ``CE * alpha * log(LAT)^beta``, latency in ms; the paper: alpha 0.2, beta 0.6);
      - ``proxyless``: ``alpha * task * (ln E[cost] / ln reference)^W`` (ProxylessNAS, Cai
        et al., ICLR 2019, ``mul#log`` in mit-han-lab/proxylessnas with its reference value
        = the uniform distribution's expected cost; the paper: alpha 0.2, beta 0.3).

      The logarithmic forms need costs above 1 in the model's unit (ms or mJ):
      :func:`check_form` refuses a device whose cheapest architecture is not.

    Attributes:
        model: the cost model.
        weight: W, or None.
        target: T in the model's unit, or None.
        strength: multiplier of the target term.
        reference: expected cost of the uniform distribution.
        form: the form of the weight mode (a key of :data:`HW_FORMS`).
        alpha: alpha of the multiplicative forms.
        note: why the form differs from the strategy's default, if it does.
        limit: the search's latency limit (ms; ``--max-latency``) where the model is of
            latency, else None: no training term, but derivation keeps under it
            (:func:`constrained_choice` with ``at_most``).
    """

    model: CostModel
    weight: float | None = None
    target: float | None = None
    strength: float = 2.0
    reference: float = 1.0
    form: str = "additive"
    alpha: float = 0.2
    note: str = ""
    limit: float | None = None

    def __call__(self, probs: Sequence[Any]) -> Any:
        """The additive term (target or additive weight mode), a scalar tensor."""
        e = self.model.expected(probs)
        if self.target is not None:
            return self.strength * (e / self.target - 1.0).abs()
        if self.weight:
            return self.weight * e / self.reference
        return e * 0.0

    @property
    def active_form(self) -> str:
        """The form in use: ``form`` in weight mode, else ``additive``. A weight of 0 is no
        term, in every form (the multiplicative ones gave ``alpha * task``: the plain method's
        loss scaled by 0.2, its architecture weight decay five times as strong)."""
        return self.form if (self.target is None and self.weight) else "additive"

    def objective(self, task: Any, probs: Sequence[Any]) -> tuple[Any, Any]:
        """(architecture objective, hardware part for logging): ``task`` (a scalar tensor) and
        the hardware term combined in the active form; for the multiplicative forms the
        hardware part is the factor that multiplies ``task``."""
        return HW_FORMS[self.active_form](self, task, probs)

    def describe(self) -> dict[str, Any]:
        mode = "target" if self.target is not None else "weight"
        forms = {
            "additive": "weight * E[cost]/E_uniform[cost] (additive)",
            "fbnet": "task * alpha * ln(E[cost])^weight (FBNet, multiplicative)",
            "proxyless": "alpha * task * (ln E[cost] / ln E_uniform[cost])^weight "
            "(ProxylessNAS mul#log)",
        }
        return {
            "mode": mode,
            "target": self.target,
            "weight": self.weight,
            "strength": self.strength if mode == "target" else None,
            "reference": self.reference,
            "alpha": self.alpha if self.active_form != "additive" else None,
            "form": (
                "strength * |E[cost]/target - 1| (TuNAS absolute reward)"
                if mode == "target"
                else forms[self.active_form]
            ),
            "cost_model": self.model.describe(),
            **({"note": self.note} if self.note else {}),
        }


def _additive(hw: HardwareLoss, task: Any, probs: Sequence[Any]) -> tuple[Any, Any]:
    term = hw(probs)
    return task + term, term


def _log_cost(hw: HardwareLoss, probs: Sequence[Any]) -> Any:
    # clamped just above 1: ln of a cost <= 1 is <= 0 (check_form refuses such devices)
    return hw.model.expected(probs).clamp_min(1.0 + 1e-6).log()


def _fbnet(hw: HardwareLoss, task: Any, probs: Sequence[Any]) -> tuple[Any, Any]:
    factor = hw.alpha * _log_cost(hw, probs) ** float(hw.weight or 0.0)
    return task * factor, factor


def _proxyless(hw: HardwareLoss, task: Any, probs: Sequence[Any]) -> tuple[Any, Any]:
    ratio = _log_cost(hw, probs) / float(np.log(max(hw.reference, 1.0 + 1e-6)))
    factor = hw.alpha * ratio ** float(hw.weight or 0.0)
    return task * factor, factor


HW_FORMS: dict[str, Callable[[HardwareLoss, Any, Sequence[Any]], tuple[Any, Any]]] = {
    "additive": _additive,
    "fbnet": _fbnet,
    "proxyless": _proxyless,
}
"""Forms of the weight-mode hardware term by name (``--set hw_form=``; the names are declared
in :mod:`hwnas.supernet.settings`)."""


def check_form(hw: HardwareLoss) -> None:
    """Refuse a logarithmic form on a device whose cheapest architecture costs 1 unit (ms or
    mJ) or less, where ``ln(cost)`` is not positive.

    Raises:
        HwnasError: the form cannot be used with this cost model.
    """
    if hw.active_form == "additive" or not hw.model.lookup_table:
        return
    low = hw.model.min_cost()
    if hw.reference <= 1.0 or low <= 1.0:
        unit = hw.model.metric.rsplit("_", 1)[-1]
        raise HwnasError(
            f"--set hw_form={hw.form} takes the log of the cost in {unit}, but the cheapest "
            f"architecture costs {low:.3g} {unit} here (log <= 0); use --set hw_form=additive"
        )


@dataclass(frozen=True)
class TargetChoice:
    """The architecture target-mode derivation chose.

    Attributes:
        indices: candidate index of every decision, shape (D,).
        cost: its cost (ms or mJ) as judged: exact where the truth has it, else the table's.
        exact: ``cost`` is the truth's (a recorded table: the device's own value).
        inside: ``cost`` is within the tolerance of the target (the table's values must be
            within the tolerance less the table's error margin).
        log_prob: sum over decisions of the log-probability of the chosen candidate.
        considered: how many distinct architectures were judged.
        method: "exhaustive" (every architecture of the space) or "lagrangian" (candidates of
            a Lagrangian sweep and their one- and two-decision neighbours, plus every
            architecture the truth knows).
    """

    indices: np.ndarray
    cost: float
    exact: bool
    inside: bool
    log_prob: float
    considered: int
    method: str

    def describe(self) -> dict[str, Any]:
        return {
            "cost": self.cost,
            "cost_is_exact": self.exact,
            "within_tolerance": self.inside,
            "log_prob": self.log_prob,
            "considered": self.considered,
            "method": self.method,
        }


def frozen_lut(cost: Any) -> dict[str, Any] | None:
    """What a resumed supernet training needs of ``cost`` to steer as it did
    (:func:`thaw_lut`): a lookup table's weights, bias, floor, source and fit (JSON-able);
    None for any other cost model."""
    if not isinstance(cost, MultilinearLUT):
        return None
    return {
        "terms": len(cost.terms),
        "weights": [float(w) for w in np.asarray(cost.weights, dtype=np.float64)],
        "bias": float(cost.bias),
        "floor": float(cost.floor),
        "source": cost.source,
        "fit": json.loads(json.dumps(cost.fit, default=float)),
    }


def thaw_lut(cost: Any, frozen: dict[str, Any] | None) -> Any:
    """``cost`` with the lookup table a checkpoint froze (:func:`frozen_lut`): the same terms
    (the space's), the saved weights, bias, floor, source and fit; its truth kept. A resumed
    training then steers with the table it started with, though the cost model made now
    from the store would differ (a kernel-level model calibrated on more networks since).
    ``cost`` as it is when nothing was frozen or the table's terms differ."""
    import dataclasses

    if not frozen or not isinstance(cost, MultilinearLUT):
        return cost
    weights = np.asarray(frozen.get("weights", []), dtype=np.float64)
    if frozen.get("terms") != len(cost.terms) or weights.shape != (len(cost.terms),):
        return cost
    return dataclasses.replace(
        cost,
        weights=weights,
        bias=float(frozen["bias"]),
        floor=float(frozen.get("floor", cost.floor)),
        source=str(frozen.get("source", cost.source)),
        fit=dict(frozen.get("fit") or {}),
    )


def constrained_choice(
    logp: Sequence[np.ndarray],
    lut: MultilinearLUT,
    target: float,
    tolerance: float = 0.05,
    at_most: bool = False,
) -> TargetChoice:
    """The most probable architecture whose cost is within ``tolerance`` of ``target`` (with
    ``at_most``: whose cost is at most ``target``, a latency limit).

    Candidates are judged by the most accurate cost there is (:meth:`MultilinearLUT.judged`):
    a recorded device's own value where the table has the architecture, else the lookup
    table's prediction, which must then lie within ``tolerance - lut.margin`` (its held-out
    90th-percentile relative error), so that its true cost is inside the band too. When the
    space is small enough every architecture is judged (NAS-Bench-201: 15,625, exact from the
    device's table); otherwise the candidates are the solutions of a Lagrangian relaxation
    (maximise sum log p - mu * cost / target by coordinate ascent, mu swept over a log grid
    of both signs), their one- and two-decision neighbours, and every architecture the truth
    has a value for. When no candidate is inside the band, the one closest to the target.

    Args:
        logp: per-decision log-probabilities, D arrays of shape (K_d,).
        lut: the cost model (ms or mJ).
        target: requested cost (the model's unit).
        tolerance: accepted relative deviation, e.g. 0.05 for ±5%.
        at_most: ``target`` is a limit: the band is every cost up to it (the table's values
            up to it less the table's margin); with none inside, the cheapest.

    Returns:
        The choice (:class:`TargetChoice`).
    """
    logp = [np.asarray(p, dtype=np.float64) for p in logp]
    enum = lut.enumeration()
    if enum is not None:
        pool, cost, exact = enum
        method = "exhaustive"
    else:
        pool = np.unique(
            np.concatenate([_lagrangian_pool(logp, lut, target), lut.known_indices()]), axis=0
        )
        cost, exact = lut.judged(pool)
        method = "lagrangian"
    score = np.zeros(len(pool))
    for j, p in enumerate(logp):
        score += p[pool[:, j]]
    miss = np.abs(cost / target - 1)
    if at_most:
        inside = np.where(exact, cost <= target, cost <= target * (1 - lut.margin))
        miss = np.where(cost <= target, 0.0, miss)  # none inside: the cheapest
    else:
        inside = in_band(cost, exact, target, tolerance, lut.margin)
    if inside.any():
        i = int(np.argmax(np.where(inside, score, -np.inf)))
    else:  # closest to the target; among equally close, the most probable
        i = int(np.lexsort((-score, np.round(miss, 9)))[0])
    return TargetChoice(
        pool[i].copy(),
        float(cost[i]),
        bool(exact[i]),
        bool(inside[i]),
        float(score[i]),
        int(len(pool)),
        method,
    )


def in_band(
    cost: np.ndarray, exact: np.ndarray, target: float, tolerance: float, margin: float
) -> np.ndarray:
    """Which costs are surely within ``tolerance`` of ``target``: exact ones within it, the
    lookup table's within ``tolerance - margin`` (its relative error margin). Shapes (N,)."""
    miss = np.abs(np.asarray(cost) / target - 1)
    return np.where(exact, miss <= tolerance, miss <= tolerance - margin)


def _coordinate_ascent(
    logp: Sequence[np.ndarray], lut: MultilinearLUT, start: np.ndarray, mu: float, target: float
) -> np.ndarray:
    """argmax of sum log p - mu * cost / target, one decision at a time from ``start``."""
    idx = start.copy()
    for _ in range(4):
        changed = False
        for j in range(len(logp)):
            cand = np.repeat(idx[None], len(logp[j]), axis=0)
            cand[:, j] = np.arange(len(logp[j]))
            k = int(np.argmax(logp[j] - mu * lut.cost_indices(cand) / target))
            if k != idx[j]:
                idx[j], changed = k, True
        if not changed:
            break
    return idx


def _lagrangian_pool(logp: Sequence[np.ndarray], lut: MultilinearLUT, target: float) -> np.ndarray:
    """Candidate-index rows: Lagrangian solutions over a grid of mu (both signs: above and
    below the argmax's cost), and the one- and two-decision neighbours of the two solutions
    that bracket the target (the relaxation only reaches the convex hull of (cost, log p))."""
    best = np.array([int(np.argmax(p)) for p in logp])
    grid = np.geomspace(1e-2, 1e3, 16)
    mus = np.concatenate([[0.0], grid, -grid])
    sols = np.stack([_coordinate_ascent(logp, lut, best, m, target) for m in mus])
    sols = np.unique(sols, axis=0)
    costs = lut.cost_indices(sols)
    rows = [sols]
    below, above = costs <= target, costs >= target
    for side in (below, above):
        if side.any():
            k = int(np.argmin(np.where(side, np.abs(costs - target), np.inf)))
            rows.append(_neighbours(sols[k], [len(p) for p in logp]))
    return np.concatenate(rows)


def _neighbours(idx: np.ndarray, sizes: Sequence[int], max_singles: int = 400) -> np.ndarray:
    """``idx``, every change of one of its decisions and, when there are at most
    ``max_singles`` single changes, every change of two decisions; rows (N, D)."""
    js = np.array([j for j, n in enumerate(sizes) for k in range(n) if k != idx[j]], dtype=int)
    ks = np.array([k for j, n in enumerate(sizes) for k in range(n) if k != idx[j]], dtype=int)
    singles = np.repeat(idx[None], len(js), axis=0)
    singles[np.arange(len(js)), js] = ks
    parts = [idx[None], singles]
    if len(js) <= max_singles:
        a, b = np.triu_indices(len(js), 1)
        keep = js[a] != js[b]
        a, b = a[keep], b[keep]
        pairs = np.repeat(idx[None], len(a), axis=0)
        pairs[np.arange(len(a)), js[a]] = ks[a]
        pairs[np.arange(len(a)), js[b]] = ks[b]
        parts.append(pairs)
    return np.concatenate(parts)
