"""Latency (or energy) predictions of models on a device: ``hwnas predict`` and
:func:`hwnas.predict`.

Three routes, picked per model: ONNX models on a live ONNX Runtime device (the CPU) get the
kernel-level predictor (:mod:`hwnas.predictors.kernels`: the kernels ONNX Runtime runs for them,
each timed once per device and kept in the store, summed, with a 90% interval); ONNX models on
a device that cannot run them get the meta-learned artifact whose reference networks are nearest
to them (:data:`ONNX_ARTIFACTS`); architectures of a space get that space's predictor adapted on
a few of the device's measurements (a calibration file, or its reference-set values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.cost_record import UNITS, gaussian_interval
from hwnas.errors import HwnasError, UnknownNameError


@dataclass
class Prediction:
    """One model's predicted cost.

    Attributes:
        model: the model (an ONNX graph model or an architecture; ``str(model)`` is its label).
        value: the prediction, in ms (``latency_ms``) or mJ (``energy_mj``).
        std: its standard deviation (same unit).
        low, high: the 90% interval (same unit): the kernel-level predictor's own, else
            :func:`hwnas.cost_record.gaussian_interval` of ``value`` and ``std``.
        metric: "latency_ms" or "energy_mj".
        recorded: for an architecture the device's recorded table holds, that value (same
            unit; the truth the prediction estimates), else None.
        stored: for an architecture the measurement store holds a measurement of on the
            device (measured there, or brought in by ``hwnas measure import``) and its table
            does not, that value (same unit; unflagged measurements only), else None.
        source: what predicted it: ``kernel`` (the kernel-level predictor), a meta-learned
            artifact's name (``nasbench201``), or ``flops scaled (NAME at its floor)`` where
            that artifact went below zero and FLOPs scaled on the same values stand in: one
            call may mix them (each ONNX model takes the artifact nearest to it).
    """

    model: Any
    value: float
    std: float
    low: float | None
    high: float | None
    metric: str
    recorded: float | None = None
    stored: float | None = None
    source: str = ""


def check_metric_flag(dev, metric: str) -> None:
    """:meth:`~hwnas.devices.base.Device.check_metric`, its error ending with the flag that
    gives the device's other metric where the default latency was asked of a device that has
    energy alone (an imported energy calibration: "has no latency_ms measurements (it has:
    energy_mj)" did not say how to ask for it).

    Raises:
        HwnasError: the device has no ``metric``.
    """
    try:
        dev.check_metric(metric)
    except HwnasError as exc:
        others = [m for m in dev.metrics if m != metric]
        if metric != "latency_ms" or not others:
            raise
        raise HwnasError(f"{exc}: pass --metric {others[0]}") from None


def predict_models(
    onnx_models: list[Any],
    arch_models: list[Any],
    space: Any,
    *,
    device: str | None = None,
    calibration: Path | None = None,
    metric: str = "latency_ms",
    runtime: str | None = None,
    predictor: str | None = None,
    kernel_budget: int | None = None,
    store: Any = None,
    note: Callable[[str], None] = lambda line: None,
    reporter: Any = None,
) -> list[Prediction]:
    """Predict ``onnx_models`` (:func:`hwnas.predictors.graph.load_graph_model`'s) and
    ``arch_models`` (architectures of ``space``) on a device, in that order.

    Args:
        device: the device whose measurements adapt the predictor (its recorded table or the
            store's reference-set values), or None with ``calibration``.
        calibration: a CSV of the device's measurements (columns arch and latency_ms or
            energy_mj), or None with ``device``.
        metric: with ``device``: "latency_ms" or "energy_mj".
        runtime: with ``device``: the runtime replacing its profile's.
        predictor: a predictor artifact's name, "kernel" (the kernel-level predictor for
            architectures too), or None (picked per model, see the module doc).
        kernel_budget: most kernels timed now by the kernel-level predictor (None:
            :data:`hwnas.predictors.kernels.device.KERNEL_BUDGET`).
        store: the measurement store (a SQLite path or a PostgreSQL URL; default the home's).
        note: gets the lines that say which predictor was used and any warning.
        reporter: where the kernel-level predictor's work shows as a step
            (:class:`hwnas.progress.Reporter`; None: nowhere): timing a new device's constants
            and a model's new kernels takes minutes.

    Returns:
        One :class:`Prediction` per model.

    Raises:
        HwnasError: neither or both of ``device`` and ``calibration``; an unknown device,
            metric or predictor; too few usable measurements; an unreadable calibration file.
    """
    from hwnas.devices.base import METRICS
    from hwnas.predictors.artifacts import load_predictor

    if metric not in METRICS:
        raise UnknownNameError("metric", metric, list(METRICS))
    if calibration is not None and device is not None:
        raise HwnasError(
            "give the device's measurements one way: --calibration CAL.csv or --device D, not both"
        )
    if calibration is None and device is None:
        raise HwnasError("give the device's measurements: --calibration CAL.csv or --device D")
    if calibration is not None and (runtime is not None or metric != "latency_ms"):
        raise HwnasError(
            "--metric and --runtime go with --device; with --calibration the value column "
            "(latency_ms or energy_mj) says what was measured"
        )
    dev = None
    if device is not None:
        from hwnas.devices import get_device

        dev = get_device(device, runtime=runtime)
        check_metric_flag(dev, metric)
    kernel_level = (
        dev is not None
        and predictor in (None, "kernel")
        and metric == "latency_ms"
        and getattr(dev, "runtime_name", None) == "ort"
        and dev.runs_models
    )
    if predictor == "kernel" and not kernel_level:
        raise HwnasError(
            "--predictor kernel times ONNX Runtime kernels: it needs --device D of a live "
            "ONNX Runtime device (cpu) and latency_ms"
        )
    from hwnas.predictors.graph import GraphModel

    given = list(onnx_models) + list(arch_models)
    graphs = [m for m in given if isinstance(m, GraphModel)]  # ONNX files, however given
    archs = [m for m in given if not isinstance(m, GraphModel)]
    results: dict[int, tuple] = {}  # id(model) -> (model, mean, std, low, high, source)

    def put(rows: list[tuple]) -> None:
        results.update((id(r[0]), r) for r in rows)

    # what the calibrated predictor will take, known before any kernel is timed: a device
    # without the values it needs is refused before that work, not after
    calibrated = (archs if not (kernel_level and predictor == "kernel") else []) + (
        graphs if not kernel_level and (predictor is not None or calibration is not None) else []
    )
    early = None
    if calibrated:
        early = (
            load_predictor(predictor or space.name, space.name),
            _calibration(space, calibration, device, metric, runtime, store),
        )
    if kernel_level and (graphs or predictor == "kernel"):
        put(_kernel_level(dev, graphs + (archs if predictor == "kernel" else []),
                          kernel_budget, store, note, reporter))  # fmt: skip
        graphs = []
        if predictor == "kernel":
            archs = []
    else:
        warn_uncounted(graphs, note)
        if dev is not None:
            warn_batch(graphs, dev.value_batch_size, metric, dev.name, note)
        else:  # a calibration file: its column says the metric; reference sets are at batch 1
            warn_batch(graphs, 1, None, str(calibration), note)
        if graphs and predictor is None and calibration is None:
            put(_meta_fallback(dev, graphs, metric, runtime, store, note))
            graphs = []
    models = graphs + archs
    cal_metric = metric if calibration is None else None
    if models:
        assert early is not None  # every model here is one `calibrated` counted
        pred, (cal_models, cal_values, cal_metric, where) = early
        pred.fit(cal_models, cal_values, cal_metric)
        from_table = dev is not None and dev.table(space.name, cal_metric) is not None
        warn_suspects(pred, cal_models, cal_values, cal_metric, note, from_table)
        if calibration is not None or (dev is not None and not dev.can_measure):
            warn_unit(space, cal_models, cal_values, cal_metric, note)  # a user's values
        trained_on = list(pred.card.get("metrics") or [])  # a meta artifact's card lists them
        if trained_on and cal_metric not in trained_on:
            note(
                f"warning: predictor {pred.name} was meta-trained on {', '.join(trained_on)} "
                f"only: its {cal_metric} predictions assume {cal_metric} ranks the "
                f"architectures as {trained_on[0]} does (hwnas predictor list: one trained on "
                f"{cal_metric} too, --predictor NAME)"
            )
        mean, std = pred.predict(models)
        refs = _graph_features(space, cal_models) if graphs else None  # ONNX models only
        if graphs:  # ONNX models: how far from the networks the predictor was adapted on
            std = std.copy()
            for i, m in enumerate(graphs):
                std[i] = widen_far(m, mean[i], std[i], refs, "calibration", note)
        if predictor is None:  # the default: FLOPs where the meta-learned one floors
            cal = (cal_models, cal_values, cal_metric)
            mean, std, refit = refit_floored(models, mean, std, cal, refs, "calibration", note)
        else:  # the predictor the user named: its floor, said
            warn_floored(models, mean, cal_values, note)
            refit = set()
        put([(m, v, s, *_interval(v, s), source_of(pred.name, i in refit))
             for i, (m, v, s) in enumerate(zip(models, mean, std))])  # fmt: skip
        label = pred.name + (f" ({pred.path})" if pred.path else "")
        note(
            f"predictor {label}: adapted on {len(cal_models)} {cal_metric} values {where}; "
            f"predicted {len(models)} model(s)"
        )
    unit_metric = cal_metric or metric
    recorded = recorded_values(dev, space, given, unit_metric) if dev is not None else {}
    stored = {}
    if dev is not None:  # what a search on the device would be given for them: not a guess
        rest = [m for m in given if id(m) not in recorded]
        stored = stored_values(dev, space, rest, unit_metric, store)
    return [
        Prediction(
            m, float(v), float(s), lo, hi, unit_metric, recorded.get(id(m)), stored.get(id(m)),
            source,
        )
        for m, v, s, lo, hi, source in (results[id(m)] for m in given)
    ]


def source_of(name: str, floored: bool) -> str:
    """:attr:`Prediction.source` of a meta-learned artifact ``name``'s prediction, or of the
    FLOPs stand-in where it went below zero (:func:`refit_floored`)."""
    return f"flops scaled ({name} at its floor)" if floored else name


def stored_values(
    dev: Any, space: Any, models: list[Any], metric: str, store: Any = None
) -> dict[int, float]:
    """``id(model) -> value`` for each architecture of ``space`` among ``models`` whose
    ``metric`` (ms or mJ) the measurement store ``store`` (default the home's; a missing file
    is none, and is not created) holds for ``dev`` and its runtime, built for the dataset the
    predictors adapt on; flagged measurements left out."""
    from hwnas.measure import arch_workload
    from hwnas.paths import default_store_path
    from hwnas.predictors.calibration import calibration_dataset
    from hwnas.spaces import Arch
    from hwnas.store import MeasurementStore

    archs = [m for m in models if isinstance(m, Arch) and m.space == space.name]
    path = store or default_store_path()
    if not archs or (isinstance(path, Path) and not path.is_file()):
        return {}
    dataset = calibration_dataset(space)
    out = {}
    st = MeasurementStore(path)
    try:
        for m in archs:
            w = arch_workload(space, m, dataset)
            found = st.lookup(dev.name, dev.runtime, metric, w.model_hash, w.input_shape)
            if found is not None and not found.flagged and np.isfinite(found.value):
                out[id(m)] = float(found.value)
    finally:
        st.close()
    return out


def recorded_values(dev: Any, space: Any, models: list[Any], metric: str) -> dict[int, float]:
    """``id(model) -> value`` for each architecture of ``space`` among ``models`` whose
    ``metric`` (ms or mJ) the device's recorded table holds (an indexed space's table; NaN
    rows and architectures outside the table left out)."""
    from hwnas.spaces import Arch, IndexedSpace, ability

    indexed = ability(space, IndexedSpace)
    table = dev.table(space.name, metric) if indexed is not None else None
    if table is None:
        return {}
    out = {}
    for m in models:
        if not isinstance(m, Arch) or m.space != space.name:
            continue
        try:
            value = float(table[indexed.index(m)])
        except HwnasError:  # not among a sampled space's recorded architectures
            continue
        if np.isfinite(value):
            out[id(m)] = value
    return out


def _interval(mean: float, std: float) -> tuple[float | None, float | None]:
    """(low, high) of :func:`hwnas.cost_record.gaussian_interval`, (None, None) without one."""
    return gaussian_interval(float(mean), float(std)) or (None, None)


def gross_error_warning(
    metric: str, model: Any, value: float, probability: float, recorded: bool = False
) -> str:
    """The warning line for a calibration value (``value`` in ``metric``'s unit) a predictor
    took for a gross error with ``probability``
    (:meth:`hwnas.predictors.base.Predictor.suspect_values`); ``recorded``: a value of a
    recorded table, which nobody can measure again (an outlier of its table, said as such)."""
    said = (
        f"({value:.4g} {UNITS.get(metric, '')}; probability {probability:.2f} given the other "
        "calibration values), so the predictor discounted it"
    )
    if recorded:
        return (
            f"warning: the recorded {metric} of {model} in the device's table looks like a "
            f"gross error {said} (an outlier of the published table)"
        )
    return f"warning: the measured {metric} of {model} looks like a gross error {said}: " + (
        "measure it again"
    )


def warn_suspects(
    pred, models, values, metric: str, note: Callable[[str], None], recorded: bool = False
) -> None:
    """One :func:`gross_error_warning` per calibration value the adapted predictor ``pred``
    took for a gross error (``models`` and ``values``: what it was fitted on; ``recorded``:
    read from a recorded table)."""
    for i, p in pred.suspect_values().items():
        note(gross_error_warning(metric, models[i], float(values[i]), p, recorded))


def warn_unit(space, models, values, metric: str, note: Callable[[str], None]) -> None:
    """:func:`hwnas.devices.recorded.unit_warning`'s line, as a warning, where a user's
    calibration values of ``metric`` look like another unit (seconds for ms: every prediction
    would be 1000x off, said nowhere else); ``models`` that are not architectures of ``space``
    (ONNX files) are left out."""
    from hwnas.devices.recorded import unit_warning
    from hwnas.spaces import Arch

    pairs = [
        (m, v) for m, v in zip(models, values) if isinstance(m, Arch) and m.space == space.name
    ]
    line = unit_warning(space, metric, [m for m, _ in pairs], [v for _, v in pairs])
    if line:
        note(f"warning: the calibration values: {line}")


def onnx_model(path: str | Path, dims: dict[str, int] | None = None) -> Any:
    """The graph model of the ONNX file ``path``, labelled by its path, the dynamic input axes
    ``dims`` names fixed to its sizes.

    Raises:
        HwnasError: the file cannot be read as an ONNX model, or has an input hwnas cannot
            feed.
    """
    from hwnas.predictors.graph import load_graph_model

    return replace(load_graph_model(path, dims), label=str(path))


def _kernel_level(dev, models, budget, store, note, reporter=None) -> list[tuple]:
    """Predictions of the kernel-level predictor on a live ONNX Runtime device (kernels timed
    through the store): (model, mean, std, low, high) each; warnings and a summary to
    ``note``; the work as one step of ``reporter`` (a model each, the kernel being timed as
    its status)."""
    from hwnas.limits import input_size
    from hwnas.measure import Profiler
    from hwnas.paths import check_writable, default_store_path, hwnas_home
    from hwnas.predictors.graph import GraphModel
    from hwnas.predictors.kernels.device import KERNEL_BUDGET, kernel_predictor
    from hwnas.predictors.kernels.model import family_of
    from hwnas.progress import SILENT
    from hwnas.store import MeasurementStore

    budget = KERNEL_BUDGET if budget is None else budget
    for m in models:  # its kernels are read from one run of it: before any kernel is timed
        for spec in m.inputs if isinstance(m, GraphModel) else ():
            input_size(f"{m}: input '{spec.name}'", spec.shape)
    dev.require_reachable()
    if store is None:
        check_writable(hwnas_home(), "HWNAS_HOME")
    st = MeasurementStore(store or default_store_path())
    step = None  # opened once every model is read (a bad one: its line alone)

    def timed(kernel) -> None:
        if step is not None:
            step.update(status=f"timed {getattr(kernel, 'label', kernel)}")

    try:
        kp, how = kernel_predictor(Profiler(dev, st), budget=budget, on_kernel=timed)
        for m in models:  # every model read before any kernel is timed; a bad one named
            try:
                kp.kernels_of(m)
            except HwnasError as exc:
                raise HwnasError(f"{m}: {exc}") from None
        step = (reporter or SILENT).step(
            f"kernel-level prediction on {dev.name}", total=len(models), unit="models"
        )
        out = []
        for m in models:
            step.update(status=f"now {m}")
            e = kp.estimate(m)
            step.advance(status="")
            lo, mid, hi, warn = kp.interval(e, family_of(m))
            out.append((m, mid, (hi - lo) / (2 * 1.6448536), lo, hi, "kernel"))
            if warn:
                note(f"warning: {m}: {warn}")
        c = kp.counts
        note(
            f"predictor kernel (kernel-level, ONNX Runtime's fused kernels on {dev.name}): "
            f"{c['measured']} kernel(s) timed now, the others from the store "
            f"{st.path} or the per-type regressors ({c['predicted']} predicted); {how}",
        )
        return out
    finally:
        if step is not None:
            step.close()
        st.close()


ONNX_ARTIFACTS = ("fbnet", "ofa", "nasbench201")
"""Meta-learned artifacts that may predict ONNX models on a device whose kernels cannot be
timed: each model takes the one (among those the device has reference values for) whose
reference networks are nearest to it in graph features, so the choice depends on the model,
never on --space."""


FAR = 2.0
"""A model farther than this many times the reference networks' largest nearest-neighbour gap
from every reference network (in log graph features) is flagged as unlike them."""


def _graph_features(sp, models) -> np.ndarray:
    """(n, len(GRAPH_COLUMNS)) graph features of ``models``: architectures of ``sp`` (by its
    featurizer) or ONNX graph models (their own)."""
    from hwnas.predictors.featurize import get_featurizer
    from hwnas.predictors.graph import GraphModel

    archs = [m for m in models if not isinstance(m, GraphModel)]
    of_archs = iter(get_featurizer(sp.name).graph(archs) if archs else [])
    return np.stack([m.features if isinstance(m, GraphModel) else next(of_archs) for m in models])


def distance(x: np.ndarray, refs: np.ndarray) -> tuple[np.ndarray, float]:
    """(distance of each row of ``x`` (n, F) to its nearest row of ``refs`` (r, F), the
    largest of the refs' distances to their nearest other ref), in log graph features."""
    lx, lr = (np.log1p(np.maximum(a, 0)) for a in (np.atleast_2d(x), refs))
    dist = np.min(np.linalg.norm(lx[:, None, :] - lr[None, :, :], axis=2), axis=1)
    between = np.linalg.norm(lr[:, None, :] - lr[None, :, :], axis=2)
    np.fill_diagonal(between, np.inf)
    finite = np.min(between, axis=1)
    spread = float(np.max(finite[np.isfinite(finite)])) if np.isfinite(finite).any() else 0.0
    return dist, spread


def widen_far(model, mean: float, std: float, refs: np.ndarray, what: str, note) -> float:
    """``std`` of a predicted ``mean`` (ms or mJ) of an ONNX ``model``, widened when its graph
    features are more than :data:`FAR` times the reference networks' largest
    nearest-neighbour gap from every one of ``refs`` (n, F); says so to ``note``."""
    dist, spread = distance(model.features, refs)
    far = float(dist[0]) / max(spread, 1e-9)
    if far <= FAR:
        return float(std)
    note(
        f"warning: {model}: unlike every network the predictor knows (graph features "
        f"{far:.1f}x farther from the nearest {what} network than those networks are from "
        "each other; its std widened: a rough guess)"
    )
    return float(max(std * far / FAR, 0.5 * mean))


def warn_uncounted(models, note) -> None:
    """A warning per ONNX model whose graph holds operators the graph features do not count
    (:attr:`hwnas.predictors.graph.GraphModel.uncounted`): a prediction from the features
    leaves their time out."""
    for m in models:
        if m.uncounted:
            listed = ", ".join(f"{op} x{n}" for op, n in sorted(m.uncounted.items()))
            note(
                f"warning: {m}: its graph has operators this predictor's graph features do not "
                f"count ({listed}): their time is not in the prediction; the kernel-level "
                "predictor (a live ONNX Runtime device) times them"
            )


def warn_batch(models, batch: int, metric: str | None, values: str, note) -> None:
    """A warning per ONNX model exported at a batch size other than ``batch``, the one the
    adapting values were measured at (``values`` names them: a device, a calibration file).
    Graph features describe one sample, and a predictor adapted on batch-``batch`` values
    predicts the model at that batch, whatever it was exported at. A dynamic batch axis runs at
    any batch, and a first input of rank 3 may be sequence-first: no warning
    (:attr:`hwnas.predictors.graph.GraphModel.batch`)."""
    for m in models:
        if m.batch is not None and m.batch != batch:
            what = {"latency_ms": "latency", "energy_mj": "energy"}.get(metric, "value")
            note(
                f"warning: {m}: exported at batch {m.batch}, but the predictor is adapted on "
                f"{values}'s values at batch {batch}: this is its {what} at batch {batch}. "
                f"Export it at batch {batch}, or time it at batch {m.batch} on a live ONNX "
                "Runtime device (hwnas predict --device cpu, hwnas measure)"
            )


FLOORED = 1e-3
"""A prediction at or below this share of the smallest calibration value is not a latency
(energy) but the predictor's floor: its linear head extrapolated below zero."""


FLOORED_NAMED = 5
"""Floored predictions named one by one; beyond, one line counts them (an ``--archs`` file of
thousands of rows printed thousands of lines)."""


def warn_floored(models, mean, cal_values, note) -> None:
    """A warning per prediction at the floor (:data:`FLOORED`), the first
    :data:`FLOORED_NAMED` by name and the rest counted in one line."""
    floor = FLOORED * float(np.min(cal_values)) * (1 + 1e-9)
    floored = [m for m, v in zip(models, mean) if v <= floor]
    why = (
        "predicted below a thousandth of every calibration value: the predictor extrapolates "
        "below zero for it (its mean is a floor, not a prediction): time it on the device "
        "instead (hwnas measure; a device hwnas cannot run takes its value through hwnas "
        "measure import)"
    )
    for m in floored[:FLOORED_NAMED]:
        note(f"warning: {m}: {why}")
    if len(floored) > FLOORED_NAMED:
        share = f"{len(floored)} of {len(models)}"
        note(
            f"warning: {len(floored) - FLOORED_NAMED} more models ({share} in all) are "
            "predicted at the floor; calibration values in mixed units (some in s or us) do "
            "this too"
        )


def refit_floored(
    models, mean, std, cal, refs, what, note
) -> tuple[np.ndarray, np.ndarray, set[int]]:
    """The meta-learned predictions of ONNX graphs at the floor (:data:`FLOORED`: its linear
    head went below zero) predicted again by FLOPs scaled on the same calibration values (the
    ``flops`` predictor), with a standard deviation of at least the prediction itself; the
    others as they are. Each replaced one is named in a warning; one that FLOPs floors too, and
    an architecture of the artifact's own space at the floor, keep the floor and its warning
    (a few-shot search keeps it for a chance-level cell, and prices any other floored one by
    FLOPs: :class:`hwnas.engine.fewshot.FloorChecked`).

    On networks of another family than the reference networks (``python
    experiments/far_model_interval.py``: 74 device and family pairs of the recorded tables),
    the floored predictions were a factor of 205 off at the median; FLOPs scaled on the same
    values, a factor of 1.77, with 90% of them inside mean +- 1.645 std. The only table where
    the artifact floors its own space's architectures is the Pixel 3's: 284 NAS-Bench-201
    cells, every one at chance level (an output blind to the input, which the phone's runtime
    folds to near zero): the floor is a factor of 35 off at the median there, FLOPs 125.

    Args:
        models: (n,) the models predicted.
        mean: (n,) the meta-learned means (ms or mJ).
        std: (n,) their standard deviations, widened where far.
        cal: (calibration models, values (m,), metric).
        refs: (m, F) the calibration networks' graph features (for :func:`widen_far`, on
            the ONNX models among ``models``; None when there are none).
        what: how the calibration networks are named in a warning.
        note: where warnings go.

    Returns:
        (mean, std, refit): (n,) each, and the indices FLOPs predicted.
    """
    from hwnas.predictors.artifacts import load_predictor

    cal_models, cal_values, cal_metric = cal
    floor = FLOORED * float(np.min(cal_values)) * (1 + 1e-9)
    # an ONNX graph (its own features); an architecture of the artifact's space keeps its floor
    low = [i for i, v in enumerate(mean) if v <= floor and hasattr(models[i], "features")]
    refit = set(low)
    kept = [i for i in range(len(models)) if i not in refit]
    warn_floored([models[i] for i in kept], [mean[i] for i in kept], cal_values, note)
    if not low:
        return mean, std, set()
    flops = load_predictor("flops").fit(cal_models, cal_values, cal_metric)
    f_mean, f_std = flops.predict([models[i] for i in low])
    mean, std = np.array(mean, dtype=float), np.array(std, dtype=float)
    done = set()
    for i, v, sd in zip(low, f_mean, f_std):
        if v <= floor:
            warn_floored([models[i]], [v], cal_values, note)
            continue
        done.add(i)
        if hasattr(models[i], "features"):  # an ONNX model's graph: widened where far
            sd = widen_far(models[i], v, sd, refs, what, lambda _line: None)
        mean[i], std[i] = float(v), float(max(sd, v))
        note(
            f"warning: {models[i]}: the meta-learned predictor extrapolates below zero for it; "
            f"predicted instead by FLOPs scaled on the same {len(cal_values)} values (wide "
            "interval: time it for a latency to rely on)"
        )
    return mean, std, done


def _meta_fallback(dev, models, metric, runtime, store, note) -> list[tuple]:
    """ONNX models on a device whose kernels cannot be timed: per model, the meta-learned
    artifact of :data:`ONNX_ARTIFACTS` whose reference networks (with the device's values) are
    nearest to it in graph features, adapted on those values; says so to ``note``."""
    from hwnas.errors import HwnasError
    from hwnas.predictors.artifacts import load_predictor
    from hwnas.spaces import get_space

    if dev is None:  # pragma: no cover (the caller requires --device or --calibration)
        raise HwnasError("give --device D or --calibration CAL.csv")
    usable, first_error = {}, None
    for name in ONNX_ARTIFACTS:
        sp = get_space(name)
        try:
            usable[name] = (sp, _calibration(sp, None, dev.name, metric, runtime, store))
        except HwnasError as exc:
            first_error = first_error or exc
    if not usable:
        raise first_error  # type: ignore[misc]
    x = np.stack([m.features for m in models])
    refs = {name: _graph_features(sp, cal[0]) for name, (sp, cal) in usable.items()}
    names = list(usable)
    choice = np.argmin(np.stack([distance(x, refs[n])[0] for n in names]), axis=0)
    why = (
        "cannot run models" if not dev.runs_models
        else f"runs {dev.runtime}, not ONNX Runtime" if dev.runtime_name != "ort"
        else f"is asked for {metric}"
    )  # fmt: skip
    out: dict[int, tuple] = {}
    for j, name in enumerate(names):
        idx = [i for i in range(len(models)) if choice[i] == j]
        if not idx:
            continue
        sp, (cal_models, cal_values, cal_metric, where) = usable[name]
        pred = load_predictor(name, sp.name)
        pred.fit(cal_models, cal_values, cal_metric)
        from_table = dev.table(sp.name, cal_metric) is not None
        warn_suspects(pred, cal_models, cal_values, cal_metric, note, from_table)
        mine = [models[i] for i in idx]
        mean, std = pred.predict(mine)
        std = np.array([widen_far(m, v, sd, refs[name], f"{name} reference", note)
                        for m, v, sd in zip(mine, mean, std)])  # fmt: skip
        cal = (cal_models, cal_values, cal_metric)
        mean, std, refit = refit_floored(mine, mean, std, cal, refs[name],
                                         f"{name} reference", note)  # fmt: skip
        for k, (i, v, sd) in enumerate(zip(idx, mean, std)):
            out[i] = (models[i], v, sd, *_interval(v, sd), source_of(pred.name, k in refit))
        note(
            f"predictor {pred.name} (meta-learned, graph features; fallback: {dev.name} {why}, "
            f"so no kernel can be timed; its reference networks are the nearest to "
            f"{len(idx)} model(s)): adapted on {len(cal_models)} {cal_metric} values {where}",
        )
    return [out[i] for i in range(len(models))]


def _advice(dev, sp, dataset: str, refset: str) -> str:
    """``refset``, what to run for a device's missing reference values, unless the device
    cannot build the space's networks at all (an FPGA flow: hls4ml and NAS-Bench-201's
    pooling), where none can be measured; checked only on this error path (the check reads
    sampled networks)."""
    if not dev.runs_models:
        return refset
    try:
        dev.check_networks(sp, dataset)
    except HwnasError as exc:
        return f"none can be measured there ({exc})"
    return refset


def _calibration(sp, calibration, device, metric, runtime, store):
    """(models, values, metric, description) of the device's measurements."""
    from hwnas.errors import HwnasError
    from hwnas.predictors.base import MIN_CALIBRATION
    from hwnas.predictors.calibration import read_calibration

    if calibration is not None:
        from hwnas.predictors.calibration import (
            calibration_dataset,
            check_input_shapes,
            check_onnx_names,
        )

        cal = read_calibration(calibration, sp)
        check_input_shapes([cal], sp, calibration_dataset(sp), False, "hwnas predict")
        check_onnx_names([cal], sp, calibration_dataset(sp), "hwnas predict")
        noisy = f" ({cal.flagged} flagged rows skipped)" if cal.flagged else ""
        return cal.models, cal.values, cal.metric, f"from {calibration}{noisy}"
    import numpy as np

    from hwnas.devices import get_device
    from hwnas.paths import default_store_path
    from hwnas.predictors.base import DEFAULT_CALIBRATION
    from hwnas.predictors.calibration import (
        STAND_IN,
        stored_calibration_set,
        stored_reference_set,
    )
    from hwnas.predictors.featurize import get_featurizer
    from hwnas.spaces import command_line_name
    from hwnas.store import MeasurementStore

    dev = get_device(device, runtime=runtime)
    check_metric_flag(dev, metric)
    dataset = get_featurizer(sp.name).dataset
    st = None
    if dev.runs_models:  # a live device measures its reference set, as this one would
        refset = (
            f"run `hwnas refset measure --device {dev.name}"
            + ("" if sp.name == "nasbench201" else f" --space {command_line_name(sp.name)}")
            + (f" --runtime {runtime}" if runtime else "")
            + (f" --metric {metric}" if metric != "latency_ms" else "")
            + (f" --store {store}" if store else "")
            + "`"
        )
    else:  # a recorded or imported device has only what it was given (a recorded one's
        # table takes more values with --table: a plain import into it is refused)
        table = " --table" if dev.kind == "recorded" else ""
        refset = f"import them with `hwnas measure import --device {dev.name}{table} CAL.csv`"
    if dev.table(sp.name, metric) is None:
        tables = [s for s in dev.table_spaces if dev.table(s, metric) is not None]
        if tables:  # a recorded device: another of its spaces works, this one cannot
            raise HwnasError(
                f"device '{dev.name}' has no {metric} values for {sp.name} (it has recorded "
                f"tables for {', '.join(tables)}); use --space {'|'.join(tables)} or "
                "--calibration CAL.csv"
            )
        if "*" not in dev.spaces and sp.name not in dev.spaces:  # an imported device
            raise HwnasError(
                f"device '{dev.name}' has no {metric} values for {sp.name}: its values are of "
                f"{', '.join(dev.spaces)} architectures; use --space {'|'.join(dev.spaces)}, or "
                f"import them with `hwnas measure import --device {dev.name} --space {sp.name} "
                "CAL.csv`"
            )
        path = store or default_store_path()
        if isinstance(path, Path) and not path.is_file():
            raise HwnasError(
                f"device '{dev.name}' has no recorded table for {sp.name} and the measurement "
                f"store {path} does not exist: {_advice(dev, sp, dataset, refset)}"
            )
        st = MeasurementStore(path)
    hint = ""
    try:
        if st is not None and not dev.runs_models:  # imported: what its search adapts on
            values = stored_calibration_set(dev, st, sp, dataset, metric, DEFAULT_CALIBRATION)
        else:
            values = stored_reference_set(dev, st, sp, dataset, metric)
        usable = [v for v in values if np.isfinite(v.value) and v.value > 0 and not v.flagged]
        if len(usable) < MIN_CALIBRATION and st is not None and not dev.runs_models:
            from hwnas.predictors.calibration import dataset_hint

            fix = (
                f"hwnas predict adapts on {dataset}'s; search on them with `hwnas search "
                f"--device {dev.name} --dataset {{datasets}}`"
            )  # imported for another dataset's networks (hwnas measure import --dataset)?
            hint = dataset_hint(dev, st, sp, dataset, metric, fix)
    finally:
        if st is not None:
            st.close()
    if hint:
        raise HwnasError(
            f"device '{dev.name}' ({dev.runtime}) has {len(usable)} usable {metric} values "
            f"of {sp.name}'s {dataset} networks" + hint
        )
    if len(usable) < MIN_CALIBRATION:
        flagged = sum(v.flagged for v in values)
        of = (
            f"the {len(sp.reference_archs())} reference architectures of {sp.name}"
            if dev.runs_models or st is None
            else f"{sp.name} architectures stored"
        )
        raise HwnasError(
            f"device '{dev.name}' ({dev.runtime}) has {len(usable)} usable {metric} values of "
            f"{of}"
            + (f" ({flagged} flagged as noisy)" if flagged else "")
            + f"; at least {MIN_CALIBRATION} are needed: {_advice(dev, sp, dataset, refset)}"
        )
    source = "its recorded table" if st is None else f"the store {st.path}"
    stand_ins = [v.arch.text for v in usable if v.how == STAND_IN]
    if stand_ins:  # the table measured one cell per isomorphism class
        source += (
            f" ({len(stand_ins)} of them isomorphic cells standing in for reference cells the "
            f"table lacks: {', '.join(stand_ins)})"
        )
    return (
        [v.arch for v in usable],
        np.array([v.value for v in usable]),
        metric,
        f"of device {dev.name}"
        + (f" (batch {dev.value_batch_size})" if dev.value_batch_size != 1 else "")
        + f" from {source}",
    )
