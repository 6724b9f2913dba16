"""The PyTorch network of a declared space: one class for standalone networks and supernets.

:class:`DeclaredNetwork` is built for a set of candidate values per decision: one value each
gives the standalone network of an architecture (``SearchSpace.build``); every value gives the
supernet's weight-sharing network (:class:`hwnas.supernet.declared.DeclaredSupernet`). A
standalone network's modules are a subset of the supernet's, under the same names, so a subnet
inherits its weights by name and slicing (:func:`extract_state`).

Forward: ``net(x)`` for a standalone network; ``net(x, path)`` under a supernet
:class:`~hwnas.spaces.mixed.Path` (one choice per decision of the space, in order). A stage
with a depth decision returns the weight-summed outputs after each active depth (Once-for-All's
elastic depth); width decisions are nested channel masks over the stage's widest active width.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from hwnas.errors import HwnasError, out_of_memory
from hwnas.registry import load
from hwnas.spaces.declared.blocks import BLOCKS
from hwnas.spaces.declared.modules import DLinear, width_scale
from hwnas.spaces.declared.schema import Choices, LayerSpec, resolve_value
from hwnas.spaces.mixed import Choice, MixedChoice
from hwnas.spaces.ofa.model import make_divisible

if TYPE_CHECKING:  # pragma: no cover
    from hwnas.spaces.declared import DeclaredSpace


class Candidates(MixedChoice):
    """A categorical choice among fixed blocks (FBNet's layers): the weight-summed outputs of
    the active candidates; a standalone network keeps one candidate and calls it directly."""

    def forward(self, x: torch.Tensor, choice: Choice | None = None) -> torch.Tensor:
        if choice is None:
            return self.ops[self.names[0]](x)
        return super().forward(x, choice)


class _Layer:
    """Where a layer's decisions are in the path (not a module)."""

    def __init__(self, params: dict[str, int], op: int | None, width: int | None):
        self.params, self.op, self.width = params, op, width


class DeclaredNetwork(nn.Module):
    """A network of a declared space.

    Args:
        space: the space.
        dataset: the dataset whose skeleton values (``by_dataset``) are used.
        values: decision key -> candidate values to build (a subset of the decision's values,
            in its order; every decision needs at least one).
        width: multiplier of every channel count and head width (1.0 = as declared), rounded to
            the space's ``channel_divisor``.
        num_classes: classifier width.
        input_shape: (C, H, W) of one input image.

    Input (B, *input_shape); output (B, num_classes) logits.

    A failure of building or running it (what the file's checks missed) is one line naming the
    space file (:func:`_failure`), not PyTorch's traceback; running out of memory stays what
    it is (the CLI says so in one line).
    """

    def __init__(
        self,
        space: DeclaredSpace,
        dataset: str,
        values: dict[str, tuple[Any, ...]],
        width: float,
        num_classes: int,
        input_shape: tuple[int, int, int],
    ):
        super().__init__()
        self.space, self.dataset, self.width = space, dataset, float(width)
        try:
            self._build(space, dataset, values, num_classes, input_shape)
        except Exception as exc:
            error = _failure(self, "building", exc)
            if error is None:
                raise
            raise error from exc

    def _build(self, space, dataset, values, num_classes, input_shape) -> None:
        self.values = values
        self.keys = [d.key for d in space.decisions]
        self._index = {k: i for i, k in enumerate(self.keys)}
        self.divisor = space.spec.channel_divisor
        c, hw = int(input_shape[0]), (int(input_shape[1]), int(input_shape[2]))
        self.tokens = False
        self.stem, self._stem = nn.ModuleList(), []
        for i, spec in enumerate(space.spec.stem):
            c, hw = self._add(self.stem, self._stem, spec, f"stem.{i}", c, c, hw)
        self.stages, self._stages = nn.ModuleList(), []
        self._depth: list[int | None] = []
        self._width: list[int | None] = []
        for st in space.spec.stages:
            d_key, w_key = f"{st.name}.d", f"{st.name}.out"
            depth = max(values[d_key]) if isinstance(st.depth, Choices) else int(st.depth)
            self._depth.append(self._index[d_key] if isinstance(st.depth, Choices) else None)
            if isinstance(st.out, Choices):
                c_out = self.scale(max(values[w_key]))
                self._width.append(self._index[w_key])
            else:
                out = resolve_value(st.out, dataset)
                c_out = c if out is None else self.scale(out)
                self._width.append(None)
            layers, where = nn.ModuleList(), []
            for i in range(depth):
                spec = st.layers[i]
                c_layer = (
                    c_out if spec.out is None else self.scale(resolve_value(spec.out, dataset))
                )
                c, hw = self._add(layers, where, spec, f"{st.name}.{i}", c, c_layer, hw)
            self.stages.append(layers)
            self._stages.append(where)
        self.head, self._head = nn.ModuleList(), []
        for i, spec in enumerate(space.spec.head):
            c, hw = self._add(self.head, self._head, spec, f"head.{i}", c, c, hw)
        self.classifier = DLinear(c, num_classes)

    def scale(self, channels: int) -> int:
        """Channels times the width multiplier, rounded to the channel divisor."""
        if self.width == 1.0:
            return int(channels)
        return make_divisible(channels * self.width, self.divisor)

    def _add(self, modules, where, spec: LayerSpec, prefix, c_in, c_out, hw):
        stride = int(resolve_value(spec.stride, self.dataset))
        if spec.candidates is not None:
            key = f"{prefix}.op"
            ops = {}
            for name in self.values[key]:
                block = self._block(spec.candidates[name], c_in, c_out, stride, hw, {})
                ops[name] = block
            module = Candidates(self._index[key], ops)
            first = next(iter(ops.values()))
            modules.append(module)
            where.append(_Layer({}, self._index[key], None))
            return first.out_channels, first.out_hw
        width = None
        if spec.out is not None and prefix.split(".")[0] in ("stem", "head"):
            out = spec.out
            if isinstance(out, Choices):
                c_out = self.scale(max(self.values[f"{prefix}.out"]))
                width = self._index[f"{prefix}.out"]
            else:
                c_out = self.scale(resolve_value(out, self.dataset))
        params: dict[str, int] = {}
        block = self._block(spec, c_in, c_out, stride, hw, params, prefix)
        modules.append(block)
        where.append(_Layer(params, None, width))
        return block.out_channels, block.out_hw

    def _block(self, spec: LayerSpec, c_in, c_out, stride, hw, where: dict, prefix: str = ""):
        bt = BLOCKS.get(spec.block)
        params = {}
        for p, v in spec.params.items():
            if isinstance(v, Choices):
                key = f"{prefix}.{p}"
                params[p] = tuple(self.values[key])
                where[p] = self._index[key]
            else:
                v = resolve_value(v, self.dataset)
                if bt.params[p].scales and self.width != 1.0:
                    v = make_divisible(v * self.width, min(self.divisor, 8))
                params[p] = (v,)
        return load(bt.impl)(c_in, c_out, stride, params, hw)

    # -- forward --------------------------------------------------------------------------------

    def _active(self, path, index: int) -> list[tuple[Any, Any]]:
        choice = path[index]
        values = self.space.decisions[index].values
        return [(values[k], choice.weights[k]) for k in choice.active]

    def _run(self, module, where: _Layer, x, path):
        if path is None:
            return module(x)
        if where.op is not None:
            return module(x, path[where.op])
        sel = {p: self._active(path, i) for p, i in where.params.items()}
        out = None
        scale = None
        if where.width is not None:
            active = self._active(path, where.width)
            widths = [self.scale(v) for v, _ in active]
            out = max(widths)
        y = module(x, sel, out)
        if where.width is not None:
            dim = -1 if y.dim() == 3 else 1
            scale = width_scale(active, widths, out, y, dim)
            y = y * scale if scale is not None else y
        return y

    def forward(self, x: torch.Tensor, path: list[Choice] | None = None) -> torch.Tensor:
        try:
            return self._forward(x, path)
        except (RuntimeError, ValueError, IndexError) as exc:
            error = _failure(self, f"running on a {'x'.join(map(str, x.shape))} input", exc)
            if error is None:
                raise
            raise error from exc

    def _forward(self, x: torch.Tensor, path: list[Choice] | None) -> torch.Tensor:
        for module, where in zip(self.stem, self._stem):
            x = self._run(module, where, x, path)
        for s, layers in enumerate(self.stages):
            x = self._stage(s, layers, x, path)
        for module, where in zip(self.head, self._head):
            x = self._run(module, where, x, path)
        return self.classifier(torch.flatten(x, 1))

    def _stage(self, s: int, layers, x, path):
        where = self._stages[s]
        w_index, d_index = self._width[s], self._depth[s]
        depths: list[tuple[int, Any]] = [(len(layers), None)]
        if path is not None and d_index is not None:
            depths = self._active(path, d_index)
        widths, out, active = None, None, None
        if path is not None and w_index is not None:
            active = self._active(path, w_index)
            widths = [self.scale(v) for v, _ in active]
            out = max(widths)
        total = None
        for i in range(max(int(d) for d, _ in depths)):
            module = layers[i]
            if path is None:
                x = module(x)
            elif where[i].op is not None:
                x = module(x, path[where[i].op])
            else:
                sel = {p: self._active(path, j) for p, j in where[i].params.items()}
                x = module(x, sel, out)
            if active is not None:
                scale = width_scale(active, widths, out, x, 1)
                x = x * scale if scale is not None else x
            for d, weight in depths:
                if int(d) == i + 1:
                    y = x if weight is None else x * weight
                    total = y if total is None else total + y
        return total


def _failure(net: DeclaredNetwork, doing: str, exc: Exception) -> HwnasError | None:
    """The one-line error of a declared network that failed ``doing`` (building, running): it
    names the space file, where PyTorch's traceback (74 lines for a patch embedding after a
    global pool) named none; None where ``exc`` is already one line or memory ran out."""
    if isinstance(exc, HwnasError) or out_of_memory(exc) is not None:
        return None
    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else ""
    return HwnasError(
        f"{net.space.path}: the {net.space.name} network for {net.dataset} failed {doing} "
        f"({type(exc).__name__}: {first}); the file passed hwnas's checks: please report it"
    )


def extract_state(static: nn.Module, source: dict[str, torch.Tensor], prefix: str = ""):
    """Load a standalone network's every tensor from a supernet state by name: the first
    entries of every dimension, the centre of a convolution kernel (4-d tensors' last two).

    Raises:
        KeyError: a tensor of ``static`` with no counterpart (a bug, not a user error).
    """
    state = {}
    for key, want in static.state_dict().items():
        src = source[prefix + key]
        if src.dim() != want.dim():
            raise KeyError(f"{key}: {tuple(src.shape)} vs {tuple(want.shape)}")
        index = []
        for axis, (n_src, n) in enumerate(zip(src.shape, want.shape)):
            if n > n_src:
                raise KeyError(f"{key}: {tuple(src.shape)} is smaller than {tuple(want.shape)}")
            if src.dim() == 4 and axis >= 2:
                lo = (n_src - n) // 2
                index.append(slice(lo, lo + n))
            else:
                index.append(slice(0, n))
        state[key] = src[tuple(index)].detach().clone()
    static.load_state_dict(state, strict=True)
    return static.eval()
