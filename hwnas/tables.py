"""Reading the shipped CSV tables (gzip), cached per process and in binary on disk.

The tables are small (at most 15,625 rows x 30 columns) and parsed with the standard library,
so no dataframe library is needed. Parsing one takes 0.1-0.3 s of CPU, at every start of every
command; the columns are therefore also kept as an uncompressed NumPy ``.npz`` file in the
user's cache folder (``HWNAS_CACHE``, default the platform's, ``~/.cache/hwnas`` on Linux),
named by a hash of the CSV file's bytes, so an edited or updated table is parsed afresh and a
stale cache is never read. Loading it takes milliseconds. A cache that cannot be written or
read is skipped silently: it only ever saves time.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import os
import re
from collections.abc import Iterable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

import numpy as np

from hwnas import spreadsheet
from hwnas.errors import HwnasError

T = TypeVar("T")

MAX_TABLE_BYTES = 256 * 2**20
"""Largest table file, and largest once a gzip file is decompressed: 15,625 rows x 30 columns
take 5 MB; a device file (``/dev/zero``), a pipe or a larger file is refused before it is read."""

MAX_TABLE_ROWS = 100_000
"""Most rows (below the header) a table, calibration or architecture CSV file may have: one per
architecture, and the largest shipped table (NAS-Bench-201's) has 15,625. Counted while the
file is read: a 16 KB gzip file of 8 million one-cell rows took 1.2 GB once parsed."""

MAX_TABLE_CELLS = 2_000_000
"""Most cells such a file may have (15,625 rows x 30 columns are 470,000), counted by its
separators before it is parsed: one line of a million separators is a million cells."""

CACHE_VERSION = 6  # 3: ";"-separated files with decimal commas (hwnas.spreadsheet); 4: rows
# with cells beyond the header are refused (a cache of one parsed before must not be read);
# 5: decimal commas read in ";"-separated files alone, a column named twice refused; 6: a
# ";"-separated file's 1.234 beside 12,5 refused (it was read as 1.234, not a thousand and more)
"""Part of every cache file's name: bump it when the parsed form changes."""

COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.%()-]{0,63}")
"""What a column name must look like for an error message to repeat it: a profile may name
any file as its table, and a credentials file's first line must not be shown."""


def check_cells(text: str, sep: str, where: str) -> None:
    """Refuse CSV ``text`` of more than :data:`MAX_TABLE_CELLS` cells (counted by separators
    and line ends, an upper bound), before it is parsed.

    Raises:
        HwnasError: one line starting with ``where`` (the file).
    """
    if text.count(sep) + text.count("\n") + text.count("\r") > MAX_TABLE_CELLS:
        raise HwnasError(
            f"{where}: more than {MAX_TABLE_CELLS:,} cells, more than a table of every "
            "architecture holds"
        )


def limit_rows(rows: Iterable[T], where: str, limit: int = MAX_TABLE_ROWS) -> Iterator[T]:
    """``rows`` (a CSV reader's) as they are read, refused at the first beyond ``limit``
    (:data:`MAX_TABLE_ROWS`; a plain reader's header is one more), so that no more are built.

    Raises:
        HwnasError: one line starting with ``where`` (the file).
    """
    for n, row in enumerate(rows):
        if n >= limit:
            raise HwnasError(
                f"{where}: more than {MAX_TABLE_ROWS:,} rows (one per architecture; a whole "
                "NAS-Bench-201 table has 15,625)"
            )
        yield row


def cache_dir() -> Path:
    """Folder of the binary table cache: ``HWNAS_CACHE``, else the platform's user cache
    folder for hwnas (``~/.cache/hwnas/tables`` on Linux)."""
    env = os.environ.get("HWNAS_CACHE")
    if env:
        return Path(env).expanduser() / "tables"
    import platformdirs

    return Path(platformdirs.user_cache_dir("hwnas", appauthor=False)) / "tables"


def file_version(path: Path) -> tuple[int, int]:
    """(modification time in ns, size in bytes) of ``path``, (0, -1) when it cannot be read:
    part of the key of every per-process cache of a file, so that a table written again (a
    corrected CSV imported anew) is read again in a process that read the old one."""
    try:
        st = path.stat()
    except OSError:
        return (0, -1)
    return (st.st_mtime_ns, st.st_size)


def read_table(path: Path) -> dict[str, np.ndarray]:
    """Columns of a CSV (optionally gzip) file: name -> array (float64, or str objects for
    text), in the file's column order; a UTF-8 byte-order mark (what spreadsheets write) is
    not part of the first column's name.

    A column whose cells are all numbers is float64; in a ``;``-separated file (a
    decimal-comma spreadsheet's) ``3,5`` is 3.5 and an empty cell NaN. Elsewhere a comma is no
    decimal mark (:func:`hwnas.spreadsheet.number`): such a column stays text, for its reader
    to refuse. A column named twice is refused; a nameless one repeated (a header ending in
    separators) is kept once where its copies are empty.

    Raises:
        HwnasError: the file is missing, not a regular file (a device, a pipe), larger than
            :data:`MAX_TABLE_BYTES` (decompressed), of more than :data:`MAX_TABLE_ROWS` rows
            or :data:`MAX_TABLE_CELLS` cells, or not a CSV table: no rows, a column
            named twice, or a row (blank lines at the end aside) with fewer cells than the
            header or more that are not empty, named by its row.
    """
    return _read_table(path, file_version(path))


@lru_cache(maxsize=32)
def _read_table(path: Path, version: tuple[int, int]) -> dict[str, np.ndarray]:
    from hwnas.paths import read_bounded

    try:
        raw = read_bounded(path, MAX_TABLE_BYTES)
    except OSError as exc:
        raise HwnasError(f"cannot read table {path}: {exc}") from None
    digest = hashlib.blake2b(raw, digest_size=12).hexdigest()
    cached = cache_dir() / f"{path.name}.{digest}.v{CACHE_VERSION}.npz"
    columns = _load(cached)
    if columns is None:
        columns = _parse(path, raw)
        _save(cached, columns)
    return columns


def _parse(path: Path, raw: bytes) -> dict[str, np.ndarray]:
    try:
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=io.BytesIO(raw)) as fh:
                raw = _read_chunks(fh, MAX_TABLE_BYTES + 1)
        if len(raw) > MAX_TABLE_BYTES:
            raise HwnasError(
                f"cannot read table {path}: more than the {MAX_TABLE_BYTES // 2**20} MiB a "
                "table may have once decompressed"
            )
        text = raw.decode("utf-8-sig")
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise HwnasError(f"cannot read table {path}: {exc}") from None
    sep = spreadsheet.delimiter(text.split("\n", 1)[0])
    check_cells(text, sep, f"table {path}")
    reader = csv.reader(io.StringIO(text), delimiter=sep)
    try:
        rows = list(limit_rows(reader, f"table {path}", MAX_TABLE_ROWS + 1))  # and the header
    except csv.Error as exc:  # a cell over csv's field size limit (128 KiB)
        raise HwnasError(f"table {path}, line {reader.line_num}: not CSV: {exc}") from None
    if len(rows) < 2:
        raise HwnasError(f"table {path} has no rows")
    header, body = rows[0], rows[1:]
    while body and not any(cell.strip() for cell in body[-1]):
        body.pop()  # blank lines at the end (an editor's, a spreadsheet's): no rows
    if not body:
        raise HwnasError(f"table {path} has no rows")
    for i, row in enumerate(body):
        # a short row (a blank line, a cell left out) would shift its cells into other
        # columns, a long one means a cell holds the separator (3,5 in a ','-separated file)
        filled = [j for j, cell in enumerate(row) if cell.strip()]
        if len(row) < len(header) or (filled and filled[-1] >= len(header)):
            n = len(row) if len(row) < len(header) else filled[-1] + 1
            what = "is blank" if not filled else f"has {n} cell{'s' * (n != 1)}"
            raise HwnasError(
                f"table {path}, row {i + 2} {what}, the header {len(header)} "
                + _header_shown(header)
            )
    columns: dict[str, np.ndarray] = {}
    empty: set[str] = set()  # nameless columns without a value so far
    for j, name in enumerate(header):
        values = [r[j] for r in body]
        blank = not any(v.strip() for v in values)
        if name in columns:  # a dict would keep the last copy: the other's values unread
            if name or not (blank or name in empty):
                shown = f"column '{name}'" if COLUMN_NAME.fullmatch(name) else "a column name"
                raise HwnasError(
                    f"table {path}: {shown if name else 'a column without a name'} appears "
                    "more than once in the header; which one holds the values? Name each once"
                )
            if blank:
                continue  # a header ending in separators: nameless empty columns
        empty.discard(name)
        if not name and blank:
            empty.add(name)
        columns[name] = _column(values, sep, path, name)
    return columns


def _read_chunks(fh, limit: int) -> bytes:
    """At most ``limit`` bytes of ``fh``, read a MiB at a time: ``GzipFile.read(limit)``
    allocates ``limit`` bytes at once (257 MiB for a 16 KB table)."""
    chunks, total = [], 0
    while total < limit:
        chunk = fh.read(min(2**20, limit - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _header_shown(header: list[str]) -> str:
    """The header as an error shows it: its names, only where each reads as a column name
    (:data:`COLUMN_NAME`; empty ones too, a header ending in separators), else a note that it
    is not shown: a table may be any file (a link named ``board.csv`` to a ``.env``), whose
    first line must not be printed."""
    if len(header) <= 50 and all(not n or COLUMN_NAME.fullmatch(n) for n in header):
        return f"({', '.join(header)[:80]})"
    return "(its first line is no CSV header, not shown)"


def _column(values: list[str], sep: str, path: Path, name: str) -> np.ndarray:
    """One column's cells: float64 where all are numbers (in a ``;``-separated file, with
    decimal commas, and empty cells NaN), else the text (:func:`read_table`).

    Raises:
        HwnasError: in a ``;``-separated file, a column of numbers with a cell shaped like
            thousands grouping (``1.234``) where the column's other cells do not show the point
            to be a decimal mark (:func:`hwnas.spreadsheet.decimal_point`): a decimal-comma
            spreadsheet's ``12,5`` beside ``1.234`` (a thousand and more) was read as 1.234.
    """
    if sep != ";":
        if any("_" in v for v in values):  # Python's digit grouping: '1_09.025' read as 109.025
            return np.asarray(values, dtype=object)
        try:
            return np.asarray(values, dtype=np.float64)
        except ValueError:
            return np.asarray(values, dtype=object)
    cells = [v.strip() for v in values]
    try:  # numbers at all? (a point read as a decimal mark for now; empty cells no value)
        numbers = [spreadsheet.number(v, sep) if v else np.nan for v in cells]
    except spreadsheet.AmbiguousPoint:  # 1.234,5: thousands points and a decimal comma
        numbers = None
    except ValueError:
        return np.asarray(values, dtype=object)  # text (arch strings): its reader's to check
    point = spreadsheet.decimal_point(cells, sep)
    if numbers is not None and point:
        return np.asarray(numbers, dtype=np.float64)
    for i, cell in enumerate(cells):
        if cell:
            try:
                spreadsheet.number(cell, sep, point)
            except spreadsheet.AmbiguousPoint:
                shown = f"column '{name}'" if COLUMN_NAME.fullmatch(name) else "a column"
                raise HwnasError(
                    f"table {path}, row {i + 2}: {shown} holds a number whose point may be "
                    f"a thousands separator: {spreadsheet.POINT_HINT}"
                ) from None
            except ValueError:
                return np.asarray(values, dtype=object)
    return np.asarray(numbers, dtype=np.float64)


def _load(path: Path) -> dict[str, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k].astype(object) if z[k].dtype.kind == "U" else z[k] for k in z.files}
    except Exception:  # missing, truncated or unreadable: parse the CSV instead
        return None


def _save(path: Path, columns: dict[str, np.ndarray]) -> None:
    """Write the cache atomically (a reader never sees half a file); failures are ignored."""
    arrays = {k: v.astype(str) if v.dtype == object else v for k, v in columns.items()}
    from hwnas.paths import sweep_temporaries, temporary

    tmp = temporary(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(path.parent)
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
