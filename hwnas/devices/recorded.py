"""Recorded devices: measurement tables (published ones, or a user's own) stand in for
hardware that is not at hand.

A table is a CSV file (optionally gzip) with one row per architecture of an indexed space
(NAS-Bench-201, FBNet, OFA: any space whose architectures have an index) and a value column in
ms or mJ. Rows are keyed by an ``index`` column (the space's indices) or, without one, an
``arch`` column (arch strings, or indices), which must agree where both are there; a table
with neither lists every architecture in index order, and a column keying it by another name
(``arch_str``, ``Index``) must follow that order. Architectures missing from a keyed table
have no value (NaN): a search leaves them out. The format is documented for users in
``docs/devices.md``.
"""

from __future__ import annotations

import os
import re
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from hwnas import spreadsheet
from hwnas.assets import asset_path
from hwnas.cost_record import UNITS
from hwnas.devices.base import Device, Measurement, Workload, profile_number
from hwnas.errors import HwnasError, UnrecordedError
from hwnas.limits import MAX_COST, MIN_COST
from hwnas.tables import COLUMN_NAME, file_version, read_table

KEY_COLUMNS = ("index", "arch")
"""Columns that name a table row's architecture, the first present is used (indices are read
faster than arch strings)."""


TABLE_SUFFIXES = (".csv", ".csv.gz")
"""A device table's file names end so (any case): a profile naming another file (a
credentials file, a key) is refused before the file is read."""


def table_path(file: str, profile_path: str | None) -> Path:
    """Where a profile's table ``file`` is: an absolute path as is; a relative one beside the
    profile's YAML file, else among the shipped tables (``devices/``, which is where the
    shipped profiles are, so their relative paths resolve the same way)."""
    path = Path(file).expanduser()
    if path.is_absolute():
        return path
    if profile_path:
        local = Path(profile_path).parent / path
        if local.exists() or not asset_path("devices", file).exists():
            return local
    return asset_path("devices", file)


def check_table_file(path: Path, file: str, profile_path: str | None, where: str) -> None:
    """Refuse a profile's table ``file`` (found at ``path``) that is not what the profile
    says: the file read, once symbolic links are resolved, must be a ``.csv`` or ``.csv.gz``
    file (:data:`TABLE_SUFFIXES`: a link ``board.csv`` to a ``.env`` printed the secret's
    first line), and a relative ``file`` that names a place in the profile's folder must not
    lead out of it through a link (a folder handed over with its profile could hold a link to
    any file of the machine; a table elsewhere is named by its path, which the profile then
    shows), but for a link into the folder of the profile's own file where the profile is a
    link too (a profile and its table kept in a repository, both linked into
    ``$HWNAS_HOME/devices/``). A path that is not there is left to the reader to say so.

    Args:
        path: where the table is (:func:`table_path`).
        file: the profile's ``file:`` as written.
        profile_path: the profile's YAML file, or None.
        where: how the message names the profile's key.

    Raises:
        HwnasError: one line naming the profile's key and the file.
    """
    try:
        target = path.resolve()
    except (OSError, RuntimeError):  # a loop of links
        raise HwnasError(f"{where} names {path}, a symbolic link that leads nowhere") from None
    if profile_path and not Path(file).expanduser().is_absolute():
        folder = Path(profile_path).parent.resolve()
        written = Path(os.path.normpath(folder / file))  # what the profile's text names
        real = Path(profile_path).resolve().parent  # the folder of the file a linked profile is
        if (
            path == Path(profile_path).parent / file
            and written.is_relative_to(folder)
            and not target.is_relative_to(folder)
            and not target.is_relative_to(real)
        ):
            raise HwnasError(
                f"{where} names {path}, a symbolic link out of the profile's folder: a table "
                "elsewhere is named by its own path in the profile"
            )
    if path.is_file() and not target.name.lower().endswith(TABLE_SUFFIXES):
        linked = target != Path(os.path.abspath(path))
        what = "a link to a file that is not" if linked else "which is not"
        raise HwnasError(f"{where} names {path}, {what} a .csv or .csv.gz file")


def keyed_column(path: Path, column: str, space_name: str, metric: str | None = None) -> np.ndarray:
    """Values of ``column`` of the table at ``path``, in ``space_name``'s index order (NaN for
    architectures the table lacks), shape (len(space),), ms or mJ; read again when the file
    changed (:func:`hwnas.tables.file_version`).

    Raises:
        HwnasError: unreadable or malformed table (a short row, a repeated architecture, an
            index outside the space, a value that is not a positive number or is beyond
            :data:`hwnas.limits.MAX_COST` of ``metric``: one line naming the file and row),
            missing column, unknown architectures, or an unkeyed table whose row count is not
            the space's size.
    """
    try:
        return _keyed_column(path, file_version(path), column, space_name, metric)
    except HwnasError:
        raise
    except (IndexError, KeyError, TypeError, ValueError, OverflowError) as exc:
        # a table shape no check above foresaw: still one line naming the file, so that the
        # profile is listed as broken and every other device keeps working
        raise HwnasError(f"table {path} is malformed ({type(exc).__name__}: {exc})") from None


@lru_cache(maxsize=64)
def _keyed_column(
    path: Path, version: tuple[int, int], column: str, space_name: str, metric: str | None
) -> np.ndarray:
    from hwnas.spaces import IndexedSpace, ability, get_space

    table = read_table(path)
    if column not in table:
        # a profile can name any file: the header is shown only when it reads as column names
        # (a credentials file's first line, 'host:port:db:user:password', is not repeated)
        names = list(table)
        shown = len(names) <= 50 and (
            any(k in table for k in KEY_COLUMNS) or all(COLUMN_NAME.fullmatch(n) for n in names)
        )
        raise HwnasError(
            f"table {path} has no column '{column}' "
            + (f"(columns: {', '.join(names)})" if shown else "(its first line is no CSV header)")
        )
    values = _numbers(table[column], path, column)
    # a cost is positive and finite; an empty or `nan` cell is an architecture without a value
    bad = np.flatnonzero(~np.isnan(values) & ~((values > 0) & np.isfinite(values)))
    if len(bad):
        raise HwnasError(
            f"table {path}, row {int(bad[0]) + 2}: '{column}' must be a positive number (ms or "
            f"mJ), got {values[bad[0]]:g}" + (f" ({len(bad)} such rows)" if len(bad) > 1 else "")
        )
    tiny = np.flatnonzero(values < MIN_COST)
    if len(tiny):  # a unit slip (1e-12) that makes every fit on the table singular
        raise HwnasError(
            f"table {path}, row {int(tiny[0]) + 2}: '{column}' {values[tiny[0]]:g} is below "
            f"any one inference's {metric or 'cost'} (at least {MIN_COST:g}"
            + (f" {UNITS[metric]}" if metric in UNITS else "")
            + ")"
        )
    bound = MAX_COST.get(metric or "", max(MAX_COST.values()))
    huge = np.flatnonzero(values > bound)
    if len(huge):  # a typo (1e308) that overflows every fit, plot and sum downstream
        raise HwnasError(
            f"table {path}, row {int(huge[0]) + 2}: '{column}' {values[huge[0]]:g} is beyond "
            f"any one inference's {metric or 'cost'} (at most {bound:g}"
            + (f" {UNITS[metric]}" if metric in UNITS else "")
            + ")"
        )
    space = ability(get_space(space_name), IndexedSpace)
    if space is None:
        raise HwnasError(f"space '{space_name}' has no architecture index for a device table")
    size = len(space)
    key = next((k for k in KEY_COLUMNS if k in table), None)
    if key is None:
        _refuse_hidden_key(table, path, column, space, space_name)
        if len(values) != size:
            raise HwnasError(
                f"table {path} has {len(values)} rows and no 'arch' or 'index' column; rows in "
                f"index order need one per architecture of {space_name} ({size})"
            )
        return values
    if key == "index":
        rows = _index_rows(table["index"], path, "index", space_name, size)
        if "arch" in table:  # both: they must name the same architecture
            named = _arch_rows(table["arch"], path, space, space_name, rows)
            differ = np.flatnonzero((named >= 0) & (named != rows))
            if len(differ):
                i = int(differ[0])
                raise HwnasError(
                    f"table {path}, row {i + 2}: its 'arch' names architecture {named[i]} of "
                    f"{space_name}, its 'index' {rows[i]} (a file sorted or edited in one "
                    "column?): correct the row, or remove one of the two columns"
                )
    else:
        rows = _arch_rows(table["arch"], path, space, space_name)
    if len(np.unique(rows)) != len(rows):
        first: dict[int, int] = {}
        for i, row in enumerate(rows.tolist()):
            if row in first:
                raise HwnasError(
                    f"table {path}, row {i + 2}: architecture {row} appears more than once "
                    f"(also row {first[row] + 2})"
                )
            first[row] = i
    if len(rows) == size and np.array_equal(rows, np.arange(size)):
        return values
    out = np.full(size, np.nan)
    out[rows] = values
    return out


def _index_rows(cells: np.ndarray, path: Path, key: str, space_name: str, size: int) -> np.ndarray:
    """A key column of indices as row numbers of the space (0..size-1).

    Raises:
        HwnasError: a cell that is empty, not a whole number, or outside the space, naming its
            row (a cell that is not a number is not repeated: a table may be any file).
    """
    if cells.dtype == object:  # an empty or text cell among the indices
        for i, cell in enumerate(cells):
            try:
                float(str(cell).strip())
            except ValueError:
                raise HwnasError(
                    f"table {path}, row {i + 2}: '{key}' is "
                    + ("empty" if not str(cell).strip() else "not a number")
                    + f", not an index of {space_name} (0..{size - 1})"
                ) from None
        cells = np.asarray([float(str(c).strip()) for c in cells])
    frac = np.flatnonzero(cells != np.round(cells))
    if len(frac):
        raise HwnasError(
            f"table {path}, row {int(frac[0]) + 2}: '{key}' must be a whole index, got "
            f"{cells[frac[0]]:g}"
        )
    outside = np.flatnonzero((cells < 0) | (cells >= size))
    if len(outside):
        raise HwnasError(
            f"table {path}, row {int(outside[0]) + 2}: '{key}' {cells[outside[0]]:g} is "
            f"outside {space_name}'s indices 0..{size - 1}"
        )
    return cells.astype(np.intp)


def _arch_rows(
    cells: np.ndarray, path: Path, space, space_name: str, expected: np.ndarray | None = None
) -> np.ndarray:
    """An ``arch`` column (arch strings, or indices) as row numbers of the space; with
    ``expected`` (the rows of the table's ``index`` column), an empty cell is -1 (nothing
    said against its index) and a cell that is the arch string of its expected row is not
    parsed (15,625 NAS-Bench-201 strings take 0.4 s to parse, 0.04 s to compare).

    Raises:
        HwnasError: a cell that is empty (without ``expected``), neither an arch string of
            the space nor an index, or an index outside the space, naming its row and not
            repeating the cell (a table may be any file).
    """
    size = len(space)
    if cells.dtype != object:  # indices
        return _index_rows(cells, path, "arch", space_name, size)
    rows = np.empty(len(cells), dtype=np.intp)
    for i, cell in enumerate(cells):
        text = str(cell).strip()
        if expected is not None:
            if not text:
                rows[i] = -1
                continue
            if text == space.arch_at(int(expected[i])).text:
                rows[i] = expected[i]
                continue
        if text.isdecimal() and text.isascii():
            if not 0 <= int(text) < size:  # an index among arch strings
                raise HwnasError(
                    f"table {path}, row {i + 2}: 'arch' is an index outside {space_name}'s "
                    f"indices 0..{size - 1}"
                )
            rows[i] = int(text)
            continue
        try:
            rows[i] = space.index(space.parse(text))
        except (HwnasError, ValueError, KeyError):
            what = "empty" if not text else f"neither an arch string of {space_name} nor an index"
            raise HwnasError(f"table {path}, row {i + 2}: 'arch' is {what}") from None
    return rows


KEY_LIKE = re.compile(
    r"(?i)\s*(index|idx|id|key|arch(itecture)?([ _-]?(str|string|text|index|idx|id))?"
    r"|unnamed:?\s*\d*|)\s*"
)
"""Column names that say a column keys the rows (``Index``, ``arch_str``, ``id``, ``arch
index``, pandas' nameless ``Unnamed: 0``, or no name at all), case aside; a column named for
what it holds of an architecture (``arch_flops``, ``device_id``) is not among them."""


def _refuse_hidden_key(table: dict, path: Path, column: str, space, space_name: str) -> None:
    """Refuse a table without an ``index`` or ``arch`` column (read in index order) that has
    a column keying its rows by another name: a name like one (:data:`KEY_LIKE`), the
    space's arch strings, or the space's indices in another order, whose cells do not follow
    the index order the rows are read in. Such a table (``arch_str``, ``Index``, pandas' index)
    shuffled would give its values to other architectures. Value columns (numbers) and
    columns that are wholly empty pass.

    Raises:
        HwnasError: one line naming the column (where its name looks like one), the row
            where it leaves the index order, and the fix (name it ``index`` or ``arch``).
    """
    size = len(space)
    for j, (name, cells) in enumerate(table.items()):
        if name == column:
            continue
        texts = [str(c).strip() for c in cells] if cells.dtype == object else None
        if texts is not None and not any(texts):
            continue  # a column without a cell (a header ending in a separator)
        numbers = texts is None or all(_is_number(t) for t in texts if t)
        if numbers:
            values = _numbers(cells, path, name)
            whole = bool(np.all(np.isfinite(values) & (values == np.round(values))))
            permutation = (
                whole and len(values) == size and np.array_equal(np.sort(values), np.arange(size))
            )
            if not KEY_LIKE.fullmatch(name.strip()) and not permutation:
                continue  # a value column
            order = [f"{i}" for i in range(len(values))]
            cells_as = [f"{v:.0f}" if whole else "" for v in values]
        else:
            first = next((t for t in texts if t), "")
            try:  # text that is not the space's arch strings (notes, True/False) keys nothing
                space.parse(first)
            except (HwnasError, ValueError, KeyError):
                continue
            order = [space.arch_at(i).text if i < size else "" for i in range(len(texts))]
            cells_as = texts
        off = next((i for i, (a, b) in enumerate(zip(cells_as, order)) if a != b), None)
        if off is None and len(cells) == size:
            continue  # it follows the index order: it says what the row order says
        shown = (
            f"column '{name}'"
            if COLUMN_NAME.fullmatch(name)
            else ("column without a name" if not name.strip() else f"column {j + 1}")
        )
        where = (
            f"row {off + 2} is not architecture {off}"
            if off is not None
            else f"it has {len(cells)} rows, not the {size} of {space_name}"
        )
        what = (
            "looks like a key that does not follow it"
            if numbers
            else f"holds text that is not {space_name}'s arch strings in that order"
        )
        raise HwnasError(
            f"table {path} has no 'index' or 'arch' column, so its rows are read in "
            f"{space_name}'s index order, but its {shown} {what} ({where}): name that column "
            "'index' (indices) or 'arch' (arch strings) for the rows to be matched by it, or "
            "remove it"
        )


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


NO_TABLES = (
    "its profile gives no table: add `tables: {SPACE: {latency_ms: {file: TABLE.csv}}}` "
    "(docs/devices.md), or hwnas measure import --table"
)
"""Why a ``kind: recorded`` profile without tables can give nothing."""

PROFILE_KEYS = ("name", "kind", "class", "description", "source", "sources", "batch_size",
                "tables", "_path")  # fmt: skip
"""Keys of a ``kind: recorded`` profile (``_path``: set when it is read; a file's other keys
that start with ``_`` are refused by :func:`hwnas.devices.base.check_profile_keys`)."""
METRICS = ("latency_ms", "energy_mj")
"""The metrics a table may hold, as ``tables.<space>`` keys."""
ENTRY_KEYS = ("file", "column", "dataset")
"""Keys of one ``tables.<space>.<metric>`` entry."""


def _known_keys(where: str, prefix: str, mapping: dict, known, what: str = "key") -> None:
    """Refuse a key of ``mapping`` not in ``known``, naming the closest known one: a
    misspelt ``datset:`` or ``colum:`` would be ignored and its table read as another's.

    Raises:
        HwnasError: one line naming the profile, the key and what is allowed.
    """
    import difflib

    for key in mapping:
        if key not in known and not str(key).startswith("_"):  # hwnas's own (_path, _given)
            close = difflib.get_close_matches(str(key), [k for k in known if k != "_path"], 1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            allowed = ", ".join(k for k in known if k != "_path")
            raise HwnasError(f"{where}: unknown {what} '{prefix}{key}'{hint}; allowed: {allowed}")


def _numbers(cells: np.ndarray, path: Path, column: str) -> np.ndarray:
    """A table column as floats: empty and ``nan`` cells NaN (no value), any other text refused.

    Raises:
        HwnasError: a cell that is not a number, or a number with a comma (a decimal mark only
            in a ``;``-separated file, where :func:`hwnas.tables.read_table` reads it), naming
            its row.
    """
    if cells.dtype != object:
        return np.asarray(cells, dtype=float)
    out = np.full(len(cells), np.nan)
    for i, cell in enumerate(cells):
        text = "" if cell is None else str(cell).strip()
        if not text:
            continue
        if "_" in text and _is_number(text):  # float() reads '1_09.025' as 109.025
            raise HwnasError(
                f"table {path}, row {i + 2}: column '{column}' holds a number with '_' digit "
                "grouping: write it without"
            )
        try:
            out[i] = float(text)
        except ValueError:
            if _is_number(text.replace(",", "")):  # ';'-separated files: read by read_table
                raise HwnasError(
                    f"table {path}, row {i + 2}: column '{column}' holds a number with a "
                    f"comma: {spreadsheet.COMMA_HINT}"
                ) from None
            raise HwnasError(
                f"table {path}, row {i + 2}: column '{column}' holds text, not a number "
                "(not shown: a table given by someone else may name any file)"
            ) from None
    return out


class RecordedDevice(Device):
    """A device whose values come from tables, one value per architecture of a space.

    Profile keys: ``tables: {space: {metric: {file, column}}}`` where ``file`` is a CSV table
    (see the module docstring), absolute or relative to the profile's folder, and ``column``
    its value column (default: the metric's name, ``latency_ms`` or ``energy_mj``);
    ``batch_size``; ``source``.
    """

    kind = "recorded"
    profile_keys = tuple(k for k in PROFILE_KEYS if k != "_path")
    misplaced_keys = {
        "runtime": "a runtime applies to live devices (local, cuda, rpc, android)",
    }
    runtime = "recorded"
    stored_in_profiler = False
    runs_models = False

    def __init__(self, profile: dict[str, Any]):
        super().__init__(profile)
        where = f"device profile {profile.get('_path', profile.get('name'))}"
        if "runtime" in profile:  # the profile's, or --runtime's (hwnas.devices.get_device)
            raise HwnasError(
                f"device '{profile.get('name')}' (recorded) has no runtime choice: a runtime "
                "(--runtime, or a profile's runtime:) applies to live devices (local, cuda, rpc, "
                "android)"
            )
        _known_keys(where, "", profile, PROFILE_KEYS)
        tables = profile.get("tables") or {}
        if not isinstance(tables, dict):
            raise HwnasError(f"{where}: 'tables' must map spaces to their metrics' tables")
        from hwnas.spaces import get_space

        for space, per_space in tables.items():
            try:  # a misspelt space: named here, not as a space without a table later
                get_space(str(space))
            except HwnasError as exc:
                raise HwnasError(f"{where}: tables.{space}: {exc}") from None
            if not isinstance(per_space, dict) or not per_space:
                raise HwnasError(
                    f"{where}: tables.{space} must map latency_ms or energy_mj to a table"
                )
            _known_keys(where, f"tables.{space}.", per_space, METRICS, "metric")
            for metric, entry in per_space.items():
                if not isinstance(entry, dict) or not entry.get("file"):
                    raise HwnasError(
                        f"{where}: tables.{space}.{metric} needs 'file' (and optionally "
                        "'column' and 'dataset')"
                    )
                _known_keys(where, f"tables.{space}.{metric}.", entry, ENTRY_KEYS)
        self.tables: dict[str, dict[str, dict[str, str]]] = tables
        self.batch_size = int(profile_number(profile, "batch_size", 1, integer=True, least=1))

    @property
    def value_batch_size(self) -> int:
        """The batch the table's values were measured at (``batch_size``, 1 by default)."""
        return self.batch_size

    @property
    def metrics(self) -> tuple[str, ...]:
        found = {m for per_space in self.tables.values() for m in per_space}
        return tuple(m for m in ("latency_ms", "energy_mj") if m in found)

    @cached_property
    def spaces(self) -> tuple[str, ...]:
        return tuple(self.tables)

    def status(self) -> tuple[bool, str]:
        if not self.tables:  # `tables: {}` was listed as usable, then had no metric at all
            return False, NO_TABLES
        return True, f"recorded table ({self.profile.get('source', 'published measurements')})"

    def why_no_metric(self, metric: str) -> str | None:
        return NO_TABLES if not self.tables else None

    def column(self, space: str, metric: str) -> np.ndarray:
        """The whole recorded column for ``space`` (index order), in ms or mJ.

        Raises:
            HwnasError: the device has no table for that space or metric.
        """
        try:
            entry = self.tables[space][metric]
        except KeyError:
            have = ", ".join(f"{s}/{m}" for s, ms in self.tables.items() for m in ms) or "none"
            raise HwnasError(
                f"device '{self.name}' has no recorded {metric} for space '{space}' "
                f"(it has: {have})"
            ) from None
        if not isinstance(entry, dict) or not entry.get("file"):
            raise HwnasError(
                f"device profile {self.profile.get('_path', self.name)}: tables.{space}."
                f"{metric} needs 'file' (and optionally 'column')"
            )
        path = table_path(str(entry["file"]), self.profile.get("_path"))
        check_table_file(
            path,
            str(entry["file"]),
            self.profile.get("_path"),
            f"device profile {self.profile.get('_path', self.name)}: tables.{space}.{metric}",
        )
        return keyed_column(path, str(entry.get("column") or metric), space, metric)

    def source(self, space: str, metric: str) -> str:
        entry = self.tables[space][metric]
        return f"recorded:{entry['file']}:{entry.get('column') or metric}"

    @property
    def table_spaces(self) -> tuple[str, ...]:
        return tuple(self.tables)

    def table(self, space: str, metric: str) -> np.ndarray | None:
        if metric not in self.tables.get(space, {}):
            return None
        return self.column(space, metric)

    def table_source(self, space: str, metric: str) -> str:
        return self.source(space, metric) if metric in self.tables.get(space, {}) else ""

    def table_dataset(self, space: str, metric: str) -> str | None:
        """The table entry's ``dataset``; by default the space's CIFAR-100 networks where it
        has them (every published NAS-Bench-201 and FBNet table here was measured on 32x32
        CIFAR networks), else its first dataset.

        Raises:
            HwnasError: a ``dataset`` the space does not have.
        """
        entry = self.tables.get(space, {}).get(metric)
        if not isinstance(entry, dict):
            return None
        from hwnas.spaces import get_space

        sp = get_space(space)
        named = entry.get("dataset")
        if named is None:
            return sp.default_dataset()
        if str(named) not in sp.datasets():
            raise HwnasError(
                f"device profile {self.profile.get('_path', self.name)}: tables.{space}."
                f"{metric}.dataset '{named}' is not a dataset of {space} "
                f"({', '.join(sp.datasets())})"
            )
        return str(named)

    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        if workload.arch is None:
            raise HwnasError(
                f"device '{self.name}' is a recorded table: it can only give values for "
                "architectures of its spaces, not for an arbitrary model"
            )
        from hwnas.spaces import get_space

        space = get_space(workload.arch.space)
        column = self.column(space.name, metric)
        if workload.dataset is not None:  # the table's networks must be the workload's
            self.check_table_dataset(space.name, metric, workload.dataset)
        index = space.index(workload.arch)
        value = float(column[index])
        if not np.isfinite(value) or value <= 0:  # a search skips it and goes on
            raise UnrecordedError(f"no recorded {metric} for {workload.label} on '{self.name}'")
        return Measurement(
            device=self.name,
            runtime=self.runtime,
            metric=metric,
            model_hash=workload.model_hash,
            label=workload.label,
            batch_size=self.batch_size,
            input_shape=(self.batch_size, *workload.input_shape[1:]),
            value=value,
            samples=(value,),
            source=self.source(space.name, metric),
        )


POWER_W = {
    "phone": (0.01, 30.0),
    "board": (0.01, 150.0),
    "fpga": (0.01, 300.0),
    "asic": (1e-4, 300.0),
    "cpu": (0.01, 2000.0),
    "gpu": (0.01, 3000.0),
}
"""Power (W, energy in mJ over latency in ms) a device of each profile ``class`` can draw
while it runs a network, with margins of 10x or more: an energy table whose median power is
outside is 1000x off (in uJ or J, not mJ; or its latency in s or us). The shipped tables:
the Raspberry Pi 5's 1.2-1.6 W."""

ANY_POWER_W = (1e-5, 3000.0)
""":data:`POWER_W` of a class it does not name."""


def power_warning(device: Device, space: str) -> str | None:
    """One line when ``device``'s energy table of ``space`` over its latency table (the median
    over the architectures both hold, at least 3) implies a power no device of its class
    draws, saying which unit slip it suggests; None otherwise (or without both tables)."""
    try:
        energy, latency = device.table(space, "energy_mj"), device.table(space, "latency_ms")
    except HwnasError:  # a table that cannot be read is said where it is read
        return None
    if energy is None or latency is None:
        return None
    both = np.isfinite(energy) & np.isfinite(latency)
    if both.sum() < 3:
        return None
    watts = float(np.median(energy[both] / latency[both]))
    cls = str(device.profile.get("class") or "")
    low, high = POWER_W.get(cls, ANY_POWER_W)
    if low <= watts <= high:
        return None
    if watts > high:
        slip = "energy in uJ, not mJ (or latency in s)"
    else:
        slip = "energy in J, not mJ (or latency in us)"
    return (
        f"device '{device.name}': its {space} energy over its latency is {watts:.3g} W "
        f"(median of {int(both.sum())} architectures), outside the {low:g}-{high:g} W a "
        f"{cls or 'device'} draws: {slip}?"
    )


def measured_power_warning(device: Device, latency_ms: float, energy_mj: float) -> str | None:
    """One line when a live measurement's energy over its latency (W) is a power no device of
    ``device``'s class draws (:data:`POWER_W`): the meter's unit read wrongly (a battery
    reporting mA where microamperes are read gave 0.003 W on a phone); None otherwise."""
    if not (latency_ms > 0 and energy_mj > 0):
        return None
    watts = energy_mj / latency_ms
    cls = str(device.profile.get("class") or "")
    low, high = POWER_W.get(cls, ANY_POWER_W)
    if low <= watts <= high:
        return None
    return (
        f"its energy over its latency is {watts:.3g} W, outside the {low:g}-{high:g} W a "
        f"{cls or 'device'} draws: is the energy meter read in the unit it reports?"
    )


UNIT_SLIP = 30.0
"""How many times below the lowest, or above the highest, of the recorded devices' values of
the same architectures (the median ratio) users' values must lie for :func:`unit_warning` to
suspect a unit: NAS-Bench-201's 43 recorded devices span 25x in median latency, a unit slip is
1000x."""


def unit_warning(
    space, metric: str, archs, values, exclude: str | None = None, names=None
) -> str | None:
    """One line when a user's values of ``metric`` (ms or mJ) for ``archs`` of ``space`` lie
    more than :data:`UNIT_SLIP` times below every shipped recorded device's values of the same
    architectures, or above them (the median ratio over the architectures, at least 3 of them
    in at least 2 recorded tables), naming the unit slip it suggests (seconds or microseconds
    for milliseconds); None otherwise, or for a space without an architecture index.
    ``exclude``: a device left out (the one whose table is being written). Only the tables
    hwnas ships are the reference: a user's table imported in seconds once must not make the
    next one in seconds look right. Three or more values that are all the same (a stuck timer,
    a spreadsheet's fill-down) get their own line, in any space. ``names``: where the user's
    file gives each architecture (``cal.csv:3``), named in the line for the values in another
    unit among the others (by default their index in the space)."""
    from hwnas.devices import recorded_tables
    from hwnas.spaces import IndexedSpace, ability

    given = np.asarray(values, dtype=np.float64)
    given = given[np.isfinite(given)]
    if len(given) >= 3 and given.max() - given.min() <= 1e-9 * abs(given.max()):
        return (
            f"all {len(given)} {metric} values are {given[0]:.6g}: a timer that did not run, "
            "or a column filled down? Every architecture would be predicted at that value"
        )
    indexed = ability(space, IndexedSpace)
    if indexed is None or len(archs) < 3:
        return None
    rows = np.array([indexed.index(a) for a in archs])
    tables = [
        np.asarray(t, dtype=np.float64)[rows]
        for dev, t in recorded_tables(space.name, metric, shipped=True)
        if dev.name != exclude
    ]
    if len(tables) < 2:
        return None
    stack = np.vstack(tables)
    stack[~(stack > 0)] = np.nan  # a cell a table lacks, or a value of 0
    held = np.isfinite(stack).any(axis=0)  # nanmin of an architecture no table holds warns
    low, high = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    low[held], high[held] = np.nanmin(stack[:, held], axis=0), np.nanmax(stack[:, held], axis=0)
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(low) & np.isfinite(high) & np.isfinite(v) & (v > 0)
    if ok.sum() < 3:
        return None
    below = float(np.median(low[ok] / v[ok]))
    above = float(np.median(v[ok] / high[ok]))
    unit = UNITS.get(metric, metric)
    big, small = ("s", "us") if unit == "ms" else ("J", "uJ")
    if below > UNIT_SLIP:
        how, slip = f"{below:.3g}x below the lowest", f"in {big}, not {unit}"
    elif above > UNIT_SLIP:
        how, slip = f"{above:.3g}x above the highest", f"in {small}, not {unit}"
    else:  # most in the right unit: are some not (a file of values in mixed units)?
        with np.errstate(divide="ignore", invalid="ignore"):
            low_ones = ok & (low / v > UNIT_SLIP)
            high_ones = ok & (v / high > UNIT_SLIP)
        odd = low_ones | high_ones
        if not odd.any():
            return None
        shown = [names[i] for i in np.flatnonzero(odd)] if names else [str(r) for r in rows[odd]]
        which = ("" if names else "index ") + ", ".join(shown[:5])
        which += ", ..." if odd.sum() > 5 else ""
        kinds = ([f"in {big}"] if low_ones.any() else []) + (
            [f"in {small}"] if high_ones.any() else []
        )
        return (
            f"{int(odd.sum())} of these {int(ok.sum())} {metric} values lie more than "
            f"{UNIT_SLIP:g}x outside {len(tables)} recorded devices' values of the same "
            f"{space.name} architectures ({which}): {' or '.join(kinds)}, not {unit}, "
            "among the others?"
        )
    return (
        f"these {metric} values are {how} of {len(tables)} recorded devices' values of the "
        f"same {int(ok.sum())} {space.name} architectures (median ratio): {slip}?"
    )


UNIT_SAMPLE = 500
"""Architectures of a user's recorded table :func:`table_unit_warning` compares."""


def table_unit_warning(device: Device, space, metric: str) -> str | None:
    """:func:`unit_warning`'s line for a user's recorded ``metric`` table of ``space`` (a
    ``kind: recorded`` profile of their own, an imported device), prefixed with the device;
    None for a shipped device, a device without that table, or values in the right unit.
    Compares at most :data:`UNIT_SAMPLE` of its architectures, spread over the index."""
    from hwnas.devices import is_shipped
    from hwnas.spaces import IndexedSpace, ability

    indexed = ability(space, IndexedSpace)
    if indexed is None or is_shipped(device):
        return None
    try:
        table = device.table(space.name, metric)
    except HwnasError:  # a table that cannot be read is said where it is read
        return None
    if table is None:
        return None
    values = np.asarray(table, dtype=np.float64)
    rows = np.flatnonzero(np.isfinite(values) & (values > 0))
    if len(rows) > UNIT_SAMPLE:
        rows = rows[np.linspace(0, len(rows) - 1, UNIT_SAMPLE).astype(int)]
    line = unit_warning(space, metric, [indexed.arch_at(int(i)) for i in rows], values[rows],
                        exclude=device.name)  # fmt: skip
    return f"device '{device.name}': its {space.name} table: {line}" if line else None
