"""Device registry, recorded tables, the live CPU device and the unreachable phone."""

from __future__ import annotations

import csv
import gzip

import numpy as np
import pytest

from hwnas.assets import asset_path
from hwnas.devices import get_device, list_devices
from hwnas.devices.recorded import RecordedDevice
from hwnas.errors import DeviceUnavailableError, HwnasError, UnknownNameError
from hwnas.measure import arch_workload
from hwnas.spaces import get_space

SPACE = get_space("nasbench201")


def _columns(name: str) -> list[str]:
    with gzip.open(asset_path("devices", "recorded", name), "rt") as fh:
        return next(csv.reader(fh))[1:]


def test_every_nasbench201_latency_column_is_a_device():
    columns = _columns("nasbench201_latency_ms.csv.gz")
    assert len(columns) == 27
    for column in columns:
        device = get_device(column)
        assert isinstance(device, RecordedDevice)
        assert device.tables["nasbench201"]["latency_ms"]["column"] == column


def test_pi5_devices_have_latency_and_energy():
    for runtime in ("litert", "onnx", "torchmobile"):
        device = get_device(f"pi5_{runtime}")
        assert device.metrics == ("latency_ms", "energy_mj")
        energy = device.column("nasbench201", "energy_mj")
        # HW-NAS-Bench-360 measured one cell per NAS-Bench-201 unique cell; no copied values
        assert energy.shape == (15625,) and (energy[np.isfinite(energy)] > 0).all()
        assert np.isfinite(energy).sum() == 6466


@pytest.mark.parametrize("name", list_devices())
def test_every_profile_loads_and_reports_status(name):
    device = get_device(name)
    ok, why = device.status()
    assert isinstance(ok, bool) and why and "\n" not in why
    assert device.description


def test_unknown_device_lists_known_ones():
    expected = "unknown device 'pixel99'; did you mean .*pixel3.*known: .*pixel3"
    with pytest.raises(UnknownNameError, match=expected):
        get_device("pixel99")


def test_user_profile_folder_adds_devices(hwnas_home):
    assert "cpu-fast" in list_devices()  # written by the conftest fixture into HWNAS_HOME
    assert get_device("cpu-fast").protocol.rounds == 3


def test_recorded_lookup_matches_the_table():
    device = get_device("pixel3")
    arch = SPACE.arch_at(1)
    m = device.measure(arch_workload(SPACE, arch, "cifar100"))
    assert m.value == pytest.approx(17.2381)  # row 1 of the shipped table, column pixel3
    assert m.source == "recorded:recorded/nasbench201_latency_ms.csv.gz:pixel3"
    with pytest.raises(HwnasError, match="no recorded energy_mj"):
        device.column("nasbench201", "energy_mj")


def test_pixel8_without_adb_says_how_to_connect(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no adb here
    device = get_device("pixel8")
    ok, why = device.status()
    assert not ok and "adb is not installed" in why and "platform-tools" in why
    assert device.runtime.startswith("tvm:llvm-") and device.protocol.threads == 1
    with pytest.raises(DeviceUnavailableError, match="pixel8"):
        device.measure(arch_workload(SPACE, SPACE.arch_at(0), "cifar100"))


def test_runtime_override_changes_the_store_key_and_is_refused_where_meaningless():
    assert get_device("cpu").runtime == "ort"
    assert get_device("cpu", runtime="tvm").runtime.startswith("tvm:llvm-")
    with pytest.raises(HwnasError, match="has no runtime choice"):
        get_device("pixel3", runtime="tvm")
    with pytest.raises(HwnasError, match="cannot use runtime 'ort'"):
        get_device("pixel8", runtime="ort")


def test_local_cpu_measures_real_latency_that_ranks_small_below_large():
    device = get_device("cpu-fast")
    small = SPACE.parse("|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|")
    large = SPACE.parse(
        "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|"
    )
    m_small = device.measure(arch_workload(SPACE, small, "cifar10"))
    m_large = device.measure(arch_workload(SPACE, large, "cifar10"))
    assert m_small.runtime == "ort" and m_small.source == "measured:cpu-fast:ort"
    assert len(m_small.samples) == 15 and all(s > 0 for s in m_small.samples)
    assert m_small.extra["rounds"] == 3 and m_small.flagged is False
    assert m_small.value == pytest.approx(
        np.median([np.median(m_small.samples[i : i + 5]) for i in range(0, 15, 5)])
    )
    assert m_large.value > 3 * m_small.value
    assert m_small.versions["onnxruntime"]


def test_shipped_profiles_are_parsed_once_per_process_and_each_caller_gets_a_copy(
    monkeypatch, hwnas_home
):
    """The profiles are scanned again after every profile written (`reload_profiles`), and
    each command scans them: the 60-odd shipped files were parsed anew every time (about 30 ms
    a scan). Each shipped file is now parsed once per process; a caller that changes the
    profile it got changes no later caller's, and a user's file is still read afresh."""
    from pathlib import Path

    import hwnas.devices as devices

    reads: list[Path] = []
    real = devices.read_yaml
    monkeypatch.setattr(devices, "read_yaml", lambda p: reads.append(Path(p)) or real(p))
    monkeypatch.setattr(devices, "_SHIPPED", {})
    shipped = asset_path("devices")
    devices.reload_profiles()
    devices.profiles()["pixel3"]["description"] = "changed by a caller"
    assert len([p for p in reads if p.parent == shipped]) == len(list(shipped.glob("*.yaml")))
    reads.clear()
    user = hwnas_home / "devices" / "cpu-fast.yaml"
    user.write_text(user.read_text().replace("(tests only)", "(tests only, edited)"))
    devices.reload_profiles()
    profiles = devices.profiles()
    assert reads == [user]  # the user's file alone is read again
    assert profiles["pixel3"]["description"] == "Google Pixel 3 (Snapdragon 845)"
    assert profiles["cpu-fast"]["description"].endswith("(tests only, edited)")
