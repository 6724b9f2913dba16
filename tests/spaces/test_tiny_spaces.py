"""A space of fewer architectures than the reference set's 10 has them all as its reference set
(``hwnas refset export/measure`` with no flags refused it, naming ``-n 10`` as the way), and a
space of fewer than a predictor's 3 calibration networks is searched by a supernet on a live
device with every network measured as its cost (it measured both, then failed: "need at least
3 measurements to adapt a predictor, got 2")."""

from __future__ import annotations

import csv

import numpy as np
from helpers import hwnas_main

SINGLE_DEC = """\
name: NAME
datasets: {cifar10: {classes: 10, input_shape: [3, 32, 32]}}
stages: [{out: 16, stride: 2, layer: {block: conv, kernel: {choices: [3, 5]}}}]
head: [{block: pool}]
"""

FOUR = """\
name: NAME
datasets: {cifar10: {classes: 10, input_shape: [3, 32, 32]}}
stages: [{out: {choices: [8, 16]}, stride: 2, layer: {block: conv, kernel: {choices: [3, 5]}}}]
head: [{block: pool}]
"""


def _rows(path):
    with open(path, newline="") as f:
        return [r["arch"] for r in csv.DictReader(f)]


def test_a_tiny_space_is_its_own_reference_set(tmp_path):
    (tmp_path / "single_dec.yaml").write_text(SINGLE_DEC.replace("NAME", "single_ref"))
    (tmp_path / "four.yaml").write_text(FOUR.replace("NAME", "four_ref"))
    r = hwnas_main("refset", "export", "--space", "four.yaml", "--out", "d4", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert len(set(_rows(tmp_path / "d4" / "calibration.csv"))) == 4
    r = hwnas_main("refset", "export", "--space", "four.yaml", "--out", "d3", "-n", "3",
                   cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2 and "its reference set is --select reference -n 4" in r.stderr
    r = hwnas_main("refset", "measure", "--space", "single_dec.yaml", "--device", "cpu-fast",
                   "--out", "m", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert _rows(tmp_path / "m" / "calibration.csv") == ["s0.0=3", "s0.0=5"]


def test_a_two_network_space_is_searched_on_a_live_device(tmp_path):
    (tmp_path / "single_dec.yaml").write_text(SINGLE_DEC.replace("NAME", "single_dec"))
    r = hwnas_main(
        "search", "--space", "single_dec.yaml", "--device", "cpu-fast", "--strategy", "oneshot",
        "--epochs", "1", "--finetune-epochs", "0", "--data", "digits", "--set", "limit=100",
        "--no-zoo", "--out", tmp_path / "run", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "space single_dec has 2 networks, too few to calibrate a predictor on" in r.stderr


def test_a_lookup_table_fits_the_whole_of_a_two_network_space(tmp_path):
    from hwnas.spaces import get_space
    from hwnas.supernet.cost import fit_lut

    (tmp_path / "single_dec.yaml").write_text(SINGLE_DEC.replace("NAME", "single_lut"))
    space = get_space(str(tmp_path / "single_dec.yaml"))
    archs = space.reference_archs()
    lut = fit_lut(space, archs, np.array([1.0, 2.0]), "latency_ms", "test")
    assert np.allclose(lut.predict(archs)[0], [1.0, 2.0], rtol=1e-3)
