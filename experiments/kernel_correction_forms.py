"""Forms of the kernel-level predictor's network-level correction, from timings already taken.

The kernel-level predictor (:mod:`hwnas.predictors.kernels`) predicts a network as
``a * S``, ``S`` its kernel sum, ``a`` fitted on the device's reference networks. On two
intra-op threads, networks of many small kernels came out 20-30% low (docs/benchmarks.md,
"Two intra-op threads"). This script asks whether a cost per kernel explains it: it fits
``a * S`` and ``a * S + c * n`` (``n`` the kernels the network runs; relative least squares,
coefficients >= 0, as the correction is fitted) on the reference networks, predicts the
networks ``experiments/unseen_networks.py`` measured, and prints each form's errors; the
second form is also fitted on the unseen networks themselves (its best case). It times
nothing: every kernel must be in the home's store already (it stops otherwise).

Inputs: the hwnas home where the device was calibrated and the networks predicted
(``HWNAS_HOME``), and that run's output folder:

    export HWNAS_HOME=/path/to/home
    python experiments/kernel_correction_forms.py --device cpu2 --run runs/unseen_networks_2t

A few seconds per network (reading its kernels).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Coefficients (>= 0) minimising the relative squared error of ``x @ b`` against ``y``."""
    from scipy.optimize import nnls

    return nnls(x / y[:, None], np.ones(len(y)))[0]


def summary(pred: np.ndarray, truth: np.ndarray) -> str:
    """MAPE, largest error and share within ±10%, in one cell."""
    err = np.abs(pred / truth - 1)
    return f"{100 * err.mean():.1f} / {100 * err.max():.1f} / {np.mean(err <= 0.1):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--run", type=Path, required=True, help="unseen_networks.py's --out")
    args = parser.parse_args()
    from hwnas.devices import get_device
    from hwnas.measure import Profiler
    from hwnas.paths import default_store_path
    from hwnas.predictors.graph import load_graph_model
    from hwnas.predictors.kernels.device import calibration_networks, kernel_predictor
    from hwnas.store import MeasurementStore

    with MeasurementStore(default_store_path()) as store:
        profiler = Profiler(get_device(args.device), store)
        kp, note = kernel_predictor(profiler, budget=0)
        print(note)
        rows = []  # (set, name, kernel sum ms, kernels, measured ms)
        archs, values = calibration_networks(profiler.device, store)
        for arch, value in zip(archs, values):
            e = kp.estimate(arch)
            rows.append(("reference", str(arch), e.total_ms, e.kernels, float(value)))
        measured = json.loads((args.run / "measurements.json").read_text())
        for name, entry in measured.items():
            e = kp.estimate(load_graph_model(args.run / "onnx" / f"{name}.onnx"))
            passes = [p["ms"] for p in entry["passes"].values()]
            rows.append(("unseen", name, e.total_ms, e.kernels, float(np.median(passes))))
        if profiler.counts.taken or kp.counts["measured"]:
            raise SystemExit("a kernel was not in the store: predict the networks first")
    ref = [r for r in rows if r[0] == "reference"]
    uns = [r for r in rows if r[0] == "unseen"]

    def arrays(rs, cols):
        x = np.array([[r[2], r[3]][: len(cols)] for r in rs], float)
        return x, np.array([r[4] for r in rs])

    print("\n| network | set | kernel sum ms | kernels | kernels per ms | measured ms | ratio |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for s, name, total, n, y in rows:
        print(f"| {name[:40]} | {s} | {total:.3f} | {n} | {n / total:.0f} | {y:.3f} | "
              f"{y / total:.3f} |")  # fmt: skip
    print("\n| form | fitted on | coefficients | unseen MAPE % / max % / ±10% |")
    print("|---|---|---|---|")
    for label, cols in (("a * S", ["S"]), ("a * S + c * n", ["S", "n"])):
        for where, rs in (("reference networks", ref), ("unseen networks", uns)):
            if where == "unseen networks" and len(cols) == 1:
                continue
            b = fit(*arrays(rs, cols))
            xu, yu = arrays(uns, cols)
            coefs = f"a = {b[0]:.3f}" + (f", c = {1000 * b[1]:.1f} us" if len(b) > 1 else "")
            print(f"| {label} | {where} | {coefs} | {summary(xu @ b, yu)} |")


if __name__ == "__main__":
    main()
