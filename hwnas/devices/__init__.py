"""Devices by name, declared as YAML profiles.

Profiles are read from the shipped ``devices/*.yaml`` and then from the user's own folders:
``<hwnas home>/devices/`` and every folder in ``HWNAS_DEVICES_PATH`` (``:``-separated); a user
profile with the name of a shipped one replaces it, said once on stderr by :func:`get_device`
and marked by ``hwnas devices``, and two user profiles of one name are both broken. A
profile's ``kind`` picks the class that reaches the device (:data:`DEVICE_KINDS`):
``recorded`` (a published measurement table), ``local`` (this machine's CPU, ONNX Runtime or
TVM), ``cuda`` (a local NVIDIA GPU), ``rpc`` (any board running a TVM RPC server), ``android``
(a phone over adb and TVM RPC), ``hls4ml`` (an FPGA part through hls4ml and Vitis HLS) and
``imported`` (values imported from files with ``hwnas measure import``; no new measurements).
"""

from __future__ import annotations

import copy
import os
import re
import sys
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import numpy as np
import yaml

from hwnas.assets import asset_path, read_yaml
from hwnas.devices.base import METRICS, Device, Measurement, Workload, check_profile_keys
from hwnas.errors import HwnasError, UnknownNameError
from hwnas.paths import hwnas_home, safe_name
from hwnas.registry import Registry
from hwnas.tables import file_version

__all__ = [
    "DEVICE_KINDS",
    "METRICS",
    "Device",
    "Measurement",
    "Workload",
    "get_device",
    "list_devices",
    "offline_routes",
    "recorded_cells",
    "recorded_tables",
]

DEVICE_KINDS: Registry = Registry("device kind")
DEVICE_KINDS.register("recorded", "hwnas.devices.recorded:RecordedDevice")
DEVICE_KINDS.register("local", "hwnas.devices.local:LocalCpuDevice")
DEVICE_KINDS.register("cuda", "hwnas.devices.cuda:LocalGpuDevice")
DEVICE_KINDS.register("rpc", "hwnas.devices.rpc:RpcDevice")
DEVICE_KINDS.register("android", "hwnas.devices.android:AndroidDevice")
DEVICE_KINDS.register("hls4ml", "hwnas.devices.hls4ml:Hls4mlDevice")
DEVICE_KINDS.register("imported", "hwnas.devices.imported:ImportedDevice")


def profile_folders() -> list[Path]:
    """Folders searched for ``*.yaml`` profiles, shipped ones first."""
    folders = [asset_path("devices"), hwnas_home() / "devices"]
    extra = os.environ.get("HWNAS_DEVICES_PATH", "")
    folders += [Path(p) for p in extra.split(os.pathsep) if p]
    return folders


SECTION_KEYS = {
    "tvm": ("trials_per_task", "cc", "cache_dir"),
    "ort": ("provider",),
    "rpc": ("tracker", "key", "session_timeout", "request_timeout"),
}
"""The keys a profile's ``tvm:``, ``ort:`` and ``rpc:`` sections may have (what the live
devices read: :meth:`hwnas.devices.live.LiveDevice.runtime_options`, :mod:`hwnas.devices.rpc`)."""

COMPILER = re.compile(
    r"([A-Za-z0-9_.+]+-)*(g\+\+|gcc|c\+\+|cc|clang\+\+|clang|emcc|icpx|icx|armclang)"
    r"(-mp)?(-[0-9.]+)?"
)
"""What a profile's ``tvm.cc`` may be: the name of a C/C++ compiler on ``PATH``
(``aarch64-linux-gnu-g++``, ``clang++-17``), never a path."""


LLVM_OPTION = re.compile(r"-{1,2}[a-z0-9][a-z0-9.-]*(=[A-Za-z0-9_.,+-]*)?")
"""What one of a profile's TVM target ``cl-opt`` options (LLVM command-line options TVM passes
to LLVM on every build) may be: a flag with an optional plain value (``-unroll-threshold=200``),
no path (``/``) and no space; a flag that may load a library or write a file (a word of
:data:`LLVM_FILE_WORDS` in its name, or ``-load``) is refused too."""

LLVM_FILE_WORDS = frozenset(
    ("plugin", "plugins", "file", "files", "filename", "filepath", "output", "path", "dir",
     "remarks", "trace", "dump", "print", "stats", "log", "view", "debug", "dot")
)  # fmt: skip
"""Words of an LLVM option's name (split at ``-``, ``.`` and ``_``) that make it load a library
or write a file (``-info-output-file``, ``-pass-remarks-output``, ``-time-trace-file``,
``-print-after-all``, ``-debug-only``, ``-load-pass-plugin``, ``-dot-cfg-filename-prefix``),
refused in a profile's ``cl-opt`` with a name whose first word is ``load`` (``-load``). Whole
words, not parts of one: ``-enable-load-pre=false``, ``-profile-summary-cutoff-hot=990000``
and ``-x86-indirect-branch-tracking`` are plain options."""


def _loads_or_writes(name: str) -> bool:
    """Whether the LLVM option ``name`` (no dashes, no value) may load a library or write a
    file (:data:`LLVM_FILE_WORDS`, or a first word ``load``)."""
    words = re.split(r"[-._]", name.lower())
    return words[0] == "load" or not LLVM_FILE_WORDS.isdisjoint(words)


def check_cl_opt(target: object, where: str = "target") -> None:
    """Refuse a ``cl-opt`` in a profile's TVM ``target`` (at any depth: a ``host`` target's
    too) that is not a list of plain LLVM options (:data:`LLVM_OPTION`,
    :data:`LLVM_FILE_WORDS`): a handed profile could otherwise have LLVM load a library or
    write files on every build, as ``tvm.cc`` could run a program.

    Raises:
        HwnasError: one line naming the option (escaped).
    """
    from hwnas.text import one_line

    if not isinstance(target, dict):
        return
    for key, value in target.items():
        if isinstance(value, dict):
            check_cl_opt(value, f"{where}.{one_line(key)}")
        if key != "cl-opt":
            continue
        options = [value] if isinstance(value, str) else value
        if not isinstance(options, list):
            raise HwnasError(f"{where}.cl-opt: must be a list of LLVM options, got {value!r}")
        for option in options:
            plain = isinstance(option, str) and LLVM_OPTION.fullmatch(option)
            if not plain or _loads_or_writes(str(option).lstrip("-").split("=", 1)[0]):
                shown = one_line(repr(option)[:80])
                raise HwnasError(
                    f"{where}.cl-opt {shown}: must be a plain LLVM option (-name or "
                    "-name=value, no path); options that load code or write files (-load, "
                    "-*-file, -*-output, -print-*) are refused in a profile"
                )


DEVICE_CLASSES = ("phone", "board", "fpga", "asic", "cpu", "gpu")
"""What a profile's ``class`` may be: the kind of device, which sets the power an energy
table is checked against (:data:`hwnas.devices.recorded.POWER_W`) and which recorded device a
live one is compared with first."""


def check_class(profile: dict) -> None:
    """Refuse a profile ``class`` that is none of :data:`DEVICE_CLASSES` (``class: borad``
    switched the energy table's power check to the widest range, without a word).

    Raises:
        HwnasError: one line naming the classes (and the nearest).
    """
    import difflib

    cls = profile.get("class")
    if cls is None or cls in DEVICE_CLASSES:
        return
    near = difflib.get_close_matches(str(cls), DEVICE_CLASSES, n=1)
    hint = f"; did you mean {near[0]}?" if near else ""
    raise HwnasError(f"class {repr(cls)[:80]}: unknown{hint} (known: {', '.join(DEVICE_CLASSES)})")


def check_native_keys(profile: dict) -> None:
    """Refuse a misspelt key of a profile file's ``tvm:``, ``ort:`` or ``rpc:`` section (a
    ``trails_per_task`` tuned 16 trials a workload without a word), and the keys that would
    run a program or write outside hwnas's folders: ``tvm.cc`` (the linker TVM runs on every
    build) must name a C/C++ compiler on ``PATH``, not a path (a profile handed over could
    name its own script), and ``tvm.cache_dir`` (where compiled models are written, then
    loaded as native code) must lie in the hwnas home; a ``target``'s ``cl-opt`` (LLVM
    options) must be plain options that load nothing and write no file
    (:func:`check_cl_opt`). (Passed from Python as
    ``get_device(..., overrides=...)``, they are the caller's own and not checked.)

    Raises:
        HwnasError: one line naming the key and what it may be.
    """
    import difflib

    from hwnas.paths import hwnas_home
    from hwnas.text import one_line

    for section, known in SECTION_KEYS.items():  # a misspelt key was ignored silently
        value = profile.get(section)
        if value is None:
            continue
        if not isinstance(value, dict):
            raise HwnasError(f"{section}: must be a mapping ({', '.join(known)}), got {value!r}")
        for key in value:
            if key not in known:
                near = difflib.get_close_matches(str(key), known, n=1)
                hint = f"; did you mean {near[0]}?" if near else ""
                raise HwnasError(  # the key escaped: it is the file's, and any text
                    f"{section}.{one_line(key)}: unknown key{hint} (known: {', '.join(known)})"
                )
    check_cl_opt(profile.get("target"))
    tvm = profile.get("tvm")
    if tvm is None:
        return
    cc = tvm.get("cc")
    if cc not in (None, "") and not (isinstance(cc, str) and COMPILER.fullmatch(cc)):
        raise HwnasError(
            f"tvm.cc {cc!r}: must be the name of a C/C++ compiler on PATH (gcc, g++, clang, "
            "aarch64-linux-gnu-g++, ...), not a path (put its folder on PATH): a profile "
            "cannot name a program to run"
        )
    cache = tvm.get("cache_dir")
    if cache is not None:
        home = (hwnas_home() / "tvm").resolve()  # not <home>/devices, where bundles land
        try:
            inside = Path(os.path.expanduser(str(cache))).resolve().is_relative_to(home)
        except (OSError, ValueError):
            inside = False
        if not inside:
            raise HwnasError(
                f"tvm.cache_dir {cache!r}: must lie in the hwnas home's TVM folder ({home}): "
                "compiled models found there are loaded as native code"
            )


_SHIPPED: dict[Path, tuple[tuple[int, int], object]] = {}
"""Shipped profile file -> (its :func:`hwnas.tables.file_version`, its parsed YAML): read once
per process however often the profiles are scanned again (every :func:`reload_profiles`)."""


def _shipped_yaml(path: Path) -> object:
    """A copy of shipped profile file ``path`` parsed (:func:`hwnas.assets.read_yaml`); the
    file is parsed again only where its version (time, size) changed.

    Raises:
        OSError, UnicodeDecodeError, yaml.YAMLError: as :func:`~hwnas.assets.read_yaml`.
    """
    version = file_version(path)
    kept = _SHIPPED.get(path)
    if kept is None or kept[0] != version:
        kept = _SHIPPED[path] = (version, read_yaml(path))
    return copy.deepcopy(kept[1])  # the scan sets keys of its own (``_path``)


@lru_cache(maxsize=8)
def _scan(
    folders: tuple[Path, ...],
) -> tuple[dict[str, dict], dict[Path, str], dict[str, Path], dict[str, str]]:
    """(profiles by name, broken profile file -> one-line reason, the name a broken file
    gives -> that file, the name of a user profile replacing a shipped one -> the shipped
    file). A broken file is skipped (named once on stderr by
    :func:`get_device`, listed by ``hwnas devices``), so one bad user file does not make every
    device unusable.

    ``folders[0]`` is the shipped one. A user profile with a shipped profile's name replaces
    it (said by :func:`get_device` and ``hwnas
    devices``); two user profiles of one name are both broken ("name X is also given by
    FILE"), and the name is then no device at all: neither file, nor the shipped one, is
    picked by the order folders are read in."""
    profiles: dict[str, dict] = {}
    problems: dict[Path, str] = {}
    named: dict[str, Path] = {}  # a device named by a broken file: its reason, not "unknown"
    claimed: dict[str, Path] = {}  # name -> the user file that gave it first
    twice: set[str] = set()  # names two user files give
    shadows: dict[str, str] = {}
    read: set[Path] = set()
    for n, folder in enumerate(folders):
        try:  # a folder named twice (the home's in HWNAS_DEVICES_PATH) is read once
            key = folder.resolve()
        except (OSError, RuntimeError):
            key = folder
        if key in read:
            continue
        read.add(key)
        for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
            try:
                profile = _shipped_yaml(path) if n == 0 else read_yaml(path)
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                problems[path] = " ".join(str(exc).split())
                continue
            if not isinstance(profile, dict) or "name" not in profile or "kind" not in profile:
                problems[path] = "it needs at least 'name' and 'kind'"
                continue
            try:  # the name becomes folder and file names (locks, caches, projects)
                if not isinstance(profile["name"], str):  # a number: sorted beside text names
                    raise HwnasError(
                        f'name must be text: quote it (name: "{str(profile["name"])[:40]}"): '
                        "YAML reads unquoted digits as a number"
                    )
                safe_name(profile["name"], "name")
                check_native_keys(profile)
                check_class(profile)
            except HwnasError as exc:
                problems[path] = str(exc)
                named.setdefault(str(profile["name"]), path)
                continue
            name = str(profile["name"])
            profile["_path"] = str(path)
            if n == 0:
                profiles[name] = profile
                continue
            first = claimed.setdefault(name, path)
            if first != path:  # the later file won, without a word
                problems[path] = f"name {name!r} is also given by {first}"
                if name not in twice:
                    twice.add(name)
                    problems[first] = f"name {name!r} is also given by {path}"
                    named[name] = first
                profiles.pop(name, None)
                shadows.pop(name, None)
                continue
            shipped = profiles.get(name)
            if shipped is not None:
                shadows[name] = shipped["_path"]
            profiles[name] = profile
    return profiles, problems, named, shadows


def shadowed(name: str) -> str | None:
    """The shipped profile file that the user's profile of device ``name`` replaces, or None
    (a shipped device, a user's of a name hwnas does not ship)."""
    return _scan(tuple(profile_folders()))[3].get(name)


_SHOWN: set[Path] = set()
"""Broken profile files already named to the user in this process (until reloaded)."""


def _say(line: str) -> None:
    """Print ``line`` on stderr as one line with its control characters shown escaped
    (:func:`hwnas.text.one_line`): a profile's key, file name or value (``\x1b]0;...``,
    ``\x1b[2J``) reached the terminal raw in the warning about it."""
    from hwnas.text import one_line

    print(one_line(line), file=sys.stderr)


def _warn_broken(skip: Path | None = None) -> None:
    """Name each broken profile file once on stderr (the one a command is about, ``skip``, is
    named by its own error instead), so one bad user file is said, not repeated."""
    for path, why in broken_profiles().items():
        if path != skip and path not in _SHOWN:
            _SHOWN.add(path)
            _say(f"warning: skipped device profile {path}: {why}")


def broken_shown() -> None:
    """Mark every broken profile, and every user profile replacing a shipped one, as named
    (``hwnas devices`` lists them itself)."""
    _SHOWN.update(broken_profiles())
    _SHADOWS_SHOWN.update(_scan(tuple(profile_folders()))[3])


_SHADOWS_SHOWN: set[str] = set()
"""Devices whose user profile replaces a shipped one, already said in this process."""


def _warn_shadow(profile: dict) -> None:
    """Say once on stderr that ``profile`` is a user's replacing the shipped profile of its
    name (a user's ``pixel3`` of 0.5 ms everywhere was searched as the shipped pixel3)."""
    name = str(profile["name"])
    shipped = shadowed(name)
    if shipped and name not in _SHADOWS_SHOWN:
        _SHADOWS_SHOWN.add(name)
        _say(
            f"warning: device '{name}' is the user profile {profile['_path']}, which replaces "
            f"the shipped {shipped} (rename it to use both)"
        )


_WARNED: set[str] = set()
"""Profiles :func:`recorded_tables` has warned of (once per process, until reloaded)."""


def reload_profiles() -> None:
    """Forget the profiles read so far (after a profile file was written), and which broken
    ones :func:`recorded_tables` has warned of."""
    _scan.cache_clear()
    _WARNED.clear()
    _SHOWN.clear()
    _SHADOWS_SHOWN.clear()


def profiles() -> dict[str, dict]:
    """Every readable device profile by name (parsed YAML, with ``_path`` set to its file)."""
    return _scan(tuple(profile_folders()))[0]


def broken_profiles() -> dict[Path, str]:
    """Profile files that were skipped, with why (shown by ``hwnas devices``)."""
    return _scan(tuple(profile_folders()))[1]


def broken_profile_of(name: str) -> tuple[Path, str] | None:
    """(file, why it is broken) of a skipped profile that gives device ``name`` (its YAML
    read far enough to name it, or two user files of that name), or None."""
    scanned = _scan(tuple(profile_folders()))
    path = scanned[2].get(name)
    return None if path is None else (path, scanned[1].get(path, "broken"))


def list_devices() -> list[str]:
    """Names of every known device, sorted."""
    return sorted(profiles())


def _merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        elif value is not None:
            out[key] = value
    return out


def given_keys(overrides: dict, prefix: str = "") -> tuple[str, ...]:
    """The keys ``overrides`` sets (not None), dotted (``rpc.tracker``, ``target``): a device
    keeps them as ``profile["_given"]`` to name a bad one as the command line's option, not as
    its profile file's key."""
    out: list[str] = []
    for key, value in overrides.items():
        if isinstance(value, dict):
            out += given_keys(value, f"{prefix}{key}.")
        elif value is not None:
            out.append(f"{prefix}{key}")
    return tuple(out)


def get_device(name: str, runtime: str | None = None, overrides: dict | None = None) -> Device:
    """The device called ``name``.

    Args:
        name: profile name.
        runtime: runtime replacing the profile's (``--runtime ort|tvm``); it changes the
            runtime part of the measurements' store key.
        overrides: profile keys to replace, merged into nested sections (for example
            ``{"rpc": {"tracker": "10.0.0.5:9190", "key": "rasp5"}}``); None values are
            ignored.

    Raises:
        UnknownNameError: no profile has that name (the message lists known devices).
        HwnasError: ``name`` is not a string, the profile's kind is unknown, or the device
            cannot use ``runtime``.
    """
    if not isinstance(name, str):  # Path("pixel3") said "unknown device 'pixel3'"
        raise HwnasError(f"device must be a device's name (a string), got {name!r}")
    known = profiles()
    if name not in known:
        safe_name(name, "device name")  # '../x': say why no profile can have that name
        named = _scan(tuple(profile_folders()))[2]
        for path, why in broken_profiles().items():
            if path.stem == name or named.get(name) == path:
                _warn_broken(skip=path)
                _SHOWN.add(path)
                raise HwnasError(f"device profile {path} is broken: {why}")
    _warn_broken()
    if name not in known:
        raise UnknownNameError("device", name, list(known))
    _warn_shadow(known[name])
    profile = copy.deepcopy(known[name])
    try:
        cls = DEVICE_KINDS.get(profile["kind"])
    except UnknownNameError as exc:
        raise HwnasError(f"device profile {profile['_path']}: {exc}") from None
    check_profile_keys(cls, profile, f"device profile {profile['_path']} is broken")
    if overrides:
        profile = _merge(profile, overrides)
        profile["_given"] = given_keys(overrides)
    if runtime is not None:
        profile["runtime"] = runtime
    try:
        device = cls(profile)
    except HwnasError as exc:  # a value the device's own checks refuse: the file's, unless
        if runtime is not None or overrides:  # the command line's options were merged in
            raise
        why = str(exc).removeprefix(f"{profile['_path']}: ")  # the path once
        raise HwnasError(f"device profile {profile['_path']} is broken: {why}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # malformed profile values
        said = " ".join(str(exc).split())[:200]  # the kinds check their keys; not a repr
        raise HwnasError(
            f"device profile {profile['_path']} is broken: a value of the wrong type or form "
            f"({said or type(exc).__name__})"
        ) from None
    if runtime is not None and device.runtime_name != runtime:
        raise HwnasError(
            f"device '{name}' ({profile['kind']}) has no runtime choice: --runtime applies to "
            "live devices (local, cuda, rpc, android)"
        )
    return device


def is_shipped(device: Device) -> bool:
    """Whether ``device``'s profile is one hwnas ships (not a user's, nor a user's profile
    replacing a shipped one of the same name)."""
    return _shipped_path(device.profile.get("_path"))


def _shipped_path(path: str | None) -> bool:
    """Whether the profile file ``path`` is in the folder of the profiles hwnas ships."""
    if not path:
        return False
    try:
        return Path(path).resolve().parent == asset_path("devices").resolve()
    except (OSError, RuntimeError):
        return False


def recorded_tables(
    space: str, metric: str, shipped: bool = False
) -> Iterator[tuple[Device, object]]:
    """Every device with a recorded ``metric`` table (ms or mJ) of ``space``, with the table
    (one value per architecture index, NaN where none), in name order; with ``shipped``, only
    the devices hwnas ships (:func:`is_shipped`: a reference a user's tables cannot skew).

    A profile that cannot be used (an unknown kind, a table file that is missing or malformed)
    is skipped with one warning line on stderr, as ``hwnas devices`` lists it as broken: one
    broken user profile does not stop a command that reads every table (a zoo export's
    recorded latencies, meta-training).
    """
    known = profiles()
    for name in list_devices():
        if shipped and not _shipped_path(known[name].get("_path")):
            continue  # a user's profile is not read at all: no warning of it either
        try:
            dev = get_device(name)
            column = dev.table(space, metric)
        except HwnasError as exc:
            if name not in _WARNED:
                _WARNED.add(name)
                _say(f"warning: skipped device '{name}': {exc}")
            continue
        if column is not None:
            yield dev, column


def recorded_cells(device: Device, space: str, metrics) -> np.ndarray | None:
    """(N,) bool, in the space's index order: the architectures ``device``'s recorded tables
    of ``metrics`` all hold (the Pi 5 tables: 6,466 of NAS-Bench-201's 15,625; the Eagle ones
    lack the 341 cells whose output ignores the input); None for a device without a table of
    ``space`` (live or imported), whose every architecture can be measured."""
    tables = [device.table(space, m) for m in metrics]
    tables = [np.asarray(t, dtype=np.float64) for t in tables if t is not None]
    if not tables:
        return None
    return np.all([np.isfinite(t) & (t > 0) for t in tables], axis=0)


def nearest_recorded(device: Device, space: str, metric: str = "latency_ms") -> str | None:
    """The recorded device most like ``device`` with a table of ``metric`` for ``space``: the
    same ``class`` (phone, gpu, cpu, board, ...) where one exists, then the closest name
    (``difflib``), so ``pixel8`` gives ``pixel3``. None when no recorded device has such a
    table (an energy search was sent to ``titanx_1``, which has latency alone: the command
    suggested searched latency without a word)."""
    import difflib

    candidates = []
    for name, profile in profiles().items():
        if profile.get("kind") != "recorded" or name == device.name:
            continue
        try:
            other = get_device(name)
        except HwnasError:
            continue
        if space in other.table_spaces and other.table_source(space, metric):
            candidates.append((profile.get("class") == device.profile.get("class"), name))
    if not candidates:
        return None
    same = [n for same_class, n in candidates if same_class] or [n for _, n in candidates]
    return max(same, key=lambda n: (difflib.SequenceMatcher(None, device.name, n).ratio(), n))


def _may_give(device: Device, metric: str) -> bool:
    """Whether ``device`` can give ``metric`` where it is attached: it has it here, or (energy)
    its profile names a meter that this machine cannot read (NVML without its library)."""
    if metric in device.metrics:
        return True
    energy = device.profile.get("energy")
    if metric != "energy_mj" or not energy or str(energy).lower() in ("none", "off", "false"):
        return False
    return energy != "auto" or getattr(device, "auto_meter", None) is not None


def offline_routes(device: Device, space: str, metric: str = "latency_ms") -> str:
    """What a user can do when the live ``device`` cannot be reached, as one clause: search the
    nearest recorded device with ``metric`` (:func:`nearest_recorded`), or take the reference
    set's ``metric`` where the device is and import it (a few-shot search on an ``imported``
    device needs no connection; it reads the space's accuracy table, so a space without one
    gets only the first route, or none). An energy route keeps ``--objective energy`` in each
    command it suggests, and names ``hwnas refset measure`` only for a device with a meter."""
    from hwnas.spaces import TabulatedSpace, ability, command_line_name, get_space

    named = "" if space == "nasbench201" else f" --space {command_line_name(space)}"
    energy = metric == "energy_mj"
    objective = " --objective energy" if energy else ""
    routes = []
    near = nearest_recorded(device, space, metric)
    if near is not None:
        what = "the nearest recorded device" + (" with energy" if energy else "")
        routes.append(f"search {what}: hwnas search --device {near}{objective}")
    sp = get_space(space)
    if ability(sp, TabulatedSpace) is None:  # no table: it must be measured
        return "; ".join(routes) or "a search of this space measures every subnet it scores"
    try:  # an FPGA flow that cannot build the space's networks: no reference set to time
        device.check_networks(sp, sp.default_dataset())
    except HwnasError as exc:
        return "; ".join([*routes, f"its networks cannot run on {device.name}: {exc}"])
    export = (
        f"hwnas refset export --space {command_line_name(space)} --out refset/ and time the "
        "10 ONNX files with any tool"
    )
    if energy:
        export = (
            f"hwnas refset export --space {command_line_name(space)} --out refset/, measure "
            "the 10 ONNX files' energy with any tool and write it in mJ in calibration.csv's "
            "column renamed energy_mj"
        )
    if _may_give(device, metric):
        flag = " --metric energy_mj" if energy else ""
        export = (
            f"hwnas refset measure --device {device.name}{named}{flag} when it is attached, "
            f"or {export}"
        )
    routes.append(
        f"or {'measure' if energy else 'time'} the reference set on the device itself "
        f"({export}), then hwnas measure import --device {device.name}-refset{named} "
        f"refset/calibration.csv and hwnas search --device {device.name}-refset{named}"
        f"{objective} (few-shot: predicted {'energy' if energy else 'latency'})"
    )
    return "; ".join(routes)
