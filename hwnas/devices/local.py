"""This machine's CPU, measured live through ONNX Runtime (default) or TVM."""

from __future__ import annotations

import os
import platform

from hwnas.devices.live import LiveDevice


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


class LocalCpuDevice(LiveDevice):
    """The CPU hwnas runs on.

    Profile keys: those of :class:`~hwnas.devices.live.LiveDevice`; ``runtime`` "ort" (CPU
    execution provider) or "tvm" (host target, tuned with the device's database);
    ``energy: auto`` reads RAPL where ``/sys/class/powercap`` is readable. The default protocol
    (30 warm-up calls, then 6 to 12 rounds of 30 until the median's 95% interval is within
    +-1%, 1 thread) takes about 330 x latency per model, 1.5-3 s for a NAS-Bench-201 network.
    """

    kind = "local"
    auto_meter = "rapl"
    runs_here = True
    on_this_machine = True

    def link_status(self) -> tuple[bool, str]:
        return True, (
            f"this machine: {cpu_name()}, {os.cpu_count()} logical cores, "
            f"runtime {self.runtime}; {self.energy_status[2]}"
        )

    def device_versions(self) -> dict[str, str]:
        return {"cpu": cpu_name()}
