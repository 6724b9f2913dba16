"""Pareto fronts and hypervolume for two objectives (accuracy up, cost down).

Both come from moocore (López-Ibáñez et al.; the C implementations of the EAF and hypervolume
reference codes of Fonseca, Paquete and López-Ibáñez, with a NumPy interface): one maintained,
vectorised implementation for the engine, the reports, the one-shot strategy and the benchmarks.
It was chosen over pymoo (a whole optimisation framework to import for two functions) and over
Optuna's helpers (private modules, ``optuna.study._multi_objective``, with no stability promise).
"""

from __future__ import annotations

import numpy as np

_MAXIMISE = (True, False)  # (accuracy, cost)


def _points(accuracy: np.ndarray, cost: np.ndarray) -> np.ndarray:
    accuracy = np.asarray(accuracy, dtype=float).reshape(-1)
    cost = np.asarray(cost, dtype=float).reshape(-1)
    if accuracy.shape != cost.shape:
        raise ValueError(f"accuracy {accuracy.shape} and cost {cost.shape} differ in length")
    return np.column_stack([accuracy, cost])


def pareto_mask(accuracy: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Which points are Pareto-optimal when maximising accuracy and minimising cost.

    A point is dominated if another is at least as accurate and at most as costly, and strictly
    better in one of the two. Points equal in both objectives do not dominate each other (all
    copies of a non-dominated point are kept: moocore's ``keep_weakly``).

    Args:
        accuracy: shape (n,), higher is better (%).
        cost: shape (n,), lower is better (ms or mJ).

    Returns:
        Boolean mask, shape (n,).

    Raises:
        ValueError: the two arrays differ in length.
    """
    import moocore

    points = _points(accuracy, cost)
    if len(points) == 0:
        return np.zeros(0, dtype=bool)
    return np.asarray(
        moocore.is_nondominated(points, maximise=_MAXIMISE, keep_weakly=True), dtype=bool
    )


def pareto_order(accuracy: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Indices of the Pareto-optimal points, by cost ascending (then accuracy descending).

    Shapes: (n,), (n,) -> (k,), k = number of Pareto-optimal points.
    """
    accuracy = np.asarray(accuracy, dtype=float).reshape(-1)
    cost = np.asarray(cost, dtype=float).reshape(-1)
    front = np.flatnonzero(pareto_mask(accuracy, cost))
    return front[np.lexsort((-accuracy[front], cost[front]))]


def hypervolume(
    accuracy: np.ndarray, cost: np.ndarray, ref_accuracy: float, ref_cost: float
) -> float:
    """Area dominated by the points and bounded by the reference point (ref_accuracy, ref_cost).

    Units: accuracy-% x cost unit. Points worse than the reference in either objective add
    nothing.
    """
    import moocore

    points = _points(accuracy, cost)
    inside = (points[:, 0] > ref_accuracy) & (points[:, 1] < ref_cost)
    if not inside.any():
        return 0.0
    return float(
        moocore.hypervolume(points[inside], ref=[ref_accuracy, ref_cost], maximise=_MAXIMISE)
    )
