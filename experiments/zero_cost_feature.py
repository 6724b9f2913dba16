"""A zero-cost proxy as one more feature of ``frontier``'s accuracy model, on NAS-Bench-201:
the default's features against the same without the proxy's column, and the script that makes
the shipped SynFlow table.

SynFlow (Tanaka et al., NeurIPS 2020; as a zero-cost proxy: Abdelfattah et al., ICLR 2021;
:mod:`hwnas.spaces.zero_cost`) is computed for every cell at its random initialisation
(``torch.manual_seed(0)``, CIFAR-100 network, float64, batch norm in eval mode, so the identity
at initialisation): weights replaced by their absolute values, an all-ones input, the output
summed and back-propagated, and the score is the sum of |weight x gradient| over every
convolution and linear layer. It needs no data and no training: 62 ms a cell on one core of
this project's VM, 16 minutes for the 15,625. ``NasBench201Space.surrogate_features`` ends with
its logarithm (averaged over cells computing the same function, standardised, times
``ZERO_COST_WEIGHT``), read from ``search_spaces/nasbench201/synflow.csv.gz``.

The comparison: ``frontier`` searches each device's table as in ``search_quality.py`` (same
hypervolume, front share and regret) with the default features and with the last column left
out, and the script prints the medians over ``--seeds`` seeds per device.

    python experiments/zero_cost_feature.py [--seeds 10] [--budgets 100 300] [--workers 2]
        [--devices ...]
    python experiments/zero_cost_feature.py --write-table search_spaces/nasbench201/synflow.csv.gz
        [--workers 2]      # computes SynFlow for every cell (about 9 minutes with 2 workers)

Measured 2026-11-27: see docs/benchmarks.md, "Search quality".
"""

from __future__ import annotations

import argparse
import gzip
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import search_quality as sq  # noqa: E402


def _scores(bounds: tuple[int, int]) -> np.ndarray:
    import torch

    from hwnas.spaces import get_space
    from hwnas.spaces.zero_cost import synflow_of_cell

    torch.set_num_threads(1)
    space = get_space("nasbench201")
    return np.array([synflow_of_cell(space, i) for i in range(*bounds)])


def write_table(path: Path, workers: int) -> None:
    """SynFlow of every NAS-Bench-201 cell, computed, into the CSV (gzip) ``path``."""
    edges = np.linspace(0, 15625, 8 * workers + 1).astype(int)
    with ProcessPoolExecutor(workers) as pool:
        column = np.concatenate(list(pool.map(_scores, zip(edges[:-1], edges[1:]))))
    text = "index,synflow\n" + "".join(f"{i},{v:.10g}\n" for i, v in enumerate(column))
    with open(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(text.encode())


def _run(job: tuple[str, int, int, bool]) -> tuple[str, int, float, float, float]:
    device, seed, budget, proxy = job
    from hwnas.spaces.nasbench201 import NasBench201Space

    # a worker process runs many jobs: patch from the class's own method every time
    cls = NasBench201Space
    default = cls.__dict__.get("_default_features", cls.surrogate_features)
    cls._default_features = default
    if proxy:
        NasBench201Space.surrogate_features = default
    else:

        def paths_only(self, archs):
            return default(self, archs)[:, :-1]

        NasBench201Space.surrogate_features = paths_only
    queried = sq.run_hwnas(device, "frontier", budget, seed, "table")
    s = sq.scores(sq.truth(device), queried)
    return device, budget, 100 * s["hv"], 100 * s["recall"], s["regret"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--devices", nargs="+", default=sq.UNSEEN)
    parser.add_argument("--write-table", type=Path, default=None, metavar="CSV_GZ")
    args = parser.parse_args()

    start = time.time()
    if args.write_table:
        write_table(args.write_table, args.workers)
        print(f"wrote {args.write_table} in {time.time() - start:.0f} s")
        return
    from scipy.stats import spearmanr

    from hwnas.spaces import get_space

    score = get_space("nasbench201").synflow_scores()
    acc = sq.truth(sq.UNSEEN[0])["acc"]
    valid = acc > 1.5 * sq.CHANCE
    print(f"SynFlow vs CIFAR-100 accuracy, Spearman rho over the valid cells: "
          f"{spearmanr(score[valid], acc[valid])[0]:.3f}")  # fmt: skip
    jobs = [
        (device, seed, budget, proxy)
        for proxy in (False, True)
        for budget in args.budgets
        for device in args.devices
        for seed in range(args.seeds)
    ]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(_run, jobs))
    k = 0
    print("| features | queries | " + " | ".join(args.devices) + " | mean | worst |")
    print("|" + "---|" * (len(args.devices) + 4))
    for label in ("paths", "paths + SynFlow (default)"):
        for budget in args.budgets:
            chunk = results[k : k + len(args.devices) * args.seeds]
            k += len(chunk)
            for name, i, fmt in (("HV %", 2, ".2f"), ("front %", 3, ".1f"), ("regret", 4, ".2f")):
                med = [np.median([r[i] for r in chunk if r[0] == d]) for d in args.devices]
                worst = max(med) if name == "regret" else min(med)
                cells = [f"{v:{fmt}}" for v in (*med, np.mean(med), worst)]
                print(f"| {label}: {name} | {budget} | " + " | ".join(cells) + " |")
    print(f"done in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
