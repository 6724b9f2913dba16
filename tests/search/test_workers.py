"""Several `hwnas search` workers on one study, started at once as a user would start them:
they share the budget exactly, never score an architecture twice, none fails on a fresh
storage, and every worker's run folder lists each architecture once."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

WORKERS = 3
BUDGET = 60


def _start_workers(storage: str, tmp_path: Path, extra: list[str] = ()) -> list[subprocess.Popen]:
    procs = []
    for w in range(WORKERS):
        folder = tmp_path / f"worker{w}"
        folder.mkdir()
        args = ["search", "--device", "pixel3", "--budget", str(BUDGET), "--study", "k"]
        args += ["--storage", storage, "--out", str(folder / "run"), *extra]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "hwnas", *args],
                cwd=folder,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "HWNAS_HOME": str(folder / "home")},
            )
        )
    return procs


def _check_shared_study(procs, storage: str, tmp_path: Path) -> None:
    import optuna

    outputs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outputs):
        assert p.returncode == 0, err
    study = optuna.load_study(study_name="k", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    archs = [t.user_attrs["arch"] for t in complete]
    assert len(complete) == BUDGET and len(set(archs)) == BUDGET  # the budget, once each
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    fronts, added = [], 0
    for w in range(WORKERS):
        run = tmp_path / f"worker{w}" / "run"
        summary = json.loads((run / "summary.json").read_text())
        assert summary["trials"]["completed"] == BUDGET
        added += summary["trials"]["completed_this_run"]
        with open(run / "pareto.csv") as fh:
            rows = [r["arch"] for r in csv.DictReader(fh)]
        assert len(rows) == len(set(rows)) > 0
        fronts.append(rows)
        zoo = sorted(p.parent.name for p in (run / "zoo").glob("*/model.onnx"))
        assert len(zoo) == len(rows)
    assert added == BUDGET  # every scored architecture was scored by exactly one worker
    assert fronts[0] == fronts[1] == fronts[2]  # every worker reports the whole study


@pytest.mark.slow
def test_three_workers_share_a_fresh_sqlite_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'fresh' / 's.db'}"
    (tmp_path / "fresh").mkdir()
    procs = _start_workers(storage, tmp_path)
    _check_shared_study(procs, storage, tmp_path)


@pytest.mark.slow
def test_a_rerun_with_a_smaller_budget_is_refused_and_a_larger_one_extends(tmp_path):
    from helpers import hwnas_cli

    storage = f"sqlite:///{tmp_path / 's.db'}"
    base = ["search", "--device", "pixel3", "--study", "k", "--storage", storage, "--no-zoo"]
    r = hwnas_cli(*base, "--budget", "30", "--out", str(tmp_path / "a"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = hwnas_cli(*base, "--budget", "20", "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / "b").exists()
    assert "already holds 30 scored architectures, more than --budget 20" in r.stderr
    r = hwnas_cli(*base, "--budget", "40", "--out", str(tmp_path / "c"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["trials"]["completed"] == 40 and summary["trials"]["completed_this_run"] == 10


@pytest.mark.slow
def test_ctrl_c_tells_the_running_trial_and_the_rerun_finishes_the_budget(tmp_path):
    import signal
    import time

    import optuna

    storage = f"sqlite:///{tmp_path / 's.db'}"
    args = ["search", "--device", "cpu-fast", "--budget", "8", "--study", "k"]
    args += ["--storage", storage, "--no-zoo", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwnas", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # interrupt once a trial is being measured
        time.sleep(0.2)
        try:
            study = optuna.load_study(study_name="k", storage=storage)
        except Exception:  # not created yet
            continue
        states = [t.state for t in study.trials]
        if optuna.trial.TrialState.COMPLETE in states and states[-1].name == "RUNNING":
            break
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    study = optuna.load_study(study_name="k", storage=storage)
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    from helpers import hwnas_cli

    r = hwnas_cli(*args)
    assert r.returncode == 0, r.stderr
    study = optuna.load_study(study_name="k", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len({t.user_attrs["arch"] for t in complete}) == len(complete) == 8
