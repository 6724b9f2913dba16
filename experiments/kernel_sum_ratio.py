"""Whole-network latency over the kernel sum on this machine's CPU: what the kernel-level
predictor's network-level correction must cover before it is calibrated (its prior,
``hwnas.predictors.kernels.device.PRIOR``).

For each well-known network (:mod:`hwnas.known_networks`) at 32/64/96/160 px (widths 0.375,
0.5, 0.5, 0.75), the kernels ONNX Runtime runs are timed alone through the live ``cpu`` device
and summed as the predictor sums them (less the per-call overhead, plus the dispatch of every
node), and the whole network is measured by the same protocol. Prints one line per network
(weights in MB, kernel sum, whole, ratio), then the median ratio, the standard deviation of its
log and the 5/25/75/95% quantiles, and a least-squares fit of ``whole = a * sum + b * weights``
for networks whose weights exceed C MB (the cold-weights term that was tried for the
correction), with the log residual it leaves.

    python experiments/kernel_sum_ratio.py [--store kernel_sum.db] [--sides 32 64 96 160]

About 5 minutes on this project's 2-core VM (2026-11-27: 44 networks, median ratio 1.48,
log spread 0.33, 5-95% 0.84-2.48); kernels and networks already in ``--store`` are reused.
"""

from __future__ import annotations

import argparse

import numpy as np

WIDTHS = {32: 0.375, 64: 0.5, 96: 0.5, 160: 0.75}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="kernel_sum.db", help="measurement store (SQLite)")
    parser.add_argument("--sides", type=int, nargs="+", default=sorted(WIDTHS))
    args = parser.parse_args()

    import onnx

    from hwnas.devices import get_device
    from hwnas.known_networks import NETWORKS
    from hwnas.measure import Profiler, network_workload
    from hwnas.predictors.graph import GraphModel
    from hwnas.predictors.kernels.model import KernelPredictor
    from hwnas.store import MeasurementStore

    profiler = Profiler(get_device("cpu"), MeasurementStore(args.store))
    kp = KernelPredictor(profiler, budget=100000)
    rows = []
    for name in NETWORKS.names():
        for side in args.sides:
            wl = network_workload(name, side=side, width=WIDTHS.get(side, 0.5))
            data = wl.onnx_bytes()
            weights = sum(
                int(np.prod(t.dims)) * 4 for t in onnx.load_from_string(data).graph.initializer
            )
            total = kp.estimate(GraphModel(f"{name}-{side}", np.zeros(0), data)).total_ms
            whole = profiler.measure(wl, "latency_ms", allow_flagged=True).value
            rows.append((weights / 2**20, total, whole))
            print(f"{name:20s} {side:4d} px  weights {weights / 2**20:6.2f} MB  kernel sum "
                  f"{total:8.3f} ms  whole {whole:8.3f} ms  ratio {whole / total:5.2f}",
                  flush=True)  # fmt: skip
    w, s, y = (np.array(c) for c in zip(*rows))
    r = y / s
    q = np.quantile(r, [0.05, 0.25, 0.75, 0.95])
    print(f"{len(r)} networks: median ratio {np.median(r):.2f}, log spread "
          f"{np.log(r).std():.2f}, 5/25/75/95% {' / '.join(f'{v:.2f}' for v in q)}")  # fmt: skip
    for c in (0, 4, 8, 10, 12):
        x = np.c_[s, w * (w > c)]
        coef, *_ = np.linalg.lstsq(x / y[:, None], np.ones(len(y)), rcond=None)
        resid = np.log(y / (x @ coef))
        print(f"whole = {coef[0]:.3f} * sum + {coef[1]:.4f} ms/MB * weights beyond {c} MB: "
              f"log residual {resid.std():.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
