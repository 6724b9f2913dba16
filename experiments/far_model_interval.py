"""How wrong a meta-learned prediction is for a network unlike every reference network, and
whether the widened standard deviation it is printed with holds the truth: networks of one
family predicted on a device that has reference values for another family only.

`hwnas predict --device D --onnx MODEL` on a device that cannot run models adapts the
meta-learned artifact whose reference networks are nearest to the model (graph features) on
the device's 10 reference values. A model far from all of them (more than
:data:`hwnas.predictors.predict.FAR` times the references' largest nearest-neighbour gap: a
UNet, a recurrent network, another input size) is an extrapolation: it gets a warning and a
wider standard deviation (:func:`hwnas.predictors.predict.widen_far`). To measure that on real
values, this script takes every recorded device with tables for two families (NAS-Bench-201,
FBNet, OFA MobileNetV3), adapts family A's artifact on A's 10 reference architectures with the
device's values, and predicts 200 random recorded architectures of family B (their analytic
graph features, the columns the ONNX reader gives) against B's recorded values. Per device and
ordered pair A->B, over the predictions flagged far: how many, the share at the floor (mean
below a thousandth of every calibration value, named by its own warning), Spearman rho, the
median |log(predicted / measured)|, and the share inside ``mean +- 1.645 std`` with the
widened std, the interval a 90% reading of the printed std gives; and for the predictions at
the floor, what `hwnas predict` gives instead (FLOPs scaled on the same values).

    python experiments/far_model_interval.py [--archs 200]

About a minute on this project's 2-core VM.
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy.stats import spearmanr

FAMILIES = ("nasbench201", "fbnet", "ofa")
Z90 = 1.6448536


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archs", type=int, default=200, help="target architectures per pair")
    args = parser.parse_args()

    from hwnas.devices import get_device, list_devices
    from hwnas.errors import HwnasError
    from hwnas.predictors.artifacts import load_predictor
    from hwnas.predictors.data import get_column, reference_indices
    from hwnas.predictors.featurize import get_featurizer
    from hwnas.predictors.graph import GraphModel
    from hwnas.predictors.predict import FAR, FLOORED, _graph_features, distance, widen_far
    from hwnas.spaces import get_space

    spaces = {f: get_space(f) for f in FAMILIES}
    targets = {}
    for f, sp in spaces.items():
        n = len(get_column(f, "pixel3" if f != "ofa" else "v100_1").values)
        idx = np.random.default_rng(0).choice(n, args.archs, replace=False)
        archs = [sp.arch_at(int(i)) for i in idx]
        g = get_featurizer(f).graph(archs)
        targets[f] = (idx, [GraphModel(f"{f}:{i}", g[k]) for k, i in enumerate(idx)])

    rows = []
    replaced = []  # (log ratio, inside, the floor's log ratio) per pair
    recorded = []  # the devices that cannot run models: their values are tables
    for name in list_devices():
        try:
            if not get_device(name).runs_models:
                recorded.append(name)
        except HwnasError:
            continue

    def flops_fit(family, ref, y_ref):
        return load_predictor("flops").fit(ref, y_ref, "latency_ms")

    for name in recorded:
        have = []
        for f in FAMILIES:
            try:
                get_column(f, name)
                have.append(f)
            except HwnasError:
                pass
        for a in have:
            ref_idx = list(reference_indices(a))
            ref = [spaces[a].arch_at(i) for i in ref_idx]
            y_ref = get_column(a, name).values[ref_idx]
            if not np.isfinite(y_ref).all():  # a table without every reference cell (Eagle's)
                continue
            refs_g = _graph_features(spaces[a], ref)
            pred = load_predictor(a, a).fit(ref, y_ref, "latency_ms")
            for b in have:
                if b == a:
                    continue
                idx, models = targets[b]
                y = get_column(b, name).values[idx]
                mean, std = pred.predict(models)
                dist, spread = distance(np.stack([m.features for m in models]), refs_g)
                far = dist / max(spread, 1e-9)
                is_far = far > FAR
                wide = np.array([widen_far(m, v, s, refs_g, "", lambda _l: None)
                                 for m, v, s in zip(models, mean, std)])  # fmt: skip
                floored = mean <= FLOORED * float(np.min(y_ref)) * (1 + 1e-9)
                if (is_far & floored).any():  # what `hwnas predict` gives instead: FLOPs
                    low = np.flatnonzero(is_far & floored)
                    f_mean, f_std = flops_fit(a, ref, y_ref).predict([models[i] for i in low])
                    f_wide = [max(widen_far(models[i], v, sd, refs_g, "", lambda _l: None), v)
                              for i, v, sd in zip(low, f_mean, f_std)]  # fmt: skip
                    replaced.append((np.log(np.maximum(f_mean, 1e-12) / y[low]),
                                     np.abs(y[low] - f_mean) <= Z90 * np.array(f_wide),
                                     np.log(mean[low] / y[low])))  # fmt: skip
                use = is_far & ~floored
                if not use.any():
                    continue
                inside = (y >= mean - Z90 * wide) & (y <= mean + Z90 * wide)
                lr = np.log(mean[use] / y[use])
                rho = spearmanr(mean[use], y[use])[0] if use.sum() > 2 else float("nan")
                rows.append((name, a, b, int(is_far.sum()), float(floored[is_far].mean()), rho,
                             lr, inside[use], float(np.mean(lr < 0))))  # fmt: skip

    print(f"{'device':40s} {'A->B':24s}  far floor%    rho |log r| med  inside  low%")
    for name, a, b, nfar, fl, rho, lr, inside, low in rows:
        print(f"{name:40s} {a + '->' + b:24s} {nfar:4d} {100 * fl:6.1f} {rho:6.3f} "
              f"{np.median(np.abs(lr)):12.2f} {inside.mean():7.2f} {100 * low:5.0f}")  # fmt: skip
    lr = np.concatenate([r[6] for r in rows])
    inside = np.concatenate([r[7] for r in rows])
    per_pair = np.array([r[7].mean() for r in rows])
    print(f"\n{len(rows)} device/family pairs, {len(lr)} far predictions not at the floor "
          f"(floored: {100 * np.mean([r[4] for r in rows]):.1f}% of far ones on average); "
          f"median |log(predicted/measured)| {np.median(np.abs(lr)):.2f} "
          f"(x{np.exp(np.median(np.abs(lr))):.2f}); inside mean +- 1.645 widened std: "
          f"{inside.mean():.3f} overall, {np.mean(per_pair >= 0.9):.2f} of pairs at >= 0.90, "
          f"worst pair {per_pair.min():.2f}")  # fmt: skip
    if replaced:
        lr = np.concatenate([r[0] for r in replaced])
        inside = np.concatenate([r[1] for r in replaced])
        floor = np.concatenate([r[2] for r in replaced])
        print(f"at the floor: {len(lr)} far predictions, a factor of "
              f"{np.exp(np.median(np.abs(floor))):.0f} off at the median; predicted by FLOPs "
              f"scaled on the same values instead (hwnas.predictors.predict.refit_floored): a "
              f"factor of {np.exp(np.median(np.abs(lr))):.2f}, inside mean +- 1.645 std (std at "
              f"least the mean): {inside.mean():.3f}")  # fmt: skip

    # the same family's own architectures (arch strings, not far): every recorded one
    own = []  # (device, family, floored, above chance level, floor's and FLOPs' |log r|)
    for name in recorded:
        for f in FAMILIES:
            try:
                y_all = get_column(f, name).values
            except HwnasError:
                continue
            ref_idx = list(reference_indices(f))
            ref = [spaces[f].arch_at(i) for i in ref_idx]
            y_ref = y_all[ref_idx]
            if not np.isfinite(y_ref).all():
                continue
            idx = np.flatnonzero(np.isfinite(y_all))
            archs = [spaces[f].arch_at(int(i)) for i in idx]
            mean, _ = load_predictor(f, f).fit(ref, y_ref, "latency_ms").predict(archs)
            low = np.flatnonzero(mean <= FLOORED * float(np.min(y_ref)) * (1 + 1e-9))
            if not len(low):
                continue
            f_mean, _ = flops_fit(f, ref, y_ref).predict([archs[i] for i in low])
            y = y_all[idx[low]]
            chance = 0
            if f == "nasbench201":  # CIFAR-100 at chance level: an output blind to the input
                chance = int(np.sum(spaces[f].table_accuracy("cifar100")[idx[low]] <= 1.5))
            own.append((name, f, len(low), len(low) - chance,
                        np.median(np.abs(np.log(mean[low] / y))),
                        np.median(np.abs(np.log(np.maximum(f_mean, 1e-12) / y)))))  # fmt: skip
    print("\nthe family's own architectures at the floor (every recorded value; `hwnas predict` "
          "keeps the floor and its warning for these):")  # fmt: skip
    for name, f, n, above, fl, fx in own:
        print(f"{name:40s} {f:12s} {n:5d} at the floor, {above} above chance level; a factor "
              f"of {np.exp(fl):.1f} off at the median, FLOPs instead {np.exp(fx):.1f}")  # fmt: skip
    if not own:
        print("none")


if __name__ == "__main__":
    main()
