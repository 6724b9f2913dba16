"""Android phones misbehaving: adb output that is not UTF-8, adb commands that fail or hang,
and thermal zones that read nan/inf. Each gives one line (a status, or DeviceUnavailableError),
never a traceback and never a wrong temperature. A stand-in `adb` plays the phone."""

from __future__ import annotations

import sys

import pytest
from helpers import fake_tool

from hwnas.devices import get_device
from hwnas.devices.android import parse_thermal_zones
from hwnas.errors import DeviceUnavailableError

FAKE_ADB = """#!{python}
import pathlib, sys, time
mode = pathlib.Path(__file__).with_name("mode").read_text().strip()
args = sys.argv[1:]
if args[:1] == ["-s"]:
    args = args[2:]
if args == ["devices"]:
    sys.stdout.flush()
    if mode == "garbled":
        sys.stdout.buffer.write(b"List of devices attached\\n\\x00\\xff\\xfe\\n")
        print("37021FDJH000ZZ\\tdevice")
    else:
        print("List of devices attached\\n37021FDJH000ZZ\\tdevice")
elif args[:1] == ["reverse"]:
    if mode == "hangreverse":
        time.sleep(60)
elif args[:1] == ["shell"]:
    if mode == "hangshell":
        time.sleep(60)
    if mode == "failshell":
        sys.stderr.write("error: closed\\n")
        sys.exit(1)
    if "thermal_zone" in args[1]:
        print("big nan\\nsoc inf\\nmid -inf\\nlittle 41000" if mode == "nan" else "big 30000")
    elif "getprop" in args[1]:
        print("google/shiba/shiba:14/AP1A/123:user/release-keys")
else:
    sys.exit(1)
"""


@pytest.fixture
def adb_mode(tmp_path, monkeypatch):
    """An `adb` on PATH playing a phone, an NDK, and a listening port as the tracker; returns
    the file holding the fake's mode (garbled, hangreverse, hangshell, failshell, nan)."""
    bin_dir = tmp_path / "bin"
    fake_tool(monkeypatch, bin_dir, "adb", FAKE_ADB.format(python=sys.executable))
    ndk = tmp_path / "ndk/toolchains/llvm/prebuilt/linux-x86_64/bin"
    ndk.mkdir(parents=True)
    (ndk / "aarch64-linux-android34-clang++").write_text("")
    monkeypatch.setenv("ANDROID_NDK_HOME", str(tmp_path / "ndk"))
    mode = bin_dir / "mode"
    mode.write_text("good")
    return mode


def _phone(**overrides):
    device = get_device("pixel8", overrides={"rpc": {"tracker": "127.0.0.1:9", "key": "k"},
                                             "thermal_poll_s": 0.01, **overrides})  # fmt: skip
    device.adb.timeout = 1.0
    return device


def test_adb_devices_output_that_is_not_utf8_still_finds_the_phone(adb_mode):
    """Before: `adb devices` printing bytes that are not UTF-8 (\\xff\\xfe) raised
    UnicodeDecodeError out of status(), which killed the whole `hwnas devices` listing."""
    adb_mode.write_text("garbled")
    serial, why = _phone().phone()
    assert serial == "37021FDJH000ZZ" and why == "phone 37021FDJH000ZZ"


def test_hanging_adb_reverse_is_the_phone_not_reachable(adb_mode):
    """Before: `adb reverse` hanging raised subprocess.TimeoutExpired out of status() (a
    traceback) instead of reporting the phone as not reachable."""
    adb_mode.write_text("hangreverse")
    ok, why = _phone().status()
    assert not ok and "\n" not in why
    assert "`adb reverse tcp:9 tcp:9` did not answer within 1 s" in why


@pytest.mark.parametrize("mode", ["hangshell", "failshell"])
def test_phone_that_stops_answering_mid_measurement_is_one_line(adb_mode, mode):
    """Before: the thermal read before each model raised subprocess.TimeoutExpired (adb shell
    hanging) or a bare OSError (adb shell failing) out of measure/search: a traceback."""
    adb_mode.write_text(mode)
    device = _phone()
    with pytest.raises(DeviceUnavailableError, match="^the phone stopped answering: adb shell "):
        device.before_model()
    try:
        device.before_model()
    except DeviceUnavailableError as exc:
        assert "\n" not in str(exc)
        said = "did not answer within 1 s" if mode == "hangshell" else "failed: error: closed"
        assert said in str(exc)


def test_device_versions_survive_a_hanging_adb_shell(adb_mode):
    """Before: device_versions caught OSError but not subprocess.TimeoutExpired, so a hanging
    `adb shell getprop` was a traceback; now the Android version is just left out."""
    device = _phone()
    fingerprint = "google/shiba/shiba:14/AP1A/123:user/release-keys"
    assert device.device_versions()["android"] == fingerprint
    adb_mode.write_text("hangshell")
    assert "android" not in device.device_versions()


def test_thermal_zones_reading_nan_or_inf_are_left_out(adb_mode):
    """Before: 'nan' and 'inf' readings were kept, so before_model waited the whole
    thermal_timeout_s and then said 'phone stayed at nan C'."""
    assert parse_thermal_zones("big nan\nsoc inf\nmid -inf\nlittle 41000\n") == {"little": 41.0}
    adb_mode.write_text("nan")
    device = _phone(thermal_timeout_s=0)
    assert device.temperatures() == {"little": 41.0}
    device.before_model()  # 41 C is below the 45 C limit: no wait, no error


def test_a_serial_that_yaml_reads_as_a_number_breaks_only_that_profile(adb_mode, hwnas_home, cli):
    """`serial: 12345678` (YAML's integer; `0123456789` even loses its zero): adb's argv got an
    int, and `hwnas devices` (every device, --json too) and `hwnas measure` ended in a
    TypeError traceback. The profile is now refused as it is read: one line saying to quote
    the serial; every other device is listed."""
    (hwnas_home / "devices" / "myphone.yaml").write_text(
        "name: myphone\nkind: android\nruntime: tvm\nserial: 12345678\n"
        "rpc: {tracker: 127.0.0.1:9, key: k}\n"
    )
    status, out, err = cli("devices")
    assert status == 0 and "pixel3" in out, err
    said = 'serial must be text: quote it (serial: "12345678")'
    assert f"myphone.yaml: {said}" in out + err and "Traceback" not in out + err
    status, out, err = cli("measure", "--device", "myphone", "--arch", "0")
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert f"myphone.yaml is broken: {said}" in err
