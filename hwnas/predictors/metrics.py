"""Scores of predicted against measured values (the few-shot latency prediction literature's:
Spearman rho and Kendall tau for ranking, MAPE and "±10% accuracy" for values), and the median
absolute percentage error, which a few near-zero values cannot dominate as they do the MAPE."""

from __future__ import annotations

import numpy as np


def scores(predicted: np.ndarray, measured: np.ndarray) -> dict[str, float]:
    """Spearman rho, Kendall tau (tau-b), MAPE (%), median absolute percentage error (%) and
    ±10% accuracy (share of predictions within 10% of the measured value).

    The MAPE is the mean of ``|p - y| / y``: on a table whose smallest values are near zero
    (raspi4 records 276 NAS-Bench-201 cells at 0.011 ms) a few of them decide it; the median
    (``median_ape_pct``) says what a typical architecture's error is.

    Args:
        predicted: shape (n,).
        measured: shape (n,), > 0.
    """
    from scipy.stats import kendalltau, spearmanr

    p = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(measured, dtype=np.float64)
    rel = np.abs(p - y) / y
    return {
        "spearman_rho": float(spearmanr(p, y)[0]),
        "kendall_tau": float(kendalltau(p, y)[0]),
        "mape_pct": float(100 * rel.mean()),
        "median_ape_pct": float(100 * np.median(rel)),
        "acc_10pct": float((rel <= 0.1).mean()),
    }
