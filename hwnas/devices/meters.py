"""Energy meters read around a timed loop: energy per inference in mJ.

A meter has two methods: :meth:`Meter.start` and :meth:`Meter.stop` (the energy in mJ spent
between them), and says how long a window it needs to be accurate (``min_window_s``).
:func:`hwnas.runtimes.timing.time_callable` takes the window's mean power (its energy over its
length) times the median latency as the energy per inference.

Two shapes of meter exist: a cumulative energy *counter* (NVML's total-energy counter on
NVIDIA GPUs, RAPL's ``energy_uj`` on x86 CPUs) read at both ends, and a *power* reading sampled
in a background thread and integrated over time (an Android phone's battery current x voltage
over adb, a Jetson's ``tegrastats`` rails). Meters are named in profiles
(``energy: {meter: nvml}``) and resolved through :data:`METERS`; each factory raises
:class:`~hwnas.errors.DeviceUnavailableError` with one line saying why the meter cannot be
read here.
"""

from __future__ import annotations

import errno
import math
import re
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path

from hwnas.errors import DeviceUnavailableError
from hwnas.registry import Registry

PROBE_S = 0.3
"""Seconds of busy work a counter must count energy over before a command that optimises or
calibrates on energy starts (:meth:`Meter.probe`)."""

RAPL_MIN_WINDOW_S = 1.0
"""Shortest window (s) a RAPL counter is read over: the kernel updates it about every ms, and
a 1 s window keeps that step and the read's own cost under 0.1% of the energy."""


class Meter(ABC):
    """An energy meter.

    Attributes:
        name: what is measured ("nvml:0", "rapl:package-0"...).
        min_window_s: shortest window (s) the meter reads accurately.
    """

    name: str = ""
    min_window_s: float = 0.0

    @abstractmethod
    def start(self) -> None:
        """Start a window."""

    @abstractmethod
    def stop(self) -> float:
        """End the window; the energy spent in it, in mJ."""

    def probe(self, seconds: float = 0.0) -> str | None:
        """Whether the meter counts at all, checked before a command that needs its energy
        does any work: one line saying why not, or None. A meter without a quick check (a
        sampled power: its window refuses a meter that stopped reporting) says None."""
        return None


class CounterMeter(Meter):
    """A cumulative energy counter read at both ends of the window.

    Args:
        name: what is measured.
        read_mj: returns the counter in mJ.
        wrap_mj: the counter's range (it wraps to 0 past it), or None.
        min_window_s: shortest accurate window (s).
    """

    def __init__(
        self,
        name: str,
        read_mj: Callable[[], float],
        wrap_mj: float | None = None,
        min_window_s: float = 1.0,
    ):
        self.name = name
        self.read_mj = read_mj
        self.wrap_mj = wrap_mj
        self.min_window_s = min_window_s
        self._start: float | None = None

    def _read(self) -> float:
        try:
            return float(self.read_mj())
        except Exception as exc:  # a counter file gone or garbled, a driver's error
            raise DeviceUnavailableError(
                f"energy meter {self.name} cannot be read: {_why(exc)}"
            ) from None

    def start(self) -> None:
        self._start = self._read()

    def stop(self) -> float:
        """The energy counted since :meth:`start`, in mJ (a counter that wrapped once is
        corrected by its range).

        Raises:
            DeviceUnavailableError: the counter cannot be read.
        """
        if self._start is None:
            raise RuntimeError("stop() before start()")
        delta = self._read() - self._start
        self._start = None
        if delta < 0 and self.wrap_mj:
            delta += self.wrap_mj
        return delta

    def probe(self, seconds: float = PROBE_S) -> str | None:
        """Read the counter around ``seconds`` of busy work on this process's CPU: a
        counter that did not move (a virtual machine's RAPL counter can be frozen at one
        value) or ran backwards is one line saying so, else None.

        Raises:
            DeviceUnavailableError: the counter cannot be read.
        """
        self.start()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:  # busy: a package draws more than when idle
            pass
        delta = self.stop()
        if math.isfinite(delta) and delta > 0:
            return None
        return (
            f"energy meter {self.name} counted {delta:g} mJ over {seconds:g} s of busy work: "
            "the counter does not move (a virtual machine's RAPL counter can be frozen)"
        )


def _why(exc: BaseException) -> str:
    """One line saying why a meter reading failed."""
    text = (getattr(exc, "strerror", None) or str(exc)).strip()
    return (text.splitlines() or [type(exc).__name__])[0][:200]


def integrate_mj(times_s: Sequence[float], watts: Sequence[float]) -> float:
    """Energy in mJ of power samples ``watts`` (W) taken at ``times_s`` (s): trapezoid rule."""
    total = 0.0
    for i in range(1, len(times_s)):
        total += (times_s[i] - times_s[i - 1]) * (watts[i] + watts[i - 1]) / 2
    return total * 1e3


class PowerMeter(Meter):
    """Power readings sampled every ``period_s`` in a thread: the window's energy is their
    time-weighted mean power times the window's length.

    Args:
        name: what is measured.
        read_w: returns the current power draw in W.
        period_s: sampling period.
        min_window_s: shortest accurate window (s).
    """

    def __init__(
        self,
        name: str,
        read_w: Callable[[], float],
        period_s: float = 0.1,
        min_window_s: float = 2.0,
    ):
        self.name = name
        self.read_w = read_w
        self.period_s = period_s
        self.min_window_s = min_window_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._times: list[float] = []
        self._watts: list[float] = []
        self._failed: list[str] = []
        self._t0 = 0.0

    def _sample(self) -> None:
        """One reading, kept with its time; a reading that fails is left out and counted
        (over adb a phone's read can fail once; :meth:`stop` refuses a window without
        readings)."""
        try:
            watts = float(self.read_w())
        except Exception as exc:  # adb gone, a value that does not parse
            self._failed.append(_why(exc))
            return
        self._times.append(time.perf_counter())
        self._watts.append(watts)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self._sample()

    def start(self) -> None:
        self._times, self._watts, self._failed = [], [], []
        self._stop.clear()
        self._sample()
        self._t0 = time.perf_counter()  # the window: from here (the caller's timing starts)
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        """The energy of the window (from the end of :meth:`start` to this call), in mJ: the
        readings' time-weighted mean power (trapezoid rule over their own time span) times
        the window's length. A reading that takes a round trip (a phone's battery over adb:
        150 ms over Wi-Fi) lands after the moment it measured, and the last ones after the
        window: integrating from the first reading to the last and dividing by the window
        read a constant 1.14 W as 1.29 W over a 2 s window.

        Raises:
            DeviceUnavailableError: fewer than two readings, or more failed readings than
                good ones.
        """
        window_s = time.perf_counter() - self._t0
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()
        if len(self._watts) < 2 or len(self._failed) > len(self._watts):
            why = f"; last: {self._failed[-1]}" if self._failed else ""
            raise DeviceUnavailableError(
                f"energy meter {self.name} got {len(self._watts)} readings and "
                f"{len(self._failed)} failed ones over the window{why}"
            )
        span_s = self._times[-1] - self._times[0]
        if span_s > 0:
            mean_w = integrate_mj(self._times, self._watts) / 1e3 / span_s
        else:  # readings within the clock's resolution
            mean_w = sum(self._watts) / len(self._watts)
        return mean_w * window_s * 1e3


# -- RAPL (x86 CPUs) ------------------------------------------------------------------------

RAPL_ROOT = Path("/sys/class/powercap")

RAPL_ZONE = re.compile(r"[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,63}")
"""A RAPL zone: one folder name (``intel-rapl:0``, ``intel-rapl:0:1``), never a path."""

RAPL_LABEL = re.compile(r"[A-Za-z0-9_.:-]{1,32}")
"""A zone's ``name`` as the kernel writes it (``package-0``, ``core``, ``dram``, ``psys``): the
only text of a RAPL file hwnas ever shows."""

RAPL_FILE_BYTES = 64
"""Bytes read of a RAPL file (a counter is at most 20 digits, a zone name a word)."""


def _rapl_text(path: Path) -> str:
    """The text of the RAPL file ``path``: a regular file (the kernel's, or a test's), read
    through no link and at most :data:`RAPL_FILE_BYTES` bytes. A profile names the folder
    (``energy: {meter: rapl, root: ...}``): a ``name`` linked to ``~/.ssh/id_ed25519`` there
    was read and shown in a message.

    Raises:
        OSError: missing, a link, not a regular file (a pipe would block), unreadable.
    """
    import os
    import stat

    if path.is_symlink():
        raise OSError(f"{path} is a link, not the kernel's file")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(fd, RAPL_FILE_BYTES).decode("ascii", "replace")
    finally:
        os.close(fd)


def _rapl_number(path: Path) -> float:
    """The number a RAPL file holds (:func:`_rapl_text`).

    Raises:
        OSError: see :func:`_rapl_text`.
        ValueError: no number (the text is not shown: it is not known to be the kernel's).
    """
    text = _rapl_text(path).strip()
    if not re.fullmatch(r"\d{1,20}", text):
        raise ValueError(f"{path} holds no number")
    return float(text)


def rapl_meter(root: str | Path = RAPL_ROOT, zone: str = "intel-rapl:0") -> CounterMeter:
    """The RAPL package counter (``<root>/<zone>/energy_uj``, wrapping at
    ``max_energy_range_uj``). ``root`` is another folder laid out as the kernel's powercap
    folder (the tests' stand-in; a container's bind mount); its files are read only as the
    kernel's are (:func:`_rapl_text`): regular files, never a link, a few bytes, and nothing
    but a plain zone name is ever shown.

    Raises:
        DeviceUnavailableError: no RAPL zone, or not readable (root-only since Linux 5.10), or
            a file that is not the kernel's (a link, a pipe).
        ValueError: a zone that is not one folder name.
    """
    if not isinstance(zone, str) or not RAPL_ZONE.fullmatch(zone):
        raise ValueError(f"zone must be one folder name like intel-rapl:0, got {str(zone)[:40]!r}")
    folder = Path(root) / zone
    counter = folder / "energy_uj"
    if not counter.exists() and not counter.is_symlink():
        raise DeviceUnavailableError(
            f"no RAPL energy counter at {counter} (not an x86 CPU with RAPL, or a VM without it)"
        )
    try:
        _rapl_number(counter)
    except OSError as exc:
        hint = f"; run `sudo chmod o+r {counter}` to allow it" if exc.errno == errno.EACCES else ""
        raise DeviceUnavailableError(
            f"RAPL counter {counter} is not readable ({exc.strerror or exc}){hint}"
        ) from None
    except ValueError:
        raise DeviceUnavailableError(f"RAPL counter {counter} holds no number") from None
    span = folder / "max_energy_range_uj"
    try:
        wrap = _rapl_number(span) / 1e3
    except (OSError, ValueError) as exc:
        why = (exc.strerror or exc) if isinstance(exc, OSError) else "no number"
        raise DeviceUnavailableError(
            f"RAPL counter range {span} cannot be read ({why}): without it a counter that "
            "wraps during a measurement would read as negative energy"
        ) from None
    if not wrap > 0:
        raise DeviceUnavailableError(f"RAPL counter range {span} is {wrap * 1e3:g} uJ, not > 0")
    label = zone
    name = folder / "name"
    if name.exists() or name.is_symlink():
        try:
            text = _rapl_text(name).strip()
        except OSError as exc:
            raise DeviceUnavailableError(
                f"RAPL zone name {name} cannot be read ({exc.strerror or exc})"
            ) from None
        label = text if RAPL_LABEL.fullmatch(text) else zone  # anything else is not shown
    return CounterMeter(
        f"rapl:{label}", lambda: _rapl_number(counter) / 1e3, wrap, min_window_s=RAPL_MIN_WINDOW_S
    )


# -- NVML (NVIDIA GPUs) ---------------------------------------------------------------------


def nvml_meter(index: int = 0) -> CounterMeter:
    """NVML's total-energy counter of GPU ``index`` (mJ since the driver loaded; Volta+).

    Needs ``nvidia-ml-py`` (``pip install 'hwnas[cuda]'``).

    Raises:
        DeviceUnavailableError: no nvidia-ml-py, no driver, no such GPU, or no counter.
    """
    try:
        import pynvml
    except ImportError:
        raise DeviceUnavailableError(
            "NVML energy needs nvidia-ml-py: pip install 'hwnas[cuda]'"
        ) from None
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        name = pynvml.nvmlDeviceGetName(handle)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except pynvml.NVMLError as exc:
        raise DeviceUnavailableError(f"NVML cannot read GPU {index}'s energy: {exc}") from None
    name = name.decode() if isinstance(name, bytes) else str(name)
    return CounterMeter(
        f"nvml:{index}:{name}",
        lambda: float(pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)),
        min_window_s=1.0,
    )


# -- Jetson (tegrastats) --------------------------------------------------------------------

TOTAL_RAILS = ("VDD_IN", "POM_5V_IN", "VIN_SYS_5V0", "VIN")
"""tegrastats rails that are the whole module's input power, in order of preference."""

_RAIL = re.compile(r"\b([A-Z][A-Z0-9_]+) (\d+)(?:mW)?/(\d+)(?:mW)?")


def parse_tegrastats_mw(line: str) -> float | None:
    """Instantaneous input power in mW from one ``tegrastats`` line, or None if it has none.

    Reads the module input rail (``VDD_IN`` on Orin/Xavier, ``POM_5V_IN`` on Nano/TX2,
    ``VIN_SYS_5V0`` on Xavier NX) if present, else the sum of every rail. Rails are printed as
    ``NAME current/average`` with or without the ``mW`` unit.
    """
    rails = {name: float(now) for name, now, _avg in _RAIL.findall(line)}
    rails = {k: v for k, v in rails.items() if k not in ("RAM", "SWAP", "IRAM", "EMC")}
    if not rails:
        return None
    for name in TOTAL_RAILS:
        if name in rails:
            return rails[name]
    return sum(rails.values())


class TegrastatsMeter(Meter):
    """A Jetson's input power from ``tegrastats --interval <ms>``, integrated over the window.

    Args:
        interval_ms: tegrastats reporting period.
        command: the tegrastats executable.
    """

    def __init__(self, interval_ms: int = 100, command: str = "tegrastats"):
        self.name = "tegrastats"
        self.interval_ms = interval_ms
        self.command = command
        self.min_window_s = 2.0
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._times: list[float] = []
        self._watts: list[float] = []
        self._t0 = 0.0

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            mw = parse_tegrastats_mw(line)
            if mw is not None:
                self._times.append(time.perf_counter())
                self._watts.append(mw / 1e3)

    def start(self) -> None:
        self._times, self._watts = [], []
        self._t0 = time.perf_counter()
        self._proc = subprocess.Popen(
            [self.command, "--interval", str(self.interval_ms)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        """The energy of the window, in mJ: the readings integrated over time, the power of
        the first and last reading held to the window's ends (integrating between the first
        and the last reading alone read about 3% low).

        Raises:
            DeviceUnavailableError: fewer than two readings, or none in the window's last
                three reporting periods (tegrastats stopped reporting: its energy would be
                low without a word).
        """
        t1 = time.perf_counter()
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:  # one that ignores SIGTERM: no traceback
                self._proc.kill()
                self._proc.wait()
        if self._thread is not None:
            self._thread.join(timeout=10)
        times = [t for t in self._times if t <= t1]
        watts = self._watts[: len(times)]
        period = self.interval_ms / 1e3
        if len(times) < 2 or t1 - times[-1] > 3 * period:
            raise DeviceUnavailableError(
                f"energy meter tegrastats got {len(times)} readings over the "
                f"{t1 - self._t0:.1f} s window"
                + (f", the last {t1 - times[-1]:.1f} s before its end" if times else "")
                + f" (every {self.interval_ms} ms expected): it stopped reporting"
            )
        edges = watts[0] * max(0.0, times[0] - self._t0) + watts[-1] * (t1 - times[-1])
        return integrate_mj(times, watts) + edges * 1e3


def tegrastats_meter(interval_ms: int = 100) -> TegrastatsMeter:
    """A :class:`TegrastatsMeter`.

    Raises:
        DeviceUnavailableError: ``tegrastats`` is not on PATH (not a Jetson).
    """
    import shutil

    if shutil.which("tegrastats") is None:
        raise DeviceUnavailableError("tegrastats is not on PATH: not a Jetson (or not in PATH)")
    return TegrastatsMeter(interval_ms)


# -- Android battery (over adb) -------------------------------------------------------------

BATTERY = "/sys/class/power_supply/battery"


def parse_battery_w(text: str) -> float:
    """Power in W from ``current_now`` (uA) and ``voltage_now`` (uV), one per line.

    The sign of ``current_now`` differs between vendors (negative while discharging on Pixel
    phones), so its magnitude is used.

    Raises:
        ValueError: the text does not hold two integers.
    """
    values = [int(v) for v in text.split()]
    if len(values) != 2:
        raise ValueError(f"expected current_now and voltage_now, got {text!r}")
    current_ua, voltage_uv = values
    return abs(current_ua) * voltage_uv / 1e12


def android_battery_meter(shell: Callable[[str], str], period_s: float = 0.1) -> PowerMeter:
    """Battery current x voltage read over adb (``shell(cmd)`` runs ``adb shell cmd``).

    Raises:
        DeviceUnavailableError: no battery readings, or the phone is charging (the battery
            current would include the charge current).
    """
    try:
        status = shell(f"cat {BATTERY}/status").strip()
        parse_battery_w(shell(f"cat {BATTERY}/current_now {BATTERY}/voltage_now"))
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise DeviceUnavailableError(f"cannot read the phone's battery: {exc}") from None
    if status in ("Charging", "Full"):
        raise DeviceUnavailableError(
            f"the phone's battery is {status.lower()}: battery energy would include the charge "
            "current; use adb over Wi-Fi (`adb tcpip 5555`) or stop charging"
        )
    command = f"cat {BATTERY}/current_now {BATTERY}/voltage_now"
    return PowerMeter("android-battery", lambda: parse_battery_w(shell(command)), period_s)


METERS: Registry = Registry("energy meter")
METERS.register("rapl", rapl_meter)
METERS.register("nvml", nvml_meter)
METERS.register("tegrastats", tegrastats_meter)
METERS.register("android_battery", android_battery_meter)
