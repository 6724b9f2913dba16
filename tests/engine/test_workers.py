"""Several `hwnas search` workers on one study, started at once as a user would start them:
they share the budget exactly, never score an architecture twice, none fails on a fresh
storage, and every worker's run folder lists each architecture once."""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

SMALL = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"
WORKERS = 3
BUDGET = 60


def _start_workers(storage: str, tmp_path: Path, zoo: bool = True) -> list[subprocess.Popen]:
    """WORKERS searches of one study; with ``zoo``, the first exports the zoo (what it checks,
    that a worker's zoo holds the whole study's front, is the same in each, and each export
    costs seconds on a 2-core machine)."""
    procs = []
    for w in range(WORKERS):
        folder = tmp_path / f"worker{w}"
        folder.mkdir()
        args = ["search", "--device", "pixel3", "--budget", str(BUDGET), "--study", "k"]
        args += ["--storage", storage, "--out", str(folder / "run")]
        args += [] if zoo and w == 0 else ["--no-zoo"]
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


def _check_shared_study(procs, storage: str, tmp_path: Path, zoo: bool = True) -> None:
    """Every worker exits 0, the study holds the budget once each, and every worker's run
    folder lists the whole study's front once (and, with ``zoo``, the first worker's zoo holds
    its entries)."""
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
            table = list(csv.DictReader(fh))
        rows = [r["arch"] for r in table]
        assert len(rows) == len(set(rows)) > 0
        fronts.append(rows)
        if not (zoo and w == 0):
            assert not (run / "zoo").exists()
            continue
        entries = sorted(p.parent.name for p in (run / "zoo").glob("*/model.onnx"))
        assert entries == sorted(r["zoo"] for r in table if r["zoo"])  # chance level: none
    assert added == BUDGET  # every scored architecture was scored by exactly one worker
    assert fronts[0] == fronts[1] == fronts[2]  # every worker reports the whole study


@pytest.mark.slow
def test_three_workers_share_a_fresh_sqlite_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'fresh' / 's.db'}"
    (tmp_path / "fresh").mkdir()
    procs = _start_workers(storage, tmp_path)
    _check_shared_study(procs, storage, tmp_path)


def test_workers_with_their_own_seeds_share_one_named_study(tmp_path):
    """Optuna's practice, a seed per worker: both are accepted on the named study, the budget
    is shared exactly and no architecture is scored twice."""
    storage = f"sqlite:///{tmp_path / 's.db'}"
    procs = []
    for seed in (1, 2):
        args = ["search", "--device", "pixel3", "--budget", "20", "--study", "k", "--no-zoo"]
        args += ["--storage", storage, "--seed", str(seed), "--out", str(tmp_path / f"w{seed}")]
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "hwnas", *args],
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    import optuna

    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    study = optuna.load_study(study_name="k", storage=storage)
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    archs = [t.user_attrs["arch"] for t in done]
    assert len(archs) == 20 == len(set(archs))
    added = [
        json.loads((tmp_path / f"w{seed}" / "summary.json").read_text())["trials"]
        for seed in (1, 2)
    ]
    assert [a["completed"] for a in added] == [20, 20]
    assert sum(a["completed_this_run"] for a in added) == 20
    # each trial keeps the seed of the worker that scored it, and both summaries name them
    seeds = sorted({t.user_attrs["seed"] for t in done})
    assert seeds == [s for s, a in zip((1, 2), added) if a["completed_this_run"] > 0]
    assert [a["seeds"] for a in added] == [seeds, seeds]


@pytest.mark.slow
def test_a_rerun_with_a_smaller_budget_is_refused_and_a_larger_one_extends(tmp_path):
    from helpers import hwnas_main  # in this process: one worker at a time, nothing concurrent

    storage = f"sqlite:///{tmp_path / 's.db'}"
    base = ["search", "--device", "pixel3", "--study", "k", "--storage", storage, "--no-zoo"]
    r = hwnas_main(*base, "--budget", "30", "--out", str(tmp_path / "a"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = hwnas_main(*base, "--budget", "20", "--out", str(tmp_path / "b"), cwd=tmp_path)
    assert r.returncode == 2 and not (tmp_path / "b").exists()
    # one line, before the search's progress (main printed two progress lines, then it)
    assert (
        r.stderr.strip().splitlines()
        == [line for line in r.stderr.strip().splitlines() if line.startswith("error: ")]
        and "already holds 30 scored architectures, more than --budget 20" in r.stderr
    ), r.stderr
    r = hwnas_main(*base, "--budget", "40", "--out", str(tmp_path / "c"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "c" / "summary.json").read_text())
    assert summary["trials"]["completed"] == 40 and summary["trials"]["completed_this_run"] == 10


@pytest.mark.slow
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_ctrl_c_tells_the_running_trial_and_the_rerun_finishes_the_budget(
    tmp_path, hwnas_home, signum
):
    """Ctrl-C, and SIGTERM as `kill`, `timeout` or a batch scheduler's preemption send it: the
    running trial is told, the search says "interrupted" and exits 130, and the rerun finishes
    the budget with every architecture once. SIGTERM killed the search at once: no line, its
    trial left RUNNING until a rerun failed it as an orphan's."""
    import signal

    import optuna

    from hwnas.devices import reload_profiles

    # cpu-fast with 8x the timed calls: a trial lasts long enough (a few tenths of a second)
    # that the signal below finds the second trial being measured
    profile = (hwnas_home / "devices" / "cpu-fast.yaml").read_text()
    profile = profile.replace("name: cpu-fast", "name: cpu-slow")
    profile = profile.replace("calls_per_round: 5", "calls_per_round: 40")
    (hwnas_home / "devices" / "cpu-slow.yaml").write_text(profile)
    reload_profiles()
    storage = f"sqlite:///{tmp_path / 's.db'}"
    budget = 8
    args = ["search", "--device", "cpu-slow", "--budget", str(budget), "--study", "k"]
    args += ["--strategy", "random"]  # no reference set to measure first: the point is Ctrl-C
    args += ["--storage", storage, "--no-zoo", "--out", str(tmp_path / "run")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwnas", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as in a terminal, however the suite was started: a shell starts a background
        # job (`pytest &`) with SIGINT ignored, its children inherit that, and Python then
        # installs no KeyboardInterrupt handler (the search ran on to the end)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # interrupt once the first trial is recorded: the search prints a line per trial and starts
    # the next trial's measurement at once (no polling of the study, which takes seconds to
    # read on a loaded machine)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if f" 1/{budget} trials" in line:
            break
    assert proc.poll() is None, "the search ended first:\n" + "".join(seen)
    # how the search process handles SIGINT (the 0x2 bit of each mask), for a failure's message
    status = Path(f"/proc/{proc.pid}/status")
    lines = status.read_text().splitlines() if status.exists() else []
    masks = [ln for ln in lines if ln.startswith("Sig")]
    proc.send_signal(getattr(signal, signum))
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, f"{masks}\n{err}"
    assert "interrupted" in err and "Traceback" not in err
    study = optuna.load_study(study_name="k", storage=storage)
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert 1 <= len(done) < budget  # stopped part-way
    if signum == "SIGTERM":  # the rest is the same path as Ctrl-C's, checked once
        return
    from helpers import hwnas_main

    r = hwnas_main(*args)  # the rerun (in this process: nothing here is about processes)
    assert r.returncode == 0, r.stderr
    study = optuna.load_study(study_name="k", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len({t.user_attrs["arch"] for t in complete}) == len(complete) == budget


@pytest.mark.slow
def test_three_workers_share_a_fresh_postgresql_study(tmp_path, postgres_url):
    # a bare postgresql:// URL, as users type it; the zoo export is the SQLite test's
    procs = _start_workers(postgres_url, tmp_path, zoo=False)
    _check_shared_study(procs, postgres_url.replace("postgresql://", "postgresql+psycopg://"),
                        tmp_path, zoo=False)  # fmt: skip


@pytest.mark.slow
def test_workers_with_separate_homes_measure_each_model_once_through_a_postgresql_store(
    tmp_path, postgres_url
):
    from hwnas.store import MeasurementStore

    archs = [
        "|nor_conv_3x3~0|+|none~0|nor_conv_3x3~1|+|none~0|none~1|nor_conv_3x3~2|",
        "|nor_conv_1x1~0|+|skip_connect~0|none~1|+|none~0|none~1|nor_conv_1x1~2|",
        "|avg_pool_3x3~0|+|nor_conv_1x1~0|none~1|+|skip_connect~0|none~1|none~2|",
        "|skip_connect~0|+|nor_conv_3x3~0|none~1|+|none~0|none~1|nor_conv_3x3~2|",
    ]
    args = ["measure", "--device", "cpu-fast", "--dataset", "cifar10", "--store", postgres_url]
    for a in archs:
        args += ["--arch", a]
    procs = []
    for w in range(2):  # two machines: nothing shared but the PostgreSQL server
        home = tmp_path / f"home{w}"
        (home / "devices").mkdir(parents=True)
        (home / "devices" / "cpu-fast.yaml").write_text(
            (Path(os.environ["HWNAS_HOME"]) / "devices" / "cpu-fast.yaml").read_text()
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "hwnas", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "HWNAS_HOME": str(home)},
            )
        )
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    with MeasurementStore(postgres_url) as store:
        rows = store.measurements("cpu-fast", "latency_ms")
    assert sorted(m.label for m in rows) == sorted(archs)  # each model measured exactly once
    measured = [int(re.search(r"(\d+) measured, \d+ from the store", out)[1]) for out, _ in outputs]
    assert sum(measured) == len(archs)  # the other worker found it in the store


def test_an_unreachable_postgresql_server_is_one_line(tmp_path):
    import socket

    from helpers import hwnas_cli

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://me:secret@127.0.0.1:{port}/nas"
    for args in (
        ["search", "--device", "pixel3", "--storage", url],
        ["measure", "--device", "cpu-fast", "--arch", SMALL, "--store", url],
    ):
        r = hwnas_cli(*args, cwd=tmp_path)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert f"cannot connect to the database server at 127.0.0.1:{port}" in lines[0]
        assert "secret" not in r.stderr


def test_postgresql_without_its_driver_names_the_extra(tmp_path):
    code = (
        "import hwnas.db as db; db.driver_installed = lambda name: False;"
        "import sys; from hwnas.cli import main; sys.exit(main())"
    )
    for args in (
        ["search", "--device", "pixel3", "--storage", "postgresql://me@127.0.0.1/nas"],
        ["measure", "--device", "cpu-fast", "--arch", SMALL, "--store", "postgres://h/nas"],
    ):
        r = subprocess.run(
            [sys.executable, "-c", code, *args],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
        )  # fmt: skip
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert "needs the psycopg driver: pip install 'hwnas[postgres]'" in lines[0]


@pytest.mark.slow
def test_three_workers_of_one_supernet_search_train_it_once_and_record_each_candidate_once(
    tmp_path,
):
    """Two workers share a run folder, a third has its own: one trains the supernet, the others
    wait for its final checkpoint (the third copies it into its run folder) and then score
    their share of the candidates; no two write the same temporary checkpoint."""
    import optuna

    storage = f"sqlite:///{tmp_path / 's.db'}"
    args = ["search", "--strategy", "oneshot", "--device", "pixel3", "--epochs", "1"]
    args += ["--set", "limit=300", "--set", "evolution_trials=12", "--finetune-epochs", "1"]
    args += ["--storage", storage, "--study", "sn", "--no-zoo"]
    outs = [tmp_path / "shared", tmp_path / "shared", tmp_path / "own"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "hwnas", *args, "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for out in outs
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    trained = [err for _out, err in outputs if "epoch 1/1" in err]
    assert len(trained) == 1, outputs  # the supernet is trained once
    assert any("using the supernet another worker trained" in err for _out, err in outputs)
    assert (tmp_path / "own" / "supernet.pt").read_bytes() == (
        tmp_path / "shared" / "supernet.pt"
    ).read_bytes()
    study = optuna.load_study(study_name="sn", storage=storage)
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    archs = [t.user_attrs["arch"] for t in complete]
    assert len(archs) == len(set(archs)) >= 1
    assert [t.user_attrs["role"] for t in complete].count("derived") == 1
    summaries = [json.loads((out / "summary.json").read_text()) for out in outs[1:]]
    assert all(s["trials"]["completed"] == len(archs) for s in summaries)
    assert not [p for p in tmp_path.rglob("*") if ".tmp" in p.name]


def test_a_worker_that_died_on_another_machine_does_not_block_the_others(tmp_path, monkeypatch):
    """A RUNNING claim whose heartbeat stopped (its worker's machine went away) is failed after
    the grace period, and its architecture is scored by a live worker."""
    import optuna

    import hwnas.engine.loop as engine
    from hwnas.engine.loop import run_search

    monkeypatch.setattr(engine, "HEARTBEAT_S", 1)
    space, storage, settings, ev, study = _study_of_five(tmp_path, monkeypatch)
    with pytest.warns(UserWarning, match="Heartbeat"):  # Optuna's note: heartbeats outside optimize
        ghost = study.ask()  # a claim by a worker elsewhere that then lost its machine
    ghost.set_user_attr("worker", "elsewhere:1")
    ghost.set_user_attr("arch", SMALL)
    study._storage.record_heartbeat(ghost._trial_id)
    result = run_search(settings, space, ev.evaluate, storage)  # waits, then fails the ghost
    assert len(result.records) == 6
    states = {t.number: t.state for t in optuna.load_study(study_name="k", storage=storage).trials}
    assert states[ghost.number] == optuna.trial.TrialState.FAIL


def _study_of_five(tmp_path, monkeypatch):
    """A grace period of 2 s, and a study of budget 6 holding 5 scored architectures (nsga2
    on pixel3): (space, storage, settings, evaluator, the study) for a ghost claim's tests."""
    import optuna

    import hwnas.engine.loop as engine
    from hwnas.devices import get_device
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import SearchSettings, open_storage, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    monkeypatch.setattr(engine, "GRACE_S", 2)
    monkeypatch.setattr(engine, "POLL_S", 0.2)
    space = get_space("nasbench201")
    storage = open_storage(f"sqlite:///{tmp_path / 's.db'}")
    settings = SearchSettings(
        space="nasbench201", device="pixel3", budget=6, study="k", strategy="nsga2"
    )
    ev = TableEvaluator(space, "cifar100", Profiler(get_device("pixel3"), None), ["latency_ms"])
    run_search(dataclass_replace(settings, budget=5), space, ev.evaluate, storage)
    study = optuna.load_study(study_name="k", storage=storage)
    return space, storage, settings, ev, study


def dataclass_replace(settings, **changes):
    import dataclasses

    return dataclasses.replace(settings, **changes)


def test_a_claim_whose_worker_died_before_its_first_heartbeat_does_not_block_the_others(
    tmp_path, monkeypatch
):
    """A worker killed within a second of its claim (before its first heartbeat), on another
    machine, leaves a RUNNING trial Optuna's stale check never sees: the live worker failed
    nothing and waited for ever at 5/6. Once the waiting worker has seen it without a
    heartbeat for the grace period (by its own clock: a claiming machine's clock set behind
    must not get a live claim failed at once) it is failed, as a handed-over study's RUNNING
    trial is, and the budget is met."""
    import optuna

    from hwnas.engine.loop import run_search

    space, storage, settings, ev, study = _study_of_five(tmp_path, monkeypatch)
    ghost = study.ask()  # claimed elsewhere, never beat (a live pid of this host reads the same)
    ghost.set_user_attr("worker", "elsewhere:1")
    ghost.set_user_attr("arch", SMALL)
    started = time.monotonic()
    result = run_search(settings, space, ev.evaluate, storage)
    assert time.monotonic() - started >= 2  # the grace period, on this worker's clock
    assert len(result.records) == 6
    states = {t.number: t.state for t in optuna.load_study(study_name="k", storage=storage).trials}
    assert states[ghost.number] == optuna.trial.TrialState.FAIL


def test_two_supernet_studies_never_wait_for_each_others_training(tmp_path):
    """The training lock, held for a supernet's whole training, was one of 16 lock files
    shared by every study of the database: an unrelated search whose name fell in the same
    file waited for the other's training, told "another worker is training the supernet of
    study 'lockB55'". A long lock has a file of its own; one name still excludes itself."""
    import threading

    from hwnas.db import lock_key
    from hwnas.engine.loop import open_storage
    from hwnas.engine.workers import LOCK_BUCKETS, study_lock

    storage = open_storage(f"sqlite:///{tmp_path / 's.db'}")
    a = "study-a:supernet"
    names = (f"study-{i}:supernet" for i in range(10_000))
    bucket = lock_key(a) % LOCK_BUCKETS
    b = next(n for n in names if n != a and lock_key(n) % LOCK_BUCKETS == bucket)

    def taken_within(name: str, seconds: float) -> bool:
        got = threading.Event()

        def take():
            with study_lock(storage, name, long=True):
                got.set()

        thread = threading.Thread(target=take, daemon=True)
        thread.start()
        return got.wait(seconds)

    with study_lock(storage, a, long=True):
        assert taken_within(b, 10)  # the same bucket, another study: no wait
        assert not taken_within(a, 1)  # the same study: it waits
