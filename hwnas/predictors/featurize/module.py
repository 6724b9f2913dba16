"""Features of spaces made from a PyTorch module (:mod:`hwnas.spaces.module`): the graph features
of each subnet's own ONNX export.

A user's module can hold any layer, so no cost formula is written for it: the subnet is built
(:meth:`ModuleSpace.build`), exported with the same exporter as every measured network
(:func:`hwnas.export.export_onnx`) and read by :func:`hwnas.predictors.graph.
onnx_graph_features`, once per architecture and process (0.1-0.5 s per subnet). Predictors take
these architectures through an artifact's graph path, as for declared spaces.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hwnas.predictors.featurize.base import Featurizer
from hwnas.predictors.graph import GRAPH_COLUMNS
from hwnas.spaces import Arch, SearchSpace


class ModuleFeaturizer(Featurizer):
    """Features of a :class:`hwnas.spaces.module.ModuleSpace`'s architectures.

    Structural columns: ``n_conv`` and ``n_linear`` (the subnet's convolution and linear
    layers).
    """

    structural_names = ("n_conv", "n_linear")

    def __init__(self, space: SearchSpace):
        super().__init__(space)
        self.dataset = space.reference_dataset
        self._rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _features(self, arch: Arch) -> tuple[np.ndarray, np.ndarray]:
        if arch.text not in self._rows:
            import onnx
            import torch
            from torch import nn

            from hwnas.export import export_onnx
            from hwnas.predictors.graph import onnx_graph_features

            with torch.random.fork_rng(devices=[]):
                net = self.space.build(arch, self.dataset)
            shape = (1, *self.space.input_shape(arch, self.dataset))
            graph = onnx_graph_features(onnx.load_from_string(export_onnx(net, shape, check=False)))
            counts = np.array(
                [
                    sum(isinstance(m, nn.Conv2d) for m in net.modules()),
                    sum(isinstance(m, nn.Linear) for m in net.modules()),
                ],
                dtype=np.float64,
            )
            self._rows[arch.text] = (counts, graph)
        return self._rows[arch.text]

    def structural(self, archs: Sequence[Arch]) -> np.ndarray:
        rows = [self._features(a)[0] for a in archs]
        return np.stack(rows) if rows else np.zeros((0, len(self.structural_names)))

    def graph(self, archs: Sequence[Arch]) -> np.ndarray:
        rows = [self._features(a)[1] for a in archs]
        return np.stack(rows) if rows else np.zeros((0, len(GRAPH_COLUMNS)))
