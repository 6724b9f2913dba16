"""Progress a user can follow in a file or a pipe: plain, whole log lines, never a mangled bar."""

from __future__ import annotations

import io
import re
import time

import pytest
from helpers import hwnas_cli
from rich.console import Console

from hwnas.cli.progress import TerminalReporter, plain_line


def test_piped_search_output_has_whole_lines_without_control_characters(tmp_path):
    out = tmp_path / "run"
    r = hwnas_cli("search", "--device", "pixel3", "--budget", "12", "--out", str(out),
                  env={"COLUMNS": "80"})  # fmt: skip
    assert r.returncode == 0, r.stderr
    text = r.stdout + r.stderr
    assert "…" not in text and "\x1b" not in text
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", text)
    lines = r.stderr.splitlines()
    search = [ln for ln in lines if ln.startswith("search pixel3: ")]
    assert search[0].startswith("search pixel3: 0/12 trials (0%)")
    assert search[-1].startswith("search pixel3: 12/12 trials (100%), done in ")
    assert any("ETA" in ln and "best " in ln for ln in search)
    zoo = [ln for ln in lines if ln.startswith("zoo exporting: ")]
    n = len(list((out / "zoo").iterdir()))
    assert zoo and zoo[-1].startswith(f"zoo exporting: {n}/{n} models (100%), done in ")


def test_hwnas_measure_says_its_progress_model_by_model(tmp_path):
    """`hwnas measure --runtime tvm` left stderr empty for the 3 minutes TVM tuned one cell
    (helper-63): usage.md promises progress for every step that can take more than a couple
    of seconds. Each model is a unit of a "measure" step, on stderr (stdout keeps the table)."""
    r = hwnas_cli("measure", "--device", "pixel3", "--arch", "5", "--arch", "6", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    steps = [ln for ln in r.stderr.splitlines() if ln.startswith("measure on pixel3: ")]
    assert steps[0].startswith("measure on pixel3: 0/2 models (0%)"), r.stderr
    assert steps[-1].startswith("measure on pixel3: 2/2 models (100%), done in "), r.stderr
    assert "measure on" not in r.stdout
    r = hwnas_cli("refset", "measure", "--device", "pixel3", "--out", "rs", cwd=tmp_path)
    assert r.returncode == 0, r.stderr  # refset measure: 32 s in silence on cpu (helper-63)
    steps = [ln for ln in r.stderr.splitlines() if ln.startswith("reference set on pixel3: ")]
    assert steps[-1].startswith("reference set on pixel3: 10/10 networks (100%), done in ")


def test_plain_lines_come_at_each_tenth_and_after_a_silence(monkeypatch):
    import hwnas.cli.progress as progress

    monkeypatch.setattr(progress, "PLAIN_EVERY_S", 0.2)
    buf = io.StringIO()
    reporter = TerminalReporter(Console(file=buf, width=40))  # not a terminal: plain lines
    with reporter.step("train", total=100, unit="steps") as step:
        for i in range(1, 101):
            step.update(i, status=f"loss {1 / i:.3f}")
        step.update(status="slow step")
        time.sleep(1.5)  # no progress: the ticker still says it is alive
    lines = buf.getvalue().splitlines()
    counts = [int(m.group(1)) for ln in lines if (m := re.match(r"train: (\d+)/100", ln))]
    assert counts[:11] == [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100]
    assert sum("slow step" in ln and "ETA" in ln for ln in lines) >= 2
    assert lines[-1].startswith("train: 100/100 steps (100%), done in ")
    assert all(len(ln) > 40 for ln in lines[1:])  # never cut to the console's width


def test_the_eta_of_a_step_whose_units_grow_dearer_is_not_its_mean_rate(monkeypatch):
    """`hwnas search --device samsung_a50 --budget 1500` promised "ETA 0:00:12" 8 s in and
    took 2:14: `frontier` refits its model on every result so far, so a trial costs more the
    more there are, and the mean rate so far promised the rest at the first trials' price. The
    ETA now follows the growth measured between half the units and now; a step of even units
    keeps its mean rate, and one growing cheaper is never promised sooner than at it."""
    from hwnas import progress

    now = [0.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])

    def run(seconds_at, done, total=1000):
        now[0] = 0.0
        step = progress.Reporter().step("search", total)
        for d in range(1, done + 1):
            now[0] = seconds_at(d)
            step.advance()
        return step.eta()

    # elapsed = 0.001 d^2 s: 10 s for the first 100 trials, 1,000 s for all 1,000
    assert run(lambda d: 0.001 * d * d, 100) == pytest.approx(990.0, rel=0.01)
    assert run(lambda d: 0.1 * d, 100) == pytest.approx(90.0, rel=0.01)  # even: 0.1 s each
    assert run(lambda d: 10 * d**0.5, 100) == pytest.approx(900.0, rel=0.01)  # never sooner
    assert run(lambda d: 0.001 * d * d, 1000) == pytest.approx(0.0, abs=1e-9)  # done


def test_a_plain_line_is_printable_ascii():
    class S:
        name, total, unit, done, status, elapsed = "zoo", 3, "", 1, "arch ━ é", 2.0
        stopped = False

        def eta(self):
            return 4.0

    assert plain_line(S()) == "zoo: 1/3 (33%), elapsed 0:00:02 ETA 0:00:04 | arch ? ?"
    assert plain_line(S(), final=True) == "zoo: 1/3 (33%), done in 0:00:02 | arch ? ?"
    S.stopped = True  # left by an error
    assert plain_line(S(), final=True) == "zoo: 1/3 (33%), stopped after 0:00:02 | arch ? ?"


def test_the_progress_best_under_a_latency_limit_is_within_it():
    """`hwnas search --device lab-npu --max-latency 5` (few-shot) showed "best 71.04%" for a
    candidate predicted at 5.58 ms, above the limit, while the final best was 70.73% at 4.63
    ms: the progress line's best now follows the best line's rule, the most accurate within
    the limit."""
    from types import SimpleNamespace

    from hwnas.cli.search import _Progress
    from hwnas.cost_record import CostRecord

    def record(acc, ms):
        return SimpleNamespace(accuracy=acc, costs={"latency_ms": CostRecord("latency_ms", ms,
                                                                           "predicted:x")})

    shown = []
    progress = _Progress(SimpleNamespace(taken=0, reused=0, read=0), None, None, None, True, 5.0)
    progress.step = SimpleNamespace(update=lambda done=None, status=None: shown.append(status))
    for acc, ms in ((60.0, 3.0), (71.04, 5.58), (70.73, 4.63)):
        progress.on_trial(1, record(acc, ms))
    assert [s.split(" | ")[0] for s in shown] == [
        "best 60.00% within 5 ms", "best 60.00% within 5 ms", "best 70.73% within 5 ms"
    ]


def test_the_chance_level_lines_stay_whole_in_a_narrow_pipe(tmp_path):
    """A supernet search piped to a file split "! best is chance-level (... no better than
    guessing; / chance_level in pareto.csv)" and the "not put in the zoo" line at 80 columns
    (the table search's stayed whole): both are printed whole on one line by every search."""
    import io

    from hwnas.cli.render import Console, print_chance_best, print_chance_line

    (tmp_path / "pareto.csv").write_text("arch,chance_level\na,true\nb,false\n")
    out = io.StringIO()
    console = Console(file=out, width=40, emoji=False)
    print_chance_best({"chance_level": True}, 0.1, console)
    print_chance_line(tmp_path / "pareto.csv", console)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and all(len(line) > 100 for line in lines), lines
    assert lines[0].startswith("! best is chance-level") and lines[0].endswith("loosen it")
    assert lines[1].startswith("1 chance-level architecture(s)") and lines[1].endswith(".csv)")


def test_a_chance_level_best_under_a_latency_weight_names_the_weight():
    """DARTS at --latency-weight 0.5 derived a NAS-Bench-201 cell of `none` edges (9% on
    digits) and the line said only that no architecture of the front did better: it names the
    weight now, and what to do; a limit, where given, is the reason named."""
    import io

    from hwnas.cli.render import Console, print_chance_best

    out = io.StringIO()
    console = Console(file=out, width=80, emoji=False)
    print_chance_best({"chance_level": True}, None, console, weight=0.5)
    print_chance_best({"chance_level": True}, None, console, weight=None)
    print_chance_best({"chance_level": True}, 4.0, console, weight=0.5)
    weight, plain, limit = out.getvalue().splitlines()
    assert "--latency-weight 0.5" in weight and "lower it or give a latency target" in weight
    assert plain.endswith("no architecture of the front does better")
    assert limit.endswith("no architecture within --max-latency 4 ms does better; loosen it")
