"""What a search may know of candidates' costs before measuring them.

Cost-aware strategies (``surrogate``) choose which architectures to query by their device cost,
so they need that cost for every candidate up front: a recorded device's table, or a predictor
adapted to the device. The evaluator still obtains each queried architecture's cost through the
device (and the store), so the reported numbers are the device's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from hwnas.devices.base import Device
from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch, SearchSpace


@dataclass
class CostContext:
    """What a cost-aware strategy may know before measuring.

    Attributes:
        space: the search space.
        cost: candidate architectures -> cost of the search objective (ms or mJ), shape (n,);
            None when the device has no cheap cost model.
        latency: candidate architectures -> latency in ms (for a latency limit), or None when
            ``cost`` is the latency.
        max_latency: the latency limit in ms, or None.
        budget: the search budget in accuracy queries.
    """

    space: SearchSpace
    cost: Callable[[Sequence[Arch]], np.ndarray] | None = None
    latency: Callable[[Sequence[Arch]], np.ndarray] | None = None
    max_latency: float | None = None
    budget: int = 300


def table_costs(
    space: SearchSpace, device: Device, metric: str
) -> Callable[[Sequence[Arch]], np.ndarray] | None:
    """Cost lookup from a recorded device's table (NaN for architectures it lacks), or None if
    the device has no table for this space and metric."""
    column = device.table(space.name, metric)
    if column is None:
        return None

    def lookup(archs: Sequence[Arch]) -> np.ndarray:
        out = np.full(len(archs), np.nan)
        for k, arch in enumerate(archs):
            try:
                out[k] = column[space.index(arch)]
            except HwnasError:
                pass
        return out

    return lookup
