"""Android phones (reached over adb and TVM RPC; the transport is not built yet)."""

from __future__ import annotations

import shutil

from hwnas.devices.base import Device, Measurement, Workload


class AndroidDevice(Device):
    """An Android phone described by its profile (SoC, cores, thermal limit).

    Until the adb + TVM RPC transport lands, it reports why it cannot measure and how the phone
    would be connected; recorded tables or imported measurements stand in for it.
    """

    kind = "android"
    runtime = "tvm"

    def status(self) -> tuple[bool, str]:
        adb = "adb found" if shutil.which("adb") else "adb is not installed"
        return False, (
            f"hwnas cannot drive Android phones yet (needs the adb + TVM RPC transport; {adb}); "
            "to connect it, plug the phone in over USB with USB debugging enabled so that "
            "`adb devices` lists it, or pick a recorded phone such as pixel3 (`hwnas devices`)"
        )

    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        self.require_reachable()
        raise AssertionError("unreachable")  # pragma: no cover
