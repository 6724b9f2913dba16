"""``hwnas.measure(...)`` and ``hwnas.predict(...)``: ``hwnas measure`` / ``hwnas predict`` as
functions (issue 22): the same store, the same values, the same one-line errors."""

from __future__ import annotations

import pytest
from helpers import hwnas_cli

import hwnas

ARCH = (
    "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|"
    "nor_conv_3x3~2|"
)


def test_measure_from_python_shares_the_clis_store():
    first = hwnas.measure(ARCH, device="cpu-fast")
    assert [m.label for m in first] == [ARCH] and first[0].how.startswith("measured")
    assert first[0].latency.value > 0 and first[0].latency.source.startswith("measured:cpu-fast")
    assert hwnas.measure([ARCH], device="cpu-fast")[0].how.startswith("from store")
    cli = hwnas_cli("measure", "--device", "cpu-fast", "--arch", ARCH)
    assert cli.returncode == 0, cli.stderr
    assert "0 measured, 1 from the store" in cli.stdout
    assert f"{first[0].latency.value:.4f}" in cli.stdout


def test_predict_from_python_gives_the_clis_prediction():
    (p,) = hwnas.predict([ARCH], device="pixel3")
    assert p.metric == "latency_ms" and p.value > 0 and p.std > 0
    cli = hwnas_cli("predict", "--device", "pixel3", "--arch", ARCH)
    assert cli.returncode == 0, cli.stderr
    assert f"{ARCH}: {p.value:.4g} ms (std {p.std:.2g} ms)" in cli.stdout


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: hwnas.predict([ARCH]), "give the device's measurements"),
        (lambda: hwnas.measure("|bogus~0|", device="cpu-fast"), "malformed NAS-Bench-201 arch"),
        (lambda: hwnas.measure([], device="cpu-fast"), "nothing to measure or predict"),
        (lambda: hwnas.measure(ARCH, device="nodevice"), "unknown device 'nodevice'"),
    ],
)
def test_bad_input_raises_one_line(call, message):
    with pytest.raises(hwnas.HwnasError) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)
