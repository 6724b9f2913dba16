"""What a user reads and copies from the terminal: `hwnas runs`, `hwnas zoo list|show`,
`--json`, and tables that never cut an arch string or a device name (80 columns, piped)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

from helpers import hwnas_main

NARROW = {"COLUMNS": "80"}


def _cli(*args, **kw):
    r = hwnas_main(*args, env=NARROW, **kw)
    assert r.returncode == 0, r.stderr
    return r


def test_search_json_then_runs_and_zoo_listings_show_whole_values(tmp_path, hwnas_home):
    out = tmp_path / "run"
    r = _cli("search", "--device", "pixel3", "--budget", "6", "--out", str(out), "--json")
    summary = json.loads(r.stdout)  # stdout holds the JSON alone
    assert summary["run_folder"] == str(out) and summary["trials"]["completed"] == 6
    rows = list(csv.DictReader(open(out / "pareto.csv")))
    archs = [row["arch"] for row in rows]
    assert len(rows) == summary["pareto_size"] == summary["zoo_models"] and archs
    assert any(len(a) > 70 for a in archs)  # too long for an 80-column table: it folds them
    assert "Pareto front" in r.stderr and all(a in r.stderr for a in archs)
    assert "ETA" in r.stderr and "measured 0 reused 0" in r.stderr and "noisy-skipped 0" in r.stderr

    study = summary["settings"]["study"]
    listed = _cli("runs", "list").stdout
    assert study in listed and str(out.resolve()) in listed and "pixel3" in listed
    runs = json.loads(_cli("runs", "list", "--json").stdout)["runs"]
    assert [(x["study"], x["trials"], x["folder"]) for x in runs] == [
        (study, 6, str(out.resolve()))
    ]
    assert runs[0]["best"]["arch"] == summary["best"]["arch"]

    zoo_out = _cli("zoo", "list").stdout  # no DIR: the zoos of the runs in the study storage
    entries = sorted(p.name for p in (out / "zoo").iterdir())
    assert all(a in zoo_out for a in archs) and all(e in zoo_out for e in entries)
    listed = json.loads(_cli("zoo", "list", str(out / "zoo"), "--json").stdout)["entries"]
    assert [e["arch"] for e in listed] == archs
    assert {e["weights"] for e in listed} == {"random"}
    assert listed[0]["latency_source"].startswith("recorded:") and listed[0]["device"] == "pixel3"
    assert listed[0]["energy_mj"] is None and "energy" not in zoo_out  # pixel3 has no meter
    assert listed[0]["accuracy_source"].startswith("nasbench201-table:")
    shown = _cli("zoo", "show", listed[0]["entry"]).stdout
    assert archs[0] in shown and "hwnas zoo verify" in shown and "random" in shown

    # the study carries the run: note, attributes, and the files as artifacts, uploaded once
    import optuna

    storage = summary["storage"]
    attrs = optuna.load_study(study_name=study, storage=storage).user_attrs
    assert attrs["run_folder"] == str(out.resolve())
    uploaded = attrs["artifacts"]
    assert {"pareto.png", "pareto.csv", "summary.json"} <= set(uploaded)
    assert {f"zoo/{e}/model.onnx" for e in entries} <= set(uploaded)
    store = hwnas_home / "artifacts"
    before = sorted(p.name for p in store.iterdir() if not p.name.startswith("."))
    assert len(before) == len(uploaded)
    # the same command again: the study is finished, its files uploaded once
    again = _cli("search", "--device", "pixel3", "--budget", "6", "--out", str(out))
    assert all(a in again.stdout for a in archs)  # the table, piped at 80 columns
    after = sorted(p.name for p in store.iterdir() if not p.name.startswith("."))
    now = optuna.load_study(study_name=study, storage=storage).user_attrs["artifacts"]
    assert len(after) == len(before) and set(now) == set(uploaded)  # one artifact per file
    changed = {f for f in now if now[f]["id"] != uploaded[f]["id"]}
    assert changed <= {"summary.json", "pareto.png", "pareto.csv"}, changed  # replaced
    shown = _cli("runs", "show", study).stdout
    assert summary["best"]["arch"] in shown and f"{len(uploaded)} files" in shown
    assert "None" not in shown  # unset settings (a recorded device has no runtime) left out

    # finding runs and entries without their full names: latest, a unique prefix or word
    other = tmp_path / "other"
    _cli("search", "--device", "raspi4", "--budget", "3", "--out", str(other), "--no-zoo")
    assert f"folder     {other.resolve()}" in _cli("runs", "show").stdout  # latest by default
    assert f"folder     {out.resolve()}" in _cli("runs", "show", "pixel3").stdout
    r = hwnas_main("runs", "show", "nasbench201", env=NARROW)
    assert r.returncode == 2 and "'nasbench201' matches 2 studies" in r.stderr
    assert "latest:nasbench201" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    first = entries[0]
    shown = _cli("zoo", "show", f"pixel3/{first[:2]}").stdout
    assert f"entry     {out / 'zoo' / first}" in shown
    r = hwnas_main("zoo", "show", first[:2], env=NARROW)  # the latest run has no zoo
    assert r.returncode == 2 and "ran with --no-zoo" in r.stderr
    # lock files are reused by every study of the database (no pile of them in the home)
    locks = sorted(p.name for p in hwnas_home.iterdir() if "lock" in p.name)
    assert locks == ["studies.db.hwnas-lock", "studies.db.locks"], locks
    assert len(list((hwnas_home / "studies.db.locks").iterdir())) <= 2  # two studies so far
    # without the zoo: the earlier zoo goes, from the run folder and from the study
    _cli("search", "--device", "pixel3", "--budget", "6", "--out", str(out), "--no-zoo")
    now = optuna.load_study(study_name=study, storage=storage).user_attrs["artifacts"]
    assert not (out / "zoo").exists() and set(now) == {"pareto.png", "pareto.csv", "summary.json"}
    zoo_files = [f for f in uploaded if f.startswith("zoo/")]
    assert zoo_files and not any(uploaded[f]["id"] in {p.name for p in store.iterdir()}
                                 for f in zoo_files)  # fmt: skip


def test_devices_show_the_extra_in_install_hints_and_json():
    # hls4ml hidden, as on an install without the fpga extra: the hint names hwnas[fpga]
    code = "import sys; sys.modules['hls4ml'] = None; from hwnas.cli import main; sys.exit(main())"
    r = subprocess.run(
        [sys.executable, "-c", code, "devices", "--all"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **NARROW},
    )
    assert r.returncode == 0, r.stderr
    hint = next(ln for ln in r.stdout.splitlines() if ln.startswith("unreachable vu9p_hls4ml"))
    assert "pip install 'hwnas[fpga]'" in hint, hint
    assert "pi5_torchmobile" in r.stdout and "titan_rtx_256" in r.stdout  # names whole
    assert max(len(ln) for ln in r.stdout.splitlines() if ln.startswith(("┃", "│", "┏"))) <= 80
    compact = _cli("devices").stdout  # by default: what a device is picked by, one row each
    assert "unreachable vu9p_hls4ml" not in compact and "(why: hwnas devices --all)" in compact
    listed = json.loads(_cli("devices", "--json").stdout)
    by_name = {d["device"]: d for d in listed["devices"]}
    # one whole line per device, even for the Eagle devices' 41-character names
    lines = compact.splitlines()
    assert len(lines) == len(by_name) + 3, compact  # title, header, devices, the why line
    assert sorted(ln.split()[0] for ln in lines[2:-1]) == sorted(by_name)
    assert "table: nasbench201 fbnet" in compact and "15625" not in compact
    assert by_name["pixel3"]["reachable"] and by_name["pixel3"]["table_rows"]["nasbench201"]
    assert not by_name["rpc"]["reachable"] and "--tracker" in by_name["rpc"]["why_unreachable"]
    listed = _cli("predictor", "list", "--json").stdout
    assert "nasbench201-help" in [p["name"] for p in json.loads(listed)["predictors"]]
    # the space a user passes as --space is whole in the 80-column table (it was folded,
    # 'nasbench20' over '1'); the paths, folded, follow whole below it
    table = _cli("predictor", "list").stdout
    rows = [ln for ln in table.splitlines() if ln.startswith("│ nasbench201-help ")]
    assert len(rows) == 1 and "│ nasbench201 │" in rows[0], table
    assert "nasbench201-help  " in table.split("path of each row, in full:")[1]


def test_runs_list_without_studies_is_one_line(tmp_path):
    r = hwnas_main("runs", "list", "--storage", f"sqlite:///{Path(tmp_path) / 'none.db'}")
    assert r.returncode == 2 and r.stderr.strip().startswith("error: no study database")


def test_runs_of_an_energy_search_show_the_best_in_mj(tmp_path, hwnas_home):
    """main showed the best's latency (ms) for an energy search, not what it minimised."""
    out = tmp_path / "energy"
    r = _cli("search", "--device", "pi5_onnx", "--objective", "energy", "--budget", "4",
             "--out", str(out), "--no-zoo", "--json")  # fmt: skip
    best = json.loads(r.stdout)["best"]
    cell = f"{best['accuracy']:.2f}% {best['energy_mj']:.3f} mJ"
    assert cell in _cli("runs", "show", "latest").stdout
    listed = hwnas_main("runs", "list", env={"COLUMNS": "250"}).stdout
    assert cell in listed and " ms" not in listed


def test_a_reader_that_stops_reading_does_not_cut_the_run_short(tmp_path, hwnas_home):
    """`hwnas search ... | head -1`: main died of the broken pipe (exit 1, silent) before
    writing summary.json, so the run folder kept the previous run's summary."""
    out = tmp_path / "run"
    best = None
    for budget in (5, 9):
        r = subprocess.run(
            f"{sys.executable} -m hwnas search --device pixel3 --budget {budget} --no-zoo "
            f"--out {out} | head -1; exit ${{PIPESTATUS[0]}}",
            shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=300,
            env={**os.environ, **NARROW},
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.splitlines()) == 1 and "Traceback" not in r.stderr
        summary = json.loads((out / "summary.json").read_text())
        assert summary["trials"]["completed"] == budget
        if best is not None:  # resumed: the progress line starts from the study's best
            resumed = next(x for x in r.stderr.splitlines() if "5/9 trials" in x)
            assert f"best {best:.2f}%" in resumed, resumed
        best = summary["best"]["accuracy"]


def test_an_energy_searchs_zoo_lists_each_models_energy(tmp_path):
    """An energy search's zoo shows the objective it was chosen by: each entry's energy (mJ)
    beside its latency (`hwnas zoo list` showed latency alone)."""
    out = tmp_path / "run"
    _cli("search", "--device", "pi5_onnx", "--objective", "energy", "--budget", "6",
         "--out", str(out))  # fmt: skip
    rows = list(csv.DictReader(open(out / "pareto.csv")))
    front = {row["arch"]: float(row["energy_mj"]) for row in rows if row["zoo"]}
    listed = json.loads(_cli("zoo", "list", str(out / "zoo"), "--json").stdout)["entries"]
    assert {e["arch"]: e["energy_mj"] for e in listed} == front
    assert all(e["energy_source"].startswith("recorded:") for e in listed)
    shown = hwnas_main("zoo", "list", str(out / "zoo"), env={"COLUMNS": "300"}).stdout
    assert "energy mJ (device, source)" in shown
    assert all(f"{mj:.3f} pi5_onnx" in shown for mj in front.values())


def test_devices_probes_every_silent_tracker_at_once(hwnas_home):
    """Four boards whose trackers accept a connection and never answer: each probe waits its
    whole handshake timeout (3 s), so `hwnas devices` probes them together (one after another
    before: 27 s for six). The listening side sees all four connections open at one moment."""
    import socket
    import threading
    import time

    import yaml

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    opened, closed = [], []

    def silent(conn):  # read until the client gives up; never answer
        with conn:
            while conn.recv(64):
                pass
        closed.append(time.monotonic())

    def serve():
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            opened.append(time.monotonic())
            threading.Thread(target=silent, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    for i in range(4):
        (hwnas_home / "devices" / f"board{i}.yaml").write_text(yaml.safe_dump(
            {"name": f"board{i}", "kind": "rpc", "runtime": "tvm",
             "rpc": {"tracker": f"127.0.0.1:{port}", "key": f"b{i}"}}))  # fmt: skip
    try:
        r = _cli("devices", "--json")
    finally:
        listener.close()
    by_name = {d["device"]: d for d in json.loads(r.stdout)["devices"]}
    for i in range(4):
        board = by_name[f"board{i}"]
        assert not board["reachable"] and "no tracker handshake" in board["why_unreachable"]
    assert len(opened) == 4 and len(closed) == 4
    assert max(opened) < min(closed)  # every probe was waiting before the first gave up


INTERRUPT_AT = r"""
import sys
from hwnas.engine import evaluate
scored, original = [0], evaluate.TableEvaluator.evaluate
def evaluate_or_stop(self, arch):
    scored[0] += 1
    if scored[0] == 7:
        raise KeyboardInterrupt  # Ctrl-C while the 7th candidate is scored
    return original(self, arch)
evaluate.TableEvaluator.evaluate = evaluate_or_stop
from hwnas.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_runs_show_counts_the_studys_trials_after_a_run_that_did_not_finish(tmp_path, hwnas_home):
    """A study searched to 10, then extended to 30 and stopped after 6 more: `runs show` said
    `trials 10` (the last finished run's summary) of a study holding 16, without a word that a
    later run had not finished (helper-62 F3). It counts the study's scored trials now."""
    args = ["search", "--device", "pixel3", "--no-zoo", "--strategy", "random", "--study", "x"]
    _cli(*args, "--budget", "10", cwd=tmp_path)
    r = subprocess.run([sys.executable, "-c", INTERRUPT_AT, *args, "--budget", "30"],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path,
                       env={**os.environ, **NARROW})  # fmt: skip
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    shown = _cli("runs", "show", "x").stdout
    assert "trials     16 scored  (a later run has not finished" in shown, shown
    (row,) = json.loads(_cli("runs", "list", "--json").stdout)["runs"]
    assert row["trials"] == 16 and row["unfinished"] is True
    # the table pairs those 16 with the 10-trial folder's best: it says so (helper-80)
    listed = " ".join(_cli("runs", "list").stdout.split())
    assert "a later run has not finished" in listed, listed
    _cli(*args, "--budget", "30", cwd=tmp_path)  # the rerun finishes it
    (row,) = json.loads(_cli("runs", "list", "--json").stdout)["runs"]
    assert row["trials"] == 30 and row["unfinished"] is False
    assert "trials     30 scored\n" in _cli("runs", "show", "x").stdout
    assert "not finished" not in _cli("runs", "list").stdout


def test_refset_measure_prints_every_arch_string_whole_in_80_columns(tmp_path):
    """`hwnas refset measure` built its own table, whose arch column folded each 60-character
    arch string over lines at 80 columns and never printed it whole (docs/usage.md: "Tables
    never cut what you copy"): it goes through print_table, which prints them whole below
    (helper-63)."""
    out = tmp_path / "ref"
    r = hwnas_main("refset", "measure", "--device", "pixel3", "--out", out, env=NARROW)
    assert r.returncode == 0, r.stderr
    with open(out / "calibration.csv", newline="") as fh:
        archs = [row["arch"] for row in csv.DictReader(fh)]
    assert len(archs) == 10 and all(len(a) > 80 // 3 for a in archs)  # too wide: folded
    lines = r.stdout.splitlines()
    assert max(len(ln) for ln in lines if ln.startswith(("┃", "│", "┏"))) <= 80, r.stdout
    assert "arch of each row, in full:" in lines or "arch (full):" in lines, r.stdout
    for arch in archs:  # each whole on a line of its own, as a user copies it
        assert any(ln.strip() == arch or ln.strip().startswith(arch + " ") for ln in lines), arch


def test_every_command_printed_to_paste_keeps_a_path_one_argument(tmp_path):
    """A run folder named 'z;touch PWN #' (and a storage path with a space): `hwnas runs show`
    printed `hwnas zoo list .../z;touch PWN #/zoo`, which pasted into a shell ran `touch`, and
    the search's last line `hwnas dashboard --storage sqlite:///.../my db/s.db` named a file
    that does not exist. Each is shell-quoted now."""
    import shlex

    out = tmp_path / "my runs" / "z;touch PWN #"
    (tmp_path / "my db").mkdir()
    storage = f"sqlite:///{tmp_path}/my db/s.db"
    r = _cli("search", "--device", "pixel3", "--budget", "3", "--out", str(out),
             "--storage", storage)  # fmt: skip
    (dashboard,) = [ln for ln in r.stdout.splitlines() if "hwnas dashboard" in ln]
    assert shlex.split(dashboard.partition("hwnas dashboard")[2]) == ["--storage", storage]
    shown = _cli("runs", "show", "latest", "--storage", storage).stdout
    (listing,) = [ln for ln in shown.splitlines() if "hwnas zoo list" in ln]
    assert shlex.split(listing) == ["hwnas", "zoo", "list", str(out.resolve() / "zoo")]
    entry = next(p for p in (out / "zoo").iterdir())
    shown = _cli("zoo", "show", str(entry)).stdout
    (check,) = [ln for ln in shown.splitlines() if "hwnas zoo verify" in ln]
    assert shlex.split(check.partition("check")[2]) == ["hwnas", "zoo", "verify", str(entry)]
    assert not (tmp_path / "PWN").exists()


MANY = """\
name: manyarch
description: more architectures than a float holds
datasets:
  cifar10: {classes: 10, input_shape: [3, 32, 32]}
stem:
  - {block: conv, out: 16, kernel: 3, stride: 1}
stages:
  - name: s1
    out: 16
    stride: 2
    depth: {min: 1, max: 250, step: 1}
    layer:
      block: mbconv
      kernel: {choices: [3, 5, 7, 9, 11]}
      expand: {choices: [2, 3, 4, 5, 6, 7, 8, 9]}
head:
  - {block: pool}
"""


def test_a_space_of_more_architectures_than_a_float_holds_is_listed(hwnas_home):
    """40^250 architectures (10^400): `hwnas spaces show` ended in 'OverflowError: int too
    large to convert to float', and with the file in the home every `hwnas spaces` listing."""
    (hwnas_home / "spaces").mkdir(exist_ok=True)
    (hwnas_home / "spaces" / "manyarch.yaml").write_text(MANY)
    listed = _cli("spaces").stdout
    row = next(line for line in listed.splitlines() if "manyarch" in line)
    assert "e+400" in row and "nasbench201" in listed
    assert "e+400 architectures" in _cli("spaces", "show", "manyarch").stdout
