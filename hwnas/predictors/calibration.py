"""Measurement files of a new device: reading calibration and architecture CSVs, writing
predictions.

``CAL.csv`` has a column ``arch`` and one value column, ``latency_ms`` or ``energy_mj``
(other columns are ignored). ``ARCHS.csv`` has a column ``arch``. An ``arch`` cell is an arch
string of the space, an index into the space's recorded architectures, or the path of an ONNX
file (relative to the CSV's folder). Every problem is reported as one line naming the file and
row.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from hwnas.devices.base import METRICS
from hwnas.errors import HwnasError
from hwnas.predictors.base import MIN_CALIBRATION, Model
from hwnas.predictors.graph import load_graph_model
from hwnas.spaces import IndexedSpace, SearchSpace, ability


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


def _rows(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    if not path.is_file():
        raise HwnasError(f"file not found: {path}")
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            header = [h.strip() for h in (reader.fieldnames or [])]
            reader.fieldnames = header
            rows = [(i, row) for i, row in enumerate(reader, start=2)]
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise HwnasError(f"{path}: not a readable CSV file ({exc})") from None
    if "arch" not in header:
        raise HwnasError(f"{path}: no 'arch' column (columns: {', '.join(header) or 'none'})")
    return header, rows


def parse_model(space: SearchSpace, cell: str, base: Path, where: str) -> Model:
    """An architecture or ONNX model from an ``arch`` cell.

    Raises:
        HwnasError: empty, malformed or unknown architecture, or unreadable ONNX file; the
            message starts with ``where``.
    """
    text = (cell or "").strip()
    if not text:
        raise HwnasError(f"{where}: empty arch")
    if text.lower().endswith(".onnx"):
        path = Path(text) if Path(text).is_absolute() else base / text
        try:
            return replace(load_graph_model(path), label=text)
        except HwnasError as exc:
            raise HwnasError(f"{where}: {exc}") from None
    try:
        indexed = ability(space, IndexedSpace)
        if text.isdigit() and indexed is not None:
            return indexed.arch_at(int(text))
        return space.parse(text)
    except HwnasError as exc:
        raise HwnasError(f"{where}: unknown or malformed {space.name} arch: {exc}") from None


def read_calibration(path: str | Path, space: SearchSpace) -> Calibration:
    """Read and validate ``CAL.csv``.

    Raises:
        HwnasError: missing file or columns, malformed or unknown archs, duplicate archs,
            non-numeric or non-positive values, fewer than 3 rows.
    """
    path = Path(path)
    header, rows = _rows(path)
    value_cols = [m for m in METRICS if m in header]
    if len(value_cols) != 1:
        raise HwnasError(
            f"{path}: needs exactly one value column, latency_ms or energy_mj "
            f"(columns: {', '.join(header)})"
        )
    metric = value_cols[0]
    models: list[Model] = []
    values: list[float] = []
    seen: dict[str, int] = {}
    for line, row in rows:
        where = f"{path}:{line}"
        model = parse_model(space, row.get("arch", ""), path.parent, where)
        key = str(model)
        if key in seen:
            raise HwnasError(f"{where}: duplicate arch '{key}' (also on line {seen[key]})")
        seen[key] = line
        cell = (row.get(metric) or "").strip()
        try:
            value = float(cell)
        except ValueError:
            raise HwnasError(f"{where}: {metric} '{cell}' is not a number") from None
        if not np.isfinite(value) or value <= 0:
            raise HwnasError(f"{where}: {metric} must be positive, got {cell}")
        models.append(model)
        values.append(value)
    if len(models) < MIN_CALIBRATION:
        raise HwnasError(
            f"{path}: {len(models)} calibration rows; at least {MIN_CALIBRATION} are needed "
            "(the reference set has 10: hwnas refset export)"
        )
    return Calibration(models, np.asarray(values), metric, path)


def read_archs(path: str | Path, space: SearchSpace) -> list[Model]:
    """Read ``ARCHS.csv`` (column ``arch``).

    Raises:
        HwnasError: missing file or column, malformed or unknown archs, no rows.
    """
    path = Path(path)
    _header, rows = _rows(path)
    models = [
        parse_model(space, row.get("arch", ""), path.parent, f"{path}:{line}") for line, row in rows
    ]
    if not models:
        raise HwnasError(f"{path}: no architectures")
    return models


def write_predictions(
    path: str | Path, models: list[Model], mean: np.ndarray, std: np.ndarray, metric: str
) -> None:
    """``PRED.csv``: columns ``arch``, the metric (ms or mJ) and ``std`` (same unit)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arch", metric, "std"])
        for m, v, s in zip(models, mean, std):
            w.writerow([str(m), f"{v:.6g}", f"{s:.6g}"])
