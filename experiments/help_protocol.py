"""Few-shot latency (and energy) prediction on unseen devices: the HELP protocol.

HELP (Lee et al., NeurIPS 2021): meta-train on the standard split's meta-train and meta-valid
devices, adapt with the 10 reference architectures of ``reference_sets.json`` measured on each
unseen device, predict every architecture of the space, score against the recorded values.
Uses the shipped ``nasbench201-help`` and ``fbnet-help`` artifacts (trained on those 13 devices
only) and prints per unseen device Spearman rho, Kendall tau, MAPE and ±10% accuracy for:

- hwnas: the meta-learned predictor (space features), and its graph-features-only head (the
  path ONNX models take);
- FLOPs: rho of FLOPs itself (zero-shot: the multiply-accumulates of the PyTorch network, as
  NAS-Bench-201 counts them); MAPE/±10% after scaling by the 10 measurements (log latency
  regressed on log FLOPs and log params); and the FLOPs rho published in ANCHORS.md;
- ridge: ridge regression (alpha 0.1) of log latency on the 13 training devices' log latencies,
  fitted on the 10 reference architectures (the baseline of ../shared/ANCHORS.md);
- HELP: its published rho (ANCHORS.md sections 1);
- ceiling: gradient-boosted trees fitted on a random half of the device's OWN measurements,
  scored on the other half: what thousands of measurements of the device reach, a bound set by
  its measurement noise.

Then energy: the latency-only ``nasbench201-help`` artifact adapted to the Raspberry Pi 5 energy
columns (mJ) from their 10 reference values (``--energy-loo`` also meta-trains on the 13 latency
devices plus two energy columns and scores the third, three trainings), and timings: adapting
and predicting all 15,625 NAS-Bench-201 architectures, and meta-training (``--retrain`` times
a fresh ``nasbench201-help``; otherwise the cards' recorded times).

    python experiments/help_protocol.py [--spaces nasbench201 fbnet] [--energy-loo] [--retrain]

Takes about 1 minute (plus about 2 minutes per training with --energy-loo/--retrain).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

HELP_RHO = {
    "nasbench201": {
        "titan_rtx_256": 0.987,
        "gold_6226": 0.989,
        "fpga": 0.985,
        "pixel2": 0.802,
        "raspi4": 0.890,
        "eyeriss": 0.940,
    },
    "fbnet": {"fpga": 0.892, "raspi4": 0.887, "eyeriss": 0.943},
}
"""HELP's published Spearman rho (HELP, NeurIPS 2021, Tables 1 and 2; ANCHORS.md)."""

FLOPS_ANCHORS = {
    "nasbench201": {
        "titan_rtx_256": 0.950,
        "gold_6226": 0.826,
        "fpga": 0.900,
        "pixel2": 0.765,
        "raspi4": 0.846,
        "eyeriss": 0.437,
    }
}
"""The FLOPs row of ANCHORS.md section 1 (HELP's Table 1)."""

ENERGY = ("pi5_litert:energy_mj", "pi5_onnx:energy_mj", "pi5_torchmobile:energy_mj")


def ridge_baseline(space: str, train_keys, column, ref) -> np.ndarray:
    from sklearn.linear_model import Ridge

    from hwnas.predictors.data import get_column

    x = np.log(np.stack([get_column(space, k).values for k in train_keys], 1))
    model = Ridge(alpha=0.1).fit(x[ref], np.log(column.values[ref]))
    return np.exp(model.predict(x))


def ceiling(space: str, column, seed: int = 0) -> dict[str, float]:
    """Gradient-boosted trees on half of the device's own measurements, scored on the rest."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from hwnas.predictors.featurize import get_featurizer
    from hwnas.predictors.metrics import scores

    fz = get_featurizer(space)
    archs = fz.space.all_archs()
    x = np.concatenate([fz.encoding(archs), fz.structural(archs)], 1)
    y = column.values
    perm = np.random.default_rng(seed).permutation(len(y))
    fit, test = perm[: len(y) // 2], perm[len(y) // 2 :]
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):  # OpenMP threads crawl on a shared 2-core machine
        model = HistGradientBoostingRegressor(max_iter=300, random_state=seed)
        model.fit(x[fit], np.log(y[fit]))
        return scores(np.exp(model.predict(x[test])), y[test])


def graph_only(predictor, archs):
    """Predictions through the graph-features head (the path of ONNX models)."""
    from hwnas.predictors.graph import GraphModel

    g = predictor.featurizer.graph(archs)
    models = [GraphModel(a.text, row) for a, row in zip(archs, g)]
    return predictor.predict(models)[0]


def space_table(space: str, console) -> dict[str, dict[str, float]]:
    from rich.table import Table

    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import SPLITS, get_column, reference_indices
    from hwnas.predictors.metrics import scores
    from hwnas.predictors.proxy import FlopsProxy
    from hwnas.spaces import get_space

    sp = get_space(space)
    archs = sp.all_archs()
    ref = list(reference_indices(space))
    split = SPLITS[space]
    train_keys = [*split["meta_train"], *split["meta_valid"]]
    flops = FlopsProxy().predict(archs)[0]
    rows: dict[str, dict[str, dict[str, float]]] = {}
    name = f"{space}-help"
    for key in split["meta_test"]:
        col = get_column(space, key)
        y = col.values
        pred = load_predictor(name, space).fit([archs[i] for i in ref], y[ref], col.metric)
        mean, _std = pred.predict(archs)
        gmean = graph_only(pred, archs)
        fl = FlopsProxy().fit([archs[i] for i in ref], y[ref]).predict(archs)[0]
        fl_scores = scores(fl, y)
        fl_scores["spearman_rho"] = scores(flops, y)["spearman_rho"]
        fl_scores["kendall_tau"] = scores(flops, y)["kendall_tau"]
        rows[key] = {
            "hwnas": scores(mean, y),
            "hwnas (graph features only)": scores(gmean, y),
            "FLOPs": fl_scores,
            "ridge on 13 devices' log latency": scores(
                ridge_baseline(space, train_keys, col, ref), y
            ),
            "ceiling: trees on half the device's own data": ceiling(space, col),
        }
    devices = list(split["meta_test"])
    methods = list(next(iter(rows.values())))
    table = Table(
        title=f"{space}: unseen devices, 10 reference samples (artifact {name}, meta-trained on "
        f"{len(train_keys)} devices); cell = rho / tau / MAPE% / ±10%"
    )
    table.add_column("method")
    for d in devices:
        table.add_column(d, justify="right")
    table.add_column("mean", justify="right")
    for m in methods:
        cells = []
        for d in devices:
            s = rows[d][m]
            cells.append(
                f"{s['spearman_rho']:.3f} / {s['kendall_tau']:.3f} / "
                f"{s['mape_pct']:.1f} / {s['acc_10pct']:.2f}"
            )
        mean = {k: np.mean([rows[d][m][k] for d in devices]) for k in rows[devices[0]][m]}
        cells.append(
            f"{mean['spearman_rho']:.3f} / {mean['kendall_tau']:.3f} / "
            f"{mean['mape_pct']:.1f} / {mean['acc_10pct']:.2f}"
        )
        table.add_row(m, *cells)
    if space in FLOPS_ANCHORS:
        table.add_row(
            "FLOPs rho as published in ANCHORS.md",
            *[f"{FLOPS_ANCHORS[space][d]:.3f}" for d in devices],
            f"{np.mean([FLOPS_ANCHORS[space][d] for d in devices]):.3f}",
        )
    help_rho = HELP_RHO[space]
    table.add_row(
        "HELP (published rho)",
        *[f"{help_rho[d]:.3f}" for d in devices],
        f"{np.mean([help_rho[d] for d in devices]):.3f}",
    )
    console.print(table)
    hw = [rows[d]["hwnas"] for d in devices]
    console.print(
        f"{space}: hwnas mean rho {np.mean([s['spearman_rho'] for s in hw]):.3f}, worst "
        f"{min(s['spearman_rho'] for s in hw):.3f}, mean ±10% accuracy "
        f"{np.mean([s['acc_10pct'] for s in hw]):.3f}"
    )
    return rows


def energy_table(console, loo: bool) -> None:
    from rich.table import Table

    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import SPLITS, get_column, reference_indices
    from hwnas.predictors.metrics import scores
    from hwnas.predictors.proxy import FlopsProxy
    from hwnas.spaces import get_space

    sp = get_space("nasbench201")
    archs = sp.all_archs()
    ref = list(reference_indices("nasbench201"))
    table = Table(
        title="nasbench201 energy per inference (mJ), Raspberry Pi 5, 10 reference samples; "
        "cell = rho / tau / MAPE% / ±10%"
    )
    table.add_column("method")
    for k in ENERGY:
        table.add_column(k.split(":")[0], justify="right")
    fmt = "{spearman_rho:.3f} / {kendall_tau:.3f} / {mape_pct:.1f} / {acc_10pct:.2f}"
    cells, flops = [], []
    for k in ENERGY:
        col = get_column("nasbench201", k)
        pred = load_predictor("nasbench201-help").fit(
            [archs[i] for i in ref], col.values[ref], col.metric
        )
        cells.append(fmt.format(**scores(pred.predict(archs)[0], col.values)))
        fl = FlopsProxy().fit([archs[i] for i in ref], col.values[ref]).predict(archs)[0]
        flops.append(fmt.format(**scores(fl, col.values)))
    table.add_row("hwnas, nasbench201-help (latency devices only)", *cells)
    if loo:
        from hwnas.predictors.meta import MetaPredictor
        from hwnas.predictors.train import meta_train

        split = SPLITS["nasbench201"]
        lat = [get_column("nasbench201", k) for k in (*split["meta_train"], *split["meta_valid"])]
        cells = []
        for k in ENERGY:
            others = [get_column("nasbench201", e) for e in ENERGY if e != k]
            with tempfile.TemporaryDirectory() as tmp:
                meta_train("nasbench201", lat + others, Path(tmp), f"energy-loo-{k}")
                col = get_column("nasbench201", k)
                pred = MetaPredictor(tmp).fit([archs[i] for i in ref], col.values[ref], col.metric)
                cells.append(fmt.format(**scores(pred.predict(archs)[0], col.values)))
        table.add_row("hwnas, meta-trained with the other two energy columns", *cells)
    table.add_row("FLOPs proxy scaled on the 10 samples", *flops)
    table.add_row(
        "ceiling: trees on half the device's own data",
        *[fmt.format(**ceiling("nasbench201", get_column("nasbench201", k))) for k in ENERGY],
    )
    lat_cells = []
    for k in ENERGY:
        col = get_column("nasbench201", k.split(":")[0])
        pred = load_predictor("nasbench201-help").fit(
            [archs[i] for i in ref], col.values[ref], col.metric
        )
        lat_cells.append(fmt.format(**scores(pred.predict(archs)[0], col.values)))
    table.add_row("for comparison: the same device's LATENCY, nasbench201-help", *lat_cells)
    console.print(table)


def timings(console, retrain: bool) -> None:
    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import get_column, reference_indices
    from hwnas.predictors.meta import read_card
    from hwnas.spaces import get_space

    sp = get_space("nasbench201")
    archs = sp.all_archs()
    ref = list(reference_indices("nasbench201"))
    col = get_column("nasbench201", "raspi4")
    pred = load_predictor("nasbench201-help")
    fit_s, predict_s = [], []
    for _ in range(3):
        t0 = time.perf_counter()
        pred.fit([archs[i] for i in ref], col.values[ref])
        t1 = time.perf_counter()
        pred.predict(archs)
        t2 = time.perf_counter()
        fit_s.append(t1 - t0)
        predict_s.append(t2 - t1)
    console.print(
        f"adapting nasbench201-help on 10 values: {statistics.median(fit_s):.3f} s; predicting "
        f"all {len(archs)} NAS-Bench-201 architectures: {statistics.median(predict_s):.3f} s "
        "(median of 3)"
    )
    from hwnas.predictors import list_artifacts

    for name, path in list_artifacts().items():
        card = read_card(path)
        console.print(
            f"meta-training {name}: {card['training_time_s']} s as recorded in its card "
            f"({len(card['training_devices'])} devices, {card['training_threads']} thread)"
        )
    if retrain:
        from hwnas.predictors.recipes import build

        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            build("nasbench201-help", Path(tmp))
            console.print(
                f"meta-training nasbench201-help now (including its card's scoring): "
                f"{time.perf_counter() - t0:.1f} s"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spaces", nargs="+", default=["nasbench201", "fbnet"])
    parser.add_argument("--energy-loo", action="store_true")
    parser.add_argument("--retrain", action="store_true")
    args = parser.parse_args()

    from rich.console import Console

    console = Console(width=250)
    t0 = time.time()
    for space in args.spaces:
        space_table(space, console)
    energy_table(console, args.energy_loo)
    timings(console, args.retrain)
    console.print(f"done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
