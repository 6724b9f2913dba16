"""A zero-cost proxy as one more feature of ``frontier``'s accuracy model, on NAS-Bench-201
(tried for issue 21's hypervolume goal; not adopted).

SynFlow (Tanaka et al., NeurIPS 2020; as a zero-cost proxy: Abdelfattah et al., ICLR 2021) is
computed for every cell at its random initialisation (``torch.manual_seed(0)``, CIFAR-100
network, float64, batch norm in eval mode, so the identity at initialisation): weights replaced
by their absolute values, an all-ones input, the output summed and back-propagated, and the
score is the sum of |weight x gradient| over every convolution and linear layer. It needs no
data and no training: 62 ms a cell on one core of this project's VM, 16 minutes for the
15,625 (cached in ``--cache``). Its logarithm, standardised over the space and scaled by
``--scale``, is appended to ``surrogate_features``; ``frontier`` then searches each unseen
device's table as in ``search_quality.py`` (same hypervolume, front share and regret), with and
without the column, and the script prints the medians over ``--seeds`` seeds per device.

    python experiments/zero_cost_feature.py [--seeds 10] [--budgets 100 300] [--scale 3]
        [--cache synflow_nasbench201.npy] [--workers 2]

Measured 2026-11-27 (10 seeds): see docs/benchmarks.md, "Search quality".
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import search_quality as sq  # noqa: E402


def synflow(net, shape=(1, 3, 32, 32)) -> float:
    """SynFlow score of ``net`` (see the module docstring)."""
    import torch

    net = net.double().eval()
    with torch.no_grad():
        for p in net.parameters():
            p.abs_()
    net.zero_grad()
    out = net(torch.ones(shape, dtype=torch.float64))
    out = out[0] if isinstance(out, (tuple, list)) else out
    out.sum().backward()
    score = 0.0
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.weight.grad is not None:
                score += float((m.weight * m.weight.grad).abs().sum())
    return score


def _scores(bounds: tuple[int, int]) -> np.ndarray:
    import torch

    from hwnas.spaces import get_space

    torch.set_num_threads(1)
    space = get_space("nasbench201")
    out = np.zeros(bounds[1] - bounds[0])
    for k, i in enumerate(range(*bounds)):
        torch.manual_seed(0)
        out[k] = synflow(space.build(space.arch_at(i), "cifar100"))
    return out


def synflow_column(cache: Path, workers: int) -> np.ndarray:
    """SynFlow of every NAS-Bench-201 cell (15,625,), from ``cache`` or computed into it."""
    if cache.is_file():
        return np.load(cache)
    edges = np.linspace(0, 15625, 8 * workers + 1).astype(int)
    with ProcessPoolExecutor(workers) as pool:
        parts = list(pool.map(_scores, zip(edges[:-1], edges[1:])))
    column = np.concatenate(parts)
    np.save(cache, column)
    return column


def _run(job: tuple[str, int, int, np.ndarray | None]) -> tuple[str, int, float, float, float]:
    device, seed, budget, extra = job
    from hwnas.spaces.nasbench201 import NasBench201Space

    # a worker process runs many jobs: patch from the class's own method every time, so the
    # column is appended once (or not at all), whatever the process ran before
    plain = NasBench201Space.__dict__.get("_plain_features", NasBench201Space.surrogate_features)
    NasBench201Space._plain_features = plain
    if extra is None:
        NasBench201Space.surrogate_features = plain
    else:

        def with_proxy(self, archs):
            rows = [self.index(a) for a in archs]
            return np.hstack([plain(self, archs), extra[rows][:, None]])

        NasBench201Space.surrogate_features = with_proxy
    queried = sq.run_hwnas(device, "frontier", budget, seed, "table")
    s = sq.scores(sq.truth(device), queried)
    return device, budget, 100 * s["hv"], 100 * s["recall"], s["regret"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budgets", type=int, nargs="+", default=[100, 300])
    parser.add_argument("--scale", type=float, default=3.0)
    parser.add_argument("--cache", type=Path, default=Path("synflow_nasbench201.npy"))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    start = time.time()
    raw = np.log(synflow_column(args.cache, args.workers) + 1e-30)
    finite = raw > -60  # cells whose output ignores the input score 0
    raw = np.where(finite, raw, raw[finite].min())
    column = args.scale * (raw - raw.mean()) / raw.std()
    acc = sq.truth(sq.UNSEEN[0])["acc"]
    valid = acc > 1.5 * sq.CHANCE
    from scipy.stats import spearmanr

    print(f"SynFlow vs CIFAR-100 accuracy, Spearman rho over the valid cells: "
          f"{spearmanr(raw[valid], acc[valid])[0]:.3f}")  # fmt: skip
    jobs = [
        (device, seed, budget, extra)
        for extra in (None, column)
        for budget in args.budgets
        for device in sq.UNSEEN
        for seed in range(args.seeds)
    ]
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(_run, jobs))
    k = 0
    print("| features | queries | " + " | ".join(sq.UNSEEN) + " | mean | worst |")
    print("|" + "---|" * (len(sq.UNSEEN) + 4))
    for label in ("paths", "paths + SynFlow"):
        for budget in args.budgets:
            chunk = results[k : k + len(sq.UNSEEN) * args.seeds]
            k += len(chunk)
            for name, i, fmt in (("HV %", 2, ".2f"), ("front %", 3, ".1f"), ("regret", 4, ".2f")):
                med = [np.median([r[i] for r in chunk if r[0] == d]) for d in sq.UNSEEN]
                worst = max(med) if name == "regret" else min(med)
                cells = [f"{v:{fmt}}" for v in (*med, np.mean(med), worst)]
                print(f"| {label}: {name} | {budget} | " + " | ".join(cells) + " |")
    print(f"done in {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
