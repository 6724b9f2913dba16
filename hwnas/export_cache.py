"""Random-weight exports of a space's networks (:func:`export_random`: what a live device measures
and a random-weight zoo entry ships are one export), cached in the hwnas home by model hash.

A table search exports the same Pareto architectures again and again (every rerun, every
worker, every study on the same space and dataset). The ONNX bytes of a random-weight network
are fixed by its model hash (space, arch, dataset, input shape: see
:func:`hwnas.measure.arch_workload`), the weight seed, the opset and the torch release that
exported it, so they are exported once and read back after: a cached zoo entry costs no torch
import, no network build and no export.

Layout: ``$HWNAS_HOME/cache/onnx/<key>/`` with ``model.onnx``, ``meta.json`` (parameters,
FLOPs, input shape, and the sha256 of the two other files) and ``test.npz`` (the test input and
PyTorch's output on it). Entries are written into a temporary folder and renamed into place, so
concurrent workers never read a partial one; the folder may be deleted at any time.

An entry is used only when its files have the sha256 its ``meta.json`` recorded; any other
entry (a flipped bit, a truncated or replaced file) is deleted and the network exported again,
so a damaged cache never reaches a zoo or a measurement.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hwnas.export import OPSET, ExportedModel, content_hash, from_module
from hwnas.paths import hwnas_home

if TYPE_CHECKING:  # pragma: no cover
    from hwnas.spaces.base import Arch, SearchSpace

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

CACHE_VERSION = 3
"""Layout of an entry (2: ``meta.json`` holds the files' sha256; 3: its ``params`` are the
weights ``model.onnx`` holds and its ``flops`` the MACs of the layers it computes, not of every
layer PyTorch ran; entries of 1 and 2 are not read)."""


def cache_root() -> Path:
    """``$HWNAS_HOME/cache/onnx``."""
    return hwnas_home() / "cache" / "onnx"


def cache_key(model_hash: str, weight_seed: int) -> str:
    """Key of a random-weight export: the model hash, the weight seed, the opset, the torch
    release (read from package metadata, without importing torch) and the cache layout."""
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:  # pragma: no cover - torch is a dependency
        torch_version = "none"
    return content_hash(
        model_hash, f"seed{weight_seed}", f"opset{OPSET}", f"torch{torch_version}",
        f"v{CACHE_VERSION}",
    )  # fmt: skip


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def load(key: str) -> ExportedModel | None:
    """The cached export under ``key``, or None: missing, or damaged (files that do not have
    the sha256 recorded in its ``meta.json``, unreadable): a damaged entry is deleted, and the
    caller exports the network again."""
    folder = cache_root() / key
    if not folder.is_dir():
        return None
    try:
        meta = json.loads((folder / "meta.json").read_text())
        onnx_bytes = (folder / "model.onnx").read_bytes()
        test_bytes = (folder / "test.npz").read_bytes()
        digests = meta["sha256"]
        if digests != {"model.onnx": _sha256(onnx_bytes), "test.npz": _sha256(test_bytes)}:
            raise ValueError("sha256 differs from meta.json")
        with np.load(io.BytesIO(test_bytes), allow_pickle=False) as test:
            x, y = test["input"], test["output"]
        model = ExportedModel(
            onnx_bytes, int(meta["params"]), int(meta["flops"]), tuple(meta["input_shape"]), x, y
        )
    except (OSError, ValueError, KeyError, TypeError):
        shutil.rmtree(folder, ignore_errors=True)  # re-exported and stored again by the caller
        return None
    return model


def store(key: str, model: ExportedModel) -> None:
    """Keep ``model`` (random weights only) under ``key``; a failure to write is ignored (the
    cache is an optimisation)."""
    root = cache_root()
    from hwnas.paths import sweep_temporaries, temporary

    tmp = temporary(root / key)
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(root)  # what killed writers left
        buffer = io.BytesIO()
        np.savez(buffer, input=model.test_input, output=model.test_output)
        test_bytes = buffer.getvalue()
        (tmp / "model.onnx").write_bytes(model.onnx_bytes)
        (tmp / "test.npz").write_bytes(test_bytes)
        meta = {"params": model.params, "flops": model.flops,
                "input_shape": list(model.input_shape),
                "sha256": {"model.onnx": _sha256(model.onnx_bytes),
                           "test.npz": _sha256(test_bytes)}}  # fmt: skip
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.rename(tmp, root / key)  # fails if another process put the same key first
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def export_random(
    space: SearchSpace, arch: Arch, dataset: str, model_hash: str, shape: tuple[int, ...]
) -> tuple[ExportedModel, bool]:
    """The export of ``arch``'s network for ``dataset`` with the seeded random weights
    (:data:`WEIGHT_SEED`), from the cache when it was exported before, for a workload already
    hashed (``model_hash`` of :func:`hwnas.measure.arch_workload`, input ``shape``): what a live
    device measures and the zoo ships are one export.

    Torch's global generator is given back as it was (``hwnas.measure`` from a notebook
    reseeded the caller's: every later draw was the same whatever the caller's own seed).

    Returns:
        (the export, whether it came from the cache).
    """
    key = cache_key(model_hash, WEIGHT_SEED)
    found = load(key)
    if found is not None:
        return found, True
    import torch

    with torch.random.fork_rng(devices=[]):  # the seed is the export's, not the caller's
        torch.manual_seed(WEIGHT_SEED)
        model = space.build(arch, dataset)
        exported = from_module(model, tuple(shape), random_input(tuple(shape)))
    store(key, exported)
    return exported, False
