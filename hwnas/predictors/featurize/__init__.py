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

from functools import cache

from hwnas.predictors.featurize.base import Featurizer
from hwnas.registry import Registry
from hwnas.spaces import get_space

__all__ = ["FEATURIZERS", "Featurizer", "get_featurizer"]

FEATURIZERS: Registry = Registry("space featurizer")
FEATURIZERS.register("nasbench201", "hwnas.predictors.featurize.nasbench201:NasBench201Featurizer")
FEATURIZERS.register("fbnet", "hwnas.predictors.featurize.fbnet:FBNetFeaturizer")
FEATURIZERS.register("ofa", "hwnas.predictors.featurize.ofa:OFAFeaturizer")
FEATURIZERS.register("declared", "hwnas.predictors.featurize.declared:DeclaredFeaturizer")
FEATURIZERS.register("module", "hwnas.predictors.featurize.module:ModuleFeaturizer")


@cache
def get_featurizer(space: str) -> Featurizer:
    """The featurizer of space ``space`` (one per process).

    Raises:
        UnknownNameError: no featurizer for that space.
    """
    sp = get_space(space)
    return FEATURIZERS.get(sp.featurizer_name)(sp)
