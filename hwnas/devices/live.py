"""Devices that run models for real: compile through a runtime, time, and read an energy meter.

:class:`LiveDevice` holds what every live device shares: the runtime named in the profile (or
overridden with ``--runtime``), the timing protocol (``timing:``), the energy meter
(``energy:``), and :meth:`LiveDevice.measure_all`, which compiles a workload once, times it and
reads the meter around the same timed loop. Subclasses say how the device is reached
(:meth:`~hwnas.devices.base.Device.status`), which runtimes and meters it has, and what to do
before each model (:meth:`LiveDevice.before_model`: wait for a phone to cool down).

Profile keys shared by live devices::

    runtime: ort | tvm                 # what compiles and runs models
    timing: {warmup, calls_per_round, min_rounds, max_rounds, target_rel_ci, max_seconds,
             max_cv, threads, quiet_wait_s, max_wait_share}  # hwnas.runtimes.timing.TimingProtocol
    target: host | cuda | {TVM JSON target}   # TVM only
    tvm: {trials_per_task: 16, cc: aarch64-linux-gnu-g++, cache_dir: ~/tvm-cache}
    ort: {provider: cpu | cuda}
    energy: auto | {meter: rapl | nvml | tegrastats | android_battery, ...}

``timing.max_cv`` is a fraction of the median in (0, 1] (0.15 = 15%), or ``none`` for no CV
limit. Each kind declares its top-level keys (:attr:`~hwnas.devices.base.Device.profile_keys`):
any other breaks the profile (``batch_size`` is a recorded table's key alone).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from functools import cached_property
from typing import Any

from hwnas.devices.base import Device, Measurement, Workload
from hwnas.devices.meters import METERS, Meter
from hwnas.errors import DeviceUnavailableError, HwnasError, MeterReadingError
from hwnas.limits import MAX_THREADS, bounded
from hwnas.runtimes import RUNTIMES, get_runtime
from hwnas.runtimes.executable import CALL_LIMIT_S
from hwnas.runtimes.timing import TimingProtocol, patient, time_callable


class LiveDevice(Device):
    """A device measured live through a runtime.

    Args:
        profile: the parsed profile (see the module docstring for its keys).
    """

    profile_keys = Device.profile_keys + ("runtime", "timing", "target", "tvm", "ort", "energy")
    misplaced_keys = {
        "batch_size": "a recorded table's key, the batch its values were measured at: a live "
        "device times one input per call in a search, and labels its costs so; time a batch "
        "with hwnas measure --batch-size B",
    }
    default_runtime = "ort"
    runtimes: tuple[str, ...] = ()
    """Runtimes the device can use (``--runtime`` must be one of them); empty: every runtime
    registered in :data:`hwnas.runtimes.RUNTIMES`."""
    default_target: Any = "host"
    default_provider = "cpu"
    auto_meter: str | None = None
    """Meter tried when the profile says ``energy: auto``."""

    def __init__(self, profile: dict[str, Any]):
        super().__init__(profile)
        self.runtime_name = str(profile.get("runtime") or self.default_runtime)
        usable = self.runtimes or tuple(RUNTIMES.names())
        if self.runtime_name not in usable:
            raise HwnasError(
                f"device '{self.name}' cannot use runtime '{self.runtime_name}' "
                f"(it can use: {', '.join(usable)})"
            )
        self.protocol = timing_protocol(profile.get("timing"), self.where)
        _check_energy(profile.get("energy"), self.where)
        tvm = profile.get("tvm") or {}
        if not isinstance(tvm, dict):
            raise HwnasError(f"{self.where}: tvm must be a mapping, got {tvm!r}")
        if "trials_per_task" in tvm:
            bounded(f"{self.where}: tvm.trials_per_task", tvm["trials_per_task"], 0, 10**5, True)
        if self.runtime_name == "ort":
            check_provider((profile.get("ort") or {}).get("provider"), self.where)
        self.engine = get_runtime(self.runtime_name, **self.runtime_options())
        self.runtime = self.engine.key

    @property
    def where(self) -> str:
        """How the user knows this profile (its file, else its name), for messages."""
        return str(self.profile.get("_path") or f"device '{self.name}'")

    def runtime_options(self) -> dict[str, Any]:
        """Keyword arguments of the runtime, from the profile."""
        options: dict[str, Any] = {"threads": self.protocol.threads}
        if self.runtime_name == "tvm":
            tvm = dict(self.profile.get("tvm") or {})
            given = self.profile.get("_given", ())
            options.update(
                target=self.profile.get("target", self.default_target),
                # a target TVM rejects is named where it was given (it is read when compiling)
                target_origin="--target"
                if "target" in given
                else f"target: in {self.where}"
                if "target" in self.profile
                else None,
                device=self.name,
                **{k: v for k, v in tvm.items() if k in ("trials_per_task", "cc", "cache_dir")},
            )
        else:
            ort = dict(self.profile.get("ort") or {})
            options["provider"] = ort.get("provider", self.default_provider)
        return options

    runs_here = False
    """Whether models run on this machine's CPUs (then the timing reads how long other
    processes held them: :attr:`~hwnas.runtimes.timing.TimingProtocol.max_wait_share`)."""

    @property
    def max_cv(self) -> float | None:
        cv = self.protocol.max_cv
        return None if cv == float("inf") else cv  # timing.max_cv: none, no CV limit

    @property
    def max_wait_share(self) -> float | None:
        return self.protocol.max_wait_share if self.runs_here else None

    @property
    def quiet_wait_s(self) -> float:
        """Seconds a flagged measurement may wait for a quieter moment (``timing.quiet_wait_s``)."""
        return float(self.protocol.quiet_wait_s)

    @contextlib.contextmanager
    def more_rounds(self, factor: int = 2) -> Iterator[None]:
        """Measure with ``factor`` times the protocol's rounds inside the block
        (:func:`hwnas.runtimes.timing.patient`)."""
        saved = self.protocol
        self.protocol = patient(saved, factor)
        try:
            yield
        finally:
            self.protocol = saved

    # -- reachability -------------------------------------------------------------------------

    def status(self) -> tuple[bool, str]:
        """The runtime's status first (installed, has its execution provider), then the
        device's own (:meth:`link_status`)."""
        ok, why = self.engine.status()
        if not ok:
            return False, why
        return self.link_status()

    def require_reachable(self) -> None:
        """As :meth:`Device.require_reachable`, then the runtime's settings
        (:meth:`~hwnas.runtimes.base.Runtime.check_settings`: a TVM target TVM rejects).

        Raises:
            DeviceUnavailableError: the device or its runtime is not usable now.
            HwnasError: a runtime setting is refused (one line, naming where it was given).
        """
        super().require_reachable()
        self.engine.check_settings()

    def link_status(self) -> tuple[bool, str]:
        """(reachable now, one line) of the hardware itself; the runtime is known usable."""
        raise NotImplementedError

    # -- energy -------------------------------------------------------------------------------

    def meter_options(self) -> dict[str, Any]:
        """Extra keyword arguments of the meter factory (the Android battery needs adb)."""
        return {}

    @cached_property
    def energy_status(self) -> tuple[str | None, dict[str, Any], str]:
        """(meter name or None, its options, one line saying which meter or why none)."""
        energy = self.profile.get("energy")
        if not energy:
            return None, {}, "no energy meter in the profile"
        if str(energy).lower() in NO_METER:
            return None, {}, "no energy meter in the profile"
        if energy == "auto":
            name, options = self.auto_meter, {}
            if name is None:
                return None, {}, "no energy meter for this kind of device"
        else:
            options = {k: v for k, v in dict(energy).items() if k != "meter"}
            name = energy.get("meter")
        try:
            meter = METERS.get(name)(**options, **self.meter_options())
        except DeviceUnavailableError as exc:
            return None, {}, str(exc)
        except (TypeError, ValueError) as exc:  # an option the meter does not take
            raise HwnasError(f"{self.where}: energy meter '{name}': {exc}") from None
        return name, options, f"energy from {meter.name}"

    def make_meter(self) -> Meter | None:
        """A fresh meter for one timed loop, or None when the device has no energy reading."""
        name, options, _ = self.energy_status
        if name is None:
            return None
        return METERS.get(name)(**options, **self.meter_options())

    @property
    def metrics(self) -> tuple[str, ...]:
        if self.energy_status[0] is None:
            return ("latency_ms",)
        return ("latency_ms", "energy_mj")

    def why_no_metric(self, metric: str) -> str | None:
        return self.energy_status[2] if metric == "energy_mj" else None

    # -- measuring ----------------------------------------------------------------------------

    def before_model(self) -> None:
        """Called before each model is timed (a phone waits until it is cool enough)."""

    def device_versions(self) -> dict[str, str]:
        """What identifies the hardware in a measurement's ``versions``."""
        return {}

    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        self.check_metric(metric)
        return self.measure_all(workload)[metric]

    def measure_all(self, workload: Workload) -> dict[str, Measurement]:
        """Compile ``workload`` (cached by the runtime), time it under the protocol, and read
        the energy meter around the timed loop: the energy per inference is the meter's mean
        power over its window times the median latency
        (:func:`~hwnas.runtimes.timing.time_callable`), one reading whose CV is unknown
        (:attr:`~hwnas.devices.base.Measurement.known_cv`); it is flagged when the latency is.

        Raises:
            MeterReadingError: the meter counted no energy over the window (a counter that
                does not move); its ``kept`` holds the latency, timed all the same.
            DeviceUnavailableError: the device cannot measure now.
            HwnasError: the workload cannot be compiled or run.
        """
        self.require_reachable()
        executable = self.engine.compile(workload.onnx_bytes(), workload.input_shape)
        build = self.engine.last_build
        executable.first_call(CALL_LIMIT_S)  # a model that never ends is refused here
        self.before_model()
        meter = self.make_meter()
        timing = time_callable(executable, self.protocol, meter, here=self.runs_here)
        versions = {
            **self.engine.versions(),
            **self.device_versions(),
            "threads": str(self.protocol.threads),
        }
        built: dict[str, Any] = {
            # what compiling cost (ORT: creating the session; TVM: import, tuning, compile)
            "compile_s": round(build.compile_s, 3),
            "cached": build.cached,
            "tuned_workloads": len(build.tuned_workloads),
            "tuning_s": round(build.tuning_s, 3),
        }
        extra: dict[str, Any] = {
            "rounds": timing.rounds,
            "rel_ci": round(timing.rel_ci, 5) if timing.rel_ci != float("inf") else None,
            "target_rel_ci": self.protocol.target_rel_ci,  # the precision the protocol aimed at
            "timed_s": round(timing.seconds, 3),
            **built,
        }
        if timing.wait_share is not None:  # other processes' share of its CPU (median round)
            extra["cpu_wait_share"] = round(timing.wait_share, 4)
        common = dict(
            device=self.name,
            runtime=self.runtime,
            model_hash=workload.model_hash,
            label=workload.label,
            batch_size=workload.batch_size,
            input_shape=tuple(workload.input_shape),
            versions=versions,
            source=f"measured:{self.name}:{self.runtime}",
            flagged=timing.flagged,
        )
        out = {
            "latency_ms": Measurement(
                metric="latency_ms",
                value=timing.median_ms,
                samples=timing.samples_ms,
                cv=timing.cv,
                iqr=timing.iqr_ms,
                extra=extra,
                **common,
            )
        }
        if timing.energy_mj is not None and meter is not None:
            # one meter reading over the whole window: the window's mean power times the
            # median latency above; one sample, so its CV is unknown (stored as 0, read back
            # as NaN by Measurement.known_cv), and the latency's interval is not its own
            energy: dict[str, Any] = {
                "meter": meter.name,
                "power_w": round(timing.power_w or 0.0, 6),
                "window_s": round(timing.window_s, 3),
                "window_calls": timing.window_calls,
                "latency_ms": timing.median_ms,  # the time the power is multiplied by
                "latency_cv": round(timing.cv, 5),  # what flags it, with the CPU's wait
                **built,
            }
            if "cpu_wait_share" in extra:
                energy["cpu_wait_share"] = extra["cpu_wait_share"]
            out["energy_mj"] = Measurement(
                metric="energy_mj",
                value=timing.energy_mj,
                samples=(timing.energy_mj,),
                cv=0.0,
                extra=energy,
                **common,
            )
        elif timing.meter_error is not None:
            raise MeterReadingError(timing.meter_error, kept=out)
        return out

    def require_metric(self, metric: str) -> None:
        """As :meth:`Device.require_metric`; for energy, the meter must count over a short
        probe of busy work (:meth:`~hwnas.devices.meters.Meter.probe`): a frozen counter
        (a virtual machine's RAPL) stopped an energy search only after 5 candidates.

        Raises:
            HwnasError: the device has no ``metric``.
            DeviceUnavailableError: the meter cannot be read, or does not count.
        """
        super().require_metric(metric)
        meter = self.make_meter() if metric == "energy_mj" else None
        why = meter.probe() if meter is not None else None
        if why:
            raise DeviceUnavailableError(
                f"device '{self.name}' cannot measure energy: {why}; measure latency instead, "
                f"or give {self.where} a meter that counts (energy: none for no energy)"
            )


NO_METER = ("none", "off", "false", "no")
"""``energy:`` values that mean no meter (as leaving the key out does)."""

NO_LIMIT = ("none", "off")
"""``timing.max_cv`` values (with YAML's ``null``) that mean no CV limit."""


def check_provider(raw: Any, where: str) -> None:
    """Refuse an ``ort.provider`` that names no ONNX Runtime execution provider (``dnnl``
    was listed as unreachable, "ONNX Runtime has no dnnl"); one ONNX Runtime knows but this
    build lacks is left to :meth:`LiveDevice.status` (unreachable here, usable elsewhere).

    Raises:
        HwnasError: one line naming the file, ``ort.provider``, the closest name and the
            names it may be.
    """
    import difflib

    from hwnas.runtimes.onnxruntime import PROVIDERS

    if raw is None or raw in PROVIDERS or raw in PROVIDERS.values():
        return
    try:
        import onnxruntime

        names = list(onnxruntime.get_all_providers())
    except ImportError:  # no ONNX Runtime: status() says to install it
        names = []
    if isinstance(raw, str) and (raw in names or (not names and raw.endswith("Provider"))):
        return
    text = str(raw)
    near = [n for n in names if n.lower().startswith(text.lower())]
    near = near or difflib.get_close_matches(text, [*PROVIDERS, *names], 1)
    hint = f"; did you mean {near[0]}?" if near else ""
    others = f", or one of ONNX Runtime's: {', '.join(names)}" if names else ""
    raise HwnasError(
        f"{where}: ort.provider {text[:80]!r} is no ONNX Runtime execution provider{hint} "
        f"(known: {', '.join(PROVIDERS)}{others})"
    )


_TIMING_BOUNDS: dict[str, tuple[float | None, float | None, bool, bool]] = {
    # field: (low, high, integer, low excluded)
    "warmup": (0, 10**6, True, False),
    "calls_per_round": (1, 10**6, True, False),
    "min_rounds": (1, 10**4, True, False),
    "max_rounds": (1, 10**4, True, False),
    "rounds": (1, 10**4, True, False),
    "target_rel_ci": (0, 1, False, True),
    "max_seconds": (0, 3600, False, True),
    "max_cv": (0, 1, False, True),  # a fraction of the median (0.15 = 15%), or none
    "max_wait_share": (0, 10**6, False, False),
    "threads": (1, MAX_THREADS, True, False),
    "quiet_wait_s": (0, 3600, False, False),
}


def timing_protocol(raw: Any, where: str) -> TimingProtocol:
    """The profile's ``timing:`` section as a :class:`TimingProtocol`, every value checked
    (a type or range mistake in a profile is one line naming the file and key).

    Raises:
        HwnasError: not a mapping, an unknown key, a value of the wrong type or range.
    """
    if raw is None:
        return TimingProtocol()
    if not isinstance(raw, dict):
        raise HwnasError(f"{where}: timing must be a mapping of protocol keys, got {raw!r}")
    values = {}
    for key, value in raw.items():
        if key not in _TIMING_BOUNDS:
            known = ", ".join(_TIMING_BOUNDS)
            raise HwnasError(f"{where}: unknown timing key '{key}'; known: {known}")
        if key == "max_cv" and (value is None or str(value).lower() in NO_LIMIT):
            values[key] = float("inf")  # never flagged for its CV (max_wait_share still holds)
            continue
        low, high, integer, low_open = _TIMING_BOUNDS[key]
        try:
            values[key] = bounded(f"{where}: timing.{key}", value, low, high, integer, low_open)
        except HwnasError as exc:
            if key != "max_cv":
                raise
            # max_cv: 0 flagged every measurement; max_cv: 15 (meant as 15%) never flagged one
            raise HwnasError(
                f"{exc}; max_cv is a fraction of the median (0.15 for 15%), or none for no CV limit"
            ) from None
    try:
        return TimingProtocol(**values)
    except HwnasError as exc:
        raise HwnasError(f"{where}: {exc}") from None


def _check_energy(raw: Any, where: str) -> None:
    """Refuse an ``energy:`` value that is neither absent, ``auto``, ``none`` nor a mapping
    naming a known meter.

    Raises:
        HwnasError: one line naming the file.
    """
    if not raw or raw == "auto" or str(raw).lower() in NO_METER:
        return
    if not isinstance(raw, dict) or "meter" not in raw:
        raise HwnasError(
            f"{where}: energy must be auto, none, or {{meter: NAME, ...}} "
            f"(meters: {', '.join(METERS.names())}), got {raw!r}"
        )
    METERS.get(str(raw["meter"]))  # an unknown meter: one line listing the known ones
