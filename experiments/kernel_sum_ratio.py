"""Whole-network latency over the kernel sum on this machine's CPU: what the kernel-level
predictor's network-level correction must cover before it is calibrated (its prior,
``hwnas.predictors.kernels.device.PRIOR``), with and without the weight-streaming bound.

For each well-known network (:mod:`hwnas.known_networks`) at 32/64/96/160 px (widths 0.375,
0.5, 0.5, 0.75) and as published at 64 and 224 px, the kernels ONNX Runtime runs are timed
alone through the live ``cpu`` device and summed as the predictor sums them (less the per-call
overhead, plus the dispatch of every node), once with each kernel bound below by the time to
stream its weights (``hwnas.predictors.kernels.timing.stream_rate``, what the predictor does)
and once without. The whole network is measured by the same protocol in ``--passes`` separate
stores (a fresh measurement each) and the median taken: on a shared VM one measurement of a
1 ms network moves by 20-40% from one pass to the next.

Prints one line per network (weights in MB, both sums, whole, both ratios), then for each sum
the median ratio, the standard deviation of its log and the 5/25/75/95% quantiles, and the
predictor's setting: the scale fitted on the 224 px networks (as the correction is fitted on
224x224 reference networks) applied to the others, with the RMS of the log error and the share
within 10% and 25%.

    python experiments/kernel_sum_ratio.py [--store kernel_sum.db] [--passes 3]

About 10 minutes on this project's 2-core VM; kernels, probes and networks already in
``--store`` are reused (the first pass's whole networks are kept in it).
"""

from __future__ import annotations

import argparse

import numpy as np

CONFIGS = ((32, 0.375), (64, 0.5), (96, 0.5), (160, 0.75), (64, 1.0), (224, 1.0))
"""(side in px, width multiplier) of each network measured."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default="kernel_sum.db", help="measurement store (SQLite)")
    parser.add_argument("--passes", type=int, default=3, help="whole-network measurements")
    args = parser.parse_args()

    from hwnas.devices import get_device
    from hwnas.known_networks import NETWORKS
    from hwnas.measure import Profiler, network_workload
    from hwnas.predictors.graph import GraphModel
    from hwnas.predictors.kernels.model import KernelPredictor
    from hwnas.store import MeasurementStore

    device = get_device("cpu")
    profiler = Profiler(device, MeasurementStore(args.store))
    passes = [profiler] + [Profiler(device, MeasurementStore(f"{args.store}.pass{i + 2}"))
                           for i in range(args.passes - 1)]  # fmt: skip
    kp = KernelPredictor(profiler, budget=100000)
    rows = []
    for name in NETWORKS.names():
        for side, width in CONFIGS:
            wl = network_workload(name, side=side, width=width)
            g = GraphModel(f"{name}-{side}", np.zeros(0), wl.onnx_bytes())
            e = kp.estimate(g)
            rates = kp.stream_rates
            kp.set_stream_rates({})
            plain = kp.estimate_kernels(kp.kernels_of(g)).total_ms
            kp.set_stream_rates(rates)
            whole = float(np.median([p.measure(wl, "latency_ms", allow_flagged=True).value
                                     for p in passes]))  # fmt: skip
            rows.append((side, e.weight_mb, plain, e.total_ms, whole))
            print(f"{name:20s} {side:4d} px x{width:<5g} weights {e.weight_mb:6.2f} MB  sum "
                  f"{plain:8.3f} / streamed {e.total_ms:8.3f} ms ({e.streamed:3d} kernels)  "
                  f"whole {whole:8.3f} ms  ratio {whole / plain:5.2f} / {whole / e.total_ms:5.2f}",
                  flush=True)  # fmt: skip
    side, w, plain, streamed, y = (np.array(c) for c in zip(*rows))
    rates = ", ".join(f"{mb:g} MB {v / 1e6:.1f} GB/s" for mb, v in sorted(kp.stream_rates.items()))
    print(f"weight streaming rates: {rates}")
    cal = side == 224
    for label, s in (("kernel sum", plain), ("with weight streaming", streamed)):
        r = y / s
        q = np.quantile(r, [0.05, 0.25, 0.75, 0.95])
        a = np.sum(s[cal] / y[cal]) / np.sum((s[cal] / y[cal]) ** 2)
        err = np.abs(np.log(y[~cal] / (a * s[~cal])))
        print(f"{label}: {len(r)} networks, median ratio {np.median(r):.2f}, log spread "
              f"{np.log(r).std():.2f}, 5/25/75/95% {' / '.join(f'{v:.2f}' for v in q)}; "
              f"scaled on the {cal.sum()} at 224 px (x{a:.3f}), the other {len(err)}: log RMS "
              f"{np.sqrt(np.mean(err**2)):.3f}, within 10% {np.mean(err < np.log(1.1)):.2f}, "
              f"within 25% {np.mean(err < np.log(1.25)):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
