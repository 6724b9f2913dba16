"""Peak memory and time per epoch of every supernet strategy on digits (CPU; GPU if present).

Each row runs in a fresh subprocess: it builds the supernet, the data and the cost model, then
trains one epoch of digits (1,079 training images, batch 256 so that activations dominate) and
reports the epoch's peak resident memory (Linux ``VmHWM``, reset with ``/proc/self/clear_refs``
when the epoch starts) minus the resident memory at its start (the epoch's extra memory:
activations kept for backward, gradients, optimiser state), and the epoch's seconds. On CUDA
the same with ``torch.cuda.max_memory_allocated`` and ``memory_allocated``. One torch thread.
"saved MiB" is exact and the same on any machine: the largest total size of the tensors one
forward pass of the step keeps for its backward (``torch.autograd.graph.saved_tensors_hooks``),
the activation memory per step. The PC-DARTS rows (``partial_channels=K``, Xu et al., ICLR
2020) send 1/K of every edge's channels through the mixed operation.
The "DARTS K of 5 ops" rows restrict DARTS's mixture to the first K operations of every edge
(none, skip, conv 1x1, conv 3x3, avg pool) to show memory growing with the number of
candidates; ProxylessNAS / GDAS / Single-Path compute one (ProxylessNAS's architecture step:
two) paths whatever the number of candidates.

Run: ``nice -n 10 .venv/bin/python experiments/supernet_memory.py`` (about 8-12 minutes on 2
shared cores; ``--quick`` runs a subset in about 3 minutes; ``--rows 0,5,6,7,8`` the DARTS,
PC-DARTS and GDAS rows). Timings on a shared VM are
provisional.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

ROWS = [
    # (label, space, strategy, options, supernet config)
    ("DARTS 1st order, 5 ops", "nasbench201", "darts", {}, {"channels": 8, "cells": 1}),
    ("DARTS 2 of 5 ops", "nasbench201", "darts", {"_k": 2}, {"channels": 8, "cells": 1}),
    ("DARTS 3 of 5 ops", "nasbench201", "darts", {"_k": 3}, {"channels": 8, "cells": 1}),
    ("DARTS 4 of 5 ops", "nasbench201", "darts", {"_k": 4}, {"channels": 8, "cells": 1}),
    ("DARTS 2nd order", "nasbench201", "darts", {"order": 2}, {"channels": 8, "cells": 1}),
    ("PC-DARTS K=2 (darts)", "nasbench201", "darts", {}, {"channels": 8, "partial_channels": 2}),
    ("PC-DARTS K=4 (darts)", "nasbench201", "darts", {}, {"channels": 8, "partial_channels": 4}),
    ("GDAS", "nasbench201", "gdas", {}, {"channels": 8, "cells": 1}),
    ("GDAS K=4", "nasbench201", "gdas", {}, {"channels": 8, "partial_channels": 4}),
    ("ProxylessNAS", "nasbench201", "proxyless", {"warmup": 0.0}, {"channels": 8, "cells": 1}),
    ("one-shot (uniform)", "nasbench201", "oneshot", {}, {"channels": 8, "cells": 1}),
    ("FBNet DNAS, 9 blocks", "fbnet", "fbnet", {"warmup": 0.0}, {"width": 0.25}),
    ("GDAS", "fbnet", "gdas", {}, {"width": 0.25}),
    ("ProxylessNAS", "fbnet", "proxyless", {"warmup": 0.0}, {"width": 0.25}),
    ("Single-Path NAS", "ofa", "singlepath", {}, {"width": 0.5}),
    ("ProxylessNAS", "ofa", "proxyless", {"warmup": 0.0}, {"width": 0.5}),
    ("one-shot (sandwich)", "ofa", "oneshot", {"sampling": "sandwich"}, {"width": 0.5}),
]
QUICK = {0, 1, 5, 6, 7, 8, 9, 11, 14}
DEVICE_FOR = {"nasbench201": "pixel3", "fbnet": "pixel3", "ofa": "v100_64"}


def child(spec: dict) -> None:
    """Runs in the subprocess: one strategy, one epoch; prints a JSON line."""
    import torch

    torch.set_num_threads(1)
    from hwnas.datasets import load_data
    from hwnas.devices import get_device
    from hwnas.spaces.mixed import Choice
    from hwnas.supernet import build_supernet
    from hwnas.supernet.cost import HardwareLoss, fit_table_lut
    from hwnas.supernet.strategies import SUPERNET_STRATEGIES
    from hwnas.supernet.train import resolve_device, search_epoch

    torch.manual_seed(0)
    device = resolve_device()
    space = spec["space"]
    data = load_data("digits", image_size=32 if space == "ofa" else 16)
    net = build_supernet(space, 10, data.image_shape, spec["config"]).to(device)
    lut = fit_table_lut(net.space, get_device(DEVICE_FOR[space]))
    uniform = [torch.full((n,), 1.0 / n) for n in net.sizes]
    hw = HardwareLoss(lut, weight=0.5, reference=float(lut.expected(uniform)))
    options = dict(spec["options"])
    k = options.pop("_k", None)
    batch = 256
    steps = -(-len(data.train) // batch)
    strategy = SUPERNET_STRATEGIES.get(spec["strategy"])(net, hw, options, steps, seed=0)
    if k is not None:  # DARTS over the first k candidates only
        full = strategy.soft_path

        def restricted(gumbel_tau=None):
            out = []
            for c in full(gumbel_tau):
                w = c.weights[:k] / c.weights[:k].sum()
                out.append(Choice(torch.cat([w, c.weights[k:] * 0]), tuple(range(k))))
            return out

        strategy.soft_path = restricted
    forward = strategy.loss
    saved = [0]

    def counted(x, y, path):  # bytes each forward keeps for its backward; the largest counts
        total = 0

        def pack(t):
            nonlocal total
            total += t.numel() * t.element_size()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = forward(x, y, path)
        saved[0] = max(saved[0], total)
        return out

    strategy.loss = counted
    stats = search_epoch(strategy, data.train, data.val, batch, 0, device)
    extra = stats.peak_mib - stats.start_mib
    print(
        json.dumps(
            {
                "seconds": stats.seconds,
                "peak_mib": stats.peak_mib,
                "extra_mib": extra,
                "saved_mib": saved[0] / 2**20,
                "device": str(device),
                "params": sum(p.numel() for p in net.parameters()),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a subset (about 2 minutes)")
    parser.add_argument("--rows", default="", help="comma-separated row numbers (0-based)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(json.loads(args.child))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Supernet strategies: one epoch of digits (1,079 images, batch 256)")
    cols = ("space", "strategy", "params", "s / epoch", "saved MiB", "epoch growth MiB", "peak MiB")
    for col in cols:
        table.add_column(col, justify="right" if col not in ("space", "strategy") else "left")
    console = Console(width=160)
    device = "cpu"
    for i, (label, space, strategy, options, config) in enumerate(ROWS):
        if (args.quick and i not in QUICK) or (args.rows and str(i) not in args.rows.split(",")):
            continue
        spec = {"space": space, "strategy": strategy, "options": options, "config": config}
        r = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(spec)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if r.returncode != 0:
            table.add_row(space, label, "", "failed", "", r.stderr.strip().splitlines()[-1], "")
            continue
        out = json.loads(r.stdout.strip().splitlines()[-1])
        device = out["device"]
        table.add_row(
            f"{space} {json.dumps(config)}",
            label,
            f"{out['params']:,}",
            f"{out['seconds']:.1f}",
            f"{out['saved_mib']:.1f}",
            f"{out['extra_mib']:.0f}",
            f"{out['peak_mib']:.0f}",
        )
        console.print(f"done: {space} {label}", style="dim")
    table.caption = (
        f"device {device}, 1 torch thread; growth = the epoch's peak RSS minus RSS at its start "
        "(CPU) or max allocated minus allocated (CUDA); timings provisional on a shared VM"
    )
    console.print(table)


if __name__ == "__main__":
    main()
