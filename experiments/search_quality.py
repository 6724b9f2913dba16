"""Search quality on NAS-Bench-201: share of the true Pareto front recovered, regret, and
queries to 60% of the front, strategy by strategy, on the same protocol.

For each unseen device of the standard split (HELP, NeurIPS 2021), each strategy and each
budget of accuracy queries, runs the search (in-memory Optuna study, the same engine as
`hwnas search`) over ``--seeds`` seeds and prints the medians of:

- front %: share of the true CIFAR-100-accuracy/latency Pareto front (computed over all 15,625
  architectures) among the architectures the search queried (200-epoch accuracies);
- regret: mean over five latency budgets (the 10/30/50/70/90% latency quantiles of the space
  on that device) of (oracle accuracy - best queried accuracy within the budget), in points;
- q60: in the run with the largest budget, the number of accuracy queries after which the
  queried architectures first hold 60% of the true front (">N" when that run never does);
- s/run: median seconds of one search (run_search alone, as a user's process would spend
  beyond the imports; the table lookups are part of it).

Strategies are hwnas's table strategies by name (``hwnas search --strategy``): ``frontier``
(the default), ``surrogate``, ``nsga2``, ``random``, Optuna's NSGA-III (``nsga3``), TPE
(``tpe``, multivariate, multi-objective) and GP (``gp``) samplers, and aging evolution
(``aging``).

``--costs predicted`` gives cost-aware strategies the latencies predicted by
``nasbench201-help`` calibrated on the device's 10 reference architectures instead of the
device's table, while every queried architecture is still scored with its true latency: a live
device (``--device cpu``) searched with predicted costs for selection (the reference set
measured first).

Baseline and goal: ../shared/ANCHORS.md section 3 (random, 300 queries: ~0% front, 1.3 points;
hwnas goal at 300 queries: >= 60% and <= 0.15 points on each device).

    python experiments/search_quality.py [--seeds 10] [--budgets 300 1000]
        [--strategies frontier surrogate nsga2 random] [--devices ...] [--workers 2]
        [--costs table|predicted]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

UNSEEN = ["titan_rtx_256", "gold_6226", "fpga", "pixel2", "raspi4", "eyeriss"]
QUANTILES = (0.1, 0.3, 0.5, 0.7, 0.9)
RECALL_GOAL = 0.6


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


def predicted_costs(space, device: str):
    """``nasbench201-help`` calibrated on the device's reference-set latencies (table reads)."""
    from hwnas.devices import get_device
    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import reference_indices
    from hwnas.search.costs import calibrate

    column = get_device(device).column("nasbench201", "latency_ms")
    refs = list(reference_indices("nasbench201"))
    archs = [space.arch_at(i) for i in refs]
    predictor = load_predictor("nasbench201-help", "nasbench201")
    return calibrate(predictor, space, archs, column[refs], "latency_ms")


def one_run(args: tuple[str, str, int, int, str]) -> dict:
    device, strategy, budget, seed, cost_kind = args
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
    if cost_kind == "predicted":
        cost = predicted_costs(space, device)
    else:
        cost = table_costs(space, device_obj, "latency_ms")
    costs = CostContext(space, cost=cost, budget=budget)
    t0 = time.perf_counter()
    result = run_search(settings, space, evaluator.evaluate, storage=None, costs=costs)
    elapsed = time.perf_counter() - t0
    records = sorted(result.records, key=lambda r: r.number)
    queried = {r.arch for r in records}
    recovered = len(front & queried) / len(front)
    regrets = []
    for b, o in zip(budgets, oracle):
        within = [r.accuracy for r in records if r.costs["latency_ms"] <= b]
        regrets.append(o - max(within) if within else o)
    hits = np.cumsum([r.arch in front for r in records])
    reached = np.flatnonzero(hits >= RECALL_GOAL * len(front))
    q60 = int(reached[0]) + 1 if len(reached) else None
    return {
        "device": device,
        "strategy": strategy,
        "budget": budget,
        "seed": seed,
        "recall": recovered,
        "regret": float(np.mean(regrets)),
        "seconds": elapsed,
        "q60": q60,
        "queries": len(records),
    }


def q60_text(values: list[int | None], budget: int) -> str:
    """Median queries to 60% over seeds (a run that never got there counts as infinite)."""
    med = statistics.median([np.inf if v is None else v for v in values])
    return f">{budget}" if not np.isfinite(med) else f"{med:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budgets", type=int, nargs="+", default=[300, 1000])
    parser.add_argument(
        "--strategies", nargs="+", default=["frontier", "surrogate", "nsga2", "random"]
    )
    parser.add_argument("--devices", nargs="+", default=UNSEEN)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--costs", choices=["table", "predicted"], default="table")
    args = parser.parse_args()

    jobs = [
        (d, s, b, seed, args.costs)
        for s in args.strategies
        for b in args.budgets
        for d in args.devices
        for seed in range(args.seeds)
    ]
    t0 = time.time()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(one_run, jobs, chunksize=1))
    by_key: dict[tuple[str, str, int], list[dict]] = {}
    for r in results:
        by_key.setdefault((r["device"], r["strategy"], r["budget"]), []).append(r)

    from rich.console import Console
    from rich.table import Table

    top = max(args.budgets)
    title = (
        f"NAS-Bench-201 CIFAR-100 / latency ({args.costs} costs for selection): median over "
        f"{args.seeds} seeds; cells: front % | regret (points); q60 from the {top}-query runs"
    )
    table = Table(title=title)
    table.add_column("strategy")
    table.add_column("queries", justify="right")
    for d in args.devices:
        table.add_column(d, justify="right")
    table.add_column("mean", justify="right")
    table.add_column("worst", justify="right")
    table.add_column("s/run", justify="right")
    for s in args.strategies:
        for b in args.budgets:
            cells, recs, regs, secs = [], [], [], []
            for d in args.devices:
                rows = by_key[(d, s, b)]
                rec = statistics.median(r["recall"] for r in rows)
                reg = statistics.median(r["regret"] for r in rows)
                recs.append(rec)
                regs.append(reg)
                secs += [r["seconds"] for r in rows]
                cells.append(f"{100 * rec:5.1f} | {reg:.2f}")
            table.add_row(
                s,
                str(b),
                *cells,
                f"{100 * np.mean(recs):5.1f} | {np.mean(regs):.2f}",
                f"{100 * min(recs):5.1f} | {max(regs):.2f}",
                f"{statistics.median(secs):.2f}",
            )
        q60 = [q60_text([r["q60"] for r in by_key[(d, s, top)]], top) for d in args.devices]
        table.add_row(s, "q60", *q60, "", "", "")
    Console(width=240).print(table)
    print(f"{len(jobs)} searches in {time.time() - t0:.0f} s with {args.workers} workers")


if __name__ == "__main__":
    main()
