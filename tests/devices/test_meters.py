"""Energy meters: counter deltas (with wrap-around), RAPL files, power integration, and the
parsers of tegrastats lines and Android battery readings."""

from __future__ import annotations

import contextlib
import math
import os
import threading
import time

import pytest
from helpers import fake_tool

from hwnas.devices.meters import (
    METERS,
    CounterMeter,
    PowerMeter,
    android_battery_meter,
    integrate_mj,
    nvml_meter,
    parse_battery_w,
    parse_tegrastats_mw,
    rapl_meter,
    tegrastats_meter,
)
from hwnas.errors import DeviceUnavailableError


@pytest.fixture(autouse=True)
def _short_rapl_windows(monkeypatch):
    """RAPL windows of 0.2 s, not 1 s: the test counters tick every 5 ms, so a window's power
    is still within 3%, and each search or measurement here takes seconds less."""
    monkeypatch.setattr("hwnas.devices.meters.RAPL_MIN_WINDOW_S", 0.2)


def test_counter_meter_takes_the_delta_and_handles_wrap_around():
    readings = iter([100.0, 350.0, 990.0, 40.0])
    meter = CounterMeter("nvml-like", lambda: next(readings), wrap_mj=1000.0)
    meter.start()
    assert meter.stop() == 250.0
    meter.start()
    assert meter.stop() == pytest.approx(50.0)  # 990 -> wraps at 1000 -> 40


def _rapl_tree(root, energy_uj: int):
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text("262143328850\n")
    (zone / "name").write_text("package-0\n")
    return zone


def test_rapl_meter_reads_sysfs_in_microjoules(tmp_path):
    zone = _rapl_tree(tmp_path, 5_000_000)
    meter = rapl_meter(tmp_path)
    assert meter.name == "rapl:package-0" and meter.wrap_mj == pytest.approx(262143328.85)
    meter.start()
    (zone / "energy_uj").write_text("5750000\n")  # +0.75 J
    assert meter.stop() == pytest.approx(750.0)


def test_rapl_meter_says_why_it_is_unavailable(tmp_path):
    with pytest.raises(DeviceUnavailableError, match="no RAPL energy counter"):
        rapl_meter(tmp_path / "none")


def test_a_rapl_counter_that_cannot_be_read_is_one_line_never_a_traceback(tmp_path):
    """The counter file deleted or garbled during a measurement, or its range file missing:
    FileNotFoundError / ValueError tracebacks (exit 1), and a hint naming the wrong file."""
    zone = _rapl_tree(tmp_path, 5_000_000)
    meter = rapl_meter(tmp_path)
    meter.start()
    (zone / "energy_uj").unlink()
    with pytest.raises(DeviceUnavailableError, match=r"rapl:package-0 cannot be read: No such"):
        meter.stop()
    (zone / "energy_uj").write_text("garbage\n")
    with pytest.raises(DeviceUnavailableError, match="holds no number"):
        rapl_meter(tmp_path)
    (zone / "energy_uj").write_text("5\n")
    (zone / "max_energy_range_uj").unlink()
    with pytest.raises(DeviceUnavailableError, match=r"range .*max_energy_range_uj cannot be"):
        rapl_meter(tmp_path)


def test_a_power_meter_survives_a_failed_reading_and_refuses_a_window_without_any():
    """One failed battery read over adb killed the sampling thread and left times and watts
    of different lengths: IndexError in stop()."""
    replies = iter([2.0, OSError("adb: device offline"), 2.0, 2.0] + [2.0] * 1000)

    def read():
        value = next(replies)
        if isinstance(value, Exception):
            raise value
        return value

    meter = PowerMeter("battery", read, period_s=0.01)
    meter.start()
    time.sleep(0.1)
    assert meter.stop() > 0
    dead = PowerMeter("battery", lambda: float("x"), period_s=0.01)
    dead.start()
    time.sleep(0.05)
    with pytest.raises(DeviceUnavailableError, match="got 0 readings and .* failed ones"):
        dead.stop()


@pytest.mark.parametrize(
    ("line", "mw"),
    [
        # Orin (JetPack 5/6): VDD_IN is the module input
        (
            "RAM 2448/30536MB (lfb 6611x4MB) CPU [0%@729,1%@729] GR3D_FREQ 0% "
            "VDD_GPU_SOC 2759mW/2759mW VDD_CPU_CV 394mW/394mW VIN_SYS_5V0 2620mW/2620mW "
            "VDD_IN 5123mW/5001mW",
            5123.0,
        ),
        # Nano (JetPack 4): no unit, POM_5V_IN is the input
        (
            "RAM 1637/3956MB (lfb 4x4MB) SWAP 0/1978MB CPU [9%@102,4%@102,off,off] "
            "EMC_FREQ 0% GR3D_FREQ 0% PLL@20C POM_5V_IN 2361/2361 POM_5V_GPU 0/0 "
            "POM_5V_CPU 361/361",
            2361.0,
        ),
        # a board printing only sub-rails: their sum
        ("CPU [1%@1190] VDD_A 100mW/100mW VDD_B 250mW/240mW", 350.0),
        ("RAM 1637/3956MB CPU [9%@102]", None),
    ],
)
def test_tegrastats_power_lines(line, mw):
    assert parse_tegrastats_mw(line) == mw


def test_battery_power_from_current_and_voltage():
    assert parse_battery_w("-512000\n3850000\n") == pytest.approx(0.512 * 3.85)
    with pytest.raises(ValueError):
        parse_battery_w("Charging")


def test_power_meter_integrates_samples_in_a_thread():
    meter = PowerMeter("const", lambda: 2.0, period_s=0.01, min_window_s=0.0)
    meter.start()
    time.sleep(0.2)
    energy = meter.stop()
    assert energy == pytest.approx(2.0 * 0.2 * 1e3, rel=0.25)  # 2 W for ~0.2 s = ~400 mJ
    assert integrate_mj([0.0, 1.0, 3.0], [1.0, 3.0, 3.0]) == pytest.approx(8000.0)


def test_a_phone_battery_read_over_a_slow_adb_gives_the_windows_power():
    """Each battery read over adb takes a round trip (150 ms here; Wi-Fi adb, which the
    meter's own message recommends, takes 100-300 ms): the readings were integrated from the
    first to the last, up to two round trips past the window, and divided by the window, so
    a constant 300 mA x 3.8 V = 1.14 W read 1.29 W (+13%). Now within 2%."""
    from hwnas.runtimes.timing import TimingProtocol, time_callable

    def shell(command):
        if command.endswith("/status"):
            return "Discharging\n"
        time.sleep(0.15)
        return "-300000\n3800000\n"

    protocol = TimingProtocol(warmup=0, calls_per_round=5, min_rounds=3, max_rounds=3)
    timing = time_callable(lambda: None, protocol, android_battery_meter(shell))
    assert timing.window_s >= 2.0  # the sampled meter's shortest window
    assert timing.power_w == pytest.approx(1.14, rel=0.02)


def test_android_battery_refuses_while_charging():
    replies = {
        "cat /sys/class/power_supply/battery/status": "Charging\n",
        "cat /sys/class/power_supply/battery/current_now "
        "/sys/class/power_supply/battery/voltage_now": "812000\n4100000\n",
    }
    with pytest.raises(DeviceUnavailableError, match="charging"):
        android_battery_meter(lambda cmd: replies[cmd])
    replies["cat /sys/class/power_supply/battery/status"] = "Discharging\n"
    meter = android_battery_meter(lambda cmd: replies[cmd], period_s=0.01)
    meter.start()
    time.sleep(0.05)
    assert meter.stop() > 0


def test_missing_meters_are_one_line_errors(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(DeviceUnavailableError, match="tegrastats is not on PATH"):
        tegrastats_meter()
    try:
        import pynvml  # noqa: F401
    except ImportError:
        with pytest.raises(DeviceUnavailableError, match=r"pip install .hwnas\[cuda\]."):
            nvml_meter()
    assert set(METERS.names()) == {"android_battery", "nvml", "rapl", "tegrastats"}


SECRET = "-----BEGIN OPENSSH PRIVATE KEY----- b3BlbnNzaC1rZXktdjEAAAABG5vbmU"


def test_a_profiles_rapl_folder_shows_no_file_but_a_plain_zone_name(tmp_path, cli):
    """A handed profile's `energy: {meter: rapl, root: FOLDER}` whose `name` file links to
    ~/.ssh/id_ed25519: `hwnas devices check` printed the key's first line as the meter's name.
    The meter reads its files through no link, and shows a zone name only when it is a plain
    word (a hard link, a copy: never shown)."""
    import os

    (tmp_path / "id_ed25519").write_text(SECRET + "\n")
    zone = _rapl_tree(tmp_path / "rapl", 5_000_000)
    (zone / "name").unlink()
    (zone / "name").symlink_to(tmp_path / "id_ed25519")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "mycpu.yaml").write_text(
        "name: mycpu\nkind: local\nclass: cpu\ndescription: test\nruntime: ort\n"
        f"energy: {{meter: rapl, root: {tmp_path / 'rapl'}}}\n"
        "timing: {warmup: 1, rounds: 3, calls_per_round: 2, threads: 1, max_cv: none}\n"
    )
    status, out, err = cli("devices", "check", "mycpu", profiles=profiles)
    said = "".join((out + err).split())  # the console wraps its lines anywhere
    assert status == 0 and "OPENSSH" not in said, out + err
    assert "".join(f"RAPL zone name {zone / 'name'} cannot be read".split()) in said, out + err

    (zone / "name").unlink()
    os.link(tmp_path / "id_ed25519", zone / "name")  # readable as a regular file: not shown
    assert rapl_meter(tmp_path / "rapl").name == "rapl:intel-rapl:0"
    (zone / "name").unlink()
    (zone / "energy_uj").rename(tmp_path / "energy_uj")
    (zone / "energy_uj").symlink_to(tmp_path / "energy_uj")
    with pytest.raises(DeviceUnavailableError, match="energy_uj is a link, not the kernel's"):
        rapl_meter(tmp_path / "rapl")
    with pytest.raises(ValueError, match="zone must be one folder name"):
        rapl_meter(tmp_path, zone="../rapl/intel-rapl:0")


def test_an_energy_search_without_a_meter_says_why(tmp_path, cli):
    """`hwnas search --device cpu --objective energy` on a machine without RAPL said only
    "has no energy_mj measurements (it has: latency_ms)"; the meter's reason was known."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "mycpu.yaml").write_text(
        "name: mycpu\nkind: local\nclass: cpu\ndescription: test\nruntime: ort\n"
        f"energy: {{meter: rapl, root: {tmp_path / 'none'}}}\n"
    )
    status, out, err = cli("search", "--device", "mycpu", "--objective", "energy",
                           profiles=profiles)  # fmt: skip
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "has no energy_mj measurements (it has: latency_ms): no RAPL energy counter at" in err




def test_tegrastats_energy_covers_its_window_and_a_stalled_meter_is_refused(
    tmp_path, monkeypatch
):
    """A Jetson's energy from tegrastats: integrated between its first and last reading alone
    it read about 3% low; one that ignored SIGTERM ended in a traceback (TimeoutExpired);
    one that stopped reporting mid-window gave a silently low energy."""
    from hwnas.devices.meters import TegrastatsMeter

    line = 'echo "RAM 1/2MB VDD_IN 5000mW/5000mW"'
    def _fake_tegrastats(name: str, body: str) -> str:  # a Jetson's 5 W input, as body says
        return str(fake_tool(monkeypatch, tmp_path, name, "#!/bin/sh\n" + body))

    steady = _fake_tegrastats("steady", f"while true; do {line}; sleep 0.05; done\n")
    meter = TegrastatsMeter(interval_ms=50, command=steady)
    meter.start()
    time.sleep(1.0)
    t = time.perf_counter() - meter._t0
    assert meter.stop() == pytest.approx(5.0 * t * 1e3, rel=0.02)  # 5 W over the window
    stubborn = _fake_tegrastats(
        "stubborn", f"trap '' TERM\nwhile true; do {line}; sleep 0.05; done\n"
    )
    meter = TegrastatsMeter(interval_ms=50, command=stubborn)
    meter.start()
    time.sleep(0.5)
    assert meter.stop() > 0  # killed, no TimeoutExpired
    dies = _fake_tegrastats("dies", f"{line}; sleep 0.05; {line}; exit 0\n")
    meter = TegrastatsMeter(interval_ms=50, command=dies)
    meter.start()
    time.sleep(1.0)
    with pytest.raises(DeviceUnavailableError, match="it stopped reporting"):
        meter.stop()


@contextlib.contextmanager
def _ticking(zone, watts: float | None):
    """A RAPL counter at ``watts`` (W) in ``zone``, written every 5 ms as the kernel's is
    (None: a frozen counter, that never moves)."""
    stop = threading.Event()
    t0 = time.perf_counter()

    def tick():
        while not stop.is_set():
            uj = int((time.perf_counter() - t0) * (watts or 0.0) * 1e6) + 5_000_000
            tmp = zone / ".tmp"
            tmp.write_text(f"{uj}\n")
            os.replace(tmp, zone / "energy_uj")
            stop.wait(0.005)

    thread = threading.Thread(target=tick, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _metered_cpu(tmp_path):
    """A profile folder with ``mycpu``: the fast CPU protocol, RAPL read from a test folder."""
    zone = _rapl_tree(tmp_path / "rapl", 5_000_000)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "mycpu.yaml").write_text(
        "name: mycpu\nkind: local\nclass: cpu\ndescription: test\nruntime: ort\n"
        f"energy: {{meter: rapl, root: {tmp_path / 'rapl'}}}\n"
        "timing: {warmup: 2, rounds: 3, calls_per_round: 5, threads: 1, max_cv: none,\n"
        "         max_wait_share: 1000000}\n"
    )
    return zone, profiles


def test_a_live_energy_is_its_windows_power_times_the_latency_and_has_no_cv(
    tmp_path, cli, monkeypatch, hwnas_home
):
    """Under a constant 10 W RAPL counter, a model descheduled on every 4th call (a 20 ms
    sleep): the energy per inference was the window's energy over its calls, the mean wall
    time per call, while the latency is a median (energy / latency read 8.8-63.5 W in an
    audit); calibration.csv wrote a CV of 0.0000 for the one meter reading, and the energy's
    stored extra held the latency's 95% interval."""
    import csv

    from hwnas.runtimes.onnxruntime import OrtExecutable
    from hwnas.store import MeasurementStore

    zone, profiles = _metered_cpu(tmp_path)
    run = OrtExecutable.__call__
    calls = [0]

    def descheduled(self):
        calls[0] += 1
        run(self)
        if calls[0] % 4 == 0:
            time.sleep(0.02)

    monkeypatch.setattr(OrtExecutable, "__call__", descheduled)
    with _ticking(zone, 10.0):
        status, out, err = cli("refset", "measure", "--device", "mycpu", "--metric", "energy_mj",
                               "--select", "random", "-n", "3", "--out", "ref",
                               profiles=profiles)  # fmt: skip
        assert status == 0, out + err
        # one fresh model, counted once (its energy, stored with it, read "1 from the store")
        said = [cli("measure", "--device", "mycpu", "--arch", "4242", profiles=profiles)[1]
                for _ in range(2)]  # fmt: skip
    assert "1 measured, 0 from the store, 0 read from a table" in " ".join(said[0].split())
    assert "0 measured, 1 from the store, 0 read from a table" in " ".join(said[1].split())
    store = MeasurementStore(hwnas_home / "measurements.db")
    latency = {m.model_hash: m for m in store.measurements("mycpu", "latency_ms")}
    energy = store.measurements("mycpu", "energy_mj")
    assert len(energy) == 4 and len(latency) == 4
    for m in energy:
        assert m.value / latency[m.model_hash].value == pytest.approx(10.0, rel=0.1), m.extra
        assert m.extra["power_w"] == pytest.approx(10.0, rel=0.1)
        assert math.isnan(m.known_cv) and "rel_ci" not in m.extra and "rounds" not in m.extra
    rows = list(csv.DictReader((tmp_path / "ref" / "calibration.csv").open()))
    assert len(rows) == 3 and all(r["cv"] == "" and float(r["energy_mj"]) > 0 for r in rows)


def test_a_frozen_counter_costs_no_latency_and_refuses_an_energy_search_before_any_work(
    tmp_path, cli, hwnas_home
):
    """A RAPL counter that never moves (a VM's; `cpu` reads RAPL with `energy: auto`):
    `hwnas measure` exited 2 ("read 0 mJ ... energy not stored") without storing the latency
    it had timed, a latency search stopped after 5 candidates "could not be measured", and
    an energy search measured 5 before stopping. Now the latency is stored and energy left out
    with one warning per run; an energy search stops in one line before any work."""
    from hwnas.store import MeasurementStore

    _zone, profiles = _metered_cpu(tmp_path)  # its counter is never written again: frozen
    status, out, err = cli("measure", "--device", "mycpu", "--arch", "5", "--arch", "77",
                           profiles=profiles)  # fmt: skip
    assert status == 0 and "2 measured, 0 from the store" in " ".join(out.split()), out + err
    warned = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warned) == 1 and "rapl:package-0 read 0 mJ" in warned[0], err
    assert "energy is not stored (latency is)" in warned[0]
    store = MeasurementStore(hwnas_home / "measurements.db")
    assert len(store.measurements("mycpu", "latency_ms")) == 2
    assert store.measurements("mycpu", "energy_mj") == []

    status, out, err = cli("search", "--device", "mycpu", "--strategy", "random", "--budget",
                           "3", "--out", "runs/l", profiles=profiles)  # fmt: skip
    assert status == 0 and "3 architectures scored" in out, out + err
    assert sum(line.startswith("warning: device 'mycpu'") for line in err.splitlines()) == 1

    status, out, err = cli("search", "--device", "mycpu", "--objective", "energy", "--budget",
                           "3", "--out", "runs/e", profiles=profiles)  # fmt: skip
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert "cannot measure energy: energy meter rapl:package-0 counted 0 mJ over 0.3 s" in err
    assert "the counter does not move" in err and not (tmp_path / "runs" / "e").exists()
