"""Search on a device with few measurements: predict costs, measure only to calibrate and verify.

1. Calibrate: measure the space's reference set on the device (table reads for a recorded
   device, live runs for a reachable one, stored values for an imported one) and adapt a
   meta-learned predictor to it (:mod:`hwnas.predictors`).
2. Search: the usual study, with costs predicted by the adapted predictor
   (:class:`PredictedEvaluator`, sources ``predicted:<artifact>``).
3. Verify: measure the final candidates. Under a latency limit, the most accurate candidate
   whose predicted latency meets the limit is measured; if its measured latency misses the
   limit, the predictor is re-adapted with the new value and the next candidate is tried, until
   one is verified within the limit by measurement (``best``) or the budget is spent. The
   measurements left then go to more accurate candidates that may still meet the limit (the
   predictor's error is larger on some devices than its spread says), largest expected gain
   first (accuracy gain times the predicted probability of meeting the limit), re-adapting
   after each; ``best`` is the most accurate one verified within the limit. The search itself
   considers every candidate with at least :data:`MIN_P_FEASIBLE` chance of meeting the limit.
   Otherwise the Pareto architectures are measured, most accurate first.

``--measurement-budget N`` caps the device values a search may use (calibration and
verification together; default :data:`DEFAULT_MEASUREMENT_BUDGET`), so that a recorded
device behaves like a new one: only N of its table values are read. The count is reported as
``device_measurements`` in ``summary.json``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwnas.cost_record import CostRecord, precision_target
from hwnas.devices import recorded_cells
from hwnas.engine.costs import (
    CostContext,
    CostModel,
    CostRequest,
    PredictorCostModel,
    make_cost_model,
)
from hwnas.engine.evaluate import Evaluation
from hwnas.engine.frontier import MIN_P_FEASIBLE, ndtr
from hwnas.engine.loop import (
    DeviceLost,
    SearchResult,
    SearchSettings,
    TrialRecord,
    run_search,
    summarise,
)
from hwnas.errors import DeviceLostError, HwnasError, UnrecordedError
from hwnas.measure import NoisyMeasurementError, Profiler, arch_workload
from hwnas.predictors import Predictor
from hwnas.predictors.base import DEFAULT_CALIBRATION
from hwnas.predictors.calibration import as_recorded, reference_archs, stored_archs
from hwnas.progress import SILENT, Reporter
from hwnas.spaces.base import Arch, SearchSpace

DEFAULT_MEASUREMENT_BUDGET = DEFAULT_CALIBRATION
"""Device measurements of a few-shot search when no budget is given (20): the 10 reference
architectures and up to 10 verifications; on a device that cannot measure, the most stored
values it is calibrated on."""

MIN_MEASUREMENT_BUDGET = 4
"""3 calibration values and 1 verification."""


class BudgetSpent(HwnasError):
    """The measurement budget does not allow another device measurement."""


class MeasurementBudget:
    """Device values of architectures, counted per architecture and capped.

    Args:
        profiler: device + store (measure-once).
        space: the search space.
        dataset: the dataset networks are built for.
        metrics: metrics obtained for each measured architecture.
        cap: most architectures that may be measured (or read).
    """

    def __init__(
        self, profiler: Profiler, space: SearchSpace, dataset: str, metrics: list[str], cap: int
    ):
        self.profiler = profiler
        self.space = space
        self.dataset = dataset
        self.metrics = metrics
        self.cap = cap
        self.values: dict[str, dict[str, CostRecord]] = {}
        self._target = precision_target(profiler.device)

    @property
    def used(self) -> int:
        """Architectures measured so far (the ``device_measurements`` of the summary)."""
        return len(self.values)

    @property
    def left(self) -> int:
        return self.cap - self.used

    def measure(self, arch: Arch) -> dict[str, CostRecord]:
        """metric -> the cost of ``arch``; free if already measured.

        Raises:
            BudgetSpent: the cap is reached.
            DeviceUnavailableError: the device cannot measure it (an imported device without
                this architecture).
        """
        if arch.text in self.values:
            return self.values[arch.text]
        if self.used >= self.cap:
            raise BudgetSpent(f"measurement budget of {self.cap} spent")
        w = arch_workload(self.space, arch, self.dataset)
        got = {}
        for metric in self.metrics:
            got[metric] = CostRecord.of_measurement(self.profiler.measure(w, metric), self._target)
        self.values[arch.text] = got
        return got

    def stored(self, arch: Arch) -> dict[str, CostRecord] | None:
        """Values of ``arch`` in the store (without measuring), counted if used."""
        store = self.profiler.store
        if store is None:
            return None
        w = arch_workload(self.space, arch, self.dataset)
        dev = self.profiler.device
        got = {}
        for metric in self.metrics:
            m = store.lookup(dev.name, dev.runtime, metric, w.model_hash, w.input_shape)
            if m is None:
                return None
            got[metric] = CostRecord.of_measurement(m, self._target)
        return got


class PredictedEvaluator:
    """Accuracy from the space's table, costs from adapted predictors.

    Args:
        space: a space with ``table_accuracy`` and ``index``.
        dataset: dataset whose accuracy is used.
        predictors: metric -> cost model of an adapted predictor (:func:`adapt_all`).
        label: the predictor's name, for the sources (``predicted:<label>``).
    """

    def __init__(
        self,
        space: SearchSpace,
        dataset: str,
        predictors: dict[str, FloorChecked],
        label: str,
        held: np.ndarray | None = None,
    ):
        self.space = space
        self.dataset = dataset
        self.predictors = predictors
        self.label = label
        self.held = held
        self._accuracy = space.table_accuracy(dataset)
        self._source = space.accuracy_source(dataset)
        self.accuracy_queries = 0

    def costs(self, archs: list[Arch]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """metric -> (predicted values, standard deviations) of ``archs``."""
        return {m: p.predict(archs) for m, p in self.predictors.items()}

    def records(self, archs: list[Arch]) -> list[dict[str, CostRecord]]:
        """Per architecture, metric -> its predicted cost: the adapted predictor's, or where
        that is at its floor the FLOPs fallback's, with its own source (:class:`FloorChecked`).
        """
        from hwnas.datasets import is_chance_level

        classes = self.space.dataset(self.dataset).num_classes
        chance = np.array([
            is_chance_level(float(self._accuracy[self.space.index(a)]), classes) for a in archs
        ], dtype=bool)  # fmt: skip
        out: list[dict[str, CostRecord]] = [{} for _ in archs]
        for metric, model in self.predictors.items():
            mean, sd, refit = model.predict_marked(archs, chance)
            for i in range(len(archs)):
                source = model.fallback_source if refit[i] else f"predicted:{self.label}"
                out[i][metric] = CostRecord.predicted(metric, mean[i], sd[i], source)
        return out

    @property
    def calibrated_on(self) -> int:
        """How many device values the predictors are adapted on now."""
        return max(int(p.fit.get("calibration_archs", 0)) for p in self.predictors.values())

    def evaluate(self, arch: Arch) -> Evaluation:
        """The table's accuracy and each metric's predicted cost, with its 90% interval.

        Raises:
            UnrecordedError: on a recorded device, an architecture its tables lack (it could
                never be verified; a search skips it); one predicted at the floor by both the
                predictor and FLOPs (unpriced; skipped too).
        """
        index = self.space.index(arch)
        if self.held is not None and not self.held[index]:
            raise UnrecordedError(f"no recorded value for {arch.text}: it cannot be verified")
        costs = self.records([arch])[0]
        if any(not np.isfinite(c.value) for c in costs.values()):  # floored, FLOPs too
            raise UnrecordedError(f"{arch.text}: predicted at the predictor's floor: unpriced")
        self.accuracy_queries += 1
        accuracy = float(self._accuracy[index])
        w = arch_workload(self.space, arch, self.dataset)
        return Evaluation(arch, accuracy, self._source, costs, w.model_hash)


@dataclass
class FewShotPlan:
    """What prepare resolved for a few-shot search.

    Attributes:
        predictor: the un-adapted predictor (one per metric is made from its name).
        predictor_name: the name or path it was loaded from.
        budget: the measurement cap.
        metrics: metrics to predict (the objective's, and latency under a latency limit).
    """

    predictor: Predictor
    predictor_name: str
    budget: int
    metrics: list[str]
    extra: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        path = self.predictor.path
        return {
            "name": self.predictor.name,
            "path": str(path) if path is not None else None,
            "requested": self.predictor_name,
        }

    @property
    def predictor_source(self) -> str:
        """Where a fresh copy of the predictor is loaded from: its folder, else its name."""
        path = self.predictor.path
        return str(path) if path is not None else self.predictor_name


class FloorChecked(CostModel):
    """An adapted predictor whose predictions at its floor are predicted again by FLOPs, as
    ``hwnas predict`` does for ONNX models (:func:`hwnas.predictors.predict.refit_floored`),
    but for chance-level cells, whose floor is kept (``keep`` of :meth:`predict_marked`).

    A mean at or below :data:`hwnas.predictors.predict.FLOORED` times the smallest calibration
    value is the predictor's linear head gone below zero, not a cost: a search that took it
    put a 58.8% NAS-Bench-201 cell at 0.0047 mJ (6.2 mJ on the device, whose three
    convolutions do not reach the cell's output) at the cheap end of the front. Such an
    architecture is priced by FLOPs scaled on the same calibration values, with a standard
    deviation of at least its mean, and its source says so (:attr:`fallback_source`); one that
    FLOPs puts at the floor too is unpriced (NaN: a search leaves it out). The architectures
    refitted are said by their source.

    Args:
        model: the adapted predictor's cost model.
        archs: the calibration architectures it was adapted on.
        values: their values (ms or mJ).
    """

    def __init__(self, model: PredictorCostModel, archs: list[Arch], values: np.ndarray):
        from hwnas.predictors.predict import FLOORED

        self.model, self.archs, self.values = model, list(archs), np.asarray(values, dtype=float)
        self.metric, self.source, self.fit = model.metric, model.source, model.fit
        self.floor = FLOORED * float(np.min(self.values)) * (1 + 1e-9)
        self.fallback_source = (
            f"{FALLBACK_SOURCE}{len(self.archs)} values "
            f"({model.source.removeprefix('predicted:')} at its floor)"
        )
        self._flops: Any = None

    def predict_marked(
        self, archs, keep: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(means, standard deviations, whether each was predicted again by FLOPs); ``keep``
        (a boolean per architecture) marks those whose floor is kept: a cell at chance level,
        whose output ignores its input (a device's runtime folds it to near nothing: the
        Pixel 3's table records 0.004-0.006 ms for such cells, where FLOPs gave 3-46 ms), as
        ``hwnas predict`` keeps it for the space's own architectures.

        Raises:
            HwnasError: the ``flops`` predictor cannot be loaded or fitted (where one is
                floored).
        """
        mean, std = self.model.predict(archs)
        floored = mean <= self.floor
        if keep is not None:
            floored &= ~np.asarray(keep, dtype=bool)
        low = np.flatnonzero(floored)
        refit = np.zeros(len(mean), dtype=bool)
        if not len(low):
            return mean, std, refit
        if self._flops is None:
            from hwnas.predictors.artifacts import load_predictor

            self._flops = load_predictor("flops").fit(self.archs, self.values, self.metric)
        f_mean, f_std = self._flops.predict([archs[i] for i in low])
        mean, std = np.array(mean, dtype=float), np.array(std, dtype=float)
        for i, v, sd in zip(low, f_mean, f_std):
            refit[i] = True
            mean[i], std[i] = (float(v), float(max(sd, v))) if v > self.floor else (np.nan,) * 2
        return mean, std, refit

    def predict(self, archs) -> tuple[np.ndarray, np.ndarray]:
        mean, std, _refit = self.predict_marked(archs)
        return mean, std


FALLBACK_SOURCE = "predicted:flops scaled on "
"""How the source of a cost :class:`FloorChecked` predicted by FLOPs begins."""


def _is_fallback(cost: CostRecord) -> bool:
    return cost.source.startswith(FALLBACK_SOURCE)


class HeldOnly(CostModel):
    """A cost model's predictions where a recorded device's tables hold the architecture, NaN
    elsewhere: a few-shot search on a recorded device draws its candidates from what can be
    verified there, as a search on the table does (:func:`hwnas.engine.pool.candidate_pool`
    leaves out candidates without a finite cost).

    Args:
        model: the adapted cost model.
        space: an indexed space.
        held: :func:`hwnas.devices.recorded_cells`, or None (every architecture).
    """

    def __init__(self, model: CostModel, space: SearchSpace, held: np.ndarray | None):
        self.model, self.space, self.held = model, space, held
        self.metric, self.source, self.fit = model.metric, model.source, model.fit

    def predict(self, archs) -> tuple[np.ndarray, np.ndarray]:
        mean, std = self.model.predict(archs)
        if self.held is None:
            return mean, std
        held = self.held[[self.space.index(a) for a in archs]]
        return np.where(held, mean, np.nan), np.where(held, std, np.nan)


def calibration_archs(space: SearchSpace, budget: MeasurementBudget, can_measure: bool):
    """Architectures to calibrate on: the reference set (leaving one measurement for
    verification); for a device that cannot measure, every stored architecture of the space
    (reference set first), up to the cap."""
    device = budget.profiler.device
    refs = [a for a, _ in as_recorded(device, space, reference_archs(space), budget.metrics)]
    if can_measure:
        return refs[: max(budget.cap - 1, 0)]
    stored = stored_archs(budget.profiler.device, budget.profiler.store, space, budget.metrics)
    known = set(refs)
    ordered = refs + [a for a in stored if a not in known]
    out = [a for a in ordered if budget.stored(a) is not None]
    return out[: budget.cap]


def adapt_all(plan: FewShotPlan, budget: MeasurementBudget) -> dict[str, FloorChecked]:
    """One cost model per metric: a fresh predictor calibrated on every value measured so far
    (``predicted`` from :data:`hwnas.engine.costs.COST_MODELS`, given those values), its
    floored predictions priced by FLOPs (:class:`FloorChecked`).

    Raises:
        HwnasError: fewer than 3 measured architectures.
    """
    archs = [budget.space.parse(a) for a in budget.values]
    profiler, name = budget.profiler, plan.predictor_source
    out = {}
    for metric in plan.metrics:
        values = np.array([budget.values[a.text][metric].value for a in archs])
        request = CostRequest(budget.space, profiler.device, profiler, metric, name,
                              calibration=(archs, values))  # fmt: skip
        out[metric] = FloorChecked(make_cost_model("predicted", request), archs, values)
    return out


def run_fewshot(
    settings: SearchSettings,
    space: SearchSpace,
    profiler: Profiler,
    plan: FewShotPlan,
    storage: Any = None,
    on_trial: Callable[[int, TrialRecord | None], None] | None = None,
    on_stage: Callable[[str], None] | None = None,
    costs: CostContext | None = None,
    reporter: Reporter = SILENT,
) -> tuple[SearchResult, dict[str, Any], PredictedEvaluator]:
    """Calibrate, search on predicted costs, verify by measurement (the calibration and the
    verification measurements are ``reporter`` steps, :mod:`hwnas.progress`).

    Cost-aware strategies (``frontier``, ``surrogate``) get the adapted predictors as the costs
    of every candidate (``costs`` gives the limit and budget; its cost functions are replaced).

    Returns:
        (result with measured costs for verified architectures and ``best`` verified under a
        latency limit, summary fields, the evaluator).

    Raises:
        HwnasError: fewer than 3 calibration values could be obtained, storage problems.
    """
    say = on_stage or (lambda _m: None)
    device = profiler.device
    can_measure = device.can_measure
    budget = MeasurementBudget(profiler, space, settings.dataset, plan.metrics, plan.budget)
    cal = _calibrate(space, budget, say, reporter)
    predictors = adapt_all(plan, budget)
    suspects = _suspects(predictors, budget, reporter)
    held = recorded_cells(device, space.name, plan.metrics)
    evaluator = PredictedEvaluator(
        space, settings.dataset, predictors, plan.predictor.name, held=held
    )
    say(f"search on costs predicted by {plan.predictor.name}")
    latency = predictors.get("latency_ms")
    costs = dataclasses.replace(
        costs or CostContext(space, max_latency=settings.max_latency, budget=settings.budget),
        cost=HeldOnly(predictors[settings.metric], space, held),
        latency=HeldOnly(latency, space, held) if latency is not None else None,
    )
    result = run_search(settings, space, evaluator.evaluate, storage, on_trial, costs=costs)
    calibrated_on = evaluator.calibrated_on  # the values the search's costs are predicted on
    say("verification by measurement")
    used = budget.used
    with reporter.step(f"verification on {device.name}", unit="measurements") as step:
        try:
            verification, best = verify(settings, result, evaluator, budget, plan, can_measure)
        except DeviceLostError as exc:  # the front on predicted costs is written (table.search)
            lost = DeviceLost(str(exc))
            lost.result = dataclasses.replace(
                result,
                stopped=(
                    f"stopped in the verification by measurement, after {budget.used - used} "
                    f"measurement(s): {exc}; the costs are the predictor's"
                ),
            )
            lost.evaluator = evaluator  # its accuracy queries, for summary.json
            raise lost from None
        step.update(budget.used - used)
    # every cost on one calibration: on a device of imported values, the one it has now (a
    # resumed study's untimed trials kept the predictions of the run that scored them, on 10
    # values, beside new trials priced on 20); a device that measures calibrates on the same
    # reference set every run, and its verification's re-adaptation chose what it measured
    untimed = [r for r in result.records if r.arch not in budget.values]
    if not can_measure:
        untimed = _repriced(untimed, evaluator)
    by_arch = {r.arch: r for r in untimed}
    records = [
        _with_measured(r, budget) if r.arch in budget.values else by_arch[r.arch]
        for r in result.records
        if r.arch in budget.values or r.arch in by_arch
    ]
    final = summarise(settings, records, result.trials_total, result.new_trials)
    floored = sorted(r.arch for r in untimed if any(map(_is_fallback, r.costs.values())))
    if floored:
        reporter.note(_floored_warning(floored, len(records), evaluator))
    if settings.max_latency is not None:
        final = dataclasses.replace(final, best=best)
    extra = {
        "predictor": {**plan.describe(), "calibrated_on": calibrated_on},
        "device_measurements": budget.used,
        "measurement_budget": plan.budget,
        "calibration": [
            {"arch": a.text, **{m: budget.values[a.text][m].value for m in plan.metrics}}
            for a in cal
        ],
        "verification": verification,
        "suspect_values": suspects,
        "floored": floored,
        "best_verified": (
            best is not None and best.attrs.get("verified", True)
            if settings.max_latency is not None
            else None
        ),
    }
    if settings.max_latency is not None and not can_measure and extra["best_verified"] is False:
        timed = _timed_within(result, budget, settings.max_latency)
        if timed is not None:  # the user's fallback while the proposed best is not timed
            extra["timed_within_limit"] = timed
    if settings.max_latency is not None:  # best is the verified one, not the front's top
        limit = f"{settings.max_latency:g} ms"
        extra["best_rule"] = (  # says which of the two rules chose this best
            f"most accurate architecture whose latency measured on the device is <= {limit}, "
            "among those the measurement budget verified"
            if extra["best_verified"] is not False
            else f"none could be verified within the measurement budget: the most accurate "
            f"predicted within {limit}"
            if can_measure
            else f"the most accurate predicted within {limit}, not timed on {device.name} yet"
        )
    return final, extra, evaluator


def _floored_warning(floored: list[str], scored: int, evaluator: PredictedEvaluator) -> str:
    """The one warning line of a search whose predictor put ``floored`` at its floor."""
    first = next(iter(evaluator.predictors.values()))
    return (
        f"warning: {len(floored)} of the {scored} architectures scored were predicted below a "
        f"thousandth of every calibration value by {evaluator.label} (its floor, not a "
        f"prediction): priced instead by FLOPs scaled on the same {len(first.archs)} values, "
        "with a wide interval (pareto.csv's source says so where one is on the front; "
        "summary.json's `floored` names them); time them on the device for values to rely on"
    )


def _suspects(
    predictors: dict[str, FloorChecked], budget: MeasurementBudget, reporter: Reporter
) -> dict:
    """The calibration values each metric's predictor took for gross errors (metric -> arch ->
    probability), each said in a warning line."""
    from hwnas.predictors.predict import gross_error_warning

    suspects = {
        m: c.fit["suspect_values"] for m, c in predictors.items() if "suspect_values" in c.fit
    }
    device = budget.profiler.device
    recorded = bool(device.table_spaces)  # a recorded table's values: nothing to measure again
    for metric, found in suspects.items():
        for arch, p in found.items():
            value = budget.values[arch][metric].value
            reporter.note(gross_error_warning(metric, arch, value, p, recorded))
    return suspects


def _calibrate(space: SearchSpace, budget: MeasurementBudget, say, reporter: Reporter) -> list:
    """Measure the calibration architectures within ``budget`` (a ``reporter`` step); returns
    them (those too noisy to measure are left out of the values, and said).

    Raises:
        HwnasError: fewer than 3 values could be obtained.
    """
    device = budget.profiler.device
    cal = calibration_archs(space, budget, device.can_measure)
    say(f"calibration: {len(cal)} reference architectures on {device.name}")
    with reporter.step(f"calibration on {device.name}", total=len(cal), unit="archs") as step:
        for arch in cal:
            step.update(status=f"now {arch.text}")
            try:
                budget.measure(arch)
            except NoisyMeasurementError:  # stayed too noisy: calibrate on the others
                say(f"calibration: {arch.text} left out (too noisy to measure)")
            step.advance(status="")
    if budget.used < 3:
        from hwnas.predictors.calibration import dataset_hint

        hint = dataset_hint(device, budget.profiler.store, space, budget.dataset,
                            budget.metrics[0], "search with --dataset {datasets}")  # fmt: skip
        raise HwnasError(
            f"device '{device.name}' gave {budget.used} calibration values for space "
            f"'{space.name}'; at least 3 are needed"
            + (hint or " (hwnas refset export, then hwnas measure import)")
        )
    if not device.can_measure:  # a user's imported values: 1000x off if typed in seconds
        from hwnas.predictors.predict import warn_unit

        archs = [a for a in cal if a.text in budget.values]  # measured: not too noisy
        for metric in budget.metrics:
            values = [budget.values[a.text][metric].value for a in archs]
            warn_unit(space, archs, values, metric, reporter.note)
    return cal


def _with_measured(r: TrialRecord, budget: MeasurementBudget) -> TrialRecord:
    """``r`` with its measured costs in place of the predicted ones (the prediction kept as
    ``<metric>_predicted``)."""
    got = budget.values.get(r.arch)
    return _with_costs(r, got, keep_predicted=True) if got else r


def _with_costs(r: TrialRecord, new: dict[str, CostRecord], keep_predicted: bool) -> TrialRecord:
    """``r`` with the costs of ``new`` (metric -> cost) in place of its own, their attributes
    swapped too; with ``keep_predicted``, each replaced value kept as ``<metric>_predicted``."""
    costs, attrs = dict(r.costs), dict(r.attrs)
    for metric, cost in new.items():
        old = costs.get(metric)
        for key in old.attrs() if old is not None else ():
            attrs.pop(key, None)
        if keep_predicted:
            attrs[f"{metric}_predicted"] = old.value if old is not None else None
        attrs.update(cost.attrs())
        costs[metric] = cost
    return dataclasses.replace(r, costs=costs, attrs=attrs)


def _timed_within(result: SearchResult, budget: MeasurementBudget, limit: float) -> dict | None:
    """The most accurate scored architecture whose latency stored for the device (timed and
    imported) is within ``limit`` ms: ``{"arch", "accuracy", "latency_ms"}``, or None."""
    best = None
    for r in sorted(result.records, key=lambda r: -r.accuracy):
        got = budget.values.get(r.arch) or budget.stored(budget.space.parse(r.arch))
        if got is not None and got["latency_ms"].value <= limit:
            best = {"arch": r.arch, "accuracy": r.accuracy, "latency_ms": got["latency_ms"].value}
            break
    return best


def _with_predicted(r: TrialRecord, evaluator: PredictedEvaluator) -> TrialRecord:
    """``r`` with each metric's cost as the evaluator's predictors give it now (as it was,
    where it is now unpriced)."""
    now = _repriced([r], evaluator)
    return now[0] if now else r


def _repriced(records: list[TrialRecord], evaluator: PredictedEvaluator) -> list[TrialRecord]:
    """``records`` with each metric's cost as the evaluator's predictors give it now (a
    resumed study's trials were priced by the calibration of their own run); one whose cost is
    now unpriced (floored by the predictor and FLOPs) is left out."""
    if not records:
        return []
    now = evaluator.records([evaluator.space.parse(r.arch) for r in records])
    return [
        _with_costs(r, costs, keep_predicted=False)
        for r, costs in zip(records, now)
        if all(np.isfinite(c.value) for c in costs.values())
    ]


def verify(
    settings: SearchSettings,
    result: SearchResult,
    evaluator: PredictedEvaluator,
    budget: MeasurementBudget,
    plan: FewShotPlan,
    can_measure: bool,
) -> tuple[list[dict[str, Any]], TrialRecord | None]:
    """Measure final candidates within the budget (see the module docstring): under a latency
    limit :func:`_verify_within_limit`, else the front, most accurate first.

    Returns:
        (one entry per verified architecture, the verified best under a latency limit or None).
    """
    check = _Check(settings, evaluator.space, result, budget, can_measure)
    if settings.max_latency is not None:
        return _verify_within_limit(settings, result, evaluator, budget, plan, can_measure, check)
    front = sorted(result.pareto, key=lambda r: -r.accuracy)
    for r in front:
        if budget.left <= 0 and r.arch not in budget.values:
            break
        check(r.arch, {m: r.costs[m].value for m in plan.metrics if m in r.costs})
    return check.log, None


class _Check:
    """Measures one candidate within the budget (or reads it, on a device that cannot
    measure) and logs it; calling it returns {metric: its cost} or None (budget spent,
    too noisy, or not available)."""

    def __init__(self, settings, space, result: SearchResult, budget, can_measure: bool):
        self.settings, self.space, self.budget = settings, space, budget
        self.can_measure = can_measure
        self.by_arch = {r.arch: r for r in result.records}
        self.log: list[dict[str, Any]] = []

    def __call__(self, arch_text: str, predicted: dict[str, float]) -> dict[str, CostRecord] | None:
        settings, space, budget = self.settings, self.space, self.budget
        can_measure, by_arch, log = self.can_measure, self.by_arch, self.log
        arch = space.parse(arch_text)
        got = budget.values.get(arch_text)
        if got is None and can_measure:
            try:
                got = budget.measure(arch)
            except (BudgetSpent, NoisyMeasurementError):  # unverified, not fatal
                return None
        elif got is None:
            got = budget.stored(arch)
            if got is not None and budget.used < budget.cap:
                budget.values[arch_text] = got
            elif got is not None:
                return None
        if got is None:
            return None
        entry = {
            "arch": arch_text,
            "accuracy": by_arch[arch_text].accuracy,
            "predicted": predicted,
            "measured": {m: c.value for m, c in got.items()},
        }
        if settings.max_latency is not None:
            entry["within_limit"] = got["latency_ms"].value <= settings.max_latency
        log.append(entry)
        return got


def _verify_within_limit(settings, result, evaluator, budget, plan, can_measure, check):
    """Under ``--max-latency``: (1) the most accurate candidate predicted within the limit,
    measured, until one is; (2) with the measurements left, more accurate candidates that may
    meet it, the largest expected gain first. Returns (the log, the verified best or None)."""
    space, by_arch, log = evaluator.space, check.by_arch, check.log
    limit = settings.max_latency
    tried: set[str] = set()
    archs = [space.parse(r.arch) for r in result.records]
    best: TrialRecord | None = None
    while True:  # 1. the most accurate candidate predicted within the limit, until one is
        lat, sd = evaluator.predictors["latency_ms"].predict(archs)
        candidates = []
        for i, r in enumerate(result.records):
            known = budget.values.get(r.arch)
            feasible = known["latency_ms"].value <= limit if known else lat[i] <= limit
            if r.arch not in tried and feasible:
                candidates.append((r.accuracy, -lat[i], r.arch))
        if not candidates:
            break
        _acc, neg_lat, arch_text = max(candidates)
        tried.add(arch_text)
        got = check(arch_text, {"latency_ms": -neg_lat})
        if got is None:  # budget spent, or an imported device without this architecture
            if can_measure:
                return log, None
            # its costs as predicted now (chosen on them), not as the search's trial recorded
            # them before the values imported since (5.340 ms "within 5 ms" was printed)
            found = _with_predicted(by_arch[arch_text], evaluator)
            return log, dataclasses.replace(found, attrs={**found.attrs, "verified": False})
        if can_measure:  # learn from every measurement before choosing the next candidate
            evaluator.predictors = adapt_all(plan, budget)
        if got["latency_ms"].value <= limit:
            best = _with_measured(by_arch[arch_text], budget)
            break
    # 2. with the measurements left, more accurate candidates that may meet the limit
    # (the predictor's error is larger on some devices than its spread says), the
    # largest expected gain first: (accuracy gain) x P(latency <= limit)
    while can_measure and best is not None and budget.left > 0:
        lat, sd = evaluator.predictors["latency_ms"].predict(archs)
        p_ok = ndtr((limit - lat) / np.maximum(sd, 1e-9))
        gain = [
            ((r.accuracy - best.accuracy) * p_ok[i], i)
            for i, r in enumerate(result.records)
            if r.arch not in tried and r.accuracy > best.accuracy and p_ok[i] >= MIN_P_FEASIBLE
        ]
        if not gain:
            break
        _g, i = max(gain)
        arch_text = result.records[i].arch
        tried.add(arch_text)
        got = check(arch_text, {"latency_ms": float(lat[i])})
        if got is None:
            break
        evaluator.predictors = adapt_all(plan, budget)
        if got["latency_ms"].value <= limit:
            best = _with_measured(by_arch[arch_text], budget)
    return log, best


def plan_fewshot(
    settings: SearchSettings,
    space: SearchSpace,
    device,
    predictor: str | None,
    measurement_budget: int | None,
) -> FewShotPlan | None:
    """The few-shot plan of a search, or None for a search that measures every architecture.

    A search is few-shot when it is given a predictor or a measurement budget, or when its
    device cannot take new measurements (an imported device). Under a default study name,
    the study name gets ``-predicted-<artifact>-m<budget>`` so it never resumes a measured
    study.

    Raises:
        HwnasError: unknown predictor, an artifact of another space, a budget below
            :data:`MIN_MEASUREMENT_BUDGET`, a device without values for the space.
    """
    from hwnas.engine.loop import study_name
    from hwnas.predictors import load_predictor

    can_measure = device.can_measure
    if predictor is None and measurement_budget is None and can_measure:
        return None
    if measurement_budget is not None and measurement_budget < MIN_MEASUREMENT_BUDGET:
        raise HwnasError(
            f"--measurement-budget must be at least {MIN_MEASUREMENT_BUDGET} (3 calibration "
            f"values and 1 verification), got {measurement_budget}"
        )
    if "*" not in device.spaces and space.name not in device.spaces:
        raise HwnasError(
            f"device '{device.name}' has no measurements for space '{space.name}' "
            f"(it has: {', '.join(device.spaces)})"
        )
    reference_archs(space)  # a space without a reference set fails here
    pred = load_predictor(predictor or space.name, space.name)
    metrics = [settings.metric]
    if settings.max_latency is not None and "latency_ms" not in metrics:
        metrics.append("latency_ms")
    budget = measurement_budget or DEFAULT_MEASUREMENT_BUDGET
    if settings.study == study_name(settings):
        settings.study = study_name(settings, "predicted", pred.name, f"m{budget}")
    return FewShotPlan(pred, predictor or space.name, budget, metrics)
