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
with pathlib.Path(__file__).with_name("calls").open("a") as log:
    log.write(" ".join(args) + "\\n")
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
    if args[1:] == ["--list"] and mode == "listed":
        print("UsbFfs tcp:9 tcp:9")
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


def test_hanging_adb_reverse_is_the_phone_not_reachable(adb_mode, monkeypatch):
    """Before: `adb reverse` hanging raised subprocess.TimeoutExpired out of status() (a
    traceback) instead of reporting the phone as not reachable. (It runs when a measurement
    starts now: listing devices changes nothing on the phone.)"""
    monkeypatch.setattr("hwnas.devices.rpc.tracker_unreachable", lambda host, port: None)
    adb_mode.write_text("hangreverse")
    with pytest.raises(DeviceUnavailableError) as info:
        _phone().forward_tracker()
    assert "\n" not in str(info.value)
    assert "`adb reverse tcp:9 tcp:9` did not answer within 1 s" in str(info.value)


def test_listing_devices_forwards_no_port_to_the_phone(adb_mode, hwnas_home, cli):
    """`hwnas devices` ran `adb reverse tcp:PORT tcp:PORT` for every android profile, a handed
    one too, whatever its port (5432: PostgreSQL) and tracker host: the rule stayed on the
    phone after hwnas ended, exposing that port of this machine to every app on the phone.
    Listing now runs no adb command but `adb devices`."""
    (hwnas_home / "devices" / "handed.yaml").write_text(
        "name: handed\nkind: android\nruntime: tvm\nrpc: {tracker: 127.0.0.1:5432, key: k}\n"
    )
    status, out, err = cli("devices", "--all")
    assert status == 0 and "handed" in out and "pixel8" in out, out + err
    calls = (adb_mode.parent / "calls").read_text().splitlines()
    assert calls and all(c == "devices" or c.startswith("shell ") for c in calls), calls


def test_a_measurement_forwards_the_tracker_port_and_removes_it_at_the_end(adb_mode, monkeypatch):
    """The tracker's port is forwarded to the phone when a measurement starts (not when
    devices are listed), once per process, only for a tracker on this machine that answers
    TVM's handshake, and removed when the process ends; a rule the phone had is left alone."""
    from hwnas.devices import android
    from hwnas.devices.live import LiveDevice

    log = adb_mode.parent / "calls"
    seen = []
    monkeypatch.setattr(android, "_FORWARDS", {})
    monkeypatch.setattr("hwnas.devices.rpc.registered_keys", lambda host, port: ["k"])
    monkeypatch.setattr(LiveDevice, "measure_all", lambda self, w: seen.append(log.read_text()))
    with pytest.raises(DeviceUnavailableError, match="127.0.0.1:9 is unreachable .*forwarded"):
        _phone().measure_all(None)  # no tracker answers there: nothing forwarded
    assert "reverse" not in log.read_text() and not seen
    monkeypatch.setattr("hwnas.devices.rpc.tracker_unreachable", lambda host, port: None)
    phone = _phone()
    phone.measure_all(None)
    phone.measure_all(None)
    assert seen[0].splitlines()[-2:] == ["reverse --list", "reverse tcp:9 tcp:9"]
    assert log.read_text().count("reverse tcp:9 tcp:9") == 1  # once per process
    android.remove_forwards()
    assert log.read_text().splitlines()[-1] == "reverse --remove tcp:9"
    log.write_text("")
    adb_mode.write_text("listed")  # the phone forwards it already: kept as it is
    _phone().measure_all(None)
    android.remove_forwards()
    assert [c for c in log.read_text().splitlines() if "reverse" in c] == ["reverse --list"]
    log.write_text("")
    _phone(rpc={"tracker": "10.0.0.5:9190", "key": "k"}).measure_all(None)  # not here
    assert "reverse" not in log.read_text()


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
