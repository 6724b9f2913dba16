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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwnas.errors import HwnasError
from hwnas.search.costs import CostModel, CostRequest, make_cost_model
from hwnas.spaces import IndexedSpace, ability
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

    space: SearchSpace
    terms: list[Term]
    weights: np.ndarray
    bias: float
    metric: str = "latency_ms"
    source: str = ""
    fit: dict[str, Any] = field(default_factory=dict)

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
        """Cost of each row of candidate indices (N, D) -> (N,)."""
        return self.bias + self.features(indices) @ self.weights

    def indices(self, archs: Sequence[Arch]) -> np.ndarray:
        """Candidate index of every decision of each architecture, shape (len(archs), D)."""
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
        return self.bias + (flat[gather].prod(dim=1) * weights).sum()

    def describe(self) -> dict[str, Any]:
        return {"metric": self.metric, "source": self.source, "terms": len(self.terms), **self.fit}


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


def ofa_terms(space: Any) -> list[Term]:
    """OFA: one indicator per resolution, and per block and (kernel, expansion) pair the term
    1[ks=k] * 1[e=e] * 1[stage depth > position] * (r / r_max)^2."""
    nb, ns, md = space.num_blocks, space.num_stages, space.max_depth
    r_dim = 2 * nb + ns
    res = np.asarray(space.resolutions, dtype=np.float64)
    terms: list[Term] = []
    for c in range(len(res)):
        g = np.zeros(len(res))
        g[c] = 1.0
        terms.append(((r_dim, g),))
    r2 = (res / res.max()) ** 2
    for b in range(nb):
        s, i = divmod(b, md)
        depth_g = np.array([1.0 if d > i else 0.0 for d in space.depths])
        for ki in range(len(space.kernel_sizes)):
            for ei in range(len(space.expand_ratios)):
                gk = np.eye(len(space.kernel_sizes))[ki]
                ge = np.eye(len(space.expand_ratios))[ei]
                term: list[Factor] = [(b, gk), (nb + b, ge), (r_dim, r2)]
                if not depth_g.all():
                    term.append((2 * nb + s, depth_g))
                terms.append(tuple(term))
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
    """The term structure used for ``space``: OFA's; a declared space's (depth- and
    resolution-aware indicators, :mod:`hwnas.supernet.declared_cost`); else additive, plus the
    pairwise terms when ``pairs`` (the number of measured architectures to fit on) is at least
    20 per term (NAS-Bench-201's full tables: latency on phones depends on which edges meet)."""
    if space.name == "ofa":
        return ofa_terms(space)
    if space.supernet_name == "declared":
        from hwnas.supernet.declared_cost import declared_terms

        return declared_terms(space)
    terms = additive_terms(space)
    pairwise = pairwise_terms(space) if len(space.choices()) <= 8 else []
    if pairwise and pairs >= 20 * (len(terms) + len(pairwise)):
        terms += pairwise
    return terms


# -- fitting --------------------------------------------------------------------------------


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
        HwnasError: fewer pairs than needed or non-finite values.
    """
    values = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(values) & (values > 0)
    archs = [a for a, k in zip(archs, ok) if k]
    values = values[ok]
    if len(values) < 3:
        raise HwnasError(f"need at least 3 measured architectures to fit a cost model for {metric}")
    terms = lut_terms(space, pairs=len(values))
    lut = MultilinearLUT(space, terms, np.zeros(len(terms)), 0.0, metric, source)
    opts = list(space.choices().values())
    dims = list(space.choices())
    idx = np.array(
        [[opts[i].index(c[d]) for i, d in enumerate(dims)] for c in map(space.to_choices, archs)]
    )
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
        )
    coef = solve(np.arange(len(values)))
    lut.weights, lut.bias, lut.fit = coef[:-1], float(coef[-1]), fit
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
    return fit_lut(space, archs, np.asarray(column, dtype=np.float64), metric, f"lut-fit:{source}")


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
        supernet.space.name,
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
    calibration: int = 3,
    seed: int = 0,
    on_block: Callable[[str], None] | None = None,
) -> MultilinearLUT:
    """Per-block lookup table measured on a live device (FBNet, Wu et al. CVPR 2019).

    Each candidate module of each mixed operation is exported alone at its input shape (batch
    1) and measured through ``profiler`` (so the store keeps it and identical blocks are timed
    once); a table entry is the sum over the places the decision acts on. The bias and a scale
    are then fitted on ``calibration`` whole subnets measured the same way, which absorbs the
    stem, head and per-call overhead that a sum of blocks misses.

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
            if on_block:
                on_block(wl.label)
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
        if len(archs) >= 2 and np.ptp(sums) > 0:
            scale, bias = np.polyfit(sums, meas, 1)
            scale = max(float(scale), 0.05)
            bias = float(np.mean(meas - scale * sums))
        else:
            scale, bias = 1.0, float(np.mean(meas - sums))
        lut.weights = weights * scale
        lut.bias = bias
        pred = scale * sums + bias
        lut.fit = {
            "calibration_subnets": len(archs),
            "scale": float(scale),
            "bias_ms": float(bias),
            "calibration_mape_pct": float(np.mean(np.abs(pred - meas) / meas) * 100),
        }
    return lut


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


COST_KINDS = ("auto", "table", "measured", "flops", "predicted")
"""``--set cost=`` values of a supernet search (:data:`hwnas.search.costs.COST_MODELS` and
``auto``)."""


def lut_of(
    model: CostModel, space: SearchSpace, samples: int = 4000, seed: int = 0
) -> MultilinearLUT:
    """The lookup table fitted on ``model``'s costs of every architecture of an enumerable
    space (or ``samples`` random ones): a supernet's hardware term needs the expected cost,
    which only a lookup table gives."""
    indexed = ability(space, IndexedSpace)
    if indexed is not None and len(indexed) <= 20000:
        pool = indexed.all_archs()
    else:
        pool = list(dict.fromkeys(space.sample(np.random.default_rng(seed), samples)))
    mean, _std = model.predict(pool)
    refs = model.fit.get("calibration_archs", 0)
    return fit_lut(space, pool, mean, model.metric, f"lut-fit:{model.source}:{refs}-refs")


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
    predictor artifact to them (HELP, Lee et al., NeurIPS 2021; :func:`hwnas.search.costs.
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
            that cannot run models (a recorded table).
    """
    if request.supernet is None:
        raise HwnasError("cost=measured is for supernets: a table search measures each candidate")
    if not request.device.runs_models:
        raise HwnasError(
            f"device '{request.device.name}' is a recorded table: it cannot time blocks"
        )
    if request.supernet.mixed_choices():
        return measured_block_lut(request.supernet, request.profiler, request.metric)
    return measured_subnet_lut(request.supernet, request.profiler, request.metric)


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
) -> CostModel:
    """The cost model of a supernet search (:func:`hwnas.search.costs.make_cost_model` with the
    supernet): a fitted table LUT for recorded devices, a measured LUT for live ones, FLOPs when
    asked (``kind="flops"``), or the LUT fitted on a meta-learned predictor calibrated on the
    reference set (``kind="predicted"``).

    Raises:
        HwnasError: an unknown kind, or a kind the device cannot give.
    """
    if kind not in COST_KINDS:
        raise HwnasError(f"unknown cost model '{kind}'; known: {', '.join(COST_KINDS)}")
    request = CostRequest(supernet.space, device, profiler, metric, predictor, supernet=supernet)
    return make_cost_model(kind, request)


# -- the hardware loss ----------------------------------------------------------------------


@dataclass
class HardwareLoss:
    """The hardware term added to the task loss.

    Two modes (exactly one of ``weight`` and ``target`` is set):

    - penalty weight W: ``W * E[cost] / reference`` with ``reference`` the expected cost under
      the uniform distribution (so W is unit-free; the additive form, ProxylessNAS);
    - target T: ``strength * |E[cost] / T - 1|`` (the absolute-value reward of TuNAS, Bender et
      al., CVPR 2020), pulling the distribution's expected cost to T from both sides.

    Attributes:
        model: the cost model.
        weight: W, or None.
        target: T in the model's unit, or None.
        strength: multiplier of the target term.
        reference: expected cost of the uniform distribution.
    """

    model: CostModel
    weight: float | None = None
    target: float | None = None
    strength: float = 2.0
    reference: float = 1.0

    def __call__(self, probs: Sequence[Any]) -> Any:
        e = self.model.expected(probs)
        if self.target is not None:
            return self.strength * (e / self.target - 1.0).abs()
        if self.weight:
            return self.weight * e / self.reference
        return e * 0.0

    def describe(self) -> dict[str, Any]:
        mode = "target" if self.target is not None else "weight"
        return {
            "mode": mode,
            "target": self.target,
            "weight": self.weight,
            "strength": self.strength if mode == "target" else None,
            "reference": self.reference,
            "form": (
                "strength * |E[cost]/target - 1| (TuNAS absolute reward)"
                if mode == "target"
                else "weight * E[cost]/E_uniform[cost] (additive, ProxylessNAS-style)"
            ),
            "cost_model": self.model.describe(),
        }


def constrained_choice(
    logp: Sequence[np.ndarray], lut: MultilinearLUT, target: float, tolerance: float = 0.1
) -> tuple[np.ndarray, float]:
    """The most probable architecture whose predicted cost is within ``tolerance`` of
    ``target`` (Lagrangian relaxation: maximise sum log p - mu * cost by coordinate ascent,
    bisecting mu).

    Args:
        logp: per-decision log-probabilities.
        lut: the cost model.
        target: requested cost.
        tolerance: accepted relative deviation.

    Returns:
        (candidate indices, predicted cost). The unconstrained argmax when it already fits.
    """
    d = len(logp)
    best = np.array([int(np.argmax(p)) for p in logp])
    c0 = float(lut.cost_indices(best[None])[0])
    if abs(c0 / target - 1) <= tolerance:
        return best, c0

    def solve(mu: float) -> tuple[np.ndarray, float]:
        idx = best.copy()
        for _ in range(4):
            changed = False
            for j in range(d):
                cand = np.repeat(idx[None], len(logp[j]), axis=0)
                cand[:, j] = np.arange(len(logp[j]))
                score = logp[j] - mu * lut.cost_indices(cand) / target
                k = int(np.argmax(score))
                if k != idx[j]:
                    idx[j], changed = k, True
            if not changed:
                break
        return idx, float(lut.cost_indices(idx[None])[0])

    lo, hi = (0.0, 1.0) if c0 > target else (-1.0, 0.0)
    if c0 > target:  # grow mu until the cost falls below the target
        while solve(hi)[1] > target and hi < 1e6:
            hi *= 4
    else:
        while solve(lo)[1] < target and lo > -1e6:
            lo *= 4
    found = solve(hi if c0 > target else lo)
    for _ in range(40):
        mid = (lo + hi) / 2
        idx, c = solve(mid)
        if abs(c / target - 1) <= tolerance / 2:
            return idx, c
        if c > target:
            lo = mid
        else:
            hi = mid
        if abs(c / target - 1) < abs(found[1] / target - 1):
            found = (idx, c)
    return _repair(found[0], logp, lut, target, tolerance)


def _repair(
    idx: np.ndarray, logp: Sequence[np.ndarray], lut: MultilinearLUT, target: float, tol: float
) -> tuple[np.ndarray, float]:
    """The Lagrangian only reaches points on the convex hull of (cost, log p); when it misses
    the band, try every change of one or two decisions from its answer and keep the most
    probable architecture inside the band (or the one closest to the target)."""
    sizes = [len(p) for p in logp]
    singles = [(j, k) for j, n in enumerate(sizes) for k in range(n) if k != idx[j]]
    cands = [idx.copy()]
    for j, k in singles:
        c = idx.copy()
        c[j] = k
        cands.append(c)
    if len(singles) <= 400:
        for a in range(len(singles)):
            for b in range(a + 1, len(singles)):
                (j1, k1), (j2, k2) = singles[a], singles[b]
                if j1 != j2:
                    c = idx.copy()
                    c[j1], c[j2] = k1, k2
                    cands.append(c)
    cand = np.stack(cands)
    cost = lut.cost_indices(cand)
    score = sum(logp[j][cand[:, j]] for j in range(len(sizes)))
    inside = np.abs(cost / target - 1) <= tol
    if inside.any():
        i = int(np.argmax(np.where(inside, score, -np.inf)))
    else:
        i = int(np.argmin(np.abs(cost / target - 1)))
    return cand[i], float(cost[i])
