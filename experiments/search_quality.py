"""Search quality on NAS-Bench-201: share of the true Pareto front recovered and regret.

For each unseen device of the standard split (HELP, NeurIPS 2021), each strategy and each
budget of accuracy queries, runs the search (in-memory Optuna study, the same engine as
`hwnas search`) over 10 seeds and prints the medians of:

- front %: share of the true CIFAR-100-accuracy/latency Pareto front (computed over all 15,625
  architectures) among the architectures the search queried;
- regret: mean over five latency budgets (the 10/30/50/70/90% latency quantiles of the space
  on that device) of (oracle accuracy - best queried accuracy within the budget), in points.

Baseline and goal: ../shared/ANCHORS.md section 3 (random, 300 queries: ~0% front, 1.3 points;
hwnas goal at 300 queries: >= 60% and <= 0.15 points).

    python experiments/search_quality.py [--seeds 10] [--budgets 300 1000]
        [--strategies nsga2 random] [--workers 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

UNSEEN = ["titan_rtx_256", "gold_6226", "fpga", "pixel2", "raspi4", "eyeriss"]
QUANTILES = (0.1, 0.3, 0.5, 0.7, 0.9)


def truth(device: str, dataset: str = "cifar100"):
    """True front (set of arch strings), latency budgets and oracle accuracy at each."""
    from hwnas.devices import get_device
    from hwnas.search.pareto import pareto_mask
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    acc = space.table_accuracy(dataset)
    lat = get_device(device).column("nasbench201", "latency_ms")
    archs = np.array([a.text for a in space.all_archs()], dtype=object)
    front = set(archs[pareto_mask(acc, lat)])
    budgets = np.quantile(lat, QUANTILES)
    oracle = [acc[lat <= b].max() for b in budgets]
    return front, budgets, oracle


def one_run(args: tuple[str, str, int, int]) -> tuple[str, str, int, int, float, float, float]:
    device, strategy, budget, seed = args
    from hwnas.devices import get_device
    from hwnas.measure import Profiler
    from hwnas.search.costs import CostContext, table_costs
    from hwnas.search.engine import SearchSettings, run_search
    from hwnas.search.evaluate import TableEvaluator
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    front, budgets, oracle = truth(device)
    evaluator = TableEvaluator(
        space, "cifar100", Profiler(get_device(device), None), ["latency_ms"]
    )
    settings = SearchSettings(
        space="nasbench201", device=device, budget=budget, strategy=strategy, seed=seed
    )
    device_obj = get_device(device)
    costs = CostContext(space, cost=table_costs(space, device_obj, "latency_ms"), budget=budget)
    t0 = time.perf_counter()
    result = run_search(settings, space, evaluator.evaluate, storage=None, costs=costs)
    elapsed = time.perf_counter() - t0
    queried = {r.arch: r for r in result.records}
    recovered = len(front & set(queried)) / len(front)
    regrets = []
    for b, o in zip(budgets, oracle):
        within = [r.accuracy for r in result.records if r.costs["latency_ms"] <= b]
        regrets.append(o - max(within) if within else o)
    return device, strategy, budget, seed, recovered, float(np.mean(regrets)), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budgets", type=int, nargs="+", default=[300, 1000])
    parser.add_argument("--strategies", nargs="+", default=["surrogate", "nsga2", "random"])
    parser.add_argument("--devices", nargs="+", default=UNSEEN)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()

    jobs = [
        (d, s, b, seed)
        for d in args.devices
        for s in args.strategies
        for b in args.budgets
        for seed in range(args.seeds)
    ]
    t0 = time.time()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(one_run, jobs, chunksize=1))
    by_key: dict[tuple[str, str, int], list] = {}
    for device, strategy, budget, _seed, rec, reg, el in results:
        by_key.setdefault((device, strategy, budget), []).append((rec, reg, el))

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"NAS-Bench-201 CIFAR-100 / latency: median over {args.seeds} seeds")
    table.add_column("strategy")
    table.add_column("queries", justify="right")
    for d in args.devices:
        table.add_column(f"{d}\nfront % | regret", justify="right")
    table.add_column("mean\nfront % | regret", justify="right")
    table.add_column("s/run", justify="right")
    for s in args.strategies:
        for b in args.budgets:
            cells, recs, regs, els = [], [], [], []
            for d in args.devices:
                rows = by_key[(d, s, b)]
                rec = statistics.median(r[0] for r in rows)
                reg = statistics.median(r[1] for r in rows)
                recs.append(rec)
                regs.append(reg)
                els += [r[2] for r in rows]
                cells.append(f"{100 * rec:5.1f} | {reg:.2f}")
            table.add_row(
                s,
                str(b),
                *cells,
                f"{100 * np.mean(recs):5.1f} | {np.mean(regs):.2f}",
                f"{statistics.median(els):.1f}",
            )
    Console(width=220).print(table)
    print(f"{len(jobs)} searches in {time.time() - t0:.0f} s with {args.workers} workers")


if __name__ == "__main__":
    main()
