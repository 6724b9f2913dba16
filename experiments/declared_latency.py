"""Latency of declared spaces (no recorded table) on this machine's CPU, predicted from 10.

For each declared space (``mobilenetv4``, ``vit`` by default), measures its 10 reference
architectures and ``--n`` random ones live on this machine's CPU (ONNX Runtime, 1 thread,
batch 1; :data:`PROFILE`) through the measure-once :class:`hwnas.measure.Profiler`
and a store (an interrupted run resumes without re-measuring). Then adapts each predictor on
the 10 reference values only, predicts the others and prints Spearman rho, Kendall tau, MAPE
and ±10% accuracy against the measurements. The predictors see a declared space through its
graph features (:mod:`hwnas.predictors.featurize.declared`: each layer's ONNX export, summed)
on the artifact's graph path, as ``hwnas predict --space mobilenetv4 --device cpu`` does; no
artifact was trained on any declared space or on this CPU. Baselines: FLOPs scaled on the 10,
and a ceiling (trees fitted on the device's own measurements, 10-fold cross-validated: what
about 100 measurements reach).

    python experiments/declared_latency.py [--spaces mobilenetv4 vit] [--n 100] [--seed 0]
        [--dataset cifar100] [--device cpu-declared] [--store PATH]
        [--predictors fbnet ofa nasbench201]

``--dataset`` defaults to the CIFAR-100 networks (32x32 input: 1-50 ms per inference here);
the spaces' reference dataset (``imagenet``, 224x224, what ``hwnas refset measure`` uses by
default) runs 20-270 ms per inference on this machine, about an hour for both spaces. Timings
on a shared machine are noisy (the script prints the load average before and after and how
many measurements stayed flagged): re-run on a quiet machine for final numbers.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

PROFILE = """\
name: cpu-declared
kind: local
class: cpu
description: this machine's CPU, ONNX Runtime, 1 thread; median of 5 rounds of 10 calls
runtime: ort
timing: {warmup: 5, rounds: 5, calls_per_round: 10, threads: 1, max_cv: 0.15}
tvm: {trials_per_task: 0}
"""
"""The timing protocol of the default device: the ``cpu`` profile's (30 warm-up calls, 6-12
rounds of 30 calls, up to 30 s, 3 attempts when the CV exceeds 15%) takes 12-45 s per
network on this loaded 2-core machine; this one 0.3-3 s. Values whose round medians vary by
more than 15% are flagged and kept (counted in each table's title)."""


def measure(profiler, space, archs, dataset, console) -> tuple[np.ndarray, int]:
    """Measured latency (ms) of each architecture, and how many stayed flagged (kept)."""
    from rich.progress import Progress

    from hwnas.measure import arch_workload

    values, flagged = [], 0
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"measuring {space.name}", total=len(archs))
        for arch in archs:
            # a flagged (noisy) value is kept: dropping it would score only easy networks
            m = profiler.measure(arch_workload(space, arch, dataset), "latency_ms", True)
            values.append(m.value)
            flagged += bool(m.flagged)
            progress.advance(task)
    return np.array(values), flagged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", nargs="+", default=["mobilenetv4", "vit"])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", default="cifar100")
    parser.add_argument(
        "--device",
        default="cpu-declared",
        help="cpu-declared (default): the cpu device (ONNX Runtime, 1 thread) with a shorter "
        "timing protocol, written as a profile in the run's own hwnas home; or any device",
    )
    parser.add_argument("--store", type=Path, default=Path("runs/declared_latency/measurements.db"))
    parser.add_argument("--predictors", nargs="+", default=["fbnet", "ofa", "nasbench201"])
    args = parser.parse_args()

    home = args.store.parent / "home"  # this run's own hwnas home: its device profile
    (home / "devices").mkdir(parents=True, exist_ok=True)
    (home / "devices" / "cpu-declared.yaml").write_text(PROFILE)
    os.environ["HWNAS_HOME"] = str(home.resolve())

    from rich.console import Console
    from rich.table import Table
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.model_selection import cross_val_predict

    from hwnas.devices import get_device
    from hwnas.devices.local import cpu_name
    from hwnas.measure import Profiler
    from hwnas.predictors import DECLARED_ARTIFACT, load_predictor
    from hwnas.predictors.featurize.declared import DeclaredFeaturizer
    from hwnas.predictors.graph import GraphModel
    from hwnas.predictors.metrics import scores
    from hwnas.predictors.proxy import FlopsProxy
    from hwnas.spaces import get_space
    from hwnas.store import MeasurementStore

    console = Console(width=160)
    load0 = os.getloadavg()
    device = get_device(args.device)
    device.require_reachable()
    args.store.parent.mkdir(parents=True, exist_ok=True)
    store = MeasurementStore(args.store)
    profiler = Profiler(device, store, attempts=2)
    summary = []
    t0 = time.time()
    for name in args.spaces:
        space = get_space(name)
        space.dataset(args.dataset)
        ref = space.reference_archs()
        known = {a.text for a in ref}
        rng = np.random.default_rng(args.seed)
        targets = []
        while len(targets) < args.n:
            for a in space.sample(rng, args.n):
                if a.text not in known and len(targets) < args.n:
                    known.add(a.text)
                    targets.append(a)
        y_ref, f_ref = measure(profiler, space, ref, args.dataset, console)
        y, flagged = measure(profiler, space, targets, args.dataset, console)
        fz = DeclaredFeaturizer(space, args.dataset)
        if args.dataset == space.reference_dataset:  # the product path: architectures
            m_ref, m_tgt = ref, targets
        else:  # the same graph path, for the networks of --dataset
            m_ref = [GraphModel(a.text, row) for a, row in zip(ref, fz.graph(ref))]
            m_tgt = [GraphModel(a.text, row) for a, row in zip(targets, fz.graph(targets))]
        table = Table(
            title=f"{name} ({args.dataset} networks) on {device.name} ({cpu_name()}): adapt on "
            f"the 10 reference architectures, predict {len(targets)} random ones "
            f"({y.min():.2f}-{y.max():.2f} ms; {flagged + f_ref} of {len(y) + len(y_ref)} "
            "flagged as noisy, kept)"
        )
        for col in ("predictor", "Spearman rho", "Kendall tau", "MAPE %", "±10% acc", "in 2 std"):
            table.add_column(col, justify="left" if col == "predictor" else "right")

        def row(label, mean, std=None, table=table, y=y, name=name):
            s = scores(mean, y)
            cover = "" if std is None else f"{np.mean(np.abs(mean - y) <= 2 * std):.3f}"
            table.add_row(
                label,
                f"{s['spearman_rho']:.3f}",
                f"{s['kendall_tau']:.3f}",
                f"{s['mape_pct']:.1f}",
                f"{s['acc_10pct']:.3f}",
                cover,
            )
            summary.append((name, label, s["spearman_rho"], s["acc_10pct"]))

        for pname in args.predictors:
            pred = load_predictor(pname, name).fit(m_ref, y_ref)
            mean, std = pred.predict(m_tgt)
            default = " (default)" if pname == DECLARED_ARTIFACT else ""
            row(f"meta, artifact {pname}{default}, graph path", mean, std)
        row("FLOPs scaled on the 10", FlopsProxy().fit(m_ref, y_ref).predict(m_tgt)[0])
        everything = ref + targets
        x_all = np.hstack(
            [space.encode(everything), fz.structural(everything), np.log1p(fz.graph(everything))]
        )
        y_all = np.concatenate([y_ref, y])
        own = np.exp(
            cross_val_predict(
                RandomForestRegressor(300, random_state=0), x_all, np.log(y_all), cv=10
            )
        )
        row(f"ceiling: trees on ~{len(y_all) * 9 // 10} own values (10-fold CV)",
            own[len(ref):])  # fmt: skip
        console.print(table)
    store.close()
    console.print("summary: space, predictor, Spearman rho, ±10% accuracy")
    for name, label, rho, acc in summary:
        console.print(f"  {name:12s} {label:55s} {rho:.3f} {acc:.3f}")
    console.print(
        f"{profiler.counts.taken} measurements taken, {profiler.counts.reused} reused from "
        f"{args.store}; {time.time() - t0:.0f} s; load average before {load0[0]:.2f}, after "
        f"{os.getloadavg()[0]:.2f} (on {os.cpu_count()} cores)"
    )


if __name__ == "__main__":
    main()
