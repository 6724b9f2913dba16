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
from hwnas.errors import HwnasError, UnknownNameError

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

NASFLAT_SPLITS: dict[str, dict[str, dict[str, tuple[str, ...]]]] = {
    # Akhauri & Abdelfattah, "On Latency Predictors for Neural Architecture Search" (NASFLAT,
    # MLSys 2024): correlation_trainer/device_task_list.py of abdelfattah-lab/nasflat_latency,
    # tasks 0-5 of each space (0 = HELP's default split, 1-4 = N1-N4 / F1-F4, 5 = NA / FA),
    # device lists copied in their order. The NAS-Bench-201 tasks 1-5 use the Eagle devices.
    "nasbench201": {
        "ND": {
            "train": ("1080ti_1", "1080ti_32", "1080ti_256", "silver_4114", "silver_4210r",
                      "samsung_a50", "pixel3", "essential_ph_1", "samsung_s7"),
            "test": ("titan_rtx_256", "gold_6226", "fpga", "pixel2", "raspi4", "eyeriss"),
        },
        "N1": {
            "train": ("embedded_tpu_edge_tpu_int8", "eyeriss",
                      "mobile_gpu_snapdragon_675_adreno_612_int8",
                      "mobile_gpu_snapdragon_855_adreno_640_int8", "pixel3"),
            "test": ("1080ti_1", "titan_rtx_32", "titanxp_1", "2080ti_32", "titan_rtx_1"),
        },
        "N2": {
            "train": ("1080ti_1", "1080ti_32", "titanx_32", "titanxp_1", "titanxp_32"),
            "test": ("embedded_gpu_jetson_nano_fp16", "embedded_tpu_edge_tpu_int8",
                     "mobile_dsp_snapdragon_675_hexagon_685_int8",
                     "mobile_dsp_snapdragon_855_hexagon_690_int8", "pixel3"),
        },
        "N3": {
            "train": ("desktop_gpu_gtx_1080ti_fp32", "embedded_gpu_jetson_nano_fp16", "eyeriss",
                      "mobile_dsp_snapdragon_675_hexagon_685_int8",
                      "mobile_gpu_snapdragon_855_adreno_640_int8"),
            "test": ("1080ti_1", "2080ti_1", "titanxp_1", "2080ti_32", "titanxp_32"),
        },
        "N4": {
            "train": ("desktop_cpu_core_i7_7820x_fp32", "embedded_gpu_jetson_nano_fp32",
                      "embedded_tpu_edge_tpu_int8", "eyeriss",
                      "mobile_cpu_snapdragon_855_kryo_485_int8",
                      "mobile_dsp_snapdragon_675_hexagon_685_int8",
                      "mobile_dsp_snapdragon_855_hexagon_690_int8",
                      "mobile_gpu_snapdragon_675_adreno_612_int8",
                      "mobile_gpu_snapdragon_855_adreno_640_int8", "pixel2"),
            "test": ("1080ti_1", "2080ti_1", "titan_rtx_1"),
        },
        "NA": {
            "train": ("titan_rtx_1", "titan_rtx_32", "titanxp_1", "2080ti_1", "titanx_1",
                      "1080ti_1", "titanx_32", "titanxp_32", "2080ti_32", "1080ti_32",
                      "gold_6226", "samsung_s7", "silver_4114", "gold_6240", "silver_4210r",
                      "samsung_a50", "pixel2"),
            "test": ("eyeriss", "desktop_gpu_gtx_1080ti_fp32", "embedded_tpu_edge_tpu_int8"),
        },
    },
    "fbnet": {
        "FD": {
            "train": ("1080ti_1", "1080ti_32", "1080ti_64", "silver_4114", "silver_4210r",
                      "samsung_a50", "pixel3", "essential_ph_1", "samsung_s7"),
            "test": ("fpga", "raspi4", "eyeriss"),
        },
        "F1": {
            "train": ("2080ti_1", "essential_ph_1", "silver_4114", "titan_rtx_1", "titan_rtx_32"),
            "test": ("eyeriss", "fpga", "raspi4", "samsung_a50", "samsung_s7"),
        },
        "F2": {
            "train": ("essential_ph_1", "gold_6226", "gold_6240", "pixel3", "raspi4"),
            "test": ("1080ti_1", "1080ti_32", "2080ti_32", "titan_rtx_1", "titanxp_1"),
        },
        "F3": {
            "train": ("essential_ph_1", "pixel2", "pixel3", "raspi4", "samsung_s7"),
            "test": ("1080ti_1", "1080ti_32", "2080ti_1", "titan_rtx_1", "titan_rtx_32"),
        },
        "F4": {
            "train": ("1080ti_64", "2080ti_1", "eyeriss", "gold_6226", "gold_6240", "raspi4",
                      "samsung_s7", "silver_4210r", "titan_rtx_1", "titan_rtx_32"),
            "test": ("1080ti_1", "pixel2", "essential_ph_1"),
        },
        "FA": {
            "train": ("1080ti_1", "1080ti_32", "1080ti_64", "2080ti_1", "2080ti_32",
                      "2080ti_64", "titan_rtx_1", "titan_rtx_32", "titan_rtx_64", "titanx_1",
                      "titanx_32", "titanx_64", "titanxp_1", "titanxp_32", "titanxp_64"),
            "test": ("gold_6226", "essential_ph_1", "samsung_s7", "pixel2"),
        },
    },
}  # fmt: skip
"""NASFLAT's device splits (training devices -> unseen test devices), per space: ND/FD is
HELP's default split (meta-train devices only), N1-N4/F1-F4 and NA/FA the harder ones."""


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


@cache
def _isomorphism_classes(space: str) -> np.ndarray | None:
    """(N,) int class id of every architecture of ``space`` (:class:`IsomorphicSpace`), or
    None for a space without isomorphism classes."""
    from hwnas.spaces import IsomorphicSpace, ability, get_space

    iso = ability(get_space(space), IsomorphicSpace)
    if iso is None:
        return None
    ids: dict[str, int] = {}
    return np.array([ids.setdefault(iso.unique_str(a), len(ids)) for a in iso.all_archs()])


def measured_reference(space: str, values: np.ndarray) -> list[int]:
    """The reference set as a table measured it: the indices to adapt on for a device whose
    values (index order, NaN where not measured) are ``values``.

    A reference architecture with a value is itself. One without is replaced by the first
    architecture of its isomorphism class that has one (:class:`hwnas.spaces.IsomorphicSpace`;
    HW-NAS-Bench-360 measured one NAS-Bench-201 cell per unique cell, and 5 of the 10
    reference cells are not those): the same function, measured with its own operations. It
    is left out when nothing of its class was measured (the Eagle tables' unconnected cells).

    Returns:
        table indices, at most one per reference architecture, in reference-set order.

    Raises:
        HwnasError: the space has no reference set.
    """
    values = np.asarray(values, dtype=np.float64)
    measured = np.isfinite(values) & (values > 0)
    return measured_stand_ins(space, measured, reference_indices(space))


def measured_stand_ins(space: str, measured: np.ndarray, indices) -> list[int]:
    """``indices`` as a table measured them (:func:`measured_reference`, for any architectures):
    each index the table has (``measured``, (N,) bool) is itself, one it lacks is the first
    index of its isomorphism class it has, or is left out; an index already in the list is not
    repeated.

    Returns:
        table indices, in the order of ``indices``.
    """
    out: list[int] = []
    for i in indices:
        j = int(i) if measured[i] else None
        if j is None and (classes := _isomorphism_classes(space)) is not None:  # 0.3 s, once
            alike = np.flatnonzero((classes == classes[i]) & measured)
            j = int(alike[0]) if len(alike) else None
        if j is not None and j not in out:
            out.append(j)
    return out


def recorded_columns(space: str, metrics: tuple[str, ...] = ("latency_ms", "energy_mj")):
    """Every recorded device column of ``space`` for ``metrics``, sorted by key (a broken
    profile skipped with a warning: :func:`hwnas.devices.recorded_tables`).

    Returns:
        list of :class:`Column`.
    """
    from hwnas.devices import recorded_tables

    out = []
    for metric in metrics:
        for dev, column in recorded_tables(space, metric):
            values = np.asarray(column, dtype=np.float64)
            out.append(Column(dev.name, metric, values, dev.table_source(space, metric)))
    return sorted(out, key=lambda c: c.key)


def get_column(space: str, key: str) -> Column:
    """The recorded column with key ``device`` or ``device:metric``.

    Raises:
        HwnasError: no such recorded column.
    """
    cols = {c.key: c for c in recorded_columns(space)}
    if not cols:
        from hwnas.spaces import list_spaces

        have = [s for s in list_spaces() if s != space and recorded_columns(s, ("latency_ms",))]
        raise HwnasError(
            f"no device has a recorded table of space '{space}', so none can train or score a "
            f"predictor of it (spaces with tables: {', '.join(have) or 'none'})"
        )
    if key not in cols:
        raise UnknownNameError(f"recorded column of {space}", key, list(cols))
    return cols[key]
