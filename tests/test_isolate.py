"""A native step run by hwnas.isolate: its result or error comes back, and a crash of the child
process (a real SIGSEGV) becomes a one-line NativeCrashError naming the signal and versions."""

from __future__ import annotations

import os
import sys

import pytest

from hwnas.errors import HwnasError, NativeCrashError
from hwnas.isolate import run_isolated

STEPS = """
import ctypes, os, sys
from hwnas.errors import HwnasError

def add(a, b):
    print("child output goes to the log")
    return {"sum": a + b, "pid": os.getpid()}

def segfault():
    print("about to crash", flush=True)
    ctypes.string_at(0)

def refuse(text):
    raise HwnasError(text)

class Odd(Exception):
    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")

def odd():
    raise Odd(1, 2)

def library_error():
    raise RuntimeError("Library binary was created using {cuda} but a loader of that name is "
                       "not registered\\nstack trace ...")

def sleep_long(path):
    import time
    open(path, "w").write(str(os.getpid()))
    time.sleep(60)

def spawn(path, then_sleep):
    import subprocess, time
    worker = subprocess.Popen(["sleep", "300"])  # a library's worker process
    open(path, "w").write(str(worker.pid))
    if then_sleep:
        time.sleep(60)
    return worker.pid

def quiet_exit():
    sys.stdout.flush()
    os._exit(3)
"""


@pytest.fixture
def steps(tmp_path, monkeypatch):
    (tmp_path / "steps_mod.py").write_text(STEPS)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    return tmp_path


def test_result_comes_back_from_a_child_process(steps):
    import os

    out = run_isolated("steps_mod:add", 2, 3, what="adding")
    assert out["sum"] == 5 and out["pid"] != os.getpid()


def test_a_segfault_becomes_an_error_naming_signal_versions_and_log(steps):
    log = steps / "logs" / "crash.log"
    with pytest.raises(NativeCrashError) as info:
        run_isolated(
            "steps_mod:segfault", what="TVM build of model x", libraries=["numpy"], log=log
        )
    message = str(info.value)
    assert "TVM build of model x crashed with SIGSEGV" in message
    assert "numpy 2." in message and str(log) in message and "\n" not in message
    assert "about to crash" in log.read_text()  # the child's output is kept for the report
    assert isinstance(info.value, HwnasError)  # the CLI prints it as one line, exit 2


def test_a_child_that_exits_without_a_result_is_a_crash(steps):
    with pytest.raises(NativeCrashError, match="exited with status 3 and no result"):
        run_isolated("steps_mod:quiet_exit", what="step", libraries=["not-a-dist"])


def test_errors_raised_by_the_step_come_back_as_themselves(steps):
    with pytest.raises(HwnasError, match="^bad model$") as info:
        run_isolated("steps_mod:refuse", "bad model", what="step")
    assert not isinstance(info.value, NativeCrashError)
    # a library's own exception (TVM's RuntimeError: a traceback from `devices check`, and a
    # search stopped) is one line naming the step, a failed candidate in a search
    with pytest.raises(NativeCrashError, match="IsolatedStepError: Odd: 1/2"):
        run_isolated("steps_mod:odd", what="step")
    with pytest.raises(NativeCrashError) as info:
        run_isolated("steps_mod:library_error", what="TVM build of model x")
    message = str(info.value)
    assert message.startswith("TVM build of model x failed: RuntimeError: Library binary")
    assert "\n" not in message and "log: " in message


def test_log_of_a_successful_step_is_removed_unless_kept(steps):
    log = steps / "ok.log"
    run_isolated("steps_mod:add", 1, 1, what="adding", log=log)
    assert not log.exists()
    run_isolated("steps_mod:add", 1, 1, what="adding", log=log, keep_log=True)
    assert "child output goes to the log" in log.read_text()


def _gone(pid: int, within: float = 10.0) -> bool:
    """Whether process ``pid`` ends within ``within`` seconds (killed otherwise)."""
    import time

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie that no init reaps (some containers) is gone too
            if open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except OSError:
            pass
        time.sleep(0.1)
    os.kill(pid, 9)
    return False


def _kill_parent_during(step: str, pidfile, *args) -> int:
    """Start a parent process running ``run_isolated(step, pidfile, *args)``, SIGKILL it once
    the step has written a pid to ``pidfile``; returns that pid."""
    import signal
    import subprocess
    import time

    call = ", ".join(repr(a) for a in (step, str(pidfile), *args))
    code = f"from hwnas.isolate import run_isolated; run_isolated({call}, what='x')"
    parent = subprocess.Popen([sys.executable, "-c", code], env=os.environ.copy())
    deadline = time.monotonic() + 60
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline and parent.poll() is None
        time.sleep(0.1)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    return int(pidfile.read_text())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_step_dies_with_its_killed_parent(steps):
    """A search killed during a TVM build left the build child running for minutes (under
    PID 1, at full CPU), disturbing the resumed search's timings."""
    child = _kill_parent_during("steps_mod:sleep_long", steps / "child.pid")
    assert _gone(child), "the step outlived its parent"


@pytest.mark.skipif(os.name != "posix", reason="process groups are POSIX's")
def test_processes_a_step_started_end_with_the_step(steps):
    """A process the step started (TVM's builder and runner pools) ends with the step: when it
    returns, when it is stopped after its timeout, and when the parent is killed. (Before: they
    outlived it, still compiling.)"""
    pidfile = steps / "worker.pid"
    assert _gone(run_isolated("steps_mod:spawn", str(pidfile), False, what="x"))
    pidfile.unlink()
    with pytest.raises(NativeCrashError, match="did not finish in 2 s"):
        run_isolated("steps_mod:spawn", str(pidfile), True, what="x", timeout=2)
    assert _gone(int(pidfile.read_text()))
    pidfile.unlink()
    assert _gone(_kill_parent_during("steps_mod:spawn", pidfile, True))
