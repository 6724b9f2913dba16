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
    shifted = _write_rows(tmp_path / "shifted.csv", rows)
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
    fixed = _write_rows(tmp_path / "fixed.csv", rows)
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


def _import(path, *more):
    return hwnas_main("measure", "import", "--device", "dev", *more, path)


def test_a_number_with_python_digit_grouping_is_no_number(tmp_path, hwnas_home):
    """`1_5` was imported as 15.0 (float() reads Python's digit grouping)."""
    path = tmp_path / "under.csv"
    rows = [f"{a},{k + 1.5}" for k, a in enumerate(ARCHS[:-1])] + [f"{ARCHS[-1]},1_5"]
    path.write_text("arch,latency_ms\n" + "\n".join(rows) + "\n")
    r = _import(path)
    assert r.returncode == 2 and "latency_ms '1_5' is not a number" in r.stderr, r.stderr
    assert not _stored(hwnas_home)


def test_a_utf16_file_is_named_so_with_how_to_save_it(tmp_path, hwnas_home):
    """Excel's 'Unicode Text' (UTF-16) was "not a readable CSV file ('utf-8' codec can't
    decode byte 0xff in position 0: invalid start byte)"."""
    path = tmp_path / "u16.csv"
    path.write_text("arch,latency_ms\n" + "".join(f"{a},{k + 1.5}\n" for k, a in
                                                  enumerate(ARCHS)), encoding="utf-16")  # fmt: skip
    r = _import(path)
    assert (r.returncode, r.stderr) == (2, (
        f"error: {path}: UTF-16 text (Excel's 'Unicode Text'), not UTF-8: save it as "
        "'CSV UTF-8' (in Excel: CSV UTF-8 (Comma delimited))\n"
    ))  # fmt: skip


def test_a_row_without_a_value_says_to_fill_it_in_or_delete_it(tmp_path, hwnas_home):
    """The exported calibration.csv not filled in, or a value left out, was "latency_ms ''
    is not a number"."""
    path = _semicolons(tmp_path / "gap.csv", ["6,5", "", "1,5", "8,5"])
    r = _import(path)
    assert (r.returncode, r.stderr) == (2, (
        f"error: {path}:3: no latency_ms value: fill in the value measured for its network, "
        "or delete the row\n"
    ))  # fmt: skip
    assert not _stored(hwnas_home)


def test_rows_of_separators_only_are_blank_lines(tmp_path, hwnas_home):
    """Excel saves rows once used as ';;' (main: "line 6: empty arch")."""
    path = _semicolons(tmp_path / "used.csv", ["6,5", "11,5", "1,5", "8,5"])
    path.write_bytes(path.read_bytes() + b";\r\n;;\r\n")
    r = _import(path)
    assert r.returncode == 0, r.stderr
    assert _stored(hwnas_home) == dict(zip(ARCHS, [6.5, 11.5, 1.5, 8.5]))


def test_a_value_column_named_with_its_unit_is_read_and_another_unit_refused(tmp_path, hwnas_home):
    """'Arch' and 'latency (ms)' were refused as no arch / no value column; 'latency (s)' is
    refused with how to convert."""
    rows = "".join(f"{a},{k + 1.5}\n" for k, a in enumerate(ARCHS))
    seconds = tmp_path / "s.csv"
    seconds.write_text("Arch,latency (s)\n" + rows)
    r = _import(seconds)
    assert (r.returncode, r.stderr) == (2, (
        f"error: {seconds}: column 'latency (s)' is in s, but hwnas reads latency in ms: "
        "convert the values to ms and name the column latency_ms\n"
    ))  # fmt: skip
    named = tmp_path / "ms.csv"
    named.write_text("Arch,Latency [ms]\n" + rows)
    r = _import(named)
    assert r.returncode == 0, r.stderr
    assert _stored(hwnas_home) == {a: k + 1.5 for k, a in enumerate(ARCHS)}


def test_values_in_another_unit_among_the_others_are_named_by_their_line(tmp_path, hwnas_home):
    """The warning named the architectures by their index in the space ("index 14451"),
    which a file of arch strings never shows."""
    from hwnas.predictors.data import get_column

    y = get_column("nasbench201", "raspi4").values
    picked = [11, 222, 3333, 4444, 5555, 6666]
    path = tmp_path / "mixed.csv"
    path.write_text("arch,latency_ms\n" + "".join(
        f"{SPACE.arch_at(i).text},{y[i] * (1000 if k in (1, 4) else 1):.6g}\n"
        for k, i in enumerate(picked)))  # fmt: skip
    r = _import(path)
    assert r.returncode == 0, r.stderr
    warning = r.stderr.splitlines()[-1]
    assert "(mixed.csv:3, mixed.csv:6): in us, not ms, among the others?" in warning, warning


def test_refset_export_keeps_values_under_a_header_with_its_unit(tmp_path, hwnas_home):
    """A filled calibration.csv whose value column was renamed 'latency (ms)' (read by
    measure import) is not written over by exporting into its folder again."""
    out = tmp_path / "ref"
    out.mkdir()
    (out / "calibration.csv").write_text(f"arch,latency (ms)\n{ARCHS[0]},6.5\n")
    r = hwnas_main("refset", "export", "--out", out)
    assert r.returncode == 2 and "holds 1 measured value(s)" in r.stderr, r.stderr
    assert "6.5" in (out / "calibration.csv").read_text()


def _write_rows(path, rows):
    """``rows`` (dicts) as a CSV file at ``path``, the first row's keys its header."""
    import csv

    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path
