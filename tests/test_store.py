"""Measurement store: taken once, reused, safe under concurrent workers, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hwnas.devices.base import Measurement
from hwnas.errors import HwnasError
from hwnas.store import MeasurementStore


def _m(value: float, model_hash: str = "abc", device: str = "cpu") -> Measurement:
    return Measurement(
        device=device,
        runtime="ort",
        metric="latency_ms",
        model_hash=model_hash,
        label="arch",
        batch_size=1,
        input_shape=(1, 3, 32, 32),
        value=value,
        samples=(value, value + 0.1),
        cv=0.01,
        iqr=0.1,
        versions={"onnxruntime": "x"},
        source="measured:cpu:onnxruntime",
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path):
    """Where a store lives: a SQLite file, or a fresh database on a PostgreSQL server."""
    if request.param == "sqlite":
        return tmp_path / "m.db"
    return request.getfixturevalue("postgres_url")


def test_append_lookup_roundtrip_and_first_measurement_wins(location):
    with MeasurementStore(location) as store:
        assert store.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 32, 32)) is None
        assert store.append(_m(2.0)) is True
        assert store.append(_m(3.0)) is False  # same key: kept as it was
        got = store.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 32, 32))
        assert (
            got.value == 2.0 and got.samples == (2.0, 2.1) and got.versions == {"onnxruntime": "x"}
        )
        assert store.lookup("cpu", "ort", "latency_ms", "abc", (8, 3, 32, 32)) is None
        store.append(_m(1.0, model_hash="def", device="other"))
        assert store.counts() == {"cpu": 1, "other": 1}
    with MeasurementStore(location) as store:  # persisted
        assert [m.value for m in store.measurements()] == [2.0, 1.0]


def test_unreadable_store_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.db"
    bad.write_text("this is not sqlite " * 100)
    with pytest.raises(HwnasError, match="measurement store .*bad.db is not an SQLite database"):
        MeasurementStore(bad)
    folder = tmp_path / "store"
    folder.mkdir()
    with pytest.raises(HwnasError, match="is a folder, not an SQLite database"):
        MeasurementStore(folder)  # a folder
    # nothing made beside it (a `store.hwnas-lock` was left in the folder above)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.db", "bad.db.hwnas-lock", "store"]


WORKER = textwrap.dedent(
    """
    import json, sys
    from hwnas.devices import get_device
    from hwnas.measure import Profiler, arch_workload
    from hwnas.spaces import get_space
    from hwnas.store import MeasurementStore

    space = get_space("nasbench201")
    profiler = Profiler(get_device("cpu-fast"), MeasurementStore(sys.argv[1]))
    for i in (1, 2, 3, 4):
        profiler.measure(arch_workload(space, space.arch_at(i), "cifar10"))
    print(json.dumps(profiler.counts.__dict__))
    """
)


def test_concurrent_workers_measure_each_model_once(location):
    path = location
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(path)], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    counts = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(c["taken"] for c in counts) == 4
    assert sum(c["reused"] for c in counts) == 8
    with MeasurementStore(path) as store:
        assert store.counts() == {"cpu-fast": 4}


OLD_SCHEMA = """
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY, device TEXT NOT NULL, runtime TEXT NOT NULL, metric TEXT NOT NULL,
    model_hash TEXT NOT NULL, label TEXT NOT NULL, batch_size INTEGER NOT NULL,
    input_shape TEXT NOT NULL, value REAL NOT NULL, samples TEXT NOT NULL, cv REAL NOT NULL,
    iqr REAL NOT NULL, versions TEXT NOT NULL, measured_at REAL NOT NULL, source TEXT NOT NULL,
    UNIQUE (device, runtime, metric, model_hash, batch_size, input_shape)
);
INSERT INTO measurements (device, runtime, metric, model_hash, label, batch_size, input_shape,
    value, samples, cv, iqr, versions, measured_at, source)
VALUES ('cpu', 'ort', 'latency_ms', 'abc', 'arch', 1, '1x3x32x32', 2.5, '[2.5]', 0.01, 0.0,
    '{}', 0.0, 'measured:cpu:onnxruntime');
"""


def test_store_written_by_older_hwnas_is_migrated_in_place(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as db:
        db.executescript(OLD_SCHEMA)
    with MeasurementStore(path) as store:
        old = store.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 32, 32))
        assert old.value == 2.5 and old.flagged is False and old.extra == {}
        assert store.append(_m(3.0, model_hash="def")) is True
    with sqlite3.connect(path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(measurements)")}
    assert {"flagged", "extra"} <= columns


def test_flagged_measurement_is_replaced_by_the_next_one(location):
    from dataclasses import replace

    with MeasurementStore(location) as store:
        noisy = replace(_m(9.0), cv=0.2, flagged=True, extra={"rounds": 12})
        assert store.append(noisy) is True
        got = store.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 32, 32))
        assert got.flagged and got.extra == {"rounds": 12}
        assert store.append(_m(2.0)) is True  # replaces the flagged row
        assert store.append(_m(5.0)) is False  # an unflagged one is kept
        got = store.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 32, 32))
        assert got.value == 2.0 and not got.flagged
        assert store.counts() == {"cpu": 1}


def test_a_flagged_mark_other_than_1_is_replaced_too(location):
    """A row another writer marked flagged with 2 (or, in SQLite, 'yes'): it reads as flagged,
    so it must be replaced by the next measurement like one marked 1. (Before: only flagged =
    1 was replaced; every run measured the model again and never kept the result.)"""
    with MeasurementStore(location) as store:
        for mark in (2, -1) if store._pg else (2, -1, "yes"):
            store.append(_m(9.0))
            store._execute("UPDATE measurements SET flagged=? WHERE model_hash='abc'", (mark,))
            assert store.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 32, 32)).flagged
            assert store.append(_m(2.0)) is True
            got = store.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 32, 32))
            assert got.value == 2.0 and not got.flagged
            store._execute("DELETE FROM measurements")


def test_a_store_table_another_program_changed_is_a_one_line_error(location):
    """Another program made the ``value`` column text: the validity SQL's comparison failed
    on PostgreSQL with the driver's traceback. Now one line naming the store."""
    with MeasurementStore(location) as store:
        store.append(_m(1.0))
        if store._pg:
            store._execute("ALTER TABLE measurements ALTER COLUMN value TYPE text")
            store._execute("UPDATE measurements SET value='abc'")
        else:
            store._execute("ALTER TABLE measurements RENAME COLUMN cv TO cv_old")
        with pytest.raises(HwnasError) as info:
            store.append(_m(2.0, "other"))
        assert "\n" not in str(info.value)
        assert str(info.value).startswith(f"measurement store {store.path} is not usable: ")


def test_a_second_opening_in_one_process_keeps_the_first_ones_view_of_other_writers(tmp_path):
    """A process that opens an SQLite study storage or store a second time (``hwnas.search``
    then ``hwnas.zoo.verify`` from Python) must go on seeing what other processes write. The
    header check read the file with open() and close(), which released every POSIX lock of the
    process on it, SQLite's shared lock included; a worker closing its connection then found
    the file unused, checkpointed and deleted the write-ahead log, and the first connection
    read a stale database: the other worker's study and measurement were missing."""
    import optuna

    from hwnas.engine.loop import open_storage

    url = f"sqlite:///{tmp_path / 'studies.db'}"
    first = open_storage(url)
    optuna.create_study(storage=first, study_name="mine")
    store = MeasurementStore(tmp_path / "m.db")
    store.append(_m(1.0, "mine"))
    open_storage(url)  # the second openings, as a later command of the same process makes
    MeasurementStore(tmp_path / "m.db").close()
    other = textwrap.dedent(
        f"""
        import optuna, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_store import _m
        from hwnas.engine.loop import open_storage
        from hwnas.store import MeasurementStore
        optuna.create_study(storage=open_storage({url!r}), study_name="theirs")
        with MeasurementStore({str(tmp_path / 'm.db')!r}) as store:
            store.append(_m(2.0, "theirs"))
        """
    )
    r = subprocess.run([sys.executable, "-c", other], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    studies = optuna.get_all_study_summaries(first, include_best_trial=False)
    assert sorted(s.study_name for s in studies) == ["mine", "theirs"]
    assert sorted(m.model_hash for m in store.measurements()) == ["mine", "theirs"]


OTHER_MACHINE = """
import socket, sys, time
from pathlib import Path
from hwnas.devices.local import LocalCpuDevice

socket.gethostname = lambda: "another-machine"  # a worker on another machine
measure_all = LocalCpuDevice.measure_all

def slow(self, workload):  # measuring its own CPU for a long time, the device lock held
    Path(sys.argv[1]).write_text("measuring")
    time.sleep(300)
    return measure_all(self, workload)

LocalCpuDevice.measure_all = slow
from hwnas.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_machine_measuring_its_own_cpu_never_waits_for_another_machine_s(tmp_path, postgres_url):
    """With a PostgreSQL --store, the device lock was one server-wide advisory lock per device
    name: every machine measuring its own `cpu` waited for every other machine's measurement.
    A local device's lock names the machine now (a board the team shares keeps one lock)."""
    import os
    import time

    from helpers import hwnas_cli

    marker = tmp_path / "measuring"
    cmd = ["measure", "--device", "cpu-fast", "--dataset", "cifar10", "--store", postgres_url]
    other = subprocess.Popen(
        [sys.executable, "-c", OTHER_MACHINE, str(marker), *cmd, "--arch", "1"],
        env={**os.environ}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not marker.exists() and other.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), other.communicate()
        r = hwnas_cli(*cmd, "--arch", "2", timeout=90)  # this machine: waits for no one
        assert r.returncode == 0 and "1 measured" in r.stdout, r.stderr
        assert other.poll() is None  # the other machine is still measuring
    finally:
        other.kill()
        other.communicate()
    from hwnas.devices import get_device

    assert get_device("cpu-fast").on_this_machine


def test_a_store_whose_server_went_away_is_a_run_stopped_part_way_not_a_mistake(postgres_url):
    """A PostgreSQL store losing its server mid-command said so with exit status 2, a mistake
    in the input; it is status 1 now (the same command resumes), in one line."""
    import psycopg

    from hwnas.errors import EXIT_FAILED, LostConnectionError

    name = postgres_url.rsplit("/", 1)[1]
    with MeasurementStore(postgres_url) as store:
        store.append(_m(2.0))
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))  # fmt: skip
        with pytest.raises(LostConnectionError) as raised:
            store.counts()
    assert raised.value.exit_status == EXIT_FAILED
    assert str(raised.value).startswith(f"measurement store {postgres_url}: lost the connection")


@pytest.mark.parametrize(
    ("first", "second", "waits"),
    [
        (("box-a", None), ("box-a", None), True),  # one machine: one CPU, one at a time
        (("pod-1", "node-7"), ("pod-2", "node-7"), True),  # two containers on one machine
        (("pod-1", "node-7"), ("pod-2", "node-8"), False),  # containers on two machines
        (("box-a", None), ("box-b", None), False),  # two machines
    ],
)
def test_workers_on_one_machine_measure_its_cpu_one_at_a_time(
    postgres_url, monkeypatch, first, second, waits
):
    """The lock on a machine's own device was named by its host name: containers or pods on
    one machine have a host name each and measured its shared CPU at once. HWNAS_MACHINE names
    the physical machine where it is set; the host name otherwise."""
    import socket
    import threading

    def be(host, machine):
        monkeypatch.setattr(socket, "gethostname", lambda: host)
        if machine is None:
            monkeypatch.delenv("HWNAS_MACHINE", raising=False)
        else:
            monkeypatch.setenv("HWNAS_MACHINE", machine)

    taken = threading.Event()
    with MeasurementStore(postgres_url) as store:
        be(*first)
        with store.device_lock("cpu", this_machine=True):
            be(*second)

            def other():
                with store.device_lock("cpu", this_machine=True):
                    taken.set()

            worker = threading.Thread(target=other, daemon=True)
            worker.start()
            assert taken.wait(3) is not waits
        worker.join(30)
        assert taken.is_set() and not worker.is_alive()
