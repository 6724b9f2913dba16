"""Supernet target mode: the derived architecture's latency against the target, for every
differentiable strategy, judged by the device's recorded latency.

Each row is a full ``hwnas search`` job (the product path: :mod:`hwnas.jobs.supernet`) on
digits with ``--latency-target T``: supernet training, derivation, extraction, batch-norm
recalibration, fine-tuning, the held-out test accuracy. "derived ms" is the derived
architecture's latency on the device: the recorded table's value where the table has the
architecture (every NAS-Bench-201 cell; FBNet on pixel3, whose HW-NAS-Bench values are exactly
the sum of a per-block table, so the fitted table equals them: held-out error 0), else the
lookup table fitted on the recorded table, labelled with its held-out 90th-percentile error
(OFA: 5,000 recorded architectures of ~10^19). "argmax ms" is the architecture distribution's
own most probable architecture before the target is enforced at derivation (recorded, or
predicted where the table lacks it): how far training alone got.

Default cases (``--cases all``, 3 supernet epochs each, the command-line defaults otherwise):

- gdas and darts on NAS-Bench-201, pixel3, targets 6 / 12 / 20 ms;
- fbnet on FBNet, pixel3, targets 12 / 18 / 24 ms (pixel3's FBNet range: 8.3 - 30.1 ms);
- proxyless and singlepath on OFA, v100_64, targets 13 / 20 / 29 ms (range 7.8 - 42.6 ms), and
  on titan_rtx_1, targets 5 / 6 / 7 ms (range 3.9 - 9.5 ms), where the fitted table is too
  coarse (held-out p90 error 14%) and the derivation chooses among recorded architectures.

Run: ``nice -n 10 python experiments/supernet_latency_sweep.py --cases gdas`` (about 3
minutes on 2 quiet cores), ``--cases all`` (about an hour: FBNet's supernet takes ~3 minutes an
epoch); ``--cases fbnet-cpu`` runs fbnet on the live CPU with the measured block table (targets
at the 10/50/90% quantiles of its predictions); ``--weights`` adds a latency-weight sweep of
gdas on pixel3. ``--set KEY=VALUE`` passes supernet settings (``preset=small-data``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

CASES = {
    # name: (strategy, space, device, targets ms)
    "gdas": ("gdas", "nasbench201", "pixel3", (6.0, 12.0, 20.0)),
    "darts": ("darts", "nasbench201", "pixel3", (6.0, 12.0, 20.0)),
    "fbnet": ("fbnet", "fbnet", "pixel3", (12.0, 18.0, 24.0)),
    "proxyless": ("proxyless", "ofa", "v100_64", (13.0, 20.0, 29.0)),
    "singlepath": ("singlepath", "ofa", "v100_64", (13.0, 20.0, 29.0)),
    # titan_rtx_1: the fitted table's held-out p90 error (14%) exceeds the 5% band, so only
    # recorded architectures qualify and each row is judged by its recorded latency
    "proxyless-titan": ("proxyless", "ofa", "titan_rtx_1", (5.0, 6.0, 7.0)),
    "singlepath-titan": ("singlepath", "ofa", "titan_rtx_1", (5.0, 6.0, 7.0)),
    "fbnet-cpu": ("fbnet", "fbnet", "cpu", ()),
}


def run_one(args, tmp: Path, strategy, space, device, **hw) -> dict:
    from hwnas.jobs.supernet import SupernetSettings, prepare, search

    options = dict(args.set)
    if space == "nasbench201":
        options = {"channels": 8, "cells": 1, **options}
    s = SupernetSettings(
        space=space,
        device=device,
        dataset="imagenet" if space == "ofa" else "cifar100",
        strategy=strategy,
        seed=args.seed,
        data="digits",
        epochs=args.epochs,
        finetune_epochs=args.finetune_epochs,
        options=options,
        **hw,
    )
    from hwnas.devices import get_device

    live = get_device(device).runs_models  # a recorded table reads no measurement store
    job = prepare(s, storage=f"sqlite:///{tmp / 'studies.db'}",
                  store_path=tmp / "m.db" if live else None)  # fmt: skip
    _, summary = search(job, tmp / s.study, zoo=False)
    return summary


def live_targets(tmp: Path, space: str, device: str) -> list[float]:
    """10/50/90% quantiles of the measured block table's predictions for 2,000 random
    architectures of the supernet's size (the blocks it times are stored and reused)."""
    from hwnas.datasets import load_data
    from hwnas.devices import get_device
    from hwnas.measure import Profiler
    from hwnas.store import MeasurementStore
    from hwnas.supernet import build_supernet
    from hwnas.supernet.cost import cost_model_for

    data = load_data("digits")
    net = build_supernet(space, 10, data.image_shape, {})
    dev = get_device(device)
    with MeasurementStore(tmp / "m.db") as store:
        lut = cost_model_for(net, dev, Profiler(dev, store))
    archs = net.space.sample(np.random.default_rng(0), 2000)
    costs = np.array([lut.cost(a) for a in archs])
    return [float(np.quantile(costs, q)) for q in (0.1, 0.5, 0.9)]


def judged(best: dict, fit: dict) -> tuple[str, str]:
    """(value, label) of the derived architecture's latency and where it comes from."""
    src = best.get("latency_ms_source", "")
    if src.startswith("recorded:"):
        return f"{best['latency_ms']:.2f}", "recorded table"
    if src.startswith("measured:"):
        return f"{best['latency_ms']:.2f}", "measured (ORT)"
    err = fit.get("rel_err_p90")
    label = "LUT" + (f" (held-out p90 err {100 * err:.1f}%)" if err is not None else "")
    return f"{best['latency_ms']:.2f}", label


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cases", default="gdas", help=f"comma-separated, or 'all' ({', '.join(CASES)})"
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--finetune-epochs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", default="", help="comma-separated ms (replaces the case's)")
    parser.add_argument("--weights", action="store_true", help="add a weight sweep (gdas)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    args.set = [tuple(kv.split("=", 1)) for kv in args.set]
    names = [n for n in CASES if n != "fbnet-cpu"] if args.cases == "all" else args.cases.split(",")
    import torch
    from rich.console import Console
    from rich.table import Table

    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="hwnas-sweep-"))
    os.environ.setdefault("HWNAS_HOME", str(tmp / "home"))
    console = Console(width=200)
    t = Table(title="Supernet target mode on digits: derived architecture vs --latency-target")
    for c in (
        "strategy",
        "space",
        "device",
        "target ms",
        "derived ms",
        "error %",
        "±15%",
        "judged by",
        "argmax ms",
        "argmax error %",
        "test acc %",
    ):
        t.add_column(
            c, justify="left" if c in ("strategy", "space", "device", "judged by") else "right"
        )
    hits = total = 0
    for name in names:
        strategy, space, device, targets = CASES[name]
        if args.targets:
            targets = tuple(float(x) for x in args.targets.split(","))
        if not targets:
            targets = tuple(live_targets(tmp, space, device))
        for target in targets:
            s = run_one(args, tmp, strategy, space, device, latency_target=target)
            b, am = s["best"], s["distribution_argmax"]
            value, label = judged(b, s["hardware_term"]["cost_model"])
            err = 100 * (b["latency_ms"] / target - 1)
            ok = abs(err) <= 15
            hits, total = hits + ok, total + 1
            am_ms = am.get("latency_ms", am["predicted_cost"])
            t.add_row(
                strategy,
                space,
                device,
                f"{target:g}",
                value,
                f"{err:+.1f}",
                "yes" if ok else "NO",
                label,
                f"{am_ms:.2f}",
                f"{100 * (am_ms / target - 1):+.1f}",
                f"{b['test_accuracy']:.2f}",
            )
            console.print(f"done {strategy} {device} {target:g}: {value} ms ({label})", style="dim")
    t.caption = (
        f"{hits}/{total} within ±15% of the target; {args.epochs} supernet epochs, "
        f"{args.finetune_epochs} fine-tune epochs, seed {args.seed}, settings "
        f"{dict(args.set) or 'default'}; target_tolerance 0.05 (the derivation's band)"
    )
    console.print(t)
    if args.weights:
        sweep_weights(args, tmp, console, Table)


def sweep_weights(args, tmp, console, Table) -> None:
    w = Table(title="gdas on NAS-Bench-201, digits, latency-weight sweep on pixel3")
    for c in ("weight W", "derived cell", "recorded ms", "test acc %"):
        w.add_column(c)
    lat = []
    for weight in (0.0, 0.05, 0.2, 0.5, 2.0):
        s = run_one(args, tmp, "gdas", "nasbench201", "pixel3", latency_weight=weight)
        b = s["best"]
        lat.append(b["latency_ms"])
        w.add_row(f"{weight:g}", b["arch"], f"{b['latency_ms']:.3f}", f"{b['test_accuracy']:.2f}")
    w.caption = f"recorded latency non-increasing in W: {all(a >= b for a, b in zip(lat, lat[1:]))}"
    console.print(w)


if __name__ == "__main__":
    main()
