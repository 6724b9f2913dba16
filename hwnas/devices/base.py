"""The device interface, what is measured (a :class:`Workload`), and what comes back
(a :class:`Measurement`).

A device is declared by a YAML profile (``devices/*.yaml``) whose ``kind`` picks the class that
reaches it. A device answers two questions: can it measure now (:meth:`Device.status`), and what
is the latency or energy of a workload (:meth:`Device.measure`). Caching, locking and reuse of
measurements are the job of :class:`hwnas.measure.Profiler`, not of devices.
"""

from __future__ import annotations

import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from hwnas.errors import DeviceUnavailableError, HwnasError
from hwnas.spaces.base import Arch


def profile_number(
    profile: dict[str, Any],
    key: str,
    default: float,
    *,
    integer: bool = False,
    least: float | None = None,
    above: float | None = None,
    unit: str = "",
    name: str | None = None,
) -> float:
    """A number from a device profile, checked: ``profile[key]``, ``default`` when absent.

    Args:
        profile: the profile's mapping (or one of its sections, such as ``rpc``).
        key: the key in ``profile``.
        default: the value when the key is absent.
        integer: a whole number is required (returned as ``int``).
        least: smallest value allowed, if any.
        above: the value must be greater than this, if given.
        unit: named in the message (``seconds``, ``ns``, ``°C``).
        name: the key as the message names it (``rpc.session_timeout``); ``key`` by default.

    Raises:
        HwnasError: not a finite number (a bool, a string, NaN), not whole where ``integer``,
            or out of range; the one line names the key, what it must be and the value given.
    """
    value = profile.get(key, default)
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    ok = not isinstance(value, bool) and np.isfinite(number)
    ok = ok and (not integer or number == int(number))
    ok = ok and (least is None or number >= least) and (above is None or number > above)
    if not ok:
        what = "a whole number" if integer else "a number"
        what += f" of {unit}" if unit else ""
        what += f" >= {least:g}" if least is not None else ""
        what += f" > {above:g}" if above is not None else ""
        raise HwnasError(f"{name or key} must be {what}, got {value!r}")
    return int(number) if integer else number


def check_profile_keys(cls: type[Device], profile: dict[str, Any], where: str) -> None:
    """Refuse a top-level key of ``profile`` that ``cls`` does not declare
    (:attr:`Device.profile_keys`), naming the closest allowed one: every kind's unknown key
    was ignored (``timeing:``, ``runtme:``, ``adb_timout_s:``, ``clock_mhz:``).

    Args:
        cls: the class of the profile's ``kind``.
        profile: the profile as its file gives it (``_path`` is hwnas's own key).
        where: how the message names the profile ("device profile FILE").

    Raises:
        HwnasError: one line naming the profile, the key, and the closest allowed key or why
            this kind has no such key.
    """
    import difflib

    known = cls.profile_keys
    for key in profile:
        if key in known or key == "_path":
            continue
        why = cls.misplaced_keys.get(str(key))
        if why is None:
            close = difflib.get_close_matches(str(key), known, 1)
            why = f"did you mean {close[0]}?" if close else "no such key"
        raise HwnasError(
            f"{where}: unknown key '{str(key)[:80]}' ({why}); allowed in a kind: {cls.kind} "
            f"profile: {', '.join(known)}"
        )


METRICS = ("latency_ms", "energy_mj")
"""Metric names: latency per inference in milliseconds, energy per inference in millijoules."""


@dataclass(frozen=True)
class Workload:
    """A model to measure, identified by a stable hash.

    Attributes:
        model_hash: content hash identifying the network (see :func:`hwnas.export.content_hash`).
        label: human-readable name (the arch string, or an ONNX file name).
        input_shape: the full input shape including batch, (B, C, H, W).
        arch: the architecture, when the model comes from a search space (recorded devices
            look it up by architecture).
        dataset: the dataset the network was built for ("cifar100"), when from a space.
        onnx_factory: returns the serialised ONNX model; called only by devices that run it.
        info: JSON-able description stored with its measurements (see below).
    """

    model_hash: str
    label: str
    input_shape: tuple[int, ...]
    arch: Arch | None = None
    dataset: str | None = None
    onnx_factory: Callable[[], bytes] | None = field(default=None, compare=False, repr=False)
    info: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    """What the workload is, kept with its measurements (``Measurement.extra["workload"]``):
    a kernel timed alone records its description here."""

    @property
    def batch_size(self) -> int:
        """The first input's first axis (1 for a scalar first input)."""
        from hwnas.store import batch_of

        return batch_of(self.input_shape)

    def onnx_bytes(self) -> bytes:
        """The ONNX model.

        Raises:
            HwnasError: the workload has no ONNX form.
        """
        if self.onnx_factory is None:
            raise HwnasError(f"workload {self.label} has no ONNX model to run")
        return self.onnx_factory()


@dataclass(frozen=True)
class Measurement:
    """One measured (or recorded) value of a workload on a device.

    Attributes:
        device: device name.
        runtime: the runtime's registry name ("ort", "tvm"), or "recorded" for table values.
        metric: "latency_ms" or "energy_mj".
        model_hash: :attr:`Workload.model_hash`.
        label: :attr:`Workload.label`.
        batch_size: B.
        input_shape: (B, C, H, W).
        value: the reported value (median), in ms or mJ per inference.
        samples: every timed sample (ms or mJ); for recorded values, the one table value.
        cv: coefficient of variation of the value (std / mean of the round medians), 0 if unknown
            (the store holds a number): a value of one sample (a live energy, one meter
            reading; a table's value) has none, and :attr:`known_cv` reads it as NaN.
        iqr: interquartile range of ``samples`` (same unit as ``value``).
        versions: library versions that produced it.
        measured_at: Unix time (s).
        source: where the value comes from (for example ``recorded:<file>:<column>``).
        flagged: the CV exceeded the device's ``timing.max_cv``, or other processes held its
            CPU more than ``timing.max_wait_share`` of the time it ran
            (:func:`hwnas.measure.flag_cause` says which): kept with its samples, never used
            by a search (see :class:`hwnas.measure.Profiler`).
        extra: protocol details (rounds, relative 95% interval, timed seconds, compile and
            tuning seconds, workloads tuned) and device-specific results (FPGA resources).
    """

    device: str
    runtime: str
    metric: str
    model_hash: str
    label: str
    batch_size: int
    input_shape: tuple[int, ...]
    value: float
    samples: tuple[float, ...] = ()
    cv: float = 0.0
    iqr: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    measured_at: float = field(default_factory=time.time)
    source: str = ""
    flagged: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def known_cv(self) -> float:
        """``cv``, or NaN where the value has no spread to know it from: fewer than two
        samples (a live energy is one meter reading over the whole timed window, a table's
        value one number), whose stored ``cv`` of 0 would read as a perfectly steady value."""
        return float(self.cv) if len(self.samples) > 1 else math.nan


class Device(ABC):
    """A target that measures workloads.

    Args:
        profile: the parsed YAML profile (``name``, ``kind``, ``description`` and kind-specific
            keys).
    """

    kind: str = ""
    runtime: str = ""
    """Registry name of the runtime that runs models (part of every measurement's key)."""
    stored_in_profiler: bool = True
    """Whether measurements are cached in the store (False for devices that read a table)."""
    can_measure: bool = True
    """Whether the device gives values it was not given before (False for an imported device,
    which has only the measurements imported into the store)."""
    runs_models: bool = True
    """Whether the device compiles and times any model (False for a recorded table)."""
    on_this_machine: bool = False
    """Whether each machine has its own device of this name (its CPU, its GPU, its synthesis
    tools): the measurement store's device lock is then this machine's
    (:meth:`hwnas.store.MeasurementStore.device_lock`), so workers on other machines, each
    measuring its own, never wait for each other. False for a device the team shares (a board
    reached over TVM RPC or adb: one lock on the shared store for all)."""
    runtime_name: str | None = None
    """Registry key of the runtime that runs models ("ort", "tvm"); None where the device has
    no runtime choice (tables, imported values, hls4ml)."""

    profile_keys: tuple[str, ...] = ("name", "kind", "class", "description")
    """The top-level keys a profile of this kind may have; a subclass declares its own as
    ``Parent.profile_keys + (...)``. Any other key breaks the profile
    (:func:`check_profile_keys`): a misspelt ``timeing:`` was ignored, and the device timed
    with the default protocol."""
    misplaced_keys: dict[str, str] = {}
    """Keys of other kinds' profiles that this kind refuses, with why (said instead of the
    closest allowed key)."""

    def __init__(self, profile: dict[str, Any]):
        self.profile = profile
        self.name: str = profile["name"]
        self.description: str = profile.get("description", "")

    @property
    def value_batch_size(self) -> int:
        """Batch size of the values this device gives a predictor to adapt on: 1 (a live
        device times one input per call in a search, and reference sets are measured at
        batch 1); a recorded table's is its profile's ``batch_size``
        (:class:`~hwnas.devices.recorded.RecordedDevice`: a GPU measured at 256)."""
        return 1

    @property
    def metrics(self) -> tuple[str, ...]:
        """Metrics the device can give, a subset of :data:`METRICS`."""
        return ("latency_ms",)

    @abstractmethod
    def status(self) -> tuple[bool, str]:
        """(reachable now, one-line explanation). Must be fast and never raise."""

    @abstractmethod
    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        """Measure ``workload``.

        Raises:
            DeviceUnavailableError: the device cannot measure now.
            HwnasError: the device cannot measure this workload or metric.
        """

    def measure_all(self, workload: Workload) -> dict[str, Measurement]:
        """Every metric of the device for ``workload`` (metric -> measurement).

        Devices that take several metrics in one run (latency and energy around the same
        timed loop) override this; the default measures each metric on its own.
        """
        return {metric: self.measure(workload, metric) for metric in self.metrics}

    @property
    def max_cv(self) -> float | None:
        """Largest coefficient of variation of a usable timing (a fraction), or None where
        values are not timed here."""
        return None

    @property
    def max_wait_share(self) -> float | None:
        """Largest share of a timing's run time it may wait for a CPU other processes hold
        (models run on this machine's CPUs), or None where that is not read."""
        return None

    @property
    def table_spaces(self) -> tuple[str, ...]:
        """Spaces for which the device has a recorded value of every architecture."""
        return ()

    def table(self, space: str, metric: str) -> np.ndarray | None:
        """The recorded ``metric`` (ms or mJ) of every architecture of ``space``, in the space's
        index order (NaN where missing), or None when the device has no such table."""
        return None

    def table_source(self, space: str, metric: str) -> str:
        """Where :meth:`table`'s values come from ("recorded:FILE:COLUMN"), or ""."""
        return ""

    def table_dataset(self, space: str, metric: str) -> str | None:
        """The dataset whose networks :meth:`table`'s values were measured on (what fixes
        their input size), or None where the device has no such table."""
        return None

    def check_table_dataset(self, space: str, metric: str, dataset: str) -> None:
        """Refuse to read :meth:`table`'s values as ``dataset``'s networks when the table was
        measured on networks of another input size (NAS-Bench-201's ImageNet16-120 cells take
        16x16 images, its CIFAR cells 32x32: the same cell is another network). Datasets of
        the same input size share the values (CIFAR-10 and CIFAR-100 differ in the
        classifier's outputs alone).

        Raises:
            HwnasError: the input sizes differ (one line: both datasets and what to do).
        """
        measured = self.table_dataset(space, metric)
        if measured is None or measured == dataset:
            return
        from hwnas.spaces import get_space

        sp = get_space(space)
        have, want = sp.dataset(measured).input_shape, sp.dataset(dataset).input_shape
        if tuple(have) == tuple(want):
            return
        shown = "x".join  # (3, 32, 32) -> 3x32x32
        raise HwnasError(
            f"device '{self.name}' recorded {metric} of {space}'s {measured} networks "
            f"({shown(map(str, have))} input), not of its {dataset} networks "
            f"({shown(map(str, want))}): its values are other networks'; use --dataset "
            f"{measured}, or give the device a table of {dataset}'s networks (tables.{space}."
            f"{metric}.dataset in its profile)"
        )

    def supports(self, space: str) -> bool:
        """Whether the device can give values for architectures of ``space``."""
        return "*" in self.spaces or space in self.spaces

    def check_networks(self, space: Any, dataset: str) -> None:
        """Refuse, before a search starts, a space whose networks this device cannot take at
        all (checked on one of them; the default takes every network).

        Raises:
            HwnasError: one line naming what in the space's networks the device cannot take.
        """
        return None

    def require_reachable(self) -> None:
        """Raise :class:`DeviceUnavailableError` with the status message if not reachable."""
        ok, why = self.status()
        if not ok:
            raise DeviceUnavailableError(f"device '{self.name}' cannot measure: {why}")

    def check_metric(self, metric: str) -> None:
        """Raise :class:`HwnasError` if the device has no ``metric`` (saying why, where the
        device knows: :meth:`why_no_metric`)."""
        if metric not in self.metrics:
            why = self.why_no_metric(metric)
            raise HwnasError(
                f"device '{self.name}' has no {metric} measurements "
                f"(it has: {', '.join(self.metrics) or 'none'})" + (f": {why}" if why else "")
            )

    def require_metric(self, metric: str) -> None:
        """:meth:`check_metric`, and that the device can give ``metric`` now: called once,
        before a command that optimises or calibrates on ``metric`` does any work (a live
        device probes its energy meter: :meth:`hwnas.devices.live.LiveDevice.require_metric`).

        Raises:
            HwnasError: the device has no ``metric``.
            DeviceUnavailableError: it cannot give it now.
        """
        self.check_metric(metric)

    def why_no_metric(self, metric: str) -> str | None:
        """Why the device has no ``metric`` (a live device's missing energy meter), or None."""
        return None

    @cached_property
    def spaces(self) -> tuple[str, ...]:
        """Search spaces whose every architecture the device can measure ("*" = any model)."""
        return ("*",)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
