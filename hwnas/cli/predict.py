"""``hwnas predict``: latency or energy of models on a device, from a few of its measurements."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.cli.options import RUNTIME, SpaceLast, dim_option, store_option
from hwnas.spaces import space_option


@click.command("predict", cls=SpaceLast)
@click.option(
    "--space",
    default=None,
    callback=space_option,
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
    type=RUNTIME,
    default=None,
    help="With --device: the runtime whose stored measurements to use (live devices).",
)
@click.option(
    "--onnx",
    "onnx_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="MODEL.onnx",
    help="A model to predict (repeatable): its graph is read from the file; mean, std and "
    "90% interval are printed.",
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
    help="Write every prediction: arch, latency_ms (or energy_mj), std, low90, high90, "
    "predictor.",
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
    default=2000,  # hwnas.predictors.kernels.device.KERNEL_BUDGET (not imported: startup)
    show_default=True,
    help="Kernel-level predictor: new kernels it may time on the device (each once, kept in "
    "the store); 0 predicts from the kernels already timed.",
)
@dim_option("A dynamic batch axis is predicted at 1 unless a --dim names it.")
@store_option
def predict_cmd(space, calibration, device, metric, runtime, onnx_files, arch_texts, archs, out,
                predictor, kernel_budget, dims, store):  # fmt: skip
    """Predict latency (or energy) of models on a device: ONNX files, architectures, or every
    row of ARCHS.csv, with a standard deviation and a 90% interval (the kernel-level
    predictor's own; else mean +- 1.645 std, from 0).

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
    from hwnas.cli.render import one_line
    from hwnas.errors import HwnasError
    from hwnas.onnx_inputs import check_dims
    from hwnas.predictors import PREDICTORS
    from hwnas.predictors.calibration import (
        archs_onnx_files,
        onnx_cell_path,
        parse_model,
        read_archs,
        write_predictions,
    )
    from hwnas.predictors.predict import onnx_model, predict_models
    from hwnas.spaces import get_space

    if calibration is not None and device is not None:
        raise HwnasError(
            "give the device's measurements one way: --calibration CAL.csv or --device D, not "
            "both"
        )
    if calibration is None and device is None:
        raise HwnasError("give the device's measurements: --calibration CAL.csv or --device D")
    if not (onnx_files or arch_texts or archs):
        raise HwnasError("nothing to predict: give --onnx MODEL.onnx, --arch ARCH or --archs FILE")
    if archs is not None and out is None:
        raise HwnasError("--archs writes its predictions to a file: add --out PRED.csv")
    if out is not None:  # before any work: a folder that cannot take the file is one line
        from hwnas.paths import check_writable

        check_writable(Path(out).expanduser().parent, "--out's folder")
    only_onnx = not arch_texts and archs is None
    if space is None and only_onnx and predictor is not None and predictor not in PREDICTORS:
        # ONNX models need no --space: an artifact named for them brings its own (and its
        # calibration file's), not "for space fbnet, not nasbench201"; arch strings keep
        # the default space, where a mismatch is named as such
        from hwnas.predictors.artifacts import load_predictor

        space = load_predictor(predictor).space_name
    sp = get_space(space or "nasbench201")
    named = [p for p in (onnx_cell_path(t, Path.cwd()) for t in arch_texts) if p is not None]
    if archs is not None:
        named += archs_onnx_files(archs)
    check_dims(list(onnx_files) + named, dims)
    onnx_models = [onnx_model(p, dims) for p in onnx_files]
    arch_models = [parse_model(sp, t, Path.cwd(), "--arch", dims) for t in arch_texts]
    shown = {id(m) for m in onnx_models + arch_models}  # printed; --archs rows go to --out
    if archs is not None:
        arch_models += read_archs(archs, sp, dims)
    from hwnas.cli.progress import TerminalReporter
    from hwnas.cli.render import Console

    results = predict_models(
        onnx_models, arch_models, sp, device=device, calibration=calibration, metric=metric,
        runtime=runtime, predictor=predictor, kernel_budget=kernel_budget, store=store,
        note=lambda line: click.echo(one_line(line), err=True),  # each note is one line
        reporter=TerminalReporter(Console(emoji=False, stderr=True)),  # minutes on a new device
    )  # fmt: skip
    cal_metric = results[0].metric if results else metric
    if out is not None:
        import numpy as np

        write_predictions(
            out, [r.model for r in results], np.array([r.value for r in results]),
            np.array([r.std for r in results]), cal_metric, [(r.low, r.high) for r in results],
            [r.source for r in results],
        )  # fmt: skip
        click.echo(one_line(f"{len(results)} prediction(s) -> {out}"), err=True)
    unit = "ms" if cal_metric == "latency_ms" else "mJ"
    # a table recorded at batch 256 adapts the predictor to whole batches: its numbers are too
    from hwnas.cost_record import search_batch, unit_of

    per = unit_of(cal_metric, search_batch(device)) if device is not None else unit
    # models predicted by different predictors in one call: each line says which (the FLOPs
    # stand-in for one at the floor, another artifact for a model nearer its networks)
    mixed = len({r.source for r in results if id(r.model) in shown}) > 1
    for r in results:
        if id(r.model) not in shown:
            continue
        interval = f"; 90% interval {r.low:.4g}-{r.high:.4g} {unit}" if r.low is not None else ""
        known = (
            f"; {device}'s table records {r.recorded:.4g} {unit}" if r.recorded is not None else ""
        )
        if r.stored is not None:  # measured (or imported): what a search on it would use
            known = f"; measured {r.stored:.4g} {unit} on {device} (the measurement store)"
        # one line per model, whatever its file is named (a newline in it is shown escaped)
        by = f"; predicted by {r.source}" if mixed else ""
        click.echo(
            one_line(
                f"{r.model}: {r.value:.4g} {per} (std {float(f'{r.std:.2g}'):g} {unit}"
                f"{interval}{by}){known}"
            )
        )
