"""Latency of networks hwnas has never seen: the kernel-level predictor against the measurement.

Sixteen networks written from their papers (:mod:`unseen_networks_models`: GhostNet,
MnasNet-A1, RegNetX-400MF, DenseNet-121, Inception-v3, ConvNeXt-nano, MobileViT-XS, Swin
(C=48), LeViT-128S, U-Net, an LSTM acoustic model, DS-CNN-L, M5, a TCN, a DeepLabv3-style
segmenter and MLP-Mixer), none of them in hwnas's search spaces, reference sets or known
networks (``--models unseen_networks_models_b``: a second set of thirteen, ResNet-50 to a
BERT-tiny and a GPT-style decoder on int64 token ids, :mod:`unseen_networks_models_b`;
``--models unseen_networks_models_c``: a third set of ten, EfficientNetV2-S to WaveNet and a
Conformer, :mod:`unseen_networks_models_c`), are

1. exported to ONNX as hwnas exports (:func:`hwnas.export.export_onnx`: TorchScript exporter,
   opset 17, dynamic batch axis, full ONNX check; a network on integer token ids, which that
   export does not take, by the same exporter with the same settings) into
   ``OUT/onnx/NAME.onnx``; their
   multiply-accumulates (MACs: convolutions, Gemm/MatMul, Einsum, LSTM) are read by
   :func:`hwnas.predictors.graph.read_graph` from the same network exported at a static batch
   of 1 (before 2026-12-06 the reader counted Swin's windowed attention once per window from
   the dynamic-batch file, 905 instead of 1161 MMACs; ``OUT/networks.csv`` has both counts);
2. predicted, each in its own process: ``python -m hwnas predict --device cpu --onnx FILE``
   (the kernel-level predictor: the ONNX Runtime kernels of the network, each timed alone once
   and kept in the home's store, summed and corrected; its ms, std and 90% interval are parsed
   from the one line it prints; ``OUT/predictions.json``, logs in ``OUT/logs/``);
3. measured in ``--passes`` passes: ``python -m hwnas measure --device cpu --onnx FILE --store
   OUT/stores/NAME.pass_K.db``, a fresh store per network and pass (a store answers a repeated
   model with its first value), pass 1 of every network before pass 2 of any, so the passes lie
   minutes apart; each pass's ms is read from its store (the printed table's value, to 4
   decimals, where the store cannot be read); the median over the passes is the truth
   (``OUT/measurements.json``);

every command pinned to one core (``taskset -c CORE``, ``--core``, default 1; ``--core 0,1``
with ``--device`` naming a profile of ``timing.threads: 2`` times two intra-op threads, as a
server's multi-threaded inference runs), and prints a
Markdown table (network, MMACs, predicted ms, 90% interval, measured median ms and the passes,
error %, whether the median lies inside the interval, and a FLOPs baseline: the network's MACs
times a ms-per-MAC scale fitted leave-one-out on the other networks, the geometric mean of
their measured/MACs ratios, and its error %) and a summary: MAPE, median APE, share within
±10%, coverage of the median by the 90% interval (k/n and share, against the nominal 0.90) and
of every single pass, and Spearman rho, for the predictor and for the FLOPs baseline (whose rho
is that of the MACs). The table and summary are also written to ``OUT/results.md`` and the rows
to ``OUT/results.csv``.

The calibration must be taken first, in the same hwnas home (``HWNAS_HOME`` selects it;
default the user data folder), as docs/predictors.md says; without it the predictor uses its
prior correction and its intervals are not calibrated:

    export HWNAS_HOME=/path/to/home
    taskset -c 1 python -m hwnas refset measure --device cpu --space mobilenetv4
    taskset -c 1 python -m hwnas refset measure --device cpu --space vit

Then:

    python experiments/unseen_networks.py --out runs/unseen_networks --passes 5
    python experiments/unseen_networks.py --out runs/unseen_networks --export-only
    python experiments/unseen_networks.py --out runs/unseen_networks --only ghostnet m5 --passes 1
    python experiments/unseen_networks.py --models unseen_networks_models_b \
        --out runs/unseen_networks_b --passes 3
    python experiments/unseen_networks.py --models unseen_networks_models_c \
        --out runs/unseen_networks_c --passes 3
    python experiments/unseen_networks.py --out runs/unseen_networks --passes 5 \\
        --skip-predict --skip-measure     # the table again from OUT's files, nothing run

``--skip-predict`` reuses ``OUT/predictions.json``; ``--skip-measure`` reads the passes from
the stores already in ``OUT/stores/`` (a network or pass without one is reported missing).
Without them every prediction is taken again and every store of a network measured is replaced
by a fresh one.

Time, on a 2-core VM with core 1 to itself: exporting all 16 (and counting their MACs) takes
about 20 s; a prediction 14-17 s once the network's kernels are in the home's store, 1-2.5
minutes for one whose kernels are new (each timed once per home); a measurement 1-13 s, up to
70 s when a noisy one is taken again: one pass of all 16 in about 1 minute, 5 passes and all
predictions in about 10 minutes. Run it on a quiet machine: with other work on the same core,
one pass measured the large networks 30-60% slower than on the quiet core, and 7 of 16 medians
fell outside their intervals.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def network_set(module: str):
    """(names, build, describe, example) of a module of networks (``--models``): ``build(name)``
    -> (model, input shape) or (model, input shape, dtype); ``example(name)`` -> an input (a
    float32 zero tensor where the module has none)."""
    import importlib

    import torch

    mod = importlib.import_module(module)

    def build(name):
        made = mod.build(name)
        return made[0], made[1]

    def example(name):
        if hasattr(mod, "example"):
            return mod.example(name)
        return torch.zeros(build(name)[1])

    return tuple(mod.NAMES), build, mod.describe, example


MODELS = "unseen_networks_models"
"""The default network set (``--models``): sixteen networks; ``unseen_networks_models_b`` is a
second set of thirteen (text and speech models among them), ``unseen_networks_models_c`` a
third set of ten (a WaveNet and a Conformer among them)."""

ROOT = Path(__file__).resolve().parents[1]
DEVICE = "cpu"
"""The live ONNX Runtime device every command names (``--device``)."""
NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
PREDICTION = re.compile(
    rf": ({NUMBER}) ms \(std ({NUMBER}) ms(?:; 90% interval ({NUMBER})-({NUMBER}) ms)?\)\s*$"
)
"""The line ``hwnas predict`` prints per model: ``FILE: MS ms (std S ms; 90% interval LO-HI
ms)`` (``hwnas/cli/predict.py``)."""
TABLE_ROW = re.compile(rf"│\s*({NUMBER})\s*│")
"""The first number cell of a row of ``hwnas measure``'s table: the median latency in ms."""


# ------------------------------------------------------------------------------------- export
def export(names: list[str], out: Path, force: bool = False) -> dict[str, dict]:
    """Export ``names`` to ``out/onnx/NAME.onnx`` (missing files only, unless ``force``) and
    count their MACs from the ONNX graph; returns name -> {paper, input_shape, mmacs,
    mmacs_dynamic_export, params_m, uncounted, seconds}, also written to ``out/networks.csv``
    (the rows of networks not exported now are kept)."""
    import onnx
    import torch

    from hwnas.export import OPSET, export_onnx
    from hwnas.predictors.graph import COLUMN, read_graph

    (out / "onnx").mkdir(parents=True, exist_ok=True)
    info = read_networks(out)
    macs_columns = [i for name, i in COLUMN.items() if name.startswith("macs_")]
    torch.set_num_threads(1)
    # nn.MultiheadAttention's fused fast path (taken without gradients) has no ONNX export;
    # export_onnx turns it off for its own export only, the exports below need it off too
    torch.backends.mha.set_fastpath_enabled(False)
    for name in names:
        path = out / "onnx" / f"{name}.onnx"
        t0 = time.perf_counter()
        model, shape = build(name)
        x = example(name)
        fresh = force or not path.exists()
        if fresh and x.is_floating_point():
            path.write_bytes(export_onnx(model, shape))
        elif fresh:  # integer inputs (token ids): hwnas's export takes float images only
            with torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(model, (x,), str(path), dynamo=False, opset_version=OPSET,
                                  input_names=["input"], output_names=["output"],
                                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
            onnx.checker.check_model(onnx.load(str(path)), full_check=True)
        # MACs of the graph exported at a static batch of 1: in the dynamic-batch export, hwnas's
        # reader counts a MatMul on windows folded into the batch axis (Swin's attention) once
        # per window instead of once per image (898 instead of 1154 MMACs of MatMul for swin_c48)
        static = io.BytesIO()
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, (x,), static, dynamo=False,
                              opset_version=OPSET, input_names=["input"])  # fmt: skip
        features, uncounted = read_graph(onnx.load_from_string(static.getvalue()))
        dynamic = read_graph(onnx.load(str(path)))[0]
        info[name] = {
            "paper": describe(name),
            "input_shape": "x".join(map(str, shape)),
            "mmacs": round(float(features[macs_columns].sum()) / 1e6, 3),
            "mmacs_dynamic_export": round(float(dynamic[macs_columns].sum()) / 1e6, 3),
            "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 3),
            "uncounted": " ".join(f"{k}:{v}" for k, v in sorted(uncounted.items())),
            "seconds": round(time.perf_counter() - t0, 1),
        }
        r = info[name]
        print(f"{'exported' if fresh else 'kept'} {path} ({r['input_shape']}, "
              f"{r['mmacs']:.1f} MMACs, {r['params_m']:.2f} M params, {r['seconds']} s)",
              flush=True)  # fmt: skip
    with open(out / "networks.csv", "w", newline="") as f:
        w = csv.writer(f)
        fields = ["input_shape", "mmacs", "mmacs_dynamic_export", "params_m", "uncounted",
                  "seconds", "paper"]  # fmt: skip
        w.writerow(["network", *fields])
        for name in [n for n in NAMES if n in info]:
            w.writerow([name, *(info[name].get(k, "") for k in fields)])
    return info


def read_networks(out: Path) -> dict[str, dict]:
    """The rows of ``out/networks.csv`` by network (empty when there is none)."""
    path = out / "networks.csv"
    if not path.exists():
        return {}
    return {r["network"]: {**r, "mmacs": float(r["mmacs"])} for r in csv.DictReader(open(path))}


# ---------------------------------------------------------------------------- running hwnas
def hwnas(args: list[str], log: Path, core: int | None, timeout: float) -> tuple[int, str, str]:
    """Run ``python -m hwnas ARGS`` (this interpreter), pinned to ``core`` where ``taskset``
    exists; stdout and stderr go to ``log.out`` / ``log.err`` too. Returns (exit code, stdout,
    stderr); a timeout is exit code 124."""
    cmd = [sys.executable, "-m", "hwnas", *args]
    if core is not None and shutil.which("taskset"):
        cmd = ["taskset", "-c", str(core), *cmd]
    env = {**os.environ, "COLUMNS": "200"}  # one table row per line: no wrapped cells
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc = 124
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        stderr = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        stderr += f"\ntimed out after {timeout:.0f} s"
    log.with_suffix(".out").write_text(stdout)
    log.with_suffix(".err").write_text(f"$ {' '.join(cmd)}\n{stderr}")
    return rc, stdout, stderr


def parse_prediction(stdout: str) -> dict | None:
    """{ms, std, low, high} from ``hwnas predict``'s line (low/high None without an interval),
    or None when no line matches."""
    for line in stdout.splitlines():
        m = PREDICTION.search(line)
        if m:
            ms, std, low, high = (float(g) if g is not None else None for g in m.groups())
            return {"ms": ms, "std": std, "low": low, "high": high}
    return None


def parse_measured(stdout: str, name: str) -> float | None:
    """The median ms of ``name.onnx`` in ``hwnas measure``'s table, or None."""
    for line in stdout.splitlines():
        if f"{name}.onnx" in line:
            m = TABLE_ROW.search(line)
            if m:
                return float(m.group(1))
    return None


def stored(store: Path, name: str) -> dict | None:
    """{ms, cv, flagged} of ``name.onnx`` on ``DEVICE`` in the store file ``store`` (the only
    network it holds, when it was written by this script), or None."""
    if not store.exists():
        return None
    from hwnas.store import MeasurementStore

    with MeasurementStore(store) as st:
        rows = st.measurements(device=DEVICE, metric="latency_ms")
    rows = [m for m in rows if m.label == f"{name}.onnx" and m.batch_size == 1] or rows
    if not rows:
        return None
    m = rows[-1]
    return {"ms": float(m.value), "cv": float(m.cv), "flagged": bool(m.flagged)}


def predict(names, out: Path, core, timeout, prior: dict) -> dict[str, dict]:
    """Run ``hwnas predict`` for ``names``; returns ``prior`` updated with {ms, std, low, high,
    seconds, note} per network, written to ``out/predictions.json`` after each."""
    preds = dict(prior)
    for name in names:
        t0 = time.perf_counter()
        path = out / "onnx" / f"{name}.onnx"
        rc, stdout, stderr = hwnas(["predict", "--device", DEVICE, "--onnx", str(path)],
                                   out / "logs" / f"predict_{name}", core, timeout)  # fmt: skip
        p = parse_prediction(stdout)
        seconds = round(time.perf_counter() - t0, 1)
        if p is None:
            last = (stderr.strip().splitlines() or [f"exit code {rc}"])[-1]
            print(f"predict {name}: FAILED (rc {rc}, {seconds} s): {last}", flush=True)
            preds.pop(name, None)
        else:
            note = next((ln for ln in stderr.splitlines() if ln.startswith("predictor ")), "")
            preds[name] = {**p, "seconds": seconds, "note": note}
            print(f"predict {name}: {p['ms']:.4g} ms, 90% interval {p['low']}-{p['high']} ms "
                  f"({seconds} s)", flush=True)  # fmt: skip
        (out / "predictions.json").write_text(json.dumps(preds, indent=1))
    return preds


def store_path(out: Path, name: str, k: int) -> Path:
    return out / "stores" / f"{name}.pass_{k}.db"


def measure(names, passes: int, out: Path, core, timeout, skip: bool) -> dict[str, dict]:
    """Measure ``names`` in ``passes`` passes (each pass over every network before the next),
    or with ``skip`` read them from the stores already there; returns name -> {"passes": {K:
    {ms, cv, flagged, seconds}}}, merged into ``out/measurements.json``."""
    path = out / "measurements.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    for k in range(1, passes + 1):
        for name in names:
            store = store_path(out, name, k)
            entry = data.setdefault(name, {"passes": {}})["passes"]
            if skip:
                s = stored(store, name)
                if s is None:
                    entry.pop(str(k), None)
                    print(f"measure {name} pass {k}: no store {store}", flush=True)
                else:
                    entry[str(k)] = {**entry.get(str(k), {}), **s}
                continue
            for old in store.parent.glob(f"{store.name}*"):  # a fresh store: the db, its WAL,
                if old.is_dir():  # its lock file and lock folder go
                    shutil.rmtree(old)
                else:
                    old.unlink()
            store.parent.mkdir(parents=True, exist_ok=True)
            t0 = time.perf_counter()
            rc, stdout, stderr = hwnas(
                ["measure", "--device", DEVICE, "--onnx", str(out / "onnx" / f"{name}.onnx"),
                 "--store", str(store)],
                out / "logs" / f"measure_{k}_{name}", core, timeout)  # fmt: skip
            seconds = round(time.perf_counter() - t0, 1)
            # the store's value (full precision; what --skip-measure reads again), else the table's
            shown, s = parse_measured(stdout, name), stored(store, name)
            ms = s["ms"] if s is not None else shown
            if shown is not None and s is not None and abs(shown / s["ms"] - 1) > 1e-3:
                print(f"measure {name} pass {k}: the table says {shown} ms, the store {ms} ms")
            if ms is None:
                last = (stderr.strip().splitlines() or [f"exit code {rc}"])[-1]
                print(f"measure {name} pass {k}: FAILED (rc {rc}, {seconds} s): {last}", flush=True)
                entry.pop(str(k), None)
            else:
                extra = {"cv": s["cv"], "flagged": s["flagged"]} if s else {}
                entry[str(k)] = {"ms": ms, **extra, "seconds": seconds}
                flag = " (flagged: too noisy)" if extra.get("flagged") else ""
                print(f"measure {name} pass {k}: {ms:.4g} ms{flag} ({seconds} s)", flush=True)
            path.write_text(json.dumps(data, indent=1))
    path.write_text(json.dumps(data, indent=1))
    return data


# --------------------------------------------------------------------------------- analysis
def spearman(a, b) -> float:
    """Spearman's rho of ``a`` and ``b`` (nan below 3 pairs)."""
    if len(a) < 3:
        return float("nan")
    from scipy.stats import spearmanr

    return float(spearmanr(a, b)[0])


def flops_loo(macs: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """FLOPs baseline, leave-one-out: network i's MACs times the geometric mean of measured ms
    per MAC over the other networks (nan with fewer than two networks)."""
    ratio = np.log(measured / macs)
    if len(ratio) < 2:
        return np.full(len(ratio), np.nan)
    return np.array([np.exp(np.delete(ratio, i).mean()) * macs[i] for i in range(len(macs))])


def analyse(names, info, preds, meas, passes: int) -> tuple[list[dict], list[str]]:
    """(rows of the table, Markdown lines of the table and the summary) for the networks of
    ``names`` that have a MACs count, a prediction with an interval, and at least one pass
    among passes 1..``passes``."""
    rows, missing = [], []
    for name in names:
        p = preds.get(name)
        vals = [meas.get(name, {}).get("passes", {}).get(str(k)) for k in range(1, passes + 1)]
        vals = [v["ms"] for v in vals if v]
        if name not in info or not p or p.get("low") is None or not vals:
            missing.append(name)
            continue
        rows.append({"network": name, "mmacs": float(info[name]["mmacs"]), "pred": p["ms"],
                     "std": p["std"], "low": p["low"], "high": p["high"],
                     "measured": float(np.median(vals)), "passes": vals})  # fmt: skip
    if not rows:
        return [], ["no network has a prediction and a measurement"]
    pred = np.array([r["pred"] for r in rows])
    lo, hi = np.array([r["low"] for r in rows]), np.array([r["high"] for r in rows])
    truth = np.array([r["measured"] for r in rows])
    macs = np.array([r["mmacs"] for r in rows])
    base = flops_loo(macs, truth)
    for r, b in zip(rows, base):
        r["error_pct"] = 100 * (r["pred"] / r["measured"] - 1)
        r["inside"] = bool(r["low"] <= r["measured"] <= r["high"])
        r["flops_ms"] = float(b)
        r["flops_error_pct"] = 100 * (b / r["measured"] - 1)

    lines = [
        "| network | MMACs | predicted ms | 90% interval ms | measured ms, median (passes) "
        "| error % | inside | FLOPs-LOO ms | FLOPs error % |",
        "|---|--:|--:|--:|---|--:|:-:|--:|--:|",
    ]
    for r in rows:
        each = ", ".join(f"{v:.3f}" for v in r["passes"])
        lines.append(
            f"| {r['network']} | {r['mmacs']:.0f} | {r['pred']:.3f} | {r['low']:.3f}-"
            f"{r['high']:.3f} | {r['measured']:.3f} ({each}) | {r['error_pct']:+.1f} | "
            f"{'yes' if r['inside'] else 'NO'} | {r['flops_ms']:.3f} | "
            f"{r['flops_error_pct']:+.1f} |"
        )
    n = len(rows)
    ape = np.abs(pred / truth - 1) * 100
    ape_f = np.abs(base / truth - 1) * 100
    inside = (lo <= truth) & (truth <= hi)
    single = [r["low"] <= v <= r["high"] for r in rows for v in r["passes"]]
    lines += [
        "",
        f"n = {n} networks, {len(single)} single passes (passes 1-{passes}; truth = median of "
        "the passes)",
        "",
        "| predictor | MAPE % | median APE % | within ±10% | coverage of the median "
        "(nominal 0.90) | coverage of single passes | Spearman rho |",
        "|---|--:|--:|--:|--:|--:|--:|",
        f"| kernel-level (hwnas predict) | {ape.mean():.1f} | {np.median(ape):.1f} | "
        f"{np.mean(ape <= 10):.2f} | {inside.sum()}/{n} = {inside.mean():.2f} | "
        f"{sum(single)}/{len(single)} = {np.mean(single):.2f} | {spearman(pred, truth):.3f} |",
        f"| FLOPs, leave-one-out scale | {np.nanmean(ape_f):.1f} | {np.nanmedian(ape_f):.1f} | "
        f"{np.mean(ape_f <= 10):.2f} | - | - | {spearman(macs, truth):.3f} |",
    ]
    if missing:
        lines += ["", f"left out (no MACs, prediction, interval or pass): {', '.join(missing)}"]
    return rows, lines


def main() -> None:
    global DEVICE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "unseen_networks",
                        help="folder of the ONNX files, logs, stores and results "
                             "(default: runs/unseen_networks)")  # fmt: skip
    parser.add_argument("--models", default=MODELS, metavar="MODULE",
                        help=f"the module of networks in experiments/ (default {MODELS}; "
                        "unseen_networks_models_b, _c: a second and a third set)")  # fmt: skip
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="these networks only (default: all of --models)")  # fmt: skip
    parser.add_argument("--passes", type=int, default=5, help="measurement passes (default 5)")
    parser.add_argument("--core", default="1",
                        help="core(s) to pin hwnas to, as taskset -c takes them (default 1; "
                        "0,1: two cores; -1: none)")  # fmt: skip
    parser.add_argument("--device", default=DEVICE,
                        help=f"live ONNX Runtime device (default {DEVICE}; a profile of the "
                        "hwnas home, e.g. one with timing.threads: 2)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=900,
                        help="seconds one hwnas command may run (default 900)")  # fmt: skip
    parser.add_argument("--export-only", action="store_true", help="export, count MACs, stop")
    parser.add_argument("--reexport", action="store_true",
                        help="export again the ONNX files already in OUT/onnx")  # fmt: skip
    parser.add_argument("--skip-predict", action="store_true",
                        help="reuse OUT/predictions.json instead of predicting")  # fmt: skip
    parser.add_argument("--skip-measure", action="store_true",
                        help="read the passes from OUT/stores instead of measuring")  # fmt: skip
    args = parser.parse_args()
    if args.passes < 1:
        parser.error("--passes must be at least 1")
    global NAMES, build, describe, example
    NAMES, build, describe, example = network_set(args.models)
    unknown = sorted(set(args.only or ()) - set(NAMES))
    if unknown:
        parser.error(f"--only: not in {args.models}: {', '.join(unknown)}")
    names = [n for n in NAMES if n in (args.only or NAMES)]
    out = args.out.resolve()
    core = None if args.core == "-1" else args.core
    DEVICE = args.device
    home = os.environ.get("HWNAS_HOME", "(default: the user data folder)")
    print(f"hwnas home {home}; out {out}; networks {' '.join(names)}", flush=True)

    t0 = time.perf_counter()
    info = export(names, out, args.reexport)
    if args.export_only:
        return
    preds_path = out / "predictions.json"
    preds = json.loads(preds_path.read_text()) if preds_path.exists() else {}
    if not args.skip_predict:
        preds = predict(names, out, core, args.timeout, preds)
    meas = measure(names, args.passes, out, core, args.timeout, args.skip_measure)

    rows, lines = analyse(names, info, preds, meas, args.passes)
    # the predictor's calibration, as hwnas predict names it (the part after its kernel counts)
    notes = {preds[n]["note"].split("; ", 1)[-1] for n in names if preds.get(n, {}).get("note")}
    lines += [""] + [f"hwnas predict: {note}" for note in sorted(notes)]
    print("\n" + "\n".join(lines), flush=True)
    (out / "results.md").write_text("\n".join(lines) + "\n")
    if rows:
        with open(out / "results.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[k for k in rows[0] if k != "passes"] + ["passes"])
            w.writeheader()
            for r in rows:
                w.writerow({**r, "passes": " ".join(f"{v:.4f}" for v in r["passes"])})
    print(f"\n{time.perf_counter() - t0:.0f} s; results in {out}", flush=True)


if __name__ == "__main__":
    main()
