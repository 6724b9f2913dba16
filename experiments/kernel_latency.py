"""Latency beyond the benchmark tables: the kernel-level predictor against the ground truth.

Reads the shipped ground truth of this project's CPU (``devices/data/cpu_ground_truth/``:
networks measured at 224x224 in several passes, every kernel ONNX Runtime runs for them timed
alone, and adaptively sampled kernel configurations; ``experiments/latency_ground_truth.py``
took them) and prints, per family (``mobilenetv4`` and ``vit``: their random networks;
``known``: the well-known networks of :mod:`hwnas.known_networks`), Spearman rho, ±10%
accuracy, MAPE and 90% interval coverage of

- ``kernel (measured kernels)``: :class:`hwnas.predictors.kernels.model.KernelPredictor` with
  every kernel timed on the device (what ``hwnas predict --device cpu --onnx`` does on a live
  device), its correction and interval calibrated on the 20 reference networks of the two
  spaces (``hwnas refset measure --space mobilenetv4`` / ``vit``);
- ``kernel (regressors only)``: the same predictor with no kernel of these networks timed:
  every kernel predicted by the per-type regressors fitted on the adaptively sampled kernels
  (nn-Meter's setting);
- ``layer-sum lookup table``: the sum of the network's own kernels timed alone, no correction
  (ProxylessNAS / FBNet / OFA's lookup tables, at kernel granularity);
- ``FLOPs``: multiply-accumulates scaled on the same 20 reference networks (log-log fit);
- ``meta-learned``: the ``fbnet`` artifact (HELP-style meta-learned predictor, graph
  features) adapted on the same 20 reference networks;

beside the test-retest bound (pass 1 against pass 2). The truth is the median of the passes;
reference networks are left out of the scores. Then, for point 4 of issue 20, the lookup
table a supernet search fits on the kernel-level predictions (``cost=kernel``) scored against
the measured networks (R^2).

    python experiments/kernel_latency.py [--data devices/data/cpu_ground_truth] [--no-meta]
    taskset -c 1 python experiments/kernel_latency.py --small   # live, uncalibrated, small nets

``--small`` times small versions of well-known networks on this machine's live ``cpu`` device
with the kernel-level predictor before any calibration network is measured (the correction's
prior), each against the whole network measured before and after the prediction.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = ("mobilenetv4", "vit", "known")


def load(folder: Path):
    """(rows of networks.csv with 'truth', kernel lists by model hash, kernels by key with
    their time and source, card)."""
    from hwnas.predictors.kernels.read import Kernel

    rows = list(csv.DictReader(open(folder / "networks.csv")))
    passes = sorted(int(k.rsplit("_", 1)[1]) for k in rows[0] if k.startswith("latency_ms_"))
    for r in rows:
        vals = [float(r[f"latency_ms_{k}"]) for k in passes]
        r["values"] = vals
        r["truth"] = float(np.median(vals))
    lists = {}
    with gzip.open(folder / "network_kernels.jsonl.gz", "rt") as f:
        for line in f:
            d = json.loads(line)
            lists[d["model_hash"]] = d
    kernels = {}
    with gzip.open(folder / "kernels.jsonl.gz", "rt") as f:
        for line in f:
            d = json.loads(line)
            k = Kernel.from_record(d["kernel"])
            prev = kernels.get(k.key)
            if prev is None or d["source"] == "network":
                kernels[k.key] = (k, float(d["latency_ms"]), float(d["cv"]), d["source"],
                                  prev[3] if prev else None)  # fmt: skip
    card = json.loads((folder / "card.json").read_text())
    return rows, passes, lists, kernels, card


def scores(pred, truth, low=None, high=None) -> dict:
    from scipy.stats import spearmanr

    pred, truth = np.asarray(pred, float), np.asarray(truth, float)
    rel = np.abs(pred - truth) / truth
    out = {
        "rho": float(spearmanr(pred, truth)[0]) if len(truth) > 2 else float("nan"),
        "within10": float(np.mean(rel <= 0.10)),
        "within15": float(np.mean(rel <= 0.15)),
        "mape": float(100 * np.mean(rel)),
    }
    if low is not None:
        out["cover90"] = float(np.mean((truth >= low) & (truth <= high)))
    return out


class Predictors:
    """Every predictor of the table, fitted on the reference networks."""

    def __init__(self, rows, lists, kernels, card):
        from hwnas.predictors.kernels.model import KernelPredictor
        from hwnas.predictors.kernels.read import ModelKernels
        from hwnas.predictors.kernels.regress import KernelRegressors

        self.rows, self.lists, self.kernels = rows, lists, kernels
        over = card["overheads_ms"]
        self.call, self.node = float(over["call"]), float(np.nan_to_num(over["node"]))
        sampled = [(k, t) for k, t, _cv, src, other in kernels.values()
                   if src == "sampled" or other == "sampled"]  # fmt: skip
        self.regressors = KernelRegressors().fit(
            [k for k, _ in sampled], [t for _, t in sampled], self.call
        )
        self.mk = {
            h: ModelKernels(tuple(kernels[k][0] for k in d["kernels"]), d["bookkeeping"], {})
            for h, d in lists.items()
        }
        self.refs = [r for r in rows if r["family"] != "known" and r["role"] == "reference"]
        y_ref = np.array([r["truth"] for r in self.refs])

        def predictor(measured: bool) -> KernelPredictor:
            kp = KernelPredictor(None, regressors=self.regressors, budget=0)
            kp.set_overheads(self.call, self.node)
            if measured:
                net_kernels = [(k, t, cv) for k, t, cv, src, _ in kernels.values()
                               if src == "network"]  # fmt: skip
                for k, t, cv in net_kernels:
                    kp._times[k.key] = (t, max(0.03, cv), "measured")
            return kp

        self.measured = predictor(True)
        self.regress = predictor(False)
        for kp in (self.measured, self.regress):
            est = [self.estimate(kp, r) for r in self.refs]
            from hwnas.predictors.kernels.model import fit_correction

            kp.correction = fit_correction(
                np.array([e.total_ms for e in est]), y_ref, np.array([e.rel_std for e in est]),
                families=[r["family"] for r in self.refs],
            )
        # FLOPs: log-latency on log-MACs over the references
        x = np.log([float(r["mmacs"]) for r in self.refs])
        self.flops_coef = np.polyfit(x, np.log(y_ref), 1)

    def estimate(self, kp, row):
        mk = self.mk[row["model_hash"]]
        kp._resolve(mk.kernels)
        return kp.estimate_kernels(mk)

    def kernel(self, kp, rows):
        out = [kp.interval(self.estimate(kp, r), r["family"] if r["family"] != "known" else None)
               for r in rows]  # fmt: skip (a well-known network is of no calibration family)
        lo, mid, hi = (np.array([o[i] for o in out]) for i in range(3))
        warned = sum(bool(o[3]) for o in out)
        return mid, lo, hi, warned

    def lut(self, rows):
        return np.array([sum(self.kernels[k][1] for k in self.lists[r["model_hash"]]["kernels"])
                         for r in rows])  # fmt: skip

    def flops(self, rows):
        x = np.log([float(r["mmacs"]) for r in rows])
        return np.exp(np.polyval(self.flops_coef, x))


def meta_predictions(rows, refs) -> np.ndarray | None:
    """The fbnet artifact adapted on the reference networks (graph features of their ONNX
    export), predicting ``rows``; None when the networks cannot be exported here."""
    import onnx

    from hwnas.measure import arch_workload, network_workload
    from hwnas.predictors import DECLARED_ARTIFACT, load_predictor
    from hwnas.predictors.graph import GraphModel, onnx_graph_features
    from hwnas.spaces import get_space

    def model(r):
        if r["family"] == "known":
            wl = network_workload(r["network"])
        else:
            sp = get_space(r["family"])
            wl = arch_workload(sp, sp.parse(r["network"]), "imagenet")
        return GraphModel(r["network"], onnx_graph_features(onnx.load_from_string(wl.onnx_bytes())))

    pred = load_predictor(DECLARED_ARTIFACT)
    pred.fit([model(r) for r in refs], np.array([r["truth"] for r in refs]))
    return pred.predict([model(r) for r in rows])[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "devices" / "data" / "cpu_ground_truth")
    parser.add_argument("--no-meta", action="store_true", help="skip the meta-learned baseline "
                        "(it exports every network to ONNX: a few minutes)")  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("HWNAS_HOME", str((ROOT / "runs" / "kernel_latency" / "home").resolve()))

    from rich.console import Console

    from hwnas.cli.render import print_table

    console = Console(width=150)
    rows, passes, lists, kernels, card = load(args.data)
    seen: dict[str, int] = {}
    for r in rows:  # the first 10 networks of each space are its reference set
        seen[r["family"]] = seen.get(r["family"], 0) + 1
        r["role"] = "reference" if r["family"] != "known" and seen[r["family"]] <= 10 else "test"
    P = Predictors(rows, lists, kernels, card)
    refs = P.refs
    n_sampled = sum(1 for k in kernels.values() if "sampled" in (k[3], k[4]))
    console.print(
        f"ground truth: {len(rows)} networks on {card['machine']['cpu_model']} "
        f"(ONNX Runtime {card['runtime'].get('onnxruntime')}, {card['runtime'].get('threads')} "
        f"thread), median of {len(passes)} passes; {n_sampled} sampled kernels, regressors for "
        f"{len(P.regressors.models)} kernel types; load average now {os.getloadavg()}"
    )
    meta = None
    if not args.no_meta:
        tests = [r for r in rows if r["role"] == "test"]
        meta = dict(zip((r["model_hash"] for r in tests), meta_predictions(tests, refs)))
    table = []
    summary = {}
    for fam in FAMILIES:
        test = [r for r in rows if r["family"] == fam and r["role"] == "test"]
        y = np.array([r["truth"] for r in test])
        a = np.array([r["values"][0] for r in test])
        b = np.array([r["values"][-1] for r in test])  # one pass only: no retest (rho 1)
        retest = scores(a, b)
        fam_rows = {}
        mid, lo, hi, warned = P.kernel(P.measured, test)
        fam_rows["kernel (measured kernels)"] = scores(mid, y, lo, hi) | {"warned": warned}
        mid_r, lo_r, hi_r, warned_r = P.kernel(P.regress, test)
        fam_rows["kernel (regressors only)"] = scores(mid_r, y, lo_r, hi_r) | {"warned": warned_r}
        fam_rows["layer-sum lookup table"] = scores(P.lut(test), y)
        fam_rows["FLOPs (scaled)"] = scores(P.flops(test), y)
        if meta is not None:
            fam_rows["meta-learned (fbnet)"] = scores([meta[r["model_hash"]] for r in test], y)
        summary[fam] = {"test_retest": retest, **fam_rows}
        r = retest
        table.append((fam, f"test-retest (pass 1 vs 2), {len(test)} networks",
                      f"{r['rho']:.3f}", f"{r['within10']:.3f}", f"{r['within15']:.3f}",
                      f"{r['mape']:.1f}", ""))  # fmt: skip
        for name, s in fam_rows.items():
            table.append((fam, name, f"{s['rho']:.3f}", f"{s['within10']:.3f}",
                          f"{s['within15']:.3f}", f"{s['mape']:.1f}",
                          f"{s['cover90']:.3f}" if "cover90" in s else "-"))  # fmt: skip
        if fam == "known":
            errors = ", ".join(
                f"{r['network']} {100 * (m / r['truth'] - 1):+.1f}%" for r, m in zip(test, mid)
            )
            console.print(f"well-known networks (measured kernels): {errors}")
    print_table(
        console,
        "Latency at 224x224 on this CPU: predictors against the median of the passes "
        "(reference networks left out)",
        ("family", "predictor", "rho", "±10%", "±15%", "MAPE %", "90% cover"),
        table,
        keys=("predictor",),
        right=("rho", "±10%", "±15%", "MAPE %", "90% cover"),
    )
    lut_lines = lut_fit(rows, P)
    for line in lut_lines:
        console.print(line)
    out = ROOT / "runs" / "kernel_latency" / "summary.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1))
    console.print(f"-> {out}")


def lut_fit(rows, P) -> list[str]:
    """The lookup table ``cost=kernel`` fits for a supernet (on the kernel-level predictions
    of the space's networks), scored against the measured networks."""
    from hwnas.spaces import get_space
    from hwnas.supernet.cost import fit_lut

    lines = []
    for fam in ("mobilenetv4", "vit"):
        sp = get_space(fam)
        fam_rows = [r for r in rows if r["family"] == fam]
        archs = [sp.parse(r["network"]) for r in fam_rows]
        mid = P.kernel(P.measured, fam_rows)[0]
        lut = fit_lut(sp, archs, mid, "latency_ms", "kernel")
        y = np.array([r["truth"] for r in fam_rows])
        p = lut.predict(archs)[0]
        r2 = 1 - ((p - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
        s = scores(p, y)
        r2_kernel = 1 - ((mid - y) ** 2).sum() / ((y - y.mean()) ** 2).sum()
        lines.append(
            f"cost=kernel lookup table, {fam}: fitted on the kernel-level predictions of "
            f"{len(archs)} networks (held-out R^2 {lut.fit.get('r2', float('nan')):.3f}); against "
            f"their measured latency R^2 {r2:.3f}, rho {s['rho']:.3f}, ±10% {s['within10']:.3f} "
            f"(the kernel-level predictions themselves: R^2 {r2_kernel:.3f})"
        )
    return lines


SMALL = (
    ("shufflenet_v2", 96, 0.5), ("resnext50", 96, 0.5), ("resnext50", 128, 0.25),
    ("resnext50", 64, 0.5), ("vit_tiny", 64, 0.5), ("efficientnet_b0", 64, 0.5),
    ("resnet18", 64, 0.5), ("mobilenet_v3_small", 64, 0.5),
)  # fmt: skip
"""Small versions of well-known networks (name, input side, width) for ``--small``."""


def small(folder: Path) -> None:
    """The kernel-level predictor on this machine's live ``cpu`` device with no calibration
    network (the correction's prior), against the whole network measured before and after the
    prediction: what a user (and the tests) get on a machine hwnas was not calibrated on."""
    from hwnas.devices import get_device
    from hwnas.measure import Profiler, network_workload
    from hwnas.predictors.graph import load_graph_model
    from hwnas.predictors.kernels.device import kernel_predictor
    from hwnas.store import MeasurementStore

    folder.mkdir(parents=True, exist_ok=True)
    dev = get_device("cpu")
    print(f"load average {os.getloadavg()}")
    with MeasurementStore(folder / "small_kernels.db") as st:
        kp, note = kernel_predictor(Profiler(dev, st))
        print(note)
        for name, side, width in SMALL:
            wl = network_workload(name, side=side, width=width)
            path = folder / f"{name}-{side}-{width:g}.onnx"
            path.write_bytes(wl.onnx_bytes())
            before = dev.measure(wl).value
            lo, mid, hi, _ = kp.interval(kp.estimate(load_graph_model(path)))
            after = dev.measure(wl).value
            y = (before + after) / 2
            print(
                f"{name} {side}x{side} width {width:g}: predicted {mid:.3f} ms (90% interval "
                f"{lo:.3f}-{hi:.3f}), measured {before:.3f} / {after:.3f} ms: "
                f"{100 * (mid / y - 1):+.1f}%"
            )
    print(f"load average {os.getloadavg()}")


if __name__ == "__main__":
    import sys

    if "--small" in sys.argv:  # live: time on this machine (pin it: taskset -c 1)
        os.environ.setdefault("HWNAS_HOME", str(ROOT / "runs" / "kernel_latency" / "home"))
        small(ROOT / "runs" / "kernel_latency")
    else:
        main()
