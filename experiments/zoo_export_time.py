"""Time README command 1 (`hwnas search --device pixel3`) and the rerun of the same command
(which resumes the finished study: no trial, only the run folder and the zoo) for one or more
source trees, e.g. this checkout against a checkout of main, to show what the zoo costs.

    python experiments/zoo_export_time.py                      # this checkout
    python experiments/zoo_export_time.py --trees . ../main    # before / after, interleaved

Each tree gets a fresh HWNAS_HOME (no measurement store, study or export cache). Printed per
tree and step: wall seconds, CPU seconds of the process (user + sys), the search's own
`elapsed_s` from summary.json, the zoo's share where the tree reports it (`zoo_s`), and whether
torch was imported. Timings on a shared machine are noisy: compare CPU seconds, and run it
where nothing else runs for wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNNER = (
    "import sys, runpy; sys.argv = ['hwnas', *sys.argv[1:]]\n"
    "try:\n"
    "    runpy.run_module('hwnas', run_name='__main__')\n"
    "finally:\n"
    "    sys.stderr.write('\\nTORCH ' + str('torch' in sys.modules) + '\\n')\n"
)


def run(tree: Path, home: Path, out: Path, budget: int) -> dict[str, object]:
    """One `hwnas search --device pixel3` with ``tree`` first on the path."""
    env = {**os.environ, "HWNAS_HOME": str(home), "PYTHONPATH": str(tree.resolve())}
    args = ["search", "--device", "pixel3", "--budget", str(budget), "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, *args],
        env=env,
        capture_output=True,
        text=True,
        cwd=out.parent,
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{tree}: hwnas search failed:\n{proc.stderr[-2000:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {
        "wall_s": wall,
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "elapsed_s": summary.get("elapsed_s"),
        "zoo_s": summary.get("zoo_s"),
        "zoo_models": summary.get("zoo_models"),
        "torch": "TORCH True" in proc.stderr,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(".")])
    parser.add_argument("--budget", type=int, default=300)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="hwnas-zoo-time-"))
    rows = []
    for step in ("first run", "rerun"):
        for i, tree in enumerate(args.trees):
            home, out = root / f"home{i}", root / f"run{i}"
            home.mkdir(exist_ok=True)
            r = run(tree, home, out, args.budget)
            rows.append((str(tree), step, r))
            print(f"{tree} {step}: {r}", file=sys.stderr, flush=True)
    print(f"README command 1 (--budget {args.budget}), fresh HWNAS_HOME per tree")
    print(f"{'tree':<24} {'step':<10} {'wall s':>7} {'CPU s':>7} {'search s':>9} "
          f"{'zoo s':>6} {'models':>6} torch")  # fmt: skip
    for tree, step, r in rows:
        zoo = f"{r['zoo_s']:.1f}" if r["zoo_s"] is not None else "-"
        print(
            f"{tree:<24} {step:<10} {r['wall_s']:7.1f} {r['cpu_s']:7.1f} "
            f"{r['elapsed_s']:9.1f} {zoo:>6} {r['zoo_models']:>6} {r['torch']}"
        )


if __name__ == "__main__":
    main()
