"""Fit of the supernet cost table of declared spaces: depth- and resolution-aware terms
(:mod:`hwnas.spaces.declared.terms`) against plain additive indicators.

For each space, the MFLOPs of 120 random subnets of its CPU supernet (``width=0.25``, 16x16
images) are fitted by :func:`hwnas.supernet.cost.fit_lut` with each term structure; the table
prints the held-out R^2 and Spearman rho (20% of the subnets, as ``fit_lut`` reports them).

    python experiments/declared_cost_terms.py
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from hwnas.export import count_params_flops
from hwnas.supernet import build_supernet, cost

SPACES = ("mobilenetv4", "vit", "ofa_declared")


def main() -> None:
    # no options: --help prints the description instead of running the benchmark
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    torch.set_num_threads(1)
    print("| space | terms | held-out R^2 | held-out Spearman rho |")
    print("|---|---|---|---|")
    declared = cost.lut_terms
    for name in SPACES:
        net = build_supernet(name, 10, (3, 16, 16), {"width": 0.25})
        archs = net.space.sample(np.random.default_rng(0), 120)
        mflops = np.array(
            [count_params_flops(net.extract(a), (1, *net.input_shape(a)))[1] / 1e6 for a in archs]
        )
        for label, terms in (
            ("declared (depth/resolution-aware)", declared),
            ("additive", lambda space, pairs=0: cost.additive_terms(space)),
        ):
            cost.lut_terms = terms
            try:
                fit = cost.fit_lut(net.space, archs, mflops, "mflops", "flops").fit
            finally:
                cost.lut_terms = declared
            print(f"| {name} | {label} | {fit['r2']:.3f} | {fit['spearman_rho']:.3f} |")


if __name__ == "__main__":
    main()
