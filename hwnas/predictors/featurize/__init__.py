"""Architecture features per search space, for predictors.

A featurizer turns architectures of its space into three arrays, all computed without building
or exporting a network:

- ``encoding``: the space's one-hot encoding of its choices (:meth:`SearchSpace.encode`);
- ``structural``: small non-negative counts that latency is additive in (operations by type,
  operations on live paths, ...), named by ``structural_names``;
- ``graph``: the universal graph features of :mod:`hwnas.predictors.graph`, computed
  analytically so that they equal what :func:`hwnas.predictors.graph.onnx_graph_features` reads
  from the exported ONNX model (tests check this on samples of every space).

Featurizers are found in :data:`FEATURIZERS` by the space's ``featurizer_name`` (its own name;
``declared`` for every declared space, whose graph features are read from each layer's ONNX
export: :mod:`hwnas.predictors.featurize.declared`; ``module`` for spaces made from a PyTorch
module, read from each subnet's export: :mod:`hwnas.predictors.featurize.module`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import cache

import numpy as np

from hwnas.registry import Registry
from hwnas.spaces import Arch, SearchSpace, get_space

FEATURIZERS: Registry = Registry("space featurizer")
FEATURIZERS.register("nasbench201", "hwnas.predictors.featurize.nasbench201:NasBench201Featurizer")
FEATURIZERS.register("fbnet", "hwnas.predictors.featurize.fbnet:FBNetFeaturizer")
FEATURIZERS.register("ofa", "hwnas.predictors.featurize.ofa:OFAFeaturizer")
FEATURIZERS.register("declared", "hwnas.predictors.featurize.declared:DeclaredFeaturizer")
FEATURIZERS.register("module", "hwnas.predictors.featurize.module:ModuleFeaturizer")


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

    @abstractmethod
    def graph(self, archs: Sequence[Arch]) -> np.ndarray:
        """Graph features at batch 1 for :attr:`dataset`, shape (n, len(GRAPH_COLUMNS))."""

    def flops(self, archs: Sequence[Arch]) -> np.ndarray:
        """Multiply-accumulates of the PyTorch network at batch 1 (the FLOPs of HW-NAS
        papers), shape (n,). Default: those of the exported graph."""
        from hwnas.predictors.graph import COLUMN

        g = self.graph(archs)
        return g[:, [i for c, i in COLUMN.items() if c.startswith("macs_")]].sum(1)


@cache
def get_featurizer(space: str) -> Featurizer:
    """The featurizer of space ``space`` (one per process).

    Raises:
        UnknownNameError: no featurizer for that space.
    """
    sp = get_space(space)
    return FEATURIZERS.get(sp.featurizer_name)(sp)
