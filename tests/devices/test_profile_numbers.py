"""Numbers in a user's device profile: a word, NaN, a bool, a fraction where a count is needed
or a value out of range is refused in one line naming the key (a Python ValueError repr
before), and the profile's other devices still work."""

from __future__ import annotations

import pytest
import yaml
from helpers import hwnas_main

PHONE = {"name": "myphone", "kind": "android", "runtime": "tvm",
         "rpc": {"tracker": "127.0.0.1:9190", "key": "ph"}}  # fmt: skip
FPGA = {"name": "myfpga", "kind": "hls4ml"}
GPU = {"name": "mygpu", "kind": "cuda", "runtime": "ort"}
LOCAL = {"name": "mycpu", "kind": "local", "runtime": "ort"}
TABLE = {"name": "mytable", "kind": "recorded",
         "tables": {"nasbench201": {"latency_ms": {"file": "t.csv"}}}}  # fmt: skip


@pytest.mark.parametrize(
    ("profile", "key", "value", "message"),
    [
        (PHONE, "thermal_timeout_s", "soon", "thermal_timeout_s must be a number of seconds >= 0"),
        (PHONE, "thermal_limit_c", ".nan", "thermal_limit_c must be a number of °C"),
        (PHONE, "thermal_poll_s", 0, "thermal_poll_s must be a number of seconds > 0"),
        (PHONE, "adb_timeout_s", "true", "adb_timeout_s must be a number of seconds > 0"),
        (FPGA, "clock_period_ns", "5ns", "clock_period_ns must be a number of ns > 0"),
        (FPGA, "reuse_factor", 2.5, "reuse_factor must be a whole number >= 1, got 2.5"),
        (GPU, "gpu", -1, "gpu must be a whole number >= 0, got -1"),
        (TABLE, "batch_size", 0, "batch_size must be a whole number >= 1, got 0"),
        # the path once (it was given twice: "PATH is broken: PATH: timing.threads ...")
        (LOCAL, "timing", {"threads": -3}, "timing.threads must be at least 1"),
    ],
)
def test_a_bad_number_in_a_profile_is_one_line_naming_its_key(
    hwnas_home, profile, key, value, message
):
    path = hwnas_home / "devices" / f"{profile['name']}.yaml"
    text = yaml.safe_dump({**profile, key: value})
    path.write_text(text.replace("'.nan'", ".nan").replace("'true'", "true"))
    r = hwnas_main("devices", "check", profile["name"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert f"{path} is broken: {message}" in r.stderr and "Error(" not in r.stderr
    r = hwnas_main("devices")
    assert r.returncode == 0 and "pixel3" in r.stdout
    assert message in r.stdout + r.stderr


def test_a_phones_adb_timeout_comes_from_its_profile(hwnas_home):
    from hwnas.devices import get_device

    assert get_device("pixel8").adb.timeout == 30
    phone = get_device("pixel8", overrides={"adb_timeout_s": 90})
    assert phone.adb.timeout == 90
