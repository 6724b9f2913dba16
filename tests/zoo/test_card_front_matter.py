"""A zoo entry's Hugging Face front matter lists only what the file itself scores."""

from __future__ import annotations

import json

import yaml
from helpers import hwnas_main


def _front(readme):
    return yaml.safe_load(readme.read_text().split("---\n")[1])


def test_random_weights_list_their_latency_and_no_accuracy_in_the_model_index(tmp_path):
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pixel3", "--budget", "12", "--out", str(out))
    assert r.returncode == 0, r.stderr
    entries = sorted(p.parent for p in (out / "zoo").glob("*/card.json"))
    assert entries
    # the run folder given for its zoo (it said the run "put no model in its zoo")
    r = hwnas_main("zoo", "verify", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(entries)} of {len(entries)} entries verified" in r.stdout
    for entry in entries:
        card = json.loads((entry / "card.json").read_text())
        assert card["weights"]["kind"] == "random"
        front = _front(entry / "README.md")
        results = front["model-index"][0]["results"]
        # the benchmark's 200-epoch accuracy is not this untrained file's
        assert [r["metrics"][0]["type"] for r in results] == ["latency_ms"]
        latency = card["devices"]["pixel3"]["latency_ms"]["value"]
        assert abs(results[0]["metrics"][0]["value"] - latency) < 1e-3
        assert front["metrics"] == ["latency_ms"] and front["datasets"] == []
        assert "weights:random" in front["tags"]
        # the body still gives the benchmark's figure, labelled as the benchmark's
        body = (entry / "README.md").read_text().split("---\n", 2)[2]
        assert f"{card['accuracy']['value']:.2f}" in body and card["accuracy"]["source"] in body
