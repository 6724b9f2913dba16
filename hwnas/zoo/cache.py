"""A cache of exported random-weight networks in the hwnas home, keyed by model hash.

A table search exports the same Pareto architectures again and again (every rerun, every
worker, every study on the same space and dataset). The ONNX bytes of a random-weight network
are fixed by its model hash (space, arch, dataset, input shape: see
:func:`hwnas.measure.arch_workload`), the weight seed, the opset and the torch release that
exported it, so they are exported once and read back after: a cached zoo entry costs no torch
import, no network build and no export.

Layout: ``$HWNAS_HOME/cache/onnx/<key>/`` with ``model.onnx``, ``meta.json`` (parameters,
FLOPs, input shape) and ``test.npz`` (the test input and PyTorch's output on it). Entries are
written into a temporary folder and renamed into place, so concurrent workers never read a
partial one; the folder may be deleted at any time.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from importlib import metadata
from pathlib import Path

import numpy as np

from hwnas.export import OPSET, content_hash
from hwnas.paths import hwnas_home
from hwnas.zoo.entry import ExportedModel

CACHE_VERSION = 1


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


def load(key: str) -> ExportedModel | None:
    """The cached export under ``key``, or None (missing, or unreadable: then re-exported)."""
    folder = cache_root() / key
    try:
        meta = json.loads((folder / "meta.json").read_text())
        onnx_bytes = (folder / "model.onnx").read_bytes()
        with np.load(folder / "test.npz") as test:
            x, y = test["input"], test["output"]
    except (OSError, ValueError, KeyError):
        return None
    return ExportedModel(
        onnx_bytes, int(meta["params"]), int(meta["flops"]), tuple(meta["input_shape"]), x, y
    )


def store(key: str, model: ExportedModel) -> None:
    """Keep ``model`` (random weights only) under ``key``; a failure to write is ignored (the
    cache is an optimisation)."""
    root = cache_root()
    from hwnas.paths import sweep_temporaries, temporary

    tmp = temporary(root / key)
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(root)  # what killed writers left
        (tmp / "model.onnx").write_bytes(model.onnx_bytes)
        meta = {"params": model.params, "flops": model.flops,
                "input_shape": list(model.input_shape)}  # fmt: skip
        (tmp / "meta.json").write_text(json.dumps(meta))
        buffer = io.BytesIO()
        np.savez(buffer, input=model.test_input, output=model.test_output)
        (tmp / "test.npz").write_bytes(buffer.getvalue())
        os.rename(tmp, root / key)  # fails if another process put the same key first
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
