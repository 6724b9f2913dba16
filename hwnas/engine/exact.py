"""``exact``: the exact Pareto front, where accuracy and cost are tabulated for the whole space.

NAS-Bench-201 (Dong & Yang, ICLR 2020) gives the trained accuracy of all 15,625 architectures,
and HW-NAS-Bench (Li et al., ICLR 2021) and the other recorded devices their latency (or
energy) on the device: the accuracy/cost Pareto front is then not something to search for but
a non-dominated filter over two columns (:func:`hwnas.engine.pareto.pareto_order`, moocore),
milliseconds of NumPy. Under ``--max-latency`` it is the front of the architectures within the
limit.

``hwnas search --strategy exact`` runs that front through the usual pipeline: its architectures,
by cost, are proposed to the engine (:class:`hwnas.engine.loop.ProposalSampler`, as supernet
strategies hand over their candidates), scored from the tables, and recorded in the study, the
run folder and the zoo like any search. The number of trials is the size of the front (a
``--budget`` below it is refused: the front's cheapest few alone would be cut short); the
strategy reads every tabulated accuracy, so its accuracy queries are not comparable with a
search's. It is the reference a search strategy's front is measured against
(``experiments/search_quality.py`` computes the same front).

A space or device without full tables (a live device, a predictor's costs, a space without an
accuracy table) is refused in one line before anything is opened (:func:`check`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch


def check(settings: Any, space: Any, device: Any, fewshot: Any = None) -> None:
    """Refuse, before any work, a search whose accuracy and cost are not tabulated for every
    architecture of the space.

    Args:
        settings: the :class:`hwnas.engine.loop.SearchSettings`.
        space: the search space.
        device: the device.
        fewshot: the few-shot plan, if the search would predict costs (a predictor or a
            measurement budget).

    Raises:
        HwnasError: one line naming what is missing, or a budget below the front's size.
    """
    from hwnas.spaces import TabulatedSpace, ability

    why = "--strategy exact needs accuracy and cost tabulated for every architecture"
    if ability(space, TabulatedSpace) is None:
        raise HwnasError(f"{why}: space '{space.name}' has no accuracy table")
    if fewshot is not None:
        raise HwnasError(
            f"{why}: --predictor and --measurement-budget give predicted costs, not the table"
        )
    metrics = [settings.metric] + (["latency_ms"] if settings.max_latency is not None else [])
    for metric in dict.fromkeys(metrics):
        column = device.table(space.name, metric)
        if column is None:
            raise HwnasError(
                f"{why}: device '{device.name}' has no recorded {metric} table for space "
                f"'{space.name}' (`hwnas devices` lists the recorded ones)"
            )
        _complete(np.asarray(column, dtype=float), len(space), f"{device.name} {metric}", why)
    accuracy = np.asarray(space.table_accuracy(settings.dataset), dtype=float)
    _complete(accuracy, len(space), f"{space.name} {settings.dataset} accuracy", why)
    cost = np.asarray(device.table(space.name, settings.metric), dtype=float)
    latency = None
    if settings.max_latency is not None:
        latency = np.asarray(device.table(space.name, "latency_ms"), dtype=float)
    size = len(exact_front(accuracy, cost, latency, settings.max_latency))
    if size > settings.budget:  # its cheapest few alone would be a front cut short, silently
        raise HwnasError(
            f"--strategy exact scores the exact front, {size} architectures here, more than "
            f"--budget {settings.budget}: give --budget {size} (or more)"
        )


def _complete(column: np.ndarray, size: int, what: str, why: str) -> None:
    missing = int(np.sum(~np.isfinite(column))) + max(0, size - len(column))
    if missing:
        raise HwnasError(f"{why}: the {what} table lacks {missing:,} of {size:,} architectures")


def exact_front(
    accuracy: np.ndarray,
    cost: np.ndarray,
    latency: np.ndarray | None = None,
    max_latency: float | None = None,
) -> np.ndarray:
    """Indices of the Pareto-optimal architectures (accuracy up, cost down), by cost.

    Args:
        accuracy: accuracy (%) of every architecture, shape (n,), in index order.
        cost: cost (ms or mJ) of every architecture, shape (n,).
        latency: latency (ms), shape (n,), for ``max_latency`` (default: ``cost``).
        max_latency: keep only architectures with latency <= this (ms).

    Returns:
        Architecture indices, shape (k,), by cost ascending (then accuracy descending); equal
        points on the front are all kept.
    """
    from hwnas.engine.pareto import pareto_order

    feasible = np.arange(len(accuracy))
    if max_latency is not None:
        feasible = np.flatnonzero((cost if latency is None else latency) <= max_latency)
    return feasible[pareto_order(accuracy[feasible], cost[feasible])]


def exact(seed: int | None, context: Any = None, **options: Any):
    """The ``exact`` strategy: a :class:`~hwnas.engine.loop.ProposalSampler` over the exact
    front of ``context`` (:class:`hwnas.engine.costs.CostContext` with the device's tables).

    Args:
        seed: unused (nothing is random).
        context: the space, its dataset, the cost tables and the latency limit.

    Raises:
        HwnasError: the context has no cost table or no dataset (checked before by
            :func:`check` for ``hwnas search``).
    """
    from hwnas.engine.loop import ProposalSampler

    cost = context.cost.full_table() if context and context.cost else None
    if cost is None or not context.dataset:
        raise HwnasError("--strategy exact needs the device's recorded cost table")
    latency = None
    if context.max_latency is not None:
        model = context.latency or (context.cost if context.cost.metric == "latency_ms" else None)
        latency = model.full_table() if model is not None else None
        if latency is None:
            raise HwnasError("--strategy exact under --max-latency needs the latency table")
    space = context.space
    accuracy = np.asarray(space.table_accuracy(context.dataset), dtype=float)
    front = exact_front(accuracy, cost, latency, context.max_latency)
    archs: list[Arch] = [space.arch_at(int(i)) for i in front]
    return ProposalSampler(space, archs)
