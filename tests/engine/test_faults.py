"""Faults: a killed search resumes to the same answer, a damaged study database is refused, a
full disk at any step is one line and loses nothing, and no temporary file survives a rerun."""

from __future__ import annotations

import builtins
import errno
import io
import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hwnas.cli import main

ARGS = ["search", "--device", "pixel3", "--no-zoo", "--study", "s"]

KILLER = r"""
import os, signal, sys
kill_at = int(os.environ["HWNAS_KILL_AT"])
from hwnas.engine import evaluate
scored = [0]
original = evaluate.TableEvaluator.evaluate
def evaluate_then_die(self, arch):
    scored[0] += 1
    if scored[0] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, arch)
evaluate.TableEvaluator.evaluate = evaluate_then_die
from hwnas.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _study(home: Path, name: str = "s"):
    import optuna

    return optuna.load_study(study_name=name, storage=f"sqlite:///{home / 'studies.db'}")


def _scored(home: Path) -> list[str]:
    """Architectures of the COMPLETE trials, in trial order."""
    from optuna.trial import TrialState

    done = _study(home).get_trials(states=(TrialState.COMPLETE,))
    return [t.user_attrs["arch"] for t in sorted(done, key=lambda t: t.number)]


def _front(out: Path) -> list[str]:
    return (out / "pareto.csv").read_text().splitlines()


def _leftovers(*folders: Path) -> list[Path]:
    return [
        p
        for folder in folders
        for p in folder.rglob("*")
        if p.name.endswith((".tmp", ".old", "-journal")) or ".tmp." in p.name
    ]


def _cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


def assert_one_line(code: int, err: str, expected: str) -> None:
    """Assert one ``error: `` line holding ``expected``, exit status 2 and no traceback."""
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("search")]
    errors = [line for line in lines if line.startswith("error: ")]
    assert code == 2 and len(errors) == 1 and expected in errors[0], err
    assert "Traceback" not in err


# -- killed at random moments ---------------------------------------------------------------------


def test_a_search_killed_at_three_random_moments_resumes_to_the_uninterrupted_answer(
    tmp_path, monkeypatch, capsys
):
    """A real SIGKILL of the CLI process when it is about to score its N-th candidate (N seeded
    random), three times over one search, then a plain rerun: the study scores the same
    architectures in the same order and writes the same front as a search never killed."""
    budget = 60
    args = [*ARGS, "--budget", str(budget)]
    monkeypatch.setenv("HWNAS_HOME", str(tmp_path / "ref"))
    assert _cli(capsys, *args, "--out", str(tmp_path / "ref-out"))[0] == 0
    reference = _scored(tmp_path / "ref")
    assert len(reference) == budget

    home, out = tmp_path / "home", tmp_path / "out"
    env = {**os.environ, "HWNAS_HOME": str(home)}
    held = 0
    for count in sorted(random.Random(18).sample(range(2, budget), 3)):
        env["HWNAS_KILL_AT"] = str(max(count - held, 1))
        r = subprocess.run(
            [sys.executable, "-c", KILLER, *args, "--out", str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert r.returncode == -signal.SIGKILL, (count, r.stderr)
        held = len(_scored(home)) if (home / "studies.db").exists() else 0
        assert held < budget
    monkeypatch.setenv("HWNAS_HOME", str(home))
    assert _cli(capsys, *args, "--out", str(out))[0] == 0
    assert _scored(home) == reference  # the same architectures, in the same order
    assert _front(out) == _front(tmp_path / "ref-out")
    assert not _leftovers(home, out)


@pytest.mark.parametrize(
    "strategy", ["frontier", "surrogate", "nsga2", "nsga3", "tpe", "gp", "aging", "random"]
)
def test_every_table_strategy_proposes_the_same_after_a_restart(strategy):
    """The sampler of a fresh process (a resumed search) proposes, for the study it finds, what
    the sampler of the uninterrupted process proposed: the search is stopped (Ctrl-C) after a
    seeded random number of candidates, resumed by a new run_search on the same storage, and
    compared trial by trial with a search never stopped."""
    import optuna

    from hwnas.devices import get_device
    from hwnas.engine.costs import CostContext, table_costs
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import SearchSettings, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    device = get_device("pixel3")
    budget = 9 if strategy == "gp" else 45  # gp: 3 proposals of its own after 6 at random
    settings = SearchSettings(
        space="nasbench201", device="pixel3", budget=budget, strategy=strategy, seed=7
    )
    options = {
        "gp": {"n_startup_trials": 6},
        "aging": {"population": 10, "sample": 4},
        "surrogate": {"trees": 10, "init": 10, "bins": 5},
        "frontier": {"init": 10, "batch": 5},
    }.get(strategy, {})

    def search(storage, stop_at=None):
        ev = TableEvaluator(space, "cifar100", Profiler(device, None), ["latency_ms"])
        calls = [0]

        def evaluate(arch):
            calls[0] += 1
            if calls[0] == stop_at:
                raise KeyboardInterrupt
            return ev.evaluate(arch)

        costs = CostContext(space, cost=table_costs(space, device, "latency_ms"), budget=budget)
        return run_search(settings, space, evaluate, storage, sampler_options=options, costs=costs)

    def scored(storage):
        return [r.arch for r in search(storage).records]

    reference = scored(optuna.storages.InMemoryStorage())
    storage = optuna.storages.InMemoryStorage()
    for stop in random.Random(strategy).sample(range(2, max(budget // 3, 5)), 2):
        with pytest.raises(KeyboardInterrupt):
            search(storage, stop_at=stop)
    assert scored(storage) == reference


def test_a_search_stopped_after_a_tables_gap_resumes_to_the_uninterrupted_trials(monkeypatch):
    """An Edge TPU table lacks the chance-level cells: a proposal of one is a FAIL trial, and
    the run records a second proposal of it as PRUNED (failed before), without looking it up
    again. That memory was the process's: stopped (Ctrl-C) just before the second proposal,
    the resumed run looked it up again (FAIL), TPE's study differed from there on, and the
    search ended with another front and best (helper-62). The study is the memory now, and a
    resumed run's asks and repeats in a row go on from what the study holds."""
    import optuna

    from hwnas.devices import get_device
    from hwnas.engine import loop as loop_mod
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import SearchSettings, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    device = get_device("embedded_tpu_edge_tpu_int8")
    settings = SearchSettings(space="nasbench201", device=device.name, budget=60,
                              strategy="tpe", seed=3, study="gaps")  # fmt: skip
    ev = TableEvaluator(space, "cifar100", Profiler(device, None), ["latency_ms"])

    def trials(storage):
        study = optuna.load_study(study_name="gaps", storage=storage)
        return [(t.state.name, t.user_attrs.get("arch") or t.user_attrs.get("failed_before"))
                for t in study.get_trials(deepcopy=False)]  # fmt: skip

    reference_storage = optuna.storages.InMemoryStorage()
    reference = run_search(settings, space, ev.evaluate, reference_storage)
    held = trials(reference_storage)
    again = [i for i, (state, _) in enumerate(held) if state == "PRUNED" and
             held[i][1] in {a for s, a in held[:i] if s == "FAIL"}]  # fmt: skip
    assert again, "the reference search proposed no failed architecture twice"

    storage = optuna.storages.InMemoryStorage()
    step = loop_mod._Loop.step
    for stop in (again[0], again[-1]):  # Ctrl-C just before the failed one comes again

        def interrupted(self, stop=stop):
            if len(self.ledger.trials) == stop:
                raise KeyboardInterrupt
            step(self)

        monkeypatch.setattr(loop_mod._Loop, "step", interrupted)
        with pytest.raises(KeyboardInterrupt):
            run_search(settings, space, ev.evaluate, storage)
    monkeypatch.setattr(loop_mod._Loop, "step", step)
    resumed = run_search(settings, space, ev.evaluate, storage)
    assert trials(storage) == held  # every trial, FAIL and PRUNED ones too, as uninterrupted
    assert [r.arch for r in resumed.pareto] == [r.arch for r in reference.pareto]


def test_a_rerun_of_a_search_that_used_its_asks_asks_no_more(monkeypatch):
    """The bound on proposals (20 x budget, duplicates included) and the repeats in a row
    restarted at 0 in every run: a search that stopped having used them asked again on a
    rerun of the same command, and one killed partway got a fresh allowance (helper-62).
    Both go on from the study's trials."""
    import optuna

    from hwnas.devices import get_device
    from hwnas.engine import loop as loop_mod
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import SearchSettings, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    ev = TableEvaluator(space, "cifar100", Profiler(get_device("pixel3"), None), ["latency_ms"])
    settings = SearchSettings(space="nasbench201", device="pixel3", budget=10,
                              strategy="random", seed=1, study="asks")  # fmt: skip
    monkeypatch.setattr(loop_mod._Loop, "max_asks", property(lambda self: 6))
    storage = optuna.storages.InMemoryStorage()
    first = run_search(settings, space, ev.evaluate, storage)
    assert first.stopped and len(first.records) == 6
    again = run_search(settings, space, ev.evaluate, storage)
    assert len(again.records) == 6 and again.stopped == first.stopped
    assert len(optuna.load_study(study_name="asks", storage=storage).trials) == 6


def test_a_failure_that_passed_is_tried_again_and_a_tables_gaps_use_up_asks_said(tmp_path):
    """A runtime that failed on five candidates halts the search; once it is fixed, the rerun
    scores them (a study-wide memory of every failure dropped them for good: helper-66). A
    table whose every 50th cell has a value: the proposals' bound is used on gaps, and the
    search says so rather than 'the space is exhausted' (helper-66)."""
    from hwnas.cost_record import CostRecord
    from hwnas.engine.evaluate import Evaluation
    from hwnas.engine.loop import SearchHalted, SearchSettings, run_search
    from hwnas.errors import CandidateError, UnrecordedError
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    url = f"sqlite:///{tmp_path / 's.db'}"
    proposals = [space.arch_at(i * 97) for i in range(10)]
    calls: list[str] = []

    def evaluate(glitch):
        def score(arch):
            calls.append(arch.text)
            if glitch and len(calls) <= 5:
                raise CandidateError("the runtime failed on it")
            i = space.index(arch)
            cost = CostRecord("latency_ms", 1.0 + i % 30, "measured:cpu:ort")
            return Evaluation(arch, 50.0 + i % 40, "t", {"latency_ms": cost}, "h")

        return score

    settings = SearchSettings(space="nasbench201", device="pixel3", budget=10,
                              strategy="random", study="f")  # fmt: skip
    with pytest.raises(SearchHalted):
        run_search(settings, space, evaluate(True), url, proposals=proposals)
    calls.clear()
    again = run_search(settings, space, evaluate(False), url, proposals=proposals)
    assert len(again.records) == 10 and len(calls) == 10 and again.stopped is None

    def gappy(arch):
        i = space.index(arch)
        if i % 50:
            raise UnrecordedError("no recorded latency_ms")
        cost = CostRecord("latency_ms", 1.0 + i % 30, "recorded:t.csv:latency_ms")
        return Evaluation(arch, 50.0, "t", {"latency_ms": cost}, "h")

    settings = SearchSettings(space="nasbench201", device="pixel3", budget=3,
                              strategy="random", study="g")  # fmt: skip
    for _ in range(2):  # the rerun asks nothing more, and says the same
        result = run_search(settings, space, gappy, url)
        assert result.trials_total == 60 and "the study holds 60 proposals" in result.stopped
        assert "had no value in the device's table" in result.stopped


def test_ctrl_c_while_a_claim_is_written_leaves_no_running_trial(tmp_path, monkeypatch):
    """Ctrl-C that falls after a claim (a RUNNING trial) is committed and before its id is
    kept: the study held a RUNNING trial until a rerun failed it as an orphan (one full-suite
    run of the Ctrl-C test, tests/engine/test_workers.py). Now it is FAIL at once, and the
    rerun completes the budget with each architecture once."""
    import optuna

    from hwnas.devices import get_device
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.ledger import RdbLedger
    from hwnas.engine.loop import SearchSettings, open_storage, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    ev = TableEvaluator(space, "cifar100", Profiler(get_device("pixel3"), None), ["latency_ms"])
    settings = SearchSettings(
        space="nasbench201", device="pixel3", budget=6, study="c", strategy="random"
    )
    url = f"sqlite:///{tmp_path / 's.db'}"
    add, calls = RdbLedger.add, [0]

    def add_then_interrupt(self, trial, defer=False):
        written = add(self, trial, defer)
        calls[0] += 1
        if calls[0] == 3 and trial.state == optuna.trial.TrialState.RUNNING:
            raise KeyboardInterrupt  # the claim is in the storage; the step never sees it
        return written

    monkeypatch.setattr(RdbLedger, "add", add_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        run_search(settings, space, ev.evaluate, open_storage(url))  # claims, not instant
    study = optuna.load_study(study_name="c", storage=url)
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.RUNNING not in states, states
    assert states.count(optuna.trial.TrialState.FAIL) == 1
    monkeypatch.setattr(RdbLedger, "add", add)
    result = run_search(settings, space, ev.evaluate, open_storage(url))
    archs = [r.arch for r in result.records]
    assert len(archs) == len(set(archs)) == 6


# -- damaged databases ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "is empty (0 bytes), not an SQLite database"),
        (b"not a database\n" * 10, "is not an SQLite database"),
        ("half", "is truncated"),
    ],
)
def test_an_empty_or_damaged_study_database_is_one_line_not_a_fresh_study(
    content, expected, hwnas_home, tmp_path, capsys
):
    db = hwnas_home / "studies.db"
    if content == "half":
        assert _cli(capsys, *ARGS, "--budget", "5", "--out", str(tmp_path / "a"))[0] == 0
        whole = db.read_bytes()
        content = whole[: len(whole) // 2 + 100]
    db.write_bytes(content)
    code, err = _cli(capsys, *ARGS, "--budget", "5", "--out", str(tmp_path / "b"))
    assert_one_line(code, err, f"study storage {db} {expected}")
    assert db.read_bytes() == content  # left as it was, for the user to restore
    assert not (tmp_path / "b").exists()


def test_an_empty_measurement_store_is_one_line(tmp_path, capsys):
    (tmp_path / "m.db").write_bytes(b"")
    code, err = _cli(capsys, "devices", "--store", str(tmp_path / "m.db"))
    assert_one_line(code, err, "is empty (0 bytes), not an SQLite database")


DIE_CREATING = r"""
import os, signal, sqlite3, sys
real = sqlite3.connect
def connect_then_die(path, *args, **kwargs):
    new = not os.path.exists(path)
    conn = real(path, *args, **kwargs)  # SQLite makes the file, 0 bytes, here
    if new:
        os.kill(os.getpid(), signal.SIGKILL)
    return conn
sqlite3.connect = connect_then_die
from hwnas.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize(
    ("args", "db"),
    [
        (["search", "--device", "pixel3", "--no-zoo", "--budget", "3"], "studies.db"),
        (["devices", "--store", "{home}/measurements.db"], "measurements.db"),
    ],
)
def test_a_kill_while_a_database_is_created_leaves_no_file_the_rerun_refuses(
    args, db, hwnas_home, tmp_path
):
    """Killed between SQLite making a new study storage or measurement store (0 bytes) and
    writing its header, a search left an empty file that every later run refused ('is empty
    (0 bytes)... restore it from a backup'). A database is now made under a temporary name
    and renamed into place; the rerun removes a dead creator's temporary file."""
    env = {**os.environ, "HWNAS_HOME": str(hwnas_home)}
    args = [a.format(home=hwnas_home) for a in args]
    killed = subprocess.run([sys.executable, "-c", DIE_CREATING, *args], env=env,
                            cwd=tmp_path, capture_output=True, text=True)  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (hwnas_home / db).exists() or (hwnas_home / db).stat().st_size > 0
    rerun = subprocess.run([sys.executable, "-m", "hwnas", *args], env=env, cwd=tmp_path,
                           capture_output=True, text=True)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert (hwnas_home / db).stat().st_size > 0
    assert not list(hwnas_home.glob(f".{db}.creating-*")), list(hwnas_home.iterdir())


# -- a full disk -------------------------------------------------------------------------------


class _FullFile:
    """A file opened for writing on a full disk: every write fails with ENOSPC."""

    def __init__(self, fh, name):
        self._fh, self._name = fh, name

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), self._name)

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._fh.close()

    def __iter__(self):
        return iter(self._fh)


def _fill_disk(monkeypatch, full) -> None:
    """Files opened for writing whose path ``full(path)`` accepts fail on their first write."""
    real = io.open

    def opener(file, mode="r", *args, **kwargs):
        fh = real(file, mode, *args, **kwargs)
        if isinstance(file, (str, Path)) and set(mode) & set("wax+") and full(str(file)):
            return _FullFile(fh, str(file))
        return fh

    monkeypatch.setattr(io, "open", opener)
    monkeypatch.setattr(builtins, "open", opener)


def _disk_full_db(monkeypatch, target, name, after: int = 0, sqlalchemy_error=True) -> None:
    """``target.name`` raises SQLite's "database or disk is full" (as SQLAlchemy wraps it, or
    as the sqlite3 module raises it) after ``after`` calls."""
    import sqlite3

    import sqlalchemy

    real = getattr(target, name)
    calls = [0]

    def failing(*args, **kwargs):
        calls[0] += 1
        if calls[0] > after:
            orig = sqlite3.OperationalError("database or disk is full")
            if not sqlalchemy_error:
                raise orig
            raise sqlalchemy.exc.OperationalError("INSERT INTO trials ...", {}, orig)
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, failing)


STEPS = ["study", "run folder", "zoo", "artifacts"]


@pytest.mark.parametrize("step", STEPS)
def test_a_full_disk_at_any_step_is_one_line_and_a_rerun_completes(
    step, hwnas_home, tmp_path, monkeypatch, capsys
):
    from hwnas.engine.ledger import RdbLedger

    out, artifacts = tmp_path / "run", hwnas_home / "artifacts"
    args = [*ARGS, "--budget", "12", "--out", str(out)]
    if step == "zoo":
        args.remove("--no-zoo")
    with pytest.MonkeyPatch.context() as full:
        if step == "study":  # the disk fills after 5 trials are written, one a transaction
            from hwnas.engine import loop as engine

            full.setattr(engine, "HOLD_S", 0.0)
            _disk_full_db(full, RdbLedger, "flush", after=5)
        elif step == "run folder":
            _fill_disk(full, lambda p: p.startswith(str(out)))
        elif step == "zoo":
            _fill_disk(full, lambda p: "/.zoo." in p or "/zoo/" in p)
        else:
            _fill_disk(full, lambda p: p.startswith(str(artifacts)))
        code, err = _cli(capsys, *args)
    assert_one_line(code, err, "no space left on the device")
    assert not _leftovers(tmp_path, artifacts)
    # what was written before the disk filled is kept
    assert len(_scored(hwnas_home)) == (5 if step == "study" else 12)
    code, err = _cli(capsys, *args)
    assert code == 0, err
    assert len(_scored(hwnas_home)) == 12
    assert (out / "summary.json").is_file() and (out / "pareto.csv").is_file()
    if step == "zoo":
        assert any((out / "zoo").iterdir())
    uploaded = _study(hwnas_home).user_attrs["artifacts"]
    assert {"summary.json", "pareto.csv", "pareto.png"} <= set(uploaded)
    assert all((artifacts / a["id"]).is_file() for a in uploaded.values())
    assert not _leftovers(out, hwnas_home)


def test_a_full_measurement_store_is_one_line(monkeypatch, capsys):
    from hwnas.store import MeasurementStore

    small = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"
    _disk_full_db(monkeypatch, MeasurementStore, "append", sqlalchemy_error=False)
    code, err = _cli(capsys, "measure", "--device", "cpu-fast", "--arch", small)
    assert_one_line(code, err, "no space left on the device")


# -- temporaries of killed writers -----------------------------------------------------------


def test_temporaries_of_killed_writers_are_removed_by_the_next_writer(tmp_path):
    from hwnas.paths import sweep_temporaries, temporary

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    mine = temporary(tmp_path / "zoo")
    theirs = Path(str(mine).replace(f".{os.getpid()}.", f".{dead.pid}."))
    other_host = tmp_path / f".zoo.elsewhere.{dead.pid}.tmp"
    for folder in (mine, theirs, other_host):
        (folder / "entry").mkdir(parents=True)
    (tmp_path / f".pareto.csv.{theirs.name.split('.')[-3]}.{dead.pid}.tmp").write_text("x")
    removed = sweep_temporaries(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, other_host.name])
    assert len(removed) == 2


def test_a_strategy_that_only_repeats_itself_stops_the_search_with_a_reason(
    tmp_path, monkeypatch
):
    """A budget above what the strategy can find (a small declared space searched at random):
    after REPEATS_IN_A_ROW proposals the study already holds, the search stops and says so,
    instead of asking 20 x budget times."""
    from hwnas.cost_record import CostRecord
    from hwnas.engine import loop as engine
    from hwnas.engine.evaluate import Evaluation
    from hwnas.engine.loop import SearchSettings, run_search
    from hwnas.spaces import get_space

    (tmp_path / "tiny.yaml").write_text(
        "name: tinyfault\ndatasets:\n  digits: {classes: 10, input_shape: [3, 16, 16]}\n"
        "stem:\n  - {block: conv, out: 8, kernel: 3}\nstages:\n  - name: a\n"
        "    out: {choices: [8, 16]}\n    depth: {choices: [1, 2]}\n"
        "    layer: {block: mbconv, kernel: {choices: [3, 5]}, expand: 2}\n"
        "head:\n  - {block: pool}\n"
    )
    space = get_space(str(tmp_path / "tiny.yaml"))
    monkeypatch.setattr(engine, "REPEATS_IN_A_ROW", 60)
    settings = SearchSettings(
        space=space.name, device="pixel3", budget=5000, strategy="random", study="r"
    )

    def evaluate(arch):
        return Evaluation(arch, 50.0, "test", {"latency_ms": CostRecord("latency_ms", 1.0, "test")})

    result = run_search(settings, space, evaluate)
    assert 0 < len(result.records) < 5000
    assert len({r.arch for r in result.records}) == len(result.records)
    assert result.stopped and "60 architectures in a row that the study already holds" in (
        result.stopped
    )
    assert result.trials_total < 20 * 5000


def test_architectures_a_recorded_table_lacks_are_skipped_without_stopping_the_search():
    """The Eagle tables lack the 341 cells whose output ignores the input, the cheapest of the
    space: a sampler drawn to low latency proposed 5 of them in a row and `hwnas search
    --device mobile_cpu_snapdragon_675_kryo_460_int8 --strategy tpe --seed 2` stopped with
    "5 candidates in a row could not be measured". A table's gap says nothing of a device's
    health; the search skips them (failed trials) and goes on."""
    import numpy as np

    from hwnas.devices import get_device
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import MAX_NOISY_IN_A_ROW, SearchSettings, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    device = get_device("mobile_cpu_snapdragon_675_kryo_460_int8")
    space = get_space("nasbench201")
    column = np.asarray(device.column("nasbench201", "latency_ms"), dtype=float)
    lacking = np.flatnonzero(~np.isfinite(column))[: MAX_NOISY_IN_A_ROW + 3]
    held = np.flatnonzero(np.isfinite(column))[:3]
    proposals = [space.arch_at(int(i)) for i in (*lacking, *held)]
    evaluator = TableEvaluator(space, "cifar100", Profiler(device, None), ["latency_ms"])
    settings = SearchSettings(space="nasbench201", device=device.name, budget=3, study="gaps")

    result = run_search(settings, space, evaluator.evaluate, proposals=proposals)

    assert sorted(space.index(space.parse(r.arch)) for r in result.records) == sorted(held)
    assert result.unrecorded_skipped == len(lacking) and result.failed_skipped == 0
    assert [r.costs["latency_ms"].value for r in result.records] == [
        column[space.index(space.parse(r.arch))] for r in result.records
    ]


def test_ctrl_c_after_scoring_keeps_the_trials_latency_constraint(tmp_path, monkeypatch):
    """Ctrl-C after a claimed candidate was scored, before its record was written: the trial
    was made COMPLETE without its system attributes, and so without its latency constraint;
    NSGA-II read the trial over --max-latency as feasible and the resumed search scored other
    architectures than an uninterrupted one (from the 28th on). Now it holds the constraint
    and the resumed search is the uninterrupted one."""
    import numpy as np
    import optuna

    from hwnas.devices import get_device
    from hwnas.engine import loop
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import SearchSettings, open_storage, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    device = get_device("raspi4")
    ev = TableEvaluator(space, "cifar100", Profiler(device, None), ["latency_ms"])
    column = np.asarray(device.column("nasbench201", "latency_ms"))
    limit = float(np.quantile(column[np.isfinite(column)], 0.3))

    def settings(study):
        return SearchSettings(space="nasbench201", device="raspi4", budget=40, study=study,
                              strategy="nsga2", seed=1, max_latency=limit)  # fmt: skip

    reference = run_search(settings("ref"), space, ev.evaluate, open_storage(
        f"sqlite:///{tmp_path / 'ref.db'}"))  # fmt: skip
    over = [i for i, r in enumerate(reference.records)
            if r.costs["latency_ms"].value > limit and i >= 3]  # fmt: skip
    finish, calls, stop = loop._finish, [0], over[0] + 1

    def interrupted(*args, **kwargs):
        calls[0] += 1
        if calls[0] == stop:  # scored, not yet written: where a SIGINT would land
            raise KeyboardInterrupt
        return finish(*args, **kwargs)

    url = f"sqlite:///{tmp_path / 's.db'}"
    monkeypatch.setattr(loop, "_finish", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_search(settings("s"), space, ev.evaluate, open_storage(url))
    monkeypatch.setattr(loop, "_finish", finish)
    study = optuna.load_study(study_name="s", storage=url)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == stop
    assert all(any(k.startswith("constraints") for k in t.system_attrs) for t in done)
    result = run_search(settings("s"), space, ev.evaluate, open_storage(url))
    assert [r.arch for r in result.records] == [r.arch for r in reference.records]
