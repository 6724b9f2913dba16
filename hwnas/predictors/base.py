"""The predictor interface: fit (or adapt) on measurements, predict with an uncertainty.

A predictor estimates one device metric (latency in ms or energy in mJ) of architectures of a
search space (:class:`hwnas.spaces.Arch`) or of arbitrary networks known by their graph
(:class:`hwnas.predictors.graph.GraphModel`, read from ONNX). Predictions come with a standard
deviation in the same unit, so that search can tell a confident estimate from a guess.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from hwnas.errors import HwnasError
from hwnas.predictors.graph import GraphModel
from hwnas.spaces.base import Arch

Model = Arch | GraphModel
"""What a predictor takes: an architecture of a space or a model known by its ONNX graph."""

MIN_CALIBRATION = 3
"""Fewest measurements a predictor adapts from."""

DEFAULT_CALIBRATION = 20
"""Most stored values a device that cannot measure (an imported one) is adapted on, by
``hwnas predict --device`` and by a few-shot search at its default measurement budget
(:data:`hwnas.engine.fewshot.DEFAULT_MEASUREMENT_BUDGET`): its reference set first."""


class Predictor(ABC):
    """Estimates a device metric of architectures (two required methods).

    Attributes:
        metric: "latency_ms" or "energy_mj" once fitted (the unit of predictions).
        name: a short label saying what made the predictions (an artifact name, "flops"...).
        card: an artifact's model card (devices, split, scores, the dataset its networks are
            built for); empty for predictors that are not artifacts.
    """

    metric: str = "latency_ms"
    name: str = ""
    card: dict = {}  # noqa: RUF012 (read-only default; artifacts set their own)
    path: Path | None = None
    """The artifact folder it was loaded from (None for predictors that are not artifacts)."""

    @abstractmethod
    def fit(self, archs: Sequence[Model], values: np.ndarray, metric: str = "latency_ms"):
        """Fit or adapt on measured values of ``archs`` on one device (ms or mJ, all > 0).

        Returns:
            self.

        Raises:
            HwnasError: fewer than :data:`MIN_CALIBRATION` values, non-positive values, or
                architectures the predictor cannot read.
        """

    @abstractmethod
    def predict(self, archs: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        """Predicted value and its standard deviation for each architecture.

        Returns:
            (mean, std), each of shape (len(archs),), in the unit of :attr:`metric`.
        """

    def suspect_values(self, threshold: float = 0.5) -> dict[int, float]:
        """Values given to the last :meth:`fit` that are likely gross errors (a measurement
        taken while the device throttled, a glitch in a table), which the fit discounted.

        Returns:
            index into the fitted values -> posterior probability that it is a gross error,
            for those with probability >= ``threshold``; empty for predictors without an
            error model.
        """
        return {}


def check_calibration(archs: Sequence[Model], values) -> np.ndarray:
    """Validate measurements for :meth:`Predictor.fit`; returns them as float64.

    Raises:
        HwnasError: length mismatch, fewer than 3 values, non-finite or non-positive values.
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if len(v) != len(archs):
        raise HwnasError(f"{len(archs)} architectures but {len(v)} measured values")
    if len(v) < MIN_CALIBRATION:
        raise HwnasError(
            f"need at least {MIN_CALIBRATION} measurements to adapt a predictor, got {len(v)}"
        )
    bad = np.nonzero(~np.isfinite(v) | (v <= 0))[0]
    if len(bad):
        raise HwnasError(
            f"measured values must be positive numbers; '{archs[bad[0]]}' has {v[bad[0]]}"
        )
    return v
