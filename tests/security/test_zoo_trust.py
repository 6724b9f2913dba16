"""What a zoo entry can be trusted for: a corrupted ONNX cache entry never reaches a zoo, and
`hwnas zoo verify` does not take its checksums and tolerances from the card it checks alone."""

from __future__ import annotations

import hashlib
import json
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

SEARCH = ["search", "--device", "pixel3", "--budget", "3", "--seed", "2"]  # 2 front points


def _zeroed(onnx_bytes: bytes) -> bytes:
    """The same network with every weight set to zero (a valid ONNX model)."""
    model = onnx.load_from_string(onnx_bytes)
    for init in model.graph.initializer:
        zeros = np.zeros_like(numpy_helper.to_array(init))
        init.CopyFrom(numpy_helper.from_array(zeros, init.name))
    return model.SerializeToString()


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_corrupted_onnx_cache_entry_is_re_exported_not_put_in_a_zoo(tmp_path, hwnas_home, capsys):
    """Every cached export replaced by a zeroed network (valid ONNX, wrong weights): main put
    them into every later zoo and the search reported success."""
    from hwnas.cli import main

    assert main([*SEARCH, "--out", str(tmp_path / "first")]) == 0
    entries = sorted((hwnas_home / "cache" / "onnx").iterdir())
    assert entries
    for entry in entries:
        path = entry / "model.onnx"
        path.write_bytes(_zeroed(path.read_bytes()))
    assert main([*SEARCH, "--study", "again", "--out", str(tmp_path / "again")]) == 0
    capsys.readouterr()
    first = sorted((tmp_path / "first" / "zoo").glob("*/model.onnx"))
    again = sorted((tmp_path / "again" / "zoo").glob("*/model.onnx"))
    assert first and [p.parent.name for p in first] == [p.parent.name for p in again]
    for a, b in zip(first, again):  # the same weights (the cards differ: another study)
        assert _weights(a) == _weights(b), f"{b.parent.name} came from the corrupted cache"
    # the damaged entries were replaced by good exports
    assert sorted(e.name for e in (hwnas_home / "cache" / "onnx").iterdir()) == [
        e.name for e in entries
    ]
    good = {_weights(p) for p in first}
    assert {_weights(e / "model.onnx") for e in entries} == good


def _weights(path) -> str:
    """sha256 over the initializers of an ONNX model (its weights, not its metadata)."""
    h = hashlib.sha256()
    for init in sorted(onnx.load(str(path)).graph.initializer, key=lambda t: t.name):
        h.update(init.name.encode() + numpy_helper.to_array(init).tobytes())
    return h.hexdigest()


def _resign(entry, card: dict) -> None:
    """Make ``entry`` consistent with ``card`` as a tamperer who knows the format would: the
    card's checksums of every file and its keys in the ONNX metadata."""
    from hwnas.zoo.card import metadata_props
    from hwnas.zoo.entry import with_metadata

    model = entry / "model.onnx"
    model.write_bytes(with_metadata(model.read_bytes(), metadata_props(card), "hwnas zoo model"))
    card["files"] = {name: _sha256(entry / name) for name in card["files"]}
    (entry / "card.json").write_text(json.dumps(card, indent=2) + "\n")


def test_zoo_verify_needs_more_than_a_rewritten_card(tmp_path, capsys, monkeypatch):
    """A zeroed model with a rewritten card (``atol: 1e30``, checksums redone) verified "ok"
    on main. Here: the card cannot loosen the tolerance, the run's summary.json and the study
    (recorded at publish time) pin each entry, and an entry alone is said to be unproven."""
    from hwnas.cli import main
    from hwnas.zoo.entry import read_tensor, write_tensor

    run = tmp_path / "run"
    assert main([*SEARCH, "--out", str(run), "--study", "pinned"]) == 0
    capsys.readouterr()
    entries = sorted(p for p in (run / "zoo").iterdir())
    assert len(entries) >= 2
    victim, other = entries[-1], entries[0]
    assert main(["zoo", "verify", str(run / "zoo")]) == 0
    out = capsys.readouterr().out
    assert out.count("ok   ") == len(entries) and "study 'pinned'" in out

    # 1. zeroed weights, the card's tolerance opened to 1e30, every checksum redone
    (victim / "model.onnx").write_bytes(_zeroed((victim / "model.onnx").read_bytes()))
    card = json.loads((victim / "card.json").read_text())
    card["test_data"]["atol"] = card["test_data"]["rtol"] = 1e30
    _resign(victim, card)
    assert main(["zoo", "verify", str(run / "zoo")]) == 1
    lines = capsys.readouterr().out.splitlines()
    bad = next(x for x in lines if victim.name in x)
    assert bad.startswith("FAIL") and "ONNX Runtime output differs" in bad and "atol 0.0001" in bad
    assert next(x for x in lines if other.name in x).startswith("ok   ")

    # 2. the stored output rewritten too: self-consistent, but not what the run recorded
    x = read_tensor(victim / "test_data_set_0" / "input_0.pb")
    session = ort.InferenceSession(str(victim / "model.onnx"), providers=["CPUExecutionProvider"])
    y = session.run(None, {session.get_inputs()[0].name: x})[0]
    write_tensor(victim / "test_data_set_0" / "output_0.pb", y, card["output"]["name"])
    _resign(victim, card)
    assert main(["zoo", "verify", str(victim)]) == 1
    (bad, _total) = capsys.readouterr().out.splitlines()
    assert bad.startswith("FAIL") and "summary.json" in bad

    # 3. the run's summary.json rewritten as well: the study's record still tells
    summary = json.loads((run / "summary.json").read_text())
    for rel in list(summary["zoo_files"]):
        summary["zoo_files"][rel] = _sha256(run / rel)
    (run / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    assert main(["zoo", "verify", str(victim)]) == 1
    (bad, _total) = capsys.readouterr().out.splitlines()
    assert bad.startswith("FAIL") and "study 'pinned'" in bad

    # 4. entries copied alone: the card names its study, whose record still tells; where no
    # study records it (another hwnas home), consistent with its own card and no more
    for entry in (victim, other):
        shutil.copytree(entry, tmp_path / "downloaded" / entry.name)
    assert main(["zoo", "verify", str(tmp_path / "downloaded" / victim.name)]) == 1
    assert "study 'pinned'" in capsys.readouterr().out
    assert main(["zoo", "verify", str(tmp_path / "downloaded" / other.name)]) == 0
    assert "study 'pinned'" in capsys.readouterr().out
    monkeypatch.setenv("HWNAS_HOME", str(tmp_path / "another-home"))
    assert main(["zoo", "verify", str(tmp_path / "downloaded" / other.name)]) == 0
    (line, _total) = capsys.readouterr().out.splitlines()
    assert line.startswith("ok   ") and "provenance not proven" in line


def test_zoo_list_show_and_load_of_a_handed_card_with_odd_fields_are_one_line(tmp_path):
    """A card whose fields hold other types than hwnas writes (an accuracy '99' as text, a
    list of devices, a number for the preprocessing steps, a string for the benchmark
    accuracy) made `hwnas zoo list` and `show` end in tracebacks; `zoo verify` already failed
    such entries. An accuracy of null (an entry nobody scored) is shown as none. Its `build`
    section rebuilt the network for `hwnas.zoo.load(entry, torch=True)` as it said: 10**9
    classes had torch allocate 256 GB, a seed 'abc' was a raw ValueError."""
    import copy
    import json
    import shutil

    from helpers import hwnas_main

    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pixel3", "--budget", "3", "--out", str(out))
    assert r.returncode == 0, r.stderr
    source = sorted((out / "zoo").iterdir())[-1]
    card = json.loads((source / "card.json").read_text())
    cases = {
        "accuracy": ({**card["accuracy"], "value": "99"}, "'accuracy' must be an object whose"),
        "devices": (["pixel3"], "'devices' must be an object of devices"),
        "preprocessing": ({"steps": 5}, "'preprocessing' must be an object whose steps"),
        "table_accuracy": ("x", "'table_accuracy' must be an object whose value"),
    }
    for key, (value, said) in cases.items():
        entry = tmp_path / key / "00-e"
        shutil.copytree(source, entry)
        (entry / "card.json").write_text(json.dumps({**copy.deepcopy(card), key: value}))
        for args in (["zoo", "list", str(entry.parent)], ["zoo", "show", str(entry)],
                     ["zoo", "list", str(entry.parent), "--json"]):  # fmt: skip
            r = hwnas_main(*args)
            assert r.returncode == 2 and "Traceback" not in r.stderr, (key, args, r.stderr)
            assert r.stderr.startswith("error: ") and said in r.stderr, r.stderr
    entry = tmp_path / "unscored" / "00-e"
    shutil.copytree(source, entry)
    unscored = {**card, "accuracy": {**card["accuracy"], "value": None}}
    (entry / "card.json").write_text(json.dumps(unscored))
    r = hwnas_main("zoo", "show", str(entry))
    assert r.returncode == 0 and "accuracy  none on" in r.stdout, r.stdout + r.stderr

    import pytest

    from hwnas.errors import HwnasError
    from hwnas.zoo import load

    builds = {
        "classes": ({"num_classes": 10**9}, "build.num_classes must be a whole number 1..1000000"),
        "seed": ({"seed": "abc"}, "build.seed must be a whole number 0..4294967295"),
        "supernet": ({"kind": "supernet"}, "build.image_shape must be three whole numbers"),
    }
    for key, (change, said) in builds.items():
        entry = tmp_path / f"build_{key}" / "00-e"
        shutil.copytree(source, entry)
        (entry / "card.json").write_text(json.dumps({**card, "build": {**card["build"], **change}}))
        with pytest.raises(HwnasError, match=f"card.json's {said}"):
            load(entry, torch=True)
    entry = tmp_path / "word" / "00-e"
    shutil.copytree(source, entry)
    (entry / "card.json").write_text(json.dumps({**card, "weights": "trained"}))
    with pytest.raises(HwnasError, match="trained weights, but no weights.pt named in the card"):
        load(entry, torch=True)


def test_a_supernet_cards_build_config_cannot_size_the_network_it_rebuilds(tmp_path):
    """`hwnas.zoo.load(entry, torch=True)` built a supernet entry's supernet at whatever size
    its card's `build.config` said: `{"channels": 4096, "cells": 4}` ran out of memory (a raw
    RuntimeError at best). The config is now checked as the `--set` size settings of the
    space's supernet are, and the network it makes is counted (on PyTorch's meta device)
    before it is built: settings each within range still combine into 85e9 parameters."""
    import subprocess
    import sys

    from helpers import hwnas_main
    from helpers_security import _limits

    out = tmp_path / "run"
    r = hwnas_main("search", "--strategy", "darts", "--device", "pixel3", "--data", "digits",
                   "--epochs", "1", "--finetune-epochs", "0", "--batch-size", "32",
                   "--set", "limit=100", "--set", "channels=4", "--out", out)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (source,) = sorted((out / "zoo").iterdir())
    card = json.loads((source / "card.json").read_text())
    assert card["build"]["config"] == {"channels": 4, "cells": 1, "partial_channels": 1}
    configs = {
        "huge": ({"channels": 4096, "cells": 4}, "build.config channels must be <= 1024"),
        "in-range": ({"channels": 1024, "cells": 64}, "makes a network of 8.49e+10 parameters"),
        "unknown": ({"channels": 4, "depth": 99}, "build.config has 'depth', no size setting"),
    }
    for name, (config, _said) in configs.items():
        entry = tmp_path / name / "00-e"
        shutil.copytree(source, entry)
        build = {**card["build"], "config": config}
        (entry / "card.json").write_text(json.dumps({**card, "build": build}))
    loads = (  # in a child bounded to 3 GiB: on main the first of them took all the memory
        "import sys\nfrom hwnas.errors import HwnasError\nimport hwnas.zoo\n"
        "for entry in sys.argv[1:]:\n"
        "    try:\n        hwnas.zoo.load(entry, torch=True)\n        print('loaded')\n"
        "    except HwnasError as exc:\n        print(exc)\n"
    )
    entries = [str(source), *(str(tmp_path / name / "00-e") for name in configs)]
    r = subprocess.run([sys.executable, "-c", loads, *entries], capture_output=True, text=True,
                       timeout=300, preexec_fn=_limits)  # fmt: skip
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "loaded" and len(lines) == 1 + len(configs), r.stdout
    for line, (name, (_config, said)) in zip(lines[1:], configs.items()):
        assert line.startswith(f"{tmp_path / name / '00-e'}: card.json's ") and said in line, line


def _handed_entry(entry, model_external: bool = False) -> None:
    """A consistent entry (card, checksums, metadata) whose test input, or whose model's
    weight, is ONNX external data named ``secret.txt`` instead of inline values."""
    from onnx import TensorProto, helper

    (entry / "test_data_set_0").mkdir(parents=True)

    def external(tensor, location: str) -> None:
        tensor.ClearField("raw_data")
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", "0"), ("length", "8")):
            item = tensor.external_data.add()
            item.key, item.value = key, value

    w = numpy_helper.from_array(np.zeros(8, np.uint8), "w")
    if model_external:
        external(w, "secret.txt")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["s"]),
         helper.make_node("Cast", ["s"], ["y"], to=TensorProto.FLOAT)],
        "g", [helper.make_tensor_value_info("x", TensorProto.UINT8, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8])], [w],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (entry / "model.onnx").write_bytes(model.SerializeToString())
    x = numpy_helper.from_array(np.zeros(8, np.uint8), "x")
    if not model_external:
        external(x, "secret.txt")
    (entry / "test_data_set_0" / "input_0.pb").write_bytes(x.SerializeToString())
    y = numpy_helper.from_array(np.zeros(8, np.float32), "y")
    (entry / "test_data_set_0" / "output_0.pb").write_bytes(y.SerializeToString())
    files = ["model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb"]
    _resign(entry, {"name": entry.name, "files": dict.fromkeys(files, "")})


def test_zoo_verify_reads_no_file_an_entry_names_as_external_data(tmp_path):
    """A handed entry's test input, a TensorProto with `data_location: EXTERNAL` and
    `location: secret.txt`, was read from the folder `hwnas zoo verify` ran in (the FAIL line
    printed the difference its first byte made); a model.onnx naming external data beside it
    was run with a file its card has no checksum of. Both are FAIL lines now, nothing read."""
    from helpers import hwnas_main

    zoo = tmp_path / "zoo"
    _handed_entry(zoo / "input")
    _handed_entry(zoo / "model", model_external=True)
    (zoo / "model" / "secret.txt").write_bytes(bytes(8))  # what the model's weight names
    here = tmp_path / "cwd"
    here.mkdir()
    (here / "secret.txt").write_bytes(b"ABCDEFGH")
    r = hwnas_main("zoo", "verify", zoo, cwd=here)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert (
        "FAIL input: test_data_set_0 unreadable: input_0.pb names an external data file"
        in (lines[0])
    ), r.stdout
    assert lines[1].startswith("FAIL model: model.onnx names external data files"), r.stdout
    assert "0 of 2 entries verified" in r.stdout + r.stderr


def test_zoo_verify_bounds_the_memory_a_handed_model_computes_with(tmp_path):
    """A 190-byte handed model (ConstantOfShape of a shape it holds, then ReduceSum) made
    `hwnas zoo verify` take 2.2 GB; the tensors of its test inference are bounded now
    (1 GiB), and the entry is a FAIL line. Run in a child bounded to 3 GiB and 60 s."""
    from onnx import TensorProto, helper

    from tests.security.helpers_security import bounded_cli

    entry = tmp_path / "zoo" / "bomb"
    (entry / "test_data_set_0").mkdir(parents=True)
    n = 300_000_000  # 1.2 GB of float32
    fill = numpy_helper.from_array(np.array([1.0], np.float32))
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["big"], value=fill),
         helper.make_node("ReduceSum", ["big"], ["s"], keepdims=1),
         helper.make_node("Add", ["x", "s"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [numpy_helper.from_array(np.array([n], np.int64), "shape")],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (entry / "model.onnx").write_bytes(model.SerializeToString())
    assert (entry / "model.onnx").stat().st_size < 300
    tests = entry / "test_data_set_0"
    x, y = np.zeros(1, np.float32), np.array([n], np.float32)
    (tests / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    (tests / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())
    files = ["model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb"]
    _resign(entry, {"name": "bomb", "files": dict.fromkeys(files, "")})
    r = bounded_cli("zoo", "verify", str(entry))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr[-2000:]
    assert r.stdout.startswith(
        "FAIL bomb: ONNX Runtime failed: one inference needs more than the 1 GiB hwnas zoo "
        "verify allows its tensors"
    ), r.stdout


def _handed_model_entry(entry, nodes, initializers=()) -> None:
    """A handed entry whose model maps float x[1] to y[1] through ``nodes``, with the test
    output ONNX Runtime computes (the entry is consistent with itself)."""
    from onnx import TensorProto, helper

    (entry / "test_data_set_0").mkdir(parents=True)
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], list(initializers),
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    (entry / "model.onnx").write_bytes(model.SerializeToString())
    x = np.zeros(1, np.float32)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    y = session.run(None, {"x": x})[0]
    tests = entry / "test_data_set_0"
    (tests / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    (tests / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())
    files = ["model.onnx", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb"]
    _resign(entry, {"name": entry.name, "files": dict.fromkeys(files, "")})


def test_zoo_verify_runs_no_model_that_computes_strings(tmp_path):
    """ONNX Runtime keeps string contents outside the 1 GiB arena of a test inference: a 1 KB
    handed model of 31 StringConcat nodes (each doubling a string) took 4.2 GB. A model with
    any string (a string initializer, a cast to strings, an untyped string operator's output)
    is a FAIL line now, unrun. Here 3 doublings: the old code ran them and said ok."""
    from onnx import TensorProto, helper

    from tests.security.helpers_security import bounded_cli

    def doublings(first: str):
        names = [first, "s1", "s2", "s3"]
        nodes = [helper.make_node("StringConcat", [a, a], [b]) for a, b in zip(names, names[1:])]
        return [*nodes, helper.make_node("Shape", ["s3"], ["shape"]),
                helper.make_node("Cast", ["shape"], ["f"], to=TensorProto.FLOAT),
                helper.make_node("Add", ["x", "f"], ["y"])]  # fmt: skip

    zoo = tmp_path / "zoo"
    s0 = helper.make_tensor("s0", TensorProto.STRING, [1], [b"a"])
    _handed_model_entry(zoo / "initializer", doublings("s0"), [s0])
    cast = helper.make_node("Cast", ["x"], ["c"], to=TensorProto.STRING)
    _handed_model_entry(zoo / "cast", [cast, *doublings("c")])
    r = bounded_cli("zoo", "verify", str(zoo))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0].startswith("FAIL cast: model.onnx computes strings ("), r.stdout
    assert lines[1].startswith("FAIL initializer: model.onnx computes strings ("), r.stdout
    assert "0 of 2 entries verified" in r.stdout + r.stderr

    from hwnas.zoo.verify import _computes_strings

    model = onnx.load(str(zoo / "cast" / "model.onnx"))
    model.graph.node[0].attribute[0].i = TensorProto.FLOAT  # no cast: only the operators
    assert _computes_strings(model) == "operator StringConcat"


def test_zoo_verify_of_an_entry_does_not_depend_on_the_entries_before_it(tmp_path):
    """The 1 GiB arena of the test inferences is the process's and kept every region it grew
    by: an entry that fitted in a fresh process failed ("needs more than the 1 GiB") after
    others had run. Here under a 64 MiB cap: entry a (2 x 20 MiB, as alone) left 40 MiB held,
    and b (2 x 28 MiB) failed; each inference gives the arena back now."""
    import os
    import subprocess
    import sys

    from onnx import helper

    zoo = tmp_path / "zoo"
    for name, mib in (("a", 20), ("b", 28)):
        fill = numpy_helper.from_array(np.array([1.0], np.float32))
        shape = numpy_helper.from_array(np.array([mib * 2**18], np.int64), "shape")
        _handed_model_entry(zoo / name, [
            helper.make_node("ConstantOfShape", ["shape"], ["big"], value=fill),
            helper.make_node("Neg", ["big"], ["neg"]), helper.make_node("Relu", ["neg"], ["r"]),
            helper.make_node("ReduceSum", ["r"], ["s"], keepdims=1),
            helper.make_node("Add", ["x", "s"], ["y"]),
        ], [shape])  # fmt: skip
    code = (
        "import sys, hwnas.zoo.verify as v; v.MAX_VERIFY_BYTES = 64 * 2**20; "
        "from hwnas.cli import main; sys.exit(main(['zoo', 'verify', sys.argv[1]]))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(zoo)], capture_output=True, text=True, timeout=120,
        env=dict(os.environ),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    assert [line[:6] for line in r.stdout.splitlines()[:2]] == ["ok   a", "ok   b"], r.stdout
