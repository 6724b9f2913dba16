"""Latency-constrained search on unseen devices with at most 20 device measurements
(ANCHORS.md section 2; HELP Table 4, MetaD2A + HELP with 10 target samples).

For each of the 15 (device, latency constraint) cases, hwnas searches NAS-Bench-201 for the most
accurate CIFAR-100 architecture (200-epoch test accuracy) on a recorded device treated as a new
one: ``--measurement-budget 20`` lets the search read only 20 of the device's table values (10
reference architectures to adapt the ``nasbench201-help`` predictor, which never saw these
devices, and up to 10 to verify candidates). The returned architecture is the most accurate
candidate whose *measured* latency meets the constraint: candidates are measured most accurate
first until one meets it, then the measurements left go to more accurate candidates that may
still meet it (the predictor is re-adapted after each measurement; ``hwnas.engine.fewshot``).
Search modes:

- a strategy (``--strategies``, default ``frontier surrogate nsga2``; ``frontier`` is what
  ``hwnas search`` runs by default) with the default budget of 300 accuracy queries: the same
  engine and evaluator as
  ``hwnas search --device D --max-latency C --measurement-budget 20 --strategy S``;
- exhaustive: every one of the 15,625 architectures is predicted (15,625 accuracy-table
  queries), which isolates the predictor's quality from the search strategy's.

Oracle: the most accurate architecture whose recorded latency meets the constraint.

    python experiments/latency_constrained.py [--seeds 1] [--budget 300] [--measurements 20]
        [--strategies frontier surrogate nsga2] [--costs predicted|table]

``--costs table`` searches each case with the device's own table as the costs (nothing
measured, no predictor): the strategy alone, e.g. ``--costs table --budget 60 --seeds 5
--strategies frontier``.

Takes about 2 minutes per seed and strategy.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

CASES = {
    "titan_rtx_256": (18, 21, 25),
    "gold_6226": (8, 11, 14),
    "pixel2": (14, 18, 22),
    "eyeriss": (5, 7, 9),
    "fpga": (4, 5, 6),
}
HELP = {  # (latency ms, CIFAR-100 accuracy %) of MetaD2A + HELP's architecture, ANCHORS.md
    ("titan_rtx_256", 18): (17.8, 69.7),
    ("titan_rtx_256", 21): (18.9, 71.5),
    ("titan_rtx_256", 25): (24.2, 71.8),
    ("gold_6226", 8): (8.0, 67.3),
    ("gold_6226", 11): (10.7, 70.2),
    ("gold_6226", 14): (14.3, 72.1),
    ("pixel2", 14): (13, 69.7),
    ("pixel2", 18): (19, 71.8),
    ("pixel2", 22): (25, 73.2),
    ("eyeriss", 5): (3.9, 71.5),
    ("eyeriss", 7): (5.1, 71.8),
    ("eyeriss", 9): (9.1, 73.5),
    ("fpga", 4): (3.8, 70.2),
    ("fpga", 5): (4.7, 71.8),
    ("fpga", 6): (7.4, 73.5),
}


def one_case(device: str, limit: float, mode: str, seed: int, budget: int, measurements: int):
    """(measured latency, accuracy, device measurements, accuracy queries) of the result;
    ``mode`` is a strategy name or "exhaustive"."""
    from hwnas.cost_record import CostRecord
    from hwnas.devices import get_device
    from hwnas.engine.fewshot import (
        FewShotPlan,
        MeasurementBudget,
        PredictedEvaluator,
        adapt_all,
        calibration_archs,
        run_fewshot,
        verify,
    )
    from hwnas.engine.loop import SearchResult, SearchSettings, TrialRecord
    from hwnas.measure import Profiler
    from hwnas.predictors import load_predictor
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    settings = SearchSettings(
        space="nasbench201",
        device=device,
        max_latency=limit,
        budget=budget,
        seed=seed,
        strategy=mode if mode != "exhaustive" else "nsga2",
    )
    plan = FewShotPlan(
        load_predictor("nasbench201-help", "nasbench201"),
        "nasbench201-help",
        measurements,
        ["latency_ms"],
    )
    profiler = Profiler(get_device(device), None)
    if mode != "exhaustive":
        result, extra, ev = run_fewshot(settings, space, profiler, plan, storage=None)
        best = result.best
        return (
            best.costs["latency_ms"].value if best else float("nan"),
            best.accuracy if best else float("nan"),
            extra["device_measurements"],
            ev.accuracy_queries,
        )
    budget_ = MeasurementBudget(profiler, space, "cifar100", ["latency_ms"], measurements)
    for arch in calibration_archs(space, budget_, True):
        budget_.measure(arch)
    ev = PredictedEvaluator(space, "cifar100", adapt_all(plan, budget_), plan.predictor.name)
    archs = space.all_archs()
    lat, sd = ev.costs(archs)["latency_ms"]
    acc = space.table_accuracy("cifar100")
    source = f"predicted:{plan.predictor.name}"
    records = [
        TrialRecord(i, a.text, float(acc[i]),
                    {"latency_ms": CostRecord.predicted("latency_ms", lat[i], sd[i], source)}, {})
        for i, a in enumerate(archs)
    ]  # fmt: skip
    result = SearchResult(settings, records, [], None, len(records), len(records))
    _log, best = verify(settings, result, ev, budget_, plan, True)
    return (
        best.costs["latency_ms"].value if best else float("nan"),
        best.accuracy if best else float("nan"),
        budget_.used,
        len(archs),
    )


def table_case(device: str, limit: float, strategy: str, seed: int, budget: int):
    """:func:`one_case` with the device's table as the costs (``--costs table``): every
    candidate's latency is known, nothing is measured; what is compared is the strategy."""
    from hwnas.devices import get_device
    from hwnas.engine.costs import CostContext, table_costs
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import SearchSettings, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    space, dev = get_space("nasbench201"), get_device(device)
    settings = SearchSettings(space="nasbench201", device=device, budget=budget,
                              strategy=strategy, max_latency=float(limit), seed=seed)  # fmt: skip
    ev = TableEvaluator(space, "cifar100", Profiler(dev, None), ["latency_ms"])
    costs = CostContext(space, cost=table_costs(space, dev, "latency_ms"),
                        max_latency=float(limit), budget=budget)  # fmt: skip
    best = run_search(settings, space, ev.evaluate, costs=costs).best
    return best.costs["latency_ms"].value, best.accuracy, 0, budget


def oracle(device: str, limit: float) -> float:
    from hwnas.devices import get_device
    from hwnas.spaces import get_space

    acc = get_space("nasbench201").table_accuracy("cifar100")
    lat = get_device(device).column("nasbench201", "latency_ms")
    return float(acc[lat <= limit].max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=1, help="seeds of each strategy's search")
    parser.add_argument("--budget", type=int, default=300, help="accuracy queries per search")
    parser.add_argument("--measurements", type=int, default=20, help="device measurement cap")
    parser.add_argument("--strategies", nargs="+", default=["frontier", "surrogate", "nsga2"])
    parser.add_argument(
        "--costs",
        choices=("predicted", "table"),
        default="predicted",
        help="predicted: a new device, nasbench201-help adapted on its measurements (the "
        "protocol above); table: the device's own table, nothing measured, no exhaustive row",
    )
    args = parser.parse_args()
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)

    from rich.console import Console
    from rich.table import Table

    t0 = time.time()
    modes = [*args.strategies, "exhaustive"] if args.costs == "predicted" else args.strategies
    case = one_case if args.costs == "predicted" else (
        lambda d, c, m, s, b, _n: table_case(d, c, m, s, b))  # fmt: skip
    rows = []
    for device, limits in CASES.items():
        for limit in limits:
            runs = {
                m: [
                    case(device, limit, m, s, args.budget, args.measurements)
                    for s in (range(args.seeds) if m != "exhaustive" else [0])
                ]
                for m in modes
            }
            rows.append((device, limit, oracle(device, limit), runs))

    table = Table(
        title=(
            "NAS-Bench-201 CIFAR-100, latency-constrained search on unseen devices, "
            + (f"predictor nasbench201-help, at most {args.measurements} device measurements, "
               if args.costs == "predicted" else "costs from the device's table, ")  # fmt: skip
            + f"{args.budget} accuracy queries per search ({args.seeds} seed(s), each shown; "
            "'exhaustive' predicts all 15,625). Cells: measured latency ms / accuracy % "
            "(device measurements)"
        )
    )
    table.add_column("device")
    for col in ("limit ms", "HELP", *modes, "oracle acc"):
        table.add_column(col, justify="right")
    within = {m: 0 for m in modes}
    regret: dict[str, list[float]] = {m: [] for m in modes}
    count = {m: 0 for m in modes}
    max_meas = 0
    for device, limit, orc, runs in rows:
        h = HELP[(device, limit)]
        cells = []
        for m in modes:
            for lat, acc, meas, _queries in runs[m]:
                count[m] += 1
                within[m] += bool(lat <= limit)
                regret[m].append(orc - acc if lat <= limit else np.nan)
                max_meas = max(max_meas, meas)
            cells.append(
                "; ".join(f"{lat:.2f} / {acc:.2f} ({meas})" for lat, acc, meas, _ in runs[m])
            )
        table.add_row(device, f"{limit:g}", f"{h[0]:g} / {h[1]:.1f}", *cells, f"{orc:.2f}")
    console = Console(width=230)
    console.print(table)
    help_ok = sum(HELP[(d, c)][0] <= c for d, cs in CASES.items() for c in cs)
    help_reg = np.mean([oracle(d, c) - HELP[(d, c)][1] for d, cs in CASES.items() for c in cs])
    for m in modes:
        console.print(
            f"{m}: {within[m]}/{count[m]} within the limit by measured latency, mean regret "
            f"{np.nanmean(regret[m]):.3f} points (worst {np.nanmax(regret[m]):.2f})"
        )
    console.print(
        f"at most {max_meas} device measurements per case. HELP: {help_ok}/15 within, mean "
        f"regret {help_reg:.2f} points."
    )
    console.print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
