"""The model zoo as a user gets it: `hwnas train` on digits, `hwnas zoo verify`, the cards and
their ONNX metadata, pareto.csv's zoo column, chance-level cells, and the export cache."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import yaml
from helpers import hwnas_main

from hwnas.spaces import get_space
from hwnas.zoo import read_entry
from hwnas.zoo.card import metadata_props
from hwnas.zoo.entry import read_tensor
from hwnas.zoo.verify import verify

# a cheap cell (no convolution inside the cells): the network is the benchmark's skeleton
CHEAP = "|skip_connect~0|+|avg_pool_3x3~0|skip_connect~1|+|skip_connect~0|none~1|skip_connect~2|"


def _front_matter(readme: str) -> dict:
    assert readme.startswith("---\n")
    return yaml.safe_load(readme.split("---\n")[1])


def test_train_an_arch_on_digits_writes_an_entry_that_verifies(tmp_path):
    entry = tmp_path / "entry"
    index = get_space("nasbench201").index(get_space("nasbench201").parse(CHEAP))
    r = hwnas_main("train", index, "--data", "digits", "--epochs", "1", "--batch-size", "32",
                  "--limit", "200", "--out", str(entry))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"{entry}:" in r.stdout and "test accuracy on digits" in r.stdout
    names = {p.relative_to(entry).as_posix() for p in entry.rglob("*") if p.is_file()}
    assert names == {"model.onnx", "weights.pt", "README.md", "card.json",
                     "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb"}  # fmt: skip
    card = json.loads((entry / "card.json").read_text())
    assert card["arch"] == CHEAP and card["dataset"] == "digits" and card["num_classes"] == 10
    assert card["labels"] == [str(i) for i in range(10)]
    assert card["input"]["shape"] == [1, 3, 32, 32]  # the benchmark's cifar100 network input
    pre = card["preprocessing"]
    assert len(pre["mean"]) == len(pre["std"]) == 3 and pre["size"] == [32, 32]
    assert card["weights"] == {"kind": "trained", "note": card["weights"]["note"],
                               "file": "weights.pt"}  # fmt: skip
    training = card["training"]
    assert training["applied"]["epochs"] == 1 and training["recipe"]["epochs"] == 200
    assert any("1 of the recipe's 200 epochs" in d for d in training["deviations"])
    assert any("batch 32 instead of 256" in d for d in training["deviations"])
    assert card["accuracy"]["source"].startswith("measured:digits:test split (40 images)")
    space = get_space("nasbench201")
    table = float(space.table_accuracy("cifar100")[space.index(space.parse(CHEAP))])
    assert card["table_accuracy"]["value"] == pytest.approx(table)
    assert "the benchmark's" in card["table_accuracy"]["source"]
    assert card["chance_level"]["value"] == (card["accuracy"]["value"] <= 15.0)
    assert set(card["tools"]) >= {"hwnas", "torch", "onnx", "onnxruntime", "python"}
    assert card["license"] == "mit"
    # the ONNX model carries the same keys, and is the trained network
    model = onnx.load(str(entry / "model.onnx"))
    props = {p.key: p.value for p in model.metadata_props}
    assert set(props) == set(card) - {"files"} and props == metadata_props(card)
    assert json.loads(props["training"]) == training and props["arch"] == CHEAP
    net = space.build(space.parse(CHEAP), "cifar100", num_classes=10)
    net.load_state_dict(torch.load(entry / "weights.pt"))
    x = read_tensor(entry / "test_data_set_0" / "input_0.pb").copy()
    expected = net.eval()(torch.from_numpy(x)).detach().numpy()
    session = ort.InferenceSession(str(entry / "model.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"input": x})[0], expected, atol=1e-4)
    assert card["test_data"]["label"] in range(10)
    # a Hugging Face style card
    front = _front_matter((entry / "README.md").read_text())
    assert front["license"] == "mit" and front["library_name"] == "onnx"
    assert "space:nasbench201" in front["tags"] and front["datasets"][0] == "digits"
    result = front["model-index"][0]["results"][0]
    assert result["metrics"][0]["value"] == pytest.approx(card["accuracy"]["value"], abs=1e-4)
    assert result["source"]["name"] == card["accuracy"]["source"]
    # verify passes, then fails on a tampered file
    r = hwnas_main("zoo", "verify", str(entry))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok   entry:") and "1 of 1 entries verified" in r.stdout
    blob = bytearray((entry / "weights.pt").read_bytes())
    blob[-1] ^= 0xFF
    (entry / "weights.pt").write_bytes(bytes(blob))
    r = hwnas_main("zoo", "verify", str(entry))
    assert r.returncode == 1 and "FAIL entry: weights.pt sha256 differs" in r.stdout
    r = hwnas_main("zoo", "verify", str(tmp_path / "nowhere"))
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: zoo folder not found: {tmp_path / 'nowhere'}"


def _resign(entry, name):
    """Rewrite card.json's checksum of ``name`` (a tamperer who knows the format)."""
    from hwnas.paths import sha256_file

    card = json.loads((entry / "card.json").read_text())
    card["files"][name] = sha256_file(entry / name)
    (entry / "card.json").write_text(json.dumps(card))
    return card


def test_a_search_zoo_names_its_rows_skips_chance_level_cells_and_reuses_exports(tmp_path):
    out = tmp_path / "run"
    # seed 7, 20 trials: the front holds a chance-level cell (no path from input to output)
    args = ["search", "--device", "pixel3", "--budget", "20", "--seed", "7"]
    rng = torch.get_rng_state()
    r = hwnas_main(*args, "--out", str(out))
    assert r.returncode == 0, r.stderr
    # building the zoo's random-weight networks leaves this process's generator as it was
    assert torch.equal(torch.get_rng_state(), rng)
    assert "1 chance-level architecture(s) of the front not put in the zoo" in r.stdout
    assert "best is chance-level" not in r.stdout  # the front's most accurate learns
    assert json.loads((out / "summary.json").read_text())["best"]["chance_level"] is False
    rows = list(csv.DictReader(open(out / "pareto.csv")))
    chance = [row for row in rows if row["chance_level"] == "true"]
    assert len(chance) == 1 and float(chance[0]["accuracy"]) == pytest.approx(1.0)
    assert chance[0]["zoo"] == ""  # not exported
    named = [row["zoo"] for row in rows if row["chance_level"] == "false"]
    assert named and all(named)
    assert sorted(p.name for p in (out / "zoo").iterdir()) == sorted(named)
    for row in rows:
        if row["zoo"]:
            entry = read_entry(out / "zoo" / row["zoo"])
            assert entry["arch"] == row["arch"] and entry["weights_kind"] == "random"
            assert entry["device"] == "pixel3" and entry["latency_ms"] == pytest.approx(
                float(row["latency_ms"])
            )
            assert entry["accuracy_value"] == pytest.approx(float(row["accuracy"]), abs=1e-3)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["zoo_models"] == len(named) and summary["zoo_weights"] == "random"
    assert all(v.ok for v in verify(out / "zoo"))
    # a second study in the same home exports nothing: the ONNX bytes come from the cache, and
    # torch is never imported
    code = (
        "import sys; from hwnas.cli import main; "
        f"rc = main({[*args, '--study', 'again', '--out', str(tmp_path / 'again')]!r}); "
        "print('torch imported' if 'torch' in sys.modules else 'no torch'); sys.exit(rc)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("no torch")
    first = sorted((out / "zoo").glob("*/test_data_set_0/output_0.pb"))
    again = sorted((tmp_path / "again" / "zoo").glob("*/test_data_set_0/output_0.pb"))
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in again]
    assert all(v.ok for v in verify(tmp_path / "again" / "zoo"))
    # a tampered expected output (its checksum re-signed) fails on ONNX Runtime's numbers, a
    # card edited after export fails on the ONNX metadata
    entry = out / "zoo" / named[-1]
    y = read_tensor(entry / "test_data_set_0" / "output_0.pb")
    from hwnas.zoo.entry import write_tensor

    write_tensor(entry / "test_data_set_0" / "output_0.pb", y + 0.01, "logits")
    card = _resign(entry, "test_data_set_0/output_0.pb")
    (v,) = verify(entry)
    assert not v.ok and "ONNX Runtime output differs" in v.detail
    write_tensor(entry / "test_data_set_0" / "output_0.pb", y, "logits")
    card = _resign(entry, "test_data_set_0/output_0.pb")
    # consistent with itself again, but its card is not the one the run recorded
    (v,) = verify(entry)
    assert not v.ok and "card.json is not the file that the run's summary.json" in v.detail
    card["accuracy"]["value"] = 99.0
    (entry / "card.json").write_text(json.dumps(card))
    (v,) = verify(entry)
    assert not v.ok and "metadata differs from card.json in accuracy" in v.detail


def test_a_run_zoo_retrained_in_place_still_verifies(tmp_path, hwnas_home):
    """`hwnas train runs/<study>/zoo` then `hwnas zoo verify` (what train prints to do): main
    failed every entry ('card.json is not the file that the run's summary.json records')."""
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pixel3", "--budget", "4", "--out", str(out))
    assert r.returncode == 0, r.stderr
    before = json.loads((out / "summary.json").read_text())
    assert before["zoo_models"] >= 1 and before["zoo_weights"] == "random"
    r = hwnas_main("train", str(out / "zoo"), "--data", "digits", "--epochs", "1",
                  "--batch-size", "32", "--limit", "100")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"hwnas zoo verify {out / 'zoo'}" in r.stdout
    after = json.loads((out / "summary.json").read_text())
    assert after["zoo_files"] != before["zoo_files"] and after["zoo_weights"] == "trained"
    r = hwnas_main("zoo", "verify", str(out / "zoo"))
    assert r.returncode == 0, r.stdout + r.stderr
    n = before["zoo_models"]
    assert f"{n} of {n} entries verified, {n} of them proven by their study's record" in r.stdout


def test_an_entry_without_a_measured_model_is_named_by_its_arch():
    """An OFA or FBNet subnet whose latency is read or predicted has no model hash: its entry
    was named ``00-0`` (its rank twice), one name for different architectures across runs."""
    from hwnas.engine.loop import TrialRecord
    from hwnas.zoo.write import entry_name

    a = TrialRecord(0, "ks=3;e=3;d=2;r=128", 50.0, {}, {})
    b = TrialRecord(0, "ks=5;e=3;d=2;r=128", 50.0, {}, {})
    measured = TrialRecord(0, "x", 50.0, {}, {"model_hash": "0123456789abcdef"})
    assert entry_name(0, measured) == "00-0123456789abcdef"
    assert entry_name(0, a) != entry_name(0, b) and entry_name(0, a).startswith("00-")
    assert entry_name(0, a) != "00-0" and len(entry_name(0, a)) == 3 + 16


def test_a_trained_subnets_card_says_its_latency_is_the_deployed_networks():
    """Where the search device's latency is the deployed network's (a declared space costed at
    deployment size), the card says so and gives the trained proxy's own latency: the ONNX file
    is the proxy, and reading the deployed value as its latency would be wrong."""
    from hwnas.cost_record import CostRecord
    from hwnas.engine.loop import TrialRecord
    from hwnas.zoo.write import _subnet_devices_note

    cost = CostRecord("latency_ms", 2.5, "measured:cpu:ort:deployed-network[1, 3, 224, 224]")
    proxy = {"trained_subnet_latency_ms": 0.05,
             "trained_subnet_latency_ms_source": "measured:cpu:ort:trained-subnet[1, 3, 16, 16]"}
    note = _subnet_devices_note(TrialRecord(0, "a", 50.0, {"latency_ms": cost}, proxy))
    assert "latency_ms is the deployed network's" in note
    assert "measured 0.05 ms there (measured:cpu:ort:trained-subnet[1, 3, 16, 16])" in note
    plain = _subnet_devices_note(TrialRecord(0, "a", 50.0, {"latency_ms": cost}, {}))
    assert "deployed" not in plain and "a live device measured this subnet" in plain


def test_the_training_cache_answers_only_for_the_same_images(tmp_path):
    """An image folder's test images replaced in place (cleaned, relabelled, the same split
    seed): the cache, keyed by the labels and one training image in 64, answered with the
    weights and the test accuracy of the images before (66.67% on a card whose model scored
    19.44% on the folder as it now is). Every image of every split is in its key now."""
    from PIL import Image

    rng = np.random.default_rng(0)
    data = tmp_path / "data"
    for c in range(3):
        (data / f"c{c}").mkdir(parents=True)
        for i in range(90):
            pixels = (rng.random((8, 8, 3)) * 80 + 60 * c).astype(np.uint8)
            Image.fromarray(pixels).save(data / f"c{c}" / f"{i}.png")
    args = ["train", CHEAP, "--data", str(data), "--epochs", "1", "--batch-size", "8"]
    first = hwnas_main(*args, "--out", str(tmp_path / "a"))
    assert first.returncode == 0, first.stderr
    again = hwnas_main(*args, "--out", str(tmp_path / "b"))
    assert "weights from the training cache" in again.stdout + again.stderr
    # one image the old key did not read (it hashed one training image in two here)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(data / "c2" / "10.png")
    changed = hwnas_main(*args, "--out", str(tmp_path / "c"))
    assert changed.returncode == 0, changed.stderr
    assert "training cache" not in changed.stdout + changed.stderr


def test_train_arch_with_other_settings_writes_another_entry(tmp_path):
    """`hwnas train 5 --data digits` (5 epochs, 96%) then a quick `--epochs 1 --limit 200`
    of the same cell: both took trained/<space>-<model hash>, and the quick run replaced the
    trained entry without a word. Other settings now name another folder; the same command
    names the same one."""
    args = ["train", CHEAP, "--data", "digits", "--batch-size", "32", "--limit", "200"]
    one = hwnas_main(*args, "--epochs", "1", cwd=tmp_path)
    two = hwnas_main(*args, "--epochs", "2", cwd=tmp_path)
    again = hwnas_main(*args, "--epochs", "1", cwd=tmp_path)
    assert one.returncode == two.returncode == again.returncode == 0, one.stderr + two.stderr
    entries = sorted(p.name for p in (tmp_path / "trained").iterdir())
    assert len(entries) == 2 and all(e.startswith("nasbench201-") for e in entries)
    assert "check it with: hwnas zoo verify trained/" in one.stdout
    epochs = {json.loads((tmp_path / "trained" / e / "card.json").read_text())["training"][
        "applied"]["epochs"] for e in entries}  # fmt: skip
    assert epochs == {1, 2}


def test_a_search_rerun_keeps_the_retrained_entries_still_on_its_front(tmp_path):
    """`hwnas search` again after `hwnas train runs/<study>/zoo` (the same command, or a larger
    budget): the zoo was exported anew over the retrained one, every entry random again and
    its weights.pt gone, without a word. Entries still on the front keep their trained
    weights (renamed where the front's order changed), and the search says so."""
    out = tmp_path / "run"
    args = ["search", "--device", "pixel3", "--budget", "6", "--out", str(out)]
    r = hwnas_main(*args)
    assert r.returncode == 0, r.stderr
    r = hwnas_main("train", str(out / "zoo"), "--data", "digits", "--epochs", "1",
                  "--batch-size", "32", "--limit", "100")  # fmt: skip
    assert r.returncode == 0, r.stderr
    trained = {e.name: (e / "weights.pt").read_bytes() for e in sorted((out / "zoo").iterdir())}
    n = len(trained)
    r = hwnas_main(*args)  # the same command: nothing new scored
    assert r.returncode == 0, r.stderr
    assert f"zoo: kept {n} trained entr" in r.stderr and "0 others written anew" in r.stderr
    again = {e.name: (e / "weights.pt").read_bytes() for e in sorted((out / "zoo").iterdir())}
    assert again == trained
    summary = json.loads((out / "summary.json").read_text())
    assert summary["zoo_weights"] == "trained" and f"{n} trained ONNX models" in r.stdout
    # summary.json still records what hwnas train retrained (the rerun dropped it: helper-80)
    assert set(summary["retrained"]) == set(trained)
    assert all(v.ok and v.proven for v in verify(out / "zoo"))
    # a larger budget: the front grows; its trained architectures stay trained
    r = hwnas_main(*args[:4], "30", *args[5:])
    assert r.returncode == 0, r.stderr
    cards = [read_entry(e) for e in sorted((out / "zoo").iterdir())]
    by_arch = {c["arch"]: c for c in cards}
    kept = [c for c in cards if c["weights_kind"] == "trained"]
    assert kept and f"zoo: kept {len(kept)} trained entr" in r.stderr
    assert {c["name"] for c in cards} == {e.name for e in (out / "zoo").iterdir()}
    for c in kept:  # the same weights, under the name of its new row
        old = next(k for k in trained if k.split("-")[1] == c["name"].split("-")[1])
        assert (out / "zoo" / c["name"] / "weights.pt").read_bytes() == trained[old]
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["retrained"]) == {c["name"] for c in kept}
    assert any(c["name"] not in trained for c in kept)  # a row the new front moved
    assert any(c["weights_kind"] == "random" for c in by_arch.values())
    # both kinds: "mixed" (it said "random", and runs show "N random models")
    assert json.loads((out / "summary.json").read_text())["zoo_weights"] == "mixed"
    shown = hwnas_main("runs", "show", "latest").stdout
    assert f"zoo        {len(cards)} models (trained and random weights)" in shown, shown
    assert all(v.ok and v.proven for v in verify(out / "zoo"))
    # an entry edited in the run folder is not what the study recorded: not taken over
    victim = out / "zoo" / kept[0]["name"]
    card = json.loads((victim / "card.json").read_text())
    card["accuracy"]["value"] = 99.0
    (victim / "card.json").write_text(json.dumps(card))
    r = hwnas_main(*args[:4], "30", *args[5:])
    assert r.returncode == 0, r.stderr
    assert "zoo: 1 trained entry replaced with random weights: not the files the run's study " \
        "recorded" in r.stderr
    assert read_entry(victim)["weights_kind"] == "random"
    others = len(kept) - 1  # kept still
    assert (f"zoo: kept {others} trained" in r.stderr) if others else "kept" not in r.stderr
    assert all(v.ok and v.proven for v in verify(out / "zoo"))


def test_an_interrupted_zoo_retrain_leaves_a_zoo_that_verifies(tmp_path, monkeypatch):
    """Ctrl-C during `hwnas train runs/<study>/zoo`: the entries retrained so far were in place
    but recorded in the run's summary.json and study only once every entry was done, so
    `hwnas zoo verify` failed them ('card.json is not the file that the run's summary.json
    records') until a full rerun; and the command said 'the study and measurements are saved',
    a search's words. Each entry is recorded as it is written."""
    from hwnas.zoo.train import ZooTrainer

    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pixel3", "--budget", "6", "--out", str(out))
    assert r.returncode == 0, r.stderr
    n = json.loads((out / "summary.json").read_text())["zoo_models"]
    assert n >= 2
    train, calls = ZooTrainer.train, []

    def interrupted(self, arch):
        calls.append(arch)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return train(self, arch)

    monkeypatch.setattr(ZooTrainer, "train", interrupted)
    r = hwnas_main("train", str(out / "zoo"), "--data", "digits", "--epochs", "1",
                  "--batch-size", "32", "--limit", "100")  # fmt: skip
    assert r.returncode == 130
    kinds = [read_entry(e)["weights_kind"] for e in sorted((out / "zoo").iterdir())]
    assert kinds.count("trained") == 1
    verdicts = verify(out / "zoo")
    assert all(v.ok and v.proven for v in verdicts), [v.line() for v in verdicts]
    assert f"interrupted: 1 of {n} entries retrained" in r.stderr
    assert "the study and measurements are saved" not in r.stderr


def test_a_trained_entry_does_not_explain_its_table_accuracy_twice(tmp_path):
    """`hwnas train` on a supernet search's zoo: the table accuracy's source, which says what
    it is already ('(NAS-Bench-201 table: ... not on digits)'), got a second explanation
    appended ('(the benchmark's: this architecture trained with its recipe on cifar100, not
    these weights)'). A source that says what it is keeps its one explanation."""
    entry = tmp_path / "entry"
    args = ["--data", "digits", "--epochs", "1", "--batch-size", "32", "--limit", "100"]
    r = hwnas_main("train", CHEAP, *args, "--out", str(entry))
    assert r.returncode == 0, r.stderr
    card = json.loads((entry / "card.json").read_text())
    explained = card["table_accuracy"]["source"]
    assert explained.count("the benchmark's") == 1
    supernet = (
        "nasbench201-table:cifar100_test_200ep (NAS-Bench-201 table: this cell in the "
        "benchmark's network trained 200 epochs on cifar100, not on digits)"
    )
    card["table_accuracy"]["source"] = supernet  # as a supernet search's zoo writes it
    (entry / "card.json").write_text(json.dumps(card))
    for source in (supernet, explained):
        r = hwnas_main("train", str(entry), *args)
        assert r.returncode == 0, r.stderr
        card = json.loads((entry / "card.json").read_text())
        assert card["table_accuracy"]["source"] == source
        card["table_accuracy"]["source"] = explained
        (entry / "card.json").write_text(json.dumps(card))


def test_a_torch_load_refuses_an_entry_whose_space_file_changed(tmp_path, hwnas_home):
    """A user's space file edited under the same name (an activation added, the shapes
    unchanged): `hwnas.zoo.load(entry, torch=True)` rebuilt the network by the space's name,
    the weights loaded, and the module silently differed from model.onnx (max |diff| 0.5).
    The card's build section records the space's fingerprint and the load refuses another."""
    import hwnas.zoo
    from hwnas.errors import HwnasError
    from hwnas.spaces import reload_spaces
    from tests.spaces.conftest import TINY_SPACE

    # a name of its own: a space given by path earlier in this process keeps its name
    text = TINY_SPACE.replace("name: tiny\n", "name: zoofp\n")
    (hwnas_home / "spaces").mkdir(exist_ok=True)
    file = hwnas_home / "spaces" / "zoofp.yaml"
    file.write_text(text)
    reload_spaces()
    try:
        space = get_space("zoofp")
        arch = "a.d=2 a.out=16 a.0=5/2 a.1=3/2 b.0=ib"
        entry = tmp_path / "entry"
        r = hwnas_main("train", arch, "--space", "zoofp", "--data", "digits", "--epochs", "1",
                      "--batch-size", "32", "--limit", "100", "--out", str(entry))  # fmt: skip
        assert r.returncode == 0, r.stderr
        (v,) = verify(entry)
        assert v.ok, v.detail
        x = read_tensor(entry / "test_data_set_0" / "input_0.pb").copy()
        y = read_tensor(entry / "test_data_set_0" / "output_0.pb")
        module = hwnas.zoo.load(entry, torch=True)
        np.testing.assert_allclose(module(torch.from_numpy(x)).detach().numpy(), y, atol=1e-4)

        file.write_text(text.replace("se: 0.25}", "se: 0.25, act: h_swish}"))
        reload_spaces()
        now = get_space("zoofp").fingerprint
        assert now != space.fingerprint
        with pytest.raises(HwnasError) as exc:
            hwnas.zoo.load(entry, torch=True)
        assert str(exc.value).startswith(
            f"space 'zoofp' changed since this entry was written (fingerprint "
            f"{space.fingerprint}, now {now}): "
        )
        assert "\n" not in str(exc.value)
        hwnas.zoo.load(entry)  # the ONNX model still runs
        card = json.loads((entry / "card.json").read_text())
        assert card["build"]["fingerprint"] == space.fingerprint  # the ONNX metadata's too
        # an entry written before cards recorded a fingerprint loads as it did
        del card["build"]["fingerprint"]
        (entry / "card.json").write_text(json.dumps(card))
        assert isinstance(hwnas.zoo.load(entry, torch=True), torch.nn.Module)
    finally:
        file.unlink()
        reload_spaces()


def test_a_retrained_supernet_entry_keeps_no_latency_of_another_network(tmp_path):
    """A supernet search's entry carries the latency of its subnet at the supernet's size
    (or of the deployed network). `hwnas train` on its zoo trains the space's network for the
    benchmark dataset instead, and its card kept the old latency, the README's headline
    too: the latency of another network. The retrained card has the recorded tables' values of
    the network it now is, and no measurement of another."""
    out = tmp_path / "run"
    # 3 fine-tuning epochs at batch 32: above chance, so the zoo has entries
    r = hwnas_main("search", "--strategy", "oneshot", "--device", "cpu-fast", "--epochs", "1",
                   "--finetune-epochs", "3", "--batch-size", "32", "--set", "limit=300",
                   "--set", "channels=4", "--set", "evolution_trials=8", "--set",
                   "population=4", "--set", "candidates=2", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    before = {p.parent.name: json.loads(p.read_text()) for p in out.glob("zoo/*/card.json")}
    assert before and all("cpu-fast" in c["devices"] for c in before.values())
    r = hwnas_main("train", str(out / "zoo"), "--data", "digits", "--epochs", "1",
                   "--limit", "200")  # fmt: skip
    assert r.returncode == 0, r.stderr
    for name in before:
        card = json.loads((out / "zoo" / name / "card.json").read_text())
        assert "cpu-fast" not in card["devices"]  # measured on another network
        space = get_space("nasbench201")
        index = space.index(space.parse(card["arch"]))
        pixel3 = card["devices"]["pixel3"]["latency_ms"]
        assert pixel3["source"].startswith("recorded:")
        from hwnas.predictors.data import get_column

        assert pixel3["value"] == pytest.approx(get_column("nasbench201", "pixel3").values[index])
    # said before training, and the summary says what each entry is now beside the search's
    # own best (which kept its numbers while the zoo held another network)
    assert "a supernet search's subnet with inherited weights, input [1, 3, 16, 16]" in r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["retrained"]) == set(before)
    for name, entry in summary["retrained"].items():
        card = json.loads((out / "zoo" / name / "card.json").read_text())
        assert entry["test_accuracy"] == card["accuracy"]["value"]
        assert entry["input_shape"] == card["input"]["shape"] != [1, 3, 16, 16]
        assert entry["weights"] == card["weights"]["note"]
    # the same search again: its subnets (inherited weights) did not replace what hwnas train
    # trained from scratch (the rerun exported them over it, and dropped the retrained record)
    weights = {n: (out / "zoo" / n / "weights.pt").read_bytes() for n in before}
    r = hwnas_main("search", "--strategy", "oneshot", "--device", "cpu-fast", "--epochs", "1",
                   "--finetune-epochs", "3", "--batch-size", "32", "--set", "limit=300",
                   "--set", "channels=4", "--set", "evolution_trials=8", "--set",
                   "population=4", "--set", "candidates=2", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"zoo: kept {len(before)} trained entr" in r.stderr, r.stderr
    for name in before:
        card = json.loads((out / "zoo" / name / "card.json").read_text())
        assert card["build"]["kind"] == "space" and "from scratch" in card["weights"]["note"]
        assert (out / "zoo" / name / "weights.pt").read_bytes() == weights[name]
    assert set(json.loads((out / "summary.json").read_text())["retrained"]) == set(before)
    assert all(v.ok and v.proven for v in verify(out / "zoo"))


def test_zoo_load_with_a_misspelt_keyword_or_no_entry_is_one_line():
    """hwnas.zoo.load(e, torh=True) raised Python's TypeError and load(None) pathlib's."""
    import hwnas
    from hwnas.errors import HwnasError

    with pytest.raises(HwnasError, match="option of hwnas.zoo.load 'torh'; did you mean torch?"):
        hwnas.zoo.load("entry", torh=True)
    with pytest.raises(HwnasError, match="^entry must be a zoo entry's folder .*got None$"):
        hwnas.zoo.load(None)
