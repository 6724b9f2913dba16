"""The shipped few-shot predictor's recipe on a device it never saw: leave one device out.

A user's new device gets the shipped ``nasbench201`` artifact, meta-trained on every recorded
NAS-Bench-201 column (46, latency and energy), adapted on the device's 10 reference-set values.
Every recorded device is in that artifact's training set, so its scores on them are not what
a new device gets. Here, for each device X given, the same recipe (``meta_train``, the shipped
card's settings, 3,000 steps) is trained on every column but X's, adapted on X's 10 reference
values and scored on all of X's architectures with a recorded latency:

- Spearman rho, ±10% accuracy (share within 10% of the recorded value), and the coverage of
  the 90% interval (mean ± 1.645 std), whose nominal value is 0.90;
- beside the ``nasbench201-help`` artifact (trained on HELP's 9 training devices, 4 for
  validation: it never saw any of the default devices) and the shipped artifact itself
  (trained on X: an upper bound).

    python experiments/leave_one_device_out.py [--devices D ...] [--cache DIR]

About 30 s of meta-training per device on one thread (cached in ``--cache``), a few seconds of
scoring.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

DEVICES = (
    # HELP's six unseen devices (NAS-Bench-201)
    "titan_rtx_256", "gold_6226", "fpga", "pixel2", "raspi4", "eyeriss",
    # devices outside HELP's split (Eagle / BRP-NAS, HW-NAS-Bench-360's Raspberry Pi 5, GPUs)
    "embedded_tpu_edge_tpu_int8", "mobile_dsp_snapdragon_855_hexagon_690_int8",
    "mobile_cpu_snapdragon_450_cortex_a53_int8", "mobile_gpu_snapdragon_450_adreno_506_int8",
    "embedded_gpu_jetson_nano_fp16", "pi5_litert", "desktop_cpu_core_i7_7820x_fp32", "titanxp_1",
)  # fmt: skip


def score(artifact, values: np.ndarray) -> tuple[float, float, float]:
    """(Spearman rho, ±10% accuracy, 90% interval coverage) of ``artifact`` adapted on the
    reference values of ``values`` (ms, one per architecture; NaN where unrecorded)."""
    from scipy.stats import spearmanr

    from hwnas.predictors.data import measured_reference
    from hwnas.predictors.meta import MetaPredictor
    from hwnas.spaces import get_space

    archs = get_space("nasbench201").all_archs()
    ref = measured_reference("nasbench201", values)
    pred = MetaPredictor(artifact).fit([archs[i] for i in ref], values[ref], "latency_ms")
    mean, std = pred.predict(archs)
    ok = np.isfinite(values) & (values > 0)
    m, s, v = mean[ok], std[ok], values[ok]
    return (
        float(spearmanr(m, v)[0]),
        float(np.mean(np.abs(m / v - 1) <= 0.1)),
        float(np.mean(np.abs(m - v) <= 1.6448536 * s)),
    )


def left_out_artifact(device: str, cache: Path) -> Path:
    """The shipped recipe meta-trained on every recorded column but ``device``'s (cached; a
    cached one trained with other features is trained again, one with other adaptation
    settings takes this hwnas's)."""
    from hwnas.predictors.data import recorded_columns
    from hwnas.predictors.train import meta_train, reuse_cached

    out = cache / f"nasbench201-no-{device}"
    if reuse_cached(out):
        return out
    train = [c for c in recorded_columns("nasbench201") if c.device != device]
    t0 = time.time()
    meta_train("nasbench201", train, out, out.name, steps=3000,
               split={"meta_train": [c.key for c in train], "held_out": device})  # fmt: skip
    print(f"meta-trained {out.name} on {len(train)} columns in {time.time() - t0:.0f} s")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", nargs="+", default=list(DEVICES))
    parser.add_argument("--cache", type=Path, default=Path("runs/leave_one_device_out"))
    args = parser.parse_args()
    from hwnas.assets import asset_path
    from hwnas.predictors.data import recorded_columns

    columns = {c.device: c for c in recorded_columns("nasbench201", ("latency_ms",))}
    unknown = [d for d in args.devices if d not in columns]
    if unknown:
        raise SystemExit(f"no recorded NAS-Bench-201 latency for {', '.join(unknown)}")
    args.cache.mkdir(parents=True, exist_ok=True)
    kinds = ("left out", "nasbench201-help", "shipped (trained on it)")
    rows = []
    for device in args.devices:
        arts = (left_out_artifact(device, args.cache),
                asset_path("latency_predictors", "nasbench201-help"),
                asset_path("latency_predictors", "nasbench201"))  # fmt: skip
        rows.append((device, [score(a, columns[device].values) for a in arts]))
    print("\nrho / ±10% / in 90% interval, adapted on 10 reference values")
    print("| device | " + " | ".join(kinds) + " |")
    print("|---|" + "---|" * len(kinds))
    for device, scores in rows:
        cells = [f"{r:.3f} / {a:.2f} / {c:.2f}" for r, a, c in scores]
        print(f"| {device} | " + " | ".join(cells) + " |")
    means = np.mean([[list(s) for s in scores] for _, scores in rows], axis=0)
    worst = np.min([[list(s) for s in scores] for _, scores in rows], axis=0)
    print("| mean | " + " | ".join(f"{r:.3f} / {a:.2f} / {c:.2f}" for r, a, c in means) + " |")
    print("| worst | " + " | ".join(f"{r:.3f} / {a:.2f} / {c:.2f}" for r, a, c in worst) + " |")


if __name__ == "__main__":
    main()
