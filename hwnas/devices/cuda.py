"""A local NVIDIA GPU: ONNX Runtime's CUDA execution provider or TVM's CUDA target, with
NVML's total-energy counter around the timed loop."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

from hwnas.devices.base import profile_number
from hwnas.devices.live import LiveDevice
from hwnas.errors import HwnasError

GPU_PROVIDERS = ("CUDAExecutionProvider", "TensorrtExecutionProvider")
"""ONNX Runtime execution providers that run a model on an NVIDIA GPU."""

JETSON_RELEASE = Path("/etc/nv_tegra_release")
"""Present on every Jetson (L4T); JetPack 5 and earlier have no ``nvidia-smi``."""

DEVICE_TREE_MODEL = Path("/proc/device-tree/model")
"""The board's name on a Jetson (``NVIDIA Jetson AGX Orin Developer Kit``), NUL-terminated."""


def gpu_name(index: int = 0) -> str | None:
    """The GPU's name from ``nvidia-smi``, or None when there is no NVIDIA driver.

    On a Jetson without ``nvidia-smi`` (JetPack <= 5: its integrated GPU, index 0 only) the
    board's model from the device tree."""
    if shutil.which("nvidia-smi") is None:
        return _jetson_model() if index == 0 else None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", f"--id={index}"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    name = out.stdout.strip()
    return name if out.returncode == 0 and name else None


def _jetson_model() -> str | None:
    if not JETSON_RELEASE.is_file():
        return None
    try:
        model = DEVICE_TREE_MODEL.read_bytes().rstrip(b"\0").decode(errors="replace").strip()
    except OSError:
        model = ""
    return model or "NVIDIA Jetson"


class LocalGpuDevice(LiveDevice):
    """An NVIDIA GPU in this machine.

    Profile keys: those of :class:`~hwnas.devices.live.LiveDevice`, plus ``gpu`` (index, 0).
    ``runtime: ort`` uses the CUDA execution provider (needs ``onnxruntime-gpu``);
    ``runtime: tvm`` compiles for ``target: cuda`` (tuned with MetaSchedule, DLight schedules
    for the rest). ``energy: auto`` reads NVML (needs ``nvidia-ml-py``); on a Jetson use
    ``energy: {meter: tegrastats}``.

    Raises:
        HwnasError: ``gpu`` is not a whole number >= 0; an ``ort.provider`` or TVM target
            that would not run on the GPU (:data:`GPU_PROVIDERS`, a target of kind cuda);
            what :class:`~hwnas.devices.live.LiveDevice` raises.
    """

    kind = "cuda"
    profile_keys = LiveDevice.profile_keys + ("gpu",)
    default_target = "cuda"
    default_provider = "cuda"
    auto_meter = "nvml"
    on_this_machine = True

    def __init__(self, profile: dict[str, Any]):
        self.gpu = int(profile_number(profile, "gpu", 0, integer=True, least=0))
        super().__init__(profile)  # which reads the runtime's options: the index first
        self._check_on_gpu()

    def _check_on_gpu(self) -> None:
        """Refuse a runtime that would not run on the GPU (``ort.provider: cpu`` timed the
        CPU and stored it as the GPU's latency; so would a TVM target of another kind).

        Raises:
            HwnasError: one line naming the file (or ``--target``) and the value.
        """
        import json

        from hwnas.runtimes.onnxruntime import PROVIDERS
        from hwnas.runtimes.tvm import target_spec

        options = self.runtime_options()
        if self.runtime_name == "ort":
            provider = PROVIDERS.get(options["provider"], options["provider"])
            if provider not in GPU_PROVIDERS:
                raise HwnasError(
                    f"{self.where}: a cuda device runs models on its GPU: ort.provider must be "
                    f"cuda or {' or '.join(GPU_PROVIDERS[1:])}, got "
                    f"{repr(options['provider'])[:80]}"
                )
        elif self.runtime_name == "tvm":
            spec = target_spec(options["target"])
            if spec.get("kind") != "cuda":
                on_cli = "target" in self.profile.get("_given", ())
                given = "--target cuda" if on_cli else "target: cuda"
                raise HwnasError(
                    f"{self.where}: a cuda device runs models on its GPU: its TVM target must be "
                    f"of kind cuda ({given}), got "
                    f"{json.dumps({k: v for k, v in spec.items() if k != 'host'})[:120]}"
                )

    def runtime_options(self) -> dict[str, Any]:
        options = super().runtime_options()
        if self.runtime_name == "ort":
            options["device_id"] = self.gpu
        return options

    def meter_options(self) -> dict[str, Any]:
        energy = self.profile.get("energy")
        meter = "nvml" if energy == "auto" else (energy or {}).get("meter")
        return {"index": self.gpu} if meter == "nvml" else {}

    def status(self) -> tuple[bool, str]:
        """No GPU is the first thing to say; then the runtime's and the GPU's status."""
        index = self.gpu
        if gpu_name(index) is None:
            return False, (
                f"no NVIDIA GPU {index} here (nvidia-smi missing or failing, and not a Jetson): "
                "run on a machine with an NVIDIA driver, or pick a recorded GPU (`hwnas "
                "devices` lists them)"
            )
        return super().status()

    def link_status(self) -> tuple[bool, str]:
        index = self.gpu
        name = gpu_name(index)
        if self.runtime_name == "tvm":
            from hwnas.runtimes.tvm import cuda_enabled

            if not cuda_enabled():
                return (
                    False,
                    "this TVM build has no CUDA support: install a CUDA-enabled apache-tvm",
                )
        return True, f"GPU {index}: {name}, runtime {self.runtime}; {self.energy_status[2]}"

    def device_versions(self) -> dict[str, str]:
        return {"gpu": gpu_name(self.gpu) or ""}
