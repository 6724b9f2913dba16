"""Imported devices: a device known only by measurements imported from files.

``hwnas measure import --device NAME CAL.csv`` stores the file's values as ordinary
measurements (runtime ``imported``) and writes the profile ``<hwnas home>/devices/NAME.yaml``
of this kind, so that ``hwnas search --device NAME`` finds the values in the store. Such a device
cannot take new measurements: search predicts the costs of other architectures from the
imported ones (:mod:`hwnas.engine.fewshot`).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from hwnas.devices.base import Device, Measurement, Workload
from hwnas.errors import DeviceUnavailableError


class ImportedDevice(Device):
    """Profile keys: ``metrics`` (list), ``spaces`` (list), ``source`` (the imported files)."""

    kind = "imported"
    profile_keys = Device.profile_keys + ("metrics", "spaces", "sources", "source")
    runtime = "imported"
    stored_in_profiler = True
    can_measure = False  # no new measurements: only the imported ones in the store
    runs_models = False

    def __init__(self, profile: dict[str, Any]):
        super().__init__(profile)

    @property
    def metrics(self) -> tuple[str, ...]:
        return tuple(self.profile.get("metrics", ["latency_ms"]))

    @cached_property
    def spaces(self) -> tuple[str, ...]:
        return tuple(self.profile.get("spaces", ["*"]))

    def status(self) -> tuple[bool, str]:
        return True, "imported measurements only (hwnas measure import); takes no new ones"

    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        raise DeviceUnavailableError(
            f"device '{self.name}' has no {metric} for {workload.label}: it only has imported "
            f"measurements; time the model and add it with `hwnas measure import --device "
            f"{self.name} FILE.csv`"
        )
