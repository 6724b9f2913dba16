"""The lookup-table terms of a declared space (torch-free): what a supernet's cost model is
fitted with (:func:`hwnas.supernet.cost.lut_terms`); the space declares them
(:class:`hwnas.spaces.CostTermsSpace`).

One indicator per candidate of every decision, as FBNet's per-block table, with two factors
where the network says a decision counts less: a layer's decisions are multiplied by
``1[stage depth > position]`` (a layer past its stage's depth costs nothing), and, in a space
with a resolution decision, every decision but the resolution by ``(r / r_max)^2`` (a layer's
cost scales with the pixels it processes), as the OFA terms do.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def declared_terms(space: Any) -> list[tuple[tuple[int, np.ndarray], ...]]:
    """The terms of :class:`hwnas.supernet.cost.MultilinearLUT` for a declared space."""
    decisions = space.decisions
    index = {d.key: i for i, d in enumerate(decisions)}
    r = index.get("r")
    r2 = None
    if r is not None:
        res = np.asarray(decisions[r].values, dtype=np.float64)
        r2 = (res / res.max()) ** 2
    terms = []
    for i, d in enumerate(decisions):
        extra = []
        if r is not None and i != r:
            extra.append((r, r2))
        if d.part == "stage" and d.position >= 0:
            st = space.spec.stages[d.index]
            depth = index.get(f"{st.name}.d")
            if depth is not None:
                g = np.array([1.0 if v > d.position else 0.0 for v in decisions[depth].values])
                if not g.all():
                    extra.append((depth, g))
        for c in range(len(d.values)):
            terms.append(((i, np.eye(len(d.values))[c]), *extra))
    return terms
