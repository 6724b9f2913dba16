"""The lookup-table terms of the OFA space (torch-free): what a supernet's cost model
(:class:`hwnas.supernet.cost.MultilinearLUT`) is fitted with; the space declares them
(:class:`hwnas.spaces.CostTermsSpace`)."""

from __future__ import annotations

from typing import Any

import numpy as np


def ofa_terms(space: Any) -> list[tuple[tuple[int, np.ndarray], ...]]:
    """OFA: one indicator per resolution, and per block and (kernel, expansion) pair the term
    1[ks=k] * 1[e=e] * 1[stage depth > position] * (r / r_max)^2."""
    nb, ns, md = space.num_blocks, space.num_stages, space.max_depth
    r_dim = 2 * nb + ns
    res = np.asarray(space.resolutions, dtype=np.float64)
    terms: list[tuple[tuple[int, np.ndarray], ...]] = []
    for c in range(len(res)):
        g = np.zeros(len(res))
        g[c] = 1.0
        terms.append(((r_dim, g),))
    r2 = (res / res.max()) ** 2
    for b in range(nb):
        s, i = divmod(b, md)
        depth_g = np.array([1.0 if d > i else 0.0 for d in space.depths])
        for ki in range(len(space.kernel_sizes)):
            for ei in range(len(space.expand_ratios)):
                gk = np.eye(len(space.kernel_sizes))[ki]
                ge = np.eye(len(space.expand_ratios))[ei]
                term: list[tuple[int, np.ndarray]] = [(b, gk), (nb + b, ge), (r_dim, r2)]
                if not depth_g.all():
                    term.append((2 * nb + s, depth_g))
                terms.append(tuple(term))
    return terms
