"""Users' own device tables: a recorded profile with a relative CSV path, a full table imported
with `hwnas measure import`, and broken user profiles that must not break the others."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from hwnas.spaces import get_space


def _write_table(path, rows, header, values, key="arch"):
    space = get_space("nasbench201")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        for r, v in zip(rows, values):
            writer.writerow([space.arch_at(int(r)).text if key == "arch" else int(r), v])


def _pareto(run_folder):
    with open(run_folder / "pareto.csv") as fh:
        return list(csv.DictReader(fh))


def test_user_device_from_a_relative_csv_is_searched_on_its_own_values(tmp_path, cli):
    space = get_space("nasbench201")
    rng = np.random.default_rng(3)
    rows = rng.choice(len(space), 150, replace=False)
    energy = np.round(rng.uniform(1.0, 9.0, len(rows)), 4)
    profiles = tmp_path / "profiles"
    _write_table(profiles / "data" / "board.csv", rows, ["arch", "energy_mj"], energy)
    (profiles / "myboard.yaml").write_text(
        "name: myboard\nkind: recorded\ndescription: my board's energy\n"
        "tables:\n  nasbench201:\n    energy_mj: {file: data/board.csv}\n"
    )
    # run from tmp_path: the table's path is relative to the YAML's folder, not to this one
    args = ["search", "--device", "myboard", "--objective", "energy", "--budget", "12"]
    status, out, err = cli(*args, "--no-zoo", "--json", profiles=profiles)
    assert status == 0, err
    summary = json.loads(out)
    table = {space.arch_at(int(i)).text: e for i, e in zip(rows, energy)}
    front = _pareto(tmp_path / summary["run_folder"])
    assert front and all(float(p["energy_mj"]) == table[p["arch"]] for p in front)
    assert summary["measurements"]["read_from_table"] == 12
    best = summary["best"]
    assert best["energy_mj"] == table[best["arch"]]
    # every line that gives a cost gives its unit: energy in mJ, not "nan ms"
    assert f"{best['energy_mj']:.3f} mJ" in err and "nan" not in err


def test_a_full_table_imported_becomes_a_recorded_device_searched_on_it(tmp_path, cli):
    space = get_space("nasbench201")
    n = len(space)
    latency = np.round(1.0 + (np.arange(n) * 7919 % 1000) / 100.0, 3)  # any positive values
    _write_table(tmp_path / "full.csv", np.arange(n), ["arch", "latency_ms"], latency, key="index")
    status, _, err = cli("measure", "import", "--device", "lab-npu", "full.csv")
    assert status == 0, err
    assert "recorded table, latency_ms of 15625 of 15625" in err
    status, out, err = cli("search", "--device", "lab-npu", "--budget", "10", "--no-zoo", "--json")
    assert status == 0, err
    summary = json.loads(out)
    assert summary["measurements"]["read_from_table"] == 10  # its own values, no prediction
    assert "predictor" not in summary
    for p in _pareto(tmp_path / summary["run_folder"]):
        assert float(p["latency_ms"]) == latency[space.index(space.parse(p["arch"]))]


def test_broken_user_profiles_are_listed_and_every_other_device_still_works(tmp_path, cli):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "gone.yaml").write_text(
        "name: gone\nkind: recorded\ntables:\n  nasbench201:\n"
        "    latency_ms: {file: tables/missing.csv}\n"
    )
    (profiles / "odd.yaml").write_text("name: odd\nkind: toaster\n")
    (profiles / "bad-batch.yaml").write_text("name: bad-batch\nkind: recorded\nbatch_size: many\n")
    (profiles / "notyaml.yaml").write_text("name: [unclosed\n")
    (profiles / "tables").mkdir()
    (profiles / "tables" / "e.csv").write_text("index,:thumbs_up:\n0,1\n")
    (profiles / "emo.yaml").write_text(
        "name: emo\nkind: recorded\ntables:\n  nasbench201:\n    latency_ms: {file: tables/e.csv}\n"
    )
    # an unquoted number as the name: sorted beside text names, it crashed every search's zoo
    (profiles / "num.yaml").write_text("name: 123\nkind: recorded\n")
    # a lab's own full table, a working device: never written into the cards a user ships
    n = len(get_space("nasbench201"))
    _write_table(profiles / "tables" / "lab.csv", range(n), ["index", "latency_ms"],
                 np.linspace(1.0, 9.0, n), key="index")  # fmt: skip
    (profiles / "mylab.yaml").write_text(
        "name: mylab\nkind: recorded\ntables:\n  nasbench201:\n"
        "    latency_ms: {file: tables/lab.csv}\n"
    )
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0, err
    listing = json.loads(out)
    broken = {p.split("/")[-1]: why for p, why in listing["broken_profiles"].items()}
    assert set(broken) == {"gone.yaml", "odd.yaml", "bad-batch.yaml", "notyaml.yaml", "emo.yaml",
                           "num.yaml"}  # fmt: skip
    assert "missing.csv" in broken["gone.yaml"] and "toaster" in broken["odd.yaml"]
    assert broken["num.yaml"].startswith('name must be text: quote it (name: "123")')
    # YAML's own error names the file, not "<unicode string>"
    assert f'in "{profiles / "notyaml.yaml"}", line 1' in broken["notyaml.yaml"], broken
    # the reason alone, as the text listing gives it (it repeated "device profile PATH")
    assert not any("device profile" in why for why in broken.values()), broken
    names = {d["device"] for d in listing["devices"]}
    assert {"fpga", "pixel3", "cpu", "mylab"} <= names and not names & {"gone", "odd", "bad-batch"}
    status, out, _ = cli("devices")
    assert status == 0 and "broken profile" in out and "gone.yaml" in out
    assert ":thumbs_up:" in out  # a file's text shown as it is, not as an emoji (main: 👍)
    status, _, err = cli("search", "--device", "gone", "--budget", "5", "--no-zoo")
    error = [line for line in err.splitlines() if not line.startswith("warning: skipped")]
    assert status == 2 and len(error) == 1 and "missing.csv" in error[0]
    # a file named otherwise than its device, broken by a key checked as it is read: named
    # by its device, it said "unknown device 'ccboard'; did you mean ..."
    (profiles / "cc.yaml").write_text(
        "name: ccboard\nkind: local\nruntime: tvm\ntvm: {cc: /tmp/evil/g++}\n"
    )
    from hwnas.devices import reload_profiles

    reload_profiles()
    status, _, err = cli("search", "--device", "ccboard", "--budget", "5", "--no-zoo")
    error = [line for line in err.splitlines() if not line.startswith("warning: skipped")]
    assert status == 2 and len(error) == 1, err
    assert "cc.yaml is broken: tvm.cc '/tmp/evil/g++'" in error[0]
    # a search of another device runs to its end, its zoo included: the zoo's cards give the
    # front's recorded latency on every other shipped device, which read every profile's table
    # (main: the search ended with "error: cannot read table .../missing.csv", exit 2, no zoo)
    status, out, err = cli("search", "--device", "fpga", "--budget", "5", "--json")
    assert status == 0, err
    run = tmp_path / json.loads(out)["run_folder"]
    cards = list((run / "zoo").glob("*/card.json"))
    assert cards
    recorded = json.loads(cards[0].read_text())["devices"]
    assert "pixel3" in recorded and not {"gone", "emo", "123", "mylab"} & set(recorded)
    # the cards read only the shipped tables: a user's broken one is not even opened
    assert "warning: skipped device 'gone'" not in err
    from hwnas.predictors.data import recorded_columns  # meta-training reads every table too

    keys = {c.key for c in recorded_columns("nasbench201")}
    assert "pixel3" in keys and not {"gone", "emo"} & keys


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ("  nasbench201:\n    latncy_ms: {file: tables/t.csv}\n",
         "unknown metric 'tables.nasbench201.latncy_ms' (did you mean latency_ms?)"),
        ("  nasbench201:\n    latency_ms: {file: tables/t.csv, datset: imagenet16}\n",
         "unknown key 'tables.nasbench201.latency_ms.datset' (did you mean dataset?)"),
        ("  nasbench201:\n    latency_ms: {file: tables/t.csv, colum: mj}\n",
         "unknown key 'tables.nasbench201.latency_ms.colum' (did you mean column?)"),
        ("  nasbenh201:\n    latency_ms: {file: tables/t.csv}\n",
         "unknown search space 'nasbenh201'; did you mean nasbench201?"),
        ("  nasbench201:\n    latency_ms: {file: tables/neg.csv}\n",
         "neg.csv, row 3: 'latency_ms' must be a positive number (ms or mJ), got -3"),
        ("  nasbench201:\n    latency_ms: {file: tables/inf.csv}\n",
         "inf.csv, row 2: 'latency_ms' must be a positive number (ms or mJ), got inf"),
        ("  nasbench201:\n    latency_ms: {file: tables/huge.csv}\n",  # a search crashed
         "huge.csv, row 2: 'latency_ms' 1e+308 is beyond any one inference's latency_ms (at "
         "most 3.6e+06 ms)"),
        ("  nasbench201:\n    latency_ms: {file: tables/tiny.csv}\n",  # a singular fit
         "tiny.csv, row 3: 'latency_ms' 1e-12 is below any one inference's latency_ms (at "
         "least 1e-06 ms)"),
        ("  nasbench201:\n    latency_ms: {file: tables/t.csv}\nclass: borad\n",
         "class 'borad': unknown; did you mean board? (known: phone, board, fpga, asic, cpu, "
         "gpu)"),  # the power check of an energy table fell back to any power at all
    ],
    ids=["metric", "dataset", "column", "space", "negative", "infinite", "huge", "tiny",
         "class"],
)
def test_a_misspelt_key_or_a_cost_that_is_not_positive_breaks_only_that_profile(
    tmp_path, cli, entry, why
):
    """A typo in a user's profile was ignored (`datset:` read the table as the CIFAR networks'
    latencies, `colum: mj` read the latency column as energy), or made `hwnas devices` die with
    a traceback (`latncy_ms:`); a negative or infinite latency was searched on (`--strategy
    exact` dropped 12 architectures from the front behind a -3 ms cell). Now each is one line
    naming the key (and the closest allowed one) or the row: the profile is listed as broken,
    every other device works, and a search of it says the same before any work."""
    profiles = tmp_path / "profiles"
    (profiles / "tables").mkdir(parents=True)
    (profiles / "tables" / "t.csv").write_text("index,latency_ms,mj\n0,1.5,2.5\n1,2.0,3.0\n")
    (profiles / "tables" / "neg.csv").write_text("index,latency_ms\n0,1.5\n1,-3\n")
    (profiles / "tables" / "inf.csv").write_text("index,latency_ms\n0,inf\n1,2.0\n")
    (profiles / "tables" / "huge.csv").write_text("index,latency_ms\n0,1e308\n1,2.0\n")
    (profiles / "tables" / "tiny.csv").write_text("index,latency_ms\n0,1.5\n1,1e-12\n")
    (profiles / "typo.yaml").write_text(f"name: typo\nkind: recorded\ntables:\n{entry}")
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0, err
    listing = json.loads(out)
    broken = {p.split("/")[-1]: w for p, w in listing["broken_profiles"].items()}
    assert set(broken) == {"typo.yaml"} and why in broken["typo.yaml"], broken
    assert {"fpga", "pixel3"} <= {d["device"] for d in listing["devices"]}
    status, out, err = cli("devices", profiles=profiles)
    assert status == 0 and "Traceback" not in err and why in out.replace("\n", " ")
    status, _, err = cli("search", "--device", "typo", "--budget", "5", "--no-zoo",
                         profiles=profiles)  # fmt: skip
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert status == 2 and len(error) == 1 and why in error[0], err


def test_a_recorded_profile_without_tables_says_so(tmp_path, cli):
    """`tables: {}` was listed as usable ('yes') and a search of it ended "has no latency_ms
    measurements (it has: )"."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "e.yaml").write_text("name: empt\nkind: recorded\ntables: {}\n")
    status, out, err = cli("devices", "--json", profiles=profiles)
    (empt,) = [d for d in json.loads(out)["devices"] if d["device"] == "empt"]
    assert not empt["reachable"] and "its profile gives no table" in empt["why_unreachable"]
    status, _, err = cli("search", "--device", "empt", "--budget", "3", "--no-zoo")
    assert status == 2 and "its profile gives no table: add `tables:" in err, err


def test_a_top_level_key_misspelt_in_a_recorded_profile_is_named(tmp_path, cli):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "b.yaml").write_text("name: b\nkind: recorded\nclas: board\ntables: {}\n")
    status, out, err = cli("devices", "--json", profiles=profiles)
    broken = json.loads(out)["broken_profiles"]
    assert status == 0 and any("unknown key 'clas' (did you mean class?)" in w
                               for w in broken.values()), broken  # fmt: skip


def test_a_gross_error_in_an_imported_calibration_is_named_by_the_search(tmp_path, cli):
    """A user's 10 reference values with one of them 3x too fast (a measurement taken while
    another job ran, a typo): the few-shot search says which, discounts it, and its summary
    lists it; the other nine are taken as measured."""
    from hwnas.predictors.data import get_column, reference_indices

    space = get_space("nasbench201")
    ref = list(reference_indices("nasbench201"))
    values = get_column("nasbench201", "gold_6226").values[ref].copy()
    values[7] *= 0.3
    _write_table(tmp_path / "cal.csv", ref, ["arch", "latency_ms"], values)
    status, _, err = cli("measure", "import", "--device", "lab-cpu", "cal.csv")
    assert status == 0, err
    status, out, err = cli("search", "--device", "lab-cpu", "--budget", "12", "--no-zoo", "--json")
    assert status == 0, err
    bad = space.arch_at(ref[7]).text
    assert f"latency_ms of {bad} looks like a gross error" in err
    summary = json.loads(out)
    assert list(summary["suspect_values"]["latency_ms"]) == [bad]
    assert summary["suspect_values"]["latency_ms"][bad] > 0.9


def test_predict_adapts_an_imported_device_on_the_values_its_search_uses(tmp_path, cli):
    """Ten values of architectures outside the reference set (picked with `refset measure
    --select random`, or timed by hand), imported: the search calibrated on them, but `hwnas
    predict --device` read the reference set alone and refused ("0 usable values ... import
    them", which the user had done). Both now adapt on the same values, so they agree with
    `--calibration` on the same file."""
    from hwnas.predictors.data import get_column

    rows = np.arange(100, 10001, 1100)
    values = np.round(get_column("nasbench201", "pixel2").values[rows] * 1.3, 4)
    _write_table(tmp_path / "mine.csv", rows, ["arch", "latency_ms"], values)
    assert cli("measure", "import", "--device", "lab-soc", "mine.csv")[0] == 0
    by_device = cli("predict", "--device", "lab-soc", "--arch", "5")
    by_file = cli("predict", "--calibration", "mine.csv", "--arch", "5")
    assert by_device[0] == 0 and by_file[0] == 0, by_device[2]
    assert "adapted on 10 latency_ms values of device lab-soc" in by_device[2]
    assert by_device[1] == by_file[1] and " ms (std " in by_device[1]


def test_predict_on_an_energy_only_device_names_the_flag_that_asks_for_energy(tmp_path, cli):
    """After `hwnas measure import --device labnpu cal_e.csv` (header `arch,energy [mJ]`),
    `hwnas predict --device labnpu --arch 5` said "has no latency_ms measurements (it has:
    energy_mj)" and no more: it names the flag `hwnas predict --help` shows."""
    from hwnas.predictors.data import get_column

    rows = np.arange(100, 10001, 1100)
    values = np.round(get_column("nasbench201", "pixel2").values[rows] * 2.0, 4)
    _write_table(tmp_path / "cal_e.csv", rows, ["arch", "energy [mJ]"], values)
    assert cli("measure", "import", "--device", "labnpu", "cal_e.csv")[0] == 0
    status, out, err = cli("predict", "--device", "labnpu", "--arch", "5")
    assert status == 2 and err.strip() == (
        "error: device 'labnpu' has no latency_ms measurements (it has: energy_mj): pass "
        "--metric energy_mj"
    ), err
    assert "--metric [latency_ms|energy_mj]" in cli("predict", "--help")[1]
    status, out, err = cli("predict", "--device", "labnpu", "--arch", "5", "--metric", "energy_mj")
    assert status == 0 and " mJ (std " in out, err


def test_an_import_names_a_unit_slip_flagged_rows_and_counts_a_file_given_twice(tmp_path, cli):
    """Values in seconds (or microseconds) were imported and searched as milliseconds without
    a word; rows flagged as noisy were dropped silently (`predict --calibration` said so); the
    same file given twice reported its values as "already stored"."""
    from hwnas.predictors.data import get_column

    rows = np.arange(100, 10001, 1100)
    ms = get_column("nasbench201", "pixel2").values[rows] * 1.3
    for name, scale in (("s", 1e-3), ("us", 1e3), ("ms", 1.0)):
        _write_table(tmp_path / f"{name}.csv", rows, ["arch", "latency_ms"], ms * scale)
        status, _, err = cli("measure", "import", "--device", f"lab-{name}", f"{name}.csv")
        assert status == 0, err
        slip = {"s": "in s, not ms?", "us": "in us, not ms?", "ms": None}[name]
        if slip:
            assert re.search(r"warning: these latency_ms values are [\d.]+x (below the lowest|"
                             r"above the highest) of \d+ recorded devices' values", err), err
            assert err.rstrip().endswith(slip)
        else:
            assert "warning" not in err
    table = (tmp_path / "ms.csv").read_text().splitlines()
    (tmp_path / "noisy.csv").write_text(
        "\n".join([table[0] + ",flagged"] + [r + (",yes" if i == 0 else ",") for i, r in
                                             enumerate(table[1:])]) + "\n"
    )  # fmt: skip
    status, _, err = cli("measure", "import", "--device", "lab-twice", "noisy.csv", "noisy.csv")
    assert status == 0, err
    assert "9 measurements imported, 0 already stored (kept), 2 flagged rows skipped" in err


def test_a_study_resumed_after_its_device_table_changed_is_refused(tmp_path, cli):
    """A table imported again with corrected values: the study scored on the old ones must
    not resume with them (main: the front kept the old values, silently)."""
    space = get_space("nasbench201")
    rows = np.arange(40)
    latency = np.round(1.0 + rows / 10.0, 3)
    _write_table(tmp_path / "few.csv", rows, ["arch", "latency_ms"], latency)
    assert cli("measure", "import", "--device", "lab-npu", "--table", "few.csv")[0] == 0
    search = ("search", "--device", "lab-npu", "--no-zoo", "--json")
    status, out, err = cli(*search, "--budget", "10")
    assert status == 0, err
    status, out, err = cli(*search, "--budget", "12")  # the same table: it resumes
    assert status == 0, err
    _write_table(tmp_path / "few.csv", rows, ["arch", "latency_ms"], latency * 10)
    assert cli("measure", "import", "--device", "lab-npu", "--table", "few.csv")[0] == 0
    status, out, err = cli(*search, "--budget", "14")
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert status == 2 and "changed since this study was scored" in line and "--study" in line
    arch = line.split("(", 1)[1].split(":", 1)[0]
    old = latency[space.index(space.parse(arch))]
    assert f"{old:.4g} ms in the study, {old * 10:.4g} ms" in line


def test_a_few_values_imported_into_a_table_are_added_to_it_not_the_table_cut_to_them(
    tmp_path, cli
):
    """`measure import --table` of 3 re-timed architectures into a device holding a table of
    40 wrote a table of those 3 alone, exit 0 (audit 116): every other value was lost and its
    studies refused. The files' values are now added to the table, replacing those of the
    same architectures (a corrected value, counted in the line), and the rest stay."""
    from hwnas.devices import get_device

    rows = np.arange(40)
    latency = np.round(1.0 + rows / 10.0, 3)
    _write_table(tmp_path / "all.csv", rows, ["arch", "latency_ms"], latency)
    assert cli("measure", "import", "--device", "lab-npu", "--table", "all.csv")[0] == 0
    fixed = latency[:3].copy()
    fixed[0] *= 2  # one re-timed value differs, two are the same
    _write_table(tmp_path / "fix.csv", rows[:3], ["arch", "latency_ms"], fixed)
    _write_table(tmp_path / "more.csv", [40, 41, 42], ["arch", "latency_ms"], [9.5, 9.6, 9.7])
    status, _, err = cli("measure", "import", "--device", "lab-npu", "--table", "fix.csv",
                         "more.csv")  # fmt: skip
    assert status == 0, err
    assert "latency_ms of 43 of 15625 nasbench201 architectures (1 stored values replaced)" in err
    table = get_device("lab-npu").table("nasbench201", "latency_ms")
    expected = np.concatenate([[latency[0] * 2], latency[1:], [9.5, 9.6, 9.7]])
    np.testing.assert_allclose(table[:43], expected)
    assert np.isnan(table[43:]).all()
    # too few reference values to predict on: the command said, `measure import --device
    # lab-npu CAL.csv`, is refused for a recorded device; the one it says now adds them
    status, _, err = cli("predict", "--device", "lab-npu", "--arch", "5000")
    assert status == 2 and "`hwnas measure import --device lab-npu --table CAL.csv`" in err, err
    space = get_space("nasbench201")
    refs = [space.index(a) for a in space.reference_archs()]
    _write_table(tmp_path / "refs.csv", refs, ["arch", "latency_ms"], np.linspace(2, 5, 10))
    assert cli("measure", "import", "--device", "lab-npu", "--table", "refs.csv")[0] == 0
    status, out, err = cli("predict", "--device", "lab-npu", "--arch", "5000")
    assert status == 0 and " ms (std " in out, err


def test_a_table_added_or_removed_since_a_study_was_scored_is_refused_and_a_partial_one_shown(
    tmp_path, cli
):
    """Energy imported after latency (the flow devices.md describes), then searched again:
    the resumed study mixed trials without energy and trials with it, and printing its front
    raised KeyError: 'energy_mj' (helper-61). A table added or removed since the study was
    scored is refused as an edited one is; a partial energy table's gaps print as '-'."""
    space = get_space("nasbench201")
    profiles = tmp_path / "profiles"
    rows = np.arange(len(space))
    latency = np.round(1.0 + (rows * 7919 % 1000) / 100.0, 3)
    _write_table(profiles / "lat.csv", rows, ["index", "latency_ms"], latency, key="index")
    yaml = "name: myboard\nkind: recorded\ntables:\n  nasbench201:\n"
    yaml += "    latency_ms: {file: lat.csv}\n"
    (profiles / "myboard.yaml").write_text(yaml)
    search = ("search", "--device", "myboard", "--no-zoo", "--strategy", "random")
    status, _, err = cli(*search, "--budget", "8", profiles=profiles)
    assert status == 0, err
    _write_table(profiles / "en.csv", rows, ["index", "energy_mj"], latency * 2, key="index")
    (profiles / "myboard.yaml").write_text(yaml + "    energy_mj: {file: en.csv}\n")
    status, _, err = cli(*search, "--budget", "10", profiles=profiles)
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert status == 2 and "has a table of energy_mj now (en.csv:energy_mj)" in line, err
    assert "--study NAME" in line and "Traceback" not in err
    status, _, err = cli(*search, "--budget", "10", "--study", "both", profiles=profiles)
    assert status == 0, err
    (profiles / "myboard.yaml").write_text(yaml)  # the energy table removed again
    status, _, err = cli(*search, "--budget", "12", "--study", "both", profiles=profiles)
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert status == 2 and "has no energy_mj table now" in line, err
    # a partial energy table: the front's architectures it lacks show '-', not a traceback
    _write_table(profiles / "en.csv", rows[::2], ["index", "energy_mj"], latency[::2] * 2,
                 key="index")  # fmt: skip
    (profiles / "myboard.yaml").write_text(yaml + "    energy_mj: {file: en.csv}\n")
    status, out, err = cli(*search, "--budget", "40", "--study", "partial", profiles=profiles)
    assert status == 0, err
    assert re.search(r"│\s+-\s+│\s*$", out, re.M), out  # an energy cell left blank


@pytest.mark.parametrize("sep", [",", ";"])
def test_a_table_saved_by_a_spreadsheet_imports(tmp_path, cli, sep):
    """A UTF-8 byte-order mark and CRLF line ends (Excel's "CSV UTF-8"): main refused it with
    "no 'arch' column (columns: arch, latency_ms)", the mark being invisible. Saved in a
    decimal-comma locale (";" between cells, "1,5"), the same table gives the same values
    (main: "no 'arch' column (columns: arch;latency_ms)")."""
    space = get_space("nasbench201")
    values = [1 + i / 10 for i in range(12)]
    cells = [str(v) if sep == "," else str(v).replace(".", ",") for v in values]
    lines = [f"arch{sep}latency_ms"] + [f"{space.arch_at(i).text}{sep}{c}"
                                        for i, c in enumerate(cells)]  # fmt: skip
    (tmp_path / "excel.csv").write_bytes(b"\xef\xbb\xbf" + "\r\n".join(lines).encode() + b"\r\n")
    status, _, err = cli("measure", "import", "--device", "sheet-npu", "--table", "excel.csv")
    assert status == 0, err
    status, out, err = cli("search", "--device", "sheet-npu", "--budget", "5", "--no-zoo", "--json")
    assert status == 0, err
    summary = json.loads(out)
    assert summary["measurements"]["read_from_table"] == 5
    best = summary["best"]
    assert best["latency_ms"] == pytest.approx(values[space.index(space.parse(best["arch"]))])


def test_a_partial_table_is_refused_by_strategies_that_propose_from_the_whole_space(
    tmp_path, cli
):
    """main: `--strategy random` on 12 imported values started, stopped at the first
    architecture the table lacks ("no recorded latency_ms for ..."), and left a study."""
    rows = np.arange(12)
    _write_table(tmp_path / "few.csv", rows, ["arch", "latency_ms"], 1.0 + rows / 10)
    assert cli("measure", "import", "--device", "lab-npu", "--table", "few.csv")[0] == 0
    status, _, err = cli("search", "--device", "lab-npu", "--strategy", "random",
                         "--budget", "5", "--no-zoo")  # fmt: skip
    (line,) = [x for x in err.splitlines() if x.strip()]
    assert status == 2 and "holds 12 of the 15,625" in line and "frontier" in line, err
    status, _, err = cli("runs", "list")
    assert status == 2 and "no study database" in err  # nothing was opened
    status, _, err = cli("search", "--device", "lab-npu", "--strategy", "frontier",
                         "--budget", "5", "--no-zoo")  # fmt: skip
    assert status == 0, err


def test_a_strategy_over_the_whole_space_skips_what_a_table_lacks(tmp_path, cli):
    """The Eagle tables lack 341-373 cells: main stopped a random search at the first one
    ("no recorded latency_ms for ..."); now each is a failed trial and the search goes on."""
    args = ("search", "--device", "mobile_gpu_snapdragon_450_adreno_506_int8", "--strategy",
            "random", "--budget", "150", "--no-zoo", "--json")  # fmt: skip
    status, out, err = cli(*args)
    assert status == 0, err
    trials = json.loads(out)["trials"]
    assert trials["completed"] == 150 < trials["in_study"]  # some proposals were skipped


def test_a_table_is_read_only_as_networks_of_its_own_input_size(tmp_path, cli):
    """The shipped NAS-Bench-201 tables were measured on 32x32 CIFAR networks: a search or a
    measurement of the 16x16 ImageNet16-120 networks on them is refused before any work
    (main: searched and reported them on the 32x32 networks' latencies, its input shape given
    as 16x16); CIFAR-10's networks, of the same input size, share them. A user's table that
    declares `dataset: imagenet16` is read for those networks and refused for CIFAR's."""
    status, _, err = cli("search", "--device", "pixel3", "--dataset", "imagenet16",
                         "--budget", "5", "--no-zoo")  # fmt: skip
    assert status == 2 and "recorded latency_ms of nasbench201's cifar100 networks" in err, err
    assert "use --dataset cifar100" in err and not (tmp_path / "runs").exists()
    status, _, err = cli("measure", "--device", "pixel3", "--arch", "5", "--dataset",
                         "imagenet16")  # fmt: skip
    assert status == 2 and "not of its imagenet16 networks (3x16x16)" in err, err
    status, out, err = cli("search", "--device", "pixel3", "--dataset", "cifar10", "--budget",
                           "5", "--no-zoo", "--json")  # fmt: skip
    assert status == 0, err

    space = get_space("nasbench201")
    rows = np.arange(0, len(space), 7)
    profiles = tmp_path / "profiles"
    _write_table(profiles / "t.csv", rows, ["index", "latency_ms"], 1.0 + rows / len(space),
                 key="index")  # fmt: skip
    (profiles / "npu16.yaml").write_text(
        "name: npu16\nkind: recorded\ntables:\n  nasbench201:\n"
        "    latency_ms: {file: t.csv, dataset: imagenet16}\n"
    )
    status, out, err = cli("search", "--device", "npu16", "--dataset", "imagenet16", "--budget",
                           "5", "--no-zoo", "--json", profiles=profiles)  # fmt: skip
    assert status == 0, err
    assert json.loads(out)["best"]["accuracy_source"].startswith("nasbench201-table:imagenet16")
    status, _, err = cli("search", "--device", "npu16", "--budget", "5", "--no-zoo",
                         profiles=profiles)  # fmt: skip
    assert status == 2 and "nasbench201's imagenet16 networks (3x16x16 input)" in err, err


def test_an_empty_cell_is_no_value_and_a_fractional_index_is_named(tmp_path, cli):
    """An empty value cell was 'holds text, not numbers' (the whole column refused); a
    fractional index was 'outside 0..15624'. Now the empty cell is an architecture without a
    value, and the fraction is named with its row."""
    profiles = tmp_path / "profiles"
    (profiles / "tables").mkdir(parents=True)
    (profiles / "tables" / "gap.csv").write_text("index,latency_ms\n0,1.5\n1,\n2,2.5\n")
    (profiles / "tables" / "frac.csv").write_text("index,latency_ms\n0,1.5\n0.5,2.0\n")
    for name in ("gap", "frac"):
        (profiles / f"{name}.yaml").write_text(
            f"name: {name}\nkind: recorded\ntables:\n  nasbench201:\n"
            f"    latency_ms: {{file: tables/{name}.csv}}\n"
        )
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0, err
    listing = json.loads(out)
    broken = {p.split("/")[-1]: w for p, w in listing["broken_profiles"].items()}
    assert set(broken) == {"frac.yaml"}
    assert "frac.csv, row 3: 'index' must be a whole index, got 0.5" in broken["frac.yaml"]
    gap = next(d for d in listing["devices"] if d["device"] == "gap")
    assert gap["table_rows"] == {"nasbench201": 2}


def test_a_table_import_keeps_the_networks_dataset_and_the_profiles_own_file(
    tmp_path, cli, hwnas_home
):
    """`measure import --table --dataset imagenet16`: the profile's table had no `dataset`,
    so a search read the 16x16 networks' values as the 32x32 CIFAR networks' (exit 0), and a
    re-import dropped a `dataset` the profile had. An import into a device whose profile file
    is named otherwise (`foo.yaml` giving 'lab16') wrote `lab16.yaml` beside it and broke the
    device ('name is also given by')."""
    import yaml

    space = get_space("nasbench201")
    rows = np.arange(0, len(space), 50)
    values = np.round(1.0 + (rows % 97) / 10.0, 3)
    _write_table(tmp_path / "in16.csv", rows, ["arch", "latency_ms"], values, key="index")
    home = hwnas_home
    (home / "devices" / "foo.yaml").write_text("name: lab16\nkind: recorded\n")
    args = ["measure", "import", "--device", "lab16", "--table", "in16.csv"]
    status, _, err = cli(*args, "--dataset", "imagenet16")
    assert status == 0, err
    assert sorted(p.name for p in (home / "devices").glob("*.yaml")) == ["cpu-fast.yaml",
                                                                         "foo.yaml"]
    profile = yaml.safe_load((home / "devices" / "foo.yaml").read_text())
    assert profile["tables"]["nasbench201"]["latency_ms"]["dataset"] == "imagenet16"
    status, _, err = cli("search", "--device", "lab16", "--budget", "3", "--no-zoo")
    assert status == 2 and "not of its cifar100 networks" in err, err
    status, _, err = cli("search", "--device", "lab16", "--dataset", "imagenet16", "--budget",
                         "3", "--no-zoo")  # fmt: skip
    assert status == 0, err
    # values of the CIFAR networks are not merged into the 16x16 table: refused, nothing written
    before = (home / "devices" / "foo.yaml").read_text()
    status, _, err = cli(*args)
    assert status == 2 and "give --dataset imagenet16 if they are of those" in err, err
    assert (home / "devices" / "foo.yaml").read_text() == before
    status, _, err = cli(*args, "--dataset", "imagenet16")  # a re-import keeps the dataset
    assert status == 0, err
    profile = yaml.safe_load((home / "devices" / "foo.yaml").read_text())
    assert profile["tables"]["nasbench201"]["latency_ms"]["dataset"] == "imagenet16"


def test_a_table_import_never_replaces_an_imported_device(tmp_path, cli):
    """`measure import --device lab2 few.csv` (12 values: a device whose values calibrate a
    predictor), then `--table` into the same name: the profile was rewritten as a recorded
    device of the table alone, and lab2's 12 values no longer reached a search or a
    prediction. Refused now, in one line; lab2 is as it was."""
    space = get_space("nasbench201")
    refs = [space.index(a) for a in space.reference_archs()]
    few = np.round(1.0 + np.arange(len(refs)) / 10.0, 3)
    _write_table(tmp_path / "few.csv", np.array(refs), ["arch", "latency_ms"], few, key="index")
    status, _, err = cli("measure", "import", "--device", "lab2", "few.csv")
    assert status == 0, err
    n = len(space)
    energy = np.round(1.0 + (np.arange(n) % 97) / 10.0, 3)
    _write_table(tmp_path / "full.csv", np.arange(n), ["arch", "energy_mj"], energy, key="index")
    status, _, err = cli("measure", "import", "--device", "lab2", "--table", "full.csv")
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "device 'lab2' is an imported device: a --table import would replace its " in err
    assert "profile and its imported values with a recorded table" in err
    status, out, err = cli("predict", "--device", "lab2", "--arch", "5")
    assert status == 0, err


def test_an_energy_search_takes_architectures_whose_latency_the_device_lacks(tmp_path, cli):
    """Energy of every architecture, latency of 1,000: an energy search skipped each
    architecture without a latency ("29 candidate(s) skipped: the device's table has no value
    for them"), spending its budget on failed trials. Latency is the objective's companion,
    kept where known; under --max-latency it is required."""
    space = get_space("nasbench201")
    n = len(space)
    energy = np.round(1.0 + (np.arange(n) * 7919 % 997) / 100.0, 3)
    latency = np.round(0.5 + (np.arange(1000) * 31 % 89) / 10.0, 3)
    profiles = tmp_path / "profiles"
    _write_table(profiles / "e.csv", np.arange(n), ["index", "energy_mj"], energy, key="index")
    _write_table(profiles / "l.csv", np.arange(1000), ["index", "latency_ms"], latency,
                 key="index")  # fmt: skip
    (profiles / "lab3.yaml").write_text(
        "name: lab3\nkind: recorded\ntables:\n  nasbench201:\n"
        "    energy_mj: {file: e.csv}\n    latency_ms: {file: l.csv}\n"
    )
    args = ["search", "--device", "lab3", "--objective", "energy", "--strategy", "random",
            "--no-zoo", "--json"]  # fmt: skip
    status, out, err = cli(*args, "--budget", "40", profiles=profiles)
    assert status == 0, err
    summary = json.loads(out)
    assert summary["profiling"].get("unrecorded_skipped", 0) == 0, summary["profiling"]
    assert "candidate(s) skipped" not in err
    front = _pareto(tmp_path / summary["run_folder"])
    assert all(float(p["energy_mj"]) == energy[space.index(space.parse(p["arch"]))]
               for p in front)  # fmt: skip
    # under a latency limit latency is needed: those without one are skipped, and none is
    # on the front without its latency
    status, out, err = cli(*args, "--budget", "20", "--max-latency", "9", "--study", "lim",
                           profiles=profiles)  # fmt: skip
    assert status == 0, err
    front = _pareto(tmp_path / json.loads(out)["run_folder"])
    assert front and all(p["latency_ms"] and float(p["latency_ms"]) <= 9 for p in front)


def test_an_energy_table_1000x_off_is_warned_about(tmp_path, cli):
    """A board's energy table written in uJ (15,331 "mJ" beside 11 ms: 1.4 kW) or in J was
    searched without a word. The median power energy/latency is checked against what a
    device of the profile's class draws; a plausible table (the shipped Pi 5) says nothing."""
    rows = np.arange(200)
    latency = np.round(5.0 + rows / 20.0, 3)
    profiles = tmp_path / "profiles"
    _write_table(profiles / "l.csv", rows, ["index", "latency_ms"], latency, key="index")
    for name, scale, slip in (("b_uj", 1000 * 1.4, "energy in uJ, not mJ"),
                              ("b_j", 1.4 / 1000, "energy in J, not mJ"),
                              ("b_ok", 1.4, None)):  # fmt: skip
        _write_table(profiles / f"{name}.csv", rows, ["index", "energy_mj"],
                     np.round(latency * scale, 6), key="index")  # fmt: skip
        (profiles / f"{name}.yaml").write_text(
            f"name: {name}\nkind: recorded\nclass: board\ntables:\n  nasbench201:\n"
            f"    energy_mj: {{file: {name}.csv}}\n    latency_ms: {{file: l.csv}}\n"
        )
        status, _, err = cli("search", "--device", name, "--objective", "energy",
                             "--budget", "3", "--no-zoo", profiles=profiles)  # fmt: skip
        assert status == 0, err
        warned = [line for line in err.splitlines() if line.startswith("warning: ")]
        if slip is None:
            assert not warned, warned
        else:
            assert len(warned) == 1 and slip in warned[0], err
            assert "outside the 0.01-150 W a board draws" in warned[0]
    status, _, err = cli("search", "--device", "pi5_onnx", "--objective", "energy",
                         "--budget", "3", "--no-zoo")  # fmt: skip
    assert status == 0 and "warning: " not in err, err


def test_a_table_in_seconds_is_named_however_many_came_before(tmp_path, cli):
    """One table imported in seconds became a reference of the unit check: the next one in
    seconds, and `predict --calibration` with it, said nothing (helper-48); a user's own
    `kind: recorded` table in seconds was searched as milliseconds without a word. The check
    compares with the shipped tables only, and a search on a user's table says it."""
    from hwnas.predictors.data import get_column

    rows = np.arange(100, 10001, 330)
    seconds = get_column("nasbench201", "pixel2").values[rows] * 1.3e-3
    _write_table(tmp_path / "s.csv", rows, ["arch", "latency_ms"], seconds)
    for device in ("lab-s1", "lab-s2"):
        status, _, err = cli("measure", "import", "--device", device, "--table", "s.csv")
        assert status == 0 and err.rstrip().endswith("in s, not ms?"), err
    status, _, err = cli("predict", "--calibration", "s.csv", "--arch", "5")
    assert status == 0 and "in s, not ms?" in err, err
    profiles = tmp_path / "profiles"
    _write_table(profiles / "s.csv", rows, ["arch", "latency_ms"], seconds)
    (profiles / "b_s.yaml").write_text(
        "name: b_s\nkind: recorded\nclass: board\ntables:\n  nasbench201:\n"
        "    latency_ms: {file: s.csv}\n"
    )
    status, _, err = cli("search", "--device", "b_s", "--budget", "3", "--no-zoo",
                         profiles=profiles)  # fmt: skip
    warned = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert status == 0 and len(warned) == 1, err
    assert warned[0].startswith("warning: device 'b_s': its nasbench201 table: these latency_ms")
    assert warned[0].endswith("in s, not ms?")


def test_values_in_mixed_units_are_named_and_the_floor_is_counted_not_listed(tmp_path, cli):
    """A calibration file with 8 of its 15 values in seconds imported without a word (the
    median ratio was fine), and `predict --archs` of the whole space then printed one floor
    warning per architecture, 4,169 lines (helper-52). The odd values are named by index, and
    past five the floored predictions are counted in one line."""
    from hwnas.predictors.data import get_column

    rows = np.r_[np.arange(100, 10001, 1100), np.arange(150, 15000, 2500)]
    values = get_column("nasbench201", "pixel2").values[rows] * 1.7
    values[::2] /= 1000  # every other one in seconds
    _write_table(tmp_path / "mixed.csv", rows, ["arch", "latency_ms"], values)
    status, _, err = cli("measure", "import", "--device", "lab-mixed", "mixed.csv")
    warned = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert status == 0 and len(warned) == 1, err
    assert re.search(r"\d+ of these 16 latency_ms values lie more than 30x outside", warned[0])
    assert warned[0].endswith("in s, not ms, among the others?")
    (tmp_path / "all.csv").write_text("arch\n" + "\n".join(map(str, range(15625))) + "\n")
    status, _, err = cli("predict", "--device", "lab-mixed", "--archs", "all.csv", "--out",
                         "p.csv")  # fmt: skip
    floors = [line for line in err.splitlines() if "at the floor" in line or "a floor," in line]
    assert status == 0 and 1 <= len(floors) <= 6, len(floors)


def test_calibration_values_all_the_same_are_named(tmp_path, cli):
    """Fifteen values of 20 ms (a stuck timer, a column filled down) were imported and adapted
    on without a word, every architecture then predicted at 20 ms +- 1% (helper-52)."""
    rows = np.arange(100, 10001, 700)
    _write_table(tmp_path / "same.csv", rows, ["arch", "latency_ms"], [20] * len(rows))
    for args in (["measure", "import", "--device", "lab-same", "same.csv"],
                 ["predict", "--calibration", "same.csv", "--arch", "5"]):  # fmt: skip
        status, _, err = cli(*args)
        warned = [line for line in err.splitlines() if line.startswith("warning: ")]
        assert status == 0 and len(warned) == 1, err
        assert f"all {len(rows)} latency_ms values are 20: a timer that did not run" in warned[0]


def test_an_imported_device_of_another_space_names_its_space(tmp_path, cli):
    """A device imported with FBNet values, predicted without --space, said it had "0 usable
    latency_ms values of nasbench201 architectures stored; import them" (helper-52): it names
    the space it has now."""
    rows = list(range(0, 4000, 300))
    (tmp_path / "fb.csv").write_text(
        "arch,latency_ms\n" + "\n".join(f"{i},{20 + i / 400:.3f}" for i in rows) + "\n"
    )
    status, _, err = cli("measure", "import", "--device", "lab-fb", "--space", "fbnet", "fb.csv")
    assert status == 0, err
    status, _, err = cli("predict", "--device", "lab-fb", "--arch", "5")
    assert status == 2 and "its values are of fbnet architectures; use --space fbnet" in err, err
    status, out, err = cli("predict", "--device", "lab-fb", "--space", "fbnet", "--arch", "5")
    assert status == 0 and " ms (std " in out, err


def test_a_user_profile_of_a_shipped_name_is_said_and_two_of_one_name_are_both_broken(
    tmp_path, cli, hwnas_home
):
    """A user's `name: pixel3` profile replaced the shipped pixel3 without a word (`hwnas
    devices` listed it as the shipped one and a search used its values); of two user files of
    one name, the later won silently (helper-61 A4). The replacement is said: marked by
    `hwnas devices`, warned of by a search, naming the file; two user files of one name are
    both broken."""
    space = get_space("nasbench201")
    rows = np.arange(0, len(space), 50)
    profiles = tmp_path / "profiles"
    _write_table(profiles / "flat.csv", rows, ["arch", "latency_ms"], [0.5] * len(rows))
    mine = profiles / "pixel3.yaml"
    mine.write_text(
        "name: pixel3\nkind: recorded\nclass: phone\ndescription: mine\n"
        "tables:\n  nasbench201:\n    latency_ms: {file: flat.csv}\n"
    )
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0, err
    (pixel3,) = [d for d in json.loads(out)["devices"] if d["device"] == "pixel3"]
    assert pixel3["profile"] == str(mine) and pixel3["replaces_shipped"].endswith("pixel3.yaml")
    status, out, err = cli("devices", profiles=profiles)
    assert status == 0 and "warning" not in err, err
    line = next(ln for ln in out.splitlines() if ln.startswith("replaced pixel3"))
    assert str(mine) in line and "pixel3 " in out.split("replaced")[0]
    row = next(ln for ln in out.splitlines() if ln.startswith("pixel3 "))
    assert "(replaced)" in row, out
    status, out, err = cli("search", "--device", "pixel3", "--budget", "4", "--no-zoo", "--json")
    assert status == 0, err
    warnings = [ln for ln in err.splitlines() if "replaces the shipped" in ln]
    assert warnings == [
        f"warning: device 'pixel3' is the user profile {mine}, which replaces the shipped "
        f"{pixel3['replaces_shipped']} (rename it to use both)"
    ], err
    assert json.loads(out)["best"]["latency_ms"] == 0.5  # the user's values, said to be
    # a search of another user device says nothing of it (the check of its table's unit
    # read every shipped name's table, the replaced one included, and warned of it)
    _write_table(profiles / "board.csv", rows, ["arch", "latency_ms"],
                 1.0 + (rows % 7) / 10.0)  # fmt: skip
    (profiles / "board.yaml").write_text(
        "name: board\nkind: recorded\ntables:\n  nasbench201:\n    latency_ms: {file: board.csv}\n"
    )
    status, out, err = cli("search", "--device", "board", "--budget", "4", "--no-zoo")
    assert status == 0 and "replaces the shipped" not in err, err
    # a second user file of the same name: neither wins, both are named
    other = hwnas_home / "devices" / "p3.yaml"
    other.write_text(mine.read_text())
    status, out, err = cli("devices", "--json", profiles=profiles)
    broken = json.loads(out)["broken_profiles"]
    assert "pixel3" not in [d["device"] for d in json.loads(out)["devices"]]
    assert broken[str(mine)] == f"name 'pixel3' is also given by {other}", broken
    assert broken[str(other)] == f"name 'pixel3' is also given by {mine}", broken
    status, out, err = cli("search", "--device", "pixel3", "--budget", "4", "--no-zoo")
    error = err.strip().splitlines()[-1]  # after the other file's one warning line
    assert status == 2 and error.startswith("error: device profile ") and "also given" in error


def test_a_user_table_of_a_batch_says_per_batch_everywhere_a_shipped_one_does(
    tmp_path, cli, monkeypatch
):
    """A user's recorded device with `batch_size: 32` showed its values as plain "ms" (the
    card lacked `batch_size`, `zoo show` said `ms on myb32`, the best line, summary.json,
    `runs list` and the plot's axis never said per batch), where the shipped `1080ti_32` says
    `ms per batch of 32` (helper-61 C1)."""
    from types import SimpleNamespace

    from hwnas.engine.plot import front_spec

    space = get_space("nasbench201")
    rows = np.arange(0, len(space), 20)
    values = np.round(np.random.default_rng(5).uniform(1.0, 20.0, len(rows)), 4)
    profiles = tmp_path / "profiles"
    _write_table(profiles / "t.csv", rows, ["arch", "latency_ms"], values)
    (profiles / "myb32.yaml").write_text(
        "name: myb32\nkind: recorded\nclass: gpu\ndescription: mine at 32\nbatch_size: 32\n"
        "tables:\n  nasbench201:\n    latency_ms: {file: t.csv}\n"
    )
    status, out, err = cli("search", "--device", "myb32", "--budget", "5", "--out", "run",
                           profiles=profiles)  # fmt: skip
    assert status == 0, err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["objective"]["unit"] == "ms per batch of 32"
    assert summary["units"]["latency_ms"] == "ms per batch of 32"
    best = next(ln for ln in out.splitlines() if ln.startswith("best ("))
    assert best.endswith(f"{summary['best']['latency_ms']:.3f} ms per batch of 32"), best
    assert "on myb32 (costs per batch of 32)" in out
    card = json.loads(next((tmp_path / "run" / "zoo").glob("*/card.json")).read_text())
    assert card["devices"]["myb32"]["latency_ms"]["batch_size"] == 32
    assert card["devices"]["1080ti_32"]["latency_ms"]["batch_size"] == 32  # as the shipped
    status, shown, err = cli("zoo", "show", next((tmp_path / "run" / "zoo").iterdir()))
    assert status == 0 and " ms per batch of 32 on myb32 " in shown, shown
    status, listed, err = cli("zoo", "list", tmp_path / "run" / "zoo", "--json")
    assert status == 0 and {e["units"]["latency_ms"] for e in json.loads(listed)["entries"]} == {
        "ms per batch of 32"
    }, listed  # and in the table, beside its header's "latency ms" (helper-66)
    monkeypatch.setenv("COLUMNS", "250")  # the table's cells on one line each
    status, listed, err = cli("zoo", "list", tmp_path / "run" / "zoo")
    assert status == 0 and "(per batch of 32) myb32" in listed, listed
    status, shown, err = cli("runs", "show", "latest")  # `runs list`'s best cell, whole
    cost = f"{summary['best']['latency_ms']:.3f} ms per batch of 32  (trial"
    assert status == 0 and cost in shown, shown
    result = SimpleNamespace(  # what pareto.png is drawn from
        settings=SimpleNamespace(metric="energy_mj", max_latency=None, dataset="cifar10",
                                 space="nasbench201", strategy="random", device="myb32"),
        best=None, records=[], pareto=[],
    )  # fmt: skip
    spec = front_spec(result, "myb32")
    assert spec["x_label"] == "energy on myb32 (mJ per batch of 32)", spec["x_label"]
    result.settings.device = "pixel3"
    assert front_spec(result, "pixel3")["x_label"] == "energy per inference on pixel3 (mJ)"
    # the limit too: the progress line and runs show said "within 15 ms" (helper-66)
    status, out, err = cli("search", "--device", "myb32", "--budget", "5", "--max-latency",
                           "15", "--out", "lim", "--no-zoo", profiles=profiles)  # fmt: skip
    assert status == 0 and "within 15 ms per batch of 32 |" in err, err
    status, shown, err = cli("runs", "show", "latest")
    assert status == 0 and "max_latency  15 ms per batch of 32" in shown, shown


def test_measure_import_never_writes_over_a_broken_profile_of_its_name(tmp_path, cli, hwnas_home):
    """Two user profiles of one name are both broken, and the name is no device: `hwnas
    measure import` then took it for a new device and wrote its profile over one of them
    (a recorded table's profile became `kind: imported`; helper-66). So did a profile of
    the user's whose YAML was broken. The import is refused, naming the file."""
    space = get_space("nasbench201")
    n = len(space)
    latency = np.round(1.0 + (np.arange(n) * 7919 % 1000) / 100.0, 3)
    _write_table(tmp_path / "full.csv", np.arange(n), ["arch", "latency_ms"], latency, key="index")
    _write_table(tmp_path / "few.csv", np.arange(11), ["arch", "latency_ms"], latency[:11])
    assert cli("measure", "import", "--device", "myb", "full.csv")[0] == 0
    home = tmp_path / "profiles"
    home.mkdir()
    devices = hwnas_home / "devices"
    written = (devices / "myb.yaml").read_text()
    (home / "copy.yaml").write_text(written)
    status, _, err = cli("measure", "import", "--device", "myb", "few.csv", profiles=home)
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert status == 2 and "device 'myb' is given by the profile" in line, err
    assert "is also given by" in line and (devices / "myb.yaml").read_text() == written


def test_predictor_eval_scores_a_device_on_the_values_it_was_not_adapted_on(tmp_path, cli):
    """`hwnas predictor eval NAME --devices DEV` scored the 10 reference values the predictor
    was adapted on too: on a 30-row table it printed rho 0.900 where the 20 held-out rows give
    0.821. It scores the others alone, says how many, and refuses a table with fewer than 10."""
    from scipy.stats import spearmanr

    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import get_column, reference_indices

    space = get_space("nasbench201")
    refs = list(reference_indices("nasbench201"))
    rng = np.random.default_rng(5)
    others = [int(i) for i in rng.choice(len(space), 40, replace=False) if i not in refs][:20]
    truth = get_column("nasbench201", "pixel2").values
    noisy = truth * rng.lognormal(0.0, 0.3, len(truth))  # a device unlike pixel2
    profiles = tmp_path / "profiles"
    for name, rows in (("board30", refs + others), ("board15", refs + others[:5])):
        _write_table(profiles / f"{name}.csv", rows, ["index", "latency_ms"],
                     np.round(noisy[rows], 5), key="index")  # fmt: skip
        (profiles / f"{name}.yaml").write_text(
            f"name: {name}\nkind: recorded\ndescription: a small table\n"
            f"tables:\n  nasbench201:\n    latency_ms: {{file: {name}.csv}}\n"
        )
    status, out, err = cli("predictor", "eval", "nasbench201-help", "--devices", "board30",
                           profiles=profiles)  # fmt: skip
    assert status == 0, err
    row = next(line for line in out.splitlines() if "board30" in line).split("│")
    assert row[3].strip() == "20", out  # rows scored
    pred = load_predictor("nasbench201-help").fit(
        [space.arch_at(i) for i in refs], np.round(noisy[refs], 5), "latency_ms"
    )
    mean, _ = pred.predict([space.arch_at(i) for i in others])
    held_out = spearmanr(mean, np.round(noisy[others], 5)).statistic
    assert float(row[4]) == pytest.approx(held_out, abs=6e-4), out
    status, out, err = cli("predictor", "eval", "nasbench201-help", "--devices", "board15",
                           profiles=profiles)  # fmt: skip
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "'board15' has 5 value(s) besides the 10 a predictor is adapted on" in err
