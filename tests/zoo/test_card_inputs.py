"""Zoo entries of networks that are not 3-channel image classifiers: a 1-channel image model, a
Conv1d model of (N, C, L) signals and a tabular MLP of (N, F) features, each made elastic and
searched in this process. Their cards and READMEs say what the input is (task, layout, the
channels' statistics), the README's ONNX Runtime examples run as written against the entry's
model.onnx, and `hwnas zoo verify|list|show` and `hwnas.zoo.load` read the entries."""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from helpers import hwnas_main
from torch import nn

import hwnas
from hwnas.errors import HwnasError


class _Gray(nn.Module):
    """A grayscale image classifier: (N, 1, 16, 16) -> 4 classes."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(1, 8, 3, padding=1)
        self.c2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc(torch.relu(self.c2(torch.relu(self.c1(x)))).mean((2, 3)))


class _Signal(nn.Module):
    """A 1-D convolutional classifier of (N, 6, 40) signals -> 5 classes."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv1d(6, 16, 5, padding=2)
        self.b1 = nn.BatchNorm1d(16)
        self.c2 = nn.Conv1d(16, 16, 1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.c2(torch.relu(self.b1(self.c1(x))))).mean(-1))


class _Table(nn.Module):
    """A tabular MLP of (N, 12) features -> 3 classes."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(12, 32)
        self.b1 = nn.BatchNorm1d(32)
        self.l2 = nn.Linear(32, 32)
        self.out = nn.Linear(32, 3)

    def forward(self, x):
        return self.out(torch.relu(self.l2(torch.relu(self.b1(self.l1(x))))))


CASES = {
    # kind: (model, input without batch, dataset, task, layout, axes)
    "gray": (_Gray, (1, 16, 16), "graydigits", "image-classification", "NCHW",
             ["batch", "channels", "height", "width"]),
    "signal": (_Signal, (6, 40), "custom", "classification", "NCL",
               ["batch", "channels", "length"]),
    # the same model declared a sound classifier (hwnas.elastic(..., task=...)): the rank alone
    # cannot tell, so its cards carried the generic task and no pipeline tag
    "sound": (_Signal, (6, 40), "custom", "audio-classification", "NCL",
              ["batch", "channels", "length"]),
    "table": (_Table, (12,), "adult", "tabular-classification", "NF", ["batch", "features"]),
}  # fmt: skip


def _accuracy(net, arch):
    """Well above chance (the zoo leaves chance-level networks out), larger for more weights."""
    return 60.0 + min(30.0, sum(p.numel() for p in net.parameters()) / 200)


def _search(kind: str, tmp_path: Path):
    """The run and space of a 2-trial search of ``kind``'s model made elastic (live cpu-fast)."""
    make, shape, dataset, task = CASES[kind][:4]
    torch.manual_seed(0)
    space = hwnas.elastic(
        make().eval(), torch.zeros(1, *shape), name=f"cardin_{kind}", dataset=dataset,
        task=task if kind == "sound" else None,
    )  # fmt: skip
    run = hwnas.search(
        "cpu-fast", space=space, accuracy=_accuracy, budget=2, out=tmp_path / "run",
        storage=f"sqlite:///{tmp_path / 'studies.db'}",
    )  # fmt: skip
    return run, space


def _split(readme: str) -> tuple[dict, str]:
    """(front matter, body) of a README."""
    assert readme.startswith("---\n")
    _, front, body = readme.split("---\n", 2)
    return yaml.safe_load(front), body


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def run_readme_examples(entry: Path, monkeypatch) -> list[str]:
    """Run every python block of the entry's README.md as written, in the entry's folder (as a
    user who copies it there would); returns what each printed."""
    blocks = _python_blocks((entry / "README.md").read_text())
    assert len(blocks) == 2  # running the model; checking it against the stored test data
    printed = []
    with monkeypatch.context() as m:
        m.chdir(entry)
        for code in blocks:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, str(entry / "README.md"), "exec"), {"__name__": "readme"})
            printed.append(out.getvalue())
    return printed


def _assert_prints_four_labels(printed: str, labels: list) -> None:
    shown = eval(printed.strip())  # noqa: S307 (the README's own print of a list of labels)
    assert isinstance(shown, list) and len(shown) == 4 and set(shown) <= set(labels)


@pytest.mark.parametrize("kind", list(CASES))
def test_a_searched_models_card_and_readme_follow_its_input(kind, tmp_path, monkeypatch):
    from hwnas.zoo import load

    _make, shape, dataset, task, layout, axes = CASES[kind]
    run, space = _search(kind, tmp_path)
    out = tmp_path / "run"
    assert (out / "summary.json").is_file() and run.zoo  # the zoo and the run's record
    classes = space.dataset(dataset).num_classes
    for entry in run.zoo:
        card = json.loads((entry / "card.json").read_text())
        assert card["task"] == task
        inp = card["input"]
        assert inp["shape"] == [1, *shape] and inp["layout"] == layout and inp["axes"] == axes
        assert inp["name"] == "input" and inp["dtype"] == "float32"
        pre = card["preprocessing"]
        assert pre["layout"] == layout
        if kind == "gray":  # the image keys, one statistic per real channel
            assert pre["mean"] == [0.0] and pre["std"] == [1.0]
            assert pre["channel_order"] == "gray" and pre["size"] == [16, 16]
        else:  # the space declares no normalisation: none is claimed
            assert pre["mean"] is None and pre["std"] is None
            assert pre["size"] == list(shape)
            assert "channel_order" not in pre and "resize" not in pre

        front, body = _split((entry / "README.md").read_text())
        if kind == "signal":  # no Hugging Face pipeline takes any (N, C, L) input
            assert "pipeline_tag" not in front
        else:
            assert front["pipeline_tag"] == task
        results = front["model-index"][0]["results"]
        assert results and {r["task"]["type"] for r in results} == {task}
        if kind == "gray":
            assert "An image classifier" in body and "reshape(1, 1, 1, 1)" in body
            assert "np.random.rand(4, 1, 16, 16)" in body
        else:
            assert "image" not in body.lower() and "NCHW" not in body
            assert "RGB" not in body and "pixel" not in body
            assert f"np.random.rand(4, {', '.join(map(str, shape))})" in body
            assert "mean" not in body.split("## Run it with ONNX Runtime")[1].split("```")[1]
            assert f"({layout}: " in body

        ran, checked = run_readme_examples(entry, monkeypatch)
        _assert_prints_four_labels(ran, list(range(classes)))
        assert checked == ""  # assert_allclose passed silently

        session = load(entry)
        assert session.get_inputs()[0].shape[1:] == list(shape)
        x = np.random.default_rng(0).standard_normal((3, *shape)).astype(np.float32)
        module = load(entry, torch=True, space=space)
        with torch.no_grad():
            want = module(torch.from_numpy(x)).numpy()
        assert np.abs(session.run(None, {"input": x})[0] - want).max() < 1e-4

    r = hwnas_main("zoo", "verify", str(out / "zoo"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(run.zoo)} of {len(run.zoo)} entries verified" in r.stdout
    r = hwnas_main("zoo", "list", str(out / "zoo"), "--json")
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)["entries"]
    assert sorted(e["entry"] for e in listed) == sorted(str(e) for e in run.zoo)
    r = hwnas_main("zoo", "show", str(run.zoo[0]))
    assert r.returncode == 0, r.stderr
    assert f"input [1, {', '.join(map(str, shape))}] -> logits [1, {classes}]" in r.stdout
    stats = "mean [0.0] std [1.0]" if kind == "gray" else "no normalisation recorded"
    assert stats in r.stdout and "mean None" not in r.stdout


BENCHMARK_ACCURACY = {"value": 50.0, "source": "a test", "split": "test", "kind": "benchmark table"}
NOT_SEARCHED = {"study": None, "trial": None, "device": None}


def test_a_three_channel_image_entry_keeps_its_card_and_its_example_runs(tmp_path, monkeypatch):
    """A NAS-Bench-201 network with random weights (CIFAR-10, RGB): the image card as before
    (image-classification, NCHW, the benchmark's statistics of 3 channels), and its README's
    examples run as written."""
    from hwnas.spaces import get_space
    from hwnas.zoo.card import BENCHMARK_PREPROCESSING
    from hwnas.zoo.entry import write_entry
    from hwnas.zoo.write import random_entry

    space = get_space("nasbench201")
    arch = space.parse(
        "|skip_connect~0|+|avg_pool_3x3~0|skip_connect~1|+|skip_connect~0|none~1|skip_connect~2|"
    )
    model, card = random_entry(
        space, arch, "cifar10", "00-rgb", BENCHMARK_ACCURACY, {}, NOT_SEARCHED
    )
    entry = tmp_path / "00-rgb"
    write_entry(entry, model, card)
    assert card["task"] == "image-classification" and card["input"]["layout"] == "NCHW"
    pre, stats = card["preprocessing"], BENCHMARK_PREPROCESSING["cifar10"]
    assert pre["channel_order"] == "RGB" and pre["layout"] == "NCHW"
    assert pre["mean"] == [round(v, 6) for v in stats["mean"]]
    front, body = _split((entry / "README.md").read_text())
    assert front["pipeline_tag"] == "image-classification"
    assert "An image classifier" in body and "per image" in body
    assert "mean = np.array([0.4914, 0.4824, 0.4467], np.float32).reshape(1, 3, 1, 1)" in body
    assert (
        "images = np.random.rand(4, 3, 32, 32).astype(np.float32)  # yours: scaled to [0, 1], "
        "NCHW" in body
    )
    assert '{"input": (images - mean) / std}' in body
    assert "- input: 3x32x32 (NCHW), channel order RGB" in body
    ran, checked = run_readme_examples(entry, monkeypatch)
    _assert_prints_four_labels(ran, list(range(10)))
    assert checked == ""


def test_a_random_weight_entry_of_a_one_channel_declared_space(tmp_path, monkeypatch):
    """A declared space of 1-channel images: its random-weight entry states one mean and std
    (the benchmark statistics are of RGB images: not these) and its README example runs."""
    from hwnas.spaces import get_space
    from hwnas.zoo.entry import write_entry
    from hwnas.zoo.write import random_entry

    (tmp_path / "gray.yaml").write_text(
        "name: cardin_gray_declared\n"
        "datasets:\n  cifar10: {classes: 10, input_shape: [1, 16, 16]}\n"
        "stem:\n  - {block: conv, out: 8, kernel: 3}\n"
        "stages:\n  - name: a\n    out: {choices: [8, 16]}\n    stride: 2\n"
        "    layer: {block: mbconv, kernel: 3, expand: 2}\n"
        "head:\n  - {block: pool}\n"
    )
    space = get_space(str(tmp_path / "gray.yaml"))
    model, card = random_entry(
        space, space.parse("a.out=8"), "cifar10", "00-gray", BENCHMARK_ACCURACY, {},
        NOT_SEARCHED,
    )  # fmt: skip
    entry = tmp_path / "00-gray"
    write_entry(entry, model, card)
    pre = card["preprocessing"]
    assert card["input"]["shape"] == [1, 1, 16, 16] and card["task"] == "image-classification"
    assert pre["mean"] == [0.0] and pre["std"] == [1.0] and pre["channel_order"] == "gray"
    assert pre["source"] == "unknown: mean 0, std 1"
    body = _split((entry / "README.md").read_text())[1]
    assert "reshape(1, 1, 1, 1)" in body and "np.random.rand(4, 1, 16, 16)" in body
    ran, checked = run_readme_examples(entry, monkeypatch)
    _assert_prints_four_labels(ran, list(range(10)))
    assert checked == ""


@pytest.mark.parametrize("kind", ["gray", "signal"])
def test_images_a_network_does_not_take_are_not_its_test_input(kind, tmp_path, monkeypatch):
    """A search's data (digits: 3-channel images) that the network does not take (a 1-channel
    or a 1-D model, scored by the user's function): the entry's test input is one of the
    network's shape and the card claims none of the images' labels or statistics."""
    from hwnas.cost_record import CostRecord
    from hwnas.datasets import load_data
    from hwnas.engine.loop import TrialRecord
    from hwnas.zoo.entry import write_entry
    from hwnas.zoo.write import subnet_entry

    make, shape, dataset = CASES[kind][:3]
    torch.manual_seed(0)
    space = hwnas.elastic(
        make().eval(), torch.zeros(1, *shape), name=f"cardin_{kind}_data", dataset=dataset
    )
    arch = space.largest()
    spec = space.dataset(dataset)
    own = {
        "model": space.subnet(arch), "input_shape": (1, *shape),
        "num_classes": spec.num_classes, "dataset": dataset,
        "weights": "inherited from the space's network", "data": load_data("digits", limit=60),
    }  # fmt: skip
    record = TrialRecord(0, arch.text, 70.0, {"latency_ms": CostRecord("latency_ms", 1.0, "a")})
    model, card = subnet_entry(space, arch, dataset, "00-x", record, own, {}, NOT_SEARCHED)
    entry = tmp_path / "00-x"
    write_entry(entry, model, card)
    assert card["labels"] is None and card["test_data"]["label"] is None
    assert card["input"]["shape"] == [1, *shape]
    assert "digits" not in json.dumps(card["preprocessing"])
    ran, checked = run_readme_examples(entry, monkeypatch)
    _assert_prints_four_labels(ran, list(range(spec.num_classes)))
    assert checked == ""


def test_a_task_a_space_cannot_declare_is_refused_in_one_line():
    with pytest.raises(HwnasError) as info:
        hwnas.elastic(_Signal().eval(), torch.zeros(1, 6, 40), name="cardin_bad", task="audio")
    assert str(info.value) == (
        "task 'audio': one of image-classification, audio-classification, "
        "tabular-classification, video-classification, classification (or None: from the input)"
    )
