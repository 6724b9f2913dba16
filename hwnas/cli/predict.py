"""``hwnas predict``: latency or energy of architectures on a new device, from a few of its
measurements."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("predict")
@click.option("--space", default="nasbench201", show_default=True, help="Search space.")
@click.option(
    "--calibration",
    "calibration",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="CAL.csv",
    help="Measurements on the device: columns arch and latency_ms (or energy_mj); the "
    "reference set (hwnas refset export) is the intended calibration.",
)
@click.option(
    "--archs",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="ARCHS.csv",
    help="Architectures to predict: column arch (arch strings, indices or ONNX file paths).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="PRED.csv",
    help="Predictions: arch, latency_ms (or energy_mj), std.",
)
@click.option(
    "--predictor",
    default=None,
    metavar="NAME|PATH",
    help="Predictor artifact (hwnas predictor list), folder, or kind (flops, regressor). "
    "Default: the space's artifact.",
)
def predict_cmd(space, calibration, archs, out, predictor):
    """Adapt a predictor to a device from CAL.csv and predict every architecture of ARCHS.csv,
    with a standard deviation."""
    from rich.console import Console

    from hwnas.predictors import load_predictor
    from hwnas.predictors.calibration import read_archs, read_calibration, write_predictions
    from hwnas.spaces import get_space

    sp = get_space(space)
    pred = load_predictor(predictor or space, space)
    cal = read_calibration(calibration, sp)
    models = read_archs(archs, sp)
    pred.fit(cal.models, cal.values, cal.metric)
    mean, std = pred.predict(models)
    write_predictions(out, models, mean, std, cal.metric)
    where = pred.path
    Console(stderr=True).print(
        f"predictor {pred.name}" + (f" ({where})" if where else "") + f": adapted on "
        f"{len(cal.models)} {cal.metric} values from {calibration}; predicted "
        f"{len(models)} architectures -> {out}"
    )
