"""This machine's CPU as an unseen device: 10 measurements predict 200 others.

Measures the NAS-Bench-201 reference set and 200 random architectures (CIFAR-100 networks,
batch 1) on the ``cpu`` device (ONNX Runtime, 1 thread, the profile's timing protocol) through
the measure-once :class:`hwnas.measure.Profiler` and a store, so an interrupted run resumes
without re-measuring. Then adapts the predictors on the 10 reference values only, predicts the
200 and prints Spearman rho, Kendall tau, MAPE and ±10% accuracy against the measurements, with
the FLOPs baseline. The CPU never appears in any artifact's training data.

    python experiments/cpu_unseen.py [--n 200] [--seed 0] [--device cpu] [--store PATH]

About 2 s per architecture with the default protocol (7 minutes for 210); run it on a quiet
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
    t0 = time.time()
    with Progress(console=console) as progress:
        task = progress.add_task(f"measuring on {device.name}", total=len(ref) + len(targets))
        for arch in ref + targets:
            m = profiler.measure(arch_workload(space, arch, "cifar100"), "latency_ms")
            values[arch.text] = m.value
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
    console.print(table)
    console.print(
        f"{profiler.counts.taken} measurements taken, {profiler.counts.reused} reused from "
        f"{args.store}; measuring took {measure_s:.0f} s; latency range "
        f"{y.min():.2f}-{y.max():.2f} ms; load average before {load0[0]:.2f}, after "
        f"{os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
