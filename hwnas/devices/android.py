"""Android phones over adb and TVM RPC, with the HW-NAS-Bench-360 protocol.

Set-up (once): install Android platform-tools (``adb``) and the NDK (``ANDROID_NDK_HOME``), start
a tracker on this machine (``python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port 9190``), and
run TVM's Android RPC app on the phone with tracker ``127.0.0.1:9190`` and the profile's key.
hwnas then finds the phone with ``adb devices``; when a measurement starts, it forwards the
tracker port to it with ``adb reverse`` (a tracker on this machine only; the rule is removed
when the process ends, and listing devices changes nothing on the phone), cross-compiles with
the NDK's clang, pins the runtime to the big cores, and
waits until the SoC is below ``thermal_limit_c`` before each model (ANCHORS.md section 5:
single thread on the big cores, cool SoC, median). Energy is the battery's current x voltage
read over adb while the model runs (only when the phone is not charging).
"""

from __future__ import annotations

import atexit
import glob
import math
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from hwnas.devices.base import Measurement, Workload, profile_number
from hwnas.devices.rpc import RpcDevice, parse_tracker
from hwnas.errors import DeviceUnavailableError, HwnasError

PLATFORM_TOOLS = "https://developer.android.com/tools/releases/platform-tools"
THERMAL_COMMAND = (
    'for z in /sys/class/thermal/thermal_zone*; do echo "$(cat $z/type) $(cat $z/temp)"; done'
)


def parse_adb_devices(text: str) -> list[tuple[str, str]]:
    """(serial, state) of each device in ``adb devices`` output.

    States are adb's: "device" (ready), "unauthorized", "offline", "no permissions"...
    """
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("List of devices", "*")):
            continue
        parts = line.split(None, 1)
        if len(parts) == 2:
            out.append((parts[0], parts[1].split("  ")[0].strip()))
    return out


def parse_thermal_zones(text: str) -> dict[str, float]:
    """Zone type -> temperature in deg C from lines "``<type> <temp>``".

    Kernels report millidegrees (45000) or, on some vendors, degrees (45); values above 1000
    are taken as millidegrees. Zones with unreadable, non-finite (nan, inf) or negative
    readings are left out; a repeated type keeps its hottest reading.
    """
    temps: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 2:
            continue
        name, raw = parts
        try:
            value = float(raw)
        except ValueError:
            continue
        if not math.isfinite(value) or value < 0:
            continue
        celsius = value / 1000.0 if abs(value) >= 1000 else value
        temps[name] = max(celsius, temps.get(name, -1e9))
    return temps


def ndk_compiler(ndk_home: str | None = None) -> tuple[str | None, str]:
    """(path of the NDK's aarch64 Android clang++, or None; one line saying which or why not).

    Looks in ``$ANDROID_NDK_HOME/toolchains/llvm/prebuilt/*/bin`` for
    ``aarch64-linux-android<API>-clang++`` and takes the highest API level.
    """
    ndk_home = ndk_home if ndk_home is not None else os.environ.get("ANDROID_NDK_HOME")
    if not ndk_home:
        return None, (
            "ANDROID_NDK_HOME is not set: install the Android NDK (r26 or newer) and "
            "export ANDROID_NDK_HOME=/path/to/android-ndk"
        )
    pattern = str(Path(ndk_home) / "toolchains/llvm/prebuilt/*/bin/aarch64-linux-android*-clang++")

    def api(path: str) -> int:
        found = re.search(r"android(\d+)-clang", path)
        return int(found.group(1)) if found else 0

    found = sorted(glob.glob(pattern), key=api)
    if not found:
        return None, (
            f"no aarch64-linux-android*-clang++ under {ndk_home}/toolchains/llvm/prebuilt: "
            "is ANDROID_NDK_HOME the root of an Android NDK?"
        )
    return found[-1], f"NDK compiler {found[-1]}"


REGISTER_WAIT_S = 20.0
"""Seconds a measurement waits, after forwarding the tracker's port to the phone, for the
phone's RPC app to register its key."""

_FORWARDS: dict[tuple[str | None, int], Adb] = {}
"""``adb reverse`` rules this process added: (serial, port) -> the phone's adb."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine by a loopback address (127.x, ::1, localhost)."""
    import ipaddress

    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def remove_forwards() -> None:
    """Remove each ``adb reverse`` rule this process added (registered with :mod:`atexit` by
    :meth:`AndroidDevice.forward_tracker`; a process killed outright leaves its rule, which
    ``adb reverse --remove tcp:PORT`` removes). A phone that does not answer is left as it is."""
    while _FORWARDS:
        (_, port), adb = _FORWARDS.popitem()
        try:
            adb.run("reverse", "--remove", f"tcp:{port}")
        except (OSError, subprocess.SubprocessError):
            pass


ADB_TIMEOUT_S = 30.0
"""Default limit on one adb command (profile key ``adb_timeout_s``): a phone behind a slow USB
hub or over Wi-Fi adb may need longer."""


class Adb:
    """Runs adb for one phone.

    Args:
        serial: the phone's serial (``adb -s``), or None for the only phone.
        timeout: seconds per adb command.
    """

    def __init__(self, serial: str | None = None, timeout: float = ADB_TIMEOUT_S):
        self.serial = serial
        self.timeout = timeout

    def run(self, *args: str) -> subprocess.CompletedProcess:
        """adb's exit status and output (bytes that are not UTF-8 are replaced, not fatal).

        Raises:
            OSError: adb cannot be started.
            subprocess.TimeoutExpired: adb did not finish within ``timeout`` seconds.
        """
        command = ["adb", *(["-s", self.serial] if self.serial else []), *args]
        return subprocess.run(
            command, capture_output=True, text=True, errors="replace", timeout=self.timeout
        )

    def shell(self, command: str) -> str:
        """stdout of ``adb shell command``.

        Raises:
            OSError: adb failed, or did not answer within ``timeout`` seconds.
        """
        try:
            out = self.run("shell", command)
        except subprocess.TimeoutExpired:
            raise OSError(
                f"adb shell {command!r} did not answer within {self.timeout:g} s"
            ) from None
        if out.returncode != 0:
            said = out.stderr.strip() or out.stdout.strip() or f"exit status {out.returncode}"
            raise OSError(f"adb shell {command!r} failed: {' '.join(said.split())}")
        return out.stdout


class AndroidDevice(RpcDevice):
    """An Android phone (aarch64) reached over adb and TVM RPC.

    Profile keys: those of :class:`~hwnas.devices.rpc.RpcDevice` (``rpc.tracker`` is the
    tracker on this machine, ``rpc.key`` the key the phone's RPC app registers); ``serial``
    (or ``ANDROID_SERIAL``) when several phones are connected; ``big_cores`` (CPU ids);
    ``thermal_limit_c`` (45), ``thermal_zones`` (regex of zone types to watch),
    ``thermal_timeout_s`` (600), ``thermal_poll_s`` (5), ``adb_timeout_s`` (30: seconds per adb
    command); ``energy: {meter: android_battery}``.

    Raises:
        HwnasError: a number in the profile that is not one, or out of range; a ``serial``
            that is not text (YAML's number: it must be quoted); one line.
    """

    kind = "android"
    profile_keys = RpcDevice.profile_keys + (
        "serial", "thermal_limit_c", "thermal_zones", "thermal_timeout_s", "thermal_poll_s",
        "adb_timeout_s",
    )  # fmt: skip

    def __init__(self, profile: dict[str, Any]):
        super().__init__(profile)
        serial = profile.get("serial")
        if serial is not None and not isinstance(serial, str):  # adb's argv took an int
            raise HwnasError(
                f'{self.where}: serial must be text: quote it (serial: "{str(serial)[:40]}"): YAML '
                "reads unquoted digits as a number"
            )
        self.serial = serial or os.environ.get("ANDROID_SERIAL")
        adb_timeout = profile_number(profile, "adb_timeout_s", ADB_TIMEOUT_S, above=0,
                                     unit="seconds")  # fmt: skip
        self.adb = Adb(self.serial, timeout=adb_timeout)
        self.thermal_limit = profile_number(profile, "thermal_limit_c", 45, unit="°C")
        self.thermal_zones = str(profile.get("thermal_zones", "big|mid|little|cpu|soc|tsens"))
        try:  # a bad pattern stopped the first measurement with a traceback
            re.compile(self.thermal_zones)
        except re.error as exc:
            raise HwnasError(
                f"thermal_zones must be a regular expression of thermal zone types "
                f"(big|cpu|soc), got {self.thermal_zones[:80]!r} ({exc})"
            ) from None
        self.thermal_timeout = profile_number(profile, "thermal_timeout_s", 600, least=0,
                                              unit="seconds")  # fmt: skip
        self.thermal_poll = profile_number(profile, "thermal_poll_s", 5, above=0, unit="seconds")

    def meter_options(self) -> dict[str, Any]:
        return {"shell": self.adb.shell}

    @property
    def energy_status(self):  # the battery is only read once a phone is connected
        if not self.phone()[0]:
            return None, {}, "battery energy once the phone is connected"
        return super().energy_status

    def phone(self) -> tuple[str | None, str]:
        """(serial of the phone to use, or None; one line saying which or what to do)."""
        if shutil.which("adb") is None:
            return None, (
                f"adb is not installed: install Android platform-tools ({PLATFORM_TOOLS}) "
                "and put adb on PATH"
            )
        try:
            listing = self.adb.run("devices")
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"`adb devices` failed ({exc}): restart the adb server (`adb kill-server`)"
        phones = parse_adb_devices(listing.stdout)
        if self.serial:
            phones = [(s, st) for s, st in phones if s == self.serial]
        ready = [s for s, st in phones if st == "device"]
        if not ready:
            if any(st == "unauthorized" for _, st in phones):
                return None, (
                    "the phone has not authorised this computer: unlock it and accept the "
                    "'Allow USB debugging' prompt"
                )
            which = f"phone {self.serial}" if self.serial else "no phone"
            return None, (
                f"{which} found by `adb devices`: plug the phone in over USB with USB debugging "
                "enabled (Settings > Developer options), or pick a recorded phone such as "
                "pixel3 (`hwnas devices`)"
            )
        if len(ready) > 1:
            return None, (
                f"several phones found ({', '.join(ready)}): set 'serial' in the profile or "
                "ANDROID_SERIAL to the one to use"
            )
        return ready[0], f"phone {ready[0]}"

    def server_hint(self, host: str, port: int) -> str:
        return (
            f"start TVM's Android RPC app on the phone with tracker 127.0.0.1:{port} and key "
            f"'{self.key}' (hwnas forwards the tracker port with `adb reverse` while measuring)"
        )

    def link_status(self) -> tuple[bool, str]:
        """The phone, the NDK and the tracker, as they are: listing devices changes nothing on
        the phone (no ``adb reverse``: :meth:`forward_tracker` runs when a measurement
        starts)."""
        serial, why = self.phone()
        if serial is None:
            return False, why
        compiler, why = ndk_compiler()
        if compiler is None:
            return False, why
        if not self.tracker or not self.key:
            return False, f"profile '{self.name}' needs rpc: {{tracker: HOST:PORT, key: KEY}}"
        ok, why = super().link_status()
        return ok, (f"{serial}: {why}" if ok else why)

    def unregistered(self, host: str, port: int, keys: list[str]) -> tuple[bool, str]:
        """A tracker on this machine is reached by the phone's RPC app only through the port
        hwnas forwards when measuring: its key is not registered before, and the phone is
        ready all the same (:meth:`measure_all` waits for the key after forwarding)."""
        if not is_loopback(host):
            return super().unregistered(host, port, keys)
        return True, (
            f"TVM RPC tracker {host}:{port} answers; the phone's RPC app registers key "
            f"'{self.key}' once hwnas forwards port {port} to the phone (adb reverse, while "
            f"measuring), runtime {self.runtime}; {self.energy_status[2]}"
        )

    def forward_tracker(self) -> None:
        """Forward the tracker's port on this machine to the phone (``adb reverse tcp:PORT
        tcp:PORT``), so that TVM's RPC app on the phone reaches it at 127.0.0.1, then wait up
        to :data:`REGISTER_WAIT_S` for the app's key at the tracker. Only for a tracker on
        this machine (a loopback address) that answers TVM's tracker handshake (a profile
        naming another local port, a database's, forwards nothing); a rule the phone had
        already is kept as it is, one added here is removed when the process ends
        (:func:`remove_forwards`).

        Raises:
            DeviceUnavailableError: the tracker does not answer, adb reverse failed or did not
                answer within ``adb_timeout_s``, or no server registered the key in time.
        """
        from hwnas.devices.rpc import registered_keys, tracker_unreachable

        host, port = parse_tracker(self.tracker, self.tracker_option)
        if not is_loopback(host):
            return  # the phone reaches that tracker over its own network
        why = tracker_unreachable(host, port)
        if why is not None:
            raise DeviceUnavailableError(
                f"TVM RPC tracker {host}:{port} is unreachable ({why}): start it with "
                f"`python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port {port}`; nothing is "
                "forwarded to the phone"
            )
        rule = f"tcp:{port}"
        if (self.adb.serial, port) not in _FORWARDS and not self._forwarded(rule):
            self._adb_reverse(rule, rule)
            if not _FORWARDS:
                atexit.unregister(remove_forwards)  # registered once
                atexit.register(remove_forwards)
            _FORWARDS[(self.adb.serial, port)] = self.adb
        deadline = time.monotonic() + REGISTER_WAIT_S
        while True:
            try:
                if self.key in registered_keys(host, port):
                    return
            except HwnasError as exc:  # something else answers there
                raise DeviceUnavailableError(str(exc)) from None
            if time.monotonic() > deadline:
                raise DeviceUnavailableError(
                    f"no RPC server registered with key '{self.key}' at tracker {host}:{port} "
                    f"{REGISTER_WAIT_S:g} s after port {port} was forwarded to the phone: "
                    f"{self.server_hint(host, port)}"
                )
            time.sleep(0.5)

    def _forwarded(self, rule: str) -> bool:
        """Whether the phone forwards ``rule`` already (``adb reverse --list``; False when it
        cannot say)."""
        try:
            out = self.adb.run("reverse", "--list")
        except (OSError, subprocess.SubprocessError):
            return False
        return any(line.split()[-2:] == [rule, rule] for line in out.stdout.splitlines())

    def _adb_reverse(self, *args: str) -> None:
        """``adb reverse ARGS``.

        Raises:
            DeviceUnavailableError: adb failed or did not answer within ``adb_timeout_s``.
        """
        command = f"`adb reverse {' '.join(args)}`"
        try:
            out = self.adb.run("reverse", *args)
        except subprocess.TimeoutExpired:
            raise DeviceUnavailableError(
                f"{command} did not answer within {self.adb.timeout:g} s: the phone is not "
                "reachable (replug it, or restart the adb server with `adb kill-server`)"
            ) from None
        except OSError as exc:
            raise DeviceUnavailableError(f"{command} failed ({exc})") from None
        if out.returncode != 0:
            raise DeviceUnavailableError(
                f"{command} failed ({' '.join(out.stderr.split())}): update platform-tools "
                "(adb reverse needs Android 5+)"
            )

    def temperatures(self) -> dict[str, float]:
        """Thermal zones of the phone (type -> deg C) matching ``thermal_zones``, or all.

        Raises:
            DeviceUnavailableError: adb failed or the phone did not answer.
        """
        try:
            temps = parse_thermal_zones(self.adb.shell(THERMAL_COMMAND))
        except OSError as exc:
            raise DeviceUnavailableError(f"the phone stopped answering: {exc}") from None
        pattern = re.compile(self.thermal_zones, re.IGNORECASE)
        chosen = {k: v for k, v in temps.items() if pattern.search(k)}
        return chosen or temps

    def before_model(self) -> None:
        """Wait until every watched thermal zone is below ``thermal_limit_c``.

        Raises:
            DeviceUnavailableError: still too hot after ``thermal_timeout_s``, or the phone
                stopped answering.
        """
        deadline = time.monotonic() + self.thermal_timeout
        while True:
            temps = self.temperatures()
            if not temps:
                return
            zone, hottest = max(temps.items(), key=lambda kv: kv[1])
            if hottest < self.thermal_limit:
                return
            if time.monotonic() > deadline:
                raise DeviceUnavailableError(
                    f"phone stayed at {hottest:.1f} C ({zone}) above {self.thermal_limit:g} C "
                    f"for {self.thermal_timeout:g} s: let it cool, or raise thermal_limit_c"
                )
            time.sleep(self.thermal_poll)

    def measure_all(self, workload: Workload) -> dict[str, Measurement]:
        compiler, why = ndk_compiler()
        if compiler is None:
            raise DeviceUnavailableError(f"device '{self.name}' cannot measure: {why}")
        os.environ["TVM_NDK_CC"] = compiler
        if self.tracker and self.key and self.phone()[0] is not None:
            self.forward_tracker()  # else super() says why the phone is not reachable
        return super().measure_all(workload)

    def device_versions(self) -> dict[str, str]:
        out = super().device_versions()
        try:
            out["android"] = self.adb.shell("getprop ro.build.fingerprint").strip()
        except OSError:
            pass
        return out
