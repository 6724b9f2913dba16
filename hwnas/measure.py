"""Measuring workloads on a device through the store: each measurement is taken once.

``hwnas.measure(models, device=...)`` calls :func:`measure` (this module is callable; its
arguments, returns and errors are in :func:`measure`'s docstring: ``help(hwnas.measure.measure)``).

:class:`Profiler` is what search and the CLI call. It looks a workload up in the store, and
only when it is missing takes the device lock, looks again (another worker may have measured it
meanwhile), measures, and appends, so that a killed search loses nothing it measured and a
resumed one measures nothing twice. A device that gives several metrics in one run (latency and
energy) has all of them stored at once.

A *flagged* measurement (its CV exceeded the device's ``timing.max_cv``) is measured again, up
to :attr:`Profiler.attempts` times: before each new attempt the profiler waits for a quieter
moment (the machine's load average per CPU below :data:`QUIET_LOAD`), at most the device's
``timing.quiet_wait_s`` seconds in all (default 60), and the new attempt takes twice the rounds
(:func:`hwnas.runtimes.timing.patient`). If every attempt is flagged, it is stored flagged (with
its samples) and :class:`NoisyMeasurementError` is raised, so no search uses it silently: a
search skips that candidate (``docs/robustness.md``). A flagged stored measurement is measured
again the next time it is asked for.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import time
import types
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hwnas.devices.base import Device, Measurement, Workload
from hwnas.errors import (
    CandidateError,
    DeviceLostError,
    DeviceUnavailableError,
    HwnasError,
    MeterReadingError,
    keyword_terms,
    warn_caller,
)
from hwnas.export import content_hash
from hwnas.limits import input_size
from hwnas.progress import SILENT
from hwnas.spaces.base import Arch, SearchSpace
from hwnas.store import MeasurementStore

QUIET_LOAD = 0.9
"""A machine whose 1-minute load average per CPU is below this counts as quiet enough to measure
again (a measurement run itself adds about one busy process)."""

WAIT_STEP_S = 5.0
"""Seconds between looks at the load while waiting for a quieter moment."""

def arch_workload(space: SearchSpace, arch: Arch, dataset: str, batch_size: int = 1) -> Workload:
    """The workload of ``arch`` built for ``dataset`` at ``batch_size``.

    Its model hash depends only on (space, arch string, dataset, input shape), so it is stable
    across library versions (the space by :attr:`SearchSpace.identity`: its name, plus a hash
    of its structure for spaces made from a Python module); the ONNX model is exported only
    if a device needs to run it.
    """
    if batch_size < 1:
        raise HwnasError(f"batch size must be at least 1, got {batch_size}")
    shape = (batch_size, *space.input_shape(arch, dataset))
    input_size(f"{space.name} network for {dataset} at batch size {batch_size}", shape)
    key = content_hash(space.identity, arch.text, dataset, "x".join(map(str, shape)))

    def factory() -> bytes:  # exported once per model hash, shared with the model zoo
        from hwnas.export_cache import export_random

        return export_random(space, arch, dataset, key, shape)[0].onnx_bytes

    return Workload(key, arch.text, shape, arch=arch, dataset=dataset, onnx_factory=factory)


def network_workload(name: str, side: int = 224, width: float = 1.0, num_classes: int = 1000):
    """The :class:`~hwnas.devices.base.Workload` of a well-known network
    (:data:`hwnas.known_networks.NETWORKS`) at batch 1: input (1, 3, side, side); its model hash
    depends on (name, side, width, classes) and the version of those definitions, and it is
    exported only when a device runs it.

    Raises:
        UnknownNameError: an unknown name.
    """
    from hwnas.export import export_onnx
    from hwnas.known_networks import DEFINITIONS_VERSION, NETWORKS, build_network

    NETWORKS.info(name)  # unknown names fail here, before any work
    shape = (1, 3, int(side), int(side))
    key = content_hash("known-network", DEFINITIONS_VERSION, name, f"{width:g}", str(num_classes),
                       "x".join(map(str, shape)))  # fmt: skip

    def factory() -> bytes:
        return export_onnx(build_network(name, num_classes, width, side), shape)

    label = name if (width == 1.0 and side == 224) else f"{name}@{side}x{width:g}"
    return Workload(key, label, shape, onnx_factory=factory)


def flag_cause(
    m: Measurement, max_cv: float | None, max_wait: float | None
) -> tuple[str, str, str]:
    """Why a flagged measurement was flagged, in words.

    Args:
        m: the flagged measurement (its ``cv``, and ``extra["cpu_wait_share"]`` where the
            device read it: the share, 0-1, of the run other processes held its CPU); a live
            energy, one meter reading, is flagged by its latency's ``extra["latency_cv"]``.
        max_cv: the device's ``timing.max_cv`` (a fraction), or None.
        max_wait: the device's ``timing.max_wait_share`` (a fraction), or None.

    Returns:
        ``(short, why, fix)``: the cause for a footer ("CV above 5%"), for one measurement
        ("CV 7.1% > 5%"), and what to change in the device profile.
    """
    wait = m.extra.get("cpu_wait_share")
    if max_wait is not None and wait is not None and wait > max_wait:
        return (
            f"other processes holding its CPU over {max_wait:.0%} of the time",
            f"other processes held its CPU {wait:.0%} of the time it ran (> "
            f"{max_wait:.3g}: the latency reads high)",
            "give it a core of its own (taskset), or raise timing.max_wait_share",
        )
    limit = f" > {100 * max_cv:.3g}%" if max_cv is not None else ""  # 0.2%, not 0%
    short = f"CV above {100 * max_cv:.3g}%" if max_cv is not None else "CV too high"
    cv = m.extra.get("latency_cv")  # an energy: its power times this latency
    if m.metric == "latency_ms" or not isinstance(cv, (int, float)):
        return short, f"CV {m.cv:.1%}{limit}", "raise timing.max_cv"
    return short, f"its latency's CV {cv:.1%}{limit}", "raise timing.max_cv"


class NoisyMeasurementError(CandidateError):
    """Every attempt to measure a workload was flagged: its CV above the device's ``max_cv``,
    or other processes holding its CPU more than ``max_wait_share`` of the time it ran."""

    def __init__(
        self, m: Measurement, attempts: int, max_cv: float | None, max_wait: float | None = None
    ):
        _, why, fix = flag_cause(m, max_cv, max_wait)
        super().__init__(
            f"{m.metric} of {m.label} on '{m.device}' is too noisy to use: {why} after "
            f"{attempts} attempt(s); it is stored flagged and measured again next time "
            f"(quiet the machine, or {fix} in the device profile)"
        )
        self.measurement = m


def onnx_workload(path, batch_size: int = 1, dims: dict[str, int] | None = None) -> Workload:
    """The workload of an ONNX file: its inputs as :mod:`hwnas.onnx_inputs` feeds them (a
    dynamic batch axis takes ``batch_size``, or the size ``dims`` gives it by name: the same
    workload either way; the other dynamic axes ``dims`` names take its sizes,
    :func:`hwnas.onnx_inputs.fix_dims`, and its label says so: "text.onnx (sequence_length=128)"),
    keyed by its first input's shape and hashed by the bytes run and that shape.

    Raises:
        HwnasError: ``batch_size`` below 1, or other than 1 and a ``dims`` size of the batch
            axis; unreadable or invalid ONNX
            (:func:`hwnas.export.read_onnx`: weights in external data files are read with it);
            an input hwnas cannot feed (a string, a dynamic axis other than the batch); inputs
            too large to allocate.
    """
    from pathlib import Path

    from hwnas.export import read_onnx
    from hwnas.onnx_inputs import batch_dims, fix_dims

    if batch_size < 1:
        raise HwnasError(f"batch size must be at least 1, got {batch_size}")
    path = Path(path)
    model, data = read_onnx(path)
    dims = dict(dims or {})
    for name in batch_dims(model):  # a batch axis named by --dim is the batch size: one key
        if name in dims:
            size = dims.pop(name)
            if batch_size not in (1, size):
                raise HwnasError(
                    f"{path.name}: --dim {name}={size} names the batch axis, which "
                    f"--batch-size {batch_size} sets too; give one of them"
                )
            batch_size = size
    fixed = fix_dims(model, dims) if dims else []
    data = model.SerializeToString() if fixed else data
    label = path.name + (f" ({', '.join(fixed)})" if fixed else "")
    shape = onnx_input_shape(model, path, batch_size)
    key = content_hash(data, "x".join(map(str, shape)))
    return Workload(key, label, tuple(shape), onnx_factory=lambda: data)


def onnx_input_shape(model, path, batch_size: int = 1) -> list[int]:
    """The shape of the first input of the ONNX ``model`` (read from ``path``, named in
    errors), a dynamic batch axis taking ``batch_size``, after checking that hwnas can feed
    every input (:func:`hwnas.onnx_inputs.model_inputs`) and allocate it
    (:func:`hwnas.limits.input_size`).

    Raises:
        HwnasError: as :func:`hwnas.onnx_inputs.model_inputs`; an input too large.
    """
    from hwnas.onnx_inputs import model_inputs

    specs = model_inputs(model, str(path), batch_size)
    for s in specs:  # before an input of that size is allocated
        input_size(f"{path} input '{s.name}'" if len(specs) > 1 else str(path), s.shape)
    return list(specs[0].shape)


@dataclass
class ProfilerCounts:
    """What a :class:`Profiler` did.

    Attributes:
        taken: new measurements taken on the device (and stored), one per workload.
        reused: measurements found in the store.
        read: values read from a recorded table.
        flagged: attempts whose measurement was flagged (too noisy).
        tuned_workloads: TVM workloads tuned for the models measured (new to the database).
        tuning_s: seconds spent tuning them.
        compile_s: seconds spent compiling models (cached artifacts cost nothing).
    """

    taken: int = 0
    reused: int = 0
    read: int = 0
    flagged: int = 0
    tuned_workloads: int = 0
    tuning_s: float = 0.0
    compile_s: float = 0.0


class Profiler:
    """A device plus the store: measure-once semantics.

    Args:
        device: where to measure.
        store: where measurements are kept; may be None for recorded devices.
        attempts: how many times a flagged (too noisy) measurement is taken before giving up.
        quiet_wait_s: seconds a flagged measurement may wait in all for a quieter moment
            (default: the device's ``timing.quiet_wait_s``, 0 for devices without one).
        say: where the one warning of a meter that counted nothing goes (default: a
            ``warning:`` line on stderr).

    An energy meter that counts nothing (:class:`~hwnas.errors.MeterReadingError`: a frozen
    counter) does not cost the latency timed around it: that is stored, and where energy is
    not what was asked for, the energy is dropped with one warning per profiler (a run), not
    per model; where energy is asked for, the error stops the command (the counter is probed
    before any work by :meth:`~hwnas.devices.base.Device.require_metric`).
    """

    def __init__(
        self,
        device: Device,
        store: MeasurementStore | None,
        attempts: int = 3,
        quiet_wait_s: float | None = None,
        say: Any = None,
    ):
        self.device = device
        self.store = store
        self.attempts = max(1, attempts)
        if quiet_wait_s is None:
            quiet_wait_s = float(getattr(device, "quiet_wait_s", 0.0))
        self.quiet_wait_s = max(0.0, quiet_wait_s)
        self.counts = ProfilerCounts()
        self.say = say or _say
        self.energy_dropped: str | None = None
        """The meter's line, once energy was dropped for a meter that counted nothing."""

    def measure(
        self, workload: Workload, metric: str = "latency_ms", allow_flagged: bool = False
    ) -> Measurement:
        """The measurement of ``workload``: from the store if taken before, else taken now.

        Args:
            workload: what to measure.
            metric: "latency_ms" or "energy_mj".
            allow_flagged: return a measurement that is still flagged after every attempt
                (``hwnas measure`` shows it) instead of raising.

        Raises:
            DeviceLostError: the device stopped measuring (exit status 1: the command resumes).
            MeterReadingError: ``metric`` is energy and the meter counted none (the latency
                timed with it is stored), now or for an earlier model of this profiler's run
                (then nothing is timed again: the latency was asked for first).
            NoisyMeasurementError: every attempt was flagged (unless ``allow_flagged``).
            HwnasError: the device has no such metric or cannot run the workload.
        """
        self.device.check_metric(metric)
        if not self.device.stored_in_profiler or self.store is None:
            value = self.device.measure(workload, metric)
            self.counts.read += 1  # a value read (a table's gap raises first)
            return value
        found = self.stored(workload, metric)
        if (found is None or found.flagged) and metric == "energy_mj" and self.energy_dropped:
            raise self._stuck(workload, self.energy_dropped)  # timed with its latency just now
        if found is None or found.flagged:
            with self.store.device_lock(self.device.name, self.device.on_this_machine):
                found = self.stored(workload, metric)
                if found is None or found.flagged:
                    m = self._take(workload, metric)[metric]
                    if m.flagged and not allow_flagged:
                        raise NoisyMeasurementError(
                            m, self.attempts, self.device.max_cv, self.device.max_wait_share
                        )
                    return m
        self.counts.reused += 1
        return found

    def stored(self, workload: Workload, metric: str = "latency_ms") -> Measurement | None:
        """The store's measurement of ``workload`` on this device and runtime (flagged or
        not), or None: what :meth:`measure` would reuse rather than take."""
        if self.store is None:
            return None
        key = (self.device.name, self.device.runtime, metric, workload.model_hash,
               workload.input_shape)  # fmt: skip
        return self.store.lookup(*key)

    def _take(self, workload: Workload, metric: str = "latency_ms") -> dict[str, Measurement]:
        """Measure every metric of the device (re-measuring flagged results after waiting for a
        quieter moment, with more rounds), store them; ``metric`` is the one asked for (a
        meter that counts nothing stops it only where it is energy)."""
        deadline = time.monotonic() + self.quiet_wait_s
        stuck = None
        for attempt in range(self.attempts):
            if attempt:
                wait_for_quiet(deadline)
            more = getattr(self.device, "more_rounds", None)
            with more() if attempt and more is not None else contextlib.nullcontext():
                try:
                    results, stuck = self.device.measure_all(workload), None
                except MeterReadingError as exc:  # the latency was timed all the same
                    if not exc.kept:
                        raise
                    results, stuck = exc.kept, exc
                except DeviceLostError:
                    raise
                except DeviceUnavailableError as exc:  # gone mid-command: no fault of the input
                    raise DeviceLostError(str(exc)) from None
            self._count_build(results)
            if not any(m.flagged for m in results.values()):
                break
            self.counts.flagged += 1
        if workload.info:  # what was measured, kept with it (a kernel's description)
            results = {
                k: replace(m, extra={**m.extra, "workload": workload.info})
                for k, m in results.items()
            }
        for name, m in list(results.items()):
            if not self.store.append(m):  # another machine stored this key first (each
                # locks its own CPU): every worker uses the value the store keeps
                kept = self.store.lookup(m.device, m.runtime, m.metric, m.model_hash,
                                         m.input_shape)  # fmt: skip
                results[name] = kept if kept is not None else m
        self.counts.taken += 1
        if stuck is not None:
            if metric not in results:  # energy asked for: the device cannot give it now
                raise self._stuck(workload, stuck.reading)
            self.drop_energy(stuck)
        return results

    def _stuck(self, workload: Workload, reading: str) -> MeterReadingError:
        """The error of an energy asked for while the meter counts nothing."""
        return MeterReadingError(
            f"device '{self.device.name}' stopped counting energy: {reading}; the latency of "
            f"{workload.label} is stored; check the meter (hwnas devices check "
            f"{self.device.name}), or measure latency instead",
            reading=reading,
        )

    def drop_energy(self, exc: MeterReadingError) -> None:
        """Say once per profiler that the meter counted no energy and energy is not stored
        (the latency is)."""
        if self.energy_dropped is None:
            self.energy_dropped = exc.reading
            self.say(
                f"warning: device '{self.device.name}': {exc.reading}; energy is not stored "
                "(latency is) while the meter counts nothing (said once)"
            )

    def _count_build(self, results: dict[str, Measurement]) -> None:
        extra = next(iter(results.values())).extra if results else {}
        self.counts.tuned_workloads += int(extra.get("tuned_workloads", 0))
        self.counts.tuning_s += float(extra.get("tuning_s", 0.0))
        self.counts.compile_s += float(extra.get("compile_s", 0.0))


def _say(line: str) -> None:
    """A ``warning:`` line on stderr, whole (:func:`hwnas.text.one_line`)."""
    from hwnas.text import one_line

    print(one_line(line), file=sys.stderr)


def _cpu_times(cpus: set[int]) -> tuple[float, float] | None:
    """(busy, total) jiffies of ``cpus`` since boot, from Linux's ``/proc/stat``; None where it
    cannot be read (another system)."""
    try:
        with open("/proc/stat") as fh:
            lines = [line.split() for line in fh if line.startswith("cpu")]
    except OSError:
        return None
    busy = total = 0.0
    for fields in lines:
        if fields[0][3:].isdigit() and int(fields[0][3:]) in cpus:
            # user nice system idle iowait irq softirq steal (steal: the host took the CPU)
            ticks = [float(v) for v in fields[1:9]]
            total += sum(ticks)
            busy += sum(ticks) - ticks[3] - ticks[4]
    return (busy, total) if total > 0 else None


def machine_busy(sample_s: float = 0.5) -> bool:
    """Whether the CPUs this process may run on are too busy to measure on: where it is
    pinned to some of the machine's CPUs (``taskset``), their busy share over ``sample_s``
    seconds is at least :data:`QUIET_LOAD` (the load average counts the other CPUs too: an
    audit pinned to core 1 of this project's 2-core VM waited 60 s before each of its noisy
    kernels while core 0 ran other work, which did not slow core 1); otherwise the 1-minute
    load average per CPU is. False where neither can be read."""
    cpus = os.cpu_count() or 1
    mine = set(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else set()
    if mine and len(mine) < cpus:
        first = _cpu_times(mine)
        if first is not None:
            time.sleep(sample_s)
            second = _cpu_times(mine)
            if second is not None and second[1] > first[1]:
                return (second[0] - first[0]) / (second[1] - first[1]) >= QUIET_LOAD
    try:
        return os.getloadavg()[0] / cpus >= QUIET_LOAD
    except OSError:  # no load average on this system: wait no longer
        return False


def wait_for_quiet(deadline: float) -> float:
    """Sleep until the CPUs this process runs on are quiet (:func:`machine_busy`) or
    ``deadline`` (``time.monotonic()``) passes; returns the seconds slept."""
    slept = 0.0
    while True:
        left = deadline - time.monotonic()
        busy = machine_busy()
        if not busy or left <= 0:
            return slept
        step = min(WAIT_STEP_S, left)
        time.sleep(step)
        slept += step


@dataclass
class MeasuredModel:
    """One model measured by :func:`measure_models`.

    Attributes:
        label: the model's label (arch string or ONNX path).
        latency: the latency :class:`~hwnas.devices.base.Measurement` (``value`` in ms, the
            median; ``extra["rel_ci"]`` the relative 95% interval of the median).
        energy: the energy measurement (``value`` in mJ per inference) where the device has a
            meter, else None.
        how: "measured" (timed now), "from store" or "recorded" (a device's table), with
            ", FLAGGED" (too noisy: kept, never used by a search) and a missed precision target.
        warning: one line about what the value means, or "" (an ONNX file whose activations
            underflow: :func:`subnormal_warning`).
    """

    label: str
    latency: Measurement
    energy: Measurement | None
    how: str
    warning: str = ""


def subnormal_warning(workload: Workload) -> str:
    """A line saying that ``workload``'s data is largely subnormal floats in a run on
    :mod:`hwnas.onnx_inputs`' inputs (its nodes that read more than
    :data:`~hwnas.predictors.kernels.read.SUBNORMAL_SHARE` of them, of those reading float
    data), or "" (none, or the model cannot be read that way: its measurement stands).

    Untrained weights can make activations underflow; a CPU computes on subnormal floats up
    to 100x slower, so the file measures far slower than the same network trained (a randomly
    initialised Hugging Face MobileViT: 351 ms, against 19 ms for its kernels on normal floats).
    """
    from hwnas.predictors.kernels.read import subnormal_reads

    shape = tuple(workload.input_shape)
    hit = reading = 0
    # one image tells as well as a batch, and a run keeping every tensor of a batch of 64 can
    # take gigabytes; a model whose batch is fixed takes its own
    for first in dict.fromkeys([(1, *shape[1:]), shape]):
        try:
            hit, reading = subnormal_reads(workload.onnx_bytes(), first)
            break
        except HwnasError:
            continue
    if not hit:
        return ""
    return (
        f"{hit} of its {reading} nodes read subnormal floats (activations that underflow: "
        "untrained weights can make them, and so can a Softmax after an additive mask of -100, "
        "as Swin's; a CPU computes on them up to 100x slower): this is the file's latency; "
        "where untrained weights cause it, the trained network can be far faster (hwnas "
        "predict gives its latency with normal activations)"
    )


@dataclass
class MeasuredModels:
    """What :func:`measure_models` returns.

    Attributes:
        models: one :class:`MeasuredModel` per workload, in order.
        counts: the profiler's counts (taken now, reused from the store, read from a table,
            TVM tuning).
        store: the measurement store's path (a PostgreSQL URL without its password), or None
            for a recorded device.
    """

    models: list[MeasuredModel]
    counts: ProfilerCounts
    store: Any


def measure_models(
    device: Device, workloads: list[Workload], store_path: Any = None, reporter: Any = None
) -> MeasuredModels:
    """Measure ``workloads`` on ``device``: latency, and energy where it has a meter, each
    taken once per device, runtime and model and kept in the measurement store (``hwnas
    measure``, :func:`hwnas.measure`).

    Args:
        device: an opened device (:func:`hwnas.devices.get_device`).
        workloads: from :func:`arch_workload` / :func:`onnx_workload`.
        store_path: a SQLite path or PostgreSQL URL (default: ``measurements.db`` in the hwnas
            home); a recorded device's values come from its table instead.
        reporter: a :class:`hwnas.progress.Reporter` shown a "measure" step, one unit per
            model (a TVM tuning or a slow board takes minutes per model); default silent.

    Returns:
        The :class:`MeasuredModels`.

    Raises:
        HwnasError: an unusable store or hwnas home; the device or runtime failed; a batch
            size other than 1 or the device's own on a device whose values are a table's.
    """
    from hwnas.paths import check_writable, default_store_path, hwnas_home
    from hwnas.store import MeasurementStore

    if not device.stored_in_profiler:  # a table's values are at the batch it was measured at
        table_batch = device.value_batch_size
        for w in workloads:
            if w.batch_size not in (1, table_batch):
                raise HwnasError(
                    f"'{device.name}' gives the values of a table, measured at batch "
                    f"{table_batch}: batch size {w.batch_size} cannot be read from it; "
                    "measure a live device at that batch"
                )
    if store_path is None and device.stored_in_profiler:
        check_writable(hwnas_home(), "HWNAS_HOME")  # the default measurements.db
    store = (
        MeasurementStore(store_path or default_store_path()) if device.stored_in_profiler else None
    )
    profiler = Profiler(device, store)
    out: list[MeasuredModel] = []
    try:  # the step says "stopped after" where a model fails, else "done in"
        with (reporter or SILENT).step(f"measure on {device.name}", len(workloads), "models") as s:
            for w in workloads:
                s.update(status=w.label)
                out.append(_measure_one(profiler, w, kept=bool(out)))
                s.advance()
    finally:
        if store is not None:
            store.close()
    return MeasuredModels(out, profiler.counts, store.path if store is not None else None)


def _measure_one(profiler: Profiler, w: Workload, kept: bool) -> MeasuredModel:
    """One model of :func:`measure_models`: its latency (and energy), how it was obtained,
    and its warnings; ``kept``: models before it are measured (said if this one fails)."""
    device = profiler.device
    counts = profiler.counts
    before = (counts.taken, counts.reused, counts.read)
    try:
        m = profiler.measure(w, "latency_ms", allow_flagged=True)
        energy = None
        if "energy_mj" in device.metrics and counts.taken > before[0]:
            # timed now: the energy was read around the same timing and stored with it (or
            # left out, its meter counting nothing); looking it up counted it "from the store"
            energy = profiler.stored(w, "energy_mj")
        elif "energy_mj" in device.metrics:
            try:
                energy = profiler.measure(w, "energy_mj", allow_flagged=True)
            except MeterReadingError as exc:  # a frozen counter: the latency stands
                profiler.drop_energy(exc)
            # a stored latency without an unflagged energy: both were measured again, and
            # the latency shown is the one stored with that energy
            m = profiler.stored(w, "latency_ms") or m
    except CandidateError as exc:  # which of several models, and what was kept
        said = "; the models before it are measured and stored" if kept else ""
        same = type(exc).__init__ is CandidateError.__init__  # keeps NativeCrashError
        raise (type(exc) if same else CandidateError)(f"{w.label}: {exc}{said}") from None
    # one model counts once, by what it cost most: measured, else from the store, else read
    taken, reused, read = (now - then for now, then in zip(
        (counts.taken, counts.reused, counts.read), before))  # fmt: skip
    counts.taken = before[0] + (taken > 0)
    counts.reused = before[1] + (reused > 0 and not taken)
    counts.read = before[2] + (read > 0 and not taken and not reused)
    how = "measured" if taken else "from store"
    if not device.stored_in_profiler:
        how = "recorded"
    if m.flagged:  # and why: the CV, or other processes holding its CPU
        how += f", FLAGGED ({flag_cause(m, device.max_cv, device.max_wait_share)[0]})"
    rel_ci = m.extra.get("rel_ci")
    target = m.extra.get("target_rel_ci")
    if target is not None and (rel_ci is None or rel_ci > target):
        how += f", missed the +-{100 * target:g}% target"
    # a file of the user's, timed here: are its activations what a trained one has?
    warning = subnormal_warning(w) if w.arch is None and device.stored_in_profiler else ""
    if energy is not None and device.stored_in_profiler:  # a meter read in another unit
        from hwnas.devices.recorded import measured_power_warning

        power = measured_power_warning(device, m.value, energy.value)
        warning = "; ".join(x for x in (warning, power) if x)
    return MeasuredModel(w.label, m, energy, how, warning)


def in_given_order(is_onnx: list[bool], onnx_results: list, arch_results: list) -> list:
    """The results of :func:`split_models`' two lists merged back into the order the models
    were given (``is_onnx``: its third value)."""
    onnx_it, arch_it = iter(onnx_results), iter(arch_results)
    return [next(onnx_it) if o else next(arch_it) for o in is_onnx]


def split_models(models: Any) -> tuple[list[str], list[str], list[bool]]:
    """(ONNX paths, arch strings, which of the models given is an ONNX path) of ``models``:
    one or a list of arch strings, indices of a numbered space (``5``),
    :class:`~hwnas.spaces.Arch` objects and ONNX file paths (a ``Path``, or a string ending in
    ``.onnx``); :func:`in_given_order` puts results of the two lists back in the given order.

    Raises:
        HwnasError: no model given, a DataFrame (name its column), or a model of another type
            (one line naming it).
    """
    import numbers

    from hwnas.spaces import Arch

    one = (str, Path, Arch, numbers.Integral)
    if isinstance(models, one) and not isinstance(models, bool):
        models = [models]
    if isinstance(models, (bytes, dict)) or not hasattr(models, "__iter__"):
        raise HwnasError(
            "models must be an arch string, an index, an ONNX file path or a list of them, "
            f"got {type(models).__name__}"
        )
    if hasattr(models, "columns") and hasattr(models, "iloc"):  # iterating gives its names
        raise HwnasError(
            "models is a DataFrame: give one column of it (run.front['arch']), not the table"
        )
    onnx, archs, is_onnx = [], [], []  # any sequence: a list, a tuple, a column of run.front
    for m in models:
        if isinstance(m, bool) or not isinstance(m, one):
            raise HwnasError(
                f"a model must be an arch string, an index or an ONNX file path, got {m!r}"
            )
        is_onnx.append(isinstance(m, Path) or str(m).lower().endswith(".onnx"))
        if is_onnx[-1]:
            onnx.append(str(m))
        else:
            archs.append(str(getattr(m, "text", m)))
    if not onnx and not archs:
        raise HwnasError("nothing to measure or predict: give arch strings or ONNX file paths")
    return onnx, archs, is_onnx


@keyword_terms()
def measure(
    models: Any,
    *,
    device: str,
    space: str | None = None,
    dataset: str | None = None,
    batch_size: int = 1,
    dims: dict[str, int] | None = None,
    runtime: str | None = None,
    store: Any = None,
) -> list[MeasuredModel]:
    """Measure latency (ms; and energy, mJ, where the device has a meter) of ``models`` on
    ``device``: ``hwnas measure`` as a function. Each value is taken once per device, runtime
    and model and kept in the measurement store; a recorded device's values come from its
    table.

    Args:
        models: an arch string of ``space`` (or its index in a numbered space) or an ONNX
            file path (``Path``, or a string ending in ``.onnx``), or a list of them.
        device: device name (``hwnas devices``).
        space: the space of the arch strings (default nasbench201): a name, a path, or a
            space object.
        dataset: the dataset whose network an arch string is (its input size and classes);
            default cifar100, or the space's first dataset where it has no cifar100.
        batch_size: B of the measured input (an ONNX model's dynamic batch axis takes it).
        dims: sizes of ONNX models' other dynamic input axes, by name
            (``{"sequence_length": 128}``; ``hwnas measure --dim``).
        runtime: runtime replacing the device profile's ("ort", "tvm").
        store: measurement store, a SQLite path or a PostgreSQL URL (default: the home's).

    Returns:
        One :class:`MeasuredModel` per model, in order (``.latency.value`` in
        ms, ``.latency.extra["rel_ci"]`` its relative 95% interval, ``.energy``, ``.how``).

    Raises:
        HwnasError: an unknown device, space, dataset or runtime, a malformed arch, an
            unreadable ONNX file, an unreachable device, an unusable store (before any
            measurement).
    """
    from hwnas.devices import get_device
    from hwnas.limits import MAX_BATCH_SIZE, bounded
    from hwnas.paths import path_arg

    path_arg("store", store, "a path or a URL")
    onnx, archs, is_onnx = split_models(models)
    batch_size = bounded("batch_size", batch_size, 1, MAX_BATCH_SIZE, integer=True)
    dev = get_device(device, runtime=runtime)
    dev.require_reachable()
    from hwnas.spaces import searching, user_space

    # a space object (hwnas.elastic's) is found by its name from here on; in this call that
    # name is this object, whatever another thread registers under it meanwhile
    own = user_space(space or "nasbench201") if archs else None
    with searching(own):
        workloads = model_workloads(
            archs, onnx, own.name if own else "nasbench201", dataset, batch_size, dims
        )
        done = measure_models(dev, workloads, store).models  # the arch strings' first
    done = in_given_order(is_onnx, done[len(archs):], done[: len(archs)])
    for r in done:  # hwnas measure's "warning:" lines
        if r.warning:
            warn_caller(f"{r.label}: {r.warning}")
    return done


def model_workloads(
    archs: list[str],
    onnx_paths: list[Any],
    space: str,
    dataset: str | None,
    batch_size: int = 1,
    dims: dict[str, int] | None = None,
) -> list[Workload]:
    """The workloads of arch strings (or indices) of ``space`` built for ``dataset`` (None:
    the space's default, :meth:`~hwnas.spaces.SearchSpace.default_dataset`; read and
    checked first), then of ONNX files, at ``batch_size``, their dynamic axes named in ``dims``
    at its sizes (``hwnas measure``'s models).

    Raises:
        HwnasError: an unknown space or dataset, a malformed arch, an unreadable ONNX file, a
            ``dims`` name no ONNX file has.
    """
    from hwnas.onnx_inputs import check_dims
    from hwnas.spaces import arch_from_text, get_space

    check_dims(onnx_paths, dims or {})
    workloads = []
    if archs:
        sp = get_space(space)
        dataset = dataset or sp.default_dataset()
        sp.dataset(dataset)
        workloads += [arch_workload(sp, arch_from_text(sp, t), dataset, batch_size) for t in archs]
    return workloads + [onnx_workload(path, batch_size, dims) for path in onnx_paths]


class _MeasureModule(types.ModuleType):
    """This module, callable as :func:`measure` (``hwnas.measure(...)``: importing it as a
    module, as the rest of hwnas does, must not take the function's name away)."""

    def __call__(self, *args, **kwargs):
        return measure(*args, **kwargs)


sys.modules[__name__].__class__ = _MeasureModule
# inspect.signature(hwnas.measure) and a notebook's completion show measure's arguments
sys.modules[__name__].__signature__ = inspect.signature(measure)
