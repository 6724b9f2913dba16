"""Test accuracy of zoo models trained from scratch for several epoch counts (the evidence for
the CPU default of `hwnas train` / `--train-zoo`, hwnas.zoo.train.CPU_EPOCHS).

    hwnas search --device pixel3 --budget 60 --out runs/p60          # a zoo to train
    python experiments/zoo_epochs.py runs/p60/zoo --epochs 5 10 --entries 00 09 10

Trains each chosen entry's architecture with its space's recipe on --data (digits by default)
for each epoch count, in a temporary HWNAS_HOME (nothing is taken from the training cache),
and prints test accuracy (%) and training seconds. One torch thread; seconds on a shared
machine are noisy.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("zoo", type=Path, help="a zoo folder (or one entry)")
    parser.add_argument("--epochs", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--entries", nargs="*", default=None, help="entry name prefixes")
    parser.add_argument("--data", default="digits")
    args = parser.parse_args()
    os.environ["HWNAS_HOME"] = tempfile.mkdtemp(prefix="hwnas-zoo-epochs-")

    from hwnas.spaces import get_space
    from hwnas.zoo import entry_folders, read_entry
    from hwnas.zoo.train import TrainSettings, ZooTrainer

    entries = [read_entry(f) for f in entry_folders(args.zoo)]
    if args.entries:
        entries = [e for e in entries if any(Path(e["folder"]).name.startswith(p)
                                             for p in args.entries)]  # fmt: skip
    rows = []
    for e in entries:
        space = get_space(e["space"])
        arch = space.parse(e["arch"])
        cells = []
        for epochs in args.epochs:
            trainer = ZooTrainer.prepare(
                TrainSettings(data=args.data, epochs=epochs), space, e["benchmark_dataset"]
            )
            t = trainer.train(arch)
            cells.append((t.accuracy, t.training["seconds"]))
            print(f"{Path(e['folder']).name} {epochs} epochs: {t.accuracy:.2f}%", flush=True)
        rows.append((Path(e["folder"]).name, e["arch"], cells))
    print(f"\ntest accuracy % on {args.data} (training seconds), {e['space']} recipe")
    header = "".join(f"{f'{n} epochs':>18}" for n in args.epochs)
    print(f"{'entry':<22}{header}  arch")
    for name, arch, cells in rows:
        line = "".join(f"{acc:>10.2f} ({sec:4.0f} s)" for acc, sec in cells)
        print(f"{name:<22}{line}  {arch}")


if __name__ == "__main__":
    main()
