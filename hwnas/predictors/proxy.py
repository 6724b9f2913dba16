"""Zero-shot proxy: latency (or energy) proportional to FLOPs, scaled by any measurements.

Without measurements its predictions are the networks' multiply-accumulates in millions (a
ranking, the classic FLOPs proxy of HW-NAS papers); after :meth:`FlopsProxy.fit` they are in
ms (or mJ): the log value is regressed on log FLOPs and log parameters (ridge), and the
standard deviation is the residual spread on the measurements.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hwnas.errors import HwnasError
from hwnas.predictors.base import Model, Predictor, check_calibration
from hwnas.predictors.graph import COLUMN, GraphModel
from hwnas.spaces.base import Arch

MACS = [c for c in COLUMN if c.startswith("macs_")]


def graph_features(models: Sequence[Model]) -> np.ndarray:
    """Graph features of architectures (analytic, by space) and graph models, (n, F)."""
    from hwnas.predictors.featurize import get_featurizer

    rows: list[np.ndarray | None] = [None] * len(models)
    by_space: dict[str, list[int]] = {}
    for i, m in enumerate(models):
        if isinstance(m, GraphModel):
            rows[i] = m.features
        elif isinstance(m, Arch):
            by_space.setdefault(m.space, []).append(i)
        else:
            raise HwnasError(f"cannot read features of {m!r}")
    for space, idx in by_space.items():
        g = get_featurizer(space).graph([models[i] for i in idx])
        for i, row in zip(idx, g):
            rows[i] = row
    return np.stack(rows) if rows else np.zeros((0, len(COLUMN)))


def flops_params(models: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
    """(MACs, parameters) of each model: the PyTorch network's for architectures of a space
    (every operation it runs), the graph's for ONNX models."""
    from hwnas.predictors.featurize import get_featurizer

    g = graph_features(models)
    macs = g[:, [COLUMN[c] for c in MACS]].sum(1)
    by_space: dict[str, list[int]] = {}
    for i, m in enumerate(models):
        if isinstance(m, Arch):
            by_space.setdefault(m.space, []).append(i)
    for space, idx in by_space.items():
        macs[idx] = get_featurizer(space).flops([models[i] for i in idx])
    return macs, g[:, COLUMN["params"]]


class FlopsProxy(Predictor):
    """FLOPs/params proxy (zero-shot, or scaled by a few measurements)."""

    name = "flops"

    def __init__(self) -> None:
        self._coef: np.ndarray | None = None
        self._resid = 0.0
        self.metric = "mflops"

    @staticmethod
    def _x(models: Sequence[Model]) -> np.ndarray:
        macs, params = flops_params(models)
        return np.stack([np.ones(len(macs)), np.log(macs + 1.0), np.log(params + 1.0)], 1)

    def fit(self, archs: Sequence[Model], values, metric: str = "latency_ms") -> FlopsProxy:
        v = check_calibration(list(archs), values)
        x = self._x(list(archs))
        lam = 1e-2 * np.eye(3)
        lam[0, 0] = 0.0
        self._coef = np.linalg.solve(x.T @ x + lam, x.T @ np.log(v))
        self._resid = float(np.std(np.log(v) - x @ self._coef)) if len(v) > 3 else 0.5
        self.metric = metric
        return self

    def predict(self, archs: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        x = self._x(list(archs))
        if self._coef is None:
            macs = np.exp(x[:, 1]) - 1.0
            return macs / 1e6, np.full(len(macs), np.nan)
        mean = np.exp(x @ self._coef)
        return mean, mean * self._resid
