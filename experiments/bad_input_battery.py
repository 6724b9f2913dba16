"""Bad input, as a user types it: is every case refused in one line before work?

Runs each case through the CLI (``python -m hwnas ...`` in a subprocess, a fresh
``HWNAS_HOME`` and working folder each, a time limit) and classifies it:

- **clean**: the expected outcome. For a refusal: a non-zero exit status, exactly one line on
  stderr that starts with ``error:`` (progress lines aside), no traceback. For a case that must
  work (a huge but valid value): exit 0 and a result the case's check accepts.
- **traceback**: a Python traceback anywhere in the output.
- **hang**: still running at the time limit (``--timeout``, default 60 s; killed).
- **silently wrong**: exit 0 where a refusal was expected, or a result the check rejects.
- **unclear**: a non-zero exit without one error line (a usage text of several lines, a
  process killed by a signal, nothing said).

It prints the counts and every case that is not clean (with the last lines of its output).

    python experiments/bad_input_battery.py [--timeout 60] [--only SUBSTRING] [--list]
        [--jobs 1] [--json out.json]

To measure another checkout's code, put it first on the path: ``PYTHONPATH=/path/to/checkout
python experiments/bad_input_battery.py`` (the cases run ``python -m hwnas`` with the same
environment).

Each case runs with its address space limited (``--memory-gb``, default 6; ``RLIMIT_AS``), so
a case that tries to allocate terabytes fails on its own instead of taking the machine's memory
(a MemoryError traceback counts as a traceback).

Fixtures (space files, device profiles, ONNX models, predictor artifacts, calibration files)
are written to a temporary folder; nothing outside it is touched. Cases of what hwnas trusts in
files from others (pickles, YAML aliases, names used as paths) are in ``tests/security``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SMALL = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"
ARCH = "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|"  # noqa: E501
TABLE = ["search", "-d", "pixel3", "--budget", "5", "--no-zoo"]
SUPERNET = ["search", "-d", "pixel3", "--strategy", "gdas", "--epochs", "1", "--no-zoo"]
SUPERNET += ["--set", "limit=200", "--finetune-epochs", "0"]


@dataclass
class Case:
    """One bad input.

    Attributes:
        name: what it is.
        args: the command line after ``hwnas`` ({tmp} is the fixture folder, {case} the case's
            own folder with ``empty.db`` and ``garbage.db``, {port} a port in use).
        expect: "refuse" or "ok".
        check: for "ok": (stdout, stderr, fixture folder) -> whether the result is right.
        env: extra environment ({tmp} filled in).
        timeout: seconds (default: the battery's).
    """

    name: str
    args: list[str]
    expect: str = "refuse"
    check: Callable[[str, str, Path], bool] | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None


# -- fixtures ----------------------------------------------------------------------------------

TINY = """\
name: tiny
datasets:
  digits: {classes: 10, input_shape: [3, 16, 16]}
stem:
  - {block: conv, out: 8, kernel: 3}
stages:
  - name: a
    out: {choices: [8, 16]}
    stride: 2
    depth: {choices: [1, 2]}
    layer: {block: mbconv, kernel: {choices: [3, 5]}, expand: {choices: [2, 4]}, se: 0.25}
head:
  - {block: pool}
"""

SPACE_VARIANTS = {
    "width_1e9": TINY.replace("out: {choices: [8, 16]}", "out: {choices: [8, 1000000000]}"),
    "stem_width_1e9": TINY.replace("{block: conv, out: 8,", "{block: conv, out: 1000000000,"),
    "expand_inf": TINY.replace("expand: {choices: [2, 4]}", "expand: .inf"),
    "expand_nan": TINY.replace("expand: {choices: [2, 4]}", "expand: .nan"),
    "expand_zero": TINY.replace("expand: {choices: [2, 4]}", "expand: 0"),
    "expand_negative": TINY.replace("expand: {choices: [2, 4]}", "expand: {choices: [-2, 4]}"),
    "expand_1e9": TINY.replace("expand: {choices: [2, 4]}", "expand: {choices: [2, 1000000000]}"),
    "depth_max_1e6": TINY.replace(
        "depth: {choices: [1, 2]}", "depth: {min: 1, max: 1000000, step: 1}"
    ),
    "depth_step_0": TINY.replace("depth: {choices: [1, 2]}", "depth: {min: 1, max: 4, step: 0}"),
    "depth_min_gt_max": TINY.replace("depth: {choices: [1, 2]}", "depth: {min: 4, max: 1}"),
    "depth_negative": TINY.replace("depth: {choices: [1, 2]}", "depth: -1"),
    "kernel_even": TINY.replace("kernel: {choices: [3, 5]}", "kernel: {choices: [3, 4]}"),
    "stem_kernel_even": TINY.replace("out: 8, kernel: 3}", "out: 8, kernel: 2}"),
    "kernel_zero": TINY.replace("kernel: {choices: [3, 5]}", "kernel: 0"),
    "kernel_huge": TINY.replace("kernel: {choices: [3, 5]}", "kernel: 100001"),
    "width_zero": TINY.replace("out: {choices: [8, 16]}", "out: 0"),
    "width_negative": TINY.replace("out: {choices: [8, 16]}", "out: -8"),
    "width_float": TINY.replace("out: {choices: [8, 16]}", "out: 8.5"),
    "stride_zero": TINY.replace("stride: 2", "stride: 0"),
    "stride_huge": TINY.replace("stride: 2", "stride: 1000"),
    "classes_zero": TINY.replace("classes: 10", "classes: 0"),
    "classes_1e9": TINY.replace("classes: 10", "classes: 1000000000"),
    "input_huge": TINY.replace("[3, 16, 16]", "[3, 100000, 100000]"),
    "input_zero": TINY.replace("[3, 16, 16]", "[3, 0, 16]"),
    "input_2d": TINY.replace("[3, 16, 16]", "[16, 16]"),
    "se_5": TINY.replace("se: 0.25", "se: 5"),
    "se_negative": TINY.replace("se: 0.25", "se: -0.5"),
    "choices_empty": TINY.replace("kernel: {choices: [3, 5]}", "kernel: {choices: []}"),
    "unknown_block": TINY.replace("{block: pool}", "{block: teleport}"),
    "unknown_param": TINY.replace("se: 0.25", "se: 0.25, wings: 2"),
    "resolution_huge": TINY.replace("stem:", "resolution: {min: 16, max: 100000, step: 16}\nstem:"),
    "resolution_zero": TINY.replace("stem:", "resolution: {min: 0, max: 16, step: 8}\nstem:"),
    "yaml_syntax": TINY.replace("stages:", "stages: [unclosed"),
    "empty_file": "",
    "a_list": "- just\n- a list\n",
    "no_stages": TINY.split("stages:")[0] + "head:\n  - {block: pool}\n",
    "bad_name": TINY.replace("name: tiny", "name: 'tiny space!'"),
}

PROFILE = """\
name: NAME
kind: local
class: cpu
description: a test CPU profile
runtime: ort
timing: {warmup: 3, rounds: 3, calls_per_round: 5, threads: 1, max_cv: none}
tvm: {trials_per_task: 0}
"""

PROFILE_VARIANTS = {
    "energy_none": PROFILE + "energy: none\n",
    "energy_number": PROFILE + "energy: 5\n",
    "energy_list": PROFILE + "energy: [none]\n",
    "energy_unknown_meter": PROFILE + "energy: {meter: joulemeter}\n",
    "warmup_many": PROFILE.replace("warmup: 3", "warmup: many"),
    "warmup_negative": PROFILE.replace("warmup: 3", "warmup: -1"),
    "rounds_zero": PROFILE.replace("rounds: 3", "rounds: 0"),
    "calls_zero": PROFILE.replace("calls_per_round: 5", "calls_per_round: 0"),
    "calls_1e12": PROFILE.replace("calls_per_round: 5", "calls_per_round: 1000000000000"),
    "threads_zero": PROFILE.replace("threads: 1", "threads: 0"),
    "threads_many": PROFILE.replace("threads: 1", "threads: 100000"),
    "max_cv_negative": PROFILE.replace("max_cv: none", "max_cv: -1"),
    "max_cv_nan": PROFILE.replace("max_cv: none", "max_cv: .nan"),
    "max_cv_percent": PROFILE.replace("max_cv: none", "max_cv: 15"),  # meant 15%: a fraction
    "top_level_typo": PROFILE.replace("timing:", "timeing:"),
    "target_ci_zero": PROFILE.replace("max_cv: none", "max_cv: none, target_rel_ci: 0"),
    "max_seconds_negative": PROFILE.replace("max_cv: none", "max_cv: none, max_seconds: -5"),
    "timing_list": PROFILE.replace(
        "timing: {warmup: 3, rounds: 3, calls_per_round: 5, threads: 1, max_cv: none}",
        "timing: [3, 3, 5]",
    ),
    "runtime_unknown": PROFILE.replace("runtime: ort", "runtime: warp-drive"),
    "kind_unknown": PROFILE.replace("kind: local", "kind: quantum"),
    "tvm_trials_negative": PROFILE.replace("trials_per_task: 0", "trials_per_task: -4"),
}


def _onnx(path: Path, shape: list, dtype=None) -> str:
    import onnx
    from onnx import TensorProto, helper

    dtype = dtype or TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", dtype, shape)
    y = helper.make_tensor_value_info("y", dtype, shape)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


def _predictor_copies(tmp: Path) -> None:
    """Copies of the shipped nasbench201 predictor with a damaged weights.npz."""
    import numpy as np

    src = ROOT / "latency_predictors" / "nasbench201"
    with np.load(src / "weights.npz") as z:
        arrays = {k: z[k] for k in z.files}
    first = sorted(arrays)[0]
    variants = {
        "missing_key": {k: v for k, v in arrays.items() if k != first},
        "wrong_shape": {**arrays, first: np.zeros((3, 1), dtype=arrays[first].dtype)},
        "nan_weights": {**arrays, first: np.full_like(arrays[first], np.nan, dtype=float)},
    }
    for name, content in variants.items():
        folder = tmp / "predictors" / name
        shutil.copytree(src, folder)
        np.savez(folder / "weights.npz", **content)
    folder = tmp / "predictors" / "not_a_zip"
    shutil.copytree(src, folder)
    (folder / "weights.npz").write_bytes(b"not a zip file at all")
    folder = tmp / "predictors" / "card_garbage"
    shutil.copytree(src, folder)
    (folder / "card.json").write_text("{not json")


def _calibrations(tmp: Path) -> None:
    """calibration.csv files: the 10 reference architectures of nasbench201 with values."""
    subprocess.run(
        [sys.executable, "-m", "hwnas", "refset", "export", "--out", str(tmp / "refset")],
        check=True,
        capture_output=True,
        env={**os.environ, "HWNAS_HOME": str(tmp / "home-fixtures")},
    )
    lines = (tmp / "refset" / "calibration.csv").read_text().splitlines()
    header, rows = lines[0], lines[1:]
    good = [f"{row}{1.0 + 0.4 * i:.3f}" for i, row in enumerate(rows)]

    def write(name: str, body: list[str], head: str = header) -> None:
        (tmp / f"cal_{name}.csv").write_text("\n".join([head, *body]) + "\n")

    write("good", good)
    for label, value in {
        "1e308": "1e308",
        "nan": "nan",
        "inf": "inf",
        "negative": "-3",
        "zero": "0",
        "text": "fast",
    }.items():
        write(label, [good[0].rsplit(",", 1)[0] + "," + value, *good[1:]])
    write("empty", [])
    write("one_row", good[:1])
    write("no_latency_column", [r.rsplit(",", 1)[0] for r in good], header.rsplit(",", 1)[0])
    write("unknown_arch", ["|teleport~0|+|none~0|none~1|+|none~0|none~1|none~2|,x,1x3x32x32,1.0",
                           *good[1:]])  # fmt: skip
    (tmp / "cal_binary.csv").write_bytes(b"\x00\xff\xfe garbage \x00" * 10)


def fixtures(tmp: Path) -> None:
    """Write every fixture file under ``tmp``."""
    for name, text in SPACE_VARIANTS.items():
        (tmp / f"space_{name}.yaml").write_text(text)
    (tmp / "space_ok.yaml").write_text(TINY)
    profiles = tmp / "profiles"
    profiles.mkdir()
    for name, text in PROFILE_VARIANTS.items():
        (profiles / f"p_{name}.yaml").write_text(text.replace("NAME", f"p_{name}"))
    onnx = tmp / "onnx"
    onnx.mkdir()
    _onnx(onnx / "huge.onnx", [1, 3, 100000, 100000])
    _onnx(onnx / "zero.onnx", [1, 3, 0, 32])
    _onnx(onnx / "dynamic.onnx", [1, 3, "h", 32])
    _onnx(onnx / "batch_1e9.onnx", [1000000000, 3, 32, 32])
    (onnx / "empty.onnx").write_bytes(b"")
    (onnx / "garbage.onnx").write_bytes(b"\x08\x07garbage" * 100)
    _predictor_copies(tmp)
    _calibrations(tmp)
    (tmp / "archs_empty.txt").write_text("")
    (tmp / "archs_bad.txt").write_text("not an arch\n")
    (tmp / "afile").write_text("a file where a folder should be")
    (tmp / "data_empty").mkdir()
    (tmp / "data_garbage").mkdir()
    (tmp / "data_garbage" / "data_batch_1").write_bytes(b"")


def _exit0_and(pattern: str) -> Callable[[str, str, Path], bool]:
    return lambda out, err, tmp: re.search(pattern, out + err) is not None


# -- the cases ---------------------------------------------------------------------------------


def cases() -> list[Case]:
    c: list[Case] = []
    add = lambda name, args, **kw: c.append(Case(name, list(args), **kw))  # noqa: E731

    # hwnas search, table strategies: numbers
    for value in ("0", "-5", "abc", "1000000000", "99999999999999999999999", "2.5"):
        add(f"search --budget {value}", [*TABLE[:3], "--budget", value, "--no-zoo"])
    for value in ("-1", "4294967296", "abc", "1e3"):
        add(f"search --seed {value}", [*TABLE, "--seed", value])
    for value in ("0", "-1", "nan", "inf", "-inf", "abc", "0.0001"):
        add(f"search --max-latency {value}", [*TABLE, "--max-latency", value])
    for value in ("0", "-1", "3", "abc"):
        add(f"search --measurement-budget {value}", [*TABLE, "--measurement-budget", value])
    # hwnas search, table strategies: names, files, folders
    add("search --device ''", ["search", "-d", "", "--budget", "5", "--no-zoo"])
    add("search --device unknown", ["search", "-d", "pixel99", "--budget", "5", "--no-zoo"])
    add("search --dataset mnist", [*TABLE, "--dataset", "mnist"])
    add("search --dataset ''", [*TABLE, "--dataset", ""])
    add("search --space unknown", [*TABLE, "--space", "darts"])
    add("search --space missing file", [*TABLE, "--space", "{tmp}/nope.yaml"])
    add("search --strategy unknown", [*TABLE, "--strategy", "annealing"])
    add("search --strategy ''", [*TABLE, "--strategy", ""])
    add("search --objective energy (no table)", [*TABLE, "--objective", "energy"])
    add("search --runtime tvm (recorded device)", [*TABLE, "--runtime", "tvm"])
    add("search --storage typo'd sqlite path",
        [*TABLE, "--storage", "sqlite:////nonexistent-hwnas/deep/studies.db"])  # fmt: skip
    add("search --storage not a URL", [*TABLE, "--storage", "studies.db"])
    add("search --storage unknown scheme", [*TABLE, "--storage", "nosuchdb://x"])
    add("search --storage empty file", [*TABLE, "--storage", "sqlite:///{case}/empty.db"])
    add("search --storage not a database", [*TABLE, "--storage", "sqlite:///{case}/garbage.db"])
    add("search --storage a folder", [*TABLE, "--storage", "sqlite:///{tmp}/data_empty"])
    add("search --storage unreachable postgres",
        [*TABLE, "--storage", "postgresql://u:secret@127.0.0.1:1/db"])  # fmt: skip
    add("search --out under a file", [*TABLE, "--out", "{tmp}/afile/run"])
    add("search --out /dev/null/x", [*TABLE, "--out", "/dev/null/x"])
    add("search --artifact-dir under a file", [*TABLE, "--artifact-dir", "{tmp}/afile/a"])
    add("search --predictor unknown", [*TABLE, "--predictor", "nonexistent"])
    add("search --predictor missing path", [*TABLE, "--predictor", "{tmp}/nope/"])
    for name in ("missing_key", "wrong_shape", "nan_weights", "not_a_zip", "card_garbage"):
        add(f"search --predictor weights: {name}",
            [*TABLE, "--predictor", f"{{tmp}}/predictors/{name}"])  # fmt: skip
    # supernet options given to a table search (ignored today)
    add("table search --epochs 0", [*TABLE, "--epochs", "0"])
    add("table search --epochs 3", [*TABLE, "--epochs", "3"])
    add("table search --batch-size 0", [*TABLE, "--batch-size", "0"])
    add("table search --finetune-epochs 5", [*TABLE, "--finetune-epochs", "5"])
    add("table search --latency-target 5", [*TABLE, "--latency-target", "5"])
    add("table search --latency-weight 1", [*TABLE, "--latency-weight", "1"])
    add("table search --set lr=0.1", [*TABLE, "--set", "lr=0.1"])
    add("table search --data digits", [*TABLE, "--data", "digits"])
    add("table search --nproc 2", [*TABLE, "--nproc", "2"])
    add("table search --train-zoo --epochs 0", [*TABLE[:-1], "--train-zoo", "--epochs", "0"])

    # hwnas search, supernet strategies
    for setting in (
        "lr=nan", "lr=inf", "lr=1e308", "lr=0", "arch_lr=nan", "momentum=2", "weight_decay=-1",
        "finetune_lr=nan", "hw_strength=nan", "hw_strength=inf", "channels=0", "channels=100000",
        "cells=1000", "limit=-1", "threads=0", "threads=100000", "image_size=100000",
        "data_seed=-1", "torch_device=quantum", "noequals", "=5", "lr=", "tau_max=nan",
        "grad_clip=inf",
    ):  # fmt: skip
        add(f"supernet --set {setting}", [*SUPERNET, "--set", setting])
    add(
        "supernet --set width=1e9 (fbnet)",
        ["search", "-d", "pixel3", "--strategy", "fbnet", "--set", "width=1e9", "--no-zoo"],
    )
    add(
        "supernet oneshot --set evolution_trials=0",
        ["search", "-d", "pixel3", "--strategy", "oneshot", "--set", "evolution_trials=0"],
    )
    add(
        "supernet oneshot --set population=0",
        ["search", "-d", "pixel3", "--strategy", "oneshot", "--set", "population=0"],
    )
    for option, value in (
        ("--epochs", "-1"), ("--epochs", "1000000000"), ("--batch-size", "1000000000"),
        ("--finetune-epochs", "1000000000"), ("--latency-weight", "nan"),
        ("--latency-weight", "inf"), ("--latency-target", "nan"), ("--latency-target", "inf"),
        ("--nproc", "0"), ("--nproc", "-1"), ("--seed", "-1"),
    ):  # fmt: skip
        add(f"supernet {option} {value}", [*SUPERNET, option, value])
    add("supernet --data missing folder", [*SUPERNET, "--data", "{tmp}/nope"])
    add("supernet --data digitz (a typo)", [*SUPERNET, "--data", "digitz"])
    add(
        "supernet --latency-target above --max-latency",
        [*SUPERNET, "--latency-target", "6", "--max-latency", "4"],
    )
    add("supernet --data empty folder", [*SUPERNET, "--data", "{tmp}/data_empty"])
    add("supernet --data empty batch file", [*SUPERNET, "--data", "{tmp}/data_garbage"])

    # space files
    for name in SPACE_VARIANTS:
        add(f"space file: {name} (arch)", ["arch", "--space", f"{{tmp}}/space_{name}.yaml", "0"])
    for name in ("width_1e9", "depth_max_1e6", "expand_inf", "kernel_even", "input_huge"):
        add(
            f"space file: {name} (refset export)",
            ["refset", "export", "--space", f"{{tmp}}/space_{name}.yaml", "--out", "{case}/rs"],
        )
    add("space file: ok (control)",
        ["arch", "--space", "{tmp}/space_ok.yaml", "a.d=1 a.out=8 a.0=3/2"],
        expect="ok", check=_exit0_and(r"params"))  # fmt: skip

    # device profiles
    profiles = {"HWNAS_DEVICES_PATH": "{tmp}/profiles"}
    for name in PROFILE_VARIANTS:
        if name == "energy_none":  # no meter, as leaving the key out: measured, no energy
            add("device profile: energy_none (no meter)",
                ["measure", "-d", "p_energy_none", "--arch", SMALL], env=profiles,
                expect="ok", check=_exit0_and(r"1 measured"))  # fmt: skip
            continue
        add(f"device profile: {name}", ["measure", "-d", f"p_{name}", "--arch", SMALL],
            env=profiles)  # fmt: skip

    # hwnas measure
    for name, label in (
        ("huge", "1x3x100000x100000"), ("zero", "zero-size input"), ("dynamic", "dynamic height"),
        ("batch_1e9", "batch 1e9"), ("empty", "empty file"), ("garbage", "garbage"),
        ("nope", "missing"),
    ):  # fmt: skip
        add(
            f"measure --onnx {label}",
            ["measure", "-d", "cpu", "--onnx", f"{{tmp}}/onnx/{name}.onnx"],
        )
    add("measure --batch-size 0", ["measure", "-d", "cpu", "--arch", SMALL, "--batch-size", "0"])
    add("measure --batch-size 1e9",
        ["measure", "-d", "cpu", "--arch", SMALL, "--batch-size", "1000000000"])  # fmt: skip
    add("measure --arch garbage", ["measure", "-d", "cpu", "--arch", "garbage"])
    add("measure --archs empty file", ["measure", "-d", "cpu", "--archs", "{tmp}/archs_empty.txt"])
    add("measure --archs bad line", ["measure", "-d", "cpu", "--archs", "{tmp}/archs_bad.txt"])
    add("measure nothing to measure", ["measure", "-d", "cpu"])
    add("measure --trials -1", ["measure", "-d", "cpu", "--arch", SMALL, "--trials", "-1"])
    add("measure --tracker no port",
        ["measure", "-d", "rpc", "--arch", SMALL, "--tracker", "host"])  # fmt: skip
    add(
        "measure --target garbage",
        ["measure", "-d", "cpu", "--runtime", "tvm", "--arch", SMALL, "--target", "{{{"],
    )
    add("measure --store empty file",
        ["measure", "-d", "cpu", "--arch", SMALL, "--store", "{case}/empty.db"])  # fmt: skip
    add("measure --store under a file",
        ["measure", "-d", "cpu", "--arch", SMALL, "--store", "{tmp}/afile/m.db"])  # fmt: skip
    add("measure -d pixel3 (recorded: read from its table)",
        ["measure", "-d", "pixel3", "--arch", SMALL], expect="ok",
        check=_exit0_and(r"recorded"))  # fmt: skip

    # calibration files
    for name in ("1e308", "nan", "inf", "negative", "zero", "text", "empty", "one_row",
                 "no_latency_column", "unknown_arch", "binary"):  # fmt: skip
        add(f"predict --calibration {name}",
            ["predict", "--calibration", f"{{tmp}}/cal_{name}.csv", "--arch", ARCH])  # fmt: skip
    for name in ("1e308", "nan", "negative", "empty"):
        add(f"measure import {name}",
            ["measure", "import", "-d", "myboard", f"{{tmp}}/cal_{name}.csv"])  # fmt: skip
    add("predict --calibration good (control)",
        ["predict", "--calibration", "{tmp}/cal_good.csv", "--arch", ARCH],
        expect="ok", check=_exit0_and(r"\d+\.\d+"))  # fmt: skip
    for name in ("missing_key", "wrong_shape", "nan_weights", "not_a_zip"):
        add(f"predict --predictor weights: {name}",
            ["predict", "-d", "pixel3", "--predictor", f"{{tmp}}/predictors/{name}",
             "--arch", ARCH])  # fmt: skip
    add("predict --onnx 1x3x100000x100000 (graph features only: nothing allocated)",
        ["predict", "-d", "pixel3", "--onnx", "{tmp}/onnx/huge.onnx"], expect="ok",
        check=_exit0_and(r"\d+\.\d+"))  # fmt: skip
    add("predict --onnx 1x3x100000x100000 on a live device (its kernels are read from a run)",
        ["predict", "-d", "cpu", "--onnx", "{tmp}/onnx/huge.onnx"])  # fmt: skip
    add("predict --metric energy (no energy table)",
        ["predict", "-d", "pixel3", "--metric", "energy_mj", "--arch", ARCH])  # fmt: skip

    # hwnas dashboard
    for port in ("70000", "-1", "0", "abc"):
        add(f"dashboard --port {port}", ["dashboard", "--port", port], timeout=30)
    add("dashboard --port in use", ["dashboard", "--port", "{port}"], timeout=30)
    add("dashboard --storage empty file",
        ["dashboard", "--storage", "sqlite:///{case}/empty.db"], timeout=30)  # fmt: skip

    # hwnas arch, train, predictor, zoo, runs, refset
    add("arch -1", ["arch", "-1"])
    add("arch ''", ["arch", ""])
    add("arch '|'", ["arch", "|"])
    add("arch --onnx under a file", ["arch", ARCH, "--onnx", "{tmp}/afile/x.onnx"])
    for option, value in (
        ("--epochs", "0"), ("--epochs", "-1"), ("--lr", "nan"), ("--lr", "0"), ("--lr", "inf"),
        ("--batch-size", "0"), ("--limit", "0"), ("--limit", "-5"), ("--threads", "0"),
        ("--threads", "100000"), ("--seed", "-1"),
    ):  # fmt: skip
        add(f"train {option} {value}",
            ["train", SMALL, "--data", "digits", option, value, "--out", "{case}/t"])  # fmt: skip
    add("train --data missing", ["train", SMALL, "--data", "{tmp}/nope"])
    for option, value in (("--steps", "0"), ("--steps", "-1"), ("--seed", "-1"),
                          ("--devices", "nope"), ("--name", "")):  # fmt: skip
        add(f"predictor train {option} {value}",
            ["predictor", "train", "--space", "nasbench201", "--devices", "pixel3,raspi4",
             "--name", "x", "--root", "{case}/pred", option, value])  # fmt: skip
    add("predictor eval unknown", ["predictor", "eval", "nonexistent"])
    add("zoo show missing", ["zoo", "show", "{tmp}/nope"])
    add("zoo list missing", ["zoo", "list", "{tmp}/nope"])
    add("zoo verify missing", ["zoo", "verify", "{tmp}/nope"])
    add("runs show unknown study", ["runs", "show", "nope"])
    add(
        "runs list --storage empty file", ["runs", "list", "--storage", "sqlite:///{case}/empty.db"]
    )
    add("refset export --out under a file", ["refset", "export", "--out", "{tmp}/afile/x"])
    add("refset measure recorded device (read from its table)",
        ["refset", "measure", "-d", "pixel3", "--out", "{case}/r"], expect="ok",
        check=lambda out, err, tmp: "calibration.csv" in out + err)  # fmt: skip
    add("devices --store not a database", ["devices", "--store", "{case}/garbage.db"])
    return c


# -- running and classifying -------------------------------------------------------------------


def classify(case: Case, rc: int | None, out: str, err: str, tmp: Path) -> str:
    if rc is None:
        return "hang"
    if "Traceback (most recent call last)" in out + err:
        return "traceback"
    if rc == 0:
        if case.expect == "ok" and (case.check is None or case.check(out, err, tmp)):
            return "clean"
        return "silently wrong"
    if case.expect == "ok":
        return "unclear"
    errors = [line for line in err.splitlines() if re.match(r"\s*error:", line, re.I)]
    if rc > 0 and len(errors) == 1 and "Usage:" not in err:
        return "clean"
    return "unclear"


def _limit(memory_gb: float) -> Callable[[], None]:
    def limit() -> None:
        import resource

        size = int(memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    return limit


def run_case(case: Case, base: Path, timeout: float, port: int, memory_gb: float = 6.0) -> dict:
    tmp = base / "fixtures"
    work = Path(tempfile.mkdtemp(prefix="case-", dir=base))
    (work / "empty.db").write_bytes(b"")  # files a case may change: one of each per case
    (work / "garbage.db").write_text("not a database\n" * 20)
    fill = lambda s: (  # noqa: E731
        s.replace("{tmp}", str(tmp)).replace("{case}", str(work)).replace("{port}", str(port))
    )
    env = {**os.environ, "HWNAS_HOME": str(work / "home"), "COLUMNS": "120"}
    env.update({k: fill(v) for k, v in case.env.items()})
    args = [fill(a) for a in case.args]
    started = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwnas", *args],
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_limit(memory_gb),
    )
    try:
        out, err = proc.communicate(timeout=case.timeout or timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        rc = None
    verdict = classify(case, rc, out, err, tmp)
    shutil.rmtree(work, ignore_errors=True)
    return {
        "name": case.name,
        "args": args,
        "verdict": verdict,
        "rc": rc,
        "seconds": round(time.time() - started, 1),
        "tail": (err.strip().splitlines() or [""])[-3:] + (out.strip().splitlines() or [""])[-2:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--memory-gb", type=float, default=6.0, help="address space of each case")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()
    selected = [k for k in cases() if a.only is None or a.only in k.name]
    if a.list:
        for k in selected:
            print(f"{k.name}: hwnas {' '.join(k.args)}")
        print(f"{len(selected)} cases")
        return 0
    base = Path(tempfile.mkdtemp(prefix="hwnas-battery-"))
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        (base / "fixtures").mkdir()
        fixtures(base / "fixtures")
        started = time.time()
        with ThreadPoolExecutor(a.jobs) as pool:
            results = list(
                pool.map(
                    lambda k: run_case(k, base, a.timeout, busy.getsockname()[1], a.memory_gb),
                    selected,
                )
            )
    finally:
        busy.close()
        shutil.rmtree(base, ignore_errors=True)
    counts = {v: 0 for v in ("clean", "traceback", "hang", "silently wrong", "unclear")}
    for r in results:
        counts[r["verdict"]] += 1
    for r in results:
        if r["verdict"] != "clean":
            print(f"[{r['verdict']}] {r['name']}: hwnas {' '.join(r['args'])} (exit {r['rc']})")
            for line in r["tail"]:
                if line:
                    print(f"    {line[:200]}")
    print(
        f"{len(results)} cases in {time.time() - started:.0f} s (load {os.getloadavg()[0]:.1f}): "
        + ", ".join(f"{n} {k}" for k, n in counts.items())
    )
    if a.json:
        a.json.write_text(json.dumps({"counts": counts, "cases": results}, indent=1))
    return 0 if counts["clean"] == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
