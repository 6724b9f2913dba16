"""Reading the shipped CSV tables (gzip), cached per process.

The tables are small (at most 15,625 rows x 30 columns) and read with the standard library, so
no dataframe library is needed.
"""

from __future__ import annotations

import csv
import gzip
import io
from functools import lru_cache
from pathlib import Path

import numpy as np

from hwnas.errors import HwnasError


@lru_cache(maxsize=32)
def read_table(path: Path) -> dict[str, np.ndarray]:
    """Columns of a CSV (optionally gzip) file: name -> array (float64, or str for text).

    Raises:
        HwnasError: the file is missing or not a CSV table.
    """
    try:
        raw = path.read_bytes()
        text = gzip.decompress(raw).decode() if path.suffix == ".gz" else raw.decode()
    except (OSError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise HwnasError(f"cannot read table {path}: {exc}") from None
    rows = list(csv.reader(io.StringIO(text)))
    if len(rows) < 2:
        raise HwnasError(f"table {path} has no rows")
    header, body = rows[0], rows[1:]
    columns: dict[str, np.ndarray] = {}
    for j, name in enumerate(header):
        values = [r[j] for r in body]
        try:
            columns[name] = np.asarray(values, dtype=np.float64)
        except ValueError:
            columns[name] = np.asarray(values, dtype=object)
    return columns
