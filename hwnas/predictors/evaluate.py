"""Scoring predictors the HELP way: adapt on the reference set of an unseen device, predict
every architecture of the space, compare with the device's recorded values."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from hwnas.predictors.base import Predictor
from hwnas.predictors.data import Column, measured_reference
from hwnas.predictors.metrics import scores
from hwnas.spaces import get_space


def evaluate_columns(
    make: Callable[[], Predictor], space: str, columns: Sequence[Column]
) -> dict[str, dict[str, float]]:
    """Scores of a fresh predictor adapted to each column from its reference-set values
    (:func:`hwnas.predictors.data.measured_reference`: an isomorphic cell stands in for a
    reference cell the table lacks).

    Args:
        make: returns an un-adapted predictor.
        space: the space.
        columns: the devices to score (their values on all architectures).

    Returns:
        column key -> {spearman_rho, kendall_tau, mape_pct, median_ape_pct, acc_10pct,
        coverage_2std}, over
        every architecture with a recorded value.
    """
    sp = get_space(space)
    archs = sp.all_archs()
    out = {}
    for col in columns:
        ref = measured_reference(space, col.values)
        pred = make().fit([archs[i] for i in ref], col.values[ref], col.metric)
        mean, std = pred.predict(archs)
        ok = np.isfinite(col.values) & (col.values > 0)
        s = scores(mean[ok], col.values[ok])
        s["coverage_2std"] = float((np.abs(mean[ok] - col.values[ok]) <= 2 * std[ok]).mean())
        out[col.key] = s
    return out


def mean_scores(per_column: dict[str, dict[str, float]]) -> dict[str, float]:
    """Mean of each score over columns."""
    keys = next(iter(per_column.values())).keys()
    return {k: float(np.mean([s[k] for s in per_column.values()])) for k in keys}
