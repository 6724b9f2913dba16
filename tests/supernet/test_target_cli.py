"""Target mode as a user types it: the derived cell's recorded latency lands on the target."""

from __future__ import annotations

import json

import pytest
from helpers import hwnas_main

from hwnas.devices import get_device
from hwnas.spaces import get_space

pytestmark = pytest.mark.slow


def test_gdas_target_mode_lands_on_the_recorded_latency(tmp_path, hwnas_home):
    out = tmp_path / "run"
    r = hwnas_main(
        "search",
        "--strategy",
        "gdas",
        "--device",
        "pixel3",
        "--data",
        "digits",
        "--epochs",
        "1",
        "--finetune-epochs",
        "0",
        "--latency-target",
        "12",
        "--set",
        "limit=200",
        "--set",
        "channels=4",
        "--set",
        "partial_channels=2",
        "--no-zoo",
        "--out",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    best = summary["best"]
    space = get_space("nasbench201")
    recorded = float(
        get_device("pixel3").column("nasbench201", "latency_ms")[
            space.index(space.parse(best["arch"]))
        ]
    )
    assert best["latency_ms_source"].startswith("recorded:")
    assert best["latency_ms"] == pytest.approx(recorded)
    assert abs(recorded / 12 - 1) <= 0.05  # the default target_tolerance
    derivation = summary["strategy"]["derivation"]
    assert derivation["cost_is_exact"] and derivation["method"] == "exhaustive"
    assert derivation["cost"] == pytest.approx(recorded)
    assert summary["strategy"]["preset"] == "paper" and summary["strategy"]["arch_lr"] == 3e-4
    assert summary["supernet"]["config"]["partial_channels"] == 2
