"""The featurizer interface (:class:`Featurizer`); the featurizers of each space and their
registry are in :mod:`hwnas.predictors.featurize`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np

from hwnas.spaces import Arch, SearchSpace


class Featurizer(ABC):
    """Features of one space's architectures (two required methods).

    Args:
        space: the search space.
    """

    dataset: str = ""
    """Dataset whose network the features describe (the one recorded latencies were taken on)."""
    structural_names: tuple[str, ...] = ()

    def __init__(self, space: SearchSpace):
        self.space = space

    def encoding(self, archs: Sequence[Arch]) -> np.ndarray:
        """One-hot encoding, shape (n, width), float32."""
        return self.space.encode(archs)

    @abstractmethod
    def structural(self, archs: Sequence[Arch]) -> np.ndarray:
        """Structural counts, shape (n, len(structural_names)), float64, non-negative."""

    merged_names: tuple[str, ...] = ()
    """Names of :meth:`merged`'s columns."""

    def merged(self, archs: Sequence[Arch]) -> np.ndarray:
        """Counts of the operations a runtime that merges identical computations runs, shape
        (n, len(merged_names)), float64: additive costs of the meta head's broad prior family
        only. Default: none."""
        return np.zeros((len(archs), len(self.merged_names)))

    @abstractmethod
    def graph(self, archs: Sequence[Arch]) -> np.ndarray:
        """Graph features at batch 1 for :attr:`dataset`, shape (n, len(GRAPH_COLUMNS))."""

    def flops(self, archs: Sequence[Arch]) -> np.ndarray:
        """Multiply-accumulates of the PyTorch network at batch 1 (the FLOPs of HW-NAS
        papers), shape (n,). Default: those of the exported graph."""
        from hwnas.predictors.graph import COLUMN

        g = self.graph(archs)
        return g[:, [i for c, i in COLUMN.items() if c.startswith("macs_")]].sum(1)
