"""The adaptive timing protocol: order-statistic interval of the median, stopping rules, flags,
and energy read around the timed loop."""

from __future__ import annotations

import math
import re
import time

import pytest

from hwnas.devices.meters import CounterMeter
from hwnas.errors import HwnasError
from hwnas.runtimes.timing import TimingProtocol, median_ci, summarise, time_callable


def test_median_interval_uses_binomial_order_statistics():
    assert median_ci([1.0, 2.0, 3.0, 4.0, 5.0]) == (-math.inf, math.inf)  # 5 values: none at 95%
    assert median_ci([6.0, 1.0, 5.0, 2.0, 4.0, 3.0]) == (1.0, 6.0)  # n=6: x(1), x(6)
    assert median_ci([float(v) for v in range(10, 0, -1)]) == (2.0, 9.0)  # n=10: x(2), x(9)
    # n=20: P(B<6)=0.0207 <= 0.025 < P(B<7) -> x(6), x(15)
    assert median_ci([float(v) for v in range(1, 21)]) == (6.0, 15.0)


def test_summary_is_median_of_round_medians_with_cv_across_rounds():
    samples = [1.0, 2.0, 3.0, 2.0, 2.0, 9.0, 4.0, 4.0, 4.0]  # round medians 2, 2, 4
    t = summarise(samples, rounds=3)
    assert t.median_ms == 2.0
    mean = 8 / 3
    std = ((2 * (2 - mean) ** 2 + (4 - mean) ** 2) / 3) ** 0.5
    assert t.cv == pytest.approx(std / mean)
    assert t.iqr_ms == pytest.approx(2.0)  # quartiles 2.0 and 4.0


def test_summary_reports_relative_interval_and_flag():
    samples = [10.0] * 5 + [10.2] * 5 + [9.8] * 5 + [10.1] * 5 + [9.9] * 5 + [10.0] * 5
    t = summarise(samples, rounds=6, max_cv=0.05)
    assert t.median_ms == 10.0 and t.rounds == 6 and not t.flagged
    assert t.rel_ci == pytest.approx((10.2 - 9.8) / (2 * 10.0))
    noisy = summarise([1.0] * 5 + [3.0] * 5, rounds=2, max_cv=0.05)
    assert noisy.flagged and noisy.cv == pytest.approx(0.5)


class Clocked:
    """A fake model whose call times are scripted (a real callable timed by the protocol)."""

    def __init__(self, per_round_ms):
        self.per_round_ms = per_round_ms
        self.rounds = 0
        self.calls = 0

    def samples_ms(self, n: int) -> list[float]:
        value = self.per_round_ms(self.rounds)
        self.rounds += 1
        self.calls += n
        return [value] * n


def test_stable_model_stops_at_min_rounds():
    model = Clocked(lambda r: 5.0 + 0.001 * (r % 2))
    p = TimingProtocol(warmup=4, calls_per_round=10, min_rounds=6, max_rounds=12)
    t = time_callable(model, p)
    assert t.rounds == 6 and len(t.samples_ms) == 60 and t.rel_ci < 0.01
    assert model.calls == 4 + 60  # warm-up then six rounds


def test_noisy_model_runs_to_max_rounds_and_is_flagged():
    model = Clocked(lambda r: 5.0 * (1 + 0.3 * (r % 3)))
    p = TimingProtocol(warmup=0, calls_per_round=5, min_rounds=6, max_rounds=9, max_cv=0.05)
    t = time_callable(model, p)
    assert t.rounds == 9 and t.flagged and t.cv > 0.05


def test_time_cap_stops_adding_rounds():
    def slow(_r):
        time.sleep(0.05)
        return 1.0 + 0.2 * (_r % 2)

    p = TimingProtocol(warmup=0, calls_per_round=1, min_rounds=6, max_rounds=50, max_seconds=0.12)
    t = time_callable(Clocked(slow), p)
    assert 2 <= t.rounds < 6


def test_fixed_rounds_keep_old_profiles_working():
    calls = []
    t = time_callable(
        lambda: calls.append(1), TimingProtocol(warmup=4, rounds=2, calls_per_round=3)
    )
    assert len(calls) == 10 and len(t.samples_ms) == 6 and t.rounds == 2
    with pytest.raises(HwnasError, match="min_rounds"):
        TimingProtocol(min_rounds=5, max_rounds=2)


def constant_power(watts: float) -> CounterMeter:
    """A fake energy counter of ``watts`` (W), read from the clock: mJ since it was made."""
    t0 = time.perf_counter()
    return CounterMeter("fake", lambda: (time.perf_counter() - t0) * watts * 1e3, min_window_s=0)


def busy(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def test_energy_is_the_windows_mean_power_times_the_median_latency():
    """Energy per call was the window's energy over its calls: it followed the mean wall time
    per call, time the process was descheduled included, while the latency is a median. A
    callable descheduled on every 5th call (a 20 ms sleep) under a constant 10 W counter read
    about 9x the power (energy / latency 90 W); the audit's stored values read 8.8-63.5 W."""
    calls = []

    def run():
        calls.append(1)
        busy(0.5)
        if len(calls) % 5 == 0:
            time.sleep(0.02)  # descheduled: the round's median does not see it

    meter = constant_power(10.0)
    meter.min_window_s = 0.3
    t = time_callable(run, TimingProtocol(warmup=2, rounds=3, calls_per_round=5), meter)
    assert t.energy_mj / t.median_ms == pytest.approx(10.0, rel=0.05)
    assert t.power_w == pytest.approx(10.0, rel=0.05)
    assert t.window_s >= 0.3 > t.seconds  # extended with untimed calls, not timed ones
    assert t.window_calls > 15


def test_a_device_timers_energy_is_its_power_times_the_time_it_reports():
    """TVM's time_evaluator runs one untimed call before those it times, and times them on
    the device: the window's mean power times the device's median time is the energy of one
    inference, whatever the untimed calls and the host's overhead add to the window."""

    class Evaluator:  # like TvmExecutable: times n calls, runs n + 1
        untimed_calls = 1

        def samples_ms(self, n):
            busy(2.0 * (n + 1) + 1.0)  # n + 1 inferences and the host's overhead
            return [2.0] * n

    meter = constant_power(5.0)
    t = time_callable(Evaluator(), TimingProtocol(warmup=2, rounds=3, calls_per_round=1), meter)
    assert t.median_ms == 2.0 and t.energy_mj == pytest.approx(10.0, rel=0.05)
    assert t.window_calls == 6  # three rounds of one timed and one untimed call


@pytest.mark.parametrize("reading", [0.0, -3.0, math.nan])
def test_a_meter_that_counts_no_energy_gives_none_and_says_why_the_timing_stands(reading):
    """A counter that does not move (0 mJ), runs backwards or reads NaN: `hwnas measure`
    printed 0.0000 mJ or -1.2 mJ (exit 0) and a search optimised on it; then the error threw
    the latency timed with it away (a frozen RAPL stopped every latency search)."""
    values = iter([10.0, 10.0 + reading])
    meter = CounterMeter("fake", lambda: next(values), min_window_s=0.0)
    t = time_callable(lambda: None, TimingProtocol(warmup=1, rounds=2, calls_per_round=3), meter)
    assert t.energy_mj is None and t.power_w is None and t.median_ms > 0
    assert re.match(r"energy meter fake read .* mJ over .*no energy", t.meter_error)
    assert constant_power(5.0).probe(0.01) is None
    frozen = CounterMeter("frozen", lambda: 10.0)
    assert "frozen counted 0 mJ over 0.01 s of busy work" in frozen.probe(0.01)
