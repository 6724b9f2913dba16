"""Derived subnet vs a fixed hand-designed baseline of similar latency, on digits.

Baseline: the ResNet-like NAS-Bench-201 cell
``|nor_conv_3x3~0|+|none~0|nor_conv_3x3~1|+|skip_connect~0|none~1|none~2|`` (two 3x3 convs
and a skip: a ResNet basic block) in the same reduced network (C=8, N=1), trained from scratch
for ``search epochs + fine-tune epochs`` on the training split with the same SGD recipe
(learning rate 0.05, cosine, the derived subnet's fine-tuning uses ``--finetune-lr``, 0.05 by
default). Search:
``hwnas search`` (the product path) with ``--latency-target`` = the baseline's recorded latency
on the device, ``search epochs`` of supernet training, then the derived subnet fine-tuned from
its inherited weights for ``fine-tune epochs`` on the training split (the search chooses on the
validation split). Both are scored on the same held-out test split (359 images), which
neither saw; latencies are the device table's.

Run: ``nice -n 10 .venv/bin/python experiments/supernet_digits_baseline.py`` (about 3-4
minutes on 2 shared cores for 3 seeds; default device gold_6226, whose table the cost model
fits with R^2 0.98; ``--device pixel3`` for the phone).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

BASELINE = "|nor_conv_3x3~0|+|none~0|nor_conv_3x3~1|+|skip_connect~0|none~1|none~2|"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="gold_6226")
    parser.add_argument("--strategy", default="gdas")
    parser.add_argument("--epochs", type=int, default=6, help="supernet search epochs")
    parser.add_argument("--finetune-epochs", type=int, default=6)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument(
        "--finetune-lr", type=float, default=0.05, help="the same as the baseline's (0.05)"
    )
    args = parser.parse_args()
    import torch
    from rich.console import Console
    from rich.table import Table

    from hwnas.datasets import load_data
    from hwnas.devices import get_device
    from hwnas.jobs.supernet import SupernetSettings, prepare, search
    from hwnas.loops import accuracy, finetune
    from hwnas.spaces import get_space
    from hwnas.spaces.nasbench201.model import NasBench201Network

    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="hwnas-baseline-"))
    os.environ.setdefault("HWNAS_HOME", str(tmp / "home"))
    space = get_space("nasbench201")
    base = space.parse(BASELINE)
    column = get_device(args.device).column("nasbench201", "latency_ms")
    base_lat = float(column[space.index(base)])
    data = load_data("digits", seed=0, image_size=16)
    budget = args.epochs + args.finetune_epochs

    t = Table(
        title=f"digits: derived ({args.strategy}, target = baseline latency on "
        f"{args.device}) vs the ResNet-like cell"
    )
    for c in (
        "seed",
        "derived cell",
        "derived ms",
        "derived test %",
        "baseline ms",
        "baseline test %",
        "derived - baseline",
    ):
        t.add_column(c)
    diffs, dacc, bacc = [], [], []
    console = Console(width=160)
    for seed in range(args.seeds):
        s = SupernetSettings(
            space="nasbench201",
            device=args.device,
            dataset="cifar100",
            strategy=args.strategy,
            seed=seed,
            data="digits",
            epochs=args.epochs,
            finetune_epochs=args.finetune_epochs,
            latency_target=base_lat,
            options={"channels": 8, "cells": 1, "finetune_lr": args.finetune_lr},
        )
        job = prepare(s, storage=f"sqlite:///{tmp / 'studies.db'}")  # recorded devices: no store
        _, summary = search(job, tmp / s.study, zoo=False)
        b = summary["best"]
        torch.manual_seed(seed)
        net = NasBench201Network(space.ops(base), 10, 8, (8, 16, 32), 1)
        finetune(net, data.train, budget, lr=0.05, seed=seed)
        acc = accuracy(net, data.test)
        diffs.append(b["test_accuracy"] - acc)
        dacc.append(b["test_accuracy"])
        bacc.append(acc)
        t.add_row(
            str(seed),
            b["arch"],
            f"{b['latency_ms']:.3f}",
            f"{b['test_accuracy']:.2f}",
            f"{base_lat:.3f}",
            f"{acc:.2f}",
            f"{b['test_accuracy'] - acc:+.2f}",
        )
        console.print(f"seed {seed} done", style="dim")
    t.add_row(
        "mean", "", "", f"{np.mean(dacc):.2f}", "", f"{np.mean(bacc):.2f}", f"{np.mean(diffs):+.2f}"
    )
    t.caption = (
        f"budget: baseline {budget} epochs from scratch; derived {args.epochs} supernet epochs "
        f"+ {args.finetune_epochs} fine-tune epochs (SGD lr {args.finetune_lr:g}, baseline 0.05); "
        "test split 359 images (1 image = 0.28 pt)"
    )
    console.print(t)


if __name__ == "__main__":
    main()
