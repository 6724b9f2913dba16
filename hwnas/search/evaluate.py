"""Scoring an architecture for search: its accuracy and its cost on the device."""

from __future__ import annotations

from dataclasses import dataclass, field

from hwnas.devices.base import METRICS
from hwnas.measure import Profiler, arch_workload
from hwnas.spaces.base import Arch, SearchSpace

OBJECTIVES = {"latency": "latency_ms", "energy": "energy_mj"}
"""Search objective name -> the device metric it minimises."""


@dataclass(frozen=True)
class Evaluation:
    """Accuracy and costs of one architecture, each with where it came from.

    Attributes:
        arch: the architecture.
        accuracy: top-1 accuracy in %.
        accuracy_source: for example ``nasbench201-table:cifar100_test_200ep``.
        costs: metric ("latency_ms", "energy_mj") -> value (ms or mJ per inference).
        sources: metric -> where the value came from (a table, a measurement).
        model_hash: hash of the measured workload.
        precision: metric -> (relative half-width of the 95% interval of a live measurement,
            or None when the protocol could not bound it; the device profile's target, e.g.
            0.01 for +-1%). Absent for table values and devices that do not time models here.
    """

    arch: Arch
    accuracy: float
    accuracy_source: str
    costs: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    model_hash: str = ""
    precision: dict[str, tuple[float | None, float]] = field(default_factory=dict)

    def attrs(self) -> dict[str, object]:
        """Flat dict for an Optuna trial's user attributes."""
        out: dict[str, object] = {
            "arch": self.arch.text,
            "accuracy": self.accuracy,
            "accuracy_source": self.accuracy_source,
            "model_hash": self.model_hash,
        }
        for metric, value in self.costs.items():
            out[metric] = value
            out[f"{metric}_source"] = self.sources[metric]
        for metric, (rel_ci, target) in self.precision.items():
            out[f"{metric}_rel_ci95"] = rel_ci
            out[f"{metric}_precision_met"] = precision_met(rel_ci, target)
        return out


def precision_met(rel_ci: float | None, target: float) -> bool:
    """Whether a live measurement reached its profile's precision target: the half-width of
    the 95% interval of its median, relative to it, is within ``target`` (0.01 = +-1%)."""
    return rel_ci is not None and rel_ci <= target


class TableEvaluator:
    """Accuracy from the space's trained-accuracy table, costs from a device via a profiler.

    Args:
        space: a space with ``table_accuracy`` and ``index`` (NAS-Bench-201).
        dataset: dataset whose accuracy is used.
        profiler: device + store.
        metrics: device metrics to obtain for each architecture (the objective's first).

    Attributes:
        instant: whether scoring is a lookup (a recorded or imported device: tables and
            stored values, nothing runs), so the engine may score before claiming
            (:func:`hwnas.search.engine.run_search`).
        accuracy_queries: accuracy-table queries made so far.
    """

    def __init__(self, space: SearchSpace, dataset: str, profiler: Profiler, metrics: list[str]):
        self.space = space
        self.dataset = dataset
        self.profiler = profiler
        self.metrics = [m for m in metrics if m in METRICS]
        self._accuracy = space.table_accuracy(dataset)
        self._source = space.accuracy_source(dataset)
        self.accuracy_queries = 0
        self.instant = not profiler.device.runs_models

    def evaluate(self, arch: Arch) -> Evaluation:
        """Query the accuracy table once and obtain every metric (store-cached)."""
        self.accuracy_queries += 1
        accuracy = float(self._accuracy[self.space.index(arch)])
        workload = arch_workload(self.space, arch, self.dataset)
        costs, sources, precision = {}, {}, {}
        protocol = getattr(self.profiler.device, "protocol", None)
        for metric in self.metrics:
            m = self.profiler.measure(workload, metric)
            costs[metric], sources[metric] = m.value, m.source
            # a timed value: did it reach the precision the profile asks for?
            if metric == "latency_ms" and "rel_ci" in m.extra:
                target = m.extra.get("target_rel_ci", getattr(protocol, "target_rel_ci", None))
                if target is not None:
                    precision[metric] = (m.extra["rel_ci"], float(target))
        return Evaluation(
            arch, accuracy, self._source, costs, sources, workload.model_hash, precision
        )
