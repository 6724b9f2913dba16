"""One regressor per kernel type, with its uncertainty and its range (nn-Meter's kernel models).

Each kernel type (:func:`~hwnas.predictors.kernels.features.kernel_type`) with enough timed
kernels gets a random forest on the log of the kernel's time alone less the runtime's per-call
overhead (what the kernel costs inside a network; Zhang et al., MobiSys 2021, use random
forests too). Predictions are medians (``exp`` of the predicted log). A prediction carries

- a standard deviation of its log: the spread of the forest's trees around their mean plus the
  forest's out-of-bag residual spread (what it gets wrong on kernels it did not see), and
- a status: ``fitted`` (every feature inside the range the type was fitted on), ``extrapolated``
  (a feature outside it, or a value of a column that never varied: a kernel size or activation
  the type was never timed with; trees cannot extrapolate, so the standard deviation is widened
  by how far outside the range it lies; also a convolution of a kind never timed, predicted by
  the nearest timed kind of the same op, widened by :data:`SIBLING_STD`) or ``unseen`` (a type
  without a regressor).

This is what adaptive sampling asks (:mod:`hwnas.predictors.kernels.sampling`: time where the
prediction is least certain) and what the network-level predictor turns into warnings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from hwnas.predictors.kernels.features import feature_matrix, kernel_type, work, work_class
from hwnas.predictors.kernels.read import Kernel

MIN_SAMPLES = 8
"""Fewest timed kernels of a type to fit its regressor."""

RANGE_SLACK = 0.15
"""How far (in the log-scaled feature units, about 16% of a size) a feature may lie outside
the fitted range before a kernel counts as extrapolated."""

EXTRAPOLATION_STD = 0.35
"""Standard deviation (of the log) added per unit of distance outside the fitted range."""

SIBLING_STD = 0.5
"""Standard deviation (of the log) added to a prediction by another kind of the same op (a
grouped convolution predicted by the dense convolutions' regressor): about 1.65x either way."""

MAX_STD = 2.0
"""Largest standard deviation of the log a prediction is given."""

FLOOR_MS = 1e-4
"""Smallest in-network kernel time (ms) a regressor is fitted on (0.1 microseconds)."""

PRIOR_NS_PER_WORK = {"compute": 0.0126, "memory": 0.104}
"""Time per unit of :func:`~hwnas.predictors.kernels.features.work` (ns per
multiply-accumulate or element, the runtime's call overhead taken off) of a kernel of a type
nobody timed, by :func:`~hwnas.predictors.kernels.features.work_class`, before any kernel of
that class was timed on the device: the medians over the 4,766 kernels of
``devices/data/cpu_ground_truth`` (ONNX Runtime, 1 thread, this project's reference CPU;
1,852 convolutions and matrix products, 2,914 other kernels). Their log spread around the
median is 1.2-1.3 (1.0 around a log-log fit), which is what ``UNSEEN_REL_STD`` of
:mod:`~hwnas.predictors.kernels.model` allows for. On another CPU they are scaled by its speed
on one probe kernel of the class (:meth:`KernelRegressors.use_speed`,
:func:`~hwnas.predictors.kernels.timing.device_speed`): this project's second CPU, a shared
2-core VM, took 3.2-3.6 times (convolution) and 3.4-3.7 times (elementwise) the reference
CPU's time."""


@dataclass
class TypeModel:
    """The regressor of one kernel type.

    Attributes:
        forest: the fitted ``RandomForestRegressor`` (log ms).
        low: per feature, the smallest fitted value, shape (F,).
        high: per feature, the largest, shape (F,).
        resid_std: out-of-bag residual standard deviation of the log.
        samples: timed kernels it was fitted on.
    """

    forest: object
    low: np.ndarray
    high: np.ndarray
    resid_std: float
    samples: int


@dataclass
class KernelPrediction:
    """Predictions for kernels, arrays of shape (n,).

    Attributes:
        log_mean: predicted log of the time alone (log ms); NaN for unseen types.
        log_std: its standard deviation; NaN for unseen types.
        status: "fitted", "extrapolated" or "unseen" per kernel.
        distance: how far outside the fitted range (0 inside), in feature units.
    """

    log_mean: np.ndarray
    log_std: np.ndarray
    status: list[str]
    distance: np.ndarray

    overhead_ms: float = 0.0

    @property
    def median_ms(self) -> np.ndarray:
        """Predicted time inside a network in ms (the median, ``exp(log_mean)``)."""
        return np.exp(self.log_mean)

    @property
    def alone_ms(self) -> np.ndarray:
        """Predicted time alone in ms (the median plus the per-call overhead)."""
        return np.exp(self.log_mean) + self.overhead_ms


@dataclass
class KernelRegressors:
    """Per-type regressors of kernel times.

    Args:
        min_samples: fewest kernels of a type to fit it.
        trees: trees per forest.
        seed: random seed of the forests.
    """

    min_samples: int = MIN_SAMPLES
    trees: int = 64
    seed: int = 0
    models: dict[str, TypeModel] = field(default_factory=dict)
    overhead_ms: float = 0.0
    ns_per_work: dict[str, float] = field(default_factory=lambda: dict(PRIOR_NS_PER_WORK))
    own_rate: set[str] = field(default_factory=set)
    speed: dict[str, float] = field(default_factory=dict)

    def fit(
        self, kernels: Sequence[Kernel], values_ms: Sequence[float], overhead_ms: float = 0.0
    ) -> KernelRegressors:
        """Fit one forest per type with at least ``min_samples`` kernels.

        Args:
            kernels: timed kernels.
            values_ms: their times alone (ms > 0); a kernel whose time is not a finite
                positive number (a store edited by hand) is left out of every fit.
            overhead_ms: the runtime's per-call overhead, subtracted from every time.
        """
        from sklearn.ensemble import RandomForestRegressor

        self.overhead_ms = float(overhead_ms) if np.isfinite(overhead_ms) else 0.0
        values = np.asarray(values_ms, dtype=np.float64).reshape(-1)
        usable = np.isfinite(values) & (values > 0)
        if not usable.all():
            kernels = [k for k, ok in zip(kernels, usable) if ok]
            values = values[usable]
        net = values - self.overhead_ms
        y_all = np.log(np.maximum(net, FLOOR_MS))
        types = [kernel_type(k) for k in kernels]
        x_all = feature_matrix(kernels)
        self.ns_per_work = {c: r * self.speed.get(c, 1.0) for c, r in PRIOR_NS_PER_WORK.items()}
        self.own_rate = set()
        classes = np.array([work_class(k) for k in kernels])
        rate = np.exp(y_all) * 1e6 / np.maximum([work(k) for k in kernels], 1.0)
        for c in PRIOR_NS_PER_WORK:  # this device's own rate where it timed enough kernels
            if np.sum(classes == c) >= self.min_samples:
                self.ns_per_work[c] = float(np.median(rate[classes == c]))
                self.own_rate.add(c)
        self.models = {}
        for t in sorted(set(types)):
            rows = np.array([i for i, tt in enumerate(types) if tt == t])
            if len(rows) < self.min_samples:
                continue
            x, y = x_all[rows], y_all[rows]
            forest = RandomForestRegressor(
                n_estimators=self.trees,
                min_samples_leaf=1,
                max_features=0.6,
                oob_score=True,
                random_state=self.seed,
                n_jobs=1,
            ).fit(x, y)
            oob = getattr(forest, "oob_prediction_", None)
            resid = float(np.sqrt(np.mean((oob - y) ** 2))) if oob is not None else 0.1
            self.models[t] = TypeModel(forest, x.min(0), x.max(0), resid, len(rows))
        return self

    def use_speed(self, speed: dict[str, float]) -> None:
        """Scale the reference CPU's time per unit of work (:data:`PRIOR_NS_PER_WORK`) by
        ``speed`` (work class -> this device's time over the reference CPU's on the class's
        probe kernel) for the classes this device has not timed enough kernels of."""
        self.speed = dict(speed)
        for c, r in PRIOR_NS_PER_WORK.items():
            if c not in self.own_rate:
                self.ns_per_work[c] = r * self.speed.get(c, 1.0)

    def counts(self) -> dict[str, int]:
        """Kernel type -> kernels its regressor was fitted on."""
        return {t: m.samples for t, m in self.models.items()}

    def predict(self, kernels: Sequence[Kernel]) -> KernelPrediction:
        """Predicted log time, its standard deviation and status of each kernel."""
        n = len(kernels)
        log_mean, log_std = np.full(n, np.nan), np.full(n, np.nan)
        distance = np.zeros(n)
        status = ["unseen"] * n
        if not n:
            return KernelPrediction(log_mean, log_std, status, distance, self.overhead_ms)
        types = [kernel_type(k) for k in kernels]
        x_all = feature_matrix(kernels)
        for t in set(types):
            rows = np.array([i for i, tt in enumerate(types) if tt == t])
            x = x_all[rows]
            own = self.models.get(t)
            # a convolution kind never timed (grouped, with only dense ones timed): the op's
            # nearest timed kind, counted as extrapolated and widened by SIBLING_STD
            candidates = [own] if own is not None else self._siblings(t)
            best = None
            for model in candidates:
                below = np.maximum(model.low - RANGE_SLACK - x, 0)
                above = np.maximum(x - model.high - RANGE_SLACK, 0)
                dist = np.max(np.maximum(below, above), axis=1)
                if best is None or dist.mean() < best[1].mean():
                    best = (model, dist)
            if best is None:
                continue
            model, dist = best
            per_tree = np.stack([tree.predict(x) for tree in model.forest.estimators_])
            mu, spread = per_tree.mean(0), per_tree.std(0)
            std = np.sqrt(spread**2 + model.resid_std**2) + EXTRAPOLATION_STD * dist
            if own is None:
                std = std + SIBLING_STD
            log_mean[rows], log_std[rows] = mu, np.minimum(std, MAX_STD)
            distance[rows] = dist
            for r, d in zip(rows, dist):
                status[r] = "extrapolated" if d > 0 or own is None else "fitted"
        return KernelPrediction(log_mean, log_std, status, distance, self.overhead_ms)

    def guess_ms(self, kernel: Kernel) -> float:
        """A time (ms, inside a network: no call overhead) for a kernel of a type no regressor
        covers: its :func:`~hwnas.predictors.kernels.features.work` at the median time per
        unit of the kernels of its class timed on this device (compute- or memory-bound), or
        at :data:`PRIOR_NS_PER_WORK` (scaled by :meth:`use_speed`) where fewer than
        ``min_samples`` were."""
        return 1e-6 * self.ns_per_work[work_class(kernel)] * max(work(kernel), 1.0)

    def _siblings(self, kernel_type_name: str) -> list[TypeModel]:
        """The regressors of the other kinds of the same op ("Conv/dense" for "Conv/grouped";
        none for a type without a kind)."""
        op, _, kind = kernel_type_name.partition("/")
        if not kind:
            return []
        return [
            m for t, m in self.models.items() if t.partition("/")[0] == op and t != kernel_type_name
        ]
