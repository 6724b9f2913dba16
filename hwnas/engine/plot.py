"""``pareto.png``: every trial with the Pareto front highlighted, drawn with matplotlib (Agg).

Importing matplotlib costs about 0.5 s of CPU, a fifth of a 300-query table search. The
drawing is described by plain data (:func:`front_spec`), so :class:`PlotProcess` can draw it
in a child process that imports matplotlib while the search runs, on another core where there
is one; where the child cannot draw (no spare process, an error) the caller draws in-process
with :func:`draw_front`, so the file is always written, or the error is the usual one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

UNITS = {"latency_ms": "ms", "energy_mj": "mJ"}
LABELS = {"latency_ms": "latency", "energy_mj": "energy per inference"}
"""An axis's name of each metric for values of one input; :func:`axis_label` for a batch."""


def axis_label(metric: str, batch: int = 1) -> str:
    """The name of ``metric`` on an axis (:data:`LABELS`), for values of a ``batch``: a table
    recorded at 32 holds a batch's energy, not an inference's (its unit says per batch)."""
    return LABELS[metric] if batch == 1 else metric.split("_")[0]


def front_spec(
    result: Any,
    device_label: str,
    accuracy_label: str | None = None,
    num_classes: int | None = None,
) -> dict:
    """What :func:`draw_front` draws for a :class:`hwnas.engine.loop.SearchResult`.

    Args:
        result: the search result (all trials, the front and the best architecture).
        device_label: the device's name, for the x axis.
        accuracy_label: replaces the default y-axis label (accuracy measured on a user's data).
        num_classes: classes of the accuracy's dataset: trials at chance level
            (:func:`hwnas.datasets.is_chance_level`) are drawn apart, below the axis, so that
            a 1% point does not squeeze the useful band.

    Returns:
        A JSON-able dict: the trials' and the front's (cost, accuracy %) points, the best
        point, the chance threshold (%), the labels and the cost's unit ("ms per batch of 32"
        for a table of a batch).
    """
    from hwnas.cost_record import search_batch, unit_of
    from hwnas.datasets import CHANCE_FACTOR, chance_accuracy

    s = result.settings
    metric = s.metric
    best = result.best
    batch = search_batch(s.device)  # a table of batch 32: "ms per batch of 32"
    label, unit = axis_label(metric, batch), unit_of(metric, batch)
    return {
        "best": None if best is None else [best.costs[metric].value, best.accuracy],
        "chance": None if num_classes is None else CHANCE_FACTOR * chance_accuracy(num_classes),
        "xs": [r.costs[metric].value for r in result.records],
        "ys": [r.accuracy for r in result.records],
        "fx": [r.costs[metric].value for r in result.pareto],
        "fy": [r.accuracy for r in result.pareto],
        "metric": metric,
        "max_latency": s.max_latency,
        "unit": unit,
        "x_label": f"{label} on {device_label} ({unit})",
        "y_label": accuracy_label or f"{s.dataset} top-1 accuracy (%)",
        "title": f"{s.space}: accuracy vs {label}, {s.strategy}, "
        f"{len(result.records)} architectures",
    }


def draw_front(spec: dict, path: Path) -> None:
    """Draw ``spec`` (:func:`front_spec`) to ``path`` (PNG), atomically: a reader, or another
    worker writing the same run folder, never sees a half-written file."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    xs, ys, fx, fy = (np.asarray(spec[k], dtype=float) for k in ("xs", "ys", "fx", "fy"))
    unit = spec.get("unit") or UNITS[spec["metric"]]
    chance = spec.get("chance")
    low_t = ys <= chance + 1e-9 if chance is not None else np.zeros(len(ys), bool)
    low_f = fy <= chance + 1e-9 if chance is not None else np.zeros(len(fy), bool)
    plt.rcParams.update({"font.size": 11})
    fig, ax = plt.subplots(figsize=(8, 5), dpi=150)
    ax.scatter(xs[~low_t], ys[~low_t], s=12, color="0.65", label=f"trials ({len(xs)})")
    ax.step(fx[~low_f], fy[~low_f], where="post", color="C3", lw=1.4)
    ax.scatter(fx[~low_f], fy[~low_f], s=32, color="C3", zorder=3,
               label=f"Pareto front ({len(fx)})")  # fmt: skip
    useful = ys[~low_t]
    if len(useful):  # the axis spans the useful band; chance-level trials sit below it
        bottom = float(np.percentile(useful, 1)) - 2.0
        ax.set_ylim(bottom=max(0.0, bottom), top=float(useful.max()) + 1.5)
    if low_t.any():
        floor = ax.get_ylim()[0]
        ax.scatter(xs[low_t], np.full(low_t.sum(), floor), marker="v", s=30, color="0.3",
                   clip_on=False, zorder=4,
                   label=f"chance level ({low_t.sum()}, <= {chance:g}%: not to scale)")  # fmt: skip
    best = spec.get("best")
    if best is not None and not (chance is not None and best[1] <= chance):
        ax.scatter([best[0]], [best[1]], marker="*", s=260, color="gold", edgecolor="black",
                   zorder=5, label=f"best: {best[1]:.2f}% at {best[0]:.3g} {unit}")  # fmt: skip
    limit = spec["max_latency"]
    if limit is not None and spec["metric"] == "latency_ms":
        ax.axvline(limit, color="C0", ls="--", lw=1.2, label=f"max latency {limit:g} {unit}")
    ax.set_xlabel(spec["x_label"])
    ax.set_ylabel(spec["y_label"])
    ax.set_title(spec["title"], fontsize=11)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=9)  # where it hides the fewest points
    fig.tight_layout()
    from hwnas.paths import temporary

    tmp = temporary(path)
    try:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    finally:
        plt.close(fig)


class PlotProcess:
    """A child process that imports matplotlib at once and then draws one figure sent to it.

    Start it before the work whose result it draws (:meth:`start`), then :meth:`draw`; or
    :meth:`cancel`. The child is in its own session (Ctrl-C in the terminal reaches only the
    parent, which cancels it) and exits when its input closes, so it never outlives the parent.
    """

    TIMEOUT_S = 120.0

    def __init__(self, proc: subprocess.Popen | None):
        self.proc = proc

    @classmethod
    def start(cls) -> PlotProcess:
        """Start the child (an inert object if a process cannot be started)."""
        from hwnas.isolate import python_module

        try:
            proc = subprocess.Popen(
                [sys.executable, *python_module("hwnas.engine.plot")],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError:
            proc = None
        return cls(proc)

    def draw(self, spec: dict, path: Path) -> bool:
        """Have the child draw ``spec`` to ``path``; whether it did (else draw in-process)."""
        proc, self.proc = self.proc, None
        if proc is None:
            return False
        job = json.dumps({"spec": spec, "path": str(path)}).encode()
        try:
            proc.communicate(job, timeout=self.TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
            return False
        return proc.returncode == 0 and path.is_file()

    def cancel(self) -> None:
        """Stop the child without drawing."""
        proc, self.proc = self.proc, None
        if proc is not None:
            proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stderr):
                if stream is not None:
                    stream.close()


def main() -> int:
    """The child of :class:`PlotProcess`: import matplotlib, then draw the job read from stdin
    (nothing when stdin closes empty). Exit status 0 when the file was written."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: F401 - the slow import, done while the parent works

        data = sys.stdin.buffer.read()
        if not data:
            return 0
        job = json.loads(data)
        draw_front(job["spec"], Path(job["path"]))
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
