"""The processes of a supernet search across processes, as a user starts them (``hwnas search
--nproc 2``, ``torchrun``, or by hand with torchrun's variables) and stops them: a process that
fails its checks, never arrives, is killed, or whose launcher is killed or told to stop ends the
job with one line from the process that can say it, never a hang or a traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import hwnas_cli

TORCHRUN = str(Path(sys.executable).with_name("torchrun"))

SEARCH = ["search", "--strategy", "gdas", "--device", "pixel3", "--finetune-epochs", "0",
          "--no-zoo", "--set", "limit=300", "--set", "channels=4", "--set", "cost=flops",
          "--batch-size", "64"]  # fmt: skip


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _errors(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


def _start(args: list[str], env: dict[str, str], err) -> subprocess.Popen:
    return subprocess.Popen(
        args, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=err,
        start_new_session=True,  # the test can end what is left of it
    )  # fmt: skip


def _end(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _children(pid: int) -> list[int]:
    found = []
    for d in os.listdir("/proc"):
        try:
            stat = Path(f"/proc/{d}/stat").read_text()
        except OSError:
            continue
        if d.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(d))
    return sorted(found)


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except OSError:
        return False


@pytest.mark.slow
def test_a_process_failing_its_checks_on_another_machine_is_said_on_both(tmp_path):
    """Two machines (here two torchrun nodes on one): node 1's --data does not exist there.
    Rank 0 waited for it in the process group for up to 2 hours, and node 1 said nothing but
    torchrun's dump; now node 0 says which process failed and why, node 1 says it too."""
    base = [TORCHRUN, "--nnodes", "2", "--master_addr", "127.0.0.1", "--master_port",
            str(_port()), "--nproc_per_node", "1", "--node_rank"]  # fmt: skip
    procs, errs = [], []
    for node, data in (("0", "digits"), ("1", "/nonexistent")):
        err = open(tmp_path / f"node{node}.err", "w+")  # noqa: SIM115 - read after the wait
        errs.append(err)
        home = tmp_path / f"home{node}"  # each machine its own hwnas home
        args = [*base, node, "-m", "hwnas", *SEARCH, "--epochs", "1", "--data", data,
                "--out", str(tmp_path / f"run{node}")]  # fmt: skip
        procs.append(_start(args, {"HWNAS_HOME": str(home)}, err))
    try:
        for p in procs:
            p.wait(timeout=90)
    finally:
        _end(*procs)
    node0, node1 = (Path(e.name).read_text() for e in errs)
    assert _errors(node0) == [
        "error: process 1 of 2 failed its checks: --data '/nonexistent' is neither 'digits' "
        "nor an existing folder (CIFAR python-pickle folder or class-per-folder images)"
    ], node0
    assert _errors(node1) == [
        "error: process 1 of 2: --data '/nonexistent' is neither 'digits' nor an existing "
        "folder (CIFAR python-pickle folder or class-per-folder images)"
    ], node1
    assert "]: Traceback" not in node0 + node1  # a process's (torchrun's own stays)
    assert all(p.returncode != 0 for p in procs)


def test_a_batch_the_torchrun_processes_cannot_share_is_one_line(tmp_path):
    """`torchrun --nproc_per_node 2` with --batch-size 63: rank 1 stopped silently and torchrun
    stopped rank 0 before it printed; no error line at all."""
    r = subprocess.run(
        [TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "hwnas", *SEARCH[:-1], "63",
         "--epochs", "1", "--data", "digits", "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode != 0
    assert _errors(r.stderr) == [
        "error: --batch-size 63 is not a multiple of the 2 processes (each takes an equal "
        "shard of every batch)"
    ], r.stderr


API_SCRIPT = """\
import os, sys, hwnas
run = hwnas.search(device="pixel3", strategy="gdas", data="digits", epochs=1, batch_size=64,
                   finetune_epochs=0, zoo=False, out=sys.argv[1],
                   settings={"limit": 300, "channels": 4, "cost": "flops"})
print("rank", os.environ["RANK"], "best", None if run is None else run.best["arch"])
"""


def test_hwnas_search_under_torchrun_returns_none_on_the_other_ranks(tmp_path):
    """`torchrun ... script.py` calling hwnas.search (docs/api.md's way from Python): rank 1
    raised HwnasError ("not rank 0") after training, torchrun took that for a failure and
    sent SIGTERM to rank 0 while it derived and wrote the run (no summary.json, exit 1). Now
    the other ranks return None, as `torchrun -m hwnas search` returns quietly there."""
    (tmp_path / "job.py").write_text(API_SCRIPT)
    r = subprocess.run(
        [TORCHRUN, "--standalone", "--nproc_per_node", "2", str(tmp_path / "job.py"),
         str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    said = sorted(line for line in r.stdout.splitlines() if line.startswith("rank "))
    assert said[1] == "rank 1 best None" and said[0].startswith("rank 0 best |"), r.stdout
    assert (tmp_path / "run" / "summary.json").is_file()


def test_processes_started_by_hand_need_an_address_and_their_peers(tmp_path, hwnas_home):
    """WORLD_SIZE and RANK set by hand: without MASTER_ADDR, a 57-line traceback after the
    study storage was created; with it and no other process, a silent hang. Now a refusal
    before any work, and a bounded wait that names the process that never came."""
    args = [*SEARCH, "--epochs", "1", "--data", "digits", "--out", str(tmp_path / "run")]
    r = hwnas_cli(*args, env={"WORLD_SIZE": "2", "RANK": "0"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "error: WORLD_SIZE 2 needs MASTER_ADDR and MASTER_PORT: where process 0 meets the "
        "others (torchrun sets them; by hand, give MASTER_ADDR and MASTER_PORT to every "
        "process)"
    ]
    made = {p.name for p in hwnas_home.iterdir()} - {"devices"}  # the tests' own profile
    assert not made  # no study storage, no measurement store
    port = str(_port())
    env = {"WORLD_SIZE": "2", "RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
           "HWNAS_RENDEZVOUS_S": "2"}  # fmt: skip
    r = hwnas_cli(*args, env=env, timeout=60)
    assert r.returncode == 1
    assert f"waiting for the 2 processes at 127.0.0.1:{port} (up to 2 s)" in r.stderr
    assert _errors(r.stderr) == [
        f"error: process 1 of 2 did not arrive at 127.0.0.1:{port} within 2 s "
        "(HWNAS_RENDEZVOUS_S sets the wait; each process's own output, or its machine's, "
        "says why)"
    ], r.stderr
    assert "Traceback" not in r.stderr


def test_process_0_failing_its_checks_stops_the_processes_started_by_hand(tmp_path):
    """Processes started by hand (MASTER_ADDR and MASTER_PORT set, no torchrun) where process 0
    has a bad --data: it stopped before hosting the meeting, and process 1 waited for it the
    whole meeting's wait ("nothing answered", status 1). Now both stop with status 2 at once,
    and process 0 alone says why."""
    env = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_port()),
           "HWNAS_RENDEZVOUS_S": "30", "HWNAS_HOME": str(tmp_path / "home")}  # fmt: skip
    procs, errs = [], []
    for rank, data in (("0", "/nonexistent"), ("1", "digits")):
        err = open(tmp_path / f"rank{rank}.err", "w+")  # noqa: SIM115 - read after the wait
        errs.append(err)
        args = [sys.executable, "-m", "hwnas", *SEARCH, "--epochs", "1", "--data", data,
                "--out", str(tmp_path / "run")]  # fmt: skip
        procs.append(_start(args, {**env, "RANK": rank}, err))
    started = time.monotonic()
    try:
        for p in procs:
            p.wait(timeout=60)
    finally:
        _end(*procs)
    took = time.monotonic() - started
    rank0, rank1 = (Path(e.name).read_text() for e in errs)
    assert [p.returncode for p in procs] == [2, 2], rank0 + rank1
    assert _errors(rank0) == [
        "error: --data '/nonexistent' is neither 'digits' nor an existing folder (CIFAR "
        "python-pickle folder or class-per-folder images)"
    ], rank0
    assert rank1 == "", rank1
    assert took < 25  # not the meeting's 30 s wait


def test_torchrun_variables_and_parse_errors_are_said_once_per_machine(tmp_path):
    """A LOCAL_RANK out of range is named as such (it was "RANK 0 is outside WORLD_SIZE 2");
    a mistyped device under torchrun is said by the first process of each machine, not by
    every one of them."""
    env = {"WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    r = hwnas_cli(*SEARCH, "--data", "digits", env={**env, "LOCAL_RANK": "-1"})
    assert r.returncode == 2
    assert r.stderr.strip() == "error: LOCAL_RANK must be 0 or more, got -1 (it is set by torchrun)"
    typo = ["search", "--device", "pixle3", "--strategy", "gdas"]
    first = hwnas_cli(*typo, env={**env, "RANK": "0", "LOCAL_RANK": "0"})
    other = hwnas_cli(*typo, env={**env, "RANK": "1", "LOCAL_RANK": "1"})
    assert first.returncode == other.returncode == 2
    assert len(_errors(first.stderr)) == 1 and "unknown device 'pixle3'" in first.stderr
    assert other.stderr == ""


def test_other_commands_under_torchrun_variables_say_their_errors():
    """A command other than `hwnas search` with WORLD_SIZE set and LOCAL_RANK above 0 (run by
    a torchrun worker, or on a SLURM or Kubeflow node) exited 2 without a word."""
    env = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1"}
    verify = hwnas_cli("zoo", "verify", "/nonexistent", env=env)
    assert verify.returncode == 2
    assert _errors(verify.stderr) == ["error: zoo folder not found: /nonexistent"]
    predict = hwnas_cli("predict", "--device", "pixle3", "--onnx", "/nonexistent.onnx", env=env)
    assert predict.returncode == 2
    assert len(_errors(predict.stderr)) == 1, predict.stderr


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["kill a rank", "terminate the launcher"])
def test_a_job_stopped_from_outside_ends_whole_with_one_line(tmp_path, stop):
    """`hwnas search --nproc 2` stopped during training:

    - a rank killed: the survivor printed a 60-line gloo traceback, the launcher named the
      wrong process ("process 0 ... its output is above") and exit status 2 (a user error);
      now one line naming the killed one and status 1;
    - the launcher terminated (SIGTERM, `timeout`): exit 130 without a word; now the
      interrupted line, as after Ctrl-C.

    (The launcher killed outright: the next test, on the mechanism every rank sets up.)"""
    err = open(tmp_path / "err", "w+")  # noqa: SIM115 - read after the wait
    args = [sys.executable, "-m", "hwnas", *SEARCH, "--epochs", "30", "--data", "digits",
            "--nproc", "2", "--out", str(tmp_path / "run")]  # fmt: skip
    launcher = _start(args, {}, err)
    ranks: list[int] = []
    try:
        deadline = time.monotonic() + 90
        while "epoch 1/30" not in Path(err.name).read_text():  # training is under way
            assert launcher.poll() is None and time.monotonic() < deadline, err.read()
            time.sleep(0.2)
        ranks = _children(launcher.pid)
        assert len(ranks) == 2
        if stop == "kill a rank":
            os.kill(ranks[1], signal.SIGKILL)
        else:
            os.kill(launcher.pid, signal.SIGTERM)
        code = launcher.wait(timeout=60)
        deadline = time.monotonic() + 10
        while any(_alive(r) for r in ranks) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = [r for r in ranks if _alive(r)]
    finally:
        _end(launcher)
        for r in ranks:
            if _alive(r):
                os.kill(r, signal.SIGKILL)
    text = Path(err.name).read_text()
    assert not left, f"ranks {left} outlived their launcher"
    assert "Traceback" not in text, text
    if stop == "kill a rank":
        assert code == 1, text
        assert _errors(text) == [
            "error: process 1 of 2 was killed (SIGKILL); run the same command again to resume "
            "from the last checkpoint"
        ], text
    elif stop == "terminate the launcher":
        assert code == 130, text
        assert not _errors(text) and text.count("interrupted: ") == 1, text


RANK = """\
import time
from hwnas import distributed
distributed.guard()  # as a rank of `hwnas search --nproc` does first
print("guarded", flush=True)
time.sleep(120)
"""

LAUNCHER = """\
import os, subprocess, sys
env = {**os.environ, "HWNAS_LAUNCHER": str(os.getpid())}  # distributed.LAUNCHER_ENV
rank = subprocess.Popen([sys.executable, "-c", sys.argv[1]], env=env)
print(rank.pid, flush=True)
rank.wait()
"""


def test_a_rank_dies_with_its_launcher_killed_outright():
    """`hwnas search --nproc 2` killed with kill -9: both ranks trained on to the end, beside
    the rerun. Each rank now asks Linux to kill it with its launcher (distributed.guard,
    PR_SET_PDEATHSIG). A launcher and a rank started as `launch` starts them, the launcher
    killed outright: the rank is gone within seconds (it would sleep two minutes)."""
    from hwnas.distributed import LAUNCHER_ENV

    assert LAUNCHER_ENV == "HWNAS_LAUNCHER"
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, RANK], stdout=subprocess.PIPE,
                                text=True, start_new_session=True)  # fmt: skip
    rank = int(launcher.stdout.readline())
    try:
        assert launcher.stdout.readline().strip() == "guarded"
        os.kill(launcher.pid, signal.SIGKILL)
        launcher.wait(timeout=10)
        deadline = time.monotonic() + 10
        while _alive(rank) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(rank), "the rank outlived its launcher"
    finally:
        _end(launcher)
        if _alive(rank):
            os.kill(rank, signal.SIGKILL)
