"""Pareto fronts and hypervolume for two objectives (accuracy up, cost down)."""

from __future__ import annotations

import numpy as np


def pareto_mask(accuracy: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Which points are Pareto-optimal when maximising accuracy and minimising cost.

    A point is dominated if another is at least as accurate and at most as costly, and strictly
    better in one of the two. Points equal in both objectives do not dominate each other.

    Args:
        accuracy: shape (n,), higher is better (%).
        cost: shape (n,), lower is better (ms or mJ).

    Returns:
        Boolean mask, shape (n,).
    """
    accuracy = np.asarray(accuracy, dtype=float)
    cost = np.asarray(cost, dtype=float)
    n = len(accuracy)
    mask = np.zeros(n, dtype=bool)
    if n == 0:
        return mask
    # Sort by cost ascending, then accuracy descending; sweep keeping the best accuracy so far.
    order = np.lexsort((-accuracy, cost))
    best = -np.inf
    i = 0
    while i < n:
        # group of equal cost
        j = i
        while j < n and cost[order[j]] == cost[order[i]]:
            j += 1
        group = order[i:j]
        top = accuracy[group].max()
        if top > best:
            mask[group[accuracy[group] == top]] = True
            best = top
        i = j
    return mask


def hypervolume(
    accuracy: np.ndarray, cost: np.ndarray, ref_accuracy: float, ref_cost: float
) -> float:
    """Area dominated by the points and bounded by the reference point (ref_accuracy, ref_cost).

    Units: accuracy-% x cost unit. Points worse than the reference in either objective add
    nothing.
    """
    mask = pareto_mask(accuracy, cost)
    pts = sorted(zip(np.asarray(cost)[mask], np.asarray(accuracy)[mask]))
    area, prev_acc = 0.0, ref_accuracy
    for c, a in pts:  # cost ascending, accuracy ascending along the front
        if c >= ref_cost or a <= prev_acc:
            continue
        area += (ref_cost - c) * (a - prev_acc)
        prev_acc = a
    return area
