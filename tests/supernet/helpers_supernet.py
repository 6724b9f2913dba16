"""Tiny supernet configurations shared by the supernet tests."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import torch

TINY = {
    "nasbench201": ({"channels": 4, "cells": 1}, (3, 16, 16)),
    "fbnet": ({"width": 0.125}, (3, 16, 16)),
    "ofa": ({"width": 0.25, "resolution_scale": 0.125}, (3, 16, 16)),
    # declared spaces (one supernet class for all; these two cover UIB and transformer blocks)
    "mobilenetv4": ({"width": 0.125}, (3, 16, 16)),
    "vit": ({"width": 0.125}, (3, 16, 16)),
}


def onnx_matches(model: torch.nn.Module, shape: tuple[int, ...], atol: float = 1e-4) -> float:
    """Export ``model`` with hwnas's exporter, run it in ONNX Runtime on a random batch of 3 and
    return the largest difference to PyTorch relative to the output scale (asserting it is
    within ``atol``): ``max|ort - torch| / max(1, max|torch|)``. Barely trained deep subnets can
    have logits in the hundreds, where float32 rounding alone exceeds an absolute 1e-4."""
    from hwnas.export import export_onnx

    model = model.eval()
    data = export_onnx(model, (1, *shape))
    x = np.random.default_rng(0).standard_normal((3, *shape)).astype(np.float32)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x})[0]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    diff = float(np.abs(got - want).max()) / max(1.0, float(np.abs(want).max()))
    assert got.shape == want.shape
    assert diff <= atol, f"ONNX Runtime differs from PyTorch by {diff}"
    return diff
