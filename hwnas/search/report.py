"""The run folder: ``pareto.csv``, ``pareto.png``, ``summary.json`` and the model zoo."""

from __future__ import annotations

import csv
import json
import os
import time
from pathlib import Path
from typing import Any

from hwnas.search.engine import SearchResult, TrialRecord
from hwnas.search.plot import LABELS, UNITS  # noqa: F401 - re-exported (labels of reports)
from hwnas.spaces.base import SearchSpace


def pareto_rows(result: SearchResult) -> list[dict[str, Any]]:
    """Rows of ``pareto.csv``: arch, accuracy, latency_ms, energy_mj (where known), sources."""
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
    """Scatter of all trials with the Pareto front highlighted; axes carry units
    (:mod:`hwnas.search.plot`).

    ``accuracy_label`` replaces the default y-axis label (accuracy measured on a user's data).
    """
    from hwnas.search.plot import draw_front, front_spec

    draw_front(front_spec(result, device_label, accuracy_label), path)


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


def write_zoo(
    folder: Path,
    result: SearchResult,
    space: SearchSpace,
    other_latencies: dict[str, dict[str, dict[str, Any]]],
    records: list[TrialRecord] | None = None,
    trained: dict[str, dict[str, Any]] | None = None,
) -> list[Path]:
    """One folder per Pareto architecture with ``model.onnx`` and ``card.json``.

    The zoo is written into a temporary sibling folder and renamed into place when complete:
    an export that fails part-way (a full disk, a model that cannot be exported) leaves the
    previous zoo, or none, never a partial one; workers sharing a run folder each put a whole
    zoo in place.

    Args:
        folder: the zoo folder.
        result: the search result.
        space: the search space (builds and exports each network).
        other_latencies: arch -> device -> {"latency_ms", "source"} from other devices'
            recorded tables, added to each card.
        records: the records to export (default: the Pareto front).
        trained: arch -> {"model", "input_shape", "num_classes", "dataset", "weights"}: export
            that trained module (its weights) instead of a freshly built network, and describe
            its weights with the ``weights`` note.

    Returns:
        The card paths (inside ``folder``).

    Raises:
        OSError: the zoo could not be written (nothing is left behind).
    """
    import shutil

    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temporary(folder)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        names = _write_zoo_into(tmp, result, space, other_latencies, records, trained)
        _swap_in(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return [folder / name for name in names]


def _swap_in(new: Path, folder: Path, attempts: int = 10) -> None:
    """Put the folder ``new`` in place of ``folder`` (which may exist, and which another worker
    may be replacing at the same moment)."""
    import errno
    import shutil

    old = folder.with_name(f".{folder.name}.{os.getpid()}.old")
    for attempt in range(attempts):
        try:
            if folder.exists():
                os.replace(folder, old)
            os.replace(new, folder)
            break
        except OSError as exc:  # another worker put its zoo in place between our two steps
            if (
                exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT)
                or attempt + 1 == attempts
            ):
                raise
    shutil.rmtree(old, ignore_errors=True)


def _write_zoo_into(
    folder: Path,
    result: SearchResult,
    space: SearchSpace,
    other_latencies: dict[str, dict[str, dict[str, Any]]],
    records: list[TrialRecord] | None,
    trained: dict[str, dict[str, Any]] | None,
) -> list[str]:
    """:func:`write_zoo`'s work, in ``folder``; returns the card paths relative to it."""
    import torch

    from hwnas.export import OPSET, count_params_flops, export_onnx
    from hwnas.measure import WEIGHT_SEED

    s = result.settings
    spec = space.dataset(s.dataset)
    shape = (1, *spec.input_shape)
    cards = []
    for rank, r in enumerate(result.pareto if records is None else records):
        arch = space.parse(r.arch)
        own = (trained or {}).get(r.arch)
        if own is None:
            torch.manual_seed(WEIGHT_SEED)
            model = space.build(arch, s.dataset)
            shape = (1, *space.input_shape(arch, s.dataset))
        else:
            model, shape = own["model"].eval(), tuple(own["input_shape"])
        params, flops = count_params_flops(model, shape)
        sub = folder / f"{rank:02d}-{r.attrs.get('model_hash', rank)}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / "model.onnx").write_bytes(export_onnx(model, shape))
        if own is not None:  # trained weights, also as a PyTorch state dict
            torch.save(model.state_dict(), sub / "weights.pt")
        device_costs = {
            s.device: {
                m: {"value": r.costs[m], "source": r.attrs.get(f"{m}_source", "")} for m in r.costs
            }
        }
        for dev, entry in other_latencies.get(r.arch, {}).items():
            device_costs.setdefault(dev, {"latency_ms": entry})
        card = {
            "arch": r.arch,
            "space": s.space,
            "dataset": own["dataset"] if own else s.dataset,
            "num_classes": own["num_classes"] if own else spec.num_classes,
            "input_shape": list(shape),
            "input_name": "input",
            "output_name": "logits",
            "opset": OPSET,
            "params": params,
            "flops": flops,
            "flops_convention": "multiply-accumulates of conv and linear layers, batch 1",
            "accuracy": {
                "value": r.accuracy,
                "unit": "%",
                "source": r.attrs.get("accuracy_source", ""),
            },
            "devices": device_costs,
            "weights": own["weights"]
            if own
            else (
                f"random initialisation (torch seed {WEIGHT_SEED}): the accuracy is the "
                "benchmark's for this architecture trained with its recipe; train before use"
            ),
            "study": s.study,
            "trial": r.number,
        }
        if "table_accuracy" in r.attrs:
            card["table_accuracy"] = {
                "value": r.attrs["table_accuracy"],
                "unit": "%",
                "source": r.attrs.get("table_accuracy_label", ""),
            }
        (sub / "card.json").write_text(json.dumps(card, indent=2) + "\n")
        cards.append(f"{sub.name}/card.json")
    folder.mkdir(parents=True, exist_ok=True)  # an empty front still gives a zoo folder
    return cards
