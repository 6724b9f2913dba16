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


def test_a_supernet_entry_claims_no_latency_of_the_benchmarks_network(tmp_path):
    """A supernet search's entry (a proxy trained at the supernet's size) had the recorded
    table's latency of the benchmark's network in its README title (`for pixel3 (1.4 ms,
    41.5%)`) and model-index, while its own devices_note says that value is not of this file.
    Title and model-index now hold only this file's values; the body keeps the table's,
    labelled as another network's."""
    from hwnas.zoo.card import render_readme

    out = tmp_path / "run"
    r = hwnas_main("search", "--strategy", "darts", "--device", "pixel3", "--data", "digits",
                   "--epochs", "1", "--finetune-epochs", "0", "--batch-size", "32",
                   "--set", "limit=100", "--set", "channels=4", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    (entry,) = sorted((out / "zoo").iterdir())
    card = json.loads((entry / "card.json").read_text())
    table = card["devices"]["pixel3"]["latency_ms"]
    assert table["source"].startswith("recorded:") and card["build"]["kind"] == "supernet"
    readme = (entry / "README.md").read_text()
    title = next(line for line in readme.splitlines() if line.startswith("# "))
    assert " ms" not in title and f"{table['value']:.3g}" not in title, title
    front = _front(entry / "README.md")
    results = front["model-index"][0]["results"]
    assert [x["metrics"][0]["type"] for x in results] == ["accuracy"]
    assert front["metrics"] == ["accuracy"]
    assert f"| pixel3 | latency_ms | {table['value']:.4g} ms | {table['source']} (another " in (
        readme
    )
    # a live device's measurement of this file (the trained proxy's own) is its to claim
    own = {"value": 0.0421, "source": "measured:cpu:ort:trained-subnet[1, 3, 16, 16]"}
    card["devices"]["pixel3"]["latency_ms"] = {**table, "trained_subnet": own}
    readme = render_readme(card)
    assert f"# nasbench201 model {entry.name} for pixel3 (0.0421 ms, " in readme
    front = yaml.safe_load(readme.split("---\n")[1])
    (latency,) = [x for x in front["model-index"][0]["results"] if x["task"].get("name")]
    assert latency["metrics"][0]["value"] == 0.0421
    assert latency["source"]["name"] == own["source"]
    assert "| pixel3 | latency_ms (this file) | 0.0421 ms | measured:cpu:ort:trained-subnet" in (
        readme
    )
