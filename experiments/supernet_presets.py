"""Paper defaults vs the ``small-data`` preset: the derived architecture of each supernet
strategy on digits, a few seeds each.

Each row is a full ``hwnas search`` job (the product path: :mod:`hwnas.jobs.supernet`) with the
command-line defaults (``--epochs 5``, ``--finetune-epochs 2``, ``--batch-size 64``, no hardware
term: ``hwnas search --strategy gdas --device pixel3 --data digits`` is the default use), once
with the declared defaults (``preset=paper``: each method's published settings) and once with
``--set preset=small-data`` (hwnas's earlier settings: weights SGD 0.05 with Nesterov to 0,
architecture Adam 3e-3, 20% warm-up). Reported per run: the derived architecture's held-out
test accuracy on digits after fine-tuning (and with the inherited weights before it), its
recorded latency on the device, the NAS-Bench-201 table's CIFAR-100 accuracy of the derived cell
(how good the cell is when trained properly), and the entropy of the final architecture
distribution (nats per decision; ln 5 = 1.61 is uniform: how far the search moved).

Run: ``nice -n 10 python experiments/supernet_presets.py`` (gdas and darts on NAS-Bench-201,
3 seeds: about 15 minutes on 2 shared cores); ``--strategies fbnet --epochs 1`` or
``--strategies proxyless --epochs 2`` for the other spaces (FBNet: about 3 minutes per epoch).
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

SPACE = {"gdas": "nasbench201", "darts": "nasbench201", "fbnet": "fbnet", "proxyless": "ofa"}
DEVICE = {"nasbench201": "pixel3", "fbnet": "pixel3", "ofa": "v100_64"}


def run_one(tmp: Path, strategy: str, preset: str, seed: int, epochs: int, finetune: int) -> dict:
    import torch

    from hwnas.jobs.supernet import SupernetSettings, prepare, search

    space = SPACE[strategy]
    s = SupernetSettings(
        space=space,
        device=DEVICE[space],
        dataset="imagenet" if space == "ofa" else "cifar100",
        strategy=strategy,
        seed=seed,
        data="digits",
        epochs=epochs,
        finetune_epochs=finetune,
        options={"preset": preset},
        study=f"{strategy}-{preset}-e{epochs}-seed{seed}",
    )
    job = prepare(s, storage=f"sqlite:///{tmp / 'studies.db'}")  # recorded devices: no store
    _, summary = search(job, tmp / s.study, zoo=False)
    state = torch.load(tmp / s.study / "supernet.pt", weights_only=False)["strategy"]
    probs = [torch.softmax(a, -1).numpy() for a in state["alphas"]]
    entropy = float(np.mean([-(p * np.log(np.clip(p, 1e-12, 1))).sum() for p in probs]))
    return {**summary["best"], "entropy": entropy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategies", default="gdas,darts")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5, help="supernet epochs (CLI default 5)")
    parser.add_argument("--finetune-epochs", type=int, default=2)
    args = parser.parse_args()
    import torch
    from rich.console import Console
    from rich.table import Table

    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp(prefix="hwnas-presets-"))
    os.environ.setdefault("HWNAS_HOME", str(tmp / "home"))
    console = Console(width=170)
    runs = Table(title="Derived architecture per run (digits, held-out test split)")
    for c in (
        "strategy",
        "preset",
        "seed",
        "test acc %",
        "inherited %",
        "latency ms",
        "table acc %",
    ):
        runs.add_column(c, justify="right" if c not in ("strategy", "preset") else "left")
    runs.add_column("entropy")
    runs.add_column("derived", max_width=60)
    summary: dict[tuple[str, str], list[dict]] = {}
    for strategy in args.strategies.split(","):
        for preset in ("paper", "small-data"):
            for seed in range(args.seeds):
                b = run_one(tmp, strategy, preset, seed, args.epochs, args.finetune_epochs)
                summary.setdefault((strategy, preset), []).append(b)
                runs.add_row(
                    strategy,
                    preset,
                    str(seed),
                    f"{b['test_accuracy']:.2f}",
                    f"{b['inherited_test_accuracy']:.2f}",
                    f"{b['latency_ms']:.2f}",
                    f"{b['table_accuracy']:.2f}" if "table_accuracy" in b else "",
                    f"{b['entropy']:.4f}",
                    b["arch"],
                )
                console.print(f"done {strategy} {preset} seed {seed}", style="dim")
    console.print(runs)
    t = Table(title="Mean ± std over seeds")
    for c in ("strategy", "preset", "test acc %", "inherited %", "latency ms", "table acc %"):
        t.add_column(c)
    t.add_column("entropy")
    for (strategy, preset), rows in summary.items():

        def ms(key: str, rows=rows) -> str:
            v = [r[key] for r in rows if key in r]
            return f"{np.mean(v):.2f} ± {np.std(v):.2f}" if v else ""

        t.add_row(
            strategy,
            preset,
            ms("test_accuracy"),
            ms("inherited_test_accuracy"),
            ms("latency_ms"),
            ms("table_accuracy"),
            f"{np.mean([r['entropy'] for r in rows]):.4f}",
        )
    t.caption = (
        f"{args.seeds} seeds, {args.epochs} supernet epochs, {args.finetune_epochs} fine-tune "
        "epochs, batch 64, no hardware term; latency from the device's recorded table"
    )
    console.print(t)


if __name__ == "__main__":
    main()
