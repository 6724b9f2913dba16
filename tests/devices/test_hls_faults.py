"""FPGA through hls4ml, bad input: synthesis reports with a missing, unit-suffixed, negative or
infinite clock or negative cycles, and a C synthesis that hangs. Each is one line (HwnasError)
or a correct number; never a traceback and never a nan, negative or infinite latency."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hwnas.devices import get_device
from hwnas.devices.hls_report import parse_csynth_xml
from hwnas.errors import HwnasError

REPORT = Path(__file__).parent / "data" / "hls4ml_galapagos" / "myproject_csynth.xml"
CLOCK = "<TargetClockPeriod>5.00</TargetClockPeriod>"


def _report(tmp_path, old: str, new: str) -> Path:
    text = REPORT.read_text()
    assert old in text
    path = tmp_path / "report.xml"
    path.write_text(text.replace(old, new))
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (CLOCK, "", "no TargetClockPeriod"),
        (CLOCK, "<TargetClockPeriod>-5.00</TargetClockPeriod>", "'-5.00' is not a positive"),
        (CLOCK, "<TargetClockPeriod>inf</TargetClockPeriod>", "'inf' is not a positive"),
        (CLOCK, "<TargetClockPeriod>nan</TargetClockPeriod>", "'nan' is not a positive"),
        (CLOCK, "<TargetClockPeriod>5 ms</TargetClockPeriod>", "'5 ms' is not a positive"),
        ("<Worst-caseLatency>14", "<Worst-caseLatency>-14", "worst-case latency is '-14', a neg"),
        ("<Worst-caseLatency>14", "<Worst-caseLatency>0", "Worst-caseLatency is 0 cycles"),
    ],
)
def test_report_values_that_give_no_latency_are_refused(tmp_path, old, new, message):
    """Before: a report without TargetClockPeriod gave latency nan ms, '5 ms' a ValueError
    traceback, a negative clock or cycle count a negative latency and an infinite clock inf,
    all stored as measurements."""
    path = _report(tmp_path, old, new)
    with pytest.raises(HwnasError, match=message) as caught:
        parse_csynth_xml(path)
    assert "\n" not in str(caught.value)


def test_clock_period_with_an_ns_suffix_is_read(tmp_path):
    """Before: '5.00 ns' (the way the text report writes periods) raised ValueError out of
    parse_csynth_xml; the XML parser now reads it as the text-report parser does."""
    path = _report(tmp_path, CLOCK, "<TargetClockPeriod>5.00 ns</TargetClockPeriod>")
    assert parse_csynth_xml(path).clock_ns == 5.0
    assert parse_csynth_xml(path).latency_ms == pytest.approx(14 * 5e-6)


def test_hung_synthesis_is_stopped_after_synthesis_timeout_s(tmp_path, monkeypatch):
    """Before: C synthesis ran without a timeout, so a hung vitis_hls hung the command for
    ever; now it stops after the profile's synthesis_timeout_s with one line."""
    tools = tmp_path / "bin"
    tools.mkdir()
    vitis = tools / "vitis_hls"
    vitis.write_text("#!/bin/sh\nexec sleep 60\n")
    vitis.chmod(vitis.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    assert get_device("vu9p_hls4ml").synthesis_timeout == 6 * 3600
    device = get_device("vu9p_hls4ml", overrides={"synthesis_timeout_s": 0.5})
    with pytest.raises(HwnasError, match="vitis_hls did not finish within synthesis_timeout_s"):
        device.synthesise(tmp_path)


@pytest.mark.parametrize("bad", [0, -1, "soon", float("inf"), True])
def test_synthesis_timeout_must_be_positive_seconds(bad):
    """Before: there was no synthesis_timeout_s setting (the key was ignored)."""
    with pytest.raises(HwnasError, match="synthesis_timeout_s must be a number of seconds > 0"):
        get_device("vu9p_hls4ml", overrides={"synthesis_timeout_s": bad})


def test_a_timed_out_synthesis_stops_the_wrapper_scripts_children_too(tmp_path, monkeypatch):
    """vitis_hls is a wrapper script that starts the HLS compiler. Before: the timeout stopped
    the wrapper alone and its child went on synthesising (for hours) after the error."""
    import os
    import time

    tools = tmp_path / "bin"
    tools.mkdir()
    pid_file = tmp_path / "child.pid"
    vitis = tools / "vitis_hls"
    vitis.write_text(f"#!/bin/sh\nsleep 60 >/dev/null 2>&1 &\necho $! > {pid_file}\nwait\n")
    vitis.chmod(vitis.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    device = get_device("vu9p_hls4ml", overrides={"synthesis_timeout_s": 1})
    with pytest.raises(HwnasError, match="vitis_hls did not finish within synthesis_timeout_s"):
        device.synthesise(tmp_path)
    child = int(pid_file.read_text())

    def gone():  # killed: reaped, or a zombie where nothing reaps orphans (a container's PID 1)
        try:
            stat_line = Path(f"/proc/{child}/stat").read_text()
        except FileNotFoundError:
            return True
        return stat_line.rsplit(")", 1)[1].split()[0] in ("Z", "X")

    for _ in range(50):
        if gone():
            break
        time.sleep(0.1)
    else:
        os.kill(child, 9)
        raise AssertionError("the synthesis wrapper's child outlived the timeout")


@pytest.mark.parametrize(
    ("key", "value", "nearest"),
    [("strategy", "Resorce", "Resource"), ("strategy", "latncy", "Latency"),
     ("io_type", "io_streem", "io_stream"), ("io_type", "IO_Parallel", "io_parallel")],
)  # fmt: skip
def test_a_mistyped_strategy_or_io_type_breaks_the_profile(key, value, nearest):
    """`strategy: Resorce` was synthesised as the Latency design, stored under a runtime key
    of its own; `io_type: io_streem` was listed as usable, then every candidate failed in
    hls4ml ("Unknown IOType"). Only the documented values are taken (the strategy in any
    case, as hls4ml reads it), and a mistyped one is one line naming the nearest."""
    with pytest.raises(HwnasError) as info:
        get_device("vu9p_hls4ml", overrides={key: value})
    choices = "Latency or Resource" if key == "strategy" else "io_parallel or io_stream"
    assert str(info.value) == f"{key} {value!r} must be {choices}: did you mean {nearest}?"
    for good in ("resource", "Latency") if key == "strategy" else ("io_parallel",):
        assert getattr(get_device("vu9p_hls4ml", overrides={key: good}), key) == good


def test_a_profile_with_a_mistyped_strategy_is_listed_as_broken(hwnas_home, cli):
    (hwnas_home / "devices" / "myfpga.yaml").write_text(
        "name: myfpga\nkind: hls4ml\nio_type: io_parallel\nstrategy: Resorce\n"
    )
    status, out, err = cli("devices", "--all")
    assert status == 0 and "vu9p_hls4ml" in out
    assert "myfpga.yaml: strategy 'Resorce' must be Latency or Resource: did you mean " in out
