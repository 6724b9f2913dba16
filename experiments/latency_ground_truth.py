"""Latency ground truth on this machine's CPU: networks users deploy, each measured twice.

The networks (:func:`networks`): the 10 reference architectures and ``--n`` random ones of each
declared space (``mobilenetv4``, ``vit``) at their deployment size (the ``imagenet`` networks:
224x224 input, 1000 classes), and the well-known networks of :mod:`hwnas.known_networks` at
224x224. Each is measured on the ``cpu`` device (ONNX Runtime, 1 intra-op thread, sequential,
its profile's timing protocol: 30 warm-up calls, 6-12 rounds of 30 calls, median of the round
medians) through hwnas's :class:`~hwnas.measure.Profiler` and a measurement store, once per
*pass*: pass 1 and pass 2 are separate processes run at different times, each with its own
store, in a different random order, so their agreement is the test-retest bound of any
predictor. A killed pass resumes where it stopped (the store keeps what was measured); more
networks can be added later with a larger ``--n``.

    taskset -c 1 nice -n -10 python experiments/latency_ground_truth.py measure --pass 1
    taskset -c 1 nice -n -10 python experiments/latency_ground_truth.py measure --pass 2
    python experiments/latency_ground_truth.py export     # -> devices/data/cpu_ground_truth/

``export`` writes ``networks.csv`` (one row per network: both passes' latency, CV, time) and
``card.json`` (machine, CPU model, runtime versions, threads, protocol, dates, load averages)
and prints the test-retest Spearman rho and ±10% agreement.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "devices" / "data" / "cpu_ground_truth"
SPACES = ("mobilenetv4", "vit")
DATASET = "imagenet"
PASSES = (1, 2, 3)


def networks(n: int, seed: int = 0, spaces=SPACES) -> list[tuple[str, str, object]]:
    """(family, network, workload) of every ground-truth network: per space its reference set
    then ``n`` random architectures (seeded, distinct), then the well-known networks."""
    from hwnas.known_networks import NETWORKS
    from hwnas.measure import arch_workload, network_workload
    from hwnas.spaces import get_space

    out = []
    for name in spaces:
        space = get_space(name)
        ref = space.reference_archs()
        known = {a.text for a in ref}
        rng = np.random.default_rng(seed)
        random = []
        while len(random) < n:
            for a in space.sample(rng, n):
                if a.text not in known and len(random) < n:
                    known.add(a.text)
                    random.append(a)
        out += [(name, a.text, arch_workload(space, a, DATASET)) for a in ref]
        out += [(name, a.text, arch_workload(space, a, DATASET)) for a in random]
    out += [("known", k, network_workload(k)) for k in NETWORKS.names()]
    return out


def store_path(folder: Path, n_pass: int) -> Path:
    return folder / f"pass{n_pass}.db"


def measure(args) -> None:
    from rich.console import Console
    from rich.progress import Progress

    from hwnas.devices import get_device
    from hwnas.measure import Profiler
    from hwnas.store import MeasurementStore

    console = Console()
    load0 = os.getloadavg()
    nets = networks(args.n)
    order = np.random.default_rng(1000 + args.n_pass).permutation(len(nets))
    device = get_device("cpu")
    device.require_reachable()
    args.folder.mkdir(parents=True, exist_ok=True)
    store = MeasurementStore(store_path(args.folder, args.n_pass))
    profiler = Profiler(device, store, attempts=2)
    t0 = time.time()
    with Progress(console=console) as progress:
        task = progress.add_task(f"pass {args.n_pass}", total=len(nets))
        for i in order:
            family, label, wl = nets[i]
            profiler.measure(wl, "latency_ms", allow_flagged=True)
            progress.advance(task)
    load1 = os.getloadavg()
    log = args.folder / f"pass{args.n_pass}.log.json"
    runs = json.loads(log.read_text()) if log.is_file() else []
    runs.append(
        {
            "started": t0,
            "seconds": round(time.time() - t0, 1),
            "taken": profiler.counts.taken,
            "reused": profiler.counts.reused,
            "load_before": load0,
            "load_after": load1,
            "affinity": sorted(os.sched_getaffinity(0)),
            "nice": os.nice(0),
        }
    )
    log.write_text(json.dumps(runs, indent=1))
    console.print(
        f"pass {args.n_pass}: {profiler.counts.taken} measured, {profiler.counts.reused} "
        f"from the store in {time.time() - t0:.0f} s; load average {load0} -> {load1}"
    )


def kernels(args) -> None:
    """Time every distinct kernel of every network alone (the layer-sum lookup table's data)
    into ``kernels_networks.db``, and record each network's kernel list."""
    from rich.console import Console

    from hwnas.devices import get_device
    from hwnas.measure import Profiler
    from hwnas.predictors.kernels.read import read_kernels
    from hwnas.predictors.kernels.timing import overheads, time_kernels
    from hwnas.store import MeasurementStore

    console = Console()
    load0 = os.getloadavg()
    device = get_device("cpu")
    store = MeasurementStore(args.folder / "kernels_networks.db")
    profiler = Profiler(device, store, attempts=2)
    console.print(f"overheads (call, node) ms: {overheads(profiler)}")
    lists_path = args.folder / "network_kernels.jsonl"
    done = set()
    if lists_path.is_file():
        done = {json.loads(line)["model_hash"] for line in lists_path.read_text().splitlines()}
    t0 = time.time()
    with open(lists_path, "a") as out:
        for family, label, wl in networks(args.n):
            mk = read_kernels(wl.onnx_bytes(), wl.input_shape)
            _, counts = time_kernels(profiler, mk.kernels)
            if wl.model_hash not in done:
                out.write(json.dumps({
                    "model_hash": wl.model_hash,
                    "family": family,
                    "network": label,
                    "kernels": [k.key for k in mk.kernels],
                    "bookkeeping": mk.bookkeeping,
                    "records": {k.key: k.record() for k in mk.distinct().values()},
                }) + "\n")  # fmt: skip
                out.flush()
                done.add(wl.model_hash)
    console.print(
        f"kernels: {profiler.counts.taken} timed, {profiler.counts.reused} from the store in "
        f"{time.time() - t0:.0f} s; load average {load0} -> {os.getloadavg()}"
    )


def sample(args) -> None:
    """Adaptive sampling of kernel configurations (the regressors' data) into
    ``kernels_sampled.db``: ``--budget`` new kernels."""
    from hwnas.devices import get_device
    from hwnas.measure import Profiler
    from hwnas.predictors.kernels.sampling import sample_device
    from hwnas.predictors.kernels.timing import overheads
    from hwnas.store import MeasurementStore

    load0 = os.getloadavg()
    t0 = time.time()
    store = MeasurementStore(args.folder / "kernels_sampled.db")
    profiler = Profiler(get_device("cpu"), store, attempts=2)
    overheads(profiler)
    kernels, _ = sample_device(profiler, args.budget, seed=args.seed, log=print)
    print(
        f"sampled: {profiler.counts.taken} timed now, {len(kernels)} in the store, "
        f"{time.time() - t0:.0f} s; load average {load0} -> {os.getloadavg()}"
    )


def export(args) -> None:
    from scipy.stats import spearmanr

    from hwnas.devices import get_device
    from hwnas.devices.local import cpu_name
    from hwnas.export import count_params_flops
    from hwnas.predictors.kernels.timing import overhead_workload
    from hwnas.store import MeasurementStore

    nets = networks(args.n)
    device = get_device("cpu")
    passes = []
    for k in PASSES:
        if store_path(args.folder, k).is_file():
            with MeasurementStore(store_path(args.folder, k)) as st:
                passes.append({m.model_hash: m for m in st.measurements("cpu", "latency_ms")})
    rows = []
    for family, label, wl in nets:
        ms = [p.get(wl.model_hash) for p in passes]
        if any(m is None for m in ms):
            continue
        row = {
            "family": family,
            "network": label,
            "input_shape": "x".join(map(str, wl.input_shape)),
            "model_hash": wl.model_hash,
            "mmacs": round(_macs(family, label, wl, count_params_flops) / 1e6, 3),
        }
        for k, m in enumerate(ms, start=1):
            row.update({
                f"latency_ms_{k}": round(m.value, 5),
                f"cv_{k}": round(m.cv, 5),
                f"rounds_{k}": m.extra.get("rounds"),
                f"measured_at_{k}": round(m.measured_at),
                f"flagged_{k}": int(m.flagged),
            })  # fmt: skip
        rows.append(row)
    OUT.mkdir(parents=True, exist_ok=True)
    with open(OUT / "networks.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    # the kernels: every network's kernel list, and every kernel timed alone
    lists = {}
    for line in (args.folder / "network_kernels.jsonl").read_text().splitlines():
        r = json.loads(line)
        lists[r["model_hash"]] = r
    records = {}
    with gzip.open(OUT / "network_kernels.jsonl.gz", "wt") as f:
        for row in rows:
            r = lists[row["model_hash"]]
            records.update(r["records"])
            f.write(json.dumps({"model_hash": r["model_hash"], "kernels": r["kernels"],
                                "bookkeeping": r["bookkeeping"]}) + "\n")  # fmt: skip
    with gzip.open(OUT / "kernels.jsonl.gz", "wt") as f:
        for source, db in (("network", "kernels_networks.db"), ("sampled", "kernels_sampled.db")):
            with MeasurementStore(args.folder / db) as st:
                for m in st.measurements("cpu", "latency_ms"):
                    rec = m.extra.get("workload", {}).get("kernel")
                    if rec is None:
                        continue
                    f.write(json.dumps({"source": source, "latency_ms": round(m.value, 6),
                                        "cv": round(m.cv, 5), "kernel": rec}) + "\n")  # fmt: skip
    with MeasurementStore(args.folder / "kernels_networks.db") as st:
        over = {}
        for nodes in (1, 65):
            wl = overhead_workload(nodes)
            m = st.lookup("cpu", "ort", "latency_ms", wl.model_hash, wl.input_shape)
            over[nodes] = m.value if m is not None else float("nan")
    logs = {
        k: json.loads((args.folder / f"pass{k}.log.json").read_text())
        for k in PASSES
        if (args.folder / f"pass{k}.log.json").is_file()
    }
    retest = {}
    for fam in sorted({r["family"] for r in rows}) if len(passes) >= 2 else []:
        a = np.array([r["latency_ms_1"] for r in rows if r["family"] == fam])
        b = np.array([r["latency_ms_2"] for r in rows if r["family"] == fam])
        retest[fam] = {
            "networks": len(a),
            "spearman_rho": round(float(spearmanr(a, b)[0]), 4),
            "within_10pct": round(float(np.mean(np.abs(a - b) <= 0.1 * b)), 4),
            "median_abs_rel_diff": round(float(np.median(np.abs(a - b) / b)), 4),
            "latency_ms_range": [
                round(float(min(a.min(), b.min())), 3),
                round(float(max(a.max(), b.max())), 3),
            ],  # fmt: skip
        }
    sample = next(iter(passes[0].values()))
    card = {
        "what": "latency of networks at 224x224 (batch 1) on this machine's CPU, measured "
        f"{len(passes)} times; the kernels ONNX Runtime runs for them, each timed alone",
        "machine": {
            "cpu_model": cpu_name(),
            "logical_cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "pinned_to_core": "1 (taskset -c 1, nice -10); core 0 ran other people's work",
        },
        "runtime": sample.versions,
        "device_profile": {k: v for k, v in device.profile.items() if not k.startswith("_")},
        "protocol": (
            "hwnas Profiler on device 'cpu': ONNX Runtime CPU execution provider, all graph "
            "optimisations, 1 intra-op thread, sequential execution, I/O bound once; 30 warm-up "
            "calls, then rounds of 30 timed calls (6-12 rounds, until the 95% interval of the "
            "median of round medians is within +-1% or 30 s); value = median of round medians. "
            "Passes: separate processes at different times, separate stores, each in its own "
            "random order. Kernels: each distinct kernel of every network (and the adaptively "
            "sampled ones) as a one-node ONNX model, same device and protocol."
        ),
        "networks": {
            "mobilenetv4/vit": f"10 reference architectures + {args.n} random ones (seed 0), "
            "their imagenet networks (3x224x224, 1000 classes)",
            "known": "hwnas.known_networks at 224x224, 1000 classes (width 1.0)",
        },
        "overheads_ms": {"call": over[1], "node": (over[65] - over[1]) / 64},
        "dates": {
            f"pass{k}": [
                time.strftime("%Y-%m-%d %H:%M", time.gmtime(r["started"])) + " UTC" for r in v
            ]
            for k, v in logs.items()
        },
        "load_average": {
            f"pass{k}": [{"before": r["load_before"], "after": r["load_after"]} for r in v]
            for k, v in logs.items()
        },
        "test_retest_pass1_vs_pass2": retest,
        "files": {
            "networks.csv": "one row per network: latency_ms_K, cv_K, rounds_K, measured_at_K, "
            "flagged_K of each pass K; mmacs = multiply-accumulates of conv and linear layers",
            "network_kernels.jsonl.gz": "per network (model_hash): its kernel keys in execution "
            "order and its count of shape-only (bookkeeping) nodes",
            "kernels.jsonl.gz": "every kernel timed alone: source (network: a kernel of these "
            "networks; sampled: adaptive sampling), latency_ms, cv, and its description "
            "(hwnas.predictors.kernels.read.Kernel.record)",
        },
        "commands": [
            "taskset -c 1 nice -n -10 python experiments/latency_ground_truth.py measure --pass K",
            "taskset -c 1 nice -n -10 python experiments/latency_ground_truth.py kernels",
            "taskset -c 1 nice -n -10 python experiments/latency_ground_truth.py sample "
            "--budget B --seed S",
            "python experiments/latency_ground_truth.py export",
        ],
    }
    (OUT / "card.json").write_text(json.dumps(card, indent=1) + "\n")
    print(json.dumps(retest, indent=1))
    print(f"{len(rows)} networks, {len(records)} network kernels -> {OUT}")


def _macs(family, label, wl, count) -> float:
    if family == "known":
        from hwnas.known_networks import build_network

        return count(build_network(label), wl.input_shape)[1]
    from hwnas.spaces import get_space

    space = get_space(family)
    return count(space.build(space.parse(label), DATASET), wl.input_shape)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["measure", "kernels", "sample", "export"])
    parser.add_argument("--budget", type=int, default=1500, help="sample: kernels to time")
    parser.add_argument("--seed", type=int, default=0, help="sample: random seed")
    parser.add_argument("--pass", dest="n_pass", type=int, choices=list(PASSES), default=1)
    parser.add_argument("--n", type=int, default=200, help="random networks per space")
    parser.add_argument("--folder", type=Path, default=ROOT / "runs" / "latency_ground_truth")
    args = parser.parse_args()
    home = args.folder / "home"  # this campaign's own hwnas home (export cache)
    home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("HWNAS_HOME", str(home.resolve()))
    {"measure": measure, "kernels": kernels, "sample": sample, "export": export}[args.command](args)


if __name__ == "__main__":
    main()
