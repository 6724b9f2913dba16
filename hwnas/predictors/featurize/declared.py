"""Features of declared spaces (YAML files, :mod:`hwnas.spaces.declared`): the graph features
of each layer, read once per distinct layer from that layer's own ONNX export, and summed.

A declared space's blocks are open-ended (a user registers new ones), so instead of one
hand-written cost formula per block this featurizer builds the architecture's network
(:meth:`DeclaredSpace.build`), records every layer's input shape in one forward pass, and
exports each distinct layer (its module description, parameter shapes and input shape) alone
with the same exporter as the whole network (:func:`hwnas.export.export_onnx`). Graph features
are additive over nodes, so their sum plus the classifier equals what
:func:`hwnas.predictors.graph.onnx_graph_features` reads from the whole network's export
(``tests/predictors/test_declared_features.py`` checks it). A space has few distinct layers
(about 120 for ``mobilenetv4``, 20 for ``vit``): the first architectures of a process cost an
export per new layer (0.1-0.5 s), later ones a forward pass (milliseconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hwnas.predictors.featurize.base import Featurizer
from hwnas.predictors.graph import COLUMN, GRAPH_COLUMNS, GraphAccumulator
from hwnas.spaces import Arch, SearchSpace


class DeclaredFeaturizer(Featurizer):
    """Features of any declared space's architectures, for its reference dataset.

    Args:
        space: a :class:`hwnas.spaces.declared.DeclaredSpace`.
        dataset: the dataset whose networks are described (default: the space's
            ``reference_dataset``, the one ``hwnas refset export`` and ``refset measure`` use).

    Structural columns: ``n_layers`` (layers run), one count per block type of the space
    (``n_<block>``), and ``input_scale`` (input pixels over the largest input's).
    """

    def __init__(self, space: SearchSpace, dataset: str | None = None):
        super().__init__(space)
        self.dataset = dataset or space.reference_dataset
        space.dataset(self.dataset)  # raises for an unknown dataset
        self._blocks = sorted({bt.name for layer in space.all_layers() for bt in layer.types()})
        self.structural_names = ("n_layers", *(f"n_{b}" for b in self._blocks), "input_scale")
        self._layers: dict[Any, np.ndarray] = {}
        self._rows: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    # -- per architecture ------------------------------------------------------------------

    def _features(self, arch: Arch) -> tuple[np.ndarray, np.ndarray]:
        """(structural row, graph row) of one architecture (cached by arch string)."""
        if arch.text not in self._rows:
            self._rows[arch.text] = self._compute(arch)
        return self._rows[arch.text]

    def _compute(self, arch: Arch) -> tuple[np.ndarray, np.ndarray]:
        import torch

        from hwnas.export import one_torch_thread
        from hwnas.spaces.declared.blocks import BLOCKS

        shape = self.space.input_shape(arch, self.dataset)
        net = self.space.build(arch, self.dataset)
        layers = [*net.stem, *(m for stage in net.stages for m in stage), *net.head]
        seen: list[tuple[Any, tuple[int, ...]]] = []
        hooks = [
            m.register_forward_pre_hook(lambda m, args: seen.append((m, tuple(args[0].shape))))
            for m in layers
        ]
        try:
            with torch.no_grad(), one_torch_thread():
                net(torch.zeros((1, *shape)))
        finally:
            for h in hooks:
                h.remove()
        impl = {BLOCKS.get(b).impl.rsplit(":", 1)[-1]: b for b in self._blocks}
        counts = dict.fromkeys(self._blocks, 0)
        graph = np.zeros(len(GRAPH_COLUMNS))
        for module, in_shape in seen:
            block = getattr(module, "ops", None)  # a categorical choice: its one candidate
            inner = next(iter(block.values())) if block is not None else module
            name = impl.get(type(inner).__name__)
            if name is not None:
                counts[name] += 1
            graph += self._layer(module, in_shape)
        acc = GraphAccumulator()
        acc.add("input_elems", float(np.prod(shape)))
        acc.gemm(net.classifier.in_features, net.classifier.out_features)
        graph += acc.values
        res = self.space.spec.resolution  # Choices of the input side, or None (fixed)
        largest = max(res.values) ** 2 if res is not None else shape[1] * shape[2]
        structural = np.array(
            [len(seen), *(counts[b] for b in self._blocks), shape[1] * shape[2] / largest],
            dtype=np.float64,
        )
        return structural, graph

    def _layer(self, module, in_shape: tuple[int, ...]) -> np.ndarray:
        """Graph features of one layer (without its input), from its ONNX export (cached)."""
        key = (
            repr(module),
            tuple((k, tuple(v.shape)) for k, v in module.state_dict().items()),
            in_shape[1:],
        )
        if key not in self._layers:
            import onnx

            from hwnas.export import export_onnx
            from hwnas.predictors.graph import onnx_graph_features

            data = export_onnx(module, in_shape, check=False)
            values = onnx_graph_features(onnx.load_from_string(data))
            values[COLUMN["input_elems"]] = 0.0
            self._layers[key] = values
        return self._layers[key]

    # -- Featurizer ------------------------------------------------------------------------

    def structural(self, archs: Sequence[Arch]) -> np.ndarray:
        rows = [self._features(a)[0] for a in archs]
        return np.stack(rows) if rows else np.zeros((0, len(self.structural_names)))

    def graph(self, archs: Sequence[Arch]) -> np.ndarray:
        rows = [self._features(a)[1] for a in archs]
        return np.stack(rows) if rows else np.zeros((0, len(GRAPH_COLUMNS)))
