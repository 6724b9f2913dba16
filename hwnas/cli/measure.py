"""``hwnas measure``: time architectures or ONNX files on a device and store the results."""

from __future__ import annotations

import json
from pathlib import Path

import click

from hwnas.cli.options import DEVICE, SpaceLastGroup, device_options, dim_option, store_option
from hwnas.paths import read_bounded_text
from hwnas.spaces import space_option


@click.group("measure", invoke_without_command=True, cls=SpaceLastGroup)
@click.option("--device", "-d", default=None, help="Device name (see `hwnas devices`).", **DEVICE)
@device_options
@click.option("--arch", "archs", multiple=True, metavar="ARCH",
              help="Architecture: an arch string, or its index in a numbered space such as "
              "nasbench201 (repeatable).")
@click.option(
    "--archs",
    "archs_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="File with one architecture per line ('#' starts a comment), or a CSV with an arch "
    "column (hwnas predict's --archs, pareto.csv).",
)
@click.option(
    "--onnx",
    "onnx_files",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="ONNX model file (repeatable); a dynamic batch axis takes --batch-size.",
)
@click.option(
    "--space",
    default="nasbench201",
    show_default=True,
    callback=space_option,
    help="Search space of --arch (a name, or a space file's path).",
)
@click.option(
    "--dataset",
    default=None,
    help="Dataset of --arch (default: cifar100, or the space's first dataset).",
)
@click.option("--batch-size", type=int, default=1, show_default=True, help="Batch size.")
@dim_option("The batch axis takes --batch-size (or a --dim naming it).")
@store_option
@click.pass_context
def measure_group(ctx, device, runtime, tracker, key, target, trials, archs, archs_file,
                  onnx_files, space, dataset, batch_size, dims, store):  # fmt: skip
    """Measure latency (and energy where the device has a meter) of architectures or ONNX
    models on DEVICE, and store them (taken once per device, runtime and model).

    \b
    hwnas measure --device cpu --arch '|nor_conv_3x3~0|+|...|'
    hwnas measure --device cpu --runtime tvm --archs archs.txt
    hwnas measure --device rpc --tracker 127.0.0.1:9190 --key rasp5 --onnx model.onnx
    hwnas measure import --device myboard calibration.csv   # values timed elsewhere
    """
    if ctx.invoked_subcommand is not None:
        return
    from hwnas.errors import HwnasError

    if device is None and not (archs or archs_file or onnx_files):
        click.echo(ctx.get_help())
        return
    if device is None:
        raise click.UsageError("Missing option '--device' / '-d'.")
    if not (archs or archs_file or onnx_files):
        raise HwnasError("nothing to measure: give --arch ARCH, --archs FILE or --onnx FILE")
    if batch_size < 1:
        raise HwnasError(f"--batch-size must be at least 1, got {batch_size}")
    from hwnas.measure import model_workloads

    dev = _open_device(device, runtime, tracker, key, target, trials)
    texts = list(archs) + (_read_archs(archs_file) if archs_file else [])
    workloads = model_workloads(texts, list(onnx_files), space, dataset, batch_size, dims)
    _check_recorded(dev, workloads)
    _measure(dev, workloads, store)


def _check_recorded(dev, workloads) -> None:
    """Before any work: an architecture a recorded table lacks is refused in one line that
    says what to do instead (predict it; where the table measured one cell of each isomorphism
    class, the cell of its class that was measured).

    Raises:
        HwnasError: a workload's architecture has no value in the device's table.
    """
    from hwnas.errors import HwnasError
    from hwnas.predictors.calibration import as_recorded
    from hwnas.spaces import get_space

    for w in workloads:
        if w.arch is None:
            continue
        space = get_space(w.arch.space)
        # a recorded device without this space's table (an imported one stores its values)
        if dev.table_spaces and all(dev.table(space.name, m) is None for m in dev.metrics):
            others = ", ".join(dev.table_spaces)
            raise HwnasError(
                f"device '{dev.name}' has no recorded table for space '{space.name}'"
                + (f" (it has: {others}): give --space {others.split(', ')[0]}" if others else "")
            )
        got = as_recorded(dev, space, [w.arch], dev.metrics)  # a live device: the arch itself
        if got and not got[0][1]:
            continue
        hint = f"predict it: hwnas predict --device {dev.name} --arch '{w.arch.text}'"
        if got:  # its class's measured cell
            alike = got[0][0]
            hint = (
                f"the table measured one cell per isomorphism class, and '{alike.text}' (index "
                f"{space.index(alike)}) computes the same function; or {hint}"
            )
        raise HwnasError(
            f"device '{dev.name}' has no recorded value for '{w.arch.text}' (index "
            f"{space.index(w.arch)}): {hint}"
        )


def _read_archs(path: Path) -> list[str]:
    """The architectures of an ``--archs`` file: one per line ('#' starts a comment), or the
    ``arch`` column of a CSV whose header has one (what ``hwnas predict --archs`` reads, and
    ``pareto.csv``: :func:`hwnas.predictors.calibration.csv_rows`).

    Raises:
        HwnasError: unreadable, or no architecture in it.
    """
    from hwnas.errors import HwnasError

    try:
        text = read_bounded_text(path)
    except OSError as exc:
        raise HwnasError(f"cannot read --archs file {path}: {exc.strerror}") from None
    first = next((ln for ln in text.splitlines() if ln.strip()), "")
    cells = {c.strip().strip('"').lstrip("\ufeff") for c in first.replace(";", ",").split(",")}
    if "arch" in cells:  # a CSV header with an arch column
        from hwnas.predictors.calibration import csv_rows

        archs = [(row.get("arch") or "").strip() for _, row in csv_rows(path)[1]]
    else:
        archs = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    archs = [a for a in archs if a]
    if not archs:
        raise HwnasError(f"--archs file {path} lists no architecture")
    return archs


def _open_device(name, runtime, tracker, key, target, trials, require_reachable=True):
    from hwnas.devices import get_device

    overrides: dict = {}
    if tracker is not None or key is not None:
        overrides["rpc"] = {"tracker": tracker, "key": key}
    if target is not None:
        overrides["target"] = parse_target(target)
    if trials is not None:
        overrides["tvm"] = {"trials_per_task": trials}
    dev = get_device(name, runtime=runtime, overrides=overrides)
    if (target is not None or trials is not None) and dev.runtime_name != "tvm":
        from hwnas.errors import HwnasError

        raise HwnasError(
            f"--target and --trials apply to the TVM runtime; device '{dev.name}' runs "
            f"{dev.runtime} (add --runtime tvm)"
        )
    if require_reachable:
        dev.require_reachable()
    return dev


def parse_target(text: str):
    """``--target``: "host", "cuda", or a TVM JSON target."""
    from hwnas.errors import HwnasError

    if text in ("host", "cuda"):
        return text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        value = None
    if not isinstance(value, dict) or "kind" not in value:
        raise HwnasError(
            f"--target must be host, cuda or a TVM JSON target such as "
            f'\'{{"kind": "llvm", "mtriple": "aarch64-linux-gnu"}}\', got {text!r}'
        )
    return value


def _measure(dev, workloads, store_path) -> None:
    from hwnas.cli.progress import TerminalReporter
    from hwnas.cli.render import Console, one_line, print_table
    from hwnas.measure import flag_cause, measure_models

    console = Console(emoji=False)
    # minutes per model where TVM tunes it or a board runs it: said while it lasts
    reporter = TerminalReporter(Console(emoji=False, stderr=True))
    done = measure_models(dev, workloads, store_path, reporter)
    c = done.counts
    flagged = sum(r.latency.flagged for r in done.models)
    rows = []
    for r in done.models:
        m, energy, rel_ci = r.latency, r.energy, r.latency.extra.get("rel_ci")
        rows.append(
            (
                one_line(r.label),  # a file name's newline must not split its row
                f"{m.value:.4f}",
                # a table's value has no spread to show (0.00 read as a perfectly steady run)
                "-" if r.how == "recorded" or m.known_cv != m.known_cv else f"{100 * m.cv:.2f}",
                f"{100 * rel_ci:.2f}" if rel_ci is not None else "-",
                str(m.extra.get("rounds", "-")),
                f"{energy.value:.4f}" if energy is not None else "-",
                r.how,
            )
        )
    print_table(
        console,
        one_line(f"{dev.name} ({dev.runtime}): {done.store or 'recorded table'}"),
        ("model", "ms", "CV %", "CI +-%", "rounds", "mJ", "how"),
        rows,
        keys=("model",),
        right=("ms", "CV %", "CI +-%", "rounds", "mJ"),
    )
    console.print(
        f"{c.taken} measured, {c.reused} from the store, {c.read} read from a table; "
        "ms = median latency, CI = 95% interval of the median, mJ = energy per inference"
    )
    batches = sorted({r.latency.batch_size for r in done.models if r.latency.batch_size > 1})
    if batches:  # a table measured at batch 256: its values are a batch's, not one input's
        console.print(f"ms and mJ are per batch of {', '.join(map(str, batches))}, not per input")
    for r in done.models:
        if r.warning:
            click.echo(one_line(f"warning: {r.label}: {r.warning}"), err=True)
    if dev.runtime.startswith("tvm"):
        console.print(
            one_line(
                f"TVM: {c.tuned_workloads} new workload(s) tuned in {c.tuning_s:.1f} s, "
                f"compile {c.compile_s:.1f} s (database: {dev.engine.folder / 'tuning'})"
            ),
            markup=False,
        )
    if flagged:  # the values are shown with their flag: what was asked for, honestly marked
        causes = [
            flag_cause(r.latency, dev.max_cv, dev.max_wait_share)
            for r in done.models
            if r.latency.flagged
        ]
        shorts = " or ".join(dict.fromkeys(c[0] for c in causes))
        fixes = " or ".join(dict.fromkeys(c[2] for c in causes))
        console.print(
            f"{flagged} measurement(s) FLAGGED ({shorts}) after waiting for a quieter moment "
            "and measuring again; the values above are the medians measured, stored flagged "
            f"and measured again next time (quiet the machine, or {fixes} in the device "
            "profile)",
            markup=False,
        )
