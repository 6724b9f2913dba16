"""Shared fixtures: every test gets its own hwnas home, and a fast live-CPU device."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

FAST_CPU_PROFILE = """\
name: cpu-fast
kind: local
class: cpu
description: this machine's CPU with a short timing protocol (tests only)
runtime: ort
timing: {warmup: 3, rounds: 3, calls_per_round: 5, threads: 1, max_cv: 1.0}
tvm: {trials_per_task: 0}
"""


@pytest.fixture(autouse=True)
def hwnas_home(tmp_path_factory, monkeypatch) -> Path:
    """A fresh HWNAS_HOME (store, studies, user profiles) for each test."""
    home = tmp_path_factory.mktemp("hwnas_home")
    monkeypatch.setenv("HWNAS_HOME", str(home))
    profiles = home / "devices"
    profiles.mkdir()
    (profiles / "cpu-fast.yaml").write_text(FAST_CPU_PROFILE)
    from hwnas.devices import _profiles

    _profiles.cache_clear()
    yield home
    _profiles.cache_clear()


NATIVE_LIBRARIES = (
    "torch", "numpy", "scipy", "scikit-learn", "onnx", "onnxruntime", "protobuf", "matplotlib",
    "pillow", "pyyaml", "apache-tvm", "apache-tvm-ffi", "xgboost-cpu", "psutil", "tornado",
    "h5py", "ml_dtypes",
)  # fmt: skip


def pytest_terminal_summary(terminalreporter):
    """Name the native libraries the suite ran with, so that a run on a new machine can be
    compared with the pins in pyproject.toml when a release breaks something."""
    from hwnas.isolate import distribution_versions

    terminalreporter.write_line(f"native libraries: {distribution_versions(NATIVE_LIBRARIES)}")
