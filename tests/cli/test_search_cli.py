"""`hwnas search` as a user types it: run folder, zoo, resuming, measuring once."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers import hwnas_cli, hwnas_main

from hwnas.store import MeasurementStore


def test_a_limit_only_chance_level_cells_meet_says_that_its_best_guesses(tmp_path):
    """On a Pixel 3 only NAS-Bench-201's cells whose output ignores their input (1.00% on
    CIFAR-100, 0.003 ms) run within 0.1 ms: the most accurate one within the limit is one of
    them, and the search says so beside it (main printed it as any best)."""
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pixel3", "--max-latency", "0.1", "--budget", "20",
                   "--no-zoo", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    best = json.loads((out / "summary.json").read_text())["best"]
    assert best["accuracy"] == pytest.approx(1.0) and best["latency_ms"] <= 0.1
    assert best["chance_level"] is True
    assert (
        "! best is chance-level (top-1 at most 1.5x chance: no better than guessing; "
        "chance_level in pareto.csv): no architecture within --max-latency 0.1 ms does better; "
        "loosen it"
    ) in r.stdout
    shown = hwnas_main("runs", "show", "latest")
    assert shown.returncode == 0 and "chance-level: no better than guessing" in shown.stdout


def test_search_on_a_recorded_phone_writes_the_run_folder(tmp_path):
    out = tmp_path / "run"
    r = hwnas_cli("search", "--device", "pixel3", "--budget", "20", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "Pareto front" in r.stdout
    rows = list(csv.DictReader(open(out / "pareto.csv")))
    assert rows and set(rows[0]) >= {
        "arch",
        "accuracy",
        "latency_ms",
        "accuracy_source",
        "latency_ms_source",
    }
    assert rows[0]["latency_ms_source"].startswith("recorded:")
    latencies = [float(row["latency_ms"]) for row in rows]
    accuracies = [float(row["accuracy"]) for row in rows]
    assert latencies == sorted(latencies) and accuracies == sorted(accuracies)  # a staircase
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trials"]["completed"] == 20
    assert summary["measurements"] == {"taken": 0, "reused_from_store": 0, "read_from_table": 20}
    assert summary["best"]["arch"] == rows[-1]["arch"]
    assert summary["best"]["accuracy"] == pytest.approx(max(accuracies))
    assert (out / "pareto.png").stat().st_size > 10_000
    # every row but the chance-level ones (a cell with no input-output path, 1.00% on
    # CIFAR-100: the front's cheapest point when the search queried it) has its zoo entry
    cards = sorted(out.glob("zoo/*/card.json"))
    exported = [row for row in rows if row["chance_level"] == "false"]
    assert all(row["zoo"] == "" for row in rows if row["chance_level"] == "true")
    assert all(float(row["accuracy"]) > 1.5 for row in exported)
    assert len(cards) == len(exported) == summary["zoo_models"] >= len(rows) - 1
    card = json.loads(cards[0].read_text())
    # a random-weight card's title: the searched cost with its unit, not the table's accuracy
    title = (cards[0].parent / "README.md").read_text().split("\n# ", 1)[1].splitlines()[0]
    assert title.endswith(" ms, random weights, untrained)") and "%" not in title
    assert card["arch"] == exported[0]["arch"] and card["opset"] == 17
    assert card["input"]["shape"] == [1, 3, 32, 32] and card["params"] > 0 and card["flops"] > 0
    assert exported[0]["zoo"] == cards[0].parent.name
    latency = float(exported[0]["latency_ms"])
    assert card["devices"]["pixel3"]["latency_ms"]["value"] == pytest.approx(latency)
    assert "fpga" in card["devices"]  # latency on other recorded devices, with its source
    # a table that lacks a cell gives no value for it (the Pi 5 tables measured 6,466 of the
    # 15,625 cells; main wrote "value": NaN), so every card is strict JSON
    from hwnas.predictors.data import get_column
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    on_pi5 = np.isfinite(get_column("nasbench201", "pi5_onnx").values)
    for path in cards:
        strict = json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(c))
        index = space.index(space.parse(strict["arch"]))
        assert ("pi5_onnx" in strict["devices"]) == on_pi5[index]
    model = onnx.load(str(cards[0].parent / "model.onnx"))
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y = session.run(None, {"input": np.zeros((2, 3, 32, 32), np.float32)})[0]
    assert y.shape == (2, 100)


def test_max_latency_and_energy(tmp_path):
    out = tmp_path / "run"
    r = hwnas_main(
        "search",
        "--device",
        "pi5_onnx",
        "--objective",
        "energy",
        "--budget",
        "30",
        "--max-latency",
        "3",
        "--out",
        str(out),
        "--no-zoo",
    )
    assert r.returncode == 0, r.stderr
    files = "pareto.csv, pareto.png, summary.json, no zoo: --no-zoo"
    assert f"run folder: {out}  ({files})" in r.stdout
    assert not (out / "zoo").exists()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best"]["latency_ms"] <= 3.0
    rows = list(csv.DictReader(open(out / "pareto.csv")))
    assert all(float(row["latency_ms"]) <= 3.0 for row in rows)
    assert all(row["energy_mj_source"].endswith("pi5_onnx_cifar100_energy_mj") for row in rows)


def _count(store_path) -> int:
    if not store_path.exists():
        return 0
    with MeasurementStore(store_path) as s:
        return sum(s.counts().values())


def test_killed_search_resumes_without_measuring_twice(tmp_path, hwnas_home):
    """A live-CPU search is killed (SIGKILL) mid-way; the same command finishes it, and every
    architecture is measured exactly once. With the default strategy (frontier) the device's
    reference set is measured first (to calibrate the cost predictor), so the store ends with
    the reference networks and the 8 trials' networks."""
    store = hwnas_home / "measurements.db"
    args = [
        "search",
        "--device",
        "cpu-fast",
        "--budget",
        "8",
        "--out",
        str(tmp_path / "run"),
        "--no-zoo",
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwnas", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.time() + 240
    while _count(store) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = _count(store)
    assert before >= 3 and proc.returncode == -signal.SIGKILL, "killed part-way"
    r = hwnas_main(*args)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["trials"]["completed"] == 8
    assert summary["trials"]["seeds"] == [0]  # a live trial's claim keeps its run's seed
    total = _count(store)
    assert 8 <= total <= 8 + 10  # the trials' networks and the 10 reference networks
    assert summary["measurements"]["taken"] == total - before > 0  # nothing measured twice
    # the identical command again: nothing new at all
    r = hwnas_main(*args)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["trials"]["completed_this_run"] == 0 and summary["measurements"]["taken"] == 0
    # a new study proposing the same architectures reuses every stored measurement
    r = hwnas_main(*args[:-3], "--study", "again", "--out", str(tmp_path / "run2"), "--no-zoo")
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run2" / "summary.json").read_text())
    measurements = summary["measurements"]
    assert measurements["taken"] == 0 and measurements["read_from_table"] == 0
    assert measurements["reused_from_store"] >= 8
    assert _count(store) == total
    # live values say whether they reached the profile's precision target (95% interval of the
    # median within +-1%, the default), in pareto.csv and, when missed, in the output
    rows = list(csv.DictReader(open(tmp_path / "run2" / "pareto.csv")))
    for row in rows:
        ci = row["latency_ms_ci95_pct"]
        assert row["latency_ms_precision_met"] == ("true" if ci and float(ci) <= 1.0 else "false")
    missed = any(row["latency_ms_precision_met"] == "false" for row in rows)
    assert missed == ("missed the device profile's precision target" in r.stdout)


def test_another_searchs_study_is_refused_before_any_progress(tmp_path, hwnas_home):
    """`--study w1` of another strategy printed "search pixel3: 0/30 trials (0%), done" and
    only then the refusal: one line, before any progress, now."""
    args = ["search", "--device", "pixel3", "--study", "w1", "--no-zoo", "--out"]
    assert hwnas_main(*args, str(tmp_path / "a"), "--budget", "5").returncode == 0
    r = hwnas_main(*args, str(tmp_path / "b"), "--budget", "30", "--strategy", "tpe")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "error: study 'w1' in this storage was made by a different search (strategy 'frontier' "
        "there, 'tpe' here); pick another --study name"
    ]


def test_a_study_resumed_with_another_seed_names_both_seeds(tmp_path, hwnas_home):
    """summary.json's settings gave the last run's --seed alone: a study resumed with another
    seed (accepted, as Optuna's seed per worker) was reported as made with that one. Each trial
    now keeps the seed of the run that scored it, and `trials.seeds` names them all."""
    args = ["search", "--device", "pixel3", "--study", "s", "--no-zoo", "--out", str(tmp_path)]
    assert hwnas_main(*args, "--budget", "6", "--seed", "1").returncode == 0
    r = hwnas_main(*args, "--budget", "10", "--seed", "2")
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["settings"]["seed"] == 2  # this run's
    assert summary["trials"]["seeds"] == [1, 2] and summary["trials"]["completed"] == 10


def test_a_latency_below_a_millisecond_is_printed_to_four_significant_digits(
    tmp_path, hwnas_home
):
    """The cheapest NAS-Bench-201 cell on the Pixel 3 (0.003277 ms) was printed `0.003 ms` in
    the front and the best line, 9% off, under a limit printed as 0.003277."""
    from hwnas.cost_record import cost_digits

    assert [cost_digits(v) for v in (0.003277, 0.5, 12.3456, 1234.5)] == [
        "0.003277", "0.5000", "12.346", "1234.500",
    ]  # fmt: skip
    r = hwnas_main("search", "--device", "pixel3", "--budget", "3", "--no-zoo",
                   "--max-latency", "0.003277", "--out", str(tmp_path / "run"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    best = [line for line in r.stdout.splitlines() if line.startswith("best ")]
    assert len(best) == 1 and best[0].endswith(" 0.003277 ms"), best
    assert "│   0.003277 │" in r.stdout and "0.003 ms" not in r.stdout


def test_runs_show_says_when_no_architecture_met_the_limit(tmp_path, hwnas_home):
    """A search none of whose architectures met --max-latency says so, and `hwnas runs show`
    said nothing of a best at all."""
    r = hwnas_main("search", "--device", "fpga", "--budget", "5", "--no-zoo", "--strategy",
                   "random", "--max-latency", "1.14", "--out", str(tmp_path / "run"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "no architecture met --max-latency 1.14 ms" in r.stdout
    shown = hwnas_main("runs", "show", "latest")
    assert shown.returncode == 0, shown.stderr
    assert "best       none: no architecture met --max-latency 1.14 ms" in shown.stdout.splitlines()
