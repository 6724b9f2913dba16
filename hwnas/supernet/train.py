"""Supernet training: search epochs (with their memory and time), and the short fine-tune of an
extracted subnet; the loops they share with zoo training live in :mod:`hwnas.loops`.

On a CUDA device the loops run with mixed precision (``torch.autocast`` float16 and a
``GradScaler``) and channels-last tensors. Across processes (:mod:`hwnas.distributed`),
:func:`search_epoch` runs on each with its shard of every batch.
"""

from __future__ import annotations

import math
import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch

from hwnas.datasets import Split
from hwnas.distributed import ONE, Ranks
from hwnas.errors import HwnasError
from hwnas.loops import batches


def resolve_device(name: str | None = None) -> torch.device:
    """``cuda`` when available (or asked), else ``cpu``.

    Raises:
        HwnasError: a device this torch build or machine does not have (``cuda`` without a
            CUDA GPU, ``cuda:N`` past the GPU count, ``mps`` off Apple silicon).
    """
    from hwnas.errors import HwnasError

    if not name:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise HwnasError(
                f"--set torch_device={name}: this torch ({torch.__version__}) sees no CUDA GPU"
            )
        if device.index is not None and device.index >= count:
            raise HwnasError(
                f"--set torch_device={name}: this machine has {count} CUDA GPU(s) (cuda:0"
                f"{f'..cuda:{count - 1}' if count > 1 else ''})"
            )
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise HwnasError(f"--set torch_device={name}: MPS is not available here")
    return device


def _proc_status_mib(key: str) -> float | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def rss_mib() -> float:
    """Resident memory of this process now, in MiB (``VmRSS``; else the peak)."""
    now = _proc_status_mib("VmRSS")
    return now if now is not None else peak_rss_mib()


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux ``/proc/self/clear_refs``), so
    that :func:`peak_rss_mib` reports the peak since now. Returns False where unsupported."""
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False


def peak_rss_mib() -> float:
    """Peak resident memory of this process, in MiB: ``VmHWM`` (since the last
    :func:`reset_peak_rss`), else ``ru_maxrss`` (since the start)."""
    peak = _proc_status_mib("VmHWM")
    if peak is not None:
        return peak
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass
class EpochStats:
    """One search epoch: mean losses, seconds, and memory in MiB: ``peak_mib`` the peak during
    the epoch (resident memory on CPU; allocated GPU memory on CUDA), ``start_mib`` the memory
    in use when it started."""

    epoch: int
    loss: float
    arch_loss: float
    hw_loss: float
    seconds: float
    peak_mib: float
    start_mib: float = 0.0


def search_epoch(
    strategy,
    train: Split,
    val: Split,
    batch_size: int,
    epoch: int,
    device: torch.device,
    ranks: Ranks = ONE,
    on_step: Callable[[], None] | None = None,
) -> EpochStats:
    """One epoch of supernet training by ``strategy`` (validation batches cycle alongside);
    ``on_step`` is called after each training step (progress).

    Across processes (``ranks``), every process runs this with its shard of each global batch
    of ``batch_size``; the losses returned are the means over the processes (the global
    batch's), the seconds and memory the largest of any process.

    Raises:
        HwnasError: the training loss is not finite (the training diverged).
    """
    rng = np.random.default_rng(10_000 + epoch)
    strategy.supernet.train()
    vals = _cycle(val, batch_size, rng, device, ranks)
    sums: dict[str, list[float]] = {}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device) / 2**20
    else:
        start = rss_mib()
        reset_peak_rss()
    t0 = time.perf_counter()
    for xb, yb in batches(train, batch_size, rng, device, ranks):
        out = strategy.step((xb, yb), next(vals) if strategy.bilevel else None)
        for k, v in out.items():
            sums.setdefault(k, []).append(v)
        if on_step is not None:
            on_step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - t0
    peak = (
        torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else peak_rss_mib()
    )

    def mean(k: str) -> float:
        return float(np.mean(sums[k])) if k in sums else float("nan")

    losses = [mean("loss"), mean("arch_loss"), mean("hw_loss")]
    if ranks.many:  # every rank took the same steps, so the same keys are set everywhere
        from hwnas.distributed import check_same, reduce

        losses = reduce(losses, device)
        seconds, peak, start = reduce([seconds, peak, start], device, op="max")
        check_same(strategy, device)
    if "loss" in sums and not math.isfinite(losses[0]):  # every rank raises alike
        raise HwnasError(
            f"supernet training diverged in epoch {epoch + 1} (training loss {losses[0]}): "
            "lower the learning rate (--set lr=..., lr_min=...) or the hardware term's "
            "weight; the supernet is not used"
        )
    return EpochStats(epoch, *losses, seconds, peak, start)


def _cycle(split: Split, batch_size: int, rng, device, ranks: Ranks = ONE) -> Iterator:
    """The split's mini-batches over and over (the validation batches of bilevel steps).

    Raises:
        HwnasError: a pass over the split gave no batch (fewer than 2 images per process:
            :func:`hwnas.loops.batches` skips those), which would otherwise loop forever.
    """
    while True:
        empty = True
        for b in batches(split, batch_size, rng, device, ranks):
            empty = False
            yield b
        if empty:
            raise HwnasError(
                f"the validation split's {len(split)} image(s) make no batch of 2 per process "
                "(batch norm needs 2): the architecture steps have nothing to train on; use "
                "more images"
            )
