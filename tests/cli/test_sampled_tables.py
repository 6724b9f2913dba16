"""A search with the user's accuracy over FBNet or OFA on a recorded device: its table prices a
sample of 5,000 of the space's 1e20 architectures (a search audit: `hwnas search --device pixel3
--space fbnet --accuracy acc.py:accuracy` stopped with "no candidate architecture has a known
cost to search on" under `frontier`, and after the first proposal under every other strategy,
"... is not among the 5000 sampled architectures with recorded measurements")."""

from __future__ import annotations

import csv
import json

from helpers import hwnas_main

ACCURACY = '''
import hashlib


def accuracy(model, arch):
    """A stand-in for the user's training: a deterministic accuracy (%) per architecture."""
    h = int(hashlib.sha256(arch.text.encode()).hexdigest()[:8], 16)
    return 40.0 + 40.0 * h / 0xFFFFFFFF
'''


def test_a_cost_aware_search_takes_its_candidates_from_the_recorded_sample(tmp_path, hwnas_home):
    from hwnas.devices import get_device
    from hwnas.spaces import get_space

    (tmp_path / "acc.py").write_text(ACCURACY)
    args = ["--budget", "12", "--no-zoo", "--accuracy", "acc.py:accuracy", "--out", "run"]
    r = hwnas_main("search", "--device", "pixel3", "--space", "fbnet", *args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["trials"]["completed"] == 12
    space, column = get_space("fbnet"), get_device("pixel3").table("fbnet", "latency_ms")
    rows = list(csv.DictReader(open(tmp_path / "run" / "pareto.csv")))
    assert rows
    for row in rows:  # each front member is a recorded architecture, at its recorded latency
        index = space.index(space.parse(row["arch"]))
        assert float(row["latency_ms"]) == float(column[index])


def test_a_strategy_proposing_from_the_whole_space_is_refused_before_any_trial(
    tmp_path, hwnas_home
):
    (tmp_path / "acc.py").write_text(ACCURACY)
    for strategy in ("nsga2", "random"):
        r = hwnas_main("search", "--device", "pixel3", "--space", "fbnet", "--budget", "12",
                       "--no-zoo", "--accuracy", "acc.py:accuracy", "--strategy", strategy,
                       cwd=tmp_path)  # fmt: skip
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr == (
            "error: the latency_ms table of device 'pixel3' holds 5,000 of the 9.848e+20 "
            f"architectures of fbnet, and strategy '{strategy}' proposes from all of them; use "
            "--strategy frontier or surrogate, which search the architectures the table holds\n"
        )
    assert not (hwnas_home / "studies.db").exists() and not (tmp_path / "runs").exists()


def test_the_same_accuracy_file_typed_from_another_folder_resumes_its_study(
    tmp_path, hwnas_home
):
    """`--accuracy ../acc.py:accuracy` from run/ and `--accuracy acc.py:accuracy` from its
    folder name the same file: the second was refused as "made by a different search
    (accuracy '../acc.py:accuracy' there, 'acc.py:accuracy' here)" (helper-48); it resumes
    now. Another function of the file is still another search."""
    (tmp_path / "acc.py").write_text(ACCURACY + "\n\ndef other(model, arch):\n    return 50.0\n")
    (tmp_path / "run").mkdir()
    base = ["search", "--device", "pixel3", "--space", "fbnet", "--no-zoo", "--study", "s"]
    r = hwnas_main(*base, "--budget", "4", "--accuracy", "../acc.py:accuracy", "--out", "out",
                   cwd=tmp_path / "run")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = hwnas_main(*base, "--budget", "6", "--accuracy", "acc.py:accuracy", "--out", "run/out",
                   "--json", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["trials"]["completed"] == 6
    r = hwnas_main(*base, "--budget", "6", "--accuracy", "acc.py:other", "--out", "run/out",
                   cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2 and "made by a different search (accuracy" in r.stderr, r.stderr


def test_a_named_study_is_resumed_on_its_data_only_wherever_that_is_mounted(tmp_path, hwnas_home):
    """`--study dd --data d2/imgs` resumed the study of `--data d1/imgs`, other images in a
    folder of the same name (the study recorded the name alone): two datasets' accuracies on one
    front, exit 0. The study records the data's content now: other images are refused in one
    line, the same images at another path (another worker's mount) resume it."""
    import shutil

    import numpy as np
    from PIL import Image

    for seed, root in enumerate((tmp_path / "d1" / "imgs", tmp_path / "d2" / "imgs")):
        rng = np.random.default_rng(seed)
        for cls in ("a", "b"):
            (root / cls).mkdir(parents=True)
            for i in range(4):
                pixels = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
                Image.fromarray(pixels).save(root / cls / f"{i}.png")
    shutil.copytree(tmp_path / "d1" / "imgs", tmp_path / "mnt" / "w2" / "imgs")
    (tmp_path / "acc.py").write_text(
        "def accuracy(model, arch, data):\n    return float(data.train.x.mean() > 0) + 50.0\n"
    )
    base = ["search", "--device", "pixel3", "--space", "fbnet", "--no-zoo", "--study", "dd",
            "--accuracy", "acc.py:accuracy", "--out", "run"]  # fmt: skip
    r = hwnas_main(*base, "--budget", "3", "--data", "d1/imgs", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = hwnas_main(*base, "--budget", "5", "--data", "d2/imgs", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("error: study 'dd' in this storage was made by a different search "
                           "(data_identity 'imgs-d"), line  # fmt: skip
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["trials"]["completed"] == 3
    r = hwnas_main(*base, "--budget", "5", "--data", "mnt/w2/imgs", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["trials"]["completed"] == 5
