"""Proving a device reachable: run a tiny model on it end to end (``hwnas devices check``)."""

from __future__ import annotations

from dataclasses import dataclass

from hwnas.devices.base import Device, Measurement, Workload
from hwnas.errors import DeviceUnavailableError

PROBE_SHAPE = (1, 3, 32, 32)


def probe_workload() -> Workload:
    """A tiny CNN (conv 3x3 -> ReLU -> global average pool -> linear 10) on a 1x3x32x32 input,
    with fixed random weights: compiles in seconds on every runtime and FPGA flow."""
    from hwnas.export import content_hash, export_onnx

    def factory() -> bytes:
        import torch
        from torch import nn

        with torch.random.fork_rng(devices=[]):  # fixed weights, the caller's generator kept
            torch.manual_seed(0)
            model = nn.Sequential(
                nn.Conv2d(3, 8, 3, padding=1),
                nn.ReLU(),
                nn.AdaptiveAvgPool2d(1),
                nn.Flatten(),
                nn.Linear(8, 10),
            )
        return export_onnx(model, PROBE_SHAPE)

    key = content_hash("hwnas-probe-v1", "x".join(map(str, PROBE_SHAPE)))
    return Workload(key, "probe-cnn", PROBE_SHAPE, onnx_factory=factory)


@dataclass(frozen=True)
class CheckResult:
    """What ``hwnas devices check`` found.

    Attributes:
        status: the device's one-line status.
        measurements: metric -> measurement of the probe model (not stored).
    """

    status: str
    measurements: dict[str, Measurement]


def check_device(device: Device) -> CheckResult:
    """Check that ``device`` is reachable and runs a tiny model.

    Raises:
        DeviceUnavailableError: the device is not reachable (the status line says why).
        MeterReadingError: its energy meter counted no energy around the probe's timing.
        HwnasError: the probe model failed to compile or run.
    """
    ok, why = device.status()
    if not ok:
        raise DeviceUnavailableError(f"device '{device.name}' is not reachable: {why}")
    if not device.stored_in_profiler:  # a recorded table: nothing runs
        return CheckResult(why, {})
    return CheckResult(why, device.measure_all(probe_workload()))
