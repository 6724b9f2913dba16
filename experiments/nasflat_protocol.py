"""NASFLAT's device splits and scoring (``help_protocol.py --protocol nasflat``).

NASFLAT (Akhauri & Abdelfattah, "On Latency Predictors for Neural Architecture Search", MLSys
2024; github.com/abdelfattah-lab/nasflat_latency, ``correlation_trainer/``):

- splits: ``device_task_list.py``, tasks 0-5 of each space
  (:data:`hwnas.predictors.data.NASFLAT_SPLITS`: ND, N1-N4, NA; FD, F1-F4, FA), as at the
  repository's head and at its results commit 488ecd6 (commits up to 0303057 tested FD on
  titanx_1/32/64 and gold_6240 instead of fpga, raspi4, eyeriss);
- meta-training: on the split's training devices only (every value of a training device is
  known to every method; the target device's are not), on every architecture of their tables
  (default), or ``--train-archs N`` drawn at random for each seed (``nasflat``: 900 on
  NAS-Bench-201 and 800 on FBNet, the source sample counts of NASFLAT's final runs,
  ``--sample_sizes``; NASFLAT's NAS-Bench-201 rows with 16 score within 0.01 of those);
- target samples: 5, 10 and 20 architectures of each test device, picked by NASFLAT's sampler
  (``--samplers nasflat``: :func:`hwnas.predictors.selection.select_nasflat`) or by hwnas's
  (``reference``: the 10 reference architectures, then random ones; ``active``: hwnas's active
  selection), among the architectures the device has a value for;
- scoring, both ways on the same predictions: NASFLAT's (``main_trf.py``: Spearman rho over
  every architecture of the space with a recorded value, the samples included: 15,625 or
  15,284 on Eagle devices, 5,000 on FBNet) and HELP's (its ``loader.py``: the 1,000
  architectures after the first 900 / 4,000, trimmed to the device's 10-90% latency range);
- repeats: seeds (default 1, 2, 3), each meta-training its own artifact and drawing its own
  samples; a split's rho is the mean over its test devices, reported per seed and as the mean
  over seeds.

Published numbers printed beside (all at ``git show 488ecd6:<file>`` of nasflat_latency, the
last commit that has the result CSVs; ``correlation_trainer/correlation_results/all_results/``):

- NASFLAT: ``aggr_study_6_5_f/nb201_samp_eff.csv`` (NAS-Bench-201; rows adj_gin_a2vcatezcp,
  sampler cate, transfer_hwemb) and ``aggr_study_6_5_f_900/nb201_samp_eff.csv`` (the same with
  900 source samples; the larger of the two rows is shown), ``aggr_study_6_5_f_zcp/
  fbnet_samp_eff.csv`` (FBNet, 20 samples only);
- HELP (NASFLAT's rerun): ``aggr_help_baselines_r/{nb201,fbnet}_samp_eff.csv`` (10 reference
  + 10 random samples; scored on every architecture within the device's 10-90% range);
- MultiPredict (NASFLAT's rerun): ``aggr_multipredict_baseline_r/{nasbench201,fbnet}_samp_eff.csv``
  (20 samples; its FD row was run on titanx_1/32/64 and gold_6240, not FD's test devices).
"""

from __future__ import annotations

import json
import time
import zlib
from pathlib import Path

import numpy as np

NASFLAT_RHO = {
    "ND": {5: 0.9144, 10: 0.9542, 20: 0.9603},
    "N1": {5: 0.8645, 10: 0.9243, 20: 0.9668},
    "N2": {5: 0.7135, 10: 0.8462, 20: 0.8573},
    "N3": {5: 0.868, 10: 0.9282, 20: 0.9616},
    "N4": {5: 0.875, 10: 0.8732, 20: 0.9594},
    "NA": {5: 0.8136, 10: 0.8837, 20: 0.8931},
    "FD": {20: 0.9611},
    "F1": {20: 0.8086},
    "F2": {20: 0.8714},
    "F3": {20: 0.8143},
    "F4": {20: 0.734},
    "FA": {20: 0.5773},
}
"""NASFLAT's Spearman rho (NASFLAT's scoring) per split and number of target samples: for
NAS-Bench-201 the larger of its two final-configuration rows (16 and 900 source samples; N3 and
N4 were run with 16 only), for FBNet its final row (20 samples only)."""

HELP_RHO_NASFLAT = {
    "ND": 0.9487, "N1": 0.6045, "N2": 0.5093, "N3": 0.7297, "N4": 0.7464, "NA": 0.4102,
    "FD": 0.9660, "F1": 0.7938, "F2": 0.5439, "F3": 0.4136, "F4": 0.7992, "FA": 0.4067,
}  # fmt: skip
"""HELP as rerun by NASFLAT (aggr_help_baselines_r: 10 reference + 10 random samples)."""

MULTIPREDICT_RHO = {
    "ND": 0.9301, "N1": 0.9709, "N2": 0.7576, "N3": 0.9477, "N4": 0.9528, "NA": 0.8202,
    "FD": 0.9443, "F1": 0.7565, "F2": 0.5672, "F3": 0.4348, "F4": 0.7637, "FA": 0.4701,
}  # fmt: skip
"""MultiPredict as rerun by NASFLAT (aggr_multipredict_baseline_r, 20 samples)."""

NASFLAT_TRAIN_ARCHS = {"nasbench201": 900, "fbnet": 800}
"""Source architectures per training device in NASFLAT's final runs (``--sample_sizes``;
``--train-archs nasflat`` uses them)."""

HELP_POOL = {"nasbench201": 900, "fbnet": 4000}
HELP_QUERY = 1000


def help_query(values: np.ndarray, space: str) -> np.ndarray:
    """HELP's scored set: the 1,000 architectures after its pool, those with a value, trimmed to
    the device's 10-90% latency range (``loader.py``'s ``remove_outlier``)."""
    q = np.arange(HELP_POOL[space], HELP_POOL[space] + HELP_QUERY)
    q = q[np.isfinite(values[q])]
    order = q[np.argsort(values[q], kind="stable")]
    return order[int(len(q) * 0.1) : int(len(q) * 0.9)]


def split_artifact(
    space, split, seed, train_archs, cache: Path, steps: int, console, splits=None
) -> Path:
    """An artifact meta-trained on the split's training devices (cached)."""
    from hwnas.predictors.data import NASFLAT_SPLITS, get_column

    NASFLAT_SPLITS = splits or NASFLAT_SPLITS  # noqa: N806
    from hwnas.predictors.train import meta_train, reuse_cached

    tag = "all" if train_archs == "all" else str(train_archs)
    out = cache / f"{space}-{split}-a{tag}-n{steps}-s{seed}"
    if reuse_cached(out):
        return out
    keys = list(NASFLAT_SPLITS[space][split]["train"])
    columns = [get_column(space, k) for k in keys]
    n_all = len(columns[0].values)
    rows = None
    if train_archs != "all":
        rows = sorted(
            np.random.default_rng(1000 + seed).choice(n_all, int(train_archs), replace=False)
        )
    t0 = time.time()
    meta_train(
        space, columns, out, out.name, seed=seed, steps=steps, rows=rows,
        rows_source=f"{tag} random architectures per device (NASFLAT split {split})",
        split={"meta_train": keys, "meta_test": list(NASFLAT_SPLITS[space][split]["test"]),
               "protocol": f"NASFLAT {split}"},
    )  # fmt: skip
    console.print(f"meta-trained {out.name} in {time.time() - t0:.0f} s")
    return out


def evaluate_split(
    space, split, seeds, samples, samplers, train_archs, cache, steps, console, splits=None
):
    """Scores of every (seed, sampler, n, device): {"nasflat": rho, "help": rho, ...}.

    ``splits`` replaces :data:`hwnas.predictors.data.NASFLAT_SPLITS` (tests use a small one).
    """
    from hwnas.predictors.data import NASFLAT_SPLITS, get_column

    NASFLAT_SPLITS = splits or NASFLAT_SPLITS  # noqa: N806
    from hwnas.predictors.meta import MetaPredictor
    from hwnas.predictors.metrics import scores
    from hwnas.predictors.selection import select
    from hwnas.spaces import get_space

    archs = get_space(space).all_archs()
    tests = list(NASFLAT_SPLITS[space][split]["test"])
    out = []
    for seed in seeds:
        artifact = split_artifact(space, split, seed, train_archs, cache, steps, console, splits)
        for d in tests:
            y = get_column(space, d).values
            measured = np.nonzero(np.isfinite(y) & (y > 0))[0]
            query = help_query(y, space)
            for sampler in samplers:
                for n in samples:
                    rng = np.random.default_rng([seed, n, zlib.crc32(d.encode())])
                    pred = MetaPredictor(artifact)
                    picks = select(sampler, space, n, measured, rng, predictor=pred)
                    pred.fit([archs[i] for i in picks], y[picks])
                    mean = pred.predict(archs)[0]
                    s_all = scores(mean[measured], y[measured])
                    out.append(
                        {
                            "split": split, "seed": seed, "device": d, "sampler": sampler,
                            "n": n, "nasflat": s_all["spearman_rho"],
                            "help": scores(mean[query], y[query])["spearman_rho"],
                            "acc_10pct": s_all["acc_10pct"], "picks": [int(i) for i in picks],
                        }
                    )  # fmt: skip
    return out


def _mean(rows, key):
    return float(np.mean([r[key] for r in rows])) if rows else float("nan")


def split_mean(rows, split, sampler, n, key, seed=None) -> float:
    """A split's rho: mean over its test devices (of one seed, or of every seed's mean)."""
    sel = [r for r in rows if r["split"] == split and r["sampler"] == sampler and r["n"] == n]
    if seed is not None:
        return _mean([r for r in sel if r["seed"] == seed], key)
    seeds = sorted({r["seed"] for r in sel})
    return float(np.mean([_mean([r for r in sel if r["seed"] == s], key) for s in seeds]))


def print_device_table(console, space, split, rows, samples, samplers) -> None:
    from rich.table import Table

    devices = list(dict.fromkeys(r["device"] for r in rows if r["split"] == split))
    table = Table(
        title=f"{space} {split}: rho per test device, mean of seeds (NASFLAT's scoring / "
        "HELP's scoring)"
    )
    table.add_column("device")
    for sampler in samplers:
        for n in samples:
            table.add_column(f"{sampler} n={n}", justify="right")
    for d in [*devices, "mean"]:
        cells = []
        for sampler in samplers:
            for n in samples:
                sel = [
                    r for r in rows
                    if r["split"] == split and r["sampler"] == sampler and r["n"] == n
                    and (d == "mean" or r["device"] == d)
                ]  # fmt: skip
                if d == "mean":
                    a = split_mean(rows, split, sampler, n, "nasflat")
                    b = split_mean(rows, split, sampler, n, "help")
                else:
                    a, b = _mean(sel, "nasflat"), _mean(sel, "help")
                cells.append(f"{a:.3f} / {b:.3f}")
        table.add_row(d, *cells)
    console.print(table)


def print_summary(console, rows, splits, samples, samplers) -> None:
    from rich.table import Table

    seeds = sorted({r["seed"] for r in rows})
    table = Table(
        title="NASFLAT's splits: split mean rho; hwnas = mean over seeds "
        f"({', '.join(map(str, seeds))}) [per seed]; NASFLAT's scoring unless marked HELP"
    )
    for col in ("split", "n", *[f"hwnas {s}" for s in samplers],
                *[f"hwnas {s} (HELP scoring)" for s in samplers],
                "NASFLAT", "hwnas - NASFLAT", "HELP (rerun, 20)", "MultiPredict (20)"):  # fmt: skip
        table.add_column(col, justify="left" if col == "split" else "right")
    for split in splits:
        for n in samples:
            cells = []
            for key in ("nasflat", "help"):
                for s in samplers:
                    per = [split_mean(rows, split, s, n, key, seed) for seed in seeds]
                    cells.append(
                        f"{np.mean(per):.3f} [{' '.join(f'{v:.3f}' for v in per)}]"
                    )
            ours = split_mean(rows, split, samplers[0], n, "nasflat")
            pub = NASFLAT_RHO.get(split, {}).get(n)
            table.add_row(
                split, str(n), *cells,
                "-" if pub is None else f"{pub:.3f}",
                "-" if pub is None else f"{ours - pub:+.3f}",
                f"{HELP_RHO_NASFLAT[split]:.3f}" if n == 20 else "",
                f"{MULTIPREDICT_RHO[split]:.3f}" if n == 20 else "",
            )  # fmt: skip
    console.print(table)


def run(args, console) -> None:
    from hwnas.predictors.data import NASFLAT_SPLITS

    splits = [s for s in args.splits if s in NASFLAT_SPLITS.get(args.space_of(s), {})]
    all_rows = []
    for split in splits:
        space = args.space_of(split)
        train_archs = args.train_archs or "all"
        if train_archs == "nasflat":
            train_archs = NASFLAT_TRAIN_ARCHS[space]
        t0 = time.time()
        rows = evaluate_split(
            space, split, args.seeds, args.samples, args.samplers, train_archs, args.cache,
            args.steps, console,
        )  # fmt: skip
        all_rows += rows
        print_device_table(console, space, split, rows, args.samples, args.samplers)
        console.print(f"{split}: {time.time() - t0:.0f} s")
        if args.results:
            args.results.parent.mkdir(parents=True, exist_ok=True)
            args.results.write_text(json.dumps(all_rows))
    print_summary(console, all_rows, splits, args.samples, args.samplers)
    first = args.samplers[0]
    missed = [
        (s, n, split_mean(all_rows, s, first, n, "nasflat") - NASFLAT_RHO[s][n])
        for s in splits for n in args.samples
        if n in NASFLAT_RHO.get(s, {})
        and split_mean(all_rows, s, first, n, "nasflat") < NASFLAT_RHO[s][n]
    ]  # fmt: skip
    console.print(
        f"hwnas ({first} sampler) >= NASFLAT on every split and sample count it published: "
        + ("met" if not missed else "MISSED on " + ", ".join(f"{s}@{n} ({g:+.3f})"
                                                              for s, n, g in missed))
    )  # fmt: skip
