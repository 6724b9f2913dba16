"""Zoo cards of a search scored by the user's accuracy function on a user's space file say what
their accuracy is: the function's value, named, of the network it was handed. They called it
a benchmark table's test accuracy of the architecture trained with its recipe, the devices'
values the benchmark's network's, the resize the benchmark's, the licence a NOTICE entry, and
`hwnas train` printed the function's value as `benchmark X% on mnist`."""

from __future__ import annotations

import json

from helpers import hwnas_main

SPACE = """\
name: fn_cards
datasets: {mnist: {classes: 10, input_shape: [1, 28, 28]}}
stem: [{block: conv, out: 8, kernel: 3, stride: 2}]
stages:
  - out: {choices: [8, 16]}
    stride: 2
    depth: {choices: [1, 2]}
    layer: {block: mbconv, kernel: {choices: [3, 5, 7]}, expand: 3}
head: [{block: pool}]
"""

ACCURACY = """\
def accuracy(model, arch):
    return 40.0 + sum(p.numel() for p in model.parameters()) / 1000.0
"""


def test_a_function_searchs_cards_name_the_function_and_no_benchmark(tmp_path):
    (tmp_path / "fn_cards.yaml").write_text(SPACE)
    (tmp_path / "acc.py").write_text(ACCURACY)
    r = hwnas_main(
        "search", "--space", "fn_cards.yaml", "--device", "cpu-fast", "--budget", "4",
        "--accuracy", "acc.py:accuracy", "--out", "run", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    entries = sorted((tmp_path / "run" / "zoo").iterdir())
    assert entries
    for entry in entries:
        card = json.loads((entry / "card.json").read_text())
        acc = card["accuracy"]
        assert acc["kind"] == "function" and "split" not in acc, acc
        assert acc["source"].startswith("function:acc.py:accuracy"), acc
        assert "accuracy function" in card["weights"]["note"], card["weights"]
        said = json.dumps({k: v for k, v in card.items() if k != "benchmark_dataset"})
        for word in ("benchmark", "recipe", "NOTICE", "official"):
            assert word not in said, (word, said)
        assert "(test)" not in (entry / "README.md").read_text()
    r = hwnas_main("zoo", "verify", "run/zoo", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    r = hwnas_main(
        "train", entries[0], "--space", "fn_cards.yaml", "--data", "digits", "--epochs", "1",
        "--limit", "100", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "the search's accuracy function gave" in r.stdout and "benchmark" not in r.stdout
    card = json.loads((entries[0] / "card.json").read_text())
    assert card["table_accuracy"]["kind"] == "function"
    assert "benchmark" not in card["table_accuracy"]["source"]
    assert "NOTICE" not in card["license_note"]
