"""What :func:`hwnas.elastic` makes searchable in the well-known networks written from their
papers (:mod:`hwnas.known_networks`), and whether their subnets are exact.

For each network (10 classes, a 64x64 input, batch norm statistics randomised as after
training): the decisions by kind (width, kernel, depth) and the depth decisions with their
choices, how many channel groups stay fixed, the smallest subnet's share of the parameters,
and the largest error between the supernet's path of a subnet and the subnet cut out of it
(the smallest and 3 random subnets; 0 means exact), and the full subnet against the model.

    python experiments/elastic_known_networks.py [--side 64]

About 20 seconds on one core.
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    import numpy as np
    import torch
    from rich.console import Console
    from rich.table import Table

    import hwnas
    from hwnas.known_networks import NETWORKS, build_network
    from hwnas.supernet.module import ModuleSupernet

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=64, help="input side (pixels)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    table = Table(title=f"hwnas.elastic on well-known networks ({args.side}x{args.side} input)")
    for col in ("network", "widths", "kernels", "depths", "depth choices", "fixed groups",
                "smallest params", "max |path - cut|", "max |full - model|", "s"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("network", "depth choices") else "right")
    for name in sorted(NETWORKS.names()):
        t0 = time.time()
        model = build_network(name, num_classes=10, side=args.side).eval()
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
        x = torch.randn(2, 3, args.side, args.side)
        space = hwnas.elastic(model, x[:1], name=name)
        kinds = space.describe()["by_kind"]
        depths = [d for d in space.decisions if d.kind == "depth"]
        net = ModuleSupernet(space, 10, (3, args.side, args.side), {}).eval()
        with torch.no_grad():
            full = float((space.subnet(space.largest())(x) - model(x)).abs().max())
            errors = [
                float((net(x, net.path_of(a)) - net.extract(a)(x)).abs().max())
                for a in [space.smallest(), *space.sample(np.random.default_rng(0), 3)]
            ]
            small = net.extract(space.smallest())
        share = sum(p.numel() for p in small.parameters()) / sum(
            p.numel() for p in model.parameters()
        )
        table.add_row(
            name,
            str(kinds.get("width", 0)),
            str(kinds.get("kernel", 0)),
            str(kinds.get("depth", 0)),
            " ".join(f"{d.key}={min(d.values)}-{max(d.values)}" for d in depths) or "-",
            str(len(space.describe()["fixed_widths"])),
            f"{share:.2f}",
            f"{max(errors):.1e}",
            f"{full:.1e}",
            f"{time.time() - t0:.1f}",
        )
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
