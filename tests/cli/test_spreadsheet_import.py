"""A spreadsheet of measurements typed in by hand, imported as a user types it (`hwnas measure
import`): what a spreadsheet in a decimal-comma locale writes (';' between cells, '3,5', and
'1.173' for 1,173 where the cells show thousands separators) is read as it was shown, or
refused in one line before anything is stored; never a value 1000x off."""

from __future__ import annotations

from helpers import hwnas_main

from hwnas.spaces import get_space
from hwnas.store import MeasurementStore

SPACE = get_space("nasbench201")
ARCHS = [SPACE.arch_at(i).text for i in (11, 222, 3333, 4444)]


def _semicolons(path, cells):
    """A ';'-separated calibration file (as a spreadsheet saves it: CRLF) of ``ARCHS`` with
    the latency_ms ``cells``."""
    rows = ["arch;latency_ms", *(f"{a};{c}" for a, c in zip(ARCHS, cells))]
    path.write_bytes(("\r\n".join(rows) + "\r\n").encode())
    return path


def _stored(home) -> dict[str, float]:
    if not (home / "measurements.db").exists():
        return {}
    with MeasurementStore(home / "measurements.db") as st:
        return {m.label: m.value for m in st.measurements("dev", "latency_ms")}


POINT_ERROR = (
    "a point in a file with ';' between cells may be a thousands separator (a thousand and "
    "more, or a decimal?): save the numbers without thousands separators (format the cells as "
    "numbers without the 1000 separator), or write them with decimal points and ',' between "
    "cells"
)


def test_a_thousands_separator_in_a_semicolon_file_is_refused_not_read_as_a_decimal_point(
    tmp_path, hwnas_home
):
    """A decimal-comma spreadsheet shows 1173 ms as '1.173' and saves it so: whole numbers
    with thousands separators, or decimal commas beside them, were imported as 1.173 ms
    (main: rc 0, 7 of 10 values 1000x too small)."""
    whole = _semicolons(tmp_path / "whole.csv", ["632", "1.173", "170", "870"])
    commas = _semicolons(tmp_path / "commas.csv", ["11,7317", "1.234", "1,7013", "8,7008"])
    both = _semicolons(tmp_path / "both.csv", ["11,7317", "1.234,5", "1,7013", "8,7008"])
    for path, line, cell in ((whole, 3, "1.173"), (commas, 3, "1.234"), (both, 3, "1.234,5")):
        r = hwnas_main("measure", "import", "--device", "dev", path)
        assert r.returncode == 2, r.stderr
        assert r.stderr == f"error: {path}:{line}: latency_ms '{cell}': {POINT_ERROR}\n"
        assert not (hwnas_home / "devices" / "dev.yaml").exists() and not _stored(hwnas_home)


def test_a_semicolon_file_whose_points_are_decimal_points_is_read_as_written(tmp_path, hwnas_home):
    """A program's ';'-separated file with decimal points ('6.3278') is imported as written:
    '1.173' beside '6.3278' is 1.173 ms."""
    points = _semicolons(tmp_path / "points.csv", ["6.3278", "1.173", "1.5", "870"])
    r = hwnas_main("measure", "import", "--device", "dev", points)
    assert r.returncode == 0, r.stderr
    assert _stored(hwnas_home) == dict(zip(ARCHS, [6.3278, 1.173, 1.5, 870.0]))
