"""Android phones: adb output and thermal parsing, the NDK lookup, and every set-up problem
that can be produced without a phone gives its one-line message. A stand-in `adb` script plays
the phone's side of adb where a real one is needed."""

from __future__ import annotations

import sys

import pytest
from helpers import fake_tool, hwnas_cli

from hwnas.devices import get_device
from hwnas.devices.android import ndk_compiler, parse_adb_devices, parse_thermal_zones
from hwnas.errors import DeviceUnavailableError
from hwnas.measure import arch_workload
from hwnas.spaces import get_space

ADB_DEVICES = """\
* daemon not running; starting now at tcp:5037
* daemon started successfully
List of devices attached
37021FDJH000ZZ\tdevice
emulator-5554\toffline
0A041FDD4003RK\tunauthorized

"""

THERMAL = """\
BIG 47300
MID 41200
LITTLE 39100
skin-therm 33000
battery 29.5
disabled-zone -273000
gpu0 bogus
"""


def test_parse_adb_devices_lists_serials_and_states():
    assert parse_adb_devices(ADB_DEVICES) == [
        ("37021FDJH000ZZ", "device"),
        ("emulator-5554", "offline"),
        ("0A041FDD4003RK", "unauthorized"),
    ]
    assert parse_adb_devices("List of devices attached\n\n") == []


def test_parse_thermal_zones_in_millidegrees_or_degrees():
    temps = parse_thermal_zones(THERMAL)
    assert temps == {"BIG": 47.3, "MID": 41.2, "LITTLE": 39.1, "skin-therm": 33.0, "battery": 29.5}


def test_ndk_compiler_lookup(tmp_path, monkeypatch):
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    path, why = ndk_compiler()
    assert path is None and "ANDROID_NDK_HOME is not set" in why
    path, why = ndk_compiler(str(tmp_path))
    assert path is None and "is ANDROID_NDK_HOME the root of an Android NDK" in why
    bin_dir = tmp_path / "toolchains/llvm/prebuilt/linux-x86_64/bin"
    bin_dir.mkdir(parents=True)
    for api in (24, 34, 29):
        (bin_dir / f"aarch64-linux-android{api}-clang++").write_text("")
    path, _ = ndk_compiler(str(tmp_path))
    assert path.endswith("aarch64-linux-android34-clang++")


def test_no_adb_is_a_one_line_error(tmp_path):
    r = hwnas_cli("measure", "--device", "pixel8", "--arch", "0", env={"PATH": str(tmp_path)})
    assert r.returncode == 2
    assert r.stderr.strip() == (
        "error: device 'pixel8' cannot measure: adb is not installed: install Android "
        "platform-tools (https://developer.android.com/tools/releases/platform-tools) and put "
        "adb on PATH"
    )


FAKE_ADB = """#!{python}
import sys, pathlib
state = pathlib.Path(__file__).with_name("state")
args = sys.argv[1:]
if args[:1] == ["-s"]:
    args = args[2:]
mode = state.read_text().split()[0]
if args == ["devices"]:
    print("List of devices attached")
    if mode != "none":
        print("37021FDJH000ZZ\\t" + ("unauthorized" if mode == "unauthorized" else "device"))
elif args[:1] == ["reverse"]:
    pass
elif args[:1] == ["shell"] and "thermal_zone" in args[1]:
    temps = state.read_text().split()[1:]
    print("BIG " + temps.pop(0) + "\\nskin-therm 30000")
    state.write_text(" ".join([mode] + (temps or ["30000"])))
else:
    sys.exit(1)
"""


@pytest.fixture
def fake_adb(tmp_path, monkeypatch):
    """An `adb` on PATH that plays a phone; write its mode (and BIG-core temps) to `state`."""
    bin_dir = tmp_path / "bin"
    fake_tool(monkeypatch, bin_dir, "adb", FAKE_ADB.format(python=sys.executable))
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    state = bin_dir / "state"
    state.write_text("device 30000")
    return state


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("none", "no phone found by `adb devices`: plug the phone in over USB"),
        ("unauthorized", "accept the 'Allow USB debugging' prompt"),
        ("device", "ANDROID_NDK_HOME is not set"),
    ],
)
def test_phone_set_up_problems(fake_adb, mode, expected):
    fake_adb.write_text(f"{mode} 30000")
    ok, why = get_device("pixel8").status()
    assert not ok and expected in why and "\n" not in why
    if mode == "device":
        with pytest.raises(DeviceUnavailableError, match="ANDROID_NDK_HOME is not set"):
            space = get_space("nasbench201")
            get_device("pixel8").measure(arch_workload(space, space.arch_at(0), "cifar10"))


def test_tracker_not_running_for_the_phone(fake_adb, tmp_path, monkeypatch):
    ndk = tmp_path / "ndk/toolchains/llvm/prebuilt/linux-x86_64/bin"
    ndk.mkdir(parents=True)
    (ndk / "aarch64-linux-android34-clang++").write_text("")
    monkeypatch.setenv("ANDROID_NDK_HOME", str(tmp_path / "ndk"))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    device = get_device("pixel8", overrides={"rpc": {"tracker": f"127.0.0.1:{dead}"}})
    ok, why = device.status()
    assert not ok and f"TVM RPC tracker 127.0.0.1:{dead} is unreachable" in why


def test_waits_until_the_soc_is_below_the_thermal_limit(fake_adb):
    fake_adb.write_text("device 52000 47500 44900 40000")  # cools down reading by reading
    device = get_device("pixel8", overrides={"thermal_poll_s": 0.01})
    device.before_model()
    assert fake_adb.read_text().split()[1:] == ["40000"]  # stopped at the first reading < 45 C
    assert device.temperatures() == {"BIG": 40.0}  # skin-therm is not watched
    hot = get_device("pixel8", overrides={"thermal_timeout_s": 0, "thermal_poll_s": 0.01})
    fake_adb.write_text("device 60000 60000 60000")
    with pytest.raises(DeviceUnavailableError, match="stayed at 60.0 C .*above 45 C"):
        hot.before_model()
