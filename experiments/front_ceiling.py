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

    python experiments/front_ceiling.py [--sizes 100 300 1000 15625] [--low-fidelity]
                                        [--other-tasks]

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 300, 1000, 15625])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--low-fidelity", action="store_true")
    parser.add_argument("--other-tasks", action="store_true")
    args = parser.parse_args()

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
