"""A space whose networks take 1-channel images gets 1-channel data: digits kept gray, an image
folder read as PIL's mode L (RGB photos converted), CIFAR by luma; supernet search and
``hwnas train`` run on it (every image was made RGB and the shape check refused them all)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from helpers import hwnas_main
from PIL import Image

from hwnas.datasets import load_data

MNIST_NET = """\
name: mnist_net
datasets: {mnist: {classes: 10, input_shape: [1, 28, 28]}}
stem: [{block: conv, out: 8, kernel: 3, stride: 2}]
stages:
  - out: {choices: [8, 16]}
    stride: 2
    depth: {choices: [1, 2]}
    layer: {block: mbconv, kernel: {choices: [3, 5, 7]}, expand: 3}
head: [{block: pool}]
"""


def _folder(root, mode: str, n: int = 6):
    rng = np.random.default_rng(0)
    for cls in ("a", "b"):
        (root / cls).mkdir(parents=True)
        for i in range(n):
            shape = (20, 20) if mode == "L" else (20, 20, 3)
            Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(
                root / cls / f"{i}.png"
            )
    return root


def test_data_takes_the_channels_the_networks_take(tmp_path):
    from hwnas.datasets import input_channels

    assert input_channels((1, 28, 28)) == 1 and input_channels((3, 32, 32)) == 3
    assert input_channels((2, 100)) == 3  # not images: the shape check refuses it
    d = load_data("digits", image_size=28, limit=60, channels=1)
    assert d.image_shape == (1, 28, 28) and d.preprocessing["channel_order"] == "gray"
    assert len(d.preprocessing["mean"]) == 1 and "1 channel" in d.notes["adaptation"]
    assert load_data("digits", image_size=28, limit=60).image_shape == (3, 28, 28)
    gray = load_data(str(_folder(tmp_path / "gray", "L")), image_size=12, channels=1)
    assert gray.image_shape == (1, 12, 12)
    assert gray.preprocessing["steps"][0] == "convert to L (gray)"
    # RGB photos for a gray network: converted as torchvision's Grayscale would
    photos = _folder(tmp_path / "rgb", "RGB")
    d = load_data(str(photos), image_size=20, channels=1)
    assert d.image_shape == (1, 20, 20)
    raw = np.stack(
        [np.asarray(Image.open(p).convert("L"), np.float32) / 255 for p in
         sorted((photos / "a").iterdir()) + sorted((photos / "b").iterdir())]
    )  # fmt: skip
    mean = float(d.preprocessing["mean"][0])
    assert abs(mean - raw.mean()) < 0.05  # of the training split: close to all images'
    with pytest.raises(ValueError, match="channels must be 1 or 3"):
        load_data("digits", channels=2)


def test_cifar_becomes_gray_by_luma(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for name in ("data_batch_1", "test_batch"):
        batch = {"data": rng.integers(0, 256, (10, 3072), dtype=np.uint8), "labels": [0, 1] * 5}
        (folder / name).write_bytes(pickle.dumps(batch))
    d = load_data(str(tmp_path), channels=1)
    assert d.image_shape == (1, 32, 32) and d.preprocessing["channel_order"] == "gray"
    assert any("ITU-R 601-2" in s for s in d.preprocessing["steps"])


def test_a_gray_space_searches_and_trains_on_gray_data(tmp_path):
    """`hwnas search --strategy oneshot` and `hwnas train` on a (1, 28, 28) space: both
    refused (3, H, W) data before."""
    (tmp_path / "mnist_net.yaml").write_text(MNIST_NET)
    gray = _folder(tmp_path / "gray", "L")
    r = hwnas_main(
        "search", "--space", "mnist_net.yaml", "--strategy", "oneshot", "--device", "cpu-fast",
        "--data", gray, "--set", "image_size=28", "--epochs", "1", "--finetune-epochs", "0",
        "--set", "cost=flops", "--set", "evolution_trials=4", "--set", "population=4",
        "--no-zoo", "--out", tmp_path / "run", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = hwnas_main(
        "search", "--space", "mnist_net.yaml", "--strategy", "oneshot", "--device", "cpu-fast",
        "--data", "digits", "--epochs", "1", "--finetune-epochs", "0", "--set", "limit=100",
        "--set", "cost=flops", "--set", "evolution_trials=4", "--set", "population=4",
        "--no-zoo", "--out", tmp_path / "run2", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = hwnas_main(
        "train", "s0.d=1 s0.out=8 s0.0=3", "--space", "mnist_net.yaml", "--data", gray,
        "--epochs", "1", "--out", tmp_path / "trained", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "test accuracy on gray" in r.stdout, r.stdout
