"""Supernet training across processes (DistributedDataParallel, gloo on CPU), through the CLI
as a user types it: ``hwnas search ... --nproc 2`` trains the supernet of one process with the
same global batch and seed, rank 0 alone writes, a one-process run resumes its checkpoint, and
process counts the batch cannot be split across are one-line errors."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pytest
import torch
from helpers import hwnas_cli
from torch import nn

from hwnas.cli import main
from hwnas.distributed import Ranks, check_processes, shard
from hwnas.errors import HwnasError
from hwnas.supernet.strategies.base import SupernetStrategy

GDAS = [
    "search",
    "--strategy",
    "gdas",
    "--device",
    "pixel3",
    "--data",
    "digits",
    "--epochs",
    "2",
    "--batch-size",
    "64",
    "--finetune-epochs",
    "0",
    "--latency-weight",
    "0.5",
    "--no-zoo",
    "--set",
    "limit=300",
    "--set",
    "channels=4",
    "--set",
    "cost=flops",  # the quickest cost model to build (rank 0 builds it, 4 runs here)
]


class Halves(nn.Module):
    """The supernet taking each half of every batch separately (batch norm per half)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.inner = net

    def forward(self, x, path):
        return torch.cat([self.inner(h, path) for h in x.chunk(2)])


def _state(out):
    state = torch.load(out / "supernet.pt", map_location="cpu", weights_only=True)
    alphas = torch.cat([a.flatten() for a in state["strategy"]["alphas"]])
    buffers = ("running_mean", "running_var", "num_batches_tracked")  # per rank, not trained
    weights = {k: v for k, v in state["supernet"].items() if not k.endswith(buffers)}
    return alphas, weights


@pytest.mark.slow
def test_two_processes_train_the_supernet_of_one(tmp_path, monkeypatch, capsys):
    two, plain, halves = tmp_path / "two", tmp_path / "plain", tmp_path / "halves"
    # started with the console script, as a user types it, from a folder holding Python files
    # named like hwnas's imports: no rank and no plot process may import them (children
    # started with `python -m` had the working folder first on their path, and every rank ran
    # a `numpy.py` found there; tests/security/test_untrusted_files.py checks a table search)
    folder, marker = tmp_path / "downloads", tmp_path / "ran"
    folder.mkdir()
    payload = f"open({str(marker)!r}, 'a').write('ran\\n')\nraise ImportError('planted')\n"
    for name in ("matplotlib.py", "numpy.py", "optuna.py"):
        (folder / name).write_text(payload)
    hwnas = Path(sys.executable).with_name("hwnas")
    args = [str(hwnas), *GDAS, "--nproc", "2", "--out", str(two), "--study", "two"]
    r = subprocess.run(args, cwd=folder, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert not marker.exists(), marker.read_text()
    assert (two / "pareto.png").is_file()  # drawn in its own process
    assert r.stdout.count("derived (architecture derived by") == 1  # rank 0 alone reports
    assert r.stdout.count("best (most accurate") == 1
    # batch norm saw shards of the batch: how many processes trained is recorded
    assert json.loads((two / "summary.json").read_text())["processes"] == 2
    # one process: the same command, then the 2-process command without --nproc on its run
    # folder (it resumes the checkpoint and the study rank 0 wrote)
    assert main([*GDAS, "--out", str(plain), "--study", "plain"]) == 0
    assert main([*GDAS, "--out", str(two), "--study", "two"]) == 0
    resumed = capsys.readouterr().err
    # and one process whose every forward takes each half of the batch separately: what 2
    # processes compute without SyncBatchNorm
    init = SupernetStrategy.__init__

    def with_halves(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.net = Halves(self.supernet)

    monkeypatch.setattr(SupernetStrategy, "__init__", with_halves)
    monkeypatch.setattr(SupernetStrategy, "unsynced", lambda self: contextlib.nullcontext())
    assert main([*GDAS, "--out", str(halves), "--study", "halves"]) == 0
    s2, s_plain, s_halves = (
        json.loads((o / "summary.json").read_text()) for o in (two, plain, halves)
    )
    e2, e_plain, e_halves = (s["epochs"] for s in (s2, s_plain, s_halves))
    assert len(e2) == 2
    assert s2["processes"] == 1  # the resumed run's
    # the 2-process run is one process with batch norm per half-batch, to float rounding (the
    # all-reduce sums in another order: about 1e-9 here; Adam, which normalises every
    # architecture gradient, can grow rounding in near-zero gradients of deeper supernets, so
    # this compares GDAS on NAS-Bench-201): DDP averaged the weights' gradients, the
    # architecture gradients were all-reduced, both ranks sampled the same paths
    for a, b in zip(e2, e_halves):
        for key in ("loss", "arch_loss", "hw_loss"):
            assert a[key] == pytest.approx(b[key], rel=1e-4), key
    a2, w2 = _state(two)
    a_halves, w_halves = _state(halves)
    assert float((a2 - a_halves).abs().max()) <= 1e-5
    assert max(float((w2[k] - w_halves[k]).abs().max()) for k in w2) <= 1e-5
    assert s2["best"]["arch"] == s_halves["best"]["arch"]
    # and the plain one-process loss curve within 2%: batch norm over 32 instead of 64 images
    # moves this short run's curve by at most 0.23%, another seed by 1-4% (experiments/
    # supernet_ddp.py --quick); 2% is also what a longer or faster-learning run may need
    for a, b in zip(e2, e_plain):
        assert a["loss"] == pytest.approx(b["loss"], rel=0.02)
        assert a["arch_loss"] == pytest.approx(b["arch_loss"], rel=0.02)
    # rank 0 wrote the study once; one process resumed the 2-process checkpoint and study
    assert "resuming" in resumed and "after epoch 2" in resumed
    study = optuna.load_study(study_name="two", storage=s2["storage"])
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 1


def test_shards_are_equal_contiguous_pieces_of_every_batch():
    batch = np.arange(10, 17)  # a last, partial batch of 7 across 2 processes
    assert shard(batch, Ranks(0, 2)).tolist() == [10, 11, 12]
    assert shard(batch, Ranks(1, 2)).tolist() == [13, 14, 15]
    assert shard(batch, Ranks(0, 1)).tolist() == batch.tolist()


@pytest.mark.parametrize(
    ("batch", "world", "message"),
    [
        (64, 0, "--nproc must be at least 1"),
        (6, 4, "fewer than 2 images per process"),
        (64, 3, "not a multiple of the 3 processes"),
    ],
)
def test_process_counts_the_batch_cannot_take_are_refused(batch, world, message):
    with pytest.raises(HwnasError, match=message):
        check_processes(batch, world)
    check_processes(64, 2)  # fine


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([*GDAS, "--nproc", "3"], "not a multiple of the 3 processes"),
        (["search", "--device", "pixel3", "--nproc", "2"], "table strategy 'frontier'"),
    ],
)
def test_bad_process_options_are_one_line_errors(args, message):
    r = hwnas_cli(*args)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error:") and message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_more_processes_than_gpus_is_one_line_before_any_work(hwnas_home, monkeypatch, capsys):
    """On CUDA each process takes a GPU: ``--nproc 2`` on a machine with one GPU (here faked:
    torch told there is one) is refused before anything is launched, and so is a torchrun job
    with 2 processes on this machine; on an H100 machine it ended with exit 2 and no word (the
    process left without a GPU stopped alone, and only rank 0 speaks)."""
    import hwnas.distributed as distributed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    launched = []
    monkeypatch.setattr(distributed, "launch", lambda *a: launched.append(a) or 0)
    assert main([*GDAS, "--nproc", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "need a GPU each and this machine has 1" in err, err
    assert "--nproc 1" in err and "--set torch_device=cpu" in err and not launched
    # rank 0 hosts the meeting, and no other process comes to read its failure: 1 s, not 30
    monkeypatch.setattr(distributed, "READ_WAIT_S", 1.0)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "29500")
    assert main(GDAS) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "need a GPU each and this machine has 1" in err, err
    # on the CPU any number of processes may share the machine
    distributed.check_gpus(torch.device("cpu"), 8)


GLOO = "[/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] "


@pytest.mark.parametrize(
    "message, lost",
    [
        (GLOO + "Read error [127.0.0.1]:34194: Connection reset by peer. This is typically "
         "caused by a remote worker hanging or bugs in the application. GLHF!", True),
        (GLOO + "Connection closed by peer [127.0.0.1]:5000", True),
        (GLOO + "Write error [127.0.0.1]:5000: Broken pipe", True),
        ("[c10d] connect [127.0.0.1]:29500 failed: Connection refused", True),
        ("[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 7200000ms for recv "
         "operation to complete", True),
        ("NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a "
         "network error, NCCL version 2.21.5", True),
        ("NCCL communicator was aborted on rank 1.", True),
        # a bug (tensor sizes that differ across ranks) and a misconfiguration: not lost
        (GLOO + "op.preamble.length <= op.nbytes. 16 vs 32", False),
        ("NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage (run with NCCL_DEBUG=WARN "
         "for details), NCCL version 2.21.5", False),
        ("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error", False),
    ],
)  # fmt: skip
def test_only_a_process_gone_is_a_lost_process(message, lost):
    """Every DistBackendError, and gloo's tensor-size mismatch (its text names gloo/transport),
    was a lost process: each rank said "lost process 1 ... run again to resume", exit 1, and the
    real error was dropped. Now only a peer gone is, in the backend's words; the rest keeps its
    traceback."""
    from torch.distributed import DistBackendError

    from hwnas.distributed import watched
    from hwnas.errors import LostProcessError

    error = DistBackendError(message)
    with pytest.raises(LostProcessError if lost else DistBackendError) as caught:
        with watched(Ranks(0, 2, 0)):
            raise error
    if lost:
        assert "lost process 1 of the job while training (" in str(caught.value)
        assert "pair.cc" not in str(caught.value) and "GLHF" not in str(caught.value)
        if "34194" in message:
            assert "(Read error [127.0.0.1]:34194: Connection reset by peer):" in str(caught.value)
    else:
        assert caught.value is error


def _own(signum, frame):  # the SIGTERM handler of a program that calls hwnas
    pass


def test_a_lost_process_leaves_the_python_apis_sigterm_alone():
    """Through the Python API (hwnas.search under torchrun), a lost process set SIGTERM to
    SIG_IGN for good, though the API never handled it."""
    from hwnas.distributed import watched
    from hwnas.errors import LostProcessError

    previous = signal.signal(signal.SIGTERM, _own)
    try:
        with pytest.raises(LostProcessError):
            with watched(Ranks(0, 2, 0)):
                raise RuntimeError("Read error [127.0.0.1]:5000: Connection reset by peer")
        assert signal.getsignal(signal.SIGTERM) is _own
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_the_cli_puts_the_sigterm_handler_back(tmp_path, hwnas_home):
    """hwnas's main() called in-process for a supernet search under torchrun's variables left
    its own SIGTERM handler (or SIG_IGN, after an error) installed when it returned."""
    from helpers import hwnas_main

    env = {"WORLD_SIZE": "2", "RANK": "1", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(_free_port()), "HWNAS_RENDEZVOUS_S": "0.5"}  # fmt: skip
    previous = signal.signal(signal.SIGTERM, _own)
    try:
        for data in ("/nonexistent", "digits"):  # its checks fail, or they pass
            args = [*GDAS, "--data", data, "--out", str(tmp_path / "run")]
            r = hwnas_main(*args, env=env)
            assert r.returncode == 1, r.stderr  # process 0 never answered
            assert "nothing answered at 127.0.0.1:" in r.stderr
            assert signal.getsignal(signal.SIGTERM) is _own
    finally:
        signal.signal(signal.SIGTERM, previous)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_more_cpu_processes_than_cores_is_said(monkeypatch):
    """`--nproc 4` of CPU training on 2 cores ran with no word, slower than `--nproc 2`: the
    processes take turns on the cores and each step waits for the slowest. Rank 0 now says
    so in a warning line naming the count that fits; on CUDA, or where they fit, nothing."""
    from hwnas.distributed import crowded_cpus

    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)
    cpu = torch.device("cpu")
    assert crowded_cpus(cpu, 1, {"LOCAL_WORLD_SIZE": "4"}) == (
        "4 training processes of 1 torch thread(s) each on 2 usable CPU core(s): they take "
        "turns on the cores and every step waits for the slowest; --nproc 2 (torchrun "
        "--nproc_per_node 2) trains faster here"
    )
    assert "--nproc 1 " in crowded_cpus(cpu, 2, {"LOCAL_WORLD_SIZE": "2"})  # 2 x 2 threads
    assert crowded_cpus(cpu, 1, {"LOCAL_WORLD_SIZE": "2"}) is None  # they fit
    assert crowded_cpus(cpu, 8, {}) is None  # one process: its threads are its own affair
    assert crowded_cpus(torch.device("cuda"), 1, {"LOCAL_WORLD_SIZE": "4"}) is None


def test_a_killed_rank_is_named_before_the_rank_that_aborted_after_it():
    """Rank 1 killed (SIGKILL) during training: rank 0 aborted when its peer vanished
    ("terminate called without an active exception", SIGABRT), and the launcher's report,
    read by rank, named process 0's SIGABRT instead of the kill (a CI run of the stop test)."""
    from hwnas.distributed import _outcome
    from hwnas.errors import LostProcessError

    with pytest.raises(LostProcessError, match=r"^process 1 of 2 was killed \(SIGKILL\)"):
        _outcome({0: -signal.SIGABRT, 1: -signal.SIGKILL}, 2)
    with pytest.raises(LostProcessError, match=r"^process 0 of 2 was killed \(SIGABRT\)"):
        _outcome({0: -signal.SIGABRT}, 2)  # an abort alone is named as it is
