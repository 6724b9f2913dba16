"""Profiling cost and quality on a live device: protocol overhead, TVM vs ONNX Runtime, and
the repeatability of the reported medians.

For N NAS-Bench-201 architectures (CIFAR-10 networks, batch 1, a seeded uniform sample) on a
live device (this CPU by default), prints per architecture and in summary:

- overhead: wall time of one measurement (warm-up, adaptive rounds, statistics) divided by the
  timed inference it contains (the sum of its timed samples); compile (ONNX export, session
  creation, TVM build) is excluded and reported apart. Goal: <= 1.5x.
- TVM / ORT: the TVM latency (MetaSchedule-tuned with the device's shared database, a fresh
  database per run unless --home is given) over the ONNX Runtime latency, and the tuning paid
  for each architecture: workloads new to the database and seconds; in summary the tuning
  time per new workload.
- CV of repeated medians: each architecture measured --repeats times with ONNX Runtime (a new
  session each time); the CV across those medians. Goal: <= 3%.

    python experiments/profiling_overhead.py [--archs 20] [--trials 16] [--repeats 3]
        [--device cpu] [--no-tvm] [--home DIR] [--json out.json]

With ``--device cuda`` (an NVIDIA GPU, onnxruntime-gpu, nvidia-ml-py) the same runs compare
ORT CUDA with TVM CUDA and add NVML energy per inference. Numbers on a shared machine are
provisional: run it on a quiet one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def sample_archs(n: int, seed: int = 0) -> list[str]:
    import numpy as np

    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    return [a.text for a in space.sample(np.random.default_rng(seed), n)]


def workloads(archs: list[str]):
    """Workloads with their ONNX exported once up front (export time returned apart)."""
    from hwnas.devices.base import Workload
    from hwnas.measure import arch_workload
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    arch_workload(space, space.parse(archs[0]), "cifar10").onnx_bytes()  # imports torch first
    out, export_s = [], []
    for text in archs:
        w = arch_workload(space, space.parse(text), "cifar10")
        t0 = time.perf_counter()
        data = w.onnx_bytes()
        export_s.append(time.perf_counter() - t0)
        out.append(
            Workload(w.model_hash, w.label, w.input_shape, w.arch, w.dataset, lambda d=data: d)
        )
    return out, export_s


def measure(device, workload) -> dict:
    """One measurement with its wall time split into compile and the rest."""
    compile_s = {}
    # timed on the engine's class, not the instance: a TVM build pickles the engine into a
    # child process (hwnas.isolate), and a local function in its __dict__ cannot be pickled
    cls = type(device.engine)
    engine_compile, own = cls.compile, "compile" in cls.__dict__

    def timed_compile(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return engine_compile(self, *args, **kwargs)
        finally:
            compile_s["s"] = time.perf_counter() - t0

    cls.compile = timed_compile
    try:
        t0 = time.perf_counter()
        results = device.measure_all(workload)
        wall = time.perf_counter() - t0
    finally:
        if own:
            cls.compile = engine_compile
        else:
            del cls.compile
    m = results["latency_ms"]
    timed = sum(m.samples) / 1e3
    energy = results.get("energy_mj")
    return {
        "ms": m.value,
        "cv": m.cv,
        "rel_ci": m.extra.get("rel_ci"),
        "rounds": m.extra.get("rounds"),
        "flagged": m.flagged,
        "wall_s": wall,
        "compile_s": compile_s.get("s", 0.0),
        "timed_s": timed,
        "overhead": (wall - compile_s.get("s", 0.0)) / timed,
        "tuned": m.extra.get("tuned_workloads", 0),
        "tuning_s": m.extra.get("tuning_s", 0.0),
        "energy_mj": energy.value if energy is not None else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--archs", type=int, default=20)
    parser.add_argument("--trials", type=int, default=16, help="MetaSchedule trials per workload")
    parser.add_argument("--repeats", type=int, default=3, help="ORT measurements per arch")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--no-tvm", action="store_true")
    parser.add_argument("--home", default=None, help="hwnas home (default: a fresh temp dir)")
    parser.add_argument("--json", default=None, help="also write all numbers to this file")
    args = parser.parse_args()

    home = args.home or tempfile.mkdtemp(prefix="hwnas-profiling-")
    os.environ["HWNAS_HOME"] = home
    from hwnas.devices import get_device

    started = time.perf_counter()
    archs = sample_archs(args.archs)
    loads, export_s = workloads(archs)
    ort = get_device(args.device, runtime="ort")
    ort.require_reachable()
    rows = [{"arch": a, "export_s": e, "ort": []} for a, e in zip(archs, export_s)]
    for rep in range(args.repeats):  # interleaved: drift hits every architecture alike
        for row, w in zip(rows, loads):
            row["ort"].append(measure(ort, w))
        print(f"ORT repeat {rep + 1}/{args.repeats} done ({time.perf_counter() - started:.0f} s)")
    if not args.no_tvm:
        tvm = get_device(
            args.device, runtime="tvm", overrides={"tvm": {"trials_per_task": args.trials}}
        )
        tvm.require_reachable()
        for i, (row, w) in enumerate(zip(rows, loads)):
            row["tvm"] = measure(tvm, w)
            print(
                f"TVM {i + 1}/{len(rows)}: {row['tvm']['tuned']} new workload(s) tuned in "
                f"{row['tvm']['tuning_s']:.0f} s ({time.perf_counter() - started:.0f} s)"
            )

    print()
    head = f"{'#':>2} {'ORT ms':>8} {'CV rep%':>7} {'ovh':>5} {'ORT cmp s':>9}"
    if not args.no_tvm:
        head += f" {'TVM ms':>8} {'TVM/ORT':>7} {'ovh':>5} {'tuned':>5} {'tune s':>6} {'cmp s':>6}"
    if any(r["ort"][0]["energy_mj"] is not None for r in rows):
        head += f" {'ORT mJ':>8}"
    print(head + "  arch")
    for i, row in enumerate(rows):
        meds = [m["ms"] for m in row["ort"]]
        row["cv_repeats"] = statistics.pstdev(meds) / statistics.fmean(meds) if len(meds) > 1 else 0
        first = row["ort"][0]
        line = (
            f"{i:>2} {statistics.median(meds):>8.3f} {100 * row['cv_repeats']:>7.2f} "
            f"{first['overhead']:>5.2f} {row['export_s'] + first['compile_s']:>9.2f}"
        )
        if "tvm" in row:
            t = row["tvm"]
            line += (
                f" {t['ms']:>8.3f} {t['ms'] / statistics.median(meds):>7.2f} {t['overhead']:>5.2f}"
                f" {t['tuned']:>5} {t['tuning_s']:>6.0f} {t['compile_s'] - t['tuning_s']:>6.1f}"
            )
        if first["energy_mj"] is not None:
            line += f" {first['energy_mj']:>8.3f}"
        print(line + "  " + row["arch"])

    overheads = [m["overhead"] for r in rows for m in r["ort"]]
    cvs = [r["cv_repeats"] for r in rows]
    flagged = sum(m["flagged"] for r in rows for m in r["ort"])
    print()
    print(
        "ORT overhead (wall excl. compile / timed inference): "
        f"median {statistics.median(overheads):.2f}x, max {max(overheads):.2f}x "
        f"over {len(overheads)} measurements (goal <= 1.5x); "
        f"{flagged} flagged (CV > max_cv)"
    )
    print(
        f"CV of {args.repeats} repeated medians: median {100 * statistics.median(cvs):.2f}%, "
        f"max {100 * max(cvs):.2f}% (goal <= 3%)"
    )
    compile_ort = [r["export_s"] + r["ort"][0]["compile_s"] for r in rows]
    print(f"ORT compile (export + session): median {statistics.median(compile_ort):.2f} s per arch")
    if not args.no_tvm:
        ratios = [r["tvm"]["ms"] / statistics.median(m["ms"] for m in r["ort"]) for r in rows]
        tuned = sum(r["tvm"]["tuned"] for r in rows)
        tuning = sum(r["tvm"]["tuning_s"] for r in rows)
        build = [r["tvm"]["compile_s"] - r["tvm"]["tuning_s"] for r in rows]
        tvm_over = [r["tvm"]["overhead"] for r in rows]
        print(
            f"TVM/ORT latency ({args.trials} trials per workload): "
            f"median {statistics.median(ratios):.2f}x, "
            f"min {min(ratios):.2f}x, max {max(ratios):.2f}x"
        )
        print(
            f"TVM tuning: {tuned} workloads tuned for {len(rows)} architectures in {tuning:.0f} s "
            f"({tuning / max(tuned, 1):.0f} s per new workload); archs needing new workloads: "
            f"{sum(1 for r in rows if r['tvm']['tuned'])}; "
            f"compile median {statistics.median(build):.1f} s"
        )
        print(f"TVM overhead: median {statistics.median(tvm_over):.2f}x, max {max(tvm_over):.2f}x")
    print(f"total {time.perf_counter() - started:.0f} s, hwnas home {home}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
