"""`hwnas search --strategy exact`: the exact Pareto front of the recorded tables, through the
search pipeline, and a one-line refusal where the tables do not cover the space."""

from __future__ import annotations

import csv
import gzip
import json

import numpy as np
from helpers import hwnas_main

from hwnas.assets import asset_path


def _table(path, columns):
    with gzip.open(path, "rt") as fh:
        rows = list(csv.DictReader(fh))
    return [np.array([r[c] for r in rows], dtype=object if c == "arch" else float) for c in columns]


def _front(acc: np.ndarray, lat: np.ndarray) -> set[int]:
    """Brute-force non-dominated set (maximise acc, minimise lat), equal points kept."""
    order = np.lexsort((-acc, lat))  # by latency, the most accurate first among equals
    keep, best = [], -np.inf
    for i in order:
        if acc[i] > best or (keep and acc[i] == acc[keep[-1]] and lat[i] == lat[keep[-1]]):
            keep.append(i)
            best = max(best, acc[i])
    return set(keep)


def test_exact_strategy_gives_the_front_of_the_tables(tmp_path):
    archs, acc = _table(
        asset_path("search_spaces", "nasbench201", "accuracy.csv.gz"),
        ["arch", "cifar100_test_200ep"],
    )
    (lat,) = _table(asset_path("devices", "recorded", "nasbench201_latency_ms.csv.gz"), ["pixel3"])
    base = ["search", "--device", "pixel3", "--strategy", "exact", "--no-zoo"]
    for limit in (None, 8.0):
        out = tmp_path / f"run-{limit}"
        extra = [] if limit is None else ["--max-latency", str(limit)]
        r = hwnas_main(*base, *extra, "--out", str(out))
        assert r.returncode == 0, r.stderr
        rows = list(csv.DictReader(open(out / "pareto.csv")))
        inside = np.flatnonzero(lat <= (np.inf if limit is None else limit))
        expected = {archs[inside[i]] for i in _front(acc[inside], lat[inside])}
        assert {row["arch"] for row in rows} == expected and len(rows) == len(expected) > 5
        summary = json.loads((out / "summary.json").read_text())
        assert summary["trials"]["completed"] == len(expected)  # only the front is scored
        assert summary["best"]["accuracy"] == max(acc[inside])


def test_exact_strategy_without_tables_is_refused_in_one_line(tmp_path):
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "cpu", "--strategy", "exact", "--out", str(out))
    assert r.returncode == 2 and not out.exists()
    assert r.stderr.strip().splitlines() == [
        "error: --strategy exact needs accuracy and cost tabulated for every architecture: "
        "device 'cpu' has no recorded latency_ms table for space 'nasbench201' "
        "(`hwnas devices` lists the recorded ones)"
    ]


def test_exact_strategy_with_a_budget_below_the_front_is_refused_in_one_line(tmp_path):
    """`--strategy exact --budget 5` on the Pixel 3 scored the 5 cheapest of its 35 front
    architectures and called the most accurate of them best (62.21% against the front's
    73.51%), exit 0, no word; now refused before any work, naming the front's size."""
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pixel3", "--strategy", "exact", "--budget", "5",
                   "--out", str(out))  # fmt: skip
    assert r.returncode == 2 and not out.exists()
    assert r.stderr.strip().splitlines() == [
        "error: --strategy exact scores the exact front, 35 architectures here, more than "
        "--budget 5: give --budget 35 (or more)"
    ]
