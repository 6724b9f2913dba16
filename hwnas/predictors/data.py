"""Training and evaluation data of predictors: recorded device columns, the standard few-shot
split of HELP (Lee et al., NeurIPS 2021) and the reference sets.

A *column* is one (device, metric) of a recorded device: its values for every architecture of
the space's table, in index order. Predictors are metric-agnostic: latency and energy columns
are used alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache

import numpy as np

from hwnas.assets import asset_path
from hwnas.errors import HwnasError

SPLITS: dict[str, dict[str, tuple[str, ...]]] = {
    "nasbench201": {
        "meta_train": (
            "1080ti_1", "1080ti_32", "1080ti_256", "silver_4114", "silver_4210r",
            "samsung_a50", "pixel3", "essential_ph_1", "samsung_s7",
        ),
        "meta_valid": ("titanx_1", "titanx_32", "titanx_256", "gold_6240"),
        "meta_test": ("titan_rtx_256", "gold_6226", "fpga", "pixel2", "raspi4", "eyeriss"),
    },
    "fbnet": {
        "meta_train": (
            "1080ti_1", "1080ti_32", "1080ti_64", "silver_4114", "silver_4210r",
            "samsung_a50", "pixel3", "essential_ph_1", "samsung_s7",
        ),
        "meta_valid": ("titanx_1", "titanx_32", "titanx_64", "gold_6240"),
        "meta_test": ("fpga", "raspi4", "eyeriss"),
    },
}  # fmt: skip
"""The standard few-shot device split (HELP, NeurIPS 2021), per space."""


@dataclass(frozen=True)
class Column:
    """One device's recorded values for a space.

    Attributes:
        device: device name.
        metric: "latency_ms" or "energy_mj".
        values: shape (len(space),), in ms or mJ, in the space's index order.
        source: where the values come from (``recorded:<file>:<column>``).
    """

    device: str
    metric: str
    values: np.ndarray
    source: str

    @property
    def key(self) -> str:
        """``device`` for latency, ``device:energy_mj`` otherwise."""
        return self.device if self.metric == "latency_ms" else f"{self.device}:{self.metric}"


def column_key(device: str, metric: str) -> str:
    return device if metric == "latency_ms" else f"{device}:{metric}"


@cache
def reference_indices(space: str) -> tuple[int, ...]:
    """Indices (into the space's table order) of the space's reference architectures.

    Raises:
        HwnasError: the space has no reference set.
    """
    sets = json.loads(asset_path("search_spaces", "reference_sets.json").read_text())
    if space not in sets:
        raise HwnasError(f"no reference set for space '{space}' (have: {', '.join(sets)})")
    return tuple(int(i) for i in sets[space])


def recorded_columns(space: str, metrics: tuple[str, ...] = ("latency_ms", "energy_mj")):
    """Every recorded device column of ``space`` for ``metrics``, sorted by key.

    Returns:
        list of :class:`Column`.
    """
    from hwnas.devices import get_device, list_devices

    out = []
    for name in list_devices():
        dev = get_device(name)
        for metric in metrics:
            column = dev.table(space, metric)
            if column is not None:
                values = np.asarray(column, dtype=np.float64)
                out.append(Column(name, metric, values, dev.table_source(space, metric)))
    return sorted(out, key=lambda c: c.key)


def get_column(space: str, key: str) -> Column:
    """The recorded column with key ``device`` or ``device:metric``.

    Raises:
        HwnasError: no such recorded column.
    """
    cols = {c.key: c for c in recorded_columns(space)}
    if key not in cols:
        raise HwnasError(f"no recorded column '{key}' for space '{space}'; have: {', '.join(cols)}")
    return cols[key]
