"""This machine's CPU as an unseen device: 10 measurements predict 200 others.

Measures the NAS-Bench-201 reference set and 200 random architectures (CIFAR-100 networks,
batch 1) on the ``cpu`` device (ONNX Runtime, 1 thread, the profile's timing protocol) through
the measure-once :class:`hwnas.measure.Profiler` and a store, so an interrupted run resumes
without re-measuring. Then adapts the predictors on the 10 reference values only, predicts the
200 and prints Spearman rho, Kendall tau, MAPE and ±10% accuracy against the measurements, with
the FLOPs baseline. The CPU never appears in any artifact's training data.

Two bounds set by the machine rather than the predictor: a ceiling row (trees fitted on the
device's own measurements, 10-fold cross-validated over all 210: what ~190 measurements reach),
and the test-retest agreement of ``--retest`` architectures timed a second time with the same
protocol (Spearman rho between the two timings and their median relative difference).

    python experiments/cpu_unseen.py [--n 200] [--seed 0] [--device cpu] [--store PATH]
        [--retest 40]

About 1.5 s per architecture with the default protocol (6 minutes for 250); run it on a quiet
machine for the final numbers (it prints the load average before and after).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--store", type=Path, default=Path("runs/cpu_unseen/measurements.db"), help="SQLite store"
    )
    parser.add_argument("--predictors", nargs="+", default=["nasbench201-help", "nasbench201"])
    parser.add_argument("--retest", type=int, default=40, help="architectures timed twice")
    args = parser.parse_args()

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    from hwnas.devices import get_device
    from hwnas.devices.local import cpu_name
    from hwnas.measure import Profiler, arch_workload
    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import reference_indices
    from hwnas.predictors.metrics import scores
    from hwnas.predictors.proxy import FlopsProxy
    from hwnas.spaces import get_space
    from hwnas.store import MeasurementStore

    console = Console(width=160)
    load0 = os.getloadavg()
    space = get_space("nasbench201")
    ref = [space.arch_at(i) for i in reference_indices("nasbench201")]
    rng = np.random.default_rng(args.seed)
    pool = sorted(set(range(len(space))) - set(reference_indices("nasbench201")))
    targets = [space.arch_at(int(i)) for i in rng.choice(pool, args.n, replace=False)]
    device = get_device(args.device)
    device.require_reachable()
    store = MeasurementStore(args.store)
    profiler = Profiler(device, store)
    values: dict[str, float] = {}
    flagged: set[str] = set()
    t0 = time.time()
    with Progress(console=console) as progress:
        task = progress.add_task(f"measuring on {device.name}", total=len(ref) + len(targets))
        for arch in ref + targets:
            # a flagged (noisy) value is kept and counted, not dropped: dropping it would
            # score the predictor only on the easy-to-time architectures
            w = arch_workload(space, arch, "cifar100")
            m = profiler.measure(w, "latency_ms", allow_flagged=True)
            values[arch.text] = m.value
            if m.flagged:
                flagged.add(arch.text)
            progress.advance(task)
    measure_s = time.time() - t0
    y_ref = np.array([values[a.text] for a in ref])
    y = np.array([values[a.text] for a in targets])

    table = Table(
        title=f"{device.name} ({cpu_name()}, {device.description}) as an unseen device: "
        f"adapt on the 10 reference architectures, predict {len(targets)} random NAS-Bench-201 "
        "architectures"
    )
    for col in ("predictor", "Spearman rho", "Kendall tau", "MAPE %", "±10% acc", "in 2 std"):
        table.add_column(col, justify="left" if col == "predictor" else "right")
    for name in args.predictors:
        pred = load_predictor(name, "nasbench201").fit(ref, y_ref)
        mean, std = pred.predict(targets)
        s = scores(mean, y)
        table.add_row(
            name,
            f"{s['spearman_rho']:.3f}",
            f"{s['kendall_tau']:.3f}",
            f"{s['mape_pct']:.1f}",
            f"{s['acc_10pct']:.3f}",
            f"{np.mean(np.abs(mean - y) <= 2 * std):.3f}",
        )
    fl = FlopsProxy().fit(ref, y_ref).predict(targets)[0]
    s = scores(fl, y)
    table.add_row(
        "FLOPs proxy scaled on the 10",
        f"{s['spearman_rho']:.3f}",
        f"{s['kendall_tau']:.3f}",
        f"{s['mape_pct']:.1f}",
        f"{s['acc_10pct']:.3f}",
        "",
    )
    from scipy.stats import spearmanr
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.model_selection import cross_val_predict

    everything = ref + targets
    x_all = np.hstack([space.encode(everything), space.surrogate_features(everything)])
    y_all = np.concatenate([y_ref, y])
    own = np.exp(
        cross_val_predict(RandomForestRegressor(300, random_state=0), x_all, np.log(y_all), cv=10)
    )
    s = scores(own[len(ref) :], y)
    table.add_row(
        "ceiling: trees on ~190 own values (10-fold CV)",
        f"{s['spearman_rho']:.3f}",
        f"{s['kendall_tau']:.3f}",
        f"{s['mape_pct']:.1f}",
        f"{s['acc_10pct']:.3f}",
        "",
    )
    console.print(table)
    if args.retest:
        again = [device.measure_all(arch_workload(space, a, "cifar100"))["latency_ms"].value
                 for a in targets[: args.retest]]  # fmt: skip
        first = y[: args.retest]
        console.print(
            f"test-retest on {len(again)} architectures timed twice: Spearman rho "
            f"{spearmanr(first, again)[0]:.3f}, median relative difference "
            f"{100 * np.median(np.abs(np.array(again) - first) / first):.1f}%"
        )
    console.print(
        f"{profiler.counts.taken} measurements taken ({len(flagged)} still flagged after "
        f"{profiler.attempts} attempts, CV above {device.protocol.max_cv:.0%}; used), "
        f"{profiler.counts.reused} reused from {args.store}; measuring took {measure_s:.0f} s; "
        "latency range "
        f"{y.min():.2f}-{y.max():.2f} ms; load average before {load0[0]:.2f}, after "
        f"{os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
