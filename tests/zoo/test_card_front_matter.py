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


def test_an_energy_card_names_mj_and_a_batch_tables_latency_is_per_batch(tmp_path):
    """The model index named an energy result "(mj)"; the card listed a GPU table's latency of
    a batch of 256 beside batch-1 ones as if per input (helper-48: 31 ms on 1080ti_256 beside
    14.6 ms on 1080ti_1)."""
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pi5_onnx", "--objective", "energy", "--budget", "6",
                   "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    entry = sorted(p.parent for p in (out / "zoo").glob("*/card.json"))[0]
    results = _front(entry / "README.md")["model-index"][0]["results"]
    names = [m["name"] for x in results for m in x["metrics"]]
    assert "energy on pi5_onnx (mJ)" in names, names
    r = hwnas_main("search", "--device", "pixel3", "--budget", "6", "--out", str(tmp_path / "p"))
    assert r.returncode == 0, r.stderr
    entry = sorted(p.parent for p in (tmp_path / "p" / "zoo").glob("*/card.json"))[0]
    devices = json.loads((entry / "card.json").read_text())["devices"]
    assert devices["1080ti_256"]["latency_ms"]["batch_size"] == 256
    assert "batch_size" not in devices["1080ti_1"]["latency_ms"]
    value = devices["1080ti_256"]["latency_ms"]["value"]
    assert (
        f"| 1080ti_256 | latency_ms | {value:.4g} ms per batch of 256 |"
        in (entry / "README.md").read_text()
    )
    r = hwnas_main("zoo", "show", str(entry))
    assert r.returncode == 0 and "ms per batch of 256 on 1080ti_256" in r.stdout, r.stdout
