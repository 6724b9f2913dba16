"""Few-shot prediction on devices and networks unlike the training ones.

The standard split's unseen devices (``help_protocol.py``) resemble its training devices: GPUs
at other batch sizes, Xeon CPUs, phones, an accelerator model. This script builds held-out
evaluations that do not:

1. **Other tasks' networks**: the Raspberry Pi 5 columns of HW-NAS-Bench-360 for the
   ``ninapro`` task (the same NAS-Bench-201 cells in the network built for NAS-Bench-360's
   NinaPro EMG task: 1x52x16 input, 18 classes, not CIFAR's 3x32x32 and 100; LiteRT, ONNX
   Runtime and PyTorch Mobile; latency and energy; 6 columns), predicted by
   the shipped ``nasbench201`` artifact, which was meta-trained on the CIFAR-100 columns of the
   same boards (and every other recorded device) but never on a ninapro network.
2. **Leave one device family out**: for each device family (the ``class`` of the device
   profiles: gpu, cpu, phone, board, accelerator = asic + fpga), an artifact meta-trained on
   every recorded NAS-Bench-201 column (latency and energy) of the *other* families, scored on
   the family's columns (and, for boards, on the ninapro columns too). "No phone in training,
   test on phones", "no GPU, test on GPUs", and so on.

3. **Gross errors**: each unseen device of the standard split, adapted by the shipped
   ``nasbench201-help`` from its 10 reference values with one of them multiplied by 0.3 or 3
   (a measurement taken while the device throttled, a glitch in a table; every one of the 10
   in turn), with the artifact's contamination model (``outlier`` in its card) and without it
   (``outlier = 0``): mean and worst rho over the 20 corruptions beside the clean fit's, and
   how often the corrupted value is the one flagged (``suspect_values``).

Every device is adapted from its 10 reference-set values (``reference_sets.json``) only, and
scored on all 15,625 architectures (those with a value: the Eagle devices, e.g.
``mobile_gpu_snapdragon_855_adreno_640_int8`` in the phone family and the Jetson Nano in the
board family, have none for the 341 unconnected cells): Spearman rho, Kendall tau, MAPE and
±10% accuracy (share of predictions within 10% of the measured value). A ``ceiling`` column
gives what trees fitted on half of the device's OWN values reach on the other half (the
measurement noise bound); a ``head's basis`` column what the meta head's own features (encoder
outputs, cost proxies, additive costs) reach when fitted by least squares on that half (the
bound of any setting of the head, given however many values).

4. With ``--power``: the mean power (energy over latency, W) of the Raspberry Pi 5's CIFAR-100
   networks per runtime, by the number of 3x3 convolutions in the cell: no other recorded
   device has an energy column, so with no board in training nothing teaches the predictor
   how a runtime's power follows the operations.

    python experiments/predictor_robustness.py [--families gpu cpu phone board accelerator]
        [--cache runs/predictor_robustness] [--steps 3000] [--no-ceiling] [--no-gross-errors]
        [--power]

Meta-trains one artifact per family (about 2 minutes each on one thread, cached in --cache: a
second run only scores); the rest takes about a minute.
"""

from __future__ import annotations

import argparse
import time
from functools import lru_cache
from pathlib import Path

import numpy as np

FAMILIES = {
    "gpu": ("gpu",),
    "cpu": ("cpu",),
    "phone": ("phone",),
    "board": ("board",),
    "accelerator": ("asic", "fpga"),
}
"""Held-out families: device-profile classes left out of meta-training together."""

HW360 = "nasbench201_pi5_hw360.csv.gz"


def task_columns(task: str):
    """The Raspberry Pi 5 columns of HW-NAS-Bench-360 for ``task`` (cifar100 or ninapro), as
    :class:`hwnas.predictors.data.Column` keyed ``pi5_<runtime>[:energy_mj]@<task>``."""
    from hwnas.assets import asset_path
    from hwnas.predictors.data import Column
    from hwnas.tables import read_table

    path = asset_path("devices", "recorded", HW360)
    table = read_table(path)
    rows = np.asarray(table["index"], dtype=np.int64)  # the 6,466 cells measured
    out = []
    for name in table:
        if not name.startswith("pi5_") or f"_{task}_" not in name:
            continue
        runtime = name.split("_")[1]
        metric = "latency_ms" if name.endswith("latency_ms") else "energy_mj"
        device = f"pi5_{runtime}@{task}"
        values = np.full(15625, np.nan)
        values[rows] = table[name]
        out.append(Column(device, metric, values, f"recorded:recorded/{HW360}:{name}"))
    return out


def family_of(device: str) -> str | None:
    from hwnas.devices import profiles

    cls = profiles().get(device, {}).get("class")
    return next((f for f, classes in FAMILIES.items() if cls in classes), None)


def _halves(column, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The column's measured architectures split at random into (fit, test) halves: both
    ceilings fit on the same half and score on the same other half."""
    y = column.values
    measured = np.nonzero(np.isfinite(y) & (y > 0))[0]  # Eagle devices miss some cells
    perm = np.random.default_rng(seed).permutation(measured)
    return perm[: len(perm) // 2], perm[len(perm) // 2 :]


@lru_cache(maxsize=1)
def _tree_features() -> np.ndarray:
    """(15625, F) what the trees of :func:`ceiling` read (computed once, not per column)."""
    from hwnas.predictors.featurize import get_featurizer

    fz = get_featurizer("nasbench201")
    archs = fz.space.all_archs()
    return np.concatenate([fz.encoding(archs), fz.structural(archs), np.log1p(fz.graph(archs))], 1)


def ceiling(column, seed: int = 0) -> dict[str, float]:
    """Trees on half of the column's own values, scored on the other half."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits

    from hwnas.predictors.metrics import scores

    x, y = _tree_features(), column.values
    fit, test = _halves(column, seed)
    with threadpool_limits(1):
        model = HistGradientBoostingRegressor(max_iter=300, random_state=seed)
        model.fit(x[fit], np.log(y[fit]))
        return scores(np.exp(model.predict(x[test])), y[test])


@lru_cache(maxsize=2)
def _head_basis(artifact: str) -> np.ndarray:
    """(15625, D) the meta head's basis of every architecture under ``artifact``: encoder
    outputs and cost proxies (each over its mean) and additive costs (computed once per
    artifact, not per column)."""
    from hwnas.predictors.meta import MetaPredictor

    pred = MetaPredictor(artifact)
    phi, f = pred.space_basis(pred.featurizer.space.all_archs())
    return np.concatenate([phi / phi.mean(0), f], 1)


def basis_ceiling(artifact, column, seed: int = 0) -> dict[str, float]:
    """The meta head's own basis (encoder outputs, cost proxies and additive costs of
    ``artifact``) fitted by least relative squares on half of the column's own values, scored
    on the other half: the best any setting of the head can do on this device, whatever its
    prior and however many values it is given."""
    from hwnas.predictors.metrics import scores

    x, y = _head_basis(str(artifact)), column.values
    fit, test = _halves(column, seed)
    w, *_ = np.linalg.lstsq(x[fit] / y[fit, None], np.ones(len(fit)), rcond=None)
    return scores(np.maximum(x[test] @ w, 1e-9), y[test])


def family_artifact(family: str, cache: Path, steps: int, console) -> Path:
    """An artifact meta-trained on every recorded NAS-Bench-201 column outside ``family``."""
    from hwnas.predictors.data import recorded_columns
    from hwnas.predictors.train import meta_train, reuse_cached

    out = cache / f"nasbench201-no-{family}-s{steps}"
    if reuse_cached(out):
        return out
    train = [c for c in recorded_columns("nasbench201") if family_of(c.device) != family]
    t0 = time.time()
    meta_train(
        "nasbench201",
        train,
        out,
        out.name,
        split={"meta_train": [c.key for c in train], "held_out_family": family},
        steps=steps,
    )
    console.print(f"meta-trained {out.name} on {len(train)} columns in {time.time() - t0:.0f} s")
    return out


def score_rows(artifact, columns, with_ceiling: bool) -> list[tuple[str, dict, tuple | None]]:
    from hwnas.predictors.evaluate import evaluate_columns
    from hwnas.predictors.meta import MetaPredictor

    per = evaluate_columns(lambda: MetaPredictor(artifact), "nasbench201", columns)
    return [
        (c.key, per[c.key], (ceiling(c), basis_ceiling(artifact, c)) if with_ceiling else None)
        for c in columns
    ]


def print_table(console, title: str, rows) -> dict[str, float]:
    from rich.table import Table

    table = Table(title=title)
    for col in ("device", "Spearman rho", "Kendall tau", "MAPE %", "±10% acc", "in 2 std",
                "ceiling rho / ±10%", "head's basis rho / ±10%"):  # fmt: skip
        table.add_column(col, justify="left" if col == "device" else "right")
    for key, s, ceil in rows:
        table.add_row(
            key,
            f"{s['spearman_rho']:.3f}",
            f"{s['kendall_tau']:.3f}",
            f"{s['mape_pct']:.1f}",
            f"{s['acc_10pct']:.3f}",
            f"{s['coverage_2std']:.3f}",
            f"{ceil[0]['spearman_rho']:.3f} / {ceil[0]['acc_10pct']:.2f}" if ceil else "",
            f"{ceil[1]['spearman_rho']:.3f} / {ceil[1]['acc_10pct']:.2f}" if ceil else "",
        )
    rho = [s["spearman_rho"] for _, s, _ in rows]
    acc = [s["acc_10pct"] for _, s, _ in rows]
    summary = {"mean_rho": float(np.mean(rho)), "worst_rho": float(min(rho)),
               "mean_acc": float(np.mean(acc)), "worst_acc": float(min(acc))}  # fmt: skip
    table.add_row(
        "mean (worst)",
        f"{summary['mean_rho']:.3f} ({summary['worst_rho']:.3f})",
        "",
        "",
        f"{summary['mean_acc']:.3f} ({summary['worst_acc']:.3f})",
        "",
        "",
        "",
    )
    console.print(table)
    return summary


def gross_errors(console, factors=(0.3, 3.0)) -> None:
    """Table 3 of the module docstring."""
    from rich.table import Table

    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import SPLITS, get_column, reference_indices
    from hwnas.predictors.metrics import scores
    from hwnas.spaces import get_space

    archs = get_space("nasbench201").all_archs()
    ref = list(reference_indices("nasbench201"))
    cal = [archs[i] for i in ref]
    pred = load_predictor("nasbench201-help", "nasbench201")
    eps = pred.outlier
    table = Table(title=f"One gross error among the 10 reference values (x{factors[0]} or "
                  f"x{factors[1]}, each value in turn), nasbench201-help")  # fmt: skip
    for col in ("device", "clean rho", f"outlier {eps}: mean (worst) rho", "flagged",
                "outlier 0: mean (worst) rho"):  # fmt: skip
        table.add_column(col, justify="left" if col == "device" else "right")
    for device in SPLITS["nasbench201"]["meta_test"]:
        y = get_column("nasbench201", device).values
        pred.outlier = eps
        clean = scores(pred.fit(cal, y[ref]).predict(archs)[0], y)["spearman_rho"]
        rho = {eps: [], 0.0: []}
        flagged = 0
        for slot in range(len(ref)):
            for factor in factors:
                bad = y[ref].copy()
                bad[slot] *= factor
                for e in (eps, 0.0):
                    pred.outlier = e
                    rho[e].append(scores(pred.fit(cal, bad).predict(archs)[0], y)["spearman_rho"])
                    if e == eps:
                        flagged += list(pred.suspect_values()) == [slot]
        table.add_row(
            device,
            f"{clean:.3f}",
            f"{np.mean(rho[eps]):.3f} ({min(rho[eps]):.3f})",
            f"{flagged}/{len(rho[eps])}",
            f"{np.mean(rho[0.0]):.3f} ({min(rho[0.0]):.3f})",
        )
    console.print(table)


def power_table(console) -> None:
    """Table 4 of the module docstring."""
    from rich.table import Table

    from hwnas.predictors.data import recorded_columns
    from hwnas.spaces import get_space

    columns = {c.key: c.values for c in recorded_columns("nasbench201")}
    archs = get_space("nasbench201").all_archs()
    convs = np.array([a.text.count("nor_conv_3x3") for a in archs])
    counts = range(6)
    table = Table(title="Raspberry Pi 5 (CIFAR-100 networks): median power (W) = energy / "
                  "latency, by the cell's 3x3 convolutions (cells measured)")  # fmt: skip
    table.add_column("runtime")
    for k in counts:
        table.add_column(f"{k} ({int(((convs == k) & np.isfinite(columns['pi5_onnx'])).sum())})",
                         justify="right")  # fmt: skip
    table.add_column("rho(power, latency)", justify="right")
    for runtime in ("litert", "onnx", "torchmobile"):
        lat, energy = columns[f"pi5_{runtime}"], columns[f"pi5_{runtime}:energy_mj"]
        ok = np.isfinite(lat) & np.isfinite(energy)
        power = energy / lat
        cells = [f"{np.median(power[ok & (convs == k)]):.2f}" for k in counts]
        rho = np.corrcoef(np.argsort(np.argsort(power[ok])), np.argsort(np.argsort(lat[ok])))
        table.add_row(runtime, *cells, f"{rho[0, 1]:.2f}")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    parser.add_argument("--cache", type=Path, default=Path("runs/predictor_robustness"))
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--no-ceiling", action="store_true")
    parser.add_argument("--no-gross-errors", action="store_true")
    parser.add_argument("--power", action="store_true")
    args = parser.parse_args()

    from rich.console import Console

    from hwnas.predictors import resolve_artifact
    from hwnas.predictors.data import recorded_columns

    console = Console(width=160)
    started = time.time()
    summaries: dict[str, dict[str, float]] = {}
    shipped = resolve_artifact("nasbench201")
    ninapro = task_columns("ninapro")
    summaries["other task (ninapro), nasbench201"] = print_table(
        console,
        f"Other tasks' networks: Raspberry Pi 5, ninapro networks, artifact nasbench201 "
        f"({shipped}; meta-trained on the cifar100 networks only), 10 reference values",
        score_rows(shipped, ninapro, not args.no_ceiling),
    )
    columns = recorded_columns("nasbench201")
    for family in args.families:
        artifact = family_artifact(family, args.cache, args.steps, console)
        held = [c for c in columns if family_of(c.device) == family]
        if family == "board":
            held += ninapro
        summaries[f"no {family} in training"] = print_table(
            console,
            f"Leave one family out: no {family} in meta-training ({artifact.name}); "
            "10 reference values per device",
            score_rows(artifact, held, not args.no_ceiling),
        )
    if not args.no_gross_errors:
        gross_errors(console)
    if args.power:
        power_table(console)
    console.print("summary: evaluation, mean rho, worst rho, mean ±10%, worst ±10%")
    for name, s in summaries.items():
        console.print(
            f"  {name:40s} {s['mean_rho']:.3f} {s['worst_rho']:.3f} {s['mean_acc']:.3f} "
            f"{s['worst_acc']:.3f}"
        )
    console.print(f"done in {time.time() - started:.0f} s")


if __name__ == "__main__":
    main()
