"""Any board reached over TVM RPC: a tracker address and a device key.

This is how TVM's Android RPC app and ``python -m tvm.exec.rpc_server`` on Jetson or
Raspberry Pi boards are used: the board's server registers with a tracker under a key; hwnas
asks the tracker for a session on that key, uploads the compiled model, and times it on the
board with ``time_evaluator``. The shipped ``rpc`` profile is generic::

    hwnas measure --device rpc --tracker 10.0.0.5:9190 --key rasp5 --arch ...
    hwnas measure --device rpc --tracker ... --key orin --target '{"kind": "cuda"}' --arch ...

Its measurements are stored under the device name ``rpc-<key>``, so boards never mix.
"""

from __future__ import annotations

import re
import socket
import struct
from typing import Any

from hwnas.devices.base import profile_number
from hwnas.devices.live import LiveDevice
from hwnas.errors import HwnasError
from hwnas.runtimes.tvm import RpcSpec, socket_timeout


def parse_tracker(text: str, what: str = "--tracker") -> tuple[str, int]:
    """``HOST:PORT`` -> (host, port).

    Args:
        text: the address.
        what: how the user gave it (``--tracker``, or a profile's ``rpc.tracker``).

    Raises:
        HwnasError: not HOST:PORT with an integer port from 1 to 65535.
    """
    host, sep, port = str(text).rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise HwnasError(
            f"{what} must be HOST:PORT with a port from 1 to 65535 (e.g. 127.0.0.1:9190), "
            f"got {str(text)[:80]!r}"
        )
    return host, int(port)


def big_cores(value: Any) -> tuple[int, ...]:
    """A profile's ``big_cores``: CPU ids (``[4, 5, 6, 7]``), none when absent.

    Raises:
        HwnasError: not a list of whole numbers >= 0 (``big_cores: all``).
    """
    if value is None:
        return ()
    ok = isinstance(value, list) and all(
        isinstance(c, int) and not isinstance(c, bool) and 0 <= c < 4096 for c in value
    )
    if not ok:
        raise HwnasError(
            f"big_cores must be a list of core numbers (CPU ids such as [4, 5, 6, 7]), got "
            f"{repr(value)[:80]}"
        )
    return tuple(value)


def tracker_unreachable(host: str, port: int, timeout: float = 3.0) -> str | None:
    """Why the tracker cannot be reached, or None if it answers the tracker handshake.

    A plain TCP connect fails fast when nothing listens (without importing TVM); once connected,
    the tracker's magic number is exchanged so that the tracker sees a clean client.
    """
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        return exc.strerror or str(exc) or type(exc).__name__
    with sock:
        from tvm.rpc import base

        try:
            sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
            reply = base.recvall(sock, 4)
        except (OSError, RuntimeError) as exc:
            return f"no tracker handshake: {exc}"
        if struct.unpack("<i", reply)[0] != base.RPC_TRACKER_MAGIC:
            return "something else listens there, not a TVM RPC tracker"
    return None


def registered_keys(host: str, port: int, timeout: float = 10.0) -> list[str]:
    """Device keys of the RPC servers registered with the tracker (imports TVM).

    Raises:
        HwnasError: the address answers but is not a TVM RPC tracker.
    """
    from tvm import rpc

    try:
        with socket_timeout(timeout):
            tracker = rpc.connect_tracker(host, port)
            try:
                summary = tracker.summary()
            finally:
                tracker.close()
    except (OSError, RuntimeError) as exc:
        raise HwnasError(f"{host}:{port} is not a TVM RPC tracker ({exc})") from None
    keys = {str(s.get("key", "")).split(":", 1)[-1] for s in summary.get("server_info", [])}
    return sorted(k for k in keys if k)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def _seconds(rpc: dict[str, Any], key: str, least: float) -> float:
    """The profile's ``rpc.<key>`` in seconds (600 when absent).

    Raises:
        HwnasError: not a finite number of at least ``least`` seconds.
    """
    return profile_number(rpc, key, 600, least=least, unit="seconds", name=f"rpc.{key}")


class RpcDevice(LiveDevice):
    """A board running a TVM RPC server registered with a tracker.

    Profile keys: those of :class:`~hwnas.devices.live.LiveDevice` (``runtime`` is always
    "tvm"; ``target`` defaults to this host's CPU), and ``rpc: {tracker: HOST:PORT, key: KEY,
    session_timeout: s, request_timeout: s}`` (how long a session may last; how long to wait
    for a free server with the key, 600 s each by default; a board that stops answering is
    given up on at the session's start + session_timeout +
    :data:`~hwnas.runtimes.tvm.RPC_MARGIN_S`, in one line); ``big_cores`` (CPU ids) puts the
    runtime's threads on that many of the board's fastest cores (TVM's big-core affinity:
    TVM RPC cannot carry the ids themselves); ``name_from_key: true`` names the device
    ``rpc-<key>`` (the generic profile).

    Raises:
        HwnasError: a bad tracker address, ``big_cores`` or timeout; an ``rpc.key`` that is
            not text (YAML's number: it must be quoted); one line.
    """

    kind = "rpc"
    profile_keys = LiveDevice.profile_keys + ("rpc", "big_cores", "name_from_key")
    default_runtime = "tvm"
    runtimes = ("tvm",)

    def __init__(self, profile: dict[str, Any]):
        rpc = dict(profile.get("rpc") or {})
        self.tracker: str | None = rpc.get("tracker")
        self.key: str | None = rpc.get("key")
        if self.key is not None and not isinstance(self.key, str):  # compared with text keys
            raise HwnasError(
                f'rpc.key must be text: quote it (key: "{str(self.key)[:40]}"): YAML reads '
                "unquoted digits as a number"
            )
        given = profile.get("_given", ())  # --tracker, else the profile's (checked as read)
        self.tracker_option = "--tracker" if "rpc.tracker" in given else "rpc.tracker"
        if self.tracker:
            parse_tracker(self.tracker, self.tracker_option)
        self.big_cores = big_cores(profile.get("big_cores"))
        self.session_timeout = _seconds(rpc, "session_timeout", 0.0)
        self.request_timeout = _seconds(rpc, "request_timeout", 1.0)
        if profile.get("name_from_key") and self.key:
            profile = {**profile, "name": f"{profile['name']}-{_safe(str(self.key))}"}
        super().__init__(profile)

    def rpc_spec(self) -> RpcSpec | None:
        """Where the board is, or None when the profile lacks a tracker or key."""
        if not self.tracker or not self.key:
            return None
        host, port = parse_tracker(self.tracker, self.tracker_option)
        return RpcSpec(
            host, port, str(self.key), self.session_timeout, self.big_cores, self.request_timeout
        )

    def runtime_options(self) -> dict[str, Any]:
        options = super().runtime_options()
        try:
            options["rpc"] = self.rpc_spec()
        except HwnasError:
            options["rpc"] = None  # status() reports the bad tracker address
        return options

    def server_hint(self, host: str, port: int) -> str:
        """How to start the board's RPC server (Android overrides: the RPC app)."""
        return (
            "start one on the board with "
            f"`python -m tvm.exec.rpc_server --tracker {host}:{port} --key {self.key}`"
        )

    def unregistered(self, host: str, port: int, keys: list[str]) -> tuple[bool, str]:
        """(usable, one line) when the tracker answers but no server has the key (registered
        now: ``keys``); a board is then not reachable (Android: see its override)."""
        return False, (
            f"no RPC server registered with key '{self.key}' at tracker {host}:{port} "
            f"(registered: {', '.join(keys) or 'none'}): {self.server_hint(host, port)}"
        )

    def link_status(self) -> tuple[bool, str]:
        if not self.tracker or not self.key:
            return False, (
                f"device '{self.profile['name']}' needs a tracker and a key: --tracker "
                "HOST:PORT --key KEY (hwnas measure, refset measure, devices check), or, to "
                "search it, a profile of your own with rpc: {tracker: HOST:PORT, key: KEY} "
                "(docs/devices.md); the board runs `python -m tvm.exec.rpc_server --tracker "
                "HOST:PORT --key KEY`"
            )
        try:
            host, port = parse_tracker(self.tracker, self.tracker_option)
        except HwnasError as exc:
            return False, str(exc)
        why = tracker_unreachable(host, port)
        if why is not None:
            return False, (
                f"TVM RPC tracker {host}:{port} is unreachable ({why}): start it with "
                f"`python -m tvm.exec.rpc_tracker --host 0.0.0.0 --port {port}`"
            )
        try:
            keys = registered_keys(host, port)
        except HwnasError as exc:
            return False, str(exc)
        if self.key not in keys:
            return self.unregistered(host, port, keys)
        return True, (
            f"RPC server '{self.key}' via tracker {host}:{port}, runtime {self.runtime}; "
            f"{self.energy_status[2]}"
        )

    def device_versions(self) -> dict[str, str]:
        return {"rpc_key": str(self.key), "tracker": str(self.tracker)}
