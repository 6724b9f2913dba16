"""Hand-made tables and calibration files that must be refused in one line (never a traceback,
never written over, never silently kept): malformed device tables, `hwnas refset measure` over
values typed in by hand, `hwnas measure import` of a value that disagrees with the store, and
paths that look like rich markup."""

from __future__ import annotations

import csv
import json
import shlex

import numpy as np
import pytest

from hwnas.spaces import get_space

SPACE = get_space("nasbench201")


def _profile(folder, name, table_text):
    (folder / "tables").mkdir(parents=True, exist_ok=True)
    (folder / "tables" / f"{name}.csv").write_text(table_text)
    (folder / f"{name}.yaml").write_text(
        f"name: {name}\nkind: recorded\nclass: board\nbatch_size: 1\ntables:\n  nasbench201:\n"
        f"    latency_ms: {{file: tables/{name}.csv}}\n"
    )


# the audit's shapes: each was an IndexError traceback (exit 1) in `hwnas devices` and in a
# search of any other device (its zoo reads every recorded table)
MALFORMED = {
    "dupidx": ("index,latency_ms\n5,1.0\n5,2.0\n",
               "row 3: architecture 5 appears more than once (also row 2)"),
    "short": ("index,latency_ms\n1,2.0\n2\n3,4.0\n",
              "row 3 has 1 cell, the header 2 (index, latency_ms)"),
    "blank": ("index,latency_ms\n1,2.0\n\n3,4.0\n", "row 3 is blank"),
    "bigarch": (f"arch,latency_ms\n{SPACE.arch_at(7).text},2.0\n99999,3.0\n",
                "row 3: 'arch' is an index outside nasbench201's indices 0..15624"),
    "bigindex": ("index,latency_ms\n1,2.0\n15625,3.0\n",
                 "row 3: 'index' 15625 is outside nasbench201's indices 0..15624"),
    # helper-61: what a cell holds is not repeated (the arch string, an index typed as text)
    "badarch": (f"arch,latency_ms\n{SPACE.arch_at(7).text},2.0\n|hunter2~0|,3.0\n",
                "row 3: 'arch' is neither an arch string of nasbench201 nor an index"),
    "textindex": ("index,latency_ms\n1,2.0\nhunter2,3.0\n",
                  "row 3: 'index' is not a number, not an index of nasbench201 (0..15624)"),
    # a column named twice: the last copy was read, the first ignored
    "twice": ("index,latency_ms,latency_ms\n1,2.0,5.0\n",
              "column 'latency_ms' appears more than once in the header"),
    # a quoted "1,234" in a ','-separated file was read as 1.234
    "comma": ('index,latency_ms\n1,2.0\n2,"1,234"\n',
              "row 3: column 'latency_ms' holds a number with a comma: a comma is a decimal "
              "mark only in a file with ';' between cells"),
    # Python's digit grouping: '1_09.025' was read as 109.025
    "under": ("index,latency_ms\n1,2.0\n2,1_09.025\n",
              "row 3: column 'latency_ms' holds a number with '_' digit grouping: write it "
              "without"),
    # index and arch that disagree (a file sorted by one column): the index was trusted
    "disagree": (f"index,arch,latency_ms\n1,{SPACE.arch_at(1).text},2.0\n"
                 f"2,{SPACE.arch_at(3).text},3.0\n3,{SPACE.arch_at(2).text},4.0\n",
                 "row 3: its 'arch' names architecture 3 of nasbench201, its 'index' 2"),
}  # fmt: skip


def test_a_malformed_table_breaks_its_profile_alone_naming_file_and_row(tmp_path, cli):
    profiles = tmp_path / "profiles"
    for name, (text, _) in MALFORMED.items():
        _profile(profiles, name, text)
    _profile(profiles, "fine", "index,latency_ms\n1,2.0\n3,4.0\n\n\n")  # blank end: no rows
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0, err
    listing = json.loads(out)
    broken = {p.split("/")[-1]: why for p, why in listing["broken_profiles"].items()}
    assert set(broken) == {f"{n}.yaml" for n in MALFORMED}, broken
    for name, (_, why) in MALFORMED.items():
        where = f"table {profiles}/tables/{name}.csv" + (": " if name == "twice" else ", ")
        assert where + why in broken[f"{name}.yaml"]
        assert "\n" not in broken[f"{name}.yaml"] and "hunter2" not in broken[f"{name}.yaml"]
    fine = next(d for d in listing["devices"] if d["device"] == "fine")
    assert fine["table_rows"] == {"nasbench201": 2}
    status, out, err = cli("devices")
    assert status == 0 and "Traceback" not in err, err
    assert f"broken profile {profiles}/dupidx.yaml: table" in out and "(skipped)" in out
    # every other device still searches, its zoo included; the cards read the shipped tables
    # alone (a warning line for each broken user table named devices the search never used)
    status, out, err = cli("search", "--device", "pixel3", "--budget", "5")
    assert status == 0, err
    assert not [line for line in err.splitlines() if line.startswith("warning: skipped")], err
    status, _, err = cli("search", "--device", "dupidx", "--budget", "5", "--no-zoo")
    assert status == 2 and err.strip().splitlines()[-1].startswith("error: table "), err
    assert MALFORMED["dupidx"][1] in err


def test_a_repeated_architecture_is_named_by_its_own_index(tmp_path, cli):
    """20 rows for indices 19..0, then index 3 again: main named architecture 16 (the 4th
    row's index), not 3."""
    profiles = tmp_path / "profiles"
    rows = "".join(f"{i},1.0\n" for i in range(19, -1, -1))
    _profile(profiles, "twice", f"index,latency_ms\n{rows}3,3.0\n")
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0, err
    (why,) = json.loads(out)["broken_profiles"].values()
    assert why.endswith("row 22: architecture 3 appears more than once (also row 18)"), why


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_refset_measure_never_writes_over_values_it_did_not_write(tmp_path, cli):
    out = tmp_path / "refset"
    assert cli("refset", "export", "--out", out)[0] == 0
    rows = _rows(out / "calibration.csv")
    for i, row in enumerate(rows):  # timed by hand, typed in
        row["latency_ms"] = f"{4 + i}.5"
    with open(out / "calibration.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    typed = (out / "calibration.csv").read_bytes()
    status, _, err = cli("refset", "measure", "--device", "pixel3", "--out", out)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "holds 10 measured value(s) that hwnas refset measure did not write" in err
    assert "another --out" in err
    assert (out / "calibration.csv").read_bytes() == typed

    # its own file: written again with the same values, refused where they would change
    mine = tmp_path / "mine"
    assert cli("refset", "measure", "--device", "pixel3", "--out", mine)[0] == 0
    written = (mine / "calibration.csv").read_bytes()
    assert cli("refset", "measure", "--device", "pixel3", "--out", mine)[0] == 0
    assert (mine / "calibration.csv").read_bytes() == written
    status, _, err = cli("refset", "measure", "--device", "raspi4", "--out", mine)
    said = [x for x in err.strip().splitlines() if not x.startswith("reference set on ")]
    assert status == 2 and len(said) == 1, err  # its progress, then one line
    assert f"{mine}/calibration.csv:2 holds latency_ms " in err and "this run gives" in err
    assert (mine / "calibration.csv").read_bytes() == written


def test_refset_measure_refuses_another_selections_file_before_measuring(tmp_path, cli):
    """A calibration file of another selection (or space, or metric) would be refused whatever
    the measurements gave: it is refused before the first network is measured, not after a
    board has spent minutes on them (no progress line before the one-line error)."""
    mine = tmp_path / "mine"
    assert cli("refset", "measure", "--device", "pixel3", "--out", mine)[0] == 0
    written = (mine / "calibration.csv").read_bytes()
    other = ("--select", "random", "-n", "10", "--seed", "3")
    status, _, err = cli("refset", "measure", "--device", "pixel3", *other, "--out", mine)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "reference set on" not in err
    assert f"{mine}/calibration.csv:2 holds latency_ms " in err
    assert "this run writes no latency_ms for it" in err
    assert (mine / "calibration.csv").read_bytes() == written


def test_refset_export_and_measure_replace_links_in_out_never_write_through_them(tmp_path, cli):
    """A folder handed over with `calibration.csv -> ~/.bashrc` (and links at the ONNX files'
    names, which an architecture's hash makes known in advance): `hwnas refset export --out`
    and `hwnas refset measure --out` wrote the CSV and the networks into the files the links
    named. Each file is now written beside its name and renamed over it: the links are
    replaced, the files they named are left as they were."""
    from hwnas.paths import temporary

    assert cli("refset", "export", "--out", tmp_path / "first")[0] == 0
    names = sorted(p.name for p in (tmp_path / "first").iterdir())
    assert "calibration.csv" in names and len(names) == 11
    for command in (("export",), ("measure", "--device", "pixel3")):
        out = tmp_path / command[0]
        out.mkdir()
        targets = {}
        for name in names:
            target = tmp_path / f"{command[0]}-{name}.bashrc"
            target.write_text("alias ls='ls --color'\n")  # no CSV value: nothing kept
            (out / name).symlink_to(target)
            targets[target] = target.read_bytes()
        # and at the temporary's name (host and pid known to whoever shares the machine)
        trap = tmp_path / f"{command[0]}-tmp.bashrc"
        trap.write_text("export PATH\n")
        temporary(out / "calibration.csv").symlink_to(trap)
        targets[trap] = trap.read_bytes()
        status, _, err = cli("refset", *command, "--out", out)
        assert status == 0, err
        assert {t: t.read_bytes() for t in targets} == targets
        written = ["calibration.csv"] if command[0] == "measure" else names
        for name in written:
            assert not (out / name).is_symlink() and (out / name).stat().st_size > 0, name
        assert (out / "calibration.csv").read_text().startswith("arch,")
        assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_refset_measure_of_a_recorded_device_leaves_the_unknown_cv_empty(tmp_path, cli):
    status, out, err = cli("refset", "measure", "--device", "pixel3", "--out", tmp_path / "r")
    assert status == 0, err
    rows = _rows(tmp_path / "r" / "calibration.csv")
    assert len(rows) == 10 and {r["cv"] for r in rows} == {""}  # main: 0.0000
    assert all(float(r["latency_ms"]) > 0 for r in rows)
    # and the file still calibrates (its reader takes the empty cv)
    status, _, err = cli("measure", "import", "--device", "cvboard", tmp_path / "r/calibration.csv")
    assert status == 0 and "10 measurements imported" in err, err


@pytest.mark.parametrize("name", ["[red]rs:thumbs_up:", "x[/]y"])
def test_refset_measure_prints_the_out_path_as_typed(tmp_path, cli, name):
    """main printed `-> rs:thumbs_up:/calibration.csv` (markup read: a path that is not
    there) and ended `x[/]y` with a rich MarkupError traceback after writing the file."""
    status, out, err = cli("refset", "measure", "--device", "pixel3", "--out", name)
    assert status == 0, err
    assert (tmp_path / name / "calibration.csv").is_file()
    assert f"-> {name}/calibration.csv" in out
    assert f"next: hwnas predict --calibration {shlex.quote(name + '/calibration.csv')}" in out


def test_the_command_refset_measure_suggests_runs_on_another_space(tmp_path, cli):
    """`hwnas refset measure --space fbnet` ended `next: hwnas predict --calibration
    rs/calibration.csv ...`, which refused the file's arch strings as NAS-Bench-201's: the
    command it suggests names the space now, and runs as printed."""
    status, out, err = cli("refset", "measure", "--space", "fbnet", "--device", "fpga",
                           "--out", "rs")  # fmt: skip
    assert status == 0, err
    (hint,) = [ln for ln in out.splitlines() if ln.startswith("next: hwnas predict")]
    command = shlex.split(hint.removeprefix("next: hwnas ").partition(" --onnx")[0])
    assert command[:3] == ["predict", "--space", "fbnet"]
    arch = _rows(tmp_path / "rs" / "calibration.csv")[0]["arch"]
    status, out, err = cli(*command, "--arch", arch)
    assert status == 0, err
    assert "adapted on 10 latency_ms values" in err + out


def test_refset_measure_on_a_table_of_whole_batches_says_so_and_its_file_is_not_read_as_one(
    tmp_path, cli
):
    """On a GPU table recorded at batch 256, `refset measure` wrote 1x3x32x32 beside each
    batch's latency and headed it "ms": `predict --calibration` and `measure import` took
    whole batches' latency as one input's. The file says batch 256 now, the readers refuse it
    in one line, and the command suggests --device, which reads them per batch. Architectures
    picked otherwise than the reference set are not suggested for --device (it reads the
    reference set)."""
    status, out, err = cli("refset", "measure", "--device", "1080ti_256", "--out", "g")
    assert status == 0, err
    assert "ms per batch of 256" in out
    assert {r["input_shape"] for r in _rows(tmp_path / "g" / "calibration.csv")} == {
        "256x3x32x32"
    }
    assert "next: hwnas predict --device 1080ti_256 --onnx MODEL.onnx" in out
    status, _, err = cli("predict", "--calibration", "g/calibration.csv", "--arch", "5")
    assert status == 2 and "input_shape 256x3x32x32 is batch 256" in err, err
    status, out, err = cli("refset", "measure", "--device", "pixel3", "--select", "random",
                           "-n", "4", "--out", "r")  # fmt: skip
    assert status == 0, err
    (hint,) = [ln for ln in out.splitlines() if ln.startswith("next: ")]
    assert hint == "next: hwnas predict --calibration r/calibration.csv --onnx MODEL.onnx"


def test_ctrl_c_in_refset_measure_names_what_it_keeps(tmp_path, cli, monkeypatch):
    """Ctrl-C during `hwnas refset measure` said "the study and measurements are saved": it
    has no study; each command says what it keeps."""
    import hwnas.predictors.calibration as calibration

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(calibration, "measure_reference_set", interrupted)
    status, _, err = cli("refset", "measure", "--device", "pixel3", "--out", "r")
    assert status == 130 and "study" not in err, err
    assert "interrupted: the measurements taken are in the store" in err


def test_refset_export_of_more_than_the_reference_set_says_what_the_others_are(tmp_path, cli):
    """`hwnas refset export -n 20` said "wrote 20 reference architectures": the reference set
    is 10, the other 10 random."""
    status, _, err = cli("refset", "export", "-n", "20", "--out", "ex")
    assert status == 0 and "wrote 20 (10 reference and 10 random other) architectures" in err
    assert len(_rows(tmp_path / "ex" / "calibration.csv")) == 20
    status, _, err = cli("refset", "export", "--out", "ex10")
    assert status == 0 and "wrote 10 reference architectures" in err


def _calibration(path, rows):
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["arch", "latency_ms"])
        writer.writerows(rows)
    return path


def test_measure_import_refuses_a_value_that_disagrees_with_the_stored_one(
    tmp_path, cli, hwnas_home
):
    from hwnas.store import MeasurementStore

    good = _calibration(tmp_path / "good.csv", [[i, 4.0 + i] for i in (11, 22, 33)])
    assert cli("measure", "import", "--device", "fewboard", good)[0] == 0
    best = _calibration(tmp_path / "best.csv", [[14112, 7.3985]])
    assert cli("measure", "import", "--device", "fewboard", best)[0] == 0
    status, _, err = cli("measure", "import", "--device", "fewboard", best)
    assert status == 0 and "0 measurements imported, 1 already stored (kept)" in err, err
    # a corrected value: main said "0 measurements imported, 1 already stored (kept)", exit 0
    fixed = _calibration(tmp_path / "best2.csv", [[14112, 70.0], [44, 5.0]])
    status, _, err = cli("measure", "import", "--device", "fewboard", fixed)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    arch = SPACE.arch_at(14112).text
    assert f"{fixed}: {arch} has latency_ms 70 ms" in err
    assert "already holds 7.3985 ms for it on device 'fewboard'" in err
    assert "another device name" in err
    with MeasurementStore(hwnas_home / "measurements.db") as st:  # nothing imported (44 neither)
        values = sorted(m.value for m in st.measurements("fewboard"))
    assert values == [7.3985, 15.0, 26.0, 37.0]

    # two files that disagree: main imported the first and "kept" the second's 10 values
    other = _calibration(tmp_path / "other.csv", [[i, 99.0] for i in (11, 22, 33)])
    status, _, err = cli("measure", "import", "--device", "twoboard", good, other)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{other}: {SPACE.arch_at(11).text} has latency_ms 99 ms, but {good} gives 15 ms" in err
    assert not (hwnas_home / "devices" / "twoboard.yaml").exists()
    status, _, err = cli("measure", "import", "--device", "twoboard", good, good)
    assert status == 0 and "3 measurements imported, 0 already stored (kept)" in err, err


def _full_table(order, key_header, key_cell, extra=""):
    """Every NAS-Bench-201 architecture's latency (1 + index / 1000 ms), rows in ``order``,
    keyed by a column ``key_header`` whose cell ``key_cell(index)`` gives (none: no column)."""
    rows = [(f"{key_cell(int(i))}," if key_header is not None else "") + f"{1 + i / 1000}{extra}"
            for i in order]  # fmt: skip
    head = (f"{key_header}," if key_header is not None else "") + f"latency_ms{extra}"
    return "\n".join([head, *rows]) + "\n"


SHUFFLED = np.random.default_rng(61).permutation(len(SPACE))
IN_ORDER = np.arange(len(SPACE))
ARCH_TEXT = [a.text for a in SPACE.all_archs()]

# a key column not named `index` or `arch`: the rows were read in index order, so a shuffled
# file gave every architecture another one's latency, without a word
HIDDEN_KEYS = {
    "archstr": (_full_table(SHUFFLED, "arch_str", ARCH_TEXT.__getitem__),
                "its column 'arch_str' holds text that is not nasbench201's arch strings in "
                "that order (row 2 is not architecture 0)"),
    "capital": (_full_table(SHUFFLED, "Index", str), "its column 'Index' looks like a key"),
    "ids": (_full_table(SHUFFLED, "id", str), "its column 'id' looks like a key"),
    "pandas": (_full_table(SHUFFLED, "", str), "its column without a name looks like a key"),
    "numbered": (_full_table(SHUFFLED, "n", str), "its column 'n' looks like a key"),
}  # fmt: skip
# ... and what still reads: the same columns in index order, value columns alone, a header
# ending in separators (nameless empty columns), and columns that key nothing: notes, flags,
# a number named for what it holds of an architecture (refused at first: helper-66)
IN_ORDER_TABLES = {
    "archstr-sorted": _full_table(IN_ORDER, "arch_str", ARCH_TEXT.__getitem__),
    "pandas-sorted": _full_table(IN_ORDER, "", str),
    "plain": _full_table(IN_ORDER, None, str),
    "trailing": _full_table(IN_ORDER, None, str, extra=",,"),
    "notes": _full_table(IN_ORDER, "notes", lambda i: "ok"),
    "flags": _full_table(IN_ORDER, "flagged", lambda i: "True" if i % 3 else "False"),
    "flops": _full_table(IN_ORDER, "arch_flops", lambda i: f"{1.5 + i % 7}"),
    "device": _full_table(IN_ORDER, "device_id", lambda i: "0"),
}


def test_a_key_column_by_another_name_is_refused_unless_it_follows_the_index(tmp_path, cli):
    profiles = tmp_path / "profiles"
    for name, (text, _) in HIDDEN_KEYS.items():
        _profile(profiles, name, text)
    for name, text in IN_ORDER_TABLES.items():
        _profile(profiles, name, text)
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0, err
    listing = json.loads(out)
    broken = {p.split("/")[-1]: why for p, why in listing["broken_profiles"].items()}
    assert set(broken) == {f"{n}.yaml" for n in HIDDEN_KEYS}, broken
    for name, (_, why) in HIDDEN_KEYS.items():
        line = broken[f"{name}.yaml"]
        assert line.startswith(f"table {profiles}/tables/{name}.csv has no 'index' or 'arch' "
                               "column, so its rows are read in nasbench201's index order, "
                               f"but {why}"), line  # fmt: skip
        assert "name that column 'index' (indices) or 'arch' (arch strings)" in line, line
    from hwnas.devices import get_device

    for name in IN_ORDER_TABLES:
        values = get_device(name).column("nasbench201", "latency_ms")
        np.testing.assert_allclose(values, 1 + IN_ORDER / 1000)
    # the audit's search: it ran on other architectures' latencies; refused before any work
    status, out, err = cli("search", "--device", "archstr", "--budget", "20", "--no-zoo")
    assert status == 2 and out == "", err
    (line,) = err.strip().splitlines()
    assert line.startswith("error: table ") and HIDDEN_KEYS["archstr"][1] in line, err
    status, _, err = cli("runs", "list")
    assert status == 2 and "no study database" in err


def test_decimal_commas_are_read_in_semicolon_files_alone(tmp_path):
    """`;` between cells (a decimal-comma spreadsheet's file): 3,5 is 3.5, an empty cell no
    value (main refused the column as text once a cell was empty). A tab-separated file's
    "1,234" is refused as a ','-separated one's is: a thousand, or 1.234?"""
    from hwnas.devices.recorded import keyed_column
    from hwnas.errors import HwnasError

    semi = tmp_path / "semi.csv"
    semi.write_text("index;latency_ms\n0;1,234\n1;\n2;2,5\n")
    values = keyed_column(semi, "latency_ms", "nasbench201", "latency_ms")
    assert values[0] == 1.234 and values[2] == 2.5 and np.isnan(values[1])
    assert int(np.isfinite(values).sum()) == 2
    tab = tmp_path / "tab.csv"
    tab.write_text("index\tlatency_ms\n0\t1,234\n")
    with pytest.raises(HwnasError, match=r"tab.csv, row 2: column 'latency_ms' holds a number "
                                         "with a comma"):  # fmt: skip
        keyed_column(tab, "latency_ms", "nasbench201", "latency_ms")


def test_a_thousands_point_beside_decimal_commas_is_refused_in_a_semicolon_table(tmp_path):
    """A decimal-comma spreadsheet writes 12.5 ms as 12,5 and, with the 1000 separator shown,
    1234 ms as 1.234: main read that table's 1.234 as 1.234 ms. The column's own cells decide:
    beside a decimal comma, a point shaped like thousands grouping is refused (naming its row);
    beside 0.5 (a decimal point) 1.234 is read as 1.234, and a row-less text column stays
    text for its reader."""
    from hwnas.devices.recorded import keyed_column
    from hwnas.errors import HwnasError

    mixed = tmp_path / "mixed.csv"
    mixed.write_text("index;latency_ms\n0;12,5\n1;1.234\n2;7\n")
    why = "mixed.csv, row 3: column 'latency_ms' holds a number whose point may be a thousands"
    with pytest.raises(HwnasError, match=why):
        keyed_column(mixed, "latency_ms", "nasbench201", "latency_ms")
    both = tmp_path / "both.csv"
    both.write_text("index;latency_ms\n0;1.234,5\n1;2,5\n")
    with pytest.raises(HwnasError, match=r"both.csv, row 2: .* thousands separator"):
        keyed_column(both, "latency_ms", "nasbench201", "latency_ms")
    points = tmp_path / "points.csv"
    points.write_text("index;latency_ms\n0;0.5\n1;1.234\n2;12.5\n")
    values = keyed_column(points, "latency_ms", "nasbench201", "latency_ms")
    np.testing.assert_allclose(values[:3], [0.5, 1.234, 12.5])
    commas = tmp_path / "commas.csv"
    commas.write_text("index;latency_ms\n0;12,5\n1;1234\n2;\n")
    values = keyed_column(commas, "latency_ms", "nasbench201", "latency_ms")
    np.testing.assert_allclose(values[:2], [12.5, 1234.0])
    assert np.isnan(values[2])


def test_measure_import_refuses_a_number_with_a_comma_in_a_comma_separated_file(tmp_path, cli):
    """main imported a quoted "1,234" (Excel's thousands separator) as 1.234 ms."""
    path = _calibration(tmp_path / "thousands.csv",
                        [[11, "4.5"], [22, "1,234"], [33, "5.5"]])  # fmt: skip
    assert '"1,234"' in path.read_text()  # quoted by csv: one cell
    status, _, err = cli("measure", "import", "--device", "kboard", path)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{path}:3: latency_ms holds a comma: a comma is a decimal mark only in a file" in err
    semi = tmp_path / "semi.csv"
    semi.write_text("arch;latency_ms\n11;4,5\n22;1,234\n33;5,5\n")
    status, _, err = cli("measure", "import", "--device", "kboard", semi)
    assert status == 0 and "3 measurements imported" in err, err
