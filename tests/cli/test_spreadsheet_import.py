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


def test_an_arch_column_moved_against_the_exported_onnx_names_is_refused(tmp_path, hwnas_home):
    """`hwnas refset export`'s onnx column names each network by its model hash: an arch column
    shifted a row against the onnx and value columns (one column sorted alone in a spreadsheet)
    stored every value under another architecture (main: rc 0, all 10 wrong); a file exported
    for cifar100 imported as cifar10's networks (the same 1x3x32x32 input) is named so."""
    import csv

    out = tmp_path / "ref"
    r = hwnas_main("refset", "export", "--out", out)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(out / "calibration.csv")))
    for k, row in enumerate(rows):
        row["latency_ms"] = f"{1.5 + k}"
    archs = [row["arch"] for row in rows]
    for row, arch in zip(rows, archs[-1:] + archs[:-1]):  # the arch column moved down a row
        row["arch"] = arch
    shifted = tmp_path / "shifted.csv"
    with open(shifted, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    first = rows[0]["onnx"]
    expected = (
        f"error: {shifted}:2: onnx {first} is the network of the arch on line 3, not of this "
        "row's: the arch column was moved against the onnx and value columns (one column "
        "sorted alone?); put each arch back beside its network's name and value\n"
    )
    for args in (["measure", "import", "--device", "dev", shifted],
                 ["measure", "import", "--device", "dev", "--table", shifted],
                 ["predict", "--calibration", shifted, "--arch", "1"]):  # fmt: skip
        r = hwnas_main(*args)
        assert (r.returncode, r.stderr) == (2, expected), args
    assert not (hwnas_home / "devices" / "dev.yaml").exists() and not _stored(hwnas_home)
    for row, arch in zip(rows, archs):  # put back: imported as exported
        row["arch"] = arch
    fixed = tmp_path / "fixed.csv"
    with open(fixed, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    r = hwnas_main("measure", "import", "--device", "dev", "--dataset", "cifar10", fixed)
    assert (r.returncode, r.stderr) == (2, (
        f"error: {fixed}:2: onnx {first} is the network of this row's arch built for cifar100, "
        "but hwnas measure import reads values of cifar10's networks: its value would be "
        "stored as another network's; pass --dataset cifar100\n"
    ))  # fmt: skip
    r = hwnas_main("measure", "import", "--device", "dev", fixed)
    assert r.returncode == 0, r.stderr
    assert _stored(hwnas_home) == {a: 1.5 + k for k, a in enumerate(archs)}


def test_refset_measure_for_another_dataset_drops_the_exports_onnx_names(tmp_path, hwnas_home):
    """`refset measure --dataset cifar10` into a folder `refset export` wrote for cifar100
    kept the cifar100 networks' names beside the cifar10 values: their import as cifar10's
    was refused with advice to pass --dataset cifar100."""
    out = tmp_path / "ref"
    pick = ["--select", "random", "-n", "3", "--out", out]
    r = hwnas_main("refset", "export", *pick)
    assert r.returncode == 0, r.stderr
    r = hwnas_main("refset", "measure", "--device", "cpu-fast", "--dataset", "cifar10", *pick)
    assert r.returncode == 0, r.stderr
    cal = out / "calibration.csv"
    r = hwnas_main("measure", "import", "--device", "dev", "--dataset", "cifar10", cal)
    assert r.returncode == 0, r.stderr
    assert len(_stored(hwnas_home)) == 3
