"""A Jetson without nvidia-smi (JetPack <= 5) is still found as a GPU: its model is read from
the device tree, and what it lacks next is said (before: 'no NVIDIA GPU 0 here')."""

from __future__ import annotations

import re

import pytest

import hwnas.devices.cuda as cuda
from hwnas.devices import get_device


@pytest.fixture
def jetson_files(tmp_path, monkeypatch):
    release, model = tmp_path / "nv_tegra_release", tmp_path / "model"
    monkeypatch.setattr(cuda, "JETSON_RELEASE", release)
    monkeypatch.setattr(cuda, "DEVICE_TREE_MODEL", model)
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no nvidia-smi
    return release, model


def test_a_jetson_without_nvidia_smi_is_named_from_its_device_tree(jetson_files):
    release, model = jetson_files
    assert cuda.gpu_name(0) is None  # not a Jetson: no GPU without nvidia-smi
    ok, why = get_device("jetson").status()
    assert not ok and "no NVIDIA GPU 0 here" in why
    release.write_text("# R35 (release), REVISION: 4.1\n")
    model.write_bytes(b"NVIDIA Jetson AGX Orin Developer Kit\x00")
    assert cuda.gpu_name(0) == "NVIDIA Jetson AGX Orin Developer Kit"
    assert cuda.gpu_name(1) is None  # one integrated GPU
    ok, why = get_device("jetson").status()
    assert "no NVIDIA GPU" not in why  # the next thing it lacks (here: onnxruntime-gpu)
    assert get_device("jetson").device_versions() == {"gpu": "NVIDIA Jetson AGX Orin Developer Kit"}


def test_no_gpu_names_one_nearest_recorded_device(jetson_files, capsys):
    """`hwnas search --device cuda` without a GPU said "pick a recorded GPU such as 2080ti_1"
    and, in the same line, "search the nearest recorded device: hwnas search --device
    titanx_1" (helper-63): one device is named, the nearest."""
    from hwnas.cli import main

    assert main(["search", "--device", "cuda", "--budget", "5", "--no-zoo"]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    named = set(re.findall(r"--device (\w+)", line)) | set(re.findall(r"such as (\w+)", line))
    assert "no NVIDIA GPU 0 here" in line and len(named - {"cuda"}) == 1, line
