"""Shared fixtures: every test gets its own hwnas home, and a fast live-CPU device."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# One OpenBLAS thread in the test processes and every process they start (set before numpy is
# imported: OpenBLAS reads it once, when it loads). The suite runs a test per core, and the
# frontier strategy's small linear solves (numpy, hwnas/engine/frontier.py) spin a BLAS thread
# per core on top of it: on a 2-core machine a pixel3 search of 60 took 4-8 s instead of 3,
# tests/engine/test_frontier.py 32 s of CPU instead of 5. torch already runs the tests' and
# the product's networks on one thread. A value set by whoever runs the suite is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

FAST_CPU_PROFILE = """\
name: cpu-fast
kind: local
class: cpu
description: this machine's CPU with a short timing protocol (tests only)
runtime: ort
timing: {warmup: 3, rounds: 3, calls_per_round: 5, threads: 1, max_cv: none,
         max_wait_share: 1000000}
tvm: {trials_per_task: 0}
"""


@pytest.fixture(autouse=True)
def hwnas_home(tmp_path_factory, monkeypatch) -> Path:
    """A fresh HWNAS_HOME (store, studies, user profiles) for each test.

    ``cpu-fast`` never flags a measurement: ``max_cv: none`` sets no CV limit (the CV of 3
    round medians can reach sqrt(2)), so tests that count measurements do not depend on the
    machine's load (on a loaded 2-core machine a 1.0 limit was crossed now and then, and a
    search skipped a noisy candidate and measured one more). Flagging has its own tests
    (tests/test_measure.py, tests/runtimes/test_timing.py)."""
    home = tmp_path_factory.mktemp("hwnas_home")
    monkeypatch.setenv("HWNAS_HOME", str(home))
    profiles = home / "devices"
    profiles.mkdir()
    (profiles / "cpu-fast.yaml").write_text(FAST_CPU_PROFILE)
    from hwnas import spaces
    from hwnas.devices import reload_profiles

    reload_profiles()
    files = set(spaces._FILES)
    yield home
    reload_profiles()
    # a space file a test wrote (in its tmp folder) is forgotten: another test's file of the
    # same name (`name: tiny`) was refused in the same worker as "the name of the space in
    # another file", depending on which tests the worker had run before
    temp = str(tmp_path_factory.getbasetemp())
    for key in set(spaces._FILES) - files:
        if key.startswith(temp):
            space = spaces._FILES.pop(key)
            for name in [n for n, s in spaces._SPACES.items() if s is space]:
                del spaces._SPACES[name]


_NEXT = pytest.StashKey()
"""The item a worker runs after this one (pytest's ``nextitem``), for :func:`_alone_when_marked`."""

_KEPT: list = []
"""The lock file an ``alone`` test kept locked for the ``alone`` test after it (or empty)."""


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_NEXT] = nextitem  # returns None: pytest runs the item as usual


@pytest.fixture(autouse=True)
def _alone_when_marked(request, tmp_path_factory):
    """Tests marked ``alone`` run while no other test of the session runs.

    ``pytest -n 2`` (pytest-xdist) runs two tests side by side. Load from the other one only
    adds time, and more to a whole network than to a kernel of microseconds, and it hits the
    memory bandwidth and caches they share: a test that compares a kernel-level prediction with
    a measurement missed by 17-22% in all 5 attempts of one CI run while the test beside it
    ran (the same commit passed the next run; alone here it is 6-10% off). Every test holds a
    shared lock on one file of the session; an ``alone`` test takes it exclusively, so it
    waits for the test running beside it to end and the other worker waits for it. An
    ``alone`` test whose worker runs another ``alone`` test next keeps the lock for it: a chain
    of them waits once for the test beside it (each waited, up to half a minute, for the
    test the other worker had started in between). Without xdist (one process) nothing runs
    beside a test and no lock is taken."""
    import fcntl
    import os

    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        yield
        return
    alone = request.node.get_closest_marker("alone") is not None
    mode = fcntl.LOCK_EX if alone else fcntl.LOCK_SH
    if _KEPT:  # kept by the alone test before; a lock is converted on its own file
        lock = _KEPT.pop()
    else:
        # every worker's base temp is a folder of the run's own: its parent is shared by the run
        lock = open(tmp_path_factory.getbasetemp().parent / "hwnas-alone.lock", "a")
    fcntl.flock(lock, mode)
    try:
        yield
    finally:
        following = request.node.stash.get(_NEXT, None)
        if alone and following is not None and following.get_closest_marker("alone"):
            # if xdist gives that item to the other worker after all, the test this worker
            # runs next converts the lock to its own mode
            _KEPT.append(lock)
        else:
            fcntl.flock(lock, fcntl.LOCK_UN)
            lock.close()


NATIVE_LIBRARIES = (
    "torch", "numpy", "scipy", "scikit-learn", "onnx", "onnxruntime", "protobuf", "matplotlib",
    "pillow", "pyyaml", "moocore", "cffi", "apache-tvm", "apache-tvm-ffi", "xgboost-cpu",
    "psutil", "tornado", "h5py", "ml_dtypes",
)  # fmt: skip


def pytest_terminal_summary(terminalreporter):
    """Name the native libraries the suite ran with, so that a run on a new machine can be
    compared with the pins in pyproject.toml when a release breaks something."""
    from hwnas.isolate import distribution_versions

    terminalreporter.write_line(f"native libraries: {distribution_versions(NATIVE_LIBRARIES)}")


def _postgres_bin() -> Path | None:
    """Folder of PostgreSQL's server programs (initdb, pg_ctl), or None."""
    import glob
    import shutil

    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(candidates[-1]).parent if candidates else None


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server of this machine's installation, on 127.0.0.1 and a free port, with
    trust authentication, run as the ``postgres`` user when the tests run as root (the server
    refuses root); stopped after the session. Yields its base URL ``postgresql://postgres@
    127.0.0.1:PORT``. Skips where PostgreSQL is not installed, but fails under CI (where
    ``.ci/run`` installs it)."""
    import os
    import shutil
    import socket
    import subprocess

    binaries = _postgres_bin()
    if binaries is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL server programs not found (.ci/run installs them)")
        pytest.skip("PostgreSQL server programs not installed")
    import tempfile

    # not under pytest's tmp folders: those are private to root, and the server runs as postgres
    folder = Path(tempfile.mkdtemp(prefix="hwnas-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = folder / "data"
    run = dict(check=True, capture_output=True, text=True, timeout=120)
    subprocess.run([*as_user, str(binaries / "initdb"), "-D", str(data), "-A", "trust",
                    "-U", "postgres"], **run)  # fmt: skip
    options = f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c max_connections=200"
    subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-o", options,
                    "-l", str(folder / "log"), "-w", "start"], **run)  # fmt: skip
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*as_user, str(binaries / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], capture_output=True, timeout=120)  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server, request):
    """A fresh, empty database on the test server for this test: ``postgresql://.../NAME``."""
    import re

    import psycopg

    name = "t_" + re.sub(r"[^a-z0-9]", "_", request.node.name.lower())[:50]
    with psycopg.connect(f"{postgres_server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{postgres_server}/{name}"
