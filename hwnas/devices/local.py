"""This machine's CPU, measured live through a runtime (ONNX Runtime by default)."""

from __future__ import annotations

import os
import platform
from typing import Any

from hwnas.devices.base import Device, Measurement, Workload
from hwnas.runtimes import get_runtime
from hwnas.runtimes.timing import TimingProtocol, time_callable


def cpu_name() -> str:
    """The CPU model name as the OS reports it (Linux), or the platform's processor string."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class LocalCpuDevice(Device):
    """The CPU hwnas runs on.

    Profile keys: ``runtime`` ("ort"), ``timing`` (warmup, rounds, calls_per_round, threads).
    The default protocol (30 warm-up calls, 10 rounds of 30, 1 thread) takes about
    330 x latency per model, 1.5-3 s for a NAS-Bench-201 network.
    """

    kind = "local"

    def __init__(self, profile: dict[str, Any]):
        super().__init__(profile)
        self.runtime = profile.get("runtime", "ort")
        self.protocol = TimingProtocol(**profile.get("timing", {}))

    def status(self) -> tuple[bool, str]:
        return True, f"this machine: {cpu_name()}, {os.cpu_count()} logical cores"

    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        self.check_metric(metric)
        runtime = get_runtime(self.runtime, threads=self.protocol.threads)
        run = runtime.compile(workload.onnx_bytes(), workload.input_shape)
        timing = time_callable(run, self.protocol)
        return Measurement(
            device=self.name,
            runtime=self.runtime,
            metric=metric,
            model_hash=workload.model_hash,
            label=workload.label,
            batch_size=workload.batch_size,
            input_shape=tuple(workload.input_shape),
            value=timing.median_ms,
            samples=timing.samples_ms,
            cv=timing.cv,
            iqr=timing.iqr_ms,
            versions={
                **runtime.versions(),
                "cpu": cpu_name(),
                "threads": str(self.protocol.threads),
            },
            source=f"measured:{self.name}:{runtime.name}",
        )
