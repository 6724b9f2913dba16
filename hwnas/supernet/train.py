"""Training loops: supernet search epochs, batch-norm recalibration, evaluation, fine-tuning.

On a CUDA device the same loops run with mixed precision (``torch.autocast`` float16 and a
``GradScaler``) and channels-last tensors. Across processes (:mod:`hwnas.supernet.distributed`),
:func:`search_epoch` runs on each with its shard of every batch.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.datasets import Split
from hwnas.supernet.distributed import ONE, Ranks, shard


def resolve_device(name: str | None = None) -> torch.device:
    """``cuda`` when available (or asked), else ``cpu``."""
    if name:
        return torch.device(name)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def to_device(x: np.ndarray, device: torch.device, image: bool = True) -> torch.Tensor:
    t = torch.from_numpy(x).to(device, non_blocking=True)
    if image and device.type == "cuda":
        t = t.contiguous(memory_format=torch.channels_last)
    return t


def batches(
    split: Split,
    batch_size: int,
    rng: np.random.Generator | None,
    device: torch.device,
    ranks: Ranks = ONE,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Mini-batches of a split (shuffled when ``rng`` is given).

    Across processes (``ranks``), ``batch_size`` is the global batch and each process gets its
    equal shard of every shuffled batch (:func:`hwnas.supernet.distributed.shard`).
    """
    order = rng.permutation(len(split)) if rng is not None else np.arange(len(split))
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        if rng is not None:
            idx = shard(idx, ranks)
            if len(idx) < 2:
                continue  # batch norm needs two samples in training mode (on every rank)
        yield to_device(split.x[idx], device), to_device(split.y[idx], device, image=False)


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
        from hwnas.supernet.distributed import check_same, reduce

        losses = reduce(losses, device)
        seconds, peak, start = reduce([seconds, peak, start], device, op="max")
        check_same(strategy, device)
    return EpochStats(epoch, *losses, seconds, peak, start)


def _cycle(split: Split, batch_size: int, rng, device, ranks: Ranks = ONE) -> Iterator:
    while True:
        yield from batches(split, batch_size, rng, device, ranks)


@torch.no_grad()
def recalibrate_bn(
    forward: Callable[[torch.Tensor], torch.Tensor],
    model: nn.Module,
    split: Split,
    batch_size: int = 64,
    max_batches: int = 10,
    device: torch.device | None = None,
) -> None:
    """Re-estimate batch-norm statistics of ``model`` with forward passes over ``split``
    (cumulative averages over up to ``max_batches`` batches), as Once-for-All does for every
    subnet before evaluating it."""
    device = device or torch.device("cpu")
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    saved = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    was = model.training
    model.train()
    rng = np.random.default_rng(0)
    for i, (xb, _) in enumerate(batches(split, batch_size, rng, device)):
        if i >= max_batches:
            break
        forward(xb)
    for m, mom in zip(bns, saved):
        m.momentum = mom
    model.train(was)
    model.eval()


@torch.no_grad()
def accuracy(
    forward: Callable[[torch.Tensor], torch.Tensor],
    split: Split,
    batch_size: int = 256,
    device: torch.device | None = None,
) -> float:
    """Top-1 accuracy (%) of ``forward`` on ``split``."""
    device = device or torch.device("cpu")
    correct = 0
    for xb, yb in batches(split, batch_size, None, device):
        with torch.autocast("cuda", dtype=torch.float16, enabled=device.type == "cuda"):
            correct += int((forward(xb).argmax(1) == yb).sum())
    return 100.0 * correct / max(1, len(split))


def finetune(
    model: nn.Module,
    split: Split,
    epochs: int,
    lr: float = 0.02,
    batch_size: int = 64,
    seed: int = 0,
    device: torch.device | None = None,
    resize: int | None = None,
) -> nn.Module:
    """Train ``model`` for ``epochs`` on ``split`` (SGD, momentum 0.9, nesterov, cosine
    learning rate, weight decay 3e-4); returns it in eval mode. ``resize`` resizes the
    images to ``resize`` x ``resize`` first (subnets with their own input resolution)."""
    device = device or torch.device("cpu")
    if epochs <= 0:
        return model.eval()
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=3e-4, nesterov=True)
    steps = epochs * max(1, int(np.ceil(len(split) / batch_size)))
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
    scaler = torch.amp.GradScaler("cuda") if device.type == "cuda" else None
    rng = np.random.default_rng(seed)
    model.train()
    for _ in range(epochs):
        for xb, yb in batches(split, batch_size, rng, device):
            if resize is not None and xb.shape[-1] != resize:
                xb = F.interpolate(xb, size=(resize, resize), mode="bilinear", align_corners=False)
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.float16, enabled=scaler is not None):
                loss = F.cross_entropy(model(xb), yb)
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
            sched.step()
    return model.eval()


def merge(a: Split, b: Split) -> Split:
    """Concatenation of two splits."""
    return Split(np.concatenate([a.x, b.x]), np.concatenate([a.y, b.y]))


def resized_forward(model: nn.Module, side: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """``model`` applied after resizing images to ``side`` x ``side`` (bilinear)."""

    def forward(x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != side:
            x = F.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
        return model(x)

    return forward


def finetune_subnet(
    model: nn.Module,
    data,
    epochs: int = 1,
    lr: float = 0.02,
    batch_size: int = 64,
    seed: int = 0,
    device: torch.device | None = None,
) -> nn.Module:
    """A short fine-tune of an extracted subnet (inherited weights), as a supernet search does
    before scoring its candidates: batch norm recalibrated on the training split
    (:func:`recalibrate_bn`), then :func:`finetune` on the training and validation splits
    (SGD, Nesterov momentum, cosine schedule). In place; returned in eval mode on the CPU.

    Args:
        model: the subnet: (B, C, H, W) images of ``data``'s shape -> (B, classes) logits.
        data: :class:`hwnas.datasets.DataSplits`.
        epochs: passes over train + validation (0: recalibration only).
        lr: initial learning rate.
        batch_size: mini-batch size.
        seed: shuffling seed.
        device: torch device (default: the CPU).

    Raises:
        hwnas.errors.HwnasError: images of another shape than the model takes.
    """
    from hwnas.errors import HwnasError

    device = device or torch.device("cpu")
    model = model.to(device)
    try:
        with torch.no_grad():
            model.eval()(to_device(data.train.x[:2], device))
    except RuntimeError as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise HwnasError(
            f"the subnet does not take {data.name}'s images of shape {data.image_shape}: {first}"
        ) from None
    recalibrate_bn(model, model, data.train, device=device)
    finetune(model, merge(data.train, data.val), epochs, lr, batch_size, seed, device)
    return model.cpu().eval()
