"""Search quality on NAS-Bench-201: hypervolume ratio to the true front, share of the true
Pareto front recovered, regret, and queries to 99% of the hypervolume, for hwnas's strategies,
Optuna's samplers and Syne Tune's multi-objective baselines, on the same tables.

For each unseen device of the standard split (HELP, NeurIPS 2021), each strategy and each
budget of accuracy queries (distinct architectures whose 200-epoch CIFAR-100 accuracy is read),
runs the search over ``--seeds`` seeds and prints the medians of:

- HV %: hypervolume of the queried architectures over that of the true front (computed over all
  15,625 architectures). Both objectives are normalised between the true front's ideal point
  (lowest latency, highest accuracy on the front) and its nadir point (highest latency, lowest
  accuracy on the front): 0 at the ideal, 1 at the nadir, both minimised. The reference point is
  (1.1, 1.1), the nadir plus 10% of each range. Chance-level architectures (accuracy at most
  1.5x chance, 100/100 classes = 1%: the 341 cells whose output does not depend on the input)
  are left out of the true front and of the queried set; without that rule raspi4's front would
  start at a 1%-accurate network and the accuracy axis would be stretched to it.
- front %: share of the true accuracy/latency Pareto front among the queried architectures;
- regret: mean over five latency budgets (the 10/30/50/70/90% latency quantiles of the space on
  that device) of (oracle accuracy - best queried accuracy within the budget), in points;
- q99: in the run with the largest budget, the queries after which the queried set first holds
  99% of the true front's hypervolume (">N" when it never does).

Strategies (``--strategies``):

- hwnas's table strategies by name (``hwnas search --strategy``), run through the same engine as
  ``hwnas search`` (in-memory Optuna study): ``frontier`` (the default), ``surrogate``,
  ``aging``, and Optuna's samplers ``nsga2``, ``nsga3``, ``tpe``, ``random``, ``gp``.
- Syne Tune's multi-objective baselines (``syne-tune`` 0.16, ``pip install -r
  experiments/requirements-search-quality.txt``; never part of hwnas's install), driven through
  their own scheduler API (``suggest`` / ``on_trial_add`` / ``on_trial_result`` /
  ``on_trial_complete``) on the same accuracy and latency tables; the objectives they see are
  error (1 - accuracy/100) and latency over the device's largest latency, both minimised:

  - ``st-morea``: MOREA, ``MultiObjectiveRegularizedEvolution`` (population 100, sample 10,
    non-dominated sorting) in a ``SingleFidelityScheduler``;
  - ``st-ehvi``: ``EHVI`` (BoTorch's qLogEHVI on a GP per objective). Syne Tune fixes its
    reference point at 2 in BoTorch's maximised (negated) objectives, so the values it is told
    are shifted by -3 (error - 3, latency/max - 3: every point dominates that reference, which
    corresponds to 100% error and the largest latency); without the shift the improvement is 0
    everywhere. Two settings differ from its defaults: ``double_precision=False`` (with BoTorch
    0.18 the default fails inside qLogEHVI, "expected scalar type Double but found Float") and
    ``optimization_strategy="random"`` (the acquisition taken at its 200 random candidates
    instead of 20 gradient restarts from them, which took more than 20 s per query here: a
    30-query run did not end in 10 minutes). Even so it fits a GP per
    query and is run to 100 queries only (``--cap``);
  - ``st-moasha``: ``MOASHA`` (non-dominated priority) with NAS-Bench-201's two trained
    fidelities, 12 and 200 epochs (grace period 12, max_t 200, reduction factor 200/12: one
    promotion). A trial stopped at 12 epochs costs 12/200 of a query; only architectures trained
    for 200 epochs count as queried. Its priority is given each trial's rank in the
    non-dominated order (:func:`_rank_priority`: syne-tune 0.16 hands ASHA the order itself);
    its non-dominated sort over every result of the rung makes a 300-query run take minutes;
  - ``st-random``: its random searcher (``searcher="random_search"``; the ``RandomSearch``
    wrapper of 0.16 takes one metric only).

  Syne Tune's NSGA-II (``NSGA2``, on pymoo) and its earlier baselines live only up to syne-tune
  0.14.2, which requires numpy < 1.27 and cannot be installed beside hwnas (numpy 2); Syne Tune
  has no multi-objective local search (MODNAS's ``LS`` is that paper's own code). Optuna's
  ``nsga2`` stands in for NSGA-II.

Samplers that do not know the budget (every one but ``frontier`` and ``surrogate``) are run once
with the largest budget and scored on its first 50, 100, ... queries, which is what a run with
the smaller budget would have queried.

``--costs predicted`` gives cost-aware strategies the latencies predicted by
``nasbench201-help`` calibrated on the device's 10 reference architectures instead of the
device's table, while every queried architecture is still scored with its true latency.

Baseline and goal: ../shared/ANCHORS.md section 3 and issue 21 (default strategy: >= 60% front
and <= 0.15 points at 300 queries, >= 99% of the hypervolume at 100 queries, on every device).

    python experiments/search_quality.py [--seeds 3] [--budgets 50 100 300]
        [--strategies frontier nsga2 nsga3 tpe st-morea st-ehvi st-moasha st-random]
        [--devices ...] [--workers 1] [--costs table|predicted] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache

import numpy as np

UNSEEN = ["titan_rtx_256", "gold_6226", "fpga", "pixel2", "raspi4", "eyeriss"]
QUANTILES = (0.1, 0.3, 0.5, 0.7, 0.9)
HV_GOAL = 0.99
REFERENCE = 1.1
"""Reference point of the normalised hypervolume, in both objectives (nadir = 1)."""
CHANCE = 1.0
"""CIFAR-100 chance-level accuracy in % (100 classes)."""
BUDGET_AWARE = {"frontier", "surrogate", "st-moasha"}
"""Run once per budget (the others: once at the largest, its prefixes scored): the strategies
that plan for their budget, and MOASHA, whose budget (in 200-epoch queries) is partly spent on
12-epoch trials, so a prefix of its queries is not what a smaller budget buys."""
SYNE_TUNE = ("st-morea", "st-ehvi", "st-moasha", "st-random")
DEFAULT_STRATEGIES = ["frontier", "nsga2", "nsga3", "tpe", "random", *SYNE_TUNE]


@lru_cache(maxsize=8)
def truth(device: str, dataset: str = "cifar100") -> dict:
    """Accuracy (%) and latency (ms) of every architecture, the true front, the normalisation
    and the regret's latency budgets and oracle accuracies."""
    from hwnas.devices import get_device
    from hwnas.engine.pareto import pareto_mask
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    acc = np.asarray(space.table_accuracy(dataset), dtype=float)
    lat = np.asarray(get_device(device).column("nasbench201", "latency_ms"), dtype=float)
    # a table may lack rows (the Eagle tables lack 341 cells): those cannot be searched
    measured = np.isfinite(lat)
    valid = (acc > 1.5 * CHANCE) & measured
    front = np.flatnonzero(
        valid & pareto_mask(np.where(valid, acc, -np.inf), np.where(measured, lat, np.inf))
    )
    ideal = (lat[front].min(), acc[front].max())
    nadir = (lat[front].max(), acc[front].min())
    budgets = np.quantile(lat[measured], QUANTILES)
    t = {
        "acc": acc,
        "lat": lat,
        "valid": valid,
        "front": set(front.tolist()),
        "ideal": ideal,
        "nadir": nadir,
        "budgets": budgets,
        "oracle": [acc[measured & (lat <= b)].max() for b in budgets],
    }
    t["hv"] = hypervolume(t, front)
    return t


def hypervolume(t: dict, rows) -> float:
    """Normalised hypervolume (see the module docstring) of architectures ``rows``."""
    rows = np.asarray([r for r in rows if t["valid"][r]], dtype=int)
    if len(rows) == 0:
        return 0.0
    (l0, a0), (l1, a1) = t["ideal"], t["nadir"]
    x = (t["lat"][rows] - l0) / (l1 - l0)  # latency, 0 at the ideal
    y = (a0 - t["acc"][rows]) / (a0 - a1)  # error, 0 at the ideal
    keep = (x < REFERENCE) & (y < REFERENCE)
    x, y = x[keep], y[keep]
    order = np.lexsort((y, x))
    area, best = 0.0, REFERENCE
    xs = np.append(x[order], REFERENCE)
    for k, i in enumerate(order):
        best = min(best, y[i])
        area += (xs[k + 1] - x[i]) * (REFERENCE - best)
    return float(area)


def scores(t: dict, queried: list[int]) -> dict:
    """HV ratio, front share and regret of the queried architectures (in query order)."""
    rows = np.asarray(queried, dtype=int)
    regrets = []
    for b, o in zip(t["budgets"], t["oracle"]):
        within = t["acc"][rows[t["lat"][rows] <= b]]
        regrets.append(o - within.max() if len(within) else o)
    return {
        "hv": hypervolume(t, rows) / t["hv"],
        "recall": len(t["front"] & set(rows.tolist())) / len(t["front"]),
        "regret": float(np.mean(regrets)),
    }


def queries_to_goal(t: dict, queried: list[int], step: int = 5) -> int | None:
    """First query count (to ``step``) whose prefix holds ``HV_GOAL`` of the true front's
    hypervolume, or None."""
    for n in range(step, len(queried) + step, step):
        if hypervolume(t, queried[:n]) >= HV_GOAL * t["hv"]:
            return min(n, len(queried))
    return None


# -- hwnas strategies (the engine of `hwnas search`) ------------------------------------------


def predicted_costs(space, device: str):
    """``nasbench201-help`` calibrated on the device's reference-set latencies (table reads)."""
    from hwnas.devices import get_device
    from hwnas.engine.costs import calibrate
    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import reference_indices

    column = get_device(device).column("nasbench201", "latency_ms")
    refs = list(reference_indices("nasbench201"))
    archs = [space.arch_at(i) for i in refs]
    predictor = load_predictor("nasbench201-help", "nasbench201")
    return calibrate(predictor, space, archs, column[refs], "latency_ms")


def run_hwnas(device: str, strategy: str, budget: int, seed: int, cost_kind: str) -> list[int]:
    from hwnas.devices import get_device
    from hwnas.engine.costs import CostContext, table_costs
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import SearchSettings, run_search
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    device_obj = get_device(device)
    evaluator = TableEvaluator(space, "cifar100", Profiler(device_obj, None), ["latency_ms"])
    settings = SearchSettings(
        space="nasbench201", device=device, budget=budget, strategy=strategy, seed=seed
    )
    if cost_kind == "predicted":
        cost = predicted_costs(space, device)
    else:
        cost = table_costs(space, device_obj, "latency_ms")
    costs = CostContext(space, cost=cost, budget=budget)
    result = run_search(settings, space, evaluator.evaluate, storage=None, costs=costs)
    records = sorted(result.records, key=lambda r: r.number)
    return [space.index(space.parse(r.arch)) for r in records]


# -- Syne Tune baselines ------------------------------------------------------------------------


def _rank_priority():
    """MOASHA's default priority (Syne Tune's ``NonDominatedPriority``: non-dominated sort with
    an epsilon-net inside each front) as each trial's rank in that order. ``MOPriority`` promises
    one priority per trial, and ASHA ranks a new trial by its own entry; syne-tune 0.16's
    ``NonDominatedPriority`` returns the trials' indices in priority order instead, so ASHA read
    the index of the last-ranked trial as the new trial's rank and promoted all or none of a
    run's trials depending on the seed (1 to 100 of 100 queries trained fully)."""
    from syne_tune.optimizer.schedulers.multiobjective.multiobjective_priority import (
        NonDominatedPriority,
    )

    class RankPriority(NonDominatedPriority):
        def priority_unsafe(self, objectives: np.ndarray) -> np.ndarray:
            order = np.asarray(super().priority_unsafe(objectives), dtype=int)
            ranks = np.empty(len(order))
            ranks[order] = np.arange(len(order))
            return ranks

    return RankPriority()


def run_syne_tune(device: str, strategy: str, budget: int, seed: int) -> list[int]:
    """Query order of a Syne Tune scheduler driven on the tables (see the module docstring)."""
    import datetime
    import logging

    from syne_tune.backend.trial_status import Trial
    from syne_tune.config_space import choice

    from hwnas.spaces import get_space

    logging.getLogger("syne_tune").setLevel(logging.ERROR)
    np.random.seed(seed)  # Syne Tune's random configurations use numpy's global generator
    space = get_space("nasbench201")
    t = truth(device)
    err200 = 1.0 - t["acc"] / 100.0
    err12 = 1.0 - np.asarray(space.table_accuracy("cifar100", epochs=12), dtype=float) / 100.0
    lat = t["lat"] / t["lat"].max()
    config_space = {d: choice(list(opts)) for d, opts in space.choices().items()}
    metrics = ["error", "latency"]
    shift = 0.0
    if strategy == "st-morea":
        from syne_tune.optimizer.schedulers.multiobjective import (
            MultiObjectiveRegularizedEvolution,
        )
        from syne_tune.optimizer.schedulers.single_fidelity_scheduler import SingleFidelityScheduler

        scheduler = SingleFidelityScheduler(
            config_space,
            metrics,
            searcher=MultiObjectiveRegularizedEvolution(config_space, random_seed=seed),
            random_seed=seed,
        )
    elif strategy == "st-ehvi":
        from syne_tune.optimizer.schedulers.multiobjective.expected_hyper_volume_improvement import (  # noqa: E501
            ExpectedHyperVolumeImprovement,
        )
        from syne_tune.optimizer.schedulers.single_fidelity_scheduler import (
            SingleFidelityScheduler,
        )

        # double_precision=False: with BoTorch 0.18 the default (a float64 GP, float32
        # objectives) fails in qLogEHVI ("expected scalar type Double but found Float")
        searcher = ExpectedHyperVolumeImprovement(
            config_space,
            double_precision=False,
            optimization_strategy="random",
            random_seed=seed,
        )
        scheduler = SingleFidelityScheduler(
            config_space, metrics, searcher=searcher, random_seed=seed
        )
        shift = -3.0
    elif strategy == "st-moasha":
        from syne_tune.optimizer.schedulers.multiobjective.moasha import MOASHA

        scheduler = MOASHA(
            config_space,
            metrics,
            time_attr="epoch",
            max_t=200,
            grace_period=12,
            reduction_factor=200 / 12,
            random_seed=seed,
            multiobjective_priority=_rank_priority(),
        )
    elif strategy == "st-random":
        from syne_tune.optimizer.schedulers.single_fidelity_scheduler import SingleFidelityScheduler

        scheduler = SingleFidelityScheduler(
            config_space, metrics, searcher="random_search", random_seed=seed
        )
    else:
        raise ValueError(strategy)

    queried: list[int] = []
    seen: set[int] = set()
    spent = 0.0
    for trial_id in range(20 * budget):
        if spent >= budget or len(queried) >= budget:
            break
        suggestion = scheduler.suggest()
        if suggestion is None:
            break
        config = suggestion.config
        row = space.index(space.from_choices({d: config[d] for d in config_space}))
        trial = Trial(trial_id=trial_id, config=config, creation_time=datetime.datetime.now())
        scheduler.on_trial_add(trial)
        if strategy == "st-moasha":
            low = {"epoch": 12, "error": err12[row] + shift, "latency": lat[row] + shift}
            decision = scheduler.on_trial_result(trial, low)
            if row not in seen:
                spent += 12 / 200
            if decision != "CONTINUE":
                scheduler.on_trial_complete(trial, low)
                continue
        result = {"epoch": 200, "error": err200[row] + shift, "latency": lat[row] + shift}
        if strategy == "st-moasha":
            scheduler.on_trial_result(trial, result)
        scheduler.on_trial_complete(trial, result)
        if row not in seen:  # a repeated architecture is a free lookup, as in the engine
            seen.add(row)
            queried.append(row)
            spent += 1.0 if strategy != "st-moasha" else (200 - 12) / 200
    return queried


def one_run(args: tuple[str, str, int, int, str]) -> dict:
    device, strategy, budget, seed, cost_kind = args
    t0 = time.perf_counter()
    if strategy.startswith("st-"):
        queried = run_syne_tune(device, strategy, budget, seed)
    else:
        queried = run_hwnas(device, strategy, budget, seed, cost_kind)
    return {
        "device": device,
        "strategy": strategy,
        "budget": budget,
        "seed": seed,
        "queried": queried,
        "seconds": time.perf_counter() - t0,
    }


def goal_text(values: list[int | None], budget: int) -> str:
    """Median queries to the goal over seeds (a run that never got there counts as infinite)."""
    med = statistics.median([np.inf if v is None else v for v in values])
    return f">{budget}" if not np.isfinite(med) else f"{med:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--budgets", type=int, nargs="+", default=[50, 100, 300])
    parser.add_argument("--strategies", nargs="+", default=DEFAULT_STRATEGIES)
    parser.add_argument("--devices", nargs="+", default=UNSEEN)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--costs", choices=["table", "predicted"], default="table")
    parser.add_argument("--json", default=None, help="Also write every run's scores here.")
    parser.add_argument(
        "--runs",
        default=None,
        metavar="JSONL",
        help="Append each search's query order here as it ends, and reuse the searches already "
        "there (same device, strategy, budget, seed and costs): an interrupted run resumes, and "
        "tables of several invocations combine.",
    )
    parser.add_argument(
        "--cap",
        nargs="*",
        default=["st-ehvi=100"],
        metavar="STRATEGY=N",
        help="Run STRATEGY to N queries at most (its rows above N are left empty); default "
        "st-ehvi=100: its GP fit and acquisition take seconds per query on this machine.",
    )
    args = parser.parse_args()

    top = max(args.budgets)
    caps = {k: int(v) for k, v in (c.split("=") for c in args.cap)}
    jobs = [
        (d, s, b, seed, args.costs)
        for s in args.strategies
        for b in (args.budgets if s in BUDGET_AWARE else [min(top, caps.get(s, top))])
        for d in args.devices
        for seed in range(args.seeds)
    ]
    t0 = time.time()
    runs, done = [], set()
    if args.runs and os.path.exists(args.runs):
        with open(args.runs) as fh:
            for line in fh:
                r = json.loads(line)
                key = (r["device"], r["strategy"], r["budget"], r["seed"], r.get("costs", "table"))
                if key in set(jobs) and key not in done:
                    runs.append(r)
                    done.add(key)
    todo = [j for j in jobs if j not in done]
    with ProcessPoolExecutor(args.workers) as pool:
        for r in pool.map(one_run, todo, chunksize=1):
            runs.append(r)
            if args.runs:
                with open(args.runs, "a") as fh:
                    fh.write(json.dumps({**r, "costs": args.costs}) + "\n")

    rows: dict[tuple[str, str, int], list[dict]] = {}
    for r in runs:
        t = truth(r["device"])
        if r["strategy"] in BUDGET_AWARE:
            budgets = [r["budget"]]
        else:
            budgets = [b for b in args.budgets if b <= r["budget"]]
        for b in budgets:
            s = scores(t, r["queried"][:b])
            s.update(seed=r["seed"], seconds=r["seconds"], queries=min(b, len(r["queried"])))
            if b == max(budgets):
                s["q99"] = queries_to_goal(t, r["queried"])
            rows.setdefault((r["device"], r["strategy"], b), []).append(s)

    from rich.console import Console
    from rich.table import Table

    console = Console(width=250)
    print(
        "hypervolume: objectives normalised between the true front's ideal (0) and nadir (1) "
        f"points, reference point ({REFERENCE}, {REFERENCE}); chance-level architectures "
        f"(accuracy <= {1.5 * CHANCE:g}%) left out"
    )
    for name, key, fmt in (
        ("hypervolume ratio to the true front, %", "hv", "{:.1f}"),
        ("true Pareto front recovered, %", "recall", "{:.1f}"),
        ("regret, accuracy points", "regret", "{:.2f}"),
    ):
        table = Table(
            title=f"NAS-Bench-201 CIFAR-100 / latency ({args.costs} costs): {name}, median of "
            f"{args.seeds} seeds; q99 = queries to 99% hypervolume in the longest runs"
        )
        for col in ("strategy", "queries", *args.devices, "mean", "worst"):
            table.add_column(col, justify="left" if col == "strategy" else "right")
        if key == "hv":
            table.add_column("s/run", justify="right")
        scale = 1.0 if key == "regret" else 100.0
        for s in args.strategies:
            for b in args.budgets:
                if (args.devices[0], s, b) not in rows:
                    table.add_row(s, str(b), *["-"] * (len(args.devices) + 2))
                    continue
                meds = [
                    statistics.median(x[key] for x in rows[(d, s, b)]) * scale for d in args.devices
                ]
                worst = max(meds) if key == "regret" else min(meds)
                extra = []
                if key == "hv":
                    secs = [x["seconds"] for d in args.devices for x in rows[(d, s, b)]]
                    extra = [f"{statistics.median(secs):.2f}"]
                table.add_row(
                    s,
                    str(b),
                    *(fmt.format(m) for m in meds),
                    fmt.format(np.mean(meds)),
                    fmt.format(worst),
                    *extra,
                )
            if key == "hv":
                last = max(b for b in args.budgets if (args.devices[0], s, b) in rows)
                q = [goal_text([x["q99"] for x in rows[(d, s, last)]], last) for d in args.devices]
                table.add_row(s, "q99", *q, "", "", "")
        console.print(table)
    print(
        f"{len(todo)} searches in {time.time() - t0:.0f} s with {args.workers} workers"
        f" ({len(jobs) - len(todo)} read from {args.runs})"
    )
    if args.json:
        out = [
            {"device": d, "strategy": s, "budget": b, **x}
            for (d, s, b), xs in sorted(rows.items())
            for x in xs
        ]
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
