"""Latency and energy predictors, by name.

:data:`PREDICTORS` holds the predictor kinds: ``flops`` (zero-shot FLOPs/params proxy),
``regressor`` (per-device scikit-learn regressor for devices with many measurements),
``meta`` (the meta-learned few-shot predictor, loaded from an artifact) and ``kernel`` (the
kernel-level predictor of a live ONNX Runtime device, :mod:`hwnas.predictors.kernels`).
Artifacts live in ``latency_predictors/<name>/`` (shipped) and ``<hwnas
home>/latency_predictors/<name>/`` (user-trained), each a ``card.json`` and ``weights.npz``;
``--predictor`` takes an artifact name, a folder path or a predictor kind.
"""

from __future__ import annotations

from hwnas.predictors.artifacts import (
    DECLARED_ARTIFACT,
    PREDICTORS,
    artifact_folders,
    list_artifacts,
    load_predictor,
    resolve_artifact,
)
from hwnas.predictors.base import MIN_CALIBRATION, Model, Predictor

__all__ = [
    "MIN_CALIBRATION",
    "DECLARED_ARTIFACT",
    "PREDICTORS",
    "Model",
    "Predictor",
    "artifact_folders",
    "list_artifacts",
    "load_predictor",
    "resolve_artifact",
]
