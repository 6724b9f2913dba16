"""Measurement files of a new device: reading calibration and architecture CSVs, writing
predictions.

``CAL.csv`` has a column ``arch`` and one value column, ``latency_ms`` or ``energy_mj``; a row
whose ``flagged`` cell is ``yes`` (too noisy, as ``hwnas refset measure`` marks it) is skipped;
``input_shape`` and ``onnx`` cells (``hwnas refset export`` writes them) are checked against the
arch (:func:`check_input_shapes`, :func:`check_onnx_names`); other columns are ignored.
``ARCHS.csv`` has a column ``arch``. An ``arch`` cell is an arch string of the space, an index
into the space's recorded architectures, or the path of an ONNX file (relative to the CSV's
folder). Every problem is reported as one line naming the file and row.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from hwnas import spreadsheet
from hwnas.devices.base import METRICS, Measurement
from hwnas.errors import HwnasError
from hwnas.limits import MAX_COST, MIN_COST
from hwnas.predictors.base import MIN_CALIBRATION, Model
from hwnas.predictors.graph import load_graph_model
from hwnas.spaces import Arch, IndexedSpace, SearchSpace, ability, arch_from_text


@dataclass
class Calibration:
    """Measured values of one device.

    Attributes:
        models: what was measured (architectures or ONNX models), one per row.
        values: shape (n,), ms or mJ, all > 0.
        metric: "latency_ms" or "energy_mj" (the value column's name).
        path: the file read.
    """

    models: list[Model]
    values: np.ndarray
    metric: str
    path: Path
    flagged: int = 0
    """Rows skipped because their ``flagged`` cell says the measurement was too noisy."""
    shapes: list[tuple[int, str]] = field(default_factory=list)
    """Per model, its row's line and ``input_shape`` cell (``1x3x32x32``, as ``hwnas refset
    export`` writes it; "" where the file has no such column)."""
    onnx: list[str] = field(default_factory=list)
    """Per model, its row's ``onnx`` cell (``ref01-019ad94101cd91ff.onnx``, the name ``hwnas
    refset export`` gave its network; "" where the file has no such column)."""


MAX_CSV_BYTES = 64 * 2**20
"""Largest calibration or architecture CSV read (``hwnas predict``, ``hwnas measure import``,
``hwnas predictor train --archs``): a reference set is 10 rows, a list of a whole table's
architectures a few MB; far below what could exhaust the memory."""


def csv_rows(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """The header and the rows (line number, cells by column) of a CSV file handed over
    (:func:`csv_table`).

    Raises:
        HwnasError: as :func:`csv_table`.
    """
    header, rows, _sep = csv_table(path)
    return header, rows


COLUMNS = ("arch", "onnx", "input_shape", "flagged", "cv", *METRICS)
"""Columns a calibration or architecture file's reader knows: their names in any case."""

_UNIT_COLUMN = re.compile(r"(latency|energy)(?:_ms|_mj)?\s*[(\[]\s*([^)\]]*?)\s*[)\]]", re.I)


def column_name(name: str, path: Path) -> str:
    """A header cell of a calibration or architecture file as its reader names the column:
    one of :data:`COLUMNS` in any case (``Arch``); a value column with its unit in
    parentheses or brackets (``latency (ms)``, ``Energy [mJ]``) as ``latency_ms`` or
    ``energy_mj``; any other name as written (spaces around it dropped).

    Raises:
        HwnasError: a value column in another unit (``latency (s)``): its values are not
            ms or mJ, and would be read as such.
    """
    text = name.strip()
    if text.lower() in COLUMNS:
        return text.lower()
    found = _UNIT_COLUMN.fullmatch(text)
    if found is None:
        return text
    metric = "latency_ms" if found.group(1).lower() == "latency" else "energy_mj"
    unit = "ms" if metric == "latency_ms" else "mJ"
    if found.group(2).lower() == unit.lower():
        return metric
    raise HwnasError(
        f"{path}: column '{text}' is in {found.group(2) or 'no unit'}, but hwnas reads "
        f"{found.group(1).lower()} in {unit}: convert the values to {unit} and name the column "
        f"{metric}"
    )


def _not_utf8(path: Path, raw: bytes, exc: UnicodeDecodeError) -> str:
    """The error line of a file handed over as CSV that is not UTF-8 text."""
    fix = "save it as 'CSV UTF-8' (in Excel: CSV UTF-8 (Comma delimited))"
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return f"{path}: UTF-16 text (Excel's 'Unicode Text'), not UTF-8: {fix}"
    return f"{path}: not UTF-8 text (byte {raw[exc.start]:#04x} at offset {exc.start}): {fix}"


def csv_table(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]], str]:
    """The header, the rows (line number, cells by column) and the cell separator
    (:func:`hwnas.spreadsheet.delimiter`, what :func:`hwnas.spreadsheet.number` reads the
    cells by) of a CSV file handed over, read through :func:`hwnas.paths.read_bounded` (a
    regular file of at most :data:`MAX_CSV_BYTES`).

    Column names are read as :func:`column_name` reads them (``Arch`` is ``arch``, ``latency
    (ms)`` is ``latency_ms``); rows whose cells are all empty (``;;;``, what a spreadsheet
    saves of rows once used) are blank lines, no rows.

    Raises:
        HwnasError: missing, not a regular file, too large (also more than
            :data:`hwnas.tables.MAX_TABLE_ROWS` rows or :data:`hwnas.tables.MAX_TABLE_CELLS`
            cells), not UTF-8 CSV text (UTF-16 named as such: save it as CSV UTF-8), a value
            column in another unit than ms or mJ, a column named twice, or no ``arch`` column.
    """
    from hwnas.paths import read_bounded
    from hwnas.tables import check_cells, limit_rows

    if not path.exists():
        raise HwnasError(f"file not found: {path}")
    try:
        raw = read_bounded(path, MAX_CSV_BYTES)
        try:
            text = raw.decode("utf-8-sig")  # spreadsheets write a BOM
        except UnicodeDecodeError as exc:
            raise HwnasError(_not_utf8(path, raw, exc)) from None
        fh = io.StringIO(text, newline="")
        first = fh.readline()
        fh.seek(0)
        sep = spreadsheet.delimiter(first)
        check_cells(text, sep, str(path))
        reader = csv.DictReader(fh, delimiter=sep)
        header = [column_name(h, path) for h in (reader.fieldnames or [])]
        twice = next((h for i, h in enumerate(header) if h and h in header[:i]), None)
        if twice is not None:  # DictReader would keep the last copy's cells
            raise HwnasError(f"{path}: column '{twice}' appears more than once in the header")
        reader.fieldnames = header
        rows = []
        for row in limit_rows(reader, str(path)):
            extra = [c for c in row.pop(None, None) or () if c.strip()]  # DictReader's overflow
            if extra:  # a cell holding the separator: '8,07' for 8.07 in a ','-separated file
                n = len(header) + len(extra)
                hint = "a decimal comma in a comma-separated file" if sep == "," else repr(sep)
                raise HwnasError(
                    f"{path}:{reader.line_num}: {n} cells, the header {len(header)} "
                    f"({', '.join(header)[:80]}): does a value hold the separator ({hint})?"
                )
            if not any((c or "").strip() for c in row.values()):
                continue  # separators only (';;;', a spreadsheet's rows once used): blank
            rows.append((reader.line_num, row))
    except (OSError, csv.Error) as exc:
        raise HwnasError(f"{path}: not a readable CSV file ({exc})") from None
    if "arch" not in header:
        raise HwnasError(f"{path}: no 'arch' column (columns: {', '.join(header) or 'none'})")
    return header, rows, sep


def parse_model(
    space: SearchSpace, cell: str, base: Path, where: str, dims: dict[str, int] | None = None
) -> Model:
    """An architecture or ONNX model from an ``arch`` cell; an ONNX model's dynamic input axes
    that ``dims`` names are fixed to its sizes (:func:`hwnas.onnx_inputs.fix_dims`).

    Raises:
        HwnasError: empty, malformed or unknown architecture, or unreadable ONNX file; the
            message starts with ``where``.
    """
    text = (cell or "").strip()
    if not text:
        raise HwnasError(f"{where}: empty arch")
    path = onnx_cell_path(text, base)
    if path is not None:
        try:
            return replace(load_graph_model(path, dims), label=text)
        except HwnasError as exc:
            raise HwnasError(f"{where}: {exc}") from None
    try:
        return arch_from_text(space, text)
    except HwnasError as exc:
        raise HwnasError(f"{where}: unknown or malformed {space.name} arch: {exc}") from None


def onnx_cell_path(cell: str, base: Path) -> Path | None:
    """The ONNX file an ``arch`` cell names (relative paths against ``base``, the CSV's
    folder), or None for an architecture."""
    text = (cell or "").strip()
    if not text.lower().endswith(".onnx"):
        return None
    return Path(text) if Path(text).is_absolute() else base / text


def read_calibration(
    path: str | Path, space: SearchSpace, minimum: int = MIN_CALIBRATION
) -> Calibration:
    """Read and validate ``CAL.csv`` (at least ``minimum`` rows: 3 to calibrate on it alone;
    1 to add values to a device that has some).

    Raises:
        HwnasError: missing file or columns, malformed or unknown archs, duplicate archs,
            a row without a value, non-numeric or non-positive values (a comma is a decimal
            mark in a ``;``-separated file alone, where a point shaped like thousands
            grouping, ``1.173``, is refused unless the column's other cells show the point to
            be a decimal mark: :func:`hwnas.spreadsheet.number`), fewer than ``minimum`` rows.
    """
    path = Path(path)
    header, rows, sep = csv_table(path)
    value_cols = [m for m in METRICS if m in header]
    if len(value_cols) != 1:
        raise HwnasError(
            f"{path}: needs exactly one value column, latency_ms or energy_mj "
            f"(columns: {', '.join(header)})"
        )
    metric = value_cols[0]
    models: list[Model] = []
    values: list[float] = []
    shapes: list[tuple[int, str]] = []
    onnx: list[str] = []
    seen: dict[str, int] = {}
    flagged = 0
    point = spreadsheet.decimal_point((row.get(metric) or "" for _, row in rows), sep)
    for line, row in rows:
        where = f"{path}:{line}"
        if (row.get("flagged") or "").strip().lower() in ("yes", "true", "1"):
            flagged += 1  # too noisy to use (hwnas refset measure marks them)
            continue
        model = parse_model(space, row.get("arch", ""), path.parent, where)
        key = str(model)
        if key in seen:
            raise HwnasError(f"{where}: duplicate arch '{key}' (also on line {seen[key]})")
        seen[key] = line
        cell = (row.get(metric) or "").strip()
        if not cell:  # an exported file not filled in, or a value left out
            raise HwnasError(
                f"{where}: no {metric} value: fill in the value measured for its network, or "
                "delete the row"
            )
        try:
            value = spreadsheet.number(cell, sep, point)
        except spreadsheet.AmbiguousComma as exc:
            raise HwnasError(f"{where}: {metric} holds a comma: {exc}") from None
        except spreadsheet.AmbiguousPoint as exc:
            raise HwnasError(f"{where}: {metric} '{cell}': {exc}") from None
        except ValueError:
            raise HwnasError(f"{where}: {metric} '{cell}' is not a number") from None
        if not np.isfinite(value) or value <= 0:
            raise HwnasError(f"{where}: {metric} must be positive, got {cell}")
        if not MIN_COST <= value <= MAX_COST[metric]:
            raise HwnasError(
                f"{where}: {metric} {cell} is implausible for one inference (at least "
                f"{MIN_COST:g}, at most {MAX_COST[metric]:g})"
            )
        models.append(model)
        values.append(value)
        shapes.append((line, (row.get("input_shape") or "").strip()))
        onnx.append((row.get("onnx") or "").strip())
    if len(models) < minimum:
        noisy = f" ({flagged} more flagged as too noisy)" if flagged else ""
        raise HwnasError(
            f"{path}: {len(models)} calibration rows{noisy}; at least {minimum} are "
            "needed (the reference set has 10: hwnas refset export)"
        )
    return Calibration(models, np.asarray(values), metric, path, flagged, shapes, onnx)


def read_archs(
    path: str | Path, space: SearchSpace, dims: dict[str, int] | None = None
) -> list[Model]:
    """Read ``ARCHS.csv`` (column ``arch``: architectures, or ONNX files whose dynamic input
    axes ``dims`` names take its sizes).

    Raises:
        HwnasError: missing file or column, malformed or unknown archs, no rows.
    """
    path = Path(path)
    _header, rows = csv_rows(path)
    models = [
        parse_model(space, row.get("arch", ""), path.parent, f"{path}:{line}", dims)
        for line, row in rows
    ]
    if not models:
        raise HwnasError(f"{path}: no architectures")
    return models


def archs_onnx_files(path: str | Path) -> list[Path]:
    """The ONNX files the rows of ``ARCHS.csv`` name (for :func:`hwnas.onnx_inputs.check_dims`
    before they are read).

    Raises:
        HwnasError: missing file or column.
    """
    path = Path(path)
    cells = (onnx_cell_path(row.get("arch", ""), path.parent) for _, row in csv_rows(path)[1])
    return [p for p in cells if p is not None]


MIN_TRAIN_ARCHS = 20
"""Fewest architectures meta-training accepts (10% of them are held out for early stopping)."""


def read_table_archs(path: str | Path, space: SearchSpace) -> list[int]:
    """Read a CSV of architectures to meta-train on (column ``arch``: indices or arch strings of
    the space's recorded table).

    Returns:
        Their table indices, sorted.

    Raises:
        HwnasError: missing file or column, malformed or unknown archs, an architecture without
            recorded measurements (not in the space's table), an ONNX file, a duplicate, a space
            without a table, fewer than :data:`MIN_TRAIN_ARCHS` rows.
    """
    path = Path(path)
    indexed = ability(space, IndexedSpace)
    if indexed is None:
        raise HwnasError(f"space '{space.name}' has no recorded table to meta-train on")
    _header, rows = csv_rows(path)
    seen: dict[int, int] = {}
    for line, row in rows:
        where = f"{path}:{line}"
        cell = (row.get("arch") or "").strip()
        if cell.lower().endswith(".onnx"):
            raise HwnasError(
                f"{where}: '{cell}' is an ONNX file; meta-training reads architectures of the "
                f"space's recorded table (indices or arch strings)"
            )
        model = parse_model(space, cell, path.parent, where)
        try:
            index = indexed.index(model)
        except HwnasError as exc:
            raise HwnasError(f"{where}: {exc}") from None
        if index in seen:
            raise HwnasError(f"{where}: duplicate arch '{model}' (also on line {seen[index]})")
        seen[index] = line
    if len(seen) < MIN_TRAIN_ARCHS:
        raise HwnasError(
            f"{path}: {len(seen)} architectures; meta-training needs at least {MIN_TRAIN_ARCHS}"
        )
    return sorted(seen)


def write_predictions(
    path: str | Path,
    models: list[Model],
    mean: np.ndarray,
    std: np.ndarray,
    metric: str,
    intervals: list[tuple[float | None, float | None]] | None = None,
    sources: list[str] | None = None,
) -> None:
    """``PRED.csv``: columns ``arch``, the metric (ms or mJ), ``std`` and, given ``intervals``
    ((n,) of (low, high)), the 90% interval's ``low90`` and ``high90`` (same unit; empty where
    a prediction has none), and given ``sources``, ``predictor``: what predicted each row
    (:attr:`hwnas.predictors.predict.Prediction.source`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arch", metric, "std"] + (["low90", "high90"] if intervals else [])
                   + (["predictor"] if sources else []))  # fmt: skip
        for i, (m, v, s) in enumerate(zip(models, mean, std)):
            row = [str(m), f"{v:.6g}", f"{s:.6g}"]
            if intervals:
                row += ["" if e is None else f"{e:.6g}" for e in intervals[i]]
            if sources:
                row.append(sources[i])
            w.writerow(row)


STAND_IN = "recorded, isomorphic stand-in"
"""``ReferenceValue.how`` of a table's cell that stands in for a reference architecture the table
lacks: it computes the same function (:func:`hwnas.predictors.data.measured_reference`)."""


@dataclass
class ReferenceValue:
    """One reference architecture's value on a device.

    Attributes:
        arch: the architecture.
        value: ms or mJ (NaN when the device has none stored).
        cv: coefficient of variation of the samples (NaN when not known).
        flagged: the measurement missed the device's precision target (``timing.max_cv``,
            or ``timing.max_wait_share`` where other processes held its CPU).
        how: "measured", "from store", "recorded", :data:`STAND_IN` or "missing".
        measurement: the profiler's measurement it came from (None where none was stored).
    """

    arch: Arch
    value: float
    cv: float = float("nan")
    flagged: bool = False
    how: str = "missing"
    measurement: Measurement | None = None


def reference_archs(space: SearchSpace) -> list[Arch]:
    """The space's reference architectures (:meth:`SearchSpace.reference_archs`: HELP's for
    the indexed spaces), in order.

    Raises:
        HwnasError: the space has no reference set.
    """
    return space.reference_archs()


def calibration_archs(
    space: SearchSpace,
    select: str = "reference",
    n: int = 10,
    predictor: str | None = None,
    seed: int = 0,
) -> list[Arch]:
    """The architectures a new device is measured on, by a selector of
    :data:`hwnas.predictors.selection.SELECTORS`: ``reference`` (the default: the space's
    reference set, HELP's 10 architectures, so one set measured once serves every predictor),
    ``active`` (greedy D-optimal design for the meta-learned predictor that will be calibrated
    on them: ``predictor``, default the space's artifact), ``nasflat`` (NASFLAT's sampler) or
    ``random``; ``n`` of them (``reference``: its first ``n``, then random others). A space
    of at most ``n`` architectures (fewer than the reference set's 10) has them all as its
    reference set: ``reference`` with any ``n`` from their count up gives them.

    Raises:
        UnknownNameError: an unknown selector.
        HwnasError: another selector than the reference set with its own count on a space
            whose architectures cannot be listed, ``n`` out of range, or no predictor artifact.
    """
    from hwnas.predictors.selection import select as pick

    if select == "reference":
        refs = reference_archs(space)
        if n == len(refs) or (n > len(refs) and len(refs) >= space.num_architectures()):
            return refs
    indexed = ability(space, IndexedSpace)
    if indexed is None:
        try:
            own = f"--select reference -n {len(reference_archs(space))}"
        except HwnasError:
            own = "--select reference"
        raise HwnasError(
            f"--select {select} -n {n} picks among every architecture of the space; space "
            f"'{space.name}' cannot list them (its reference set is {own})"
        )
    options: dict = {}
    if select == "active":
        from hwnas.predictors.artifacts import load_predictor

        options["predictor"] = load_predictor(predictor or space.name, space.name)
    return [indexed.arch_at(i) for i in pick(select, space.name, n, rng=seed, **options)]


def measure_reference_set(
    profiler,
    space: SearchSpace,
    dataset: str,
    metric: str,
    archs: list[Arch] | None = None,
    reporter: Any = None,
):
    """Measure (or find in the store) the space's reference set (or ``archs``:
    :func:`calibration_archs`) on ``profiler``'s device, each once
    (:class:`hwnas.measure.Profiler`); flagged measurements are kept and marked. ``reporter``
    (a :class:`hwnas.progress.Reporter`, default silent) is shown a step of one unit per
    network: a board or a TVM tuning takes minutes for the ten.

    Returns:
        list of :class:`ReferenceValue`, in the architectures' order.

    Raises:
        HwnasError: the device has no ``metric``, cannot be reached or cannot run a network.
    """
    from hwnas.measure import arch_workload
    from hwnas.progress import SILENT

    profiler.device.check_metric(metric)
    out = []
    wanted = archs if archs is not None else reference_archs(space)
    named = f"reference set on {profiler.device.name}"
    with (reporter or SILENT).step(named, len(wanted), "networks") as step:
        for arch, stand_in in as_recorded(profiler.device, space, wanted, [metric]):
            taken, reused = profiler.counts.taken, profiler.counts.reused
            m = profiler.measure(arch_workload(space, arch, dataset), metric, allow_flagged=True)
            how = STAND_IN if stand_in else "recorded"
            if profiler.counts.taken > taken:
                how = "measured"
            elif profiler.counts.reused > reused:
                how = "from store"
            out.append(ReferenceValue(arch, float(m.value), m.known_cv, bool(m.flagged), how, m))
            step.advance()
    return out


def as_recorded(device, space: SearchSpace, archs, metrics) -> list[tuple[Arch, bool]]:
    """``archs`` as ``device``'s recorded tables of ``metrics`` measured them: on a device
    without a table of the space (a live one), themselves; on a recorded one, an architecture
    the tables lack is replaced by the first of its isomorphism class they have (the Pi 5
    tables measured one NAS-Bench-201 cell per class:
    :func:`hwnas.predictors.data.measured_stand_ins`), or left out.

    Returns:
        (architecture, whether it stands in for another), in the order of ``archs``.
    """
    from hwnas.devices import recorded_cells
    from hwnas.predictors.data import measured_stand_ins

    archs = list(archs)
    indexed = ability(space, IndexedSpace)
    held = recorded_cells(device, space.name, metrics) if indexed is not None else None
    if held is None:
        return [(a, False) for a in archs]
    wanted = [indexed.index(a) for a in archs]
    return [
        (indexed.arch_at(i), i not in wanted) for i in measured_stand_ins(space.name, held, wanted)
    ]


def stored_reference_set(device, store, space: SearchSpace, dataset: str, metric: str):
    """The reference set's values already known for ``device``: its recorded table, or the
    measurement store (``hwnas refset measure``, ``hwnas measure import``); measures nothing.

    Returns:
        list of :class:`ReferenceValue`. From a table: the recorded ones, a reference cell the
        table lacks replaced by an isomorphic cell it has, else left out
        (:func:`hwnas.predictors.data.measured_reference`). From the store: every reference
        architecture, ``how`` "missing" and value NaN where none is stored, flagged ones
        marked.

    Raises:
        HwnasError: the device has no ``metric``.
    """
    from hwnas.measure import arch_workload

    device.check_metric(metric)
    indexed = ability(space, IndexedSpace)
    table = device.table(space.name, metric) if indexed is not None else None
    if table is not None:  # a reference cell the table lacks stands in by an isomorphic one
        return [
            ReferenceValue(a, float(table[indexed.index(a)]), how=STAND_IN if s else "recorded")
            for a, s in as_recorded(device, space, reference_archs(space), [metric])
        ]
    out = []
    for arch in reference_archs(space):
        w = arch_workload(space, arch, dataset)
        m = None
        if store is not None:
            m = store.lookup(device.name, device.runtime, metric, w.model_hash, w.input_shape)
        if m is None:
            out.append(ReferenceValue(arch, float("nan")))
        else:
            out.append(
                ReferenceValue(arch, float(m.value), m.known_cv, bool(m.flagged), "stored", m)
            )
    return out


def stored_archs(device, store, space: SearchSpace, metrics: list[str]) -> list[Arch]:
    """Every architecture of ``space`` with a stored value of one of ``metrics`` on ``device``
    (``hwnas measure import``, ``hwnas refset measure --select ...``, earlier searches), in
    arch-string order; labels that are not an architecture of the space (ONNX files, another
    space's) are left out."""
    found = set()
    for metric in metrics:
        for m in store.measurements(device.name, metric):
            try:
                found.add(space.parse(m.label))
            except HwnasError:
                continue
    return sorted(found)


def stored_datasets(device, store, space: SearchSpace, metric: str) -> list[str]:
    """The datasets of ``space`` whose networks ``device`` has stored ``metric`` values of
    (looked up for the reference architectures and every architecture stored for it): what to
    name when a command that took another dataset found none (``hwnas measure import
    --dataset imagenet16``, then ``hwnas search`` on cifar100's networks)."""
    from hwnas.measure import arch_workload

    if store is None:
        return []
    archs = list(
        dict.fromkeys([*reference_archs(space), *stored_archs(device, store, space, [metric])])
    )
    found = []
    for dataset in space.datasets():
        for arch in archs:
            w = arch_workload(space, arch, dataset)
            if store.lookup(device.name, device.runtime, metric, w.model_hash, w.input_shape):
                found.append(dataset)
                break
    return found


def dataset_hint(device, store, space: SearchSpace, dataset: str, metric: str, fix: str) -> str:
    """``"; its values are of imagenet16's networks, not cifar100's: <fix>"`` where the device
    has stored values of other datasets' networks only ("" otherwise); ``fix`` may name
    ``{datasets}``."""
    others = [d for d in stored_datasets(device, store, space, metric) if d != dataset]
    if not others:
        return ""
    names = "|".join(others)
    return (
        f"; its stored {metric} values are of {' and '.join(others)}'s networks, not "
        f"{dataset}'s: {fix.format(datasets=names)}"
    )


def stored_calibration_set(
    device, store, space: SearchSpace, dataset: str, metric: str, cap: int
) -> list[ReferenceValue]:
    """What a device that cannot measure (an imported one) is adapted on: its stored
    reference-set values (:func:`stored_reference_set`), then every other architecture of the
    space stored for it (:func:`stored_archs`), until ``cap`` usable values (finite, positive,
    not flagged as noisy; the others left out): the values a
    few-shot search of the device calibrates on (:func:`hwnas.engine.fewshot.
    calibration_archs`), so ``hwnas predict --device`` and ``hwnas search --device`` agree.

    Raises:
        HwnasError: the device has no ``metric``.
    """
    from hwnas.measure import arch_workload

    def usable(v: ReferenceValue) -> bool:
        return bool(np.isfinite(v.value) and v.value > 0 and not v.flagged)

    out = [v for v in stored_reference_set(device, store, space, dataset, metric) if usable(v)]
    refs = set(reference_archs(space))
    for arch in stored_archs(device, store, space, [metric]):
        if len(out) >= cap:
            break
        if arch in refs:
            continue
        w = arch_workload(space, arch, dataset)
        m = store.lookup(device.name, device.runtime, metric, w.model_hash, w.input_shape)
        if m is not None:
            v = ReferenceValue(arch, float(m.value), m.known_cv, bool(m.flagged), "stored")
            out += [v] if usable(v) else []
    return out[:cap]


def input_shape_cell(space: SearchSpace, arch: Arch, dataset: str, batch: int = 1) -> str:
    """The ``input_shape`` cell of ``arch``'s network for ``dataset`` at ``batch`` (1 unless
    the values are of whole batches), as ``CAL.csv`` holds it (``1x3x32x32``)."""
    return "x".join(map(str, (batch, *space.input_shape(arch, dataset))))


def _own_onnx(name: str, space: SearchSpace, arch: Arch, dataset: str) -> str:
    """``name``, an ``onnx`` cell kept from an exported file, where it is not the name of
    another network than ``dataset``'s of ``arch`` (exported for another dataset: ``""``), so
    that :func:`check_onnx_names` does not take the values written beside it for that
    network's."""
    from hwnas.measure import arch_workload

    found = EXPORTED_ONNX.search(Path(name.replace("\\", "/")).name)
    if found is None or found.group(1).lower() == arch_workload(space, arch, dataset).model_hash:
        return name
    return ""


def write_calibration(
    path: str | Path, values, metric: str, space: SearchSpace, dataset: str, batch: int = 1
):
    """Write ``CAL.csv`` (columns ``arch``, ``onnx``, ``input_shape``, the metric, ``cv``,
    ``flagged``) for reference values of ``batch`` inputs each (a GPU table's 256: its
    ``input_shape`` says so, and the readers, which take values at batch 1, refuse the file
    instead of reading whole batches' latency as one input's); an existing file's ``onnx``
    cells (from ``hwnas refset export``) are kept when it lists the same architectures, unless
    a cell names another network than ``dataset``'s of its architecture
    (:func:`check_onnx_names`). Written whole
    (:func:`hwnas.paths.write_atomic`): a link at ``path`` (in a folder handed over) is
    replaced, never written through to the file it names.

    Raises:
        HwnasError: the file cannot be written.
    """
    path = Path(path)
    onnx_names: dict[str, str] = {}
    if path.is_file():
        from hwnas.paths import read_bounded
        from hwnas.tables import limit_rows

        try:
            fh = io.StringIO(read_bounded(path, MAX_CSV_BYTES).decode("utf-8-sig"), newline="")
            rows = limit_rows(csv.DictReader(fh), str(path))
            onnx_names = {r.get("arch", ""): r.get("onnx", "") for r in rows}
        except (OSError, UnicodeDecodeError, csv.Error, HwnasError):
            onnx_names = {}
    from hwnas.paths import write_atomic

    fh = io.StringIO(newline="")
    w = csv.writer(fh)
    w.writerow(["arch", "onnx", "input_shape", metric, "cv", "flagged"])
    for v in values:
        w.writerow([
            v.arch.text,
            _own_onnx(onnx_names.get(v.arch.text, ""), space, v.arch, dataset),
            input_shape_cell(space, v.arch, dataset, batch),
            f"{v.value:.6g}" if np.isfinite(v.value) else "",
            f"{v.cv:.4f}" if np.isfinite(v.cv) else "",
            "yes" if v.flagged else "",
        ])  # fmt: skip
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, fh.getvalue().encode())
    except OSError as exc:
        raise HwnasError(f"cannot write {path}: {exc.strerror or exc}") from None


def check_input_shapes(
    cals, space, dataset: str, dataset_given: bool, command: str = "hwnas measure import"
) -> None:
    """Refuse rows of the calibrations ``cals`` whose ``input_shape`` cell (``hwnas refset
    export`` writes one) is not the input of ``dataset``'s network of their architecture: the
    values would be taken as another network's (an ImageNet16-120 file imported, or adapted
    on, as CIFAR's networks, 4x the pixels). ``command`` names what reads them.

    Raises:
        HwnasError: the first such row, naming the datasets of the space with that input.
    """
    for cal in cals:
        for model, (line, cell) in zip(cal.models, cal.shapes):
            want = input_shape_cell(space, model, dataset)
            got = cell.replace(" ", "")
            if not got or got == want:
                continue
            if got.partition("x")[2] == want.partition("x")[2]:  # the same network, batched
                raise HwnasError(
                    f"{cal.path}:{line}: input_shape {cell} is batch {got.partition('x')[0]}; "
                    f"{command} takes values at batch 1 ({want}), as hwnas refset "
                    "export's networks are"
                )
            fits = [d for d in space.datasets() if input_shape_cell(space, model, d) == got]
            what = f"--dataset {'|'.join(fits)}" if fits else "the dataset they were built for"
            if command != "hwnas measure import":  # no --dataset: the space's default one's
                raise HwnasError(
                    f"{cal.path}:{line}: input_shape {cell}, but {command} reads values of "
                    f"{dataset}'s networks, and this one takes {want}: its value is another "
                    "network's (time the networks hwnas refset export names)"
                )
            given = "given" if dataset_given else "default"
            raise HwnasError(
                f"{cal.path}:{line}: input_shape {cell}, but {dataset}'s network (the {given} "
                f"--dataset) takes {want}: its value would be stored as another network's; "
                f"pass {what}"
            )


EXPORTED_ONNX = re.compile(r"(?:^|[-_])([0-9a-f]{16})\.onnx$", re.IGNORECASE)
"""The name ``hwnas refset export`` gives a network, ``ref01-019ad94101cd91ff.onnx``: its
model hash (:func:`hwnas.measure.arch_workload`) before ``.onnx``."""


def check_onnx_names(cals, space, dataset: str, command: str = "hwnas measure import") -> None:
    """Refuse rows of the calibrations ``cals`` whose ``onnx`` cell names a network ``hwnas
    refset export`` wrote (:data:`EXPORTED_ONNX`) of another architecture than the row's
    ``arch`` for ``dataset``: the arch column moved against the onnx and value columns (one
    column sorted alone in a spreadsheet) would store every value as another architecture's.
    Cells of another shape (files renamed) are not checked. ``command`` names what reads them.

    Raises:
        HwnasError: the first such row, naming its line, the line whose arch the network is
            of (or the dataset it was built for), and how to fix it.
    """
    from hwnas.measure import arch_workload

    for cal in cals:
        if not any(cal.onnx):
            continue
        hashes = {}  # model hash of each row's arch's network -> its line
        for model, (line, _cell) in zip(cal.models, cal.shapes):
            if isinstance(model, Arch):
                hashes.setdefault(arch_workload(space, model, dataset).model_hash, line)
        for model, (line, _cell), name in zip(cal.models, cal.shapes, cal.onnx):
            found = EXPORTED_ONNX.search(Path(name.replace("\\", "/")).name)
            if not isinstance(model, Arch) or found is None:
                continue
            got = found.group(1).lower()
            if got == arch_workload(space, model, dataset).model_hash:
                continue
            where = f"{cal.path}:{line}: onnx {name} is"
            if got in hashes:
                raise HwnasError(
                    f"{where} the network of the arch on line {hashes[got]}, not of this row's: "
                    "the arch column was moved against the onnx and value columns (one column "
                    "sorted alone?); put each arch back beside its network's name and value"
                )
            other = [
                d
                for d in space.datasets()
                if d != dataset and arch_workload(space, model, d).model_hash == got
            ]
            if other:
                fix = (
                    f"would be stored as another network's; pass --dataset {other[0]}"
                    if command == "hwnas measure import"
                    else "is another network's (time the networks hwnas refset export names)"
                )
                raise HwnasError(
                    f"{where} the network of this row's arch built for {other[0]}, but "
                    f"{command} reads values of {dataset}'s networks: its value {fix}"
                )
            want = arch_workload(space, model, dataset).model_hash
            raise HwnasError(
                f"{where} another network than this row's arch's (hash {got}; {dataset}'s "
                f"network of the arch is {want}): was the arch column moved against the onnx "
                "and value columns, or the space changed since the export? Put each arch back "
                "beside its network's name and value, or export and time the networks again"
            )


def calibration_dataset(space: SearchSpace) -> str:
    """The dataset whose networks a device's calibration values are of: the predictors'
    (their featurizer's), else the space's own reference dataset (what ``hwnas refset export``
    and ``refset measure`` time by default, and what ``hwnas predict`` adapts on)."""
    from hwnas.predictors.featurize import FEATURIZERS, get_featurizer

    if space.name in FEATURIZERS:
        return get_featurizer(space.name).dataset
    return space.reference_dataset
