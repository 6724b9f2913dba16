"""What bounds the hypervolume of a 100-query search on NAS-Bench-201: training noise among
cells that compute the same function, and what ``frontier``'s accuracy model can express.

For each unseen device of HELP's split (the hypervolume of ``search_quality.py``: objectives
normalised between the true front's ideal and nadir points, reference point (1.1, 1.1),
chance-level cells left out), prints:

- classes: cells with identical ``surrogate_features`` (the same live paths, so the same
  function family: ``hwnas.spaces.nasbench201``), and the median standard deviation of CIFAR-100
  accuracy (200 epochs) within a class of two or more cells: training noise that no model of the
  architecture can predict;
- denoised oracle: the Pareto front of class-mean accuracy vs latency (an oracle that knows
  every class's mean, none of the noise), its size and the hypervolume of its cells with their
  true accuracies;
- model fronts: the Pareto front of the accuracy *predicted* by a model fitted on N random
  cells (and on all 15,625), and that front's hypervolume with the true accuracies: ``frontier``'s
  Bayesian linear model (:class:`hwnas.engine.frontier.AccuracyModel`, on the same warped
  accuracies) and, for comparison, extremely randomised trees (scikit-learn, 200 trees). A
  model whose own front stays below 99% even with every accuracy known cannot point a search at
  the last points of the true front; the search gets beyond its model by exploring.
- with ``--low-fidelity``: what a multi-fidelity search (MOASHA's, Hyperband's) could learn
  from NAS-Bench-201's 12-epoch training: the front of the 12-epoch validation accuracy
  itself (as if every cell had been trained for 12 epochs, 937 queries' worth at 12/200 each),
  and the linear model given it as one more feature (standardised) for every cell.
- with ``--other-tasks``: what a prior from other tasks could give (a user searching this space
  for a new dataset has NAS-Bench-201's published accuracies on the others): the front of the
  200-epoch CIFAR-10 and ImageNet16-120 accuracies themselves, scored with CIFAR-100's (15,625
  full trainings' worth on another task each), and the linear model given both (standardised,
  times 3, as the zero-cost proxy is) as two more features of every cell.

- with ``--segments N``: where ``frontier``'s first 100 queries lose hypervolume, over N seeds
  (0..N-1): for each point of the true front (by latency), the stretch of the latency axis up
  to the next point, its cells, the mean hypervolume lost there (% of the true front's: the
  stretch's width times the accuracy gap between the true point and the best queried cell at
  or below its latency), that gap in points, and the queries spent on the stretch's cells.

    python experiments/front_ceiling.py [--sizes 100 300 1000 15625] [--low-fidelity]
                                        [--other-tasks] [--segments 10 [--budget 100]]

About 30 seconds on this project's 2-core VM.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

import search_quality as sq  # noqa: E402


def front_hv(t: dict, predicted: np.ndarray) -> tuple[int, float]:
    """Size and hypervolume % (true accuracies) of the front of ``predicted`` accuracy."""
    from hwnas.engine.pareto import pareto_mask

    valid = t["valid"]
    rows = np.flatnonzero(valid & pareto_mask(np.where(valid, predicted, -np.inf), t["lat"]))
    return len(rows), 100 * sq.hypervolume(t, rows) / t["hv"]


def segment_losses(device: str, seeds: int, budget: int) -> None:
    """Print where ``frontier``'s ``budget`` queries lose hypervolume on ``device`` (the
    module docstring's ``--segments``), means over ``seeds`` seeds."""
    t = sq.truth(device)
    acc, lat, valid = t["acc"], t["lat"], t["valid"]
    (l0, a0), (l1, a1) = t["ideal"], t["nadir"]
    front = sorted(t["front"], key=lambda r: (lat[r], -acc[r]))
    fl = np.array([lat[r] for r in front])
    fa = np.array([acc[r] for r in front])
    ends = np.append(fl[1:], l0 + sq.REFERENCE * (l1 - l0))
    floor = a0 - sq.REFERENCE * (a0 - a1)  # the reference point's accuracy
    lost, gap, spent, hv = np.zeros(len(front)), np.zeros(len(front)), np.zeros(len(front)), []
    for seed in range(seeds):
        q = sq.run_hwnas(device, "frontier", budget, seed, "table")
        hv.append(100 * sq.scores(t, q)["hv"])
        q = np.asarray([r for r in q if valid[r]], dtype=int)
        for i in range(len(front)):
            within = q[lat[q] <= fl[i]]
            g = max(fa[i] - max(acc[within].max() if len(within) else floor, floor), 0.0)
            # the true front's area over this stretch is width x (fa[i] - floor): the queried
            # staircase gives up width x g of it (both normalised as the hypervolume is)
            lost[i] += (ends[i] - fl[i]) / (l1 - l0) * g / (a0 - a1)
            gap[i] += g
            spent[i] += int(((lat[q] >= fl[i]) & (lat[q] < ends[i])).sum())
    print(f"{device}: hypervolume at {budget} queries, median of {seeds} seeds "
          f"{np.median(hv):.2f}% (mean {np.mean(hv):.2f}%)")  # fmt: skip
    print("| point | latency ms | accuracy % | cells in stretch | HV lost % | gap (points) "
          "| queries |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for i in range(len(front)):
        cells = int((valid & (lat >= fl[i]) & (lat < ends[i])).sum())
        print(f"| {i} | {fl[i]:.3f} | {fa[i]:.2f} | {cells} | "
              f"{100 * lost[i] / seeds / t['hv']:.3f} | {gap[i] / seeds:.2f} | "
              f"{spent[i] / seeds:.1f} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 15625])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--low-fidelity", action="store_true")
    parser.add_argument("--other-tasks", action="store_true")
    parser.add_argument("--segments", type=int, default=0, metavar="N")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--devices", nargs="+", default=sq.UNSEEN)
    args = parser.parse_args()
    if args.segments:
        for device in args.devices:
            segment_losses(device, args.segments, args.budget)
        return

    from sklearn.ensemble import ExtraTreesRegressor

    from hwnas.engine.frontier import AccuracyModel, warp
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    x = np.asarray(space.surrogate_features([space.arch_at(i) for i in range(len(space))]))
    _, cls = np.unique(x, axis=0, return_inverse=True)
    cls = cls.ravel()
    size = np.bincount(cls)
    acc = sq.truth(sq.UNSEEN[0])["acc"]
    mean = (np.bincount(cls, weights=acc) / size)[cls]
    spread = np.sqrt(np.bincount(cls, weights=(acc - mean) ** 2) / size)
    noisy = spread[size > 1]
    print(f"{len(space)} cells in {len(size)} classes of identical features; within-class "
          f"accuracy sd, classes of 2+: median {np.median(noisy):.2f} points, "
          f"90% {np.quantile(noisy, 0.9):.2f}")  # fmt: skip

    low12 = np.asarray(space.table_accuracy("cifar100", epochs=12), dtype=float)
    low = (low12 - low12.mean()) / low12.std()
    others = {name: np.asarray(space.table_accuracy(name), dtype=float)
              for name in ("cifar10", "imagenet16")}  # fmt: skip
    prior = np.column_stack([3 * (v - v.mean()) / v.std() for v in others.values()])
    if args.other_tasks:
        from scipy.stats import spearmanr

        valid = acc > 1.5 * sq.CHANCE
        top = acc > np.quantile(acc, 0.9)
        for name, v in others.items():
            print(f"{name} vs CIFAR-100 accuracy (200 epochs), Spearman rho: valid cells "
                  f"{spearmanr(v[valid], acc[valid])[0]:.3f}, top 10% "
                  f"{spearmanr(v[top], acc[top])[0]:.3f}")  # fmt: skip
    rng = np.random.default_rng(args.seed)
    fits = {}
    for n in args.sizes:
        rows = np.arange(len(acc)) if n >= len(acc) else rng.choice(len(acc), n, replace=False)
        y = warp(acc[rows], float(np.quantile(acc[rows], 0.7)))
        linear, _ = AccuracyModel(x).fit(rows, y).predict()
        trees = ExtraTreesRegressor(200, min_samples_leaf=2, n_jobs=2, random_state=args.seed)
        fits[n] = (linear, trees.fit(x[rows], acc[rows]).predict(x))
        if args.low_fidelity:
            fits[n] += (AccuracyModel(np.c_[x, low]).fit(rows, y).predict()[0],)
        if args.other_tasks:
            fits[n] += (AccuracyModel(np.c_[x, prior]).fit(rows, y).predict()[0],)

    kinds = ("linear", "trees")
    kinds += ("linear+12ep",) if args.low_fidelity else ()
    kinds += ("linear+other tasks",) if args.other_tasks else ()
    head = ["device", "oracle front", "oracle HV %"]
    head += ["12-epoch accuracy's own front HV %"] if args.low_fidelity else []
    head += [f"{name}'s own front HV %" for name in others] if args.other_tasks else []
    head += [f"{kind} {n}" for n in args.sizes for kind in kinds]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for device in sq.UNSEEN:
        t = sq.truth(device)
        n_oracle, hv_oracle = front_hv(t, mean)
        cells = [device, str(n_oracle), f"{hv_oracle:.2f}"]
        if args.low_fidelity:
            cells.append(f"{front_hv(t, low12)[1]:.2f}")
        if args.other_tasks:
            cells += [f"{front_hv(t, v)[1]:.2f}" for v in others.values()]
        for n in args.sizes:
            cells += [f"{front_hv(t, model)[1]:.2f}" for model in fits[n]]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
