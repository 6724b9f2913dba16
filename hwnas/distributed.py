"""Supernet training across processes: PyTorch's DistributedDataParallel under ``torchrun``.

Every process (rank) runs the same ``hwnas search`` command. They join one process group (gloo
on CPU, NCCL on CUDA, one GPU per process), build the same supernet from the same seed, and
train it in lockstep:

- each rank takes an equal, contiguous shard of every global batch (``--batch-size`` is the
  global batch; see :func:`shard`);
- the supernet's weight gradients are averaged by DistributedDataParallel (the supernet is
  wrapped once, :func:`wrap`); the architecture parameters' gradients are averaged by
  :func:`average` before every architecture step
  (:meth:`hwnas.supernet.strategies.base.SupernetStrategy.distribute`);
- every rank draws the same paths: the strategies' samplers are seeded alike and read only the
  architecture parameters, which stay identical on every rank (:func:`check_same` verifies
  this after each epoch);
- rank 0 alone builds the cost model (a live device is measured once) and reads the
  checkpoint; :func:`share` hands both to the other ranks.

Before any of this, the processes meet and agree that every one passed its checks
(:func:`join`): each checks its settings and reads its data, then says whether its checks
passed through a store hosted at ``MASTER_ADDR:MASTER_PORT``; if any failed, rank 0 says which
process and why (and a failing process on another machine says it there too), and every
process stops with exit status 2. The meeting waits :func:`rendezvous_seconds` (10 minutes;
``HWNAS_RENDEZVOUS_S``): a process that never arrives stops the others with one line naming it,
where the process group's own timeout (:data:`TIMEOUT`) is 2 hours. A process lost during
training stops the others with one line too (:func:`watched`, exit status 1); a rank started
by ``hwnas search --nproc`` dies with its launcher (:func:`guard`) and, on SIGTERM, stops as on
Ctrl-C (:func:`interrupt_on_sigterm`).

After training, rank 0 writes the checkpoint, evaluates, fine-tunes and scores the candidates,
writes the study and the run folder; the other ranks leave the process group (:func:`stop`) and
exit. Batch norm stays per rank (no SyncBatchNorm): each rank normalises its shard with the
shard's statistics, as DistributedDataParallel does by default (see ``experiments/
supernet_ddp.py`` for what that changes in the loss curve).

:func:`launch` starts N processes on this machine through torchrun's elastic agent, for
``hwnas search --nproc N``.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hwnas.errors import EXIT_USAGE, HwnasError, LostProcessError, ProcessError
from hwnas.isolate import die_with_parent, python_module

INTERRUPTED = 130
"""Exit status of an interrupted command (the CLI's, after Ctrl-C)."""

TIMEOUT = timedelta(hours=2)
"""Longest wait of a collective: the other ranks wait this long for rank 0 to build the cost
model (measuring a live device block by block) before training starts."""

RENDEZVOUS_ENV = "HWNAS_RENDEZVOUS_S"
"""Environment variable: seconds the processes wait for each other when they meet
(:func:`join`); default :data:`RENDEZVOUS_S`."""

RENDEZVOUS_S = 600.0
"""Longest wait for the other processes of a job to arrive and finish their checks."""

LAUNCHER_ENV = "HWNAS_LAUNCHER"
"""Environment variable: the pid of the ``hwnas search --nproc`` process that started the
ranks (:func:`launch`), which then speaks for them when they are interrupted or killed."""


@dataclass(frozen=True)
class Ranks:
    """Where this process stands among the processes of one training job.

    Attributes:
        rank: this process's global rank (0 = the one that writes).
        world: number of processes.
        local: rank on this machine (its GPU index on CUDA).
    """

    rank: int = 0
    world: int = 1
    local: int = 0

    @property
    def main(self) -> bool:
        """Whether this process writes the study, the checkpoints and the run folder."""
        return self.rank == 0

    @property
    def many(self) -> bool:
        """Whether more than one process trains."""
        return self.world > 1


ONE = Ranks()
"""A single process."""


def ranks_from_env(env: dict[str, str] | None = None) -> Ranks:
    """This process's ranks from torchrun's environment (``RANK``, ``WORLD_SIZE``,
    ``LOCAL_RANK``); :data:`ONE` outside torchrun.

    Raises:
        HwnasError: a variable that is not an integer, a rank outside the world, a negative
            ``LOCAL_RANK``, more than one process without ``MASTER_ADDR`` or ``MASTER_PORT``
            (where process 0 meets the others), or a ``MASTER_PORT`` that is not a number.
    """
    env = os.environ if env is None else env
    if "WORLD_SIZE" not in env:
        return ONE
    try:
        world = int(env["WORLD_SIZE"])
        rank = int(env.get("RANK", "0"))
        local = int(env.get("LOCAL_RANK", str(rank)))
    except ValueError:
        raise HwnasError(
            "RANK, WORLD_SIZE and LOCAL_RANK must be integers (they are set by torchrun)"
        ) from None
    if world < 1 or not 0 <= rank < world:
        raise HwnasError(f"RANK {rank} is outside WORLD_SIZE {world} (they are set by torchrun)")
    if local < 0:
        raise HwnasError(f"LOCAL_RANK must be 0 or more, got {local} (it is set by torchrun)")
    missing = [k for k in ("MASTER_ADDR", "MASTER_PORT") if world > 1 and not env.get(k)]
    if missing:
        raise HwnasError(
            f"WORLD_SIZE {world} needs {' and '.join(missing)}: where process 0 meets the "
            "others (torchrun sets them; by hand, give MASTER_ADDR and MASTER_PORT to every "
            "process)"
        )
    if world > 1 and not env["MASTER_PORT"].isdigit():
        raise HwnasError(f"MASTER_PORT must be a port number, got {env['MASTER_PORT']!r}")
    return Ranks(rank, world, local)


def rendezvous_seconds(env: dict[str, str] | None = None) -> float:
    """How long the processes of a job wait for each other when they meet (:func:`join`):
    ``HWNAS_RENDEZVOUS_S`` or :data:`RENDEZVOUS_S`.

    Raises:
        HwnasError: ``HWNAS_RENDEZVOUS_S`` is not a positive number.
    """
    env = os.environ if env is None else env
    text = env.get(RENDEZVOUS_ENV, "")
    if not text:
        return RENDEZVOUS_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:
        raise HwnasError(f"{RENDEZVOUS_ENV} must be a positive number of seconds, got {text!r}")
    return seconds


def local_processes(env: dict[str, str] | None = None) -> int:
    """How many processes of this torchrun job run on this machine (``LOCAL_WORLD_SIZE``;
    1 outside torchrun)."""
    env = os.environ if env is None else env
    try:
        return max(int(env.get("LOCAL_WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


def check_gpus(device: Any, processes: int) -> None:
    """Refuse more processes on this machine than it has CUDA GPUs when training on CUDA (one
    GPU per process, NCCL): every process says so alike, before any joins the group. Without
    this, the process left without a GPU stopped alone while rank 0 waited for it, and the
    command ended with exit 2 and no word.

    Args:
        device: the torch device training runs on (:func:`hwnas.supernet.train.resolve_device`).
        processes: processes on this machine (``--nproc``, or torchrun's per node).

    Raises:
        HwnasError: CUDA with fewer GPUs than processes.
    """
    if processes <= 1 or getattr(device, "type", str(device)) != "cuda":
        return
    import torch

    count = torch.cuda.device_count()
    if processes > count:
        raise HwnasError(
            f"{processes} training processes on CUDA need a GPU each and this machine has "
            f"{count}: use --nproc {count} (or torchrun --nproc_per_node {count}), or "
            f"--set torch_device=cpu for {processes} CPU processes"
        )


def crowded_cpus(device: Any, threads: int, env: dict[str, str] | None = None) -> str | None:
    """A warning line where this machine's training processes want more CPU threads than the
    cores this process may run on (training on the CPU, ``LOCAL_WORLD_SIZE`` processes of
    ``threads`` torch threads each): they take turns on the cores and every step waits for
    the slowest, so the job runs slower than with fewer processes. None otherwise.

    Args:
        device: the torch device training runs on.
        threads: torch CPU threads of each process (``--set threads``).
        env: the environment (default ``os.environ``).
    """
    if getattr(device, "type", str(device)) != "cpu":
        return None
    local = local_processes(env)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cores = max(cores or 1, 1)
    if local < 2 or local * threads <= cores:
        return None
    fits = max(cores // threads, 1)
    return (
        f"{local} training processes of {threads} torch thread(s) each on {cores} usable CPU "
        f"core(s): they take turns on the cores and every step waits for the slowest; "
        f"--nproc {fits} (torchrun --nproc_per_node {fits}) trains faster here"
    )


def check_processes(batch_size: int, world: int) -> None:
    """Refuse a process count the global batch cannot be split across.

    Args:
        batch_size: the global mini-batch (``--batch-size``).
        world: number of processes.

    Raises:
        HwnasError: fewer than 1 process, a batch that is not a multiple of the process count,
            or a shard of fewer than 2 images (batch norm needs 2 in training mode).
    """
    if world < 1:
        raise HwnasError(f"--nproc must be at least 1, got {world}")
    if world == 1:
        return
    if batch_size // world < 2:
        raise HwnasError(
            f"--batch-size {batch_size} across {world} processes leaves fewer than 2 images per "
            f"process (batch norm needs 2): give --batch-size >= {2 * world} or fewer processes"
        )
    if batch_size % world:
        raise HwnasError(
            f"--batch-size {batch_size} is not a multiple of the {world} processes (each takes "
            "an equal shard of every batch)"
        )


def shard(indices: Sequence[int] | Any, ranks: Ranks) -> Any:
    """This rank's share of one global batch of sample indices.

    The batch is trimmed to a multiple of the process count (only the last, partial batch of
    an epoch can lose up to ``world - 1`` images) and cut into ``world`` equal contiguous
    pieces; rank r takes piece r. Every rank computes the same split.

    Args:
        indices: the global batch, shape (B,).
        ranks: this process.

    Returns:
        Indices of shape (B // world,).
    """
    if not ranks.many:
        return indices
    per = len(indices) // ranks.world
    return indices[ranks.rank * per : (ranks.rank + 1) * per]


_STORE: Any = None
"""The store the processes met through (:func:`join`), which their process group then uses."""


def join(
    ranks: Ranks, failure: HwnasError | None = None, say: Callable[[str], None] | None = None
) -> None:
    """Meet the other processes of the job and agree that every one passed its checks.

    Rank 0 hosts a store at ``MASTER_ADDR:MASTER_PORT`` (under torchrun, its agent's); every
    process writes there whether its checks passed (``failure``: the error they raised, or
    None) and reads what the others wrote, waiting up to :func:`rendezvous_seconds` for them.
    Rank 0 with a failure of its own says it without waiting for the others' checks: under
    torchrun at once (its agent stops the others); hosting the store itself, after writing it
    there and waiting up to :data:`READ_WAIT_S` (30 s) for the others to read it (they stop
    with status 2, silent). No-op in one process, or once joined.

    Args:
        ranks: this process.
        failure: this process's own error from its checks, or None.
        say: where rank 0 says it is waiting (a line on stderr).

    Raises:
        HwnasError: ``failure`` (on rank 0 without waiting for the others' checks; on another
            rank after the meeting, for the caller to leave unsaid: rank 0 says it); on rank 0,
            "process K of N failed its checks: ..." when another one failed; on another rank,
            "process K of N failed its checks" when rank 0 or another failed (and it did not).
        ProcessError: on a rank other than 0, its own failure, when it runs on another machine
            than rank 0 (the first failing process of each machine says its own).
        LostProcessError: a process did not arrive in time, or nothing answers at the address.
    """
    global _STORE
    if not ranks.many or _STORE is not None:
        if failure is not None:
            raise failure
        return
    env = os.environ
    agent = env.get("TORCHELASTIC_USE_AGENT_STORE") == "True"  # torchrun's agent hosts it
    if failure is not None and ranks.main and agent:
        raise failure
    from torch.distributed import TCPStore

    where, seconds = f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}", rendezvous_seconds()
    me = f"process {ranks.rank} of {ranks.world}"
    own = f"{failure}; and " if failure is not None else ""
    if ranks.main and failure is None and say is not None:
        say(f"waiting for the {ranks.world} processes at {where} (up to {seconds:g} s)")
    deadline = time.monotonic() + seconds
    while True:  # waits of a second: a signal (SIGTERM, Ctrl-C) is handled between them
        try:
            if not (ranks.main and not agent):  # the store's own retries log C++ stack dumps
                socket.create_connection((env["MASTER_ADDR"], int(env["MASTER_PORT"])), 1).close()
            store = TCPStore(
                env["MASTER_ADDR"], int(env["MASTER_PORT"]), ranks.world,
                is_master=ranks.main and not agent, timeout=timedelta(seconds=1),
                wait_for_workers=False, multi_tenant=not agent,
            )  # fmt: skip
            break
        except (RuntimeError, OSError) as exc:  # torch's DistStoreError is a RuntimeError
            first = (str(exc).strip().splitlines() or [""])[0]
            if ranks.main and not agent:
                if failure is not None:
                    raise failure from None
                raise ProcessError(f"{me}: cannot listen at {where}: {first}") from None
            if time.monotonic() > deadline:
                raise LostProcessError(
                    f"{me}: {own}nothing answered at {where} (where process 0 hosts the "
                    f"meeting) within {seconds:g} s ({RENDEZVOUS_ENV} sets the wait)"
                ) from None
            time.sleep(0.5)
    prefix = f"hwnas/{env.get('TORCHELASTIC_RESTART_COUNT', '0')}/checks/"
    node = env.get("GROUP_RANK") or os.uname().nodename  # torchrun's node rank
    said = json.dumps([node, None if failure is None else str(failure)])
    store.set(f"{prefix}{ranks.rank}", said)
    keys = [f"{prefix}{r}" for r in range(ranks.world)]
    reads = [f"{prefix}read/{r}" for r in range(1, ranks.world)]
    if failure is not None and ranks.main:  # the others stop on reading it; its store ends here
        _wait_read(store, reads, min(seconds, READ_WAIT_S))
        raise failure
    while True:
        try:
            absent = [str(r) for r, k in enumerate(keys) if not store.check([k])]
            if "0" not in absent and json.loads(store.get(keys[0]))[1] is not None:
                break  # rank 0 failed: it waits for this process to read so, not for the rest
        except RuntimeError:  # rank 0, hosting the store, is gone
            absent, deadline = ["0"], 0
        if not absent:
            break
        if time.monotonic() > deadline:
            who = "process" + ("es " if len(absent) > 1 else " ") + ", ".join(absent)
            mine = "" if ranks.main else f"{me}: {own}"
            raise LostProcessError(
                f"{mine}{who} of {ranks.world} did not arrive at {where} within {seconds:g} s "
                f"({RENDEZVOUS_ENV} sets the wait; each process's own output, or its machine's, "
                "says why)"
            )
        time.sleep(0.2)
    seen = [json.loads(store.get(k)) if store.check([k]) else [None, None] for k in keys]
    store.set(f"{prefix}read/{ranks.rank}", "1")
    failed = [(r, message) for r, (_, message) in enumerate(seen) if message is not None]
    if not failed:
        store.set_timeout(TIMEOUT)  # the process group's waits: rank 0 builds the cost model
        _STORE = store
        return
    if ranks.main:  # its store ends with it: wait until every process has read the outcome
        _wait_read(store, reads, min(seconds, READ_WAIT_S))
        rank, message = failed[0]
        raise HwnasError(f"process {rank} of {ranks.world} failed its checks: {message}")
    if failure is None:
        raise HwnasError(f"process {failed[0][0]} of {ranks.world} failed its checks")
    mine = seen[ranks.rank][0]
    first_here = min(r for r, (n, message) in enumerate(seen) if n == mine and message)
    if mine != seen[0][0] and first_here == ranks.rank:  # rank 0's machine would not see it
        raise ProcessError(f"{me}: {failure}") from None
    raise failure


READ_WAIT_S = 30.0
"""Seconds rank 0, hosting the meeting's store, waits for the other processes to read a
failure before it says it and leaves (they stop silently once they have read it)."""


def _wait_read(store: Any, reads: list[str], seconds: float) -> None:
    """Wait up to ``seconds`` for the other processes to have read the meeting's outcome
    (their ``reads`` keys in ``store``), in waits of 0.2 s: a signal is handled between them."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if store.check(reads):
                return
        except RuntimeError:
            return
        time.sleep(0.2)


def launched() -> bool:
    """Whether this process is a rank that ``hwnas search --nproc`` started (and speaks for:
    it says when they were interrupted or killed)."""
    return os.environ.get(LAUNCHER_ENV) == str(os.getppid())


def guard() -> None:
    """Make a rank end with its launcher: a rank that ``hwnas search --nproc`` started is
    killed when that process dies (``PR_SET_PDEATHSIG`` on Linux, as isolated steps are:
    :func:`hwnas.isolate.die_with_parent`); killed with ``kill -9``, the launcher had left its
    ranks training to the end, beside the rerun. Elsewhere, nothing.

    Raises:
        SystemExit: the launcher is already gone (status 130).
    """
    pid = os.environ.get(LAUNCHER_ENV)
    if not pid:
        return
    die_with_parent(pid)
    if str(os.getppid()) != pid:  # it died before we asked
        raise SystemExit(INTERRUPTED)


_terminated = False
"""Whether this process got SIGTERM (:func:`interrupt_on_sigterm`)."""


def _interrupt(signum: int, frame: Any) -> None:
    global _terminated
    _terminated = True
    raise KeyboardInterrupt


@contextmanager
def interrupt_on_sigterm() -> Iterator[None]:
    """Within: SIGTERM (``timeout``, torchrun's agent passing on an interruption) raises
    KeyboardInterrupt in this process, as Ctrl-C does, so a rank stops through the same path:
    the running trial told, rank 0 saying so. On exit the handler found is back, unless
    :func:`ignore_sigterm` was called meanwhile: then SIGTERM stays ignored until the error on
    its way out is said (the CLI's :func:`hwnas.cli.main` puts its handler back after).
    Outside the main thread (a program running the CLI in another), where no handler can be
    set, SIGTERM stays its owner's."""
    import threading

    global _terminated
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    _terminated = False
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is _interrupt and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def ignore_sigterm() -> None:
    """Ignore SIGTERM from now on where :func:`interrupt_on_sigterm` handles it (a rank that has
    an error to say: stopped mid-sentence by torchrun's agent, it said nothing); elsewhere (the
    Python API), leave SIGTERM to its owner."""
    if signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


LOST_WORDS = (
    "connection reset by peer", "connection closed by peer", "broken pipe", "connection refused",
    "timed out waiting", "before timing out", "remote process exit", "communicator was aborted",
)  # fmt: skip
"""The backends' words (lowercased) for a collective that failed because another process is
gone: gloo's peer-closed socket or its wait for a peer timing out, NCCL's remote error
("remote process exited or there was a network error") and its aborted communicator."""


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective's failure because another process is gone: a network
    error (``DistNetworkError``) or a backend error in :data:`LOST_WORDS`. Anything else
    (NCCL misconfigured at the first collective, gloo's tensor sizes that differ across
    ranks: a bug) is not, whatever its type."""
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistNetworkError", ())):
        return True
    text = str(exc).lower()
    return any(words in text for words in LOST_WORDS)


def _first_line(exc: BaseException) -> str:
    """The first sentence of ``exc``'s first line, without gloo's source location
    (``[.../pair.cc:537] Read error ...: Connection reset by peer. This is typically ...``)."""
    line = (str(exc).strip().splitlines() or [""])[0]
    line = re.sub(r"^\[[^\]]*\]\s*", "", line)
    return re.split(r"(?<=\.)\s", line, maxsplit=1)[0].rstrip(".")


@contextmanager
def watched(ranks: Ranks) -> Iterator[None]:
    """Collectives whose failure, when another process is gone (killed, or stopped with an
    error of its own), becomes one line (:class:`~hwnas.errors.LostProcessError`) instead of
    the backend's traceback (:func:`_lost`); any other failure is raised unchanged, with its
    traceback (a bug, or a backend misconfigured).

    Raises:
        LostProcessError: another process is gone (the message quotes the backend's words).
        KeyboardInterrupt: this process was interrupted meanwhile (SIGTERM): the others were
            stopped with it.
    """
    try:
        yield
    except RuntimeError as exc:
        if not ranks.many or not _lost(exc):
            raise
        # torchrun's agent stops every process at once when interrupted (then SIGTERM came
        # first here), and the survivors of a lost one a moment after this: the line first
        ignore_sigterm()
        if _terminated:
            raise KeyboardInterrupt from None
        other = f"process {1 - ranks.rank}" if ranks.world == 2 else "another process"
        raise LostProcessError(
            f"process {ranks.rank} of {ranks.world} lost {other} of the job while training "
            f"({_first_line(exc)}): it stopped or was killed (its own output says why); run "
            "the same command again to resume from the last checkpoint"
        ) from None


def start(ranks: Ranks, device: Any) -> Any:
    """Join the process group of a torchrun job: gloo on CPU, NCCL on CUDA with one GPU per
    process (``cuda:LOCAL_RANK``).

    Args:
        ranks: this process (from :func:`ranks_from_env`).
        device: the torch device asked for (``cuda`` or ``cpu``).

    Returns:
        This process's torch device (every process has a GPU of its own: :func:`check_gpus`,
        run by every process when the job is prepared, refused more processes than GPUs).
    """
    import torch
    import torch.distributed as dist

    if device.type == "cuda":
        device = torch.device("cuda", ranks.local)
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        backend = "gloo"
    if not dist.is_initialized():
        join(ranks)  # the Python API: nothing to agree on, the meeting alone
        dist.init_process_group(
            backend, store=dist.PrefixStore("default_pg", _STORE), rank=ranks.rank,
            world_size=ranks.world, timeout=TIMEOUT,
        )  # fmt: skip
    return device


def stop() -> None:
    """Wait for every rank, then leave the process group (no-op when none was joined)."""
    import torch.distributed as dist

    global _STORE
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
    _STORE = None


def wrap(net: Any, device: Any) -> Any:
    """``net`` (a supernet) to be trained by DistributedDataParallel: a callable ``(x, path)
    -> logits`` that runs it through one DDP wrapper, built at its first forward (see
    :class:`_Replicated`)."""
    return _Replicated(net, device)


def _reaches_every_weight(net: Any, out: Any) -> bool:
    """Whether the autograd graph of ``out`` reaches every trainable parameter of ``net``."""
    params = {id(p) for p in net.parameters() if p.requires_grad}
    seen, stack = set(), [out.grad_fn]
    while stack and params:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        params.discard(id(getattr(fn, "variable", None)))
        stack.extend(f for f, _ in fn.next_functions)
    return not params


def _full(path: Any) -> bool:
    """Whether a path computes every candidate of every decision (a soft mixture)."""
    return all(len(c.active) == len(c.weights) for c in path)


class _Replicated:
    """A supernet run through DistributedDataParallel, which averages its weights' gradients
    over the processes in every backward.

    The DDP wrapper is built at the first forward, knowing the first path: a soft mixture that
    reaches every weight (DARTS, FBNet) needs no search for unused parameters; a sampled path
    (GDAS, ProxylessNAS, one-shot) leaves most candidates unused, every rank the same ones
    (same path), so ``find_unused_parameters`` is on and their gradients stay ``None`` as in
    one process. Buffers (batch-norm running statistics) are rank 0's at every forward.

    Args:
        net: the supernet; forward ``(x (B, C, H, W), path) -> logits (B, classes)``.
        device: this rank's torch device.
    """

    def __init__(self, net: Any, device: Any):
        self.inner = net
        self.device = device
        self.ddp: Any = None
        self.every = False

    def __call__(self, x: Any, path: Any) -> Any:
        from torch.nn.parallel import DistributedDataParallel

        if self.ddp is None:
            self.every = _full(path) and _reaches_every_weight(self.inner, self.inner(x, path))
            self.ddp = DistributedDataParallel(
                self.inner,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                find_unused_parameters=not self.every,
            )
        elif self.every and not _full(path):
            raise RuntimeError(
                "supernet search across processes: the strategy's first weight step computed "
                "every candidate, a later one does not (DDP was built for full paths)"
            )
        return self.ddp(x, path)


def average(tensors: Sequence[Any]) -> None:
    """Replace each tensor by its mean over the ranks, in place (one all-reduce).

    Args:
        tensors: tensors of any shapes on this rank's device, the same list on every rank.
    """
    import torch
    import torch.distributed as dist

    if not tensors or not dist.is_initialized():
        return
    flat = torch.cat([t.reshape(-1) for t in tensors])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    offset = 0
    for t in tensors:
        t.copy_(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()


def reduce(values: Sequence[float], device: Any, op: str = "mean") -> list[float]:
    """``values`` combined over the ranks (``mean``, ``max``), element by element.

    Args:
        values: numbers, the same count on every rank.
        device: this rank's torch device (NCCL reduces CUDA tensors).
    """
    import torch
    import torch.distributed as dist

    t = torch.tensor(list(values), dtype=torch.float64, device=device)
    if op == "max":
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
    else:
        dist.all_reduce(t)
        t /= dist.get_world_size()
    return [float(v) for v in t.cpu()]


def share(value: Any, ranks: Ranks, local: dict[str, Any] | None = None) -> Any:
    """Rank 0's ``value`` on every rank (pickled and broadcast; others pass anything).

    Args:
        value: on rank 0, what to hand out: any picklable object, or an exception, which is
            then raised on every rank.
        ranks: this process.
        local: objects that every rank already has (name -> object, e.g. the search space):
            sent by name and replaced on arrival by the receiving rank's own.

    Raises:
        Exception: the exception rank 0 handed out.
    """
    import torch.distributed as dist

    local = local or {}
    if ranks.main:
        names = {id(o): n for n, o in local.items()}
        buf = io.BytesIO()
        pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
        pickler.persistent_id = lambda o: names.get(id(o))  # type: ignore[method-assign]
        pickler.dump(value)
        payload = [buf.getvalue()]
    else:
        payload = [None]
    if ranks.many:
        dist.broadcast_object_list(payload)
    if not ranks.main:
        unpickler = pickle.Unpickler(io.BytesIO(payload[0]))
        unpickler.persistent_load = lambda n: local[n]  # type: ignore[method-assign]
        value = unpickler.load()
    if isinstance(value, BaseException):
        raise value
    return value


def check_same(strategy: Any, device: Any) -> None:
    """Verify that the supernet weights and the architecture parameters are the same on every
    rank (bit for bit: equal gradients and equal optimiser steps keep them so).

    Raises:
        RuntimeError: they differ (a bug: the ranks would train different supernets).
    """
    import torch
    import torch.distributed as dist

    params = [*strategy.arch_parameters(), *strategy.supernet.parameters()]
    with torch.no_grad():
        sums = torch.stack([p.detach().double().sum() for p in params]).to(device)
    hi, lo = sums.clone(), sums.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    if not torch.equal(hi, lo):
        worst = int((hi - lo).abs().argmax())
        raise RuntimeError(
            f"supernet search: parameter {worst} differs across ranks by "
            f"{float(hi[worst] - lo[worst]):.3g} (the ranks no longer train one supernet)"
        )


def launch(nproc: int, args: Sequence[str]) -> int:
    """Run ``python -m hwnas ARGS`` in ``nproc`` processes on this machine through torchrun's
    elastic agent, as ``torchrun --standalone --nproc_per_node=NPROC -m hwnas ARGS`` does
    (rendezvous on a free local port, no restarts); returns when all have finished. The
    processes die with this one (:func:`guard`).

    Returns:
        0; 2 when a process stopped on a user error (rank 0 has said why, in one line); 130
        when they were interrupted (Ctrl-C, SIGTERM: the caller says so, the ranks do not).

    Raises:
        LostProcessError: a process was killed (by a signal other than SIGINT and SIGTERM), or
            failed otherwise (its own output says why).
    """
    import logging
    import uuid

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=nproc,
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
    )
    import torch.distributed.elastic.agent.server.api  # noqa: F401 - its loggers, to quieten

    quiet = [
        logging.getLogger(name)
        for name in list(logging.root.manager.loggerDict)
        if name.startswith("torch.distributed")
    ]
    levels = [log.level for log in quiet]
    for log in quiet:  # the processes' own output says what went wrong, in one line
        log.setLevel(logging.CRITICAL)
    os.environ[LAUNCHER_ENV] = str(os.getpid())  # the ranks' environment
    try:
        elastic_launch(config, sys.executable)("-u", *python_module("hwnas"), *args)
    except ChildFailedError as exc:
        return _outcome({r: f.exitcode for r, f in exc.failures.items()}, nproc)
    except (SignalException, KeyboardInterrupt):
        return INTERRUPTED
    finally:
        os.environ.pop(LAUNCHER_ENV, None)
        for log, level in zip(quiet, levels):
            log.setLevel(level)
    return 0


def _outcome(codes: dict[int, int], nproc: int) -> int:
    """:func:`launch`'s answer for the processes that failed (rank -> exit code; minus the
    signal's number for a process a signal killed)."""
    stopped = (-signal.SIGINT, -signal.SIGTERM)
    # the cause first: a process killed from outside (SIGKILL) before one that aborted when
    # its peer vanished (gloo's "terminate called without an active exception", SIGABRT);
    # by rank, rank 0's abort was reported for rank 1's kill
    order = sorted(codes.items(), key=lambda rc: (rc[1] == -signal.SIGABRT, rc[0]))
    for rank, code in order:
        if code < 0 and code not in stopped:  # killed: it said nothing, the others are silent
            try:
                how = signal.Signals(-code).name
            except ValueError:
                how = f"signal {-code}"
            raise LostProcessError(
                f"process {rank} of {nproc} was killed ({how}); run the same command again to "
                "resume from the last checkpoint"
            )
    if EXIT_USAGE in codes.values():
        return EXIT_USAGE  # rank 0 has said why
    if any(code in (INTERRUPTED, *stopped) for code in codes.values()):
        return INTERRUPTED
    rank = min(codes)
    raise LostProcessError(
        f"process {rank} of {nproc} failed with exit code {codes[rank]} (its output is above)"
    )
