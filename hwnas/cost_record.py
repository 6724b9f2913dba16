"""One cost of one architecture: the record every search carries from the device (or the
predictor) to ``pareto.csv``, ``summary.json`` and the zoo's model cards.

A :class:`CostRecord` is made where a cost is obtained (:meth:`CostRecord.of_measurement` from
the measurement store, :meth:`CostRecord.predicted` from a cost model) and read everywhere
else; an Optuna trial keeps it as flat user attributes (:meth:`CostRecord.attrs`, read back by
:meth:`CostRecord.from_attrs`), so that optuna-dashboard shows each field as a column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

UNITS = {"latency_ms": "ms", "energy_mj": "mJ", "mflops": "MFLOPs"}
"""Metric -> the unit of its values."""


def unit_of(metric: str, batch: int = 1) -> str:
    """The unit of a device's ``metric`` values ("ms", "mJ", "ms per batch of 32"): a table
    recorded at ``batch`` > 1 (a GPU's at 32 or 256, a user's ``batch_size: 32``) holds the
    cost of a whole batch, never of one input; the zoo's cards say it alike
    (:func:`hwnas.zoo.card.device_unit`)."""
    unit = UNITS.get(metric, metric.split("_")[-1])
    return f"{unit} per batch of {batch}" if batch > 1 else unit


def search_batch(device: str) -> int:
    """The batch the values of ``device`` (a name) are of
    (:attr:`hwnas.devices.base.Device.value_batch_size`; 1 for a live device, which times one
    input), for the units a search reports; 1 where the device cannot be opened any more (a
    study read where its profile is not), whose values then have the summary's units."""
    from hwnas.devices import get_device
    from hwnas.errors import HwnasError

    try:
        return get_device(device).value_batch_size
    except HwnasError:
        return 1


Z90 = 1.6448536269514722
"""The standard normal's 95th percentile: a Gaussian 90% interval is mean +- Z90 * std."""


def cost_digits(value: float) -> str:
    """A cost (ms, mJ) as hwnas prints it: 3 decimals, and at least 4 significant digits below
    1 (0.003277 ms was printed 0.003 ms, 9% off, under a limit printed as 0.003277)."""
    if not math.isfinite(value) or value == 0:
        return f"{value:.3f}"
    return f"{value:.{max(3, 3 - math.floor(math.log10(abs(value))))}f}"


def bound_text(value: float, up: bool = True) -> str:
    """``value`` (ms, mJ) in the fewest significant digits (at least 4) whose number is still on
    its side: at or above it (``up``), else at or below; what an error names as the least (most)
    value a limit could take, so that the limit typed from it is met (0.812746 ms printed as
    0.8127 ms was below it)."""
    for digits in range(4, 18):
        text = f"{value:.{digits}g}"
        if (float(text) >= value) if up else (float(text) <= value):
            return text
    return repr(float(value))


def gaussian_interval(mean: float, std: float | None) -> tuple[float, float] | None:
    """The 90% interval (low, high) of a predicted latency (ms) or energy (mJ) with a Gaussian
    predictive ``std`` (same unit): ``mean +- 1.645 std``, its low end at least 0 (a cost is
    positive, so the clip loses no coverage); None when ``std`` is None or not finite.

    The meta-learned predictors' intervals are these (their coverage on devices left out of
    training: docs/predictors.md); the kernel-level predictor's come from its own calibration.
    """
    if std is None or not math.isfinite(std) or not math.isfinite(mean):
        return None
    return max(float(mean - Z90 * std), 0.0), float(mean + Z90 * std)


def precision_target(device: Any) -> float | None:
    """The half-width of the 95% interval, relative to the median, that ``device``'s timing
    protocol aims at (0.01 = +-1%), or None for a device that does not time models here."""
    return getattr(getattr(device, "protocol", None), "target_rel_ci", None)


NOT_IN_TABLE = "(architecture not in the recorded table)"
"""The end of a cost's source where a lookup table priced an architecture the device's
recorded table lacks (:attr:`CostRecord.table_guess`)."""


@dataclass(frozen=True)
class CostRecord:
    """One cost of one architecture on one device.

    Attributes:
        metric: "latency_ms", "energy_mj" or "mflops".
        value: the cost in :attr:`unit` per inference (a measurement's median, a table value,
            or a prediction's mean).
        source: where it came from (``recorded:<file>:<column>``, ``measured:<device>:<runtime>``,
            ``predicted:<predictor>``, ...).
        interval: the 90% predictive interval (low, high) in :attr:`unit` of a predicted
            value, or None (a measured or recorded value).
        rel_ci95: for a live measurement, the half-width of the 95% interval of its median
            relative to it (0.01 = +-1%), or None where the protocol could not bound it.
        precision_met: for a live measurement timed under a precision target, whether
            ``rel_ci95`` met it; None where no target applies (tables, predictions).
    """

    metric: str
    value: float
    source: str
    interval: tuple[float, float] | None = None
    rel_ci95: float | None = None
    precision_met: bool | None = None

    @property
    def unit(self) -> str:
        """``ms``, ``mJ`` or ``MFLOPs``."""
        return UNITS.get(self.metric, "")

    @property
    def table_guess(self) -> bool:
        """Whether this is a lookup table's guess for an architecture the device's table has
        no value for (a supernet search on OFA's sampled table): a limit judges it by its
        interval's upper end, as the derivation does (:data:`NOT_IN_TABLE`)."""
        return self.source.endswith(NOT_IN_TABLE) and self.interval is not None

    def within(self, limit: float) -> bool:
        """Whether the cost is within ``limit`` (its unit): the value, or for a
        :attr:`table_guess` the upper end of its interval (the table less its error margin)."""
        if self.table_guess:
            return self.interval[1] <= limit  # type: ignore[index]
        return self.value <= limit

    @property
    def timed(self) -> bool:
        """Whether this is a live measurement timed under a precision target."""
        return self.precision_met is not None

    @classmethod
    def of_measurement(cls, m: Any, target_rel_ci: float | None = None) -> CostRecord:
        """The record of a :class:`~hwnas.devices.base.Measurement`; a timed latency (its
        ``extra`` holds ``rel_ci``) is judged against the target it was taken under, or else
        ``target_rel_ci`` (the device protocol's: :func:`precision_target`)."""
        if m.metric == "latency_ms" and "rel_ci" in m.extra:
            target = m.extra.get("target_rel_ci", target_rel_ci)
            if target is not None:
                rel = m.extra["rel_ci"]
                met = rel is not None and rel <= float(target)
                return cls(m.metric, float(m.value), m.source, rel_ci95=rel, precision_met=met)
        return cls(m.metric, float(m.value), m.source)

    @classmethod
    def predicted(cls, metric: str, mean: float, std: float | None, source: str) -> CostRecord:
        """A prediction with a Gaussian predictive ``std`` (same unit): its 90% interval is
        :func:`gaussian_interval`'s (none when ``std`` is None or not finite)."""
        return cls(metric, float(mean), source, interval=gaussian_interval(mean, std))

    def attrs(self) -> dict[str, object]:
        """Flat trial user attributes: ``<metric>``, ``<metric>_source`` and, where set,
        ``<metric>_interval90`` ([low, high]), ``<metric>_rel_ci95`` and
        ``<metric>_precision_met``."""
        m = self.metric
        out: dict[str, object] = {m: self.value, f"{m}_source": self.source}
        if self.interval is not None:
            out[f"{m}_interval90"] = list(self.interval)
        if self.precision_met is not None:
            out[f"{m}_rel_ci95"] = self.rel_ci95
            out[f"{m}_precision_met"] = self.precision_met
        return out

    @classmethod
    def from_attrs(cls, attrs: dict[str, Any], metric: str) -> CostRecord | None:
        """The record :meth:`attrs` wrote into ``attrs`` for ``metric``, or None if absent."""
        if metric not in attrs:
            return None
        interval = attrs.get(f"{metric}_interval90")
        met = attrs.get(f"{metric}_precision_met")
        return cls(
            metric,
            float(attrs[metric]),
            str(attrs.get(f"{metric}_source", "")),
            interval=None if interval is None else (float(interval[0]), float(interval[1])),
            rel_ci95=attrs.get(f"{metric}_rel_ci95"),
            precision_met=None if met is None else bool(met),
        )
