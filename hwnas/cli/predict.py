"""``hwnas predict``: latency or energy of models on a device, from a few of its measurements."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.cli.options import store_option


@click.command("predict")
@click.option("--space", default="nasbench201", show_default=True, help="Search space.")
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
    help="Predictor artifact (hwnas predictor list), folder, or kind (flops, regressor). "
    "Default: the space's artifact.",
)
@store_option
def predict_cmd(space, calibration, device, metric, runtime, onnx_files, arch_texts, archs, out,
                predictor, store):  # fmt: skip
    """Adapt a predictor to a device from a few of its measurements (CAL.csv, or the device's
    stored reference-set values) and predict models: ONNX files, architectures, or every row
    of ARCHS.csv, with a standard deviation.

    \b
    hwnas predict --calibration refset/calibration.csv --onnx model.onnx
    hwnas predict --device pixel3 --onnx model.onnx
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
    sp = get_space(space)
    pred = load_predictor(predictor or space, space)
    models = [replace(load_graph_model(p), label=str(p)) for p in onnx_files]
    models += [parse_model(sp, t, Path.cwd(), "--arch") for t in arch_texts]
    if archs is not None:
        models += read_archs(archs, sp)
    cal_models, cal_values, cal_metric, where = _calibration(
        sp, calibration, device, metric, runtime, store
    )
    pred.fit(cal_models, cal_values, cal_metric)
    mean, std = pred.predict(models)
    if out is not None:
        write_predictions(out, models, mean, std, cal_metric)
    unit = "ms" if cal_metric == "latency_ms" else "mJ"
    shown = len(onnx_files) + len(arch_texts)
    for m, v, s in zip(models[:shown], mean[:shown], std[:shown]):
        click.echo(f"{m}: {v:.4g} {unit} (std {s:.2g} {unit})")
    label = pred.name + (f" ({pred.path})" if pred.path else "")
    click.echo(
        f"predictor {label}: adapted on {len(cal_models)} {cal_metric} values {where}; "
        f"predicted {len(models)} model(s)" + (f" -> {out}" if out is not None else ""),
        err=True,
    )


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
    if dev.table(sp.name, metric) is None:
        path = store or default_store_path()
        if isinstance(path, Path) and not path.is_file():
            raise HwnasError(
                f"device '{dev.name}' has no recorded table for {sp.name} and the measurement "
                f"store {path} does not exist: run `hwnas refset measure --device {dev.name}`"
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
            + f"; at least {MIN_CALIBRATION} are needed: run `hwnas refset measure --device "
            f"{dev.name}" + ("" if sp.name == "nasbench201" else f" --space {sp.name}") + "`"
        )
    source = "its recorded table" if st is None else f"the store {st.path}"
    return (
        [v.arch for v in usable],
        np.array([v.value for v in usable]),
        metric,
        f"of device {dev.name} from {source}",
    )
