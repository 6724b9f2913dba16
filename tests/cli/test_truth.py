"""What a run says is true (issue 23): on every pipeline (table, few-shot, supernet) the
summary's ``best`` is ``best_rule``'s answer over the front written to ``pareto.csv``, with the
dataset actually used, the objective's unit and the source of its accuracy; piped output is
plain lines. Through the CLI, as a user types it."""

from __future__ import annotations

import csv
import json
import re

import pytest
from helpers import hwnas_main

UNITS = {"latency_ms": "ms", "energy_mj": "mJ"}


def _front(out):
    with open(out / "pareto.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def _check_best(out, summary, metric):
    """``best`` is the rule's answer over pareto.csv (most accurate, then cheapest), and
    the summary names the objective's unit and the accuracy's source."""
    rows = _front(out)
    assert metric in rows[0] and summary["best_rule"] == (
        "most accurate architecture on the Pareto front"
    )
    want = max(rows, key=lambda r: (float(r["accuracy"]), -float(r[metric])))
    best = summary["best"]
    assert best["arch"] == want["arch"]
    assert best["accuracy"] == pytest.approx(float(want["accuracy"]), abs=1e-3)
    assert best[metric] == pytest.approx(float(want[metric]), rel=1e-5)
    assert summary["objective"] == {"metric": metric, "unit": UNITS[metric]}
    assert summary["units"]["accuracy"] == "%"
    source = best.get("accuracy_source") or best.get("accuracy_label")
    assert source and source == want["accuracy_source"]
    return best


def _piped_clean(text):
    """Piped output: no ellipsis of a cut bar, no control characters (ESC, carriage return)."""
    assert "\u2026" not in text and "\x1b" not in text and "\r" not in text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text)


def test_table_energy_search_reports_the_fronts_best_in_mj(tmp_path):
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pi5_onnx", "--objective", "energy", "--budget", "8",
                  "--no-zoo", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    _piped_clean(r.stdout + r.stderr)
    summary = json.loads((out / "summary.json").read_text())
    best = _check_best(out, summary, "energy_mj")
    assert summary["settings"]["dataset"] == "cifar100"
    assert best["accuracy_source"].startswith("nasbench201-table:cifar100")
    assert best["energy_mj_source"].startswith("recorded:")
    # the CLI's best line: the accuracy's source, the objective in mJ first
    line = next(s for s in r.stdout.splitlines() if s.startswith("best ("))
    assert f"{best['energy_mj']:.3f} mJ  (latency " in line and "accuracy_source" not in line
    assert best["accuracy_source"] in line
    assert "Pareto front: cifar100 accuracy vs energy on pi5_onnx" in r.stdout


def test_a_zoo_card_puts_the_searched_metric_first():
    """The card's title shows the first of the search device's costs: the searched one."""
    from hwnas.cost_record import CostRecord
    from hwnas.engine.loop import TrialRecord
    from hwnas.zoo.write import device_costs

    costs = {m: CostRecord(m, v, "test") for m, v in (("latency_ms", 4.0), ("energy_mj", 6.0))}
    r = TrialRecord(0, "a", 70.0, costs, {})
    assert list(device_costs(r, "pi5", {}, "energy_mj")["pi5"]) == ["energy_mj", "latency_ms"]
    assert list(device_costs(r, "pi5", {}, "latency_ms")["pi5"]) == ["latency_ms", "energy_mj"]


def test_fewshot_search_reports_the_fronts_best(tmp_path):
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pixel3", "--measurement-budget", "6", "--budget", "10",
                  "--no-zoo", "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    _piped_clean(r.stdout + r.stderr)
    summary = json.loads((out / "summary.json").read_text())
    best = _check_best(out, summary, "latency_ms")
    assert summary["settings"]["dataset"] == "cifar100" and summary["device_measurements"] <= 6
    assert best["latency_ms_source"]  # measured (verified) or predicted, said which
    # calibration and verification are steps: plain lines, each ending with "done in"
    err = r.stderr.splitlines()
    assert any(s.startswith("few-shot search: predictor nasbench201 (") for s in err)
    for step in ("calibration on pixel3: ", "verification on pixel3: "):
        assert any(s.startswith(step) and ", done in " in s for s in err), step
    # without --max-latency nothing verifies the best: the line says no more (it ended "; best")
    line = next(s for s in r.stdout.splitlines() if s.startswith("costs predicted by "))
    assert line.endswith(f"{summary['device_measurements']} device measurements (budget 6)")
    limited = tmp_path / "limited"
    r = hwnas_main("search", "--device", "pixel3", "--measurement-budget", "6", "--budget", "10",
                  "--max-latency", "20", "--no-zoo", "--out", str(limited))  # fmt: skip
    assert r.returncode == 0, r.stderr
    verified = json.loads((limited / "summary.json").read_text())["best_verified"]
    line = next(s for s in r.stdout.splitlines() if s.startswith("costs predicted by "))
    assert line.endswith("; best verified" if verified else "; best NOT verified"), line


def test_an_options_help_names_only_options_its_command_has():
    """``hwnas predict --help`` said "the batch axis takes --batch-size", an option predict
    does not have: every ``--option`` an option's help names is one of its command's (another
    program's, in backticks as `torchrun --nnodes ...`, excepted)."""
    import click

    from hwnas.cli import app

    def commands(cmd, path):
        yield path, cmd
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from commands(sub, f"{path} {name}")

    wrong, seen = [], 0
    for path, cmd in commands(app, "hwnas"):
        opts = {o for p in cmd.params for o in [*p.opts, *getattr(p, "secondary_opts", [])]}
        for p in cmd.params:
            text = re.sub(r"`[^`]*`", "", getattr(p, "help", None) or "")
            for named in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text):
                seen += 1
                if named not in opts:
                    wrong.append(f"{path} {p.opts[0]}: {named}")
    assert seen > 20 and not wrong, wrong
    predict = app.commands["predict"]
    dim = next(p for p in predict.params if p.name == "dims")
    assert isinstance(dim, click.Option) and "--batch-size" not in dim.help
