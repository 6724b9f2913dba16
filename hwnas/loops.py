"""Loops of a network over a dataset split: mini-batches (sharded across the processes of a
torchrun job), batch-norm recalibration, top-1 accuracy and fine-tuning (of an extracted subnet
too: :func:`finetune_subnet`). Supernet training (:mod:`hwnas.supernet.train`), zoo training
(:mod:`hwnas.zoo.train`) and the candidates of the user's accuracy function
(:class:`hwnas.engine.evaluate.FunctionEvaluator`) share them.

On a CUDA device they run with mixed precision (``torch.autocast`` float16 and a ``GradScaler``)
and channels-last tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.datasets import Split
from hwnas.distributed import ONE, Ranks, shard


def to_device(x: np.ndarray, device: torch.device, image: bool = True) -> torch.Tensor:
    """``x`` as a tensor on ``device``: images (B, C, H, W) float32, channels-last on CUDA;
    with ``image=False`` as they are (labels (B,) int64)."""
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
    equal shard of every shuffled batch (:func:`hwnas.distributed.shard`).
    """
    order = rng.permutation(len(split)) if rng is not None else np.arange(len(split))
    for i in range(0, len(order), batch_size):
        idx = order[i : i + batch_size]
        if rng is not None:
            idx = shard(idx, ranks)
            if len(idx) < 2:
                continue  # batch norm needs two samples in training mode (on every rank)
        yield to_device(split.x[idx], device), to_device(split.y[idx], device, image=False)


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
    (:func:`recalibrate_bn`), then :func:`finetune` on the training split (SGD, Nesterov
    momentum, cosine schedule), so that the validation split can still choose between subnets.
    In place; returned in eval mode on the CPU.

    Args:
        model: the subnet: (B, C, H, W) images of ``data``'s shape -> (B, classes) logits.
        data: :class:`hwnas.datasets.DataSplits`.
        epochs: passes over the training split (0: recalibration only).
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
    finetune(model, data.train, epochs, lr, batch_size, seed, device)
    return model.cpu().eval()
