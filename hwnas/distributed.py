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
import os
import pickle
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hwnas.errors import EXIT_USAGE, HwnasError
from hwnas.isolate import python_module

INTERRUPTED = 130
"""Exit status of an interrupted command (the CLI's, after Ctrl-C)."""

TIMEOUT = timedelta(hours=2)
"""Longest wait of a collective: the other ranks wait this long for rank 0 to build the cost
model (measuring a live device block by block) before training starts."""


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
        HwnasError: a variable that is not an integer, or a rank outside the world.
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
    if world < 1 or not 0 <= rank < world or local < 0:
        raise HwnasError(f"RANK {rank} is outside WORLD_SIZE {world} (they are set by torchrun)")
    return Ranks(rank, world, local)


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
        dist.init_process_group(backend, timeout=TIMEOUT)
    return device


def stop() -> None:
    """Wait for every rank, then leave the process group (no-op when none was joined)."""
    import torch.distributed as dist

    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


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
    (rendezvous on a free local port, no restarts); returns when all have finished.

    Returns:
        0; 2 when a process stopped on a user error; 130 when they were interrupted (Ctrl-C,
        SIGTERM). Rank 0 has then said why, in one line.

    Raises:
        HwnasError: a process failed otherwise (its own output says why).
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
    try:
        elastic_launch(config, sys.executable)("-u", *python_module("hwnas"), *args)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        if failure.exitcode == EXIT_USAGE:
            return EXIT_USAGE
        if failure.exitcode in (INTERRUPTED, -2, -15):  # hwnas's "interrupted", SIGINT, SIGTERM
            return INTERRUPTED
        raise HwnasError(
            f"process {rank} of {nproc} failed with exit code {failure.exitcode} "
            "(its output is above)"
        ) from None
    except (SignalException, KeyboardInterrupt):
        return INTERRUPTED
    finally:
        for log, level in zip(quiet, levels):
            log.setLevel(level)
    return 0
