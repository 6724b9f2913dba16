"""Supernet training across processes: time per epoch, and the loss curve of 1 vs 2 processes.

Every run is the CLI as a user types it (``hwnas search --strategy S ... [--nproc 2]``) on
scikit-learn's digits (1,600 of its 1,797 images: 960 for training, 320 for validation, so that
every batch halves evenly), the default CPU-sized supernet, ``--batch-size`` 64 (the global
batch: 32 per process with 2), 2 epochs, no fine-tuning and no zoo, one torch thread per
process unless the row says otherwise. Rows:

- ``1 process``: today's single-process training;
- ``1 process, 2 threads``: the same with ``--set threads=2`` (the other way to use 2 cores);
- ``2 processes``: ``--nproc 2`` (DistributedDataParallel, gloo);
- ``1 process, BN per half-batch``: one process that runs each half of every batch through the
  supernet separately and averages the two losses; this is what DistributedDataParallel
  without SyncBatchNorm computes with 2 processes (batch norm normalises each process's shard
  with the shard's statistics), so ``2 processes`` must equal it to float rounding;
- ``1 process, seed 1``: another initialisation and sampling seed, the scale of run-to-run
  variation that a difference between 1 and 2 processes should be compared with.

Table 1 gives the seconds of each training epoch (measured inside the training loop, the
slowest process) and the whole command's wall time (start-up, cost model, derivation and
scoring included). Table 2 gives each epoch's mean weight-step loss and architecture-step loss,
and how far each run's architecture parameters and supernet weights (``supernet.pt``) are from
the ``2 processes`` run.

Run: ``nice -n 10 python experiments/supernet_ddp.py`` (about 4 minutes on 2 quiet cores;
``--strategy darts`` or any supernet strategy; ``--quick`` uses 300 images; ``--timing`` runs
the 1- and 2-process rows only). Timings taken while other jobs share the CPU are noisy (two
threads in one process suffer most).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SHARDED = """
import contextlib, sys, torch
from torch import nn
import hwnas.supernet.strategies.base as base

class Halves(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.inner = net
    def forward(self, x, path):
        return torch.cat([self.inner(h, path) for h in x.chunk(2)])

init = base.SupernetStrategy.__init__
def patched(self, *args, **kwargs):
    init(self, *args, **kwargs)
    self.net = Halves(self.supernet)
base.SupernetStrategy.__init__ = patched
base.SupernetStrategy.unsynced = lambda self: contextlib.nullcontext()
from hwnas.cli import main
sys.exit(main(sys.argv[1:]))
"""
"""A one-process run whose every forward (weight and architecture steps) takes each half of
the batch separately: batch norm per half, as in 2 processes without SyncBatchNorm."""

ROWS = [
    ("1 process", [], "cli"),
    ("1 process, 2 threads", ["--set", "threads=2"], "cli"),
    ("2 processes", ["--nproc", "2"], "cli"),
    ("1 process, BN per half-batch", [], "sharded"),
    ("1 process, seed 1", ["--seed", "1"], "cli"),
]
DEVICE = {"nasbench201": "pixel3", "fbnet": "pixel3", "ofa": "v100_64"}


def command(strategy: str, space: str, limit: int) -> list[str]:
    return [
        "search",
        "--strategy",
        strategy,
        "--space",
        space,
        "--device",
        DEVICE[space],
        "--data",
        "digits",
        "--epochs",
        "2",
        "--batch-size",
        "64",
        "--finetune-epochs",
        "0",
        "--latency-weight",
        "0.5",
        "--no-zoo",
        "--set",
        f"limit={limit}",
        *(
            ["--set", "evolution_trials=8", "--set", "population=4", "--set", "candidates=2"]
            if strategy == "oneshot"
            else []
        ),
    ]


def run(label: str, args: list[str], how: str, home: Path, folder: Path) -> dict:
    out = folder / label.replace(" ", "_").replace(",", "")
    full = [*args, "--out", str(out), "--study", out.name]
    prog = ["-m", "hwnas"] if how == "cli" else ["-c", SHARDED]
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *prog, *full],
        capture_output=True,
        text=True,
        env={**os.environ, "HWNAS_HOME": str(home)},
    )
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{label} failed:\n{done.stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"label": label, "wall": wall, "summary": summary, "ckpt": out / "supernet.pt"}


def distance(a: Path, b: Path) -> tuple[float, float]:
    """Largest |difference| of the architecture parameters, and of the supernet weights."""
    import torch

    sa, sb = (torch.load(p, map_location="cpu", weights_only=False) for p in (a, b))
    pairs = zip(sa["strategy"]["alphas"], sb["strategy"]["alphas"])
    alphas = max(float((x - y).abs().max()) for x, y in pairs)
    weights = max(
        float((sa["supernet"][k].float() - sb["supernet"][k].float()).abs().max())
        for k in sa["supernet"]
        if sa["supernet"][k].is_floating_point() and "running" not in k
    )
    return alphas, weights


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strategy", default="gdas")
    parser.add_argument("--space", default="nasbench201")
    parser.add_argument("--quick", action="store_true", help="300 images instead of 1,600")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run folders here")
    parser.add_argument(
        "--timing", action="store_true", help="only the 1-process and 2-process rows"
    )
    opts = parser.parse_args()
    base = command(opts.strategy, opts.space, 300 if opts.quick else 1600)
    keep = opts.keep.resolve() if opts.keep else None
    ctx = contextlib.nullcontext(str(keep)) if keep else tempfile.TemporaryDirectory()
    with ctx as tmp:
        folder = Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        rows = [
            run(label, [*base, *extra], how, folder / "home", folder)
            for label, extra, how in ROWS
            if not opts.timing or label in ("1 process", "2 processes")
        ]
        report(rows, f"{opts.strategy} on {opts.space}, digits, global batch 64, 2 epochs (CPU)")


def report(rows: list[dict], title: str) -> None:
    """Print the two tables (the run folders must still exist)."""
    ddp = next(r for r in rows if r["label"] == "2 processes")
    print(f"\n{title}\n")
    print(f"{'run':32} {'epoch 1 s':>10} {'epoch 2 s':>10} {'command s':>10}")
    for r in rows:
        e = r["summary"]["epochs"]
        print(f"{r['label']:32} {e[0]['seconds']:10.2f} {e[1]['seconds']:10.2f} {r['wall']:10.1f}")
    print(
        f"\n{'run':32} {'loss e1':>9} {'loss e2':>9} {'arch e1':>9} {'arch e2':>9}"
        f" {'|dalpha|':>9} {'|dw|':>9}  derived = 2 processes"
    )
    for r in rows:
        e = r["summary"]["epochs"]
        da, dw = distance(r["ckpt"], ddp["ckpt"])
        same = r["summary"]["best"]["arch"] == ddp["summary"]["best"]["arch"]
        print(
            f"{r['label']:32} {e[0]['loss']:9.5f} {e[1]['loss']:9.5f} {e[0]['arch_loss']:9.5f}"
            f" {e[1]['arch_loss']:9.5f} {da:9.2e} {dw:9.2e}  {same}"
        )


if __name__ == "__main__":
    main()
