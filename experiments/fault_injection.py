"""Kill ``hwnas search`` at seeded random moments and resume it: is the answer the same?

For a recorded device (no measurement runs, so the uninterrupted search is reproducible), this

1. runs ``hwnas search --device D --budget B --no-zoo`` once, uninterrupted, in a fresh
   ``HWNAS_HOME`` (the reference);
2. for each of ``--kills`` kills: in another fresh home, starts the same command in a wrapper
   that sends itself SIGKILL when it is about to score its N-th candidate (N drawn with
   ``random.Random(--seed)`` from 1..B-1; the kill lands between two study writes, so the
   candidates scored since the last write are lost, as with a real crash), checks that it died
   of the signal, then re-runs the plain command to the end;
3. compares each resumed study with the reference: the architectures scored, in trial order,
   the set of them, and the Pareto front (``pareto.csv``: arch, accuracy, cost), and looks for
   temporary files left in the home and the run folder.

``--chain`` kills one search at every drawn count in turn (each rerun killed at the next,
larger count, as in issue 18: 21, 101, 161) before the final rerun.

    python experiments/fault_injection.py [--kills 10] [--budget 300] [--device pixel3]
        [--strategy frontier] [--seed 0] [--chain] [--at 21,101,161]

It prints one line per kill (count, trials lost to the kill, identical or not) and a total;
exit status 1 if any resumed search differs from the reference.
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WRAPPER = r"""
import os, signal, sys
kill_at = int(os.environ["HWNAS_KILL_AT"])
from hwnas.engine import evaluate
scored = [0]
original = evaluate.TableEvaluator.evaluate
def evaluate_then_die(self, arch):
    scored[0] += 1
    if scored[0] == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, arch)
evaluate.TableEvaluator.evaluate = evaluate_then_die
from hwnas.cli import main
sys.exit(main(sys.argv[1:]))
"""


def hwnas(home: Path, args: list[str], kill_at: int | None = None) -> subprocess.CompletedProcess:
    """Run ``hwnas ARGS`` with ``HWNAS_HOME=home`` (in the kill wrapper when ``kill_at``)."""
    env = {**os.environ, "HWNAS_HOME": str(home)}
    if kill_at is None:
        cmd = [sys.executable, "-m", "hwnas", *args]
    else:
        env["HWNAS_KILL_AT"] = str(kill_at)
        cmd = [sys.executable, "-c", WRAPPER, *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def study_archs(home: Path) -> list[str]:
    """The architectures of the COMPLETE trials of the home's one study, by trial number."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{home / 'studies.db'}"
    (name,) = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=name, storage=storage)
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    return [t.user_attrs["arch"] for t in sorted(done, key=lambda t: t.number)]


def front(out: Path) -> list[tuple[str, str, str]]:
    with open(out / "pareto.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    cost = next(k for k in ("latency_ms", "energy_mj") if k in rows[0])
    return [(r["arch"], r["accuracy"], r[cost]) for r in rows]


def leftovers(*folders: Path) -> list[str]:
    """Temporary files or folders (``*.tmp``, ``.zoo.*``, ``*-journal``) under ``folders``."""
    found = []
    for folder in folders:
        for p in folder.rglob("*"):
            if p.name.endswith((".tmp", "-journal")) or p.name.startswith(".zoo."):
                found.append(str(p))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--device", default="pixel3")
    ap.add_argument("--strategy", default=None, help="default: hwnas's default strategy")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    ap.add_argument("--search-seed", type=int, default=0, help="hwnas search --seed")
    ap.add_argument("--chain", action="store_true", help="kill one search at every count")
    ap.add_argument("--at", default=None, help="kill counts instead of random ones: 21,101,161")
    a = ap.parse_args()

    base = ["search", "--device", a.device, "--budget", str(a.budget), "--no-zoo"]
    base += ["--seed", str(a.search_seed), "--study", "faults"]
    if a.strategy:
        base += ["--strategy", a.strategy]
    rng = random.Random(a.seed)
    if a.at:
        counts = [int(c) for c in a.at.split(",")]
    elif a.chain:
        counts = sorted(rng.sample(range(1, a.budget), a.kills))
    else:
        counts = [rng.randrange(1, a.budget) for _ in range(a.kills)]
    print(f"hwnas {' '.join(base)}; kill counts {counts}; load {os.getloadavg()[0]:.2f}")
    bad = 0
    with tempfile.TemporaryDirectory(prefix="hwnas-faults-") as tmp:
        tmp = Path(tmp)
        ref_home, ref_out = tmp / "ref-home", tmp / "ref-out"
        t0 = time.time()
        r = hwnas(ref_home, [*base, "--out", str(ref_out)])
        if r.returncode != 0:
            print(r.stderr)
            return 1
        ref_archs, ref_front = study_archs(ref_home), front(ref_out)
        print(
            f"reference: {len(ref_archs)} architectures scored, {len(ref_front)} front points, "
            f"{time.time() - t0:.1f} s"
        )
        runs = [counts] if a.chain else [[c] for c in counts]
        for k, kills in enumerate(runs):
            home, out = tmp / f"home{k}", tmp / f"out{k}"
            args = [*base, "--out", str(out)]
            held = []
            for count in kills:
                before = len(study_archs(home)) if (home / "studies.db").exists() else 0
                r = hwnas(home, args, kill_at=max(count - before, 1))
                if r.returncode != -signal.SIGKILL:
                    print(f"kill at {count}: the search was not killed (exit {r.returncode})")
                    print(r.stderr[-2000:])
                    bad += 1
                    continue
                held.append(len(study_archs(home)))
            r = hwnas(home, args)
            if r.returncode != 0:
                print(f"kill at {kills}: the rerun failed (exit {r.returncode}): {r.stderr}")
                bad += 1
                continue
            archs, got = study_archs(home), front(out)
            same_order = archs == ref_archs
            same_set = set(archs) == set(ref_archs)
            same_front = got == ref_front
            left = leftovers(home, out)
            ok = same_order and same_set and same_front and not left
            bad += not ok
            lost = ", ".join(f"{c - h}" for c, h in zip(kills, held))
            print(
                f"kill at {','.join(map(str, kills))} (study held {','.join(map(str, held))}; "
                f"lost {lost} unwritten lookups): {'IDENTICAL' if ok else 'DIFFERENT'} "
                f"(same trial order {same_order}, same set {same_set}, front "
                f"{len(got)}/{len(ref_front)} points, same front {same_front}"
                + (f", left over: {left}" if left else "")
                + ")"
            )
    n = len(runs)
    print(f"{n - bad}/{n} resumed searches identical to the uninterrupted run")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
