"""The timing protocol's statistics."""

import pytest

from hwnas.runtimes.timing import TimingProtocol, summarise, time_callable


def test_summary_is_median_of_round_medians_with_cv_across_rounds():
    samples = [1.0, 2.0, 3.0, 2.0, 2.0, 9.0, 4.0, 4.0, 4.0]  # round medians 2, 2, 4
    t = summarise(samples, rounds=3)
    assert t.median_ms == 2.0
    mean = 8 / 3
    std = ((2 * (2 - mean) ** 2 + (4 - mean) ** 2) / 3) ** 0.5
    assert t.cv == pytest.approx(std / mean)
    assert t.iqr_ms == pytest.approx(2.0)  # quartiles 2.0 and 4.0


def test_time_callable_counts_calls():
    calls = []
    t = time_callable(
        lambda: calls.append(1), TimingProtocol(warmup=4, rounds=2, calls_per_round=3)
    )
    assert len(calls) == 10 and len(t.samples_ms) == 6
