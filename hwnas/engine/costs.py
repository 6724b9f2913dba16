"""Cost models: what a search knows of candidates' device costs before measuring them.

One interface, :class:`CostModel`: the cost of architectures with its uncertainty
(:meth:`CostModel.predict`, mean and standard deviation in ms or mJ) and, for supernets, the
expected cost under independent categorical distributions over the decisions
(:meth:`CostModel.expected`, differentiable). Cost models are made by name from
:data:`COST_MODELS`, each factory taking a :class:`CostRequest`:

- ``table``: a recorded device's table (exact values; for a supernet, the lookup table fitted on
  it, :func:`hwnas.supernet.cost.fit_table_lut`).
- ``predicted``: a meta-learned predictor adapted to the device's values of the space's
  reference set (HELP, Lee et al., NeurIPS 2021) by :func:`calibrate`, the one calibration step
  of hwnas (few-shot table search and supernets both use it).
- ``measured``: a supernet's blocks (or subnets) timed on a live device
  (:func:`hwnas.supernet.cost.measured_model`).
- ``flops``: multiply-accumulates of a supernet's subnets (:func:`hwnas.supernet.cost.flops_lut`).
- ``kernel``: the kernel-level predictor of a live ONNX Runtime device, at the space's
  deployment size (:func:`hwnas.engine.kernel_cost.kernel_model`; the default for declared
  spaces' latency on such a device).

Cost-aware strategies (``frontier``, ``surrogate``) choose which architectures to query by
their cost, so they receive the cost model in a :class:`CostContext` (a live device's is
:class:`CalibratedOnUse`: its reference set is measured when the search first asks). The
evaluator still obtains each queried architecture's cost through the device (and the store),
so reported numbers are the device's.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from hwnas.devices.base import Device
from hwnas.errors import HwnasError
from hwnas.registry import Registry
from hwnas.spaces.base import Arch, SearchSpace


class CostModel(ABC):
    """Device cost of architectures of one space.

    Attributes:
        metric: "latency_ms", "energy_mj" or "mflops" (the unit of every value).
        source: where the numbers come from, for labels ("recorded:FILE:COLUMN",
            "predicted:nasbench201", "lut-fit:...").
        fit: quality of the model where it was fitted ({"r2", "spearman_rho", "mape_pct"...}).
    """

    metric: str = "latency_ms"
    source: str = ""
    fit: dict[str, Any]

    lookup_table: ClassVar[bool] = False
    """The lookup-table ability: the cost is a sum of per-choice terms, so the model gives
    :meth:`expected` costs under choice probabilities (a supernet's hardware term) and judges
    candidates against a target (``min_cost``, ``indices``, ``judged``, ``margin``:
    :class:`hwnas.supernet.cost.MultilinearLUT`). Declared by the class, not type-checked."""

    lut_samples: ClassVar[int | None] = None
    """How a supernet's lookup table is fitted on this model (:func:`hwnas.supernet.cost.lut_of`):
    None, on its costs of every architecture of an enumerable space (else of 4000 sampled); a
    number N for a model that is slow to query (each prediction times kernels), on the
    :attr:`reference` networks plus N sampled architectures, the table then judged against the
    reference networks' measured costs."""

    reference: tuple[list[Arch], np.ndarray] | None = None
    """(architectures, measured costs in the model's unit) the model was calibrated on, where
    it keeps them: what a lookup table fitted on it is judged against."""

    @abstractmethod
    def predict(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        """(mean, standard deviation) of each architecture's cost, each of shape (len(archs),);
        NaN where the model has no value (an architecture missing from a table)."""

    def cost(self, arch: Arch) -> float:
        """Cost of one architecture (ms, mJ or MFLOPs)."""
        return float(self.predict([arch])[0][0])

    def known_archs(self) -> list[Arch] | None:
        """The only architectures the model has a cost for, where it prices a finite set of a
        space too large to enumerate (a recorded table of FBNet's or OFA's sample): a search's
        candidates are then those; None (the default) where it prices any architecture."""
        return None

    def expected(self, probs: Sequence[Any]) -> Any:
        """Expected cost (torch scalar) under per-decision probabilities ``probs[d]`` (K_d,).

        Raises:
            HwnasError: the model gives no expectation (only lookup tables do).
        """
        raise HwnasError(f"cost model {self.source or type(self).__name__} has no expected cost")

    def describe(self) -> dict[str, Any]:
        """JSON-able description for summaries."""
        return {"metric": self.metric, "source": self.source, **self.fit}

    def report_to(self, on_candidate: Callable[[str, str], None] | None) -> None:
        """Say each architecture this model measures to ``on_candidate`` (arch text, event),
        as a search's candidates are (:func:`hwnas.jobs.table.run`'s ``on_candidate``); a
        model that measures nothing has nothing to say."""
        return None

    def full_table(self) -> np.ndarray | None:
        """The exact cost of every architecture of an indexed space, shape (len(space),), in
        index order (NaN where unknown), for a model that is a table; None for any other."""
        return None


class TableCostModel(CostModel):
    """A recorded device's values of every architecture of a space (exact, standard deviation
    0; NaN for architectures outside the table).

    Raises:
        HwnasError: the device has no table for the space and metric.
    """

    def __init__(self, space: SearchSpace, device: Device, metric: str):
        column = device.table(space.name, metric)
        if column is None:
            raise HwnasError(
                f"device '{device.name}' has no recorded {metric} for space '{space.name}'"
            )
        self.space, self.column, self.metric = space, np.asarray(column, dtype=float), metric
        self.source = device.table_source(space.name, metric)
        self.fit = {}

    def full_table(self) -> np.ndarray:
        return self.column

    def known_archs(self) -> list[Arch] | None:
        """The architectures the table has a value for, in row order (for a space too large
        to enumerate, FBNet's or OFA's, the recorded sample is all a search can price); None
        for a space whose rows are not indexed."""
        from hwnas.spaces import IndexedSpace, ability

        indexed = ability(self.space, IndexedSpace)
        if indexed is None:
            return None
        rows = np.flatnonzero(np.isfinite(self.column) & (self.column > 0))
        return [indexed.arch_at(int(i)) for i in rows]

    def predict(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        out = np.full(len(archs), np.nan)
        for k, arch in enumerate(archs):
            try:
                out[k] = self.column[self.space.index(arch)]
            except HwnasError:
                pass
        return out, np.zeros(len(archs))


class PredictorCostModel(CostModel):
    """An adapted predictor (:mod:`hwnas.predictors`) behind the cost-model interface.

    Args:
        predictor: the adapted predictor.
        label: what to call it in sources ("nasbench201-help").
        fit: the calibration it was adapted on ({"archs": n, ...}).
    """

    def __init__(self, predictor: Any, label: str, fit: dict[str, Any] | None = None):
        self.predictor = predictor
        self.metric = str(predictor.metric)
        self.source = f"predicted:{label}"
        self.fit = dict(fit or {})

    def predict(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        mean, std = self.predictor.predict(list(archs))
        return np.asarray(mean, dtype=float), np.asarray(std, dtype=float)


def calibrate(
    predictor: Any, space: SearchSpace, archs: Sequence[Arch], values: np.ndarray, metric: str
) -> PredictorCostModel:
    """Adapt ``predictor`` (a fresh, un-adapted :class:`hwnas.predictors.Predictor`) to a
    device's measured ``values`` of ``archs`` (ms or mJ): the one calibration step of hwnas.
    Values the predictor took for gross errors are named in the model's ``fit``
    (``suspect_values``: arch -> probability), which summaries report.

    Raises:
        HwnasError: fewer than 3 values, or values that are not positive.
    """
    predictor.fit(list(archs), np.asarray(values, dtype=float), metric)
    fit: dict[str, Any] = {"calibration_archs": len(archs)}
    suspects = predictor.suspect_values()
    if suspects:  # values the fit took for gross errors: the summary names them
        fit["suspect_values"] = {str(archs[i]): round(p, 3) for i, p in suspects.items()}
    return PredictorCostModel(predictor, predictor.name, fit)


@dataclass
class CostRequest:
    """What a cost-model factory may use.

    Attributes:
        space: the search space.
        device: the device whose costs are modelled.
        profiler: device + store, for factories that measure (reference set, blocks).
        metric: "latency_ms" or "energy_mj".
        predictor: predictor artifact name or folder (``predicted``); default the space's.
        supernet: the supernet, when the model must give :meth:`CostModel.expected`.
        seed: seed of any sampling the factory does.
        calibration: (architectures, values in the metric's unit) already taken on the device
            (a few-shot search's measurement budget): ``predicted`` calibrates on them instead
            of measuring the reference set.
        on_use: make the model now but take its measurements when a cost is first asked for
            (``predicted`` on a live device: :class:`CalibratedOnUse`), so a search checks its
            inputs before any measurement and a strategy that never asks costs nothing.
        extra: factory-specific callbacks (``log``, ``status``, ``on_measured``).
    """

    space: SearchSpace
    device: Device
    profiler: Any = None
    metric: str = "latency_ms"
    predictor: str | None = None
    supernet: Any = None
    seed: int = 0
    calibration: tuple[Sequence[Arch], np.ndarray] | None = None
    on_use: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def table_model(request: CostRequest) -> CostModel:
    """``table``: the device's recorded values (a supernet search fits its lookup table on
    them: :func:`hwnas.supernet.cost.cost_model_for`)."""
    device = request.device
    if request.supernet is not None and device.table(request.space.name, request.metric) is None:
        instead = "measured" if device.runs_models else "predicted"
        raise HwnasError(f"device '{device.name}' has no recorded table; use cost={instead}")
    return TableCostModel(request.space, request.device, request.metric)


MIN_CLEAN_REFERENCES = 6
"""A reference network whose live measurement stays too noisy (after the profiler's waits and
retries) is left out of the calibration while at least this many of the reference set are
clean; with fewer, the noisy values are used as measured (a flagged median still orders the
networks by cost; every architecture a search queries is measured itself). Either way the
cost model's ``fit`` says so, and the search goes on."""


def predicted_model(request: CostRequest) -> CostModel:
    """``predicted``: the predictor calibrated on the device's reference-set values, taken
    through the profiler (10 networks timed live, or read from a recorded table), or on the
    values the request carries (``calibration``); with ``on_use``, a :class:`CalibratedOnUse`
    that does so when first asked. A supernet search fits its lookup table on its predictions
    (:func:`hwnas.supernet.cost.cost_model_for`). Reference measurements that stay too noisy do
    not stop it (:data:`MIN_CLEAN_REFERENCES`).

    Raises:
        HwnasError: a space without a reference set, a device that cannot give those values.
    """
    if request.on_use:
        return CalibratedOnUse(dataclasses.replace(request, on_use=False))
    from hwnas.measure import NoisyMeasurementError, arch_workload
    from hwnas.predictors import load_predictor
    from hwnas.predictors.calibration import reference_archs
    from hwnas.predictors.featurize import get_featurizer

    space, metric = request.space, request.metric
    predictor = load_predictor(request.predictor or space.name, space.name)
    if request.calibration is not None:  # values already taken (a few-shot search's)
        archs, values = request.calibration
        return calibrate(predictor, space, list(archs), np.asarray(values), metric)
    dataset = get_featurizer(space.name).dataset  # the networks the features describe
    if not request.device.can_measure:  # imported values: those it has, not the whole set
        return _calibrate_stored(predictor, request, dataset)
    refs = reference_archs(space)
    values, noisy = [], []
    say = request.extra.get("on_candidate")  # the CLI's progress line: what is measured now
    for i, a in enumerate(refs):
        if say is not None:
            say(f"reference set {i + 1}/{len(refs)} {a.text}", "measuring")
        try:
            values.append(request.profiler.measure(arch_workload(space, a, dataset), metric).value)
        except NoisyMeasurementError as exc:  # stayed too noisy: see MIN_CLEAN_REFERENCES
            values.append(exc.measurement.value)
            noisy.append(i)
    if say is not None:
        say("", "done")
    note: dict[str, Any] = {}
    if noisy and len(refs) - len(noisy) >= MIN_CLEAN_REFERENCES:
        keep = [i for i in range(len(refs)) if i not in noisy]
        refs, values = [refs[i] for i in keep], [values[i] for i in keep]
        note = {"noisy_references": f"{len(noisy)} left out (too noisy to use)"}
    elif noisy:
        note = {"noisy_references": f"{len(noisy)} used as measured (flagged noisy)"}
    model = calibrate(predictor, space, refs, np.array(values), metric)
    model.fit.update(note)
    return model


def _calibrate_stored(predictor: Any, request: CostRequest, dataset: str) -> PredictorCostModel:
    """``predictor`` calibrated on the values a device that takes no new ones holds (an
    imported device): the reference set's it has, then the other stored architectures of the
    space, at most :data:`hwnas.predictors.base.DEFAULT_CALIBRATION` (as a few-shot search
    on it calibrates).

    Raises:
        HwnasError: fewer than 3 such values.
    """
    from hwnas.errors import DeviceUnavailableError, UnrecordedError
    from hwnas.measure import arch_workload
    from hwnas.predictors.base import DEFAULT_CALIBRATION
    from hwnas.predictors.calibration import reference_archs, stored_archs

    space, metric = request.space, request.metric
    device, profiler = request.device, request.profiler
    stored = stored_archs(device, profiler.store, space, [metric]) if profiler.store else []
    archs, values = [], []
    for a in dict.fromkeys([*reference_archs(space), *stored]):
        if len(archs) >= DEFAULT_CALIBRATION:
            break
        try:
            values.append(profiler.measure(arch_workload(space, a, dataset), metric).value)
        except (DeviceUnavailableError, UnrecordedError):  # not imported
            continue
        archs.append(a)
    if len(archs) < 3:
        raise HwnasError(
            f"device '{device.name}' has {len(archs)} {metric} values of space '{space.name}' "
            f"networks at {dataset} size; at least 3 are needed (hwnas refset export --space "
            f"{space.name}, then hwnas measure import --device {device.name})"
        )
    return calibrate(predictor, space, archs, np.array(values), metric)


COST_MODELS: Registry = Registry("cost model")
COST_MODELS.register("table", table_model)
COST_MODELS.register("predicted", predicted_model)
COST_MODELS.register("measured", "hwnas.supernet.cost:measured_model")
COST_MODELS.register("flops", "hwnas.supernet.cost:flops_model")
COST_MODELS.register("kernel", "hwnas.engine.kernel_cost:kernel_model")


def auto_kind(space: SearchSpace, device: Device, metric: str) -> str:
    """The cost model used when none is named: the device's table where it has one; a
    predictor calibrated on the device's values where it can neither run models nor take new
    values (an imported device: ``measured`` would time nothing); the kernel-level predictor
    at deployment size for a declared space's latency on a live ONNX Runtime device; else
    measurements."""
    if device.table(space.name, metric) is not None:
        return "table"
    if not device.can_measure and not device.runs_models:
        return "predicted"
    live_ort = getattr(device, "runtime_name", None) == "ort" and device.runs_models
    if metric == "latency_ms" and live_ort and space.supernet_name == "declared":
        return "kernel"
    return "measured"


def make_cost_model(kind: str, request: CostRequest) -> CostModel:
    """The cost model ``kind`` ("auto", "table", "predicted", "measured", "flops", "kernel").

    Raises:
        UnknownNameError: an unknown kind.
        HwnasError: a kind the device or the search cannot give.
    """
    if kind == "auto":
        kind = auto_kind(request.space, request.device, request.metric)
    return COST_MODELS.get(kind)(request)


@dataclass
class CostContext:
    """What a cost-aware strategy may know before measuring.

    Attributes:
        space: the search space.
        cost: cost model of the search objective (ms or mJ); None when the device has no
            cheap cost model.
        latency: cost model of the latency in ms (for a latency limit), or None when ``cost``
            is the latency.
        max_latency: the latency limit in ms, or None.
        budget: the search budget in accuracy queries.
        dataset: the dataset whose accuracy is searched ("" where unknown).
    """

    space: SearchSpace
    cost: CostModel | None = None
    latency: CostModel | None = None
    max_latency: float | None = None
    budget: int = 300
    dataset: str = ""


def table_costs(space: SearchSpace, device: Device, metric: str) -> CostModel | None:
    """The ``table`` cost model of a device (from :data:`COST_MODELS`), or None if it has no
    table for this space and metric."""
    if device.table(space.name, metric) is None:
        return None
    return make_cost_model("table", CostRequest(space, device, metric=metric))


class CalibratedOnUse(CostModel):
    """The ``predicted`` cost model of a live device, calibrated when first used: the space's
    reference set is measured through the profiler (taken once, kept in the store) the first
    time a cost is asked for, so a search checks its inputs before any measurement and a
    strategy that never asks costs nothing.

    Args:
        request: what :func:`predicted_model` needs (space, device, profiler, metric).

    Made by ``predicted`` for a request with ``on_use``.
    """

    def __init__(self, request: CostRequest):
        self.request = request
        self.metric = request.metric
        self.source = f"predicted:{request.predictor or request.space.name}"
        self.fit = {"calibration": "reference set, measured when the search starts"}
        self._model: CostModel | None = None

    def report_to(self, on_candidate: Callable[[str, str], None] | None) -> None:
        """Say each reference architecture measured to ``on_candidate`` (arch text, event), as
        a search's candidates are (:func:`hwnas.jobs.table.run`'s ``on_candidate``)."""
        self.request.extra["on_candidate"] = on_candidate

    def calibrated(self) -> CostModel:
        """The calibrated model (measures the reference set on the first call).

        Raises:
            HwnasError: the device cannot measure a reference architecture.
        """
        if self._model is None:
            self._model = predicted_model(self.request)
            self.source, self.fit = self._model.source, dict(self._model.fit)
        return self._model

    def predict(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        return self.calibrated().predict(archs)
