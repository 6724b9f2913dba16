"""``hwnas refset export|measure``: the reference architectures as ONNX files to time anywhere,
or measured on a live device into ``calibration.csv``."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import click

from hwnas.cli.options import (
    DEVICE,
    SpaceLast,
    device_options,
    space_with_default_option,
    store_option,
)


def selection_options(f):
    """``--select``, ``-n``, ``--predictor``, ``--seed``: which architectures the device is
    measured on (:func:`hwnas.predictors.calibration.calibration_archs`)."""
    from hwnas.predictors.selection import SELECTORS

    f = click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True,
                     help="Seed of the random and nasflat selectors.")(f)  # fmt: skip
    f = click.option(
        "--predictor",
        default=None,
        help="The predictor --select active chooses for (an artifact; default the space's).",
    )(f)
    f = click.option(
        "-n",
        "count",
        type=click.IntRange(3, 1000),
        default=10,
        show_default=True,
        help="How many architectures (with --select reference: the reference set's 10 first, "
        "then random others).",
    )(f)
    return click.option(
        "--select",
        type=click.Choice(list(SELECTORS)),
        default="reference",
        show_default=True,
        help="Which architectures: reference (the space's reference set, HELP's 10: measured "
        "once, it serves every predictor); active (the n that pin down the --predictor's "
        "calibration: greedy D-optimal design; with 10, ahead of the reference set on 9 of "
        "NASFLAT's 12 device splits, behind on 3: docs/benchmarks.md); nasflat (NASFLAT's "
        "sampler); random. Other than the reference set, spaces with a table only.",
    )(f)


@click.group("refset")
def refset_group():
    """The reference set: the architectures a new device is measured on (its hardware
    embedding and the predictor's calibration)."""


def _picked(n: int, select: str, reference: int) -> str:
    """How ``n`` architectures picked by ``select`` are named: ``-n 20`` of the reference set
    is its 10 and 10 random others (it said "20 reference architectures")."""
    if select != "reference":
        return f"{n} {select}-selected"
    if n <= reference:
        return f"{n} reference"
    return f"{n} ({reference} reference and {n - reference} random other)"


VALUE_COLUMNS = ("latency_ms", "energy_mj")
"""Columns of a calibration file that hold measured values (ms, mJ)."""


@dataclass(frozen=True)
class _Filled:
    """One value cell of an existing calibration file."""

    line: int
    arch: str
    metric: str
    cell: str
    flagged: bool
    sep: str = ","
    """The file's cell separator: what a comma in ``cell`` means
    (:func:`hwnas.spreadsheet.number`)."""


def _column(name: str, path: Path) -> str:
    """A header cell as ``hwnas measure import`` names the column
    (:func:`hwnas.predictors.calibration.column_name`: ``latency (ms)`` is ``latency_ms``); a
    value column in another unit (``latency (s)``) counts as one here: its values are the
    user's, never written over."""
    from hwnas.errors import HwnasError
    from hwnas.predictors.calibration import column_name

    try:
        return column_name(name, path)
    except HwnasError:
        return "latency_ms" if name.strip().lower().startswith("latency") else "energy_mj"


def _filled(path: Path) -> tuple[bool, list[_Filled]]:
    """The values an existing calibration file holds, and whether ``hwnas refset measure``
    wrote it (its header ends with ``cv``, ``flagged``: :func:`write_calibration`); no file:
    ``(False, [])``.

    Raises:
        HwnasError: ``path`` exists but cannot be read as CSV text (another kind of file, or
            text that is not UTF-8), or has more rows or cells than a table may
            (:func:`hwnas.tables.limit_rows`): nothing may write over what cannot be checked.
    """
    import csv
    import io

    from hwnas import spreadsheet
    from hwnas.errors import HwnasError
    from hwnas.paths import read_bounded_text
    from hwnas.tables import check_cells, limit_rows

    try:
        text = read_bounded_text(path).removeprefix("\ufeff")  # a spreadsheet's BOM
        sep = spreadsheet.delimiter(text.split("\n")[0])
        check_cells(text, sep, str(path))
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=sep)
        header = [_column(h, path) for h in reader.fieldnames or []]
        reader.fieldnames = header
        rows = list(enumerate(limit_rows(reader, str(path)), start=2))
    except FileNotFoundError:
        return False, []
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise HwnasError(
            f"{path} is there but not a readable CSV file ({exc}); write to another --out (or "
            "move the file) so that it is not written over"
        ) from None
    own = header[-2:] == ["cv", "flagged"] and "input_shape" in header
    found = [
        _Filled(
            line,
            (row.get("arch") or "").strip(),
            metric,
            (row.get(metric) or "").strip(),
            (row.get("flagged") or "").strip().lower() in ("yes", "true", "1"),
            sep,
        )
        for line, row in rows
        for metric in VALUE_COLUMNS
        if (row.get(metric) or "").strip()
    ]
    return own, found


def _keep_filled(path: Path, measured: bool = False) -> None:
    """Refuse to write over a calibration file that holds values (typed in by hand, by the
    user's own timing: nothing could write them again); with ``measured``, a file written by
    ``hwnas refset measure`` itself is left to :func:`_keep_measured`.

    Raises:
        HwnasError: ``path`` has a non-empty latency_ms or energy_mj cell, or cannot be read.
    """
    from hwnas.errors import HwnasError

    own, found = _filled(path)
    if found and not (measured and own):
        by = " that hwnas refset measure did not write" if measured else ""
        raise HwnasError(
            f"{path} holds {len(found)} measured value(s){by} (line {found[0].line}: "
            f"{found[0].metric} {found[0].cell}); {'measure' if measured else 'export'} to "
            "another --out (or move the file) so that they are not written over"
        )


def _keep_measured(path: Path, new: dict, metric: str) -> None:
    """Refuse to write the values ``new`` (arch string -> value, ``metric`` in ms or mJ) over a
    file ``hwnas refset measure`` wrote whose values they would change: one it measured on
    another device, runtime, space or selection, or edited since. A value of None is one not
    measured yet: called so before any work, only the rows this run would not write at all (of
    another selection, space or metric) are refused, so that a board is not kept busy for
    minutes first. Rows marked flagged are measured again (what the command says to do with
    them). Equal means within the six significant digits the file is written with.

    Raises:
        HwnasError: one line naming the file's line, both values and their units.
    """
    import math

    from hwnas import spreadsheet
    from hwnas.errors import HwnasError

    unit = {"latency_ms": "ms", "energy_mj": "mJ"}
    for old in _filled(path)[1]:
        if old.flagged:
            continue
        writes = old.metric == metric and old.arch in new
        now = new[old.arch] if writes else None
        if writes and now is None:  # before measuring: this run writes this row again
            continue
        try:
            value = spreadsheet.number(old.cell, old.sep)
        except ValueError:
            value = math.nan
        if now is not None and math.isclose(value, now, rel_tol=1e-5):
            continue
        got = (
            f"this run gives {now:.6g} {unit[metric]}"
            if now is not None
            else f"this run writes no {old.metric} for it"
        )
        raise HwnasError(
            f"{path}:{old.line} holds {old.metric} {old.cell} {unit[old.metric]} for "
            f"{old.arch or 'an empty arch'}, {got}; measure to another --out (or move the "
            "file) so that its values are not written over"
        )


@refset_group.command("export", cls=SpaceLast)
@space_with_default_option
@click.option(
    "--dataset",
    default=None,
    help="Dataset the networks are built for (default: the one the predictors were trained "
    "on: cifar100 for nasbench201/fbnet, imagenet for ofa; a declared space's "
    "reference_dataset).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the ONNX files and calibration.csv.",
)
@selection_options
def export_cmd(space, dataset, out, select, count, predictor, seed):
    """Write the space's reference architectures (or those --select picks) to OUT as ONNX
    (opset 17, dynamic batch, random weights) with calibration.csv: fill its latency_ms column
    (or rename it energy_mj) with the values measured on the device, then `hwnas predict
    --calibration` or `hwnas measure import`."""
    import csv
    import io

    from hwnas.cli.render import Console
    from hwnas.measure import arch_workload
    from hwnas.predictors.calibration import calibration_dataset
    from hwnas.spaces import get_space

    sp = get_space(space)
    if dataset is None:  # the predictors' dataset, else the space's own reference dataset
        dataset = calibration_dataset(sp)
    sp.dataset(dataset)
    from hwnas.paths import check_writable, write_atomic

    check_writable(out, "--out")  # before any network is built
    _keep_filled(out / "calibration.csv")
    from hwnas.predictors.calibration import calibration_archs

    archs = calibration_archs(sp, select, count, predictor, seed)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    # each file written whole beside its name and renamed over it: a link there (a folder
    # handed over: calibration.csv -> ~/.bashrc) is replaced, never written through
    for n, arch in enumerate(archs):
        w = arch_workload(sp, arch, dataset)
        name = f"ref{n:02d}-{w.model_hash}.onnx"
        write_atomic(out / name, w.onnx_bytes())
        rows.append(
            {
                "arch": arch.text,
                "onnx": name,
                "input_shape": "x".join(map(str, w.input_shape)),
                "latency_ms": "",
            }
        )
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(out / "calibration.csv", text.getvalue().encode())
    Console(emoji=False, stderr=True).print(
        f"wrote {_picked(len(rows), select, len(sp.reference_archs()))} architectures of "
        f"{space} ({dataset}) to {out}: "
        "time each "
        f"ONNX file on the device (batch 1), fill calibration.csv's latency_ms column",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


@refset_group.command("measure", cls=SpaceLast)
@click.option("--device", "-d", required=True, help="Device name (see `hwnas devices`).", **DEVICE)
@device_options
@space_with_default_option
@click.option(
    "--dataset",
    default=None,
    help="Dataset the networks are built for (default: as hwnas refset export).",
)
@click.option(
    "--metric",
    type=click.Choice(["latency_ms", "energy_mj"]),
    default="latency_ms",
    show_default=True,
    help="What to put in calibration.csv (energy where the device has a meter).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder of calibration.csv (default: refset-<device>, refset-<device>-<space> for "
    "a space other than nasbench201); a file written by `hwnas "
    "refset export` there is filled in. Values there that this command did not write (typed "
    "in by hand), or that it would change, are never written over: the command stops.",
)
@store_option
@selection_options
def measure_cmd(
    device, runtime, tracker, key, target, trials, space, dataset, metric, out, store,
    select, count, predictor, seed,
):  # fmt: skip
    """Measure the space's reference architectures (or those --select picks) on DEVICE (each
    once: values already in the measurement store are reused) and write OUT/calibration.csv,
    ready for `hwnas predict --calibration` (or, for the reference set, `hwnas predict --device
    DEVICE`, which reads the store). An OUT/calibration.csv holding values typed in by hand, or
    values this run would change, is refused (measure to another --out); a value read from a
    recorded table has an empty cv (unknown)."""
    import math
    from dataclasses import replace

    from hwnas.cli.measure import _open_device
    from hwnas.cli.render import Console, print_table
    from hwnas.measure import Profiler, flag_cause
    from hwnas.paths import check_writable, default_store_path, hwnas_home
    from hwnas.predictors.calibration import (
        STAND_IN,
        as_recorded,
        calibration_archs,
        calibration_dataset,
        measure_reference_set,
        write_calibration,
    )
    from hwnas.spaces import get_space
    from hwnas.store import MeasurementStore

    sp = get_space(space)
    if dataset is None:  # as refset export: the predictors' dataset, else the space's own
        dataset = calibration_dataset(sp)
    sp.dataset(dataset)
    if out is None:  # one folder per space: a second space's values do not meet the first's
        out = Path(f"refset-{device}" + ("" if sp.name == "nasbench201" else f"-{sp.name}"))
    check_writable(out, "--out")
    _keep_filled(out / "calibration.csv", measured=True)  # before any work
    archs = calibration_archs(sp, select, count, predictor, seed)  # bad input: before any work
    dev = _open_device(device, runtime, tracker, key, target, trials)
    dev.require_metric(metric)  # an energy meter that does not count: before any work
    path = out / "calibration.csv"
    writes = {a.text: None for a, _ in as_recorded(dev, sp, archs, [metric])}
    _keep_measured(path, writes, metric)  # rows this run would not write: before any work
    if store is None and dev.stored_in_profiler:
        check_writable(hwnas_home(), "HWNAS_HOME")  # the default measurements.db
    st = MeasurementStore(store or default_store_path()) if dev.stored_in_profiler else None
    profiler = Profiler(dev, st)
    from hwnas.cli.progress import TerminalReporter

    reporter = TerminalReporter(Console(emoji=False, stderr=True))  # minutes on a board
    try:
        values = measure_reference_set(profiler, sp, dataset, metric, archs, reporter)
    finally:
        if st is not None:
            st.close()
    # a table's value (and an imported one) has no spread: its CV is unknown, not 0
    values = [
        replace(v, cv=math.nan) if v.how in ("recorded", STAND_IN) or not dev.can_measure else v
        for v in values
    ]
    _keep_measured(path, {v.arch.text: v.value for v in values}, metric)
    from hwnas.cost_record import unit_of

    batch = dev.value_batch_size  # a GPU's table at 256: each value is a whole batch's
    write_calibration(path, values, metric, sp, dataset, batch=batch)
    unit = unit_of(metric, batch)
    rows = [
        (
            v.arch.text,
            f"{v.value:.4f}",
            f"{100 * v.cv:.2f}" if v.cv == v.cv else "-",
            v.how + (", FLAGGED" if v.flagged else ""),
        )
        for v in values
    ]
    console = Console(emoji=False)
    print_table(  # an arch string too wide folds, and is printed whole below the table
        console,
        f"{'reference set' if select == 'reference' else 'architectures'} of {space} "
        f"({dataset}) on {dev.name} ({dev.runtime})",
        ("arch", unit, "CV %", "how"),
        rows,
        keys=("arch",),
        right=(unit, "CV %"),
    )
    flagged = sum(v.flagged for v in values)
    c = profiler.counts
    console.print(  # the path as typed: never read as markup ('[red]' or '[/]' in it)
        f"{c.taken} measured, {c.reused} from the store, {c.read} read from a table -> {path}",
        markup=False,
        soft_wrap=True,
    )
    if flagged:
        causes = " or ".join(
            dict.fromkeys(
                flag_cause(v.measurement, dev.max_cv, dev.max_wait_share)[0]
                for v in values
                if v.flagged and v.measurement is not None
            )
        )
        console.print(
            f"warning: {flagged} value(s) flagged ({causes or 'too noisy'}; marked in "
            "calibration.csv): quiet the machine and run the command again to measure them "
            "again",
            markup=False,
        )
    from hwnas.spaces import command_line_name

    # predict reads CAL.csv's arch strings as nasbench201's unless told (it refused them)
    typed = shlex.quote(command_line_name(sp.name))
    named = "" if sp.name == "nasbench201" else f" --space {typed}"
    by_file = f"hwnas predict{named} --calibration {shlex.quote(str(path))} --onnx MODEL.onnx"
    by_device = f"hwnas predict{named} --device {shlex.quote(dev.name)} --onnx MODEL.onnx"
    # --device reads the reference set from the store; a calibration file is at batch 1
    hint = (
        by_device if batch > 1
        else by_file if select != "reference"
        else f"{by_file} (or --device {shlex.quote(dev.name)})"
    )  # fmt: skip
    console.print(
        f"next: {hint}",
        markup=False,
        soft_wrap=True,
    )
