"""A search run again, unchanged, leaves its zoo byte for byte as it was."""

from __future__ import annotations

import hashlib

from helpers import hwnas_main


def _files(zoo) -> dict[str, str]:
    return {
        p.relative_to(zoo).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(zoo.rglob("*"))
        if p.is_file()
    }


def test_a_train_zoo_search_run_again_leaves_its_zoo_byte_identical(tmp_path):
    """The rerun's weights came from the training cache (bit-identical), and every entry's
    weights note gained " (from hwnas's training cache)": a new model.onnx, card.json and
    README.md each time the cache answered. Where the weights came from is the log's."""
    out = tmp_path / "run"
    args = ["search", "--device", "pixel3", "--budget", "3", "--seed", "2", "--train-zoo",
            "--data", "digits", "--epochs", "1", "--out", out]  # fmt: skip
    r = hwnas_main(*args)
    assert r.returncode == 0, r.stderr
    first = _files(out / "zoo")
    assert len([f for f in first if f.endswith("model.onnx")]) == 2
    r = hwnas_main(*args)
    assert r.returncode == 0, r.stderr
    assert "weights from the training cache" in r.stderr + r.stdout
    assert _files(out / "zoo") == first
