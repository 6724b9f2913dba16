"""The timing protocol shared by every runtime.

Follows what gave stable numbers on small shared VMs (see TOOLCHAIN.md): warm-up calls, then
rounds of timed calls; the reported latency is the median of the round medians, and its
coefficient of variation (CV) is taken across round medians. The HW-NAS-Bench-360 protocol
(10 warm-up, 40 timed runs, median) is the special case of one round of 40.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TimingProtocol:
    """How to time one model.

    Attributes:
        warmup: untimed calls before timing.
        rounds: number of rounds.
        calls_per_round: timed calls per round.
        threads: intra-op threads the runtime may use.
    """

    warmup: int = 30
    rounds: int = 10
    calls_per_round: int = 30
    threads: int = 1


@dataclass(frozen=True)
class Timing:
    """Result of timing a model.

    Attributes:
        samples_ms: every timed call, in ms, in call order (rounds x calls_per_round).
        median_ms: median of the round medians, in ms.
        cv: std / mean of the round medians (0 for a single round).
        iqr_ms: interquartile range of all samples, in ms.
    """

    samples_ms: tuple[float, ...]
    median_ms: float
    cv: float
    iqr_ms: float


def summarise(samples_ms: list[float], rounds: int) -> Timing:
    """Median of round medians, its CV, and the IQR of ``samples_ms`` split into ``rounds``."""
    per = max(1, len(samples_ms) // rounds)
    medians = [statistics.median(samples_ms[r * per : (r + 1) * per]) for r in range(rounds)]
    mean = statistics.fmean(medians)
    cv = statistics.pstdev(medians) / mean if len(medians) > 1 and mean > 0 else 0.0
    q = statistics.quantiles(samples_ms, n=4) if len(samples_ms) >= 4 else [0.0, 0.0, 0.0]
    return Timing(tuple(samples_ms), statistics.median(medians), cv, q[2] - q[0])


def time_callable(run: Callable[[], object], protocol: TimingProtocol) -> Timing:
    """Time ``run`` (one inference per call) under ``protocol``.

    Returns:
        The :class:`Timing`, all values in milliseconds.
    """
    for _ in range(protocol.warmup):
        run()
    samples: list[float] = []
    clock = time.perf_counter_ns
    for _ in range(protocol.rounds):
        for _ in range(protocol.calls_per_round):
            t0 = clock()
            run()
            samples.append((clock() - t0) / 1e6)
    return summarise(samples, protocol.rounds)
