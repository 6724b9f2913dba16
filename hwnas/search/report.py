"""The run folder: ``pareto.csv``, ``pareto.png`` and ``summary.json`` (the model zoo is
:mod:`hwnas.zoo`)."""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.search.engine import SearchResult, TrialRecord

UNITS = {"latency_ms": "ms", "energy_mj": "mJ"}
LABELS = {"latency_ms": "latency", "energy_mj": "energy per inference"}


def pareto_rows(
    result: SearchResult, zoo: dict[str, dict[str, str]] | None = None
) -> list[dict[str, Any]]:
    """Rows of ``pareto.csv``: arch, accuracy, latency_ms, energy_mj (where known), sources,
    the trial, and the zoo columns.

    Args:
        result: the search result.
        zoo: arch -> {"zoo": entry folder name or "", "chance_level": "true" | "false"}
            (:func:`hwnas.zoo.zoo_columns`): the ``zoo`` and ``chance_level`` columns (empty
            for an architecture it lacks).
    """
    metrics = [m for m in ("latency_ms", "energy_mj") if any(m in r.costs for r in result.records)]
    rows = []
    for r in result.pareto:
        row: dict[str, Any] = {
            "arch": r.arch,
            "accuracy": round(r.accuracy, 4),
            "accuracy_source": r.attrs.get("accuracy_source", ""),
        }
        for m in metrics:
            row[m] = round(r.costs[m], 6) if m in r.costs else ""
            row[f"{m}_source"] = r.attrs.get(f"{m}_source", "")
        row["trial"] = r.number
        if zoo is not None:
            cells = zoo.get(r.arch, {})
            row["zoo"] = cells.get("zoo", "")
            row["chance_level"] = cells.get("chance_level", "")
        rows.append(row)
    return rows


def _temporary(path: Path) -> Path:
    """A sibling of ``path`` to write first and rename over it, so that a reader (or another
    worker writing the same run folder) never sees a half-written file."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """Write ``rows`` as CSV to ``path`` atomically (header from the first row)."""
    tmp = _temporary(path)
    with open(tmp, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["arch", "accuracy"])
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def plot_front(
    result: SearchResult, path: Path, device_label: str, accuracy_label: str | None = None
) -> None:
    """Scatter of all trials with the Pareto front highlighted; axes carry units.

    ``accuracy_label`` replaces the default y-axis label (accuracy measured on a user's data).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result.settings
    metric = s.metric
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    xs = [r.costs[metric] for r in result.records]
    ys = [r.accuracy for r in result.records]
    ax.scatter(xs, ys, s=10, color="0.7", label=f"trials ({len(xs)})")
    fx = [r.costs[metric] for r in result.pareto]
    fy = [r.accuracy for r in result.pareto]
    ax.step(fx, fy, where="post", color="C3", lw=1.2)
    ax.scatter(fx, fy, s=28, color="C3", zorder=3, label=f"Pareto front ({len(fx)})")
    if s.max_latency is not None and metric == "latency_ms":
        ax.axvline(
            s.max_latency, color="C0", ls="--", lw=1, label=f"max latency {s.max_latency:g} ms"
        )
    if ys:  # keep degenerate networks (chance accuracy) from flattening the interesting part
        low = float(np.percentile(ys, 2))
        ax.set_ylim(bottom=max(0.0, low - 2.0), top=max(ys) + 1.0)
    ax.set_xlabel(f"{LABELS[metric]} on {device_label} ({UNITS[metric]})")
    ax.set_ylabel(accuracy_label or f"{s.dataset} top-1 accuracy (%)")
    ax.set_title(f"{s.space}: accuracy vs {LABELS[metric]}, {s.strategy}, {len(xs)} architectures")
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    tmp = _temporary(path)
    fig.savefig(tmp, format=path.suffix.lstrip(".") or "png")
    plt.close(fig)
    os.replace(tmp, path)


def record_summary(r: TrialRecord | None) -> dict[str, Any] | None:
    if r is None:
        return None
    out: dict[str, Any] = {"arch": r.arch, "accuracy": r.accuracy, "trial": r.number}
    for m, v in r.costs.items():
        out[m] = v
    return out


def write_summary(
    path: Path, result: SearchResult, extra: dict[str, Any], elapsed_s: float
) -> dict[str, Any]:
    """``summary.json``: settings, counts, the Pareto set size and ``best``."""
    summary = {
        "settings": result.settings.as_dict(),
        "trials": {
            "budget": result.settings.budget,
            "completed": len(result.records),
            "in_study": result.trials_total,
            "completed_this_run": result.new_trials,
        },
        "pareto_size": len(result.pareto),
        "best": record_summary(result.best),
        "best_rule": (
            f"most accurate architecture with latency <= {result.settings.max_latency:g} ms"
            if result.settings.max_latency is not None
            else "most accurate architecture on the Pareto front"
        ),
        "elapsed_s": round(elapsed_s, 2),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        **extra,
    }
    tmp = _temporary(path)
    tmp.write_text(json.dumps(summary, indent=2) + "\n")
    os.replace(tmp, path)
    return summary
