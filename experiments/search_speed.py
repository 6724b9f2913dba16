"""How long `hwnas search` takes beside the plain Optuna loop a user would write.

Runs, as subprocesses and interleaved (the order alternates from one repeat to the next, so a
busy machine slows both alike), for --repeats rounds:

- **plain**: a 30-line script (embedded below, written to a temporary folder) that loads the
  NAS-Bench-201 CIFAR-100 accuracies and the device's recorded latencies from the shipped
  ``.csv.gz`` files with the standard library, then runs Optuna's NSGA-II (population 20, seed
  0) on an in-memory study until --budget distinct architectures are scored (a repeated
  architecture is told PRUNED and not counted), as hwnas counts them.
- **hwnas**: ``hwnas search --device D --no-zoo --budget B`` through its CLI, with the default
  strategy and the default study storage (a SQLite file) in a fresh ``HWNAS_HOME``.
- **hwnas nsga2**: the same with ``--strategy nsga2``, the plain loop's own sampler: the
  pipeline's overhead alone (the default strategy, frontier, spends about a second more on
  choosing what to query, for a far better front at the same budget).
- **exact**: ``hwnas search --device D --no-zoo --strategy exact`` (the exact Pareto front of
  the tables, through the same pipeline), same conditions.
- ``hwnas --help`` and ``hwnas search --help``: the start-up every CLI command pays.

It prints the median wall time of each (seconds), its CPU time (user + system, seconds: less
sensitive to other processes than wall time), per-trial milliseconds of the search loop alone
(the plain script times its loop itself; for hwnas see the breakdown), and the ratios to the
plain loop (the CPU time of hwnas includes the child process that draws pareto.png while the
search runs, :mod:`hwnas.engine.plot`); then where an hwnas search spends its time, from a run
of the same command in a wrapper that times the phases of :mod:`hwnas.jobs.table` (import of
the CLI, ``prepare``: names, device, tables and storage; ``trials``:
:func:`~hwnas.engine.loop.run_search`; ``report``: pareto.csv, pareto.png, summary.json).

Goal (issue 12): hwnas within 3x the wall time of the plain loop, judged like for like (the
``hwnas nsga2`` row); the default strategy's ratio is printed beside it.

    python experiments/search_speed.py [--repeats 5] [--budget 300] [--device pixel3]
        [--json out.json] [--no-exact]

Timings on a shared machine are noisy: read the medians, and re-run on a quiet machine for
numbers to quote. Whatever else runs slows both columns alike only roughly.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PLAIN = '''
"""The plain Optuna NSGA-II loop over the shipped tables, as a user would write it."""
import csv, gzip, json, sys, time

import numpy as np
import optuna

root, device, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
t0 = time.perf_counter()
with gzip.open(f"{root}/search_spaces/nasbench201/accuracy.csv.gz", "rt") as fh:
    rows = list(csv.DictReader(fh))
index = {r["arch"]: int(r["index"]) for r in rows}
accuracy = np.array([float(r["cifar100_test_200ep"]) for r in rows])
with gzip.open(f"{root}/devices/recorded/nasbench201_latency_ms.csv.gz", "rt") as fh:
    latency = np.array([float(r[device]) for r in csv.DictReader(fh)])
ops = ["none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3"]
t1 = time.perf_counter()
optuna.logging.set_verbosity(optuna.logging.WARNING)
sampler = optuna.samplers.NSGAIISampler(population_size=20, seed=0)
study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
seen = set()
while len(seen) < budget:
    trial = study.ask()
    o = [trial.suggest_categorical(f"{j}<-{i}", ops) for j in range(1, 4) for i in range(j)]
    arch = f"|{o[0]}~0|+|{o[1]}~0|{o[2]}~1|+|{o[3]}~0|{o[4]}~1|{o[5]}~2|"
    if arch in seen:
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        continue
    seen.add(arch)
    study.tell(trial, [accuracy[index[arch]], latency[index[arch]]])
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "trials_s": t2 - t1, "trials": len(study.trials)}))
'''

PHASES = """
import json, sys, time
t0 = time.perf_counter()
import hwnas.cli as cli
import hwnas.jobs.table as run
times = {"import": time.perf_counter() - t0}
def timed(name, key):
    inner = getattr(run, name)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            times[key] = times.get(key, 0.0) + time.perf_counter() - start
    setattr(run, name, wrapper)
timed("prepare", "prepare")
timed("run_search", "trials")
timed("search", "search")
code = cli.main(sys.argv[1:])
times["report"] = times.pop("search") - times["trials"]
times["total"] = time.perf_counter() - t0
print("PHASES " + json.dumps(times), file=sys.stderr)
sys.exit(code)
"""


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    """Run ``cmd``; its wall and CPU seconds, stdout and stderr. Raises on a failed command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "stdout": proc.stdout, "stderr": proc.stderr}


def hwnas_env(home: Path) -> dict[str, str]:
    return {**os.environ, "HWNAS_HOME": str(home), "COLUMNS": "120"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--budget", type=int, default=300)
    parser.add_argument("--device", default="pixel3")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--no-exact", action="store_true", help="skip --strategy exact")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="hwnas-speed-"))
    (work / "plain.py").write_text(PLAIN)
    (work / "phases.py").write_text(PHASES)
    py = sys.executable
    search = ["search", "--device", args.device, "--no-zoo"]
    runs: dict[str, list[dict]] = {}
    phases: list[dict] = []
    plain_loop: list[dict] = []

    def hwnas(label: str, extra: list[str], r: int) -> None:
        name = label.replace(" ", "-")
        home, out = work / f"{name}-home{r}", work / f"{name}-run{r}"
        cmd = [py, "-m", "hwnas", *search, "--out", str(out), *extra]
        runs.setdefault(label, []).append(run(cmd, hwnas_env(home), work))

    for r in range(args.repeats):
        order = ["plain", "hwnas", "hwnas nsga2"] + ([] if args.no_exact else ["exact"])
        for label in order if r % 2 == 0 else order[::-1]:
            if label == "plain":
                res = run([py, str(work / "plain.py"), str(ROOT), args.device, str(args.budget)])
                plain_loop.append(json.loads(res["stdout"].strip().splitlines()[-1]))
                runs.setdefault("plain", []).append(res)
            elif label == "hwnas":
                hwnas("hwnas", ["--budget", str(args.budget)], r)
            elif label == "hwnas nsga2":
                hwnas("hwnas nsga2", ["--budget", str(args.budget), "--strategy", "nsga2"], r)
            else:
                hwnas("exact", ["--strategy", "exact"], r)
        for label, cmd in (("hwnas --help", ["--help"]), ("hwnas search --help", search[:1])):
            extra = ["--help"] if cmd == search[:1] else []
            res = run([py, "-m", "hwnas", *cmd, *extra], hwnas_env(work / "help-home"), work)
            runs.setdefault(label, []).append(res)
        home, out = work / f"phases-home{r}", work / f"phases-run{r}"
        cmd = [py, str(work / "phases.py"), *search, "--budget", str(args.budget), "--out"]
        res = run([*cmd, str(out)], hwnas_env(home), work)
        line = [x for x in res["stderr"].splitlines() if x.startswith("PHASES ")][-1]
        phases.append(json.loads(line.removeprefix("PHASES ")))

    def median(label: str, key: str) -> float:
        return statistics.median(x[key] for x in runs[label])

    plain_wall, plain_cpu = median("plain", "wall"), median("plain", "cpu")
    plain_trials_ms = statistics.median(x["trials_s"] for x in plain_loop) / args.budget * 1e3
    hwnas_trials_ms = statistics.median(p["trials"] for p in phases) / args.budget * 1e3
    print(
        f"search speed: {args.device}, budget {args.budget}, {args.repeats} interleaved "
        f"repeats (medians); {os.cpu_count()} CPUs, load average "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    header = f"{'command':<22}{'wall s':>9}{'cpu s':>9}{'trial ms':>10}{'wall ratio':>12}"
    header += f"{'cpu ratio':>11}"
    print(header)
    print("-" * len(header))
    for label in runs:
        wall, cpu = median(label, "wall"), median(label, "cpu")
        per_trial = {"plain": plain_trials_ms, "hwnas": hwnas_trials_ms}.get(label)
        trial = f"{per_trial:.2f}" if per_trial is not None else "-"
        ours = label in ("hwnas", "hwnas nsga2", "exact")
        ratio = f"{wall / plain_wall:.2f}x" if ours else "-"
        cpu_ratio = f"{cpu / plain_cpu:.2f}x" if ours else "-"
        print(f"{label:<22}{wall:>9.2f}{cpu:>9.2f}{trial:>10}{ratio:>12}{cpu_ratio:>11}")
    print()
    print("hwnas search, phases (median seconds; a wrapper times hwnas.jobs.table's functions):")
    keys = ["import", "prepare", "trials", "report", "total"]
    print("  " + "".join(f"{k:>10}" for k in keys))
    print("  " + "".join(f"{statistics.median(p[k] for p in phases):>10.2f}" for k in keys))
    load = statistics.median(x["load_s"] for x in plain_loop)
    print(f"plain loop: tables loaded in {load:.2f} s, {plain_trials_ms:.2f} ms per trial")
    goal = median("hwnas nsga2", "wall") / plain_wall
    default = median("hwnas", "wall") / plain_wall
    print(f"goal: hwnas (nsga2, the plain loop's sampler) within 3x the plain loop's wall "
          f"time: {goal:.2f}x ({'met' if goal <= 3 else 'missed'}); default strategy: "
          f"{default:.2f}x")  # fmt: skip
    if args.json:
        summary = {
            label: {k: [x[k] for x in v] for k in ("wall", "cpu")} for label, v in runs.items()
        }
        args.json.write_text(json.dumps({"runs": summary, "phases": phases}, indent=2))


if __name__ == "__main__":
    main()
