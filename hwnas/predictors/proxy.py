"""Zero-shot proxy: latency (or energy) proportional to FLOPs, scaled by any measurements.

Without measurements its predictions are the networks' multiply-accumulates in millions (a
ranking, the classic FLOPs proxy of HW-NAS papers); after :meth:`FlopsProxy.fit` they are in
ms (or mJ): the log value is regressed on log FLOPs and log parameters (ridge), and the
standard deviation is the leave-one-out residual spread on the measurements, widened for an
ONNX model by :data:`FAMILY_LOG_SD`: FLOPs rank one family of networks well and others far less
(``--predictor flops --onnx mobilenetv2.onnx``, scaled on MobileNetV4 reference networks,
printed a 2% std for a value 27% below the measured one).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hwnas.errors import HwnasError
from hwnas.predictors.base import Model, Predictor, check_calibration
from hwnas.predictors.graph import COLUMN, GraphModel
from hwnas.spaces.base import Arch

MACS = [c for c in COLUMN if c.startswith("macs_")]

FAMILY_LOG_SD = 0.35
"""Log standard deviation added to a scaled FLOPs prediction of an ONNX model (a network of no
known family: the reference networks it was scaled on may be of another kind). FLOPs with a
ms-per-MAC scale fitted on the other networks were 22.0 / 22.5 / 42.1% off at the median on
three sets of networks written from their papers, and 29.0% on average on 11 well-known ones,
against the kernel-level predictor's single digits (docs/benchmarks.md, ``python
experiments/unseen_networks.py``; ``experiments/kernel_latency.py``); a median |log error| of
0.2-0.35 is a log standard deviation of 0.30-0.52 for a normal error. Architectures of a
space (a few-shot search's, and the calibration's own family) keep the fit's own spread."""


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
        """Scale the proxy on measured ``values`` (ms or mJ) of ``archs``.

        The spread is the leave-one-out residual of the ridge fit (each value's residual
        over one minus its leverage), root mean square in log space: the in-sample residual of
        3 coefficients on 9-10 values understated it. Fewer than 4 values: 0.5.

        Raises:
            HwnasError: values that are not positive, or not one per architecture.
        """
        v = check_calibration(list(archs), values)
        x = self._x(list(archs))
        lam = 1e-2 * np.eye(3)
        lam[0, 0] = 0.0
        inverse = np.linalg.inv(x.T @ x + lam)
        self._coef = inverse @ x.T @ np.log(v)
        if len(v) > 3:
            leverage = np.einsum("ij,jk,ik->i", x, inverse, x)
            loo = (np.log(v) - x @ self._coef) / np.maximum(1.0 - leverage, 1e-3)
            self._resid = float(np.sqrt(np.mean(loo**2)))
        else:
            self._resid = 0.5
        self.metric = metric
        return self

    def predict(self, archs: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        """(mean, std), (n,) each: MMACs and NaN before :meth:`fit`, ms (or mJ) after; an ONNX
        model's std widened by :data:`FAMILY_LOG_SD`."""
        x = self._x(list(archs))
        if self._coef is None:
            macs = np.exp(x[:, 1]) - 1.0
            return macs / 1e6, np.full(len(macs), np.nan)
        mean = np.exp(x @ self._coef)
        graph = np.array([isinstance(m, GraphModel) for m in archs], dtype=bool)
        rel = np.where(graph, np.hypot(self._resid, FAMILY_LOG_SD), self._resid)
        return mean, mean * rel
