"""The run folder: ``pareto.csv``, ``pareto.png`` and ``summary.json`` (the model zoo is
:mod:`hwnas.zoo`)."""

from __future__ import annotations

import csv
import datetime
import io
from pathlib import Path
from typing import Any

from hwnas import jsonfile
from hwnas.cost_record import search_batch, unit_of
from hwnas.engine.loop import SearchResult, TrialRecord
from hwnas.engine.plot import LABELS, UNITS  # noqa: F401 - re-exported (labels of reports)
from hwnas.paths import write_atomic


def cost_metrics(result: SearchResult) -> list[str]:
    """The cost metrics any of ``result``'s trials has, in ``pareto.csv``'s column order."""
    return [m for m in ("latency_ms", "energy_mj") if any(m in r.costs for r in result.records)]


def pareto_rows(
    result: SearchResult, zoo: dict[str, dict[str, str]] | None = None
) -> list[dict[str, Any]]:
    """Rows of ``pareto.csv``: arch, accuracy, its source, ``test_accuracy`` (a supernet search's
    candidates: the test split, never used to choose), latency_ms, energy_mj (where known), sources,
    a supernet search's deployed networks' trained proxies (``trained_subnet_latency_ms``, its
    source), for live measurements the relative 95% interval in % (``latency_ms_ci95_pct``)
    and whether it met the profile's precision target (``latency_ms_precision_met``: true |
    false), the trial, and the zoo columns.

    Args:
        result: the search result.
        zoo: arch -> {"zoo": entry folder name or "", "chance_level": "true" | "false"}
            (:func:`hwnas.zoo.zoo_columns`): the ``zoo`` and ``chance_level`` columns (empty
            for an architecture it lacks).
    """
    metrics = cost_metrics(result)
    timed = [m for m in metrics if any(m in r.costs and r.costs[m].timed for r in result.records)]
    tested = any("test_accuracy" in r.attrs for r in result.pareto)
    # a supernet search's deployed networks: the trained proxy's own value beside each
    proxies = [f"trained_subnet_{m}" for m in metrics
               if any(f"trained_subnet_{m}" in r.attrs for r in result.pareto)]  # fmt: skip
    rows = []
    for r in result.pareto:
        row: dict[str, Any] = {
            "arch": r.arch,
            "accuracy": round(r.accuracy, 4),
            "accuracy_source": r.attrs.get("accuracy_source", ""),
        }
        if tested:
            test = r.attrs.get("test_accuracy")
            row["test_accuracy"] = round(float(test), 4) if test is not None else ""
        for m in metrics:
            cost = r.costs.get(m)
            row[m] = round(cost.value, 6) if cost is not None else ""
            row[f"{m}_source"] = cost.source if cost is not None else ""
        for key in proxies:
            value = r.attrs.get(key)
            row[key] = round(float(value), 6) if isinstance(value, (int, float)) else ""
            row[f"{key}_source"] = r.attrs.get(f"{key}_source", "")
        for m in timed:  # live measurements: the 95% interval and whether it met the target
            cost = r.costs.get(m)
            rel = cost.rel_ci95 if cost is not None else None
            met = cost.precision_met if cost is not None else None
            row[f"{m}_ci95_pct"] = round(100 * rel, 3) if rel is not None else ""
            row[f"{m}_precision_met"] = "" if met is None else str(met).lower()
        row["trial"] = r.number
        if zoo is not None:
            cells = zoo.get(r.arch, {})
            row["zoo"] = cells.get("zoo", "")
            row["chance_level"] = cells.get("chance_level", "")
        rows.append(row)
    return rows


def empty_front_header(result: SearchResult) -> list[str]:
    """The columns of ``pareto.csv`` when the front is empty (no architecture met the limit):
    the same leading columns a front's rows have, its costs included, so a reader of the file
    finds the columns it reads."""
    metrics = cost_metrics(result)
    if result.settings.metric not in metrics:
        metrics.insert(0, result.settings.metric)
    return ["arch", "accuracy", "accuracy_source",
            *[c for m in metrics for c in (m, f"{m}_source")], "trial"]  # fmt: skip


def write_csv(path: Path, rows: list[dict[str, Any]], header: list[str] | None = None) -> None:
    """Write ``rows`` as CSV to ``path`` whole or not at all (header from the first row, else
    ``header``; :func:`hwnas.paths.write_atomic`)."""
    buffer = io.StringIO(newline="")
    fields = list(rows[0]) if rows else (header or ["arch", "accuracy"])
    writer = csv.DictWriter(buffer, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    write_atomic(path, buffer.getvalue())


def plot_front(
    result: SearchResult,
    path: Path,
    device_label: str,
    accuracy_label: str | None = None,
    num_classes: int | None = None,
) -> None:
    """Scatter of all trials with the Pareto front and the best architecture highlighted, and
    chance-level trials set apart; axes carry units (:mod:`hwnas.engine.plot`).

    ``accuracy_label`` replaces the default y-axis label (accuracy measured on a user's data);
    ``num_classes`` is the accuracy's dataset's (for the chance level).
    """
    from hwnas.engine.plot import draw_front, front_spec

    draw_front(front_spec(result, device_label, accuracy_label, num_classes), path)


def record_summary(r: TrialRecord | None) -> dict[str, Any] | None:
    """A trial in ``summary.json``: arch, accuracy (%) and its source, each cost (ms, mJ) and
    its source, the trial number."""
    if r is None:
        return None
    out: dict[str, Any] = {
        "arch": r.arch,
        "accuracy": r.accuracy,
        "accuracy_source": r.attrs.get("accuracy_source", ""),
        "trial": r.number,
    }
    for m, cost in r.costs.items():
        out[m] = cost.value
        out[f"{m}_source"] = cost.source
    return out


def write_summary(
    path: Path,
    result: SearchResult,
    extra: dict[str, Any],
    elapsed_s: float,
    zoo_files: dict[str, str],
    num_classes: int | None = None,
) -> dict[str, Any]:
    """``summary.json``: settings, counts, the Pareto set size, ``best`` (the answer to
    ``best_rule`` over the front written to ``pareto.csv``; with ``num_classes``, its
    ``chance_level``: :func:`hwnas.datasets.is_chance_level`), the objective's unit, and
    ``zoo_files`` (the sha256 of each zoo entry's card and model, as
    :func:`hwnas.zoo.read.zoo_manifest` gives them)."""
    batch = search_batch(result.settings.device)
    units = {m: unit_of(m, batch) for m in UNITS}
    summary = {
        "settings": result.settings.as_dict(),
        "trials": {
            "budget": result.settings.budget,
            "completed": len(result.records),
            "in_study": result.trials_total,
            "completed_this_run": result.new_trials,
            # the --seed of every run that scored the study's architectures (a study resumed
            # or shared with another seed; trials scored before seeds were recorded: none)
            "seeds": sorted(
                {r.attrs["seed"] for r in result.records if type(r.attrs.get("seed")) is int}
            ),
        },
        "pareto_size": len(result.pareto),
        "best": record_summary(result.best),
        "best_rule": (
            "most accurate architecture with latency <= "
            f"{result.settings.max_latency:g} {units['latency_ms']}"
            if result.settings.max_latency is not None
            else "most accurate architecture on the Pareto front"
        ),
        # the unit of every number: the objective's metric and the columns of pareto.csv (a
        # table recorded at batch 32: "ms per batch of 32", as the zoo's cards say)
        "objective": {"metric": result.settings.metric, "unit": units[result.settings.metric]},
        "units": {"accuracy": "%", **units},
        "elapsed_s": round(elapsed_s, 2),
        # to the microsecond: `hwnas runs show latest` orders runs by it (two searches can
        # finish within one second)
        "finished_at": datetime.datetime.now().astimezone().strftime("%Y-%m-%dT%H:%M:%S.%f%z"),
        # what the run wrote to its zoo: `hwnas zoo verify` checks each entry against it
        "zoo_files": zoo_files,
        **extra,
    }
    best = summary["best"]
    if best and num_classes is not None:  # a best that guesses (a limit only such cells meet)
        from hwnas.datasets import is_chance_level

        summary["best"] = {**best, "chance_level": is_chance_level(best["accuracy"], num_classes)}
    write_atomic(path, jsonfile.dumps(summary, indent=2) + "\n")
    return summary
