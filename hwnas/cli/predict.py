"""``hwnas predict``: latency or energy of models on a device, from a few of its measurements."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.cli.options import store_option


@click.command("predict")
@click.option(
    "--space",
    default=None,
    help="Search space of --arch, --archs and CAL.csv (default: nasbench201). ONNX models "
    "need none: the predictor is picked for them.",
)
@click.option(
    "--calibration",
    "calibration",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="CAL.csv",
    help="Measurements on the device: columns arch and latency_ms (or energy_mj); the "
    "reference set (hwnas refset export / measure) is the intended calibration.",
)
@click.option(
    "--device",
    "-d",
    default=None,
    help="Instead of --calibration: the device's reference-set values, from its recorded "
    "table or the measurement store (hwnas refset measure --device D).",
)
@click.option(
    "--metric",
    type=click.Choice(["latency_ms", "energy_mj"]),
    default="latency_ms",
    show_default=True,
    help="With --device: which of its values to adapt on.",
)
@click.option(
    "--runtime",
    type=click.Choice(["ort", "tvm"]),
    default=None,
    help="With --device: the runtime whose stored measurements to use (live devices).",
)
@click.option(
    "--onnx",
    "onnx_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="MODEL.onnx",
    help="A model to predict (repeatable): its graph is read from the file; mean and std are "
    "printed.",
)
@click.option(
    "--arch", "arch_texts", multiple=True, metavar="ARCH", help="An architecture (repeatable)."
)
@click.option(
    "--archs",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="ARCHS.csv",
    help="Architectures to predict: column arch (arch strings, indices or ONNX file paths); "
    "needs --out.",
)
@click.option(
    "--out",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PRED.csv",
    help="Write every prediction: arch, latency_ms (or energy_mj), std.",
)
@click.option(
    "--predictor",
    default=None,
    metavar="NAME|PATH",
    help="Predictor artifact (hwnas predictor list), folder, or kind (flops, regressor, "
    "kernel). Default: the kernel-level predictor for ONNX models on a live ONNX Runtime "
    "device, else the space's artifact.",
)
@click.option(
    "--kernel-budget",
    type=click.IntRange(min=0),
    default=2000,
    show_default=True,
    help="Kernel-level predictor: new kernels it may time on the device (each once, kept in "
    "the store); 0 predicts from the kernels already timed.",
)
@store_option
def predict_cmd(space, calibration, device, metric, runtime, onnx_files, arch_texts, archs, out,
                predictor, kernel_budget, store):  # fmt: skip
    """Predict latency (or energy) of models on a device: ONNX files, architectures, or every
    row of ARCHS.csv, with a standard deviation and a 90% interval.

    ONNX models on a live ONNX Runtime device (cpu): the kernel-level predictor times the
    kernels ONNX Runtime runs for them (each once per device, kept in the store) and sums
    them. Otherwise a predictor is adapted from a few of the device's measurements (CAL.csv,
    or its stored reference-set values); for ONNX models on a device that cannot run them
    (a recorded phone) the meta-learned predictor is picked whatever --space says.

    \b
    hwnas predict --device cpu --onnx model.onnx
    hwnas predict --device pixel3 --onnx model.onnx
    hwnas predict --calibration refset/calibration.csv --onnx model.onnx
    hwnas predict --calibration cal.csv --archs archs.csv --out pred.csv
    """
    from dataclasses import replace

    from hwnas.errors import HwnasError
    from hwnas.predictors import load_predictor
    from hwnas.predictors.calibration import parse_model, read_archs, write_predictions
    from hwnas.predictors.graph import load_graph_model
    from hwnas.spaces import get_space

    if (calibration is None) == (device is None):
        raise HwnasError("give the device's measurements: --calibration CAL.csv or --device D")
    if not (onnx_files or arch_texts or archs):
        raise HwnasError("nothing to predict: give --onnx MODEL.onnx, --arch ARCH or --archs FILE")
    if archs is not None and out is None:
        raise HwnasError("--archs writes its predictions to a file: add --out PRED.csv")
    if calibration is not None and (runtime is not None or metric != "latency_ms"):
        raise HwnasError(
            "--metric and --runtime go with --device; with --calibration the value column "
            "(latency_ms or energy_mj) says what was measured"
        )
    sp = get_space(space or "nasbench201")
    onnx_models = [replace(load_graph_model(p), label=str(p)) for p in onnx_files]
    arch_models = [parse_model(sp, t, Path.cwd(), "--arch") for t in arch_texts]
    shown = {id(m) for m in onnx_models + arch_models}  # printed; --archs rows go to --out
    if archs is not None:
        arch_models += read_archs(archs, sp)
    dev = None
    if device is not None:
        from hwnas.devices import get_device

        dev = get_device(device, runtime=runtime)
        dev.check_metric(metric)
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
    results: list[tuple] = []  # (model, mean, std, low, high) in printed order
    if kernel_level and (onnx_models or predictor == "kernel"):
        kernel_models = onnx_models + (arch_models if predictor == "kernel" else [])
        results += _kernel_level(dev, kernel_models, kernel_budget, store)
        onnx_models = []
        if predictor == "kernel":
            arch_models = []
    elif onnx_models and predictor is None and calibration is None:
        results += _meta_fallback(dev, onnx_models, metric, runtime, store)
        onnx_models = []
    models = onnx_models + arch_models
    cal_metric = "latency_ms" if calibration is None else None
    if models:
        pred = load_predictor(predictor or sp.name, sp.name)
        cal_models, cal_values, cal_metric, where = _calibration(
            sp, calibration, device, metric, runtime, store
        )
        pred.fit(cal_models, cal_values, cal_metric)
        mean, std = pred.predict(models)
        results += [(m, v, s, None, None) for m, v, s in zip(models, mean, std)]
        label = pred.name + (f" ({pred.path})" if pred.path else "")
        click.echo(
            f"predictor {label}: adapted on {len(cal_models)} {cal_metric} values {where}; "
            f"predicted {len(models)} model(s)",
            err=True,
        )
    cal_metric = cal_metric or metric
    if out is not None:
        import numpy as np

        write_predictions(
            out, [r[0] for r in results], np.array([r[1] for r in results]),
            np.array([r[2] for r in results]), cal_metric,
        )  # fmt: skip
        click.echo(f"{len(results)} prediction(s) -> {out}", err=True)
    unit = "ms" if cal_metric == "latency_ms" else "mJ"
    for m, v, s, lo, hi in results:
        if id(m) not in shown:
            continue
        interval = f"; 90% interval {lo:.4g}-{hi:.4g} {unit}" if lo is not None else ""
        click.echo(f"{m}: {v:.4g} {unit} (std {s:.2g} {unit}{interval})")


def _kernel_level(dev, models, budget, store) -> list[tuple]:
    """Predictions of the kernel-level predictor on a live ONNX Runtime device (kernels timed
    through the store): (model, mean, std, low, high) each; warnings and a summary on
    stderr."""
    from hwnas.measure import Profiler
    from hwnas.paths import check_writable, default_store_path, hwnas_home
    from hwnas.predictors.kernels.device import kernel_predictor
    from hwnas.store import MeasurementStore

    dev.require_reachable()
    if store is None:
        check_writable(hwnas_home(), "HWNAS_HOME")
    st = MeasurementStore(store or default_store_path())
    try:
        kp, note = kernel_predictor(Profiler(dev, st), budget=budget)
        out = []
        for m in models:
            e = kp.estimate(m)
            lo, mid, hi, warn = kp.interval(e)
            out.append((m, mid, (hi - lo) / (2 * 1.6448536), lo, hi))
            if warn:
                click.echo(f"warning: {m}: {warn}", err=True)
        c = kp.counts
        click.echo(
            f"predictor kernel (kernel-level, ONNX Runtime's fused kernels on {dev.name}): "
            f"{c['measured']} kernel(s) timed now, the others from the store "
            f"{st.path} or the per-type regressors ({c['predicted']} predicted); {note}",
            err=True,
        )
        return out
    finally:
        st.close()


ONNX_ARTIFACTS = ("fbnet", "ofa", "nasbench201")
"""Meta-learned artifacts that may predict ONNX models on a device whose kernels cannot be
timed: each model takes the one (among those the device has reference values for) whose
reference networks are nearest to it in graph features, so the choice depends on the model,
never on --space."""


FAR = 2.0
"""A model farther than this many times the reference networks' largest nearest-neighbour gap
from every reference network (in log graph features) is flagged as unlike them."""


def _meta_fallback(dev, models, metric, runtime, store) -> list[tuple]:
    """ONNX models on a device whose kernels cannot be timed: per model, the meta-learned
    artifact of :data:`ONNX_ARTIFACTS` whose reference networks (with the device's values) are
    nearest to it in graph features, adapted on those values; says so on stderr."""
    import numpy as np

    from hwnas.errors import HwnasError
    from hwnas.predictors import load_predictor
    from hwnas.predictors.featurize import get_featurizer
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
    x = np.log1p(np.maximum(np.stack([m.features for m in models]), 0))
    dist, spread = {}, {}
    for name, (sp, cal) in usable.items():
        refs = np.log1p(np.maximum(get_featurizer(sp.name).graph(cal[0]), 0))
        dist[name] = np.min(np.linalg.norm(x[:, None, :] - refs[None, :, :], axis=2), axis=1)
        between = np.linalg.norm(refs[:, None, :] - refs[None, :, :], axis=2)
        np.fill_diagonal(between, np.inf)
        spread[name] = float(np.max(np.min(between, axis=1)))  # refs' largest gap
    names = list(usable)
    choice = np.argmin(np.stack([dist[n] for n in names]), axis=0)
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
        mean, std = pred.predict([models[i] for i in idx])
        for i, v, sd in zip(idx, mean, std):
            far = dist[name][i] / max(spread[name], 1e-9)
            if far > FAR:  # outside what the reference networks span: say so, widen
                sd = max(sd * far / FAR, 0.5 * v)
                click.echo(
                    f"warning: {models[i]}: unlike every network the predictor knows (graph "
                    f"features {far:.1f}x farther from the nearest {name} reference network "
                    "than those networks are from each other; interval widened)",
                    err=True,
                )
            out[i] = (models[i], v, sd, None, None)
        click.echo(
            f"predictor {pred.name} (meta-learned, graph features; fallback: {dev.name} {why}, "
            f"so no kernel can be timed; its reference networks are the nearest to "
            f"{len(idx)} model(s)): adapted on {len(cal_models)} {cal_metric} values {where}",
            err=True,
        )
    return [out[i] for i in range(len(models))]


def _calibration(sp, calibration, device, metric, runtime, store):
    """(models, values, metric, description) of the device's measurements."""
    from hwnas.errors import HwnasError
    from hwnas.predictors.base import MIN_CALIBRATION
    from hwnas.predictors.calibration import read_calibration

    if calibration is not None:
        cal = read_calibration(calibration, sp)
        noisy = f" ({cal.flagged} flagged rows skipped)" if cal.flagged else ""
        return cal.models, cal.values, cal.metric, f"from {calibration}{noisy}"
    import numpy as np

    from hwnas.devices import get_device
    from hwnas.paths import default_store_path
    from hwnas.predictors.calibration import stored_reference_set
    from hwnas.predictors.featurize import get_featurizer
    from hwnas.store import MeasurementStore

    dev = get_device(device, runtime=runtime)
    dev.check_metric(metric)
    dataset = get_featurizer(sp.name).dataset
    st = None
    if dev.runs_models:  # a live device measures its reference set
        refset = f"run `hwnas refset measure --device {dev.name}" + (
            "" if sp.name == "nasbench201" else f" --space {sp.name}"
        ) + "`"
    else:  # a recorded or imported device has only what it was given
        refset = f"import them with `hwnas measure import --device {dev.name} CAL.csv`"
    if dev.table(sp.name, metric) is None:
        tables = [s for s in dev.table_spaces if dev.table(s, metric) is not None]
        if tables:  # a recorded device: another of its spaces works, this one cannot
            raise HwnasError(
                f"device '{dev.name}' has no {metric} values for {sp.name} (it has recorded "
                f"tables for {', '.join(tables)}); use --space {'|'.join(tables)} or "
                "--calibration CAL.csv"
            )
        path = store or default_store_path()
        if isinstance(path, Path) and not path.is_file():
            raise HwnasError(
                f"device '{dev.name}' has no recorded table for {sp.name} and the measurement "
                f"store {path} does not exist: {refset}"
            )
        st = MeasurementStore(path)
    try:
        values = stored_reference_set(dev, st, sp, dataset, metric)
    finally:
        if st is not None:
            st.close()
    usable = [v for v in values if np.isfinite(v.value) and v.value > 0 and not v.flagged]
    if len(usable) < MIN_CALIBRATION:
        flagged = sum(v.flagged for v in values)
        raise HwnasError(
            f"device '{dev.name}' ({dev.runtime}) has {len(usable)} usable {metric} values of "
            f"the {len(values)} reference architectures of {sp.name}"
            + (f" ({flagged} flagged as noisy)" if flagged else "")
            + f"; at least {MIN_CALIBRATION} are needed: {refset}"
        )
    source = "its recorded table" if st is None else f"the store {st.path}"
    return (
        [v.arch for v in usable],
        np.array([v.value for v in usable]),
        metric,
        f"of device {dev.name} from {source}",
    )
