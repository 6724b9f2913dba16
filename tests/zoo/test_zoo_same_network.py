"""A zoo card's params and MACs are of the exported file, and entries that ship the same
network (identical ONNX graphs) say so: a NAS-Bench-201 cell whose extra operations compute
results no edge takes to the output exports to the graph of the cell without them."""

from __future__ import annotations

import json
import math

import onnx
from helpers import hwnas_main

from hwnas.spaces import get_space
from hwnas.zoo.entry import write_entry
from hwnas.zoo.write import random_entry

PLAIN = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"
# node 1 (a 1x1 convolution) and node 2 reach no edge to the output node: its value is node 0's
DEAD = "|nor_conv_1x1~0|+|skip_connect~0|avg_pool_3x3~1|+|skip_connect~0|none~1|none~2|"


def _weights(graph) -> int:
    """The elements of the float32 initializers of an ONNX graph."""
    float32 = onnx.TensorProto.FLOAT
    return sum(math.prod(t.dims) for t in graph.graph.initializer if t.data_type == float32)


def _zoo(tmp_path):
    space = get_space("nasbench201")
    zoo = tmp_path / "zoo"
    accuracy = {"value": 50.0, "source": "t", "split": "test", "kind": "benchmark table"}
    found = {"study": None, "trial": None, "device": None}
    for name, arch in (("01-plain", PLAIN), ("02-dead", DEAD)):
        model, card = random_entry(space, space.parse(arch), "cifar100", name, accuracy, {}, found)
        write_entry(zoo / name, model, card)
    return zoo


def test_params_and_macs_are_the_files_and_the_same_network_is_flagged(tmp_path):
    """The audit's table run: entry 02 (DEAD) said 107,156 params and 11.72 M MACs, 01 (PLAIN)
    79,156 and 7.79 M; both model.onnx files are the same graph of 7.79 M MACs."""
    zoo = _zoo(tmp_path)
    cards = {}
    for name in ("01-plain", "02-dead"):
        card = json.loads((zoo / name / "card.json").read_text())
        graph = onnx.load(str(zoo / name / "model.onnx"))
        assert card["params"] == _weights(graph) == 78788, name
        assert card["flops"] == 7788800, name  # the 1x1 convolution of node 1 is not in it
        assert "model.onnx holds" in card["params_convention"]
        cards[name] = card
    from hwnas.zoo.write import mark_same_networks

    assert cards["01-plain"]["graph_signature"] == cards["02-dead"]["graph_signature"]
    assert mark_same_networks(zoo) == [["01-plain", "02-dead"]]
    for name, other in (("01-plain", "02-dead"), ("02-dead", "01-plain")):
        card = json.loads((zoo / name / "card.json").read_text())
        assert card["same_network"]["entries"] == [other]
        readme = (zoo / name / "README.md").read_text()
        assert f"**Same network:** model.onnx computes the same network as entry {other}" in (
            readme
        )
    assert mark_same_networks(zoo) == [["01-plain", "02-dead"]]  # nothing rewritten again
    r = hwnas_main("zoo", "list", zoo)
    assert r.returncode == 0 and "same network: 01-plain = 02-dead" in r.stdout, r.stdout
    r = hwnas_main("zoo", "list", zoo, "--json")
    assert [e["same_network"] for e in json.loads(r.stdout)["entries"]] == [
        ["02-dead"], ["01-plain"]
    ]  # fmt: skip
    r = hwnas_main("zoo", "show", zoo / "02-dead")
    assert "same      network as 01-plain" in r.stdout
    r = hwnas_main("zoo", "verify", zoo)
    assert r.returncode == 0, r.stdout
    assert "params, graph" in r.stdout


def test_a_card_counting_weights_the_file_lacks_fails_verify(tmp_path):
    """The count PyTorch gave (dead branches included) made consistent with the entry."""
    from test_zoo_verify_records import _claim

    zoo = _zoo(tmp_path)
    _claim(zoo / "02-dead", lambda c: c.update(params=107156))
    r = hwnas_main("zoo", "verify", zoo / "02-dead")
    assert r.returncode == 1
    assert "FAIL 02-dead: card.json's params 107156 is not the 78788 weights model.onnx holds" in (
        r.stdout
    )
