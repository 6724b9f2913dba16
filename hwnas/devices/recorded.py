"""Recorded devices: published measurement tables stand in for hardware we do not have."""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np

from hwnas.assets import asset_path
from hwnas.devices.base import Device, Measurement, Workload
from hwnas.errors import HwnasError
from hwnas.tables import read_table


class RecordedDevice(Device):
    """A device whose values come from a table column, one row per architecture of a space.

    Profile keys: ``tables: {space: {metric: {file, column}}}`` where ``file`` is relative to
    ``devices/`` and rows follow the space's index; ``batch_size``; ``source``.
    """

    kind = "recorded"
    runtime = "recorded"
    stored_in_profiler = False
    runs_models = False

    def __init__(self, profile: dict[str, Any]):
        super().__init__(profile)
        self.tables: dict[str, dict[str, dict[str, str]]] = profile.get("tables", {})
        self.batch_size = int(profile.get("batch_size", 1))

    @property
    def metrics(self) -> tuple[str, ...]:
        found = {m for per_space in self.tables.values() for m in per_space}
        return tuple(m for m in ("latency_ms", "energy_mj") if m in found)

    @cached_property
    def spaces(self) -> tuple[str, ...]:
        return tuple(self.tables)

    def status(self) -> tuple[bool, str]:
        return True, f"recorded table ({self.profile.get('source', 'published measurements')})"

    def column(self, space: str, metric: str) -> np.ndarray:
        """The whole recorded column for ``space`` (index order), in ms or mJ.

        Raises:
            HwnasError: the device has no table for that space or metric.
        """
        try:
            entry = self.tables[space][metric]
        except KeyError:
            have = ", ".join(f"{s}/{m}" for s, ms in self.tables.items() for m in ms) or "none"
            raise HwnasError(
                f"device '{self.name}' has no recorded {metric} for space '{space}' "
                f"(it has: {have})"
            ) from None
        table = read_table(asset_path("devices", entry["file"]))
        if entry["column"] not in table:
            raise HwnasError(f"column {entry['column']} missing from {entry['file']}")
        return table[entry["column"]]

    def source(self, space: str, metric: str) -> str:
        entry = self.tables[space][metric]
        return f"recorded:{entry['file']}:{entry['column']}"

    @property
    def table_spaces(self) -> tuple[str, ...]:
        return tuple(self.tables)

    def table(self, space: str, metric: str) -> np.ndarray | None:
        if metric not in self.tables.get(space, {}):
            return None
        return self.column(space, metric)

    def table_source(self, space: str, metric: str) -> str:
        return self.source(space, metric) if metric in self.tables.get(space, {}) else ""

    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        if workload.arch is None:
            raise HwnasError(
                f"device '{self.name}' is a recorded table: it can only give values for "
                "architectures of its spaces, not for an arbitrary model"
            )
        from hwnas.spaces import get_space

        space = get_space(workload.arch.space)
        column = self.column(space.name, metric)
        index = space.index(workload.arch)
        value = float(column[index])
        if not np.isfinite(value) or value <= 0:
            raise HwnasError(f"no recorded {metric} for {workload.label} on '{self.name}'")
        return Measurement(
            device=self.name,
            runtime=self.runtime,
            metric=metric,
            model_hash=workload.model_hash,
            label=workload.label,
            batch_size=self.batch_size,
            input_shape=(self.batch_size, *workload.input_shape[1:]),
            value=value,
            samples=(value,),
            source=self.source(space.name, metric),
        )
