"""The timing protocol shared by every runtime: warm-up, then adaptive rounds of timed calls.

Follows what gave stable numbers on small shared VMs (see TOOLCHAIN.md): warm-up calls, then
rounds of timed calls; the reported latency is the median of the round medians, and its
coefficient of variation (CV) is taken across round medians. Rounds are added until the 95%
confidence interval of the median of round medians is narrower than a target (relative
half-width), or a round or time cap is hit. The interval is the distribution-free one from order
statistics (J.-Y. Le Boudec, *Performance Evaluation of Computer and Communication Systems*,
EPFL Press 2010, Theorem 2.1), so no normality is assumed; it needs at least 6 rounds.

A measurement whose CV exceeds ``max_cv``, or (a model run on this machine) whose threads
waited for CPUs other processes held more than ``max_wait_share`` of the time they ran, is
*flagged*: it is stored with its samples, but :class:`hwnas.measure.Profiler` never hands it to
a search silently.

The HW-NAS-Bench-360 protocol (10 warm-up, 40 timed runs, median; ANCHORS.md section 5) is
``TimingProtocol(warmup=10, rounds=1, calls_per_round=40)``.

Energy. An energy meter is read once, around every timed round (extended with untimed calls
to the meter's ``min_window_s``): it gives the window's *mean power*, and the energy of one
inference is that power times the latency stored with it (the median of round medians), so
energy / latency is the window's mean power whatever the process went through. Dividing the
window's energy by its calls made the energy follow the window's *mean* wall time per call,
time the process was descheduled included, while the latency is a median: under a constant
10 W counter, energy / latency read 8.8 to 63.5 W. The meter is not read per round: a round
of 30 calls lasts milliseconds, far shorter than a counter's accurate window (RAPL, NVML:
1 s) or a sampled power's period (100 ms), and a device timer runs a whole round in one call;
so one energy value has one reading and no spread of its own (its CV is unknown, see
:class:`Timing`).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

CONFIDENCE = 0.95
"""Confidence level of the interval on the median."""


class EnergyMeter(Protocol):
    """What :func:`time_callable` needs from an energy meter (see :mod:`hwnas.devices.meters`)."""

    name: str
    min_window_s: float

    def start(self) -> None: ...

    def stop(self) -> float: ...


@dataclass(frozen=True)
class TimingProtocol:
    """How to time one model.

    Attributes:
        warmup: untimed calls before timing.
        calls_per_round: timed calls per round.
        min_rounds: rounds always taken (6 is the least for a 95% interval on the median).
        max_rounds: rounds at most.
        rounds: a fixed number of rounds (sets ``min_rounds = max_rounds``; older profiles).
        target_rel_ci: stop once the 95% interval's half-width is below this fraction of the
            median (0.01 = +-1%).
        max_seconds: stop adding rounds after this much timed time (s), once 2 rounds exist.
        max_cv: flag the measurement when the CV of round medians exceeds this (0.05 = 5%).
        threads: intra-op threads the runtime may use.
        quiet_wait_s: how long, in seconds, a flagged measurement may wait in all for a
            quieter moment before it is measured again (:class:`hwnas.measure.Profiler`).
        max_wait_share: flag the measurement of a model run on this machine when, in the
            median round, its threads waited for a CPU held by other processes more than this
            share of the time they ran (0.1: others took about a tenth of the CPU, and the
            latency reads about a tenth high). A steady co-tenant on the same core slows
            every round alike, which the CV cannot see (an audit stored 3.4x values at a CV of
            1.2%).

    The default costs 30 + 6..12 x 30 calls (210-390 calls): about 330 x latency per model
    on a shared 2-core VM, fewer on a quiet machine.
    """

    warmup: int = 30
    calls_per_round: int = 30
    min_rounds: int = 6
    max_rounds: int = 12
    rounds: int | None = None
    target_rel_ci: float = 0.01
    max_seconds: float = 30.0
    max_cv: float = 0.05
    threads: int = 1
    quiet_wait_s: float = 60.0
    max_wait_share: float = 0.1

    def __post_init__(self) -> None:
        if self.rounds is not None:
            object.__setattr__(self, "min_rounds", int(self.rounds))
            object.__setattr__(self, "max_rounds", int(self.rounds))
        if self.min_rounds < 1 or self.max_rounds < self.min_rounds or self.calls_per_round < 1:
            from hwnas.errors import HwnasError

            raise HwnasError(
                f"bad timing protocol: need 1 <= min_rounds ({self.min_rounds}) <= max_rounds "
                f"({self.max_rounds}) and calls_per_round ({self.calls_per_round}) >= 1"
            )


@dataclass(frozen=True)
class Timing:
    """Result of timing a model.

    Attributes:
        samples_ms: every timed call, in ms, in call order (rounds x calls_per_round).
        median_ms: median of the round medians, in ms.
        cv: std / mean of the round medians (0 for a single round).
        iqr_ms: interquartile range of all samples, in ms.
        rounds: rounds taken.
        rel_ci: half-width of the 95% interval on ``median_ms`` divided by it (inf with fewer
            than 6 rounds).
        flagged: the CV exceeded the protocol's ``max_cv``, or ``wait_share`` its
            ``max_wait_share``.
        seconds: wall time of the timed rounds (s), warm-up excluded.
        energy_mj: energy per inference in mJ, when a meter was given and counted energy:
            ``power_w`` times ``median_ms`` (one meter reading: it has no CV of its own).
        wait_share: in the median round, the time this process's threads waited for a CPU
            (runnable, another process running) over the time they ran; None where it was
            not read (a model timed elsewhere, a system without Linux's schedstat).
        power_w: the meter's mean power over its window (W), or None.
        window_s: the meter's window (s): the timed rounds, extended with untimed calls to
            its ``min_window_s``; 0 without a meter.
        window_calls: inferences run in the meter's window, timed or not.
        meter_error: one line where the meter counted no energy (zero, negative, not a
            number: a counter that does not move); ``energy_mj`` is None then.
    """

    samples_ms: tuple[float, ...]
    median_ms: float
    cv: float
    iqr_ms: float
    rounds: int = 1
    rel_ci: float = math.inf
    flagged: bool = False
    seconds: float = 0.0
    energy_mj: float | None = None
    wait_share: float | None = None
    power_w: float | None = None
    window_s: float = 0.0
    window_calls: int = 0
    meter_error: str | None = None


def cpu_wait_ns() -> tuple[int, int, int] | None:
    """(ran, waited, slices): nanoseconds this process's threads have run on a CPU and waited
    for one while runnable (another task held it), and the times they were put on a CPU, since
    each thread started; Linux's ``/proc/self/task/*/schedstat``. None where it cannot be read
    or counts nothing (another system, a kernel without scheduler statistics)."""
    ran = waited = slices = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as fh:
                fields = fh.read().split()
            ran, waited, slices = (
                ran + int(fields[0]),
                waited + int(fields[1]),
                slices + int(fields[2]),
            )
        except (OSError, ValueError, IndexError):  # a thread that ended meanwhile
            continue
    return (ran, waited, slices) if ran > 0 else None


def round_wait_share(
    before: tuple[int, int, int], after: tuple[int, int, int], calls: int
) -> float:
    """How much longer than its own run time a round of ``calls`` timed calls took, as its
    median call saw it: the round's wait for a CPU over its run time when at least half of its
    calls can have been interrupted (the times it was put back on a CPU, at least ``calls``/2),
    else 0 (short calls between the interruptions: the round's median call ran undisturbed)."""
    ran, waited, slices = (a - b for a, b in zip(after, before))
    if ran <= 0 or 2 * slices < calls:
        return 0.0
    return waited / ran


def median_ci(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free confidence interval of the median of ``values`` (order statistics).

    Returns:
        (low, high); (-inf, inf) when there are too few values for ``confidence`` (fewer
        than 6 at 95%).
    """
    n = len(values)
    alpha = 1.0 - confidence
    # largest j with P(Binomial(n, 1/2) < j) <= alpha / 2; the interval is [x_(j), x_(n+1-j)]
    j, cdf = 0, 0.0
    while j < n:
        nxt = cdf + math.comb(n, j) / 2**n
        if nxt > alpha / 2:
            break
        cdf, j = nxt, j + 1
    if j == 0:
        return -math.inf, math.inf
    ordered = sorted(values)
    return ordered[j - 1], ordered[n - j]


def summarise(samples_ms: list[float], rounds: int, max_cv: float = math.inf) -> Timing:
    """Median of round medians, its CV and 95% interval, and the IQR of ``samples_ms`` split
    into ``rounds`` equal rounds."""
    per = max(1, len(samples_ms) // rounds)
    medians = [statistics.median(samples_ms[r * per : (r + 1) * per]) for r in range(rounds)]
    mean = statistics.fmean(medians)
    cv = statistics.pstdev(medians) / mean if len(medians) > 1 and mean > 0 else 0.0
    q = statistics.quantiles(samples_ms, n=4) if len(samples_ms) >= 4 else [0.0, 0.0, 0.0]
    median = statistics.median(medians)
    low, high = median_ci(medians)
    rel_ci = (high - low) / (2 * median) if median > 0 and math.isfinite(high - low) else math.inf
    return Timing(tuple(samples_ms), median, cv, q[2] - q[0], rounds, rel_ci, bool(cv > max_cv))


def perf_counter_samples(run: Callable[[], object], n: int) -> list[float]:
    """Call ``run`` ``n`` times and return the time of each call, in ms (host clock)."""
    clock = time.perf_counter_ns
    out = []
    for _ in range(n):
        t0 = clock()
        run()
        out.append((clock() - t0) / 1e6)
    return out


def time_callable(
    run: Callable[[], object],
    protocol: TimingProtocol,
    meter: EnergyMeter | None = None,
    here: bool = False,
) -> Timing:
    """Time ``run`` (one inference per call) under ``protocol``.

    If ``run`` has a ``samples_ms(n)`` method (a runtime's executable that times itself on
    the device, like TVM's ``time_evaluator``), rounds use it; otherwise each call is timed
    with ``time.perf_counter_ns``.

    Args:
        run: one inference per call.
        protocol: warm-up, rounds and stopping rule.
        meter: energy meter read around the timed rounds; if they are shorter than the
            meter's ``min_window_s``, extra untimed calls run inside the window. The energy
            per inference is the window's mean power times the median latency (see the
            module docstring).
        here: ``run`` runs on this machine's CPUs: each round's wait for a CPU held by other
            processes is read (:func:`cpu_wait_ns`), and a median round share above the
            protocol's ``max_wait_share`` flags the timing.

    Returns:
        The :class:`Timing`, all values in milliseconds (energy in mJ per inference: the
        meter's mean power over its window times ``median_ms``; where the meter counted no
        energy, none, and ``meter_error`` says so: the timing stands).

    Raises:
        DeviceUnavailableError: the meter cannot be read.
    """
    timed = getattr(run, "samples_ms", None) or (lambda n: perf_counter_samples(run, n))
    untimed = int(getattr(run, "untimed_calls", 0))
    calls = 0  # every inference in the meter's window, timed or not

    def sample(n: int) -> list[float]:
        nonlocal calls
        got = timed(n)
        calls += len(got) + untimed
        return got

    if protocol.warmup:
        sample(protocol.warmup)
    samples: list[float] = []
    shares: list[float] = []  # per round: waited for a CPU / ran
    rounds = 0
    calls = 0
    if meter is not None:
        meter.start()
    t0 = time.perf_counter()
    while True:
        before = cpu_wait_ns() if here else None
        samples.extend(sample(protocol.calls_per_round))
        after = cpu_wait_ns() if before is not None else None
        if before is not None and after is not None:
            shares.append(round_wait_share(before, after, protocol.calls_per_round))
        rounds += 1
        elapsed = time.perf_counter() - t0
        if rounds >= protocol.max_rounds:
            break
        if rounds >= protocol.min_rounds:
            if summarise(samples, rounds).rel_ci <= protocol.target_rel_ci:
                break
        if elapsed >= protocol.max_seconds and rounds >= min(2, protocol.min_rounds):
            break
    seconds = time.perf_counter() - t0
    power = energy = error = None
    window_s = 0.0
    t = summarise(samples, rounds, protocol.max_cv)
    if meter is not None:
        while time.perf_counter() - t0 < meter.min_window_s:
            sample(protocol.calls_per_round)
        window_s = time.perf_counter() - t0
        spent = meter.stop()
        if math.isfinite(spent) and spent > 0:
            power = spent / window_s / 1e3  # mJ / s = mW
            energy = power * t.median_ms  # W x ms = mJ
        else:
            error = (
                f"energy meter {meter.name} read {spent:g} mJ over {window_s:.2f} s of "
                f"{calls} inferences: no energy was counted (a counter that does not move, "
                "runs backwards or wrapped without its range)"
            )
    wait = statistics.median(shares) if shares else None
    flagged = t.flagged or (wait is not None and wait > protocol.max_wait_share)
    return Timing(
        t.samples_ms, t.median_ms, t.cv, t.iqr_ms, rounds, t.rel_ci, flagged, seconds, energy,
        wait, power, window_s, calls if meter is not None else 0, error,
    )  # fmt: skip


def patient(protocol: TimingProtocol, factor: int = 2) -> TimingProtocol:
    """``protocol`` with ``factor`` times the rounds and timed seconds: a measurement taken
    again after it was flagged gets more round medians, so a burst of load in a few rounds
    weighs less in its median."""
    import dataclasses

    return dataclasses.replace(
        protocol,
        rounds=None,
        min_rounds=protocol.min_rounds,
        max_rounds=protocol.max_rounds * factor,
        max_seconds=protocol.max_seconds * factor,
    )
