"""Measuring workloads on a device through the store: each measurement is taken once.

:class:`Profiler` is what search and the CLI call. It looks a workload up in the store, and
only when it is missing takes the device lock, looks again (another worker may have measured it
meanwhile), measures, and appends, so that a killed search loses nothing it measured and a
resumed one measures nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass

from hwnas.devices.base import Device, Measurement, Workload
from hwnas.export import content_hash, export_onnx
from hwnas.spaces.base import Arch, SearchSpace
from hwnas.store import MeasurementStore

WEIGHT_SEED = 0
"""Seed of the random weights of exported networks (latency does not depend on the values)."""


def arch_workload(space: SearchSpace, arch: Arch, dataset: str, batch_size: int = 1) -> Workload:
    """The workload of ``arch`` built for ``dataset`` at ``batch_size``.

    Its model hash depends only on (space, arch string, dataset, input shape), so it is stable
    across library versions; the ONNX model is exported only if a device needs to run it.
    """
    shape = (batch_size, *space.input_shape(arch, dataset))

    def factory() -> bytes:
        import torch

        torch.manual_seed(WEIGHT_SEED)
        return export_onnx(space.build(arch, dataset), shape)

    key = content_hash(space.name, arch.text, dataset, "x".join(map(str, shape)))
    return Workload(key, arch.text, shape, arch=arch, dataset=dataset, onnx_factory=factory)


@dataclass
class ProfilerCounts:
    """What a :class:`Profiler` did.

    Attributes:
        taken: new measurements taken on the device (and stored).
        reused: measurements found in the store.
        read: values read from a recorded table.
    """

    taken: int = 0
    reused: int = 0
    read: int = 0


class Profiler:
    """A device plus the store: measure-once semantics.

    Args:
        device: where to measure.
        store: where measurements are kept; may be None for recorded devices.
    """

    def __init__(self, device: Device, store: MeasurementStore | None):
        self.device = device
        self.store = store
        self.counts = ProfilerCounts()

    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        """The measurement of ``workload``: from the store if taken before, else taken now.

        Raises:
            DeviceUnavailableError: the device cannot measure now.
            HwnasError: the device has no such metric or cannot run the workload.
        """
        self.device.check_metric(metric)
        if not self.device.stored_in_profiler or self.store is None:
            self.counts.read += 1
            return self.device.measure(workload, metric)
        key = (
            self.device.name,
            self.device.runtime,
            metric,
            workload.model_hash,
            workload.input_shape,
        )
        found = self.store.lookup(*key)
        if found is None:
            with self.store.device_lock(self.device.name):
                found = self.store.lookup(*key)
                if found is None:
                    m = self.device.measure(workload, metric)
                    self.store.append(m)
                    self.counts.taken += 1
                    return m
        self.counts.reused += 1
        return found
