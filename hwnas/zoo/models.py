"""Networks to zoo exports: random-weight networks of a space (through the export cache) and
trained modules. torch is imported only here, and only when a network must be exported."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np

from hwnas.spaces.base import Arch, SearchSpace
from hwnas.zoo import cache
from hwnas.zoo.entry import ExportedModel

if TYPE_CHECKING:  # pragma: no cover
    import torch

WEIGHT_SEED = 0
"""Seed of the random weights of exported networks (latency does not depend on the values):
what a live device measures (:func:`hwnas.measure.arch_workload`) and a random-weight zoo entry
ships are one export."""

TEST_INPUT_SEED = 0
"""Seed of the standard-normal test input of random-weight entries (numpy, so that a cached
export's stored output matches the input without torch)."""


def random_input(shape: tuple[int, ...]) -> np.ndarray:
    """The test input of a random-weight entry: standard normal (what normalised images look
    like), float32, ``shape``."""
    return np.random.default_rng(TEST_INPUT_SEED).standard_normal(shape).astype(np.float32)


def export_random(
    space: SearchSpace, arch: Arch, dataset: str, model_hash: str, shape: tuple[int, ...]
) -> tuple[ExportedModel, bool]:
    """The export of ``arch``'s network for ``dataset`` with the seeded random weights
    (:data:`WEIGHT_SEED`), from the cache when it was exported before, for a workload already
    hashed (``model_hash`` of :func:`hwnas.measure.arch_workload`, input ``shape``): what a live
    device measures and the zoo ships are one export.

    Returns:
        (the export, whether it came from the cache).
    """
    key = cache.cache_key(model_hash, WEIGHT_SEED)
    found = cache.load(key)
    if found is not None:
        return found, True
    import torch

    torch.manual_seed(WEIGHT_SEED)
    model = space.build(arch, dataset)
    exported = from_module(model, tuple(shape), random_input(tuple(shape)))
    cache.store(key, exported)
    return exported, False


def from_module(
    model: torch.nn.Module,
    input_shape: tuple[int, ...],
    test_input: np.ndarray,
    test_label: int | None = None,
    keep_weights: bool = False,
) -> ExportedModel:
    """Export a module: ONNX bytes, parameters, FLOPs, and its own output on ``test_input``
    (the reference ONNX Runtime is checked against).

    Args:
        model: the network (put in eval mode, on the CPU).
        input_shape: (1, C, H, W).
        test_input: float32, shape ``input_shape``.
        test_label: the true label of ``test_input`` (a real image), if known.
        keep_weights: also keep the state dict (``torch.save`` bytes) for ``weights.pt``.
    """
    import torch

    # the module attribute, so that tests can make an export fail part-way
    from hwnas import export as exporting

    model = model.cpu().eval()
    x = torch.from_numpy(np.array(test_input, dtype=np.float32))
    output, params, macs = exporting.forward_counted(model, x)
    output, flops = output.numpy(), macs // max(1, x.shape[0])  # per image
    data = exporting.export_onnx(model, input_shape)
    weights = None
    if keep_weights:
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        weights = buffer.getvalue()
    return ExportedModel(
        data, params, flops, tuple(input_shape), test_input, output, weights, test_label
    )
