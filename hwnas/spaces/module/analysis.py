"""What can be elastic in a user's ``nn.Module``: tracing (torch.fx) and channel-group analysis.

The module is traced with :mod:`torch.fx` (its layers and :class:`hwnas.nn.Choice` as leaves)
in eval mode and in training mode (what a supernet trains and a subnet is fine-tuned in: an
auxiliary head, noise, stochastic depth) and the example input's shapes are propagated through
both graphs, which are analysed into the same groups (a layer's output is one group in both, what
it takes in one is joined with what it takes in the other); a forward that returns other than
its eval-mode logits in training mode is refused. Every tensor's channel
axis carries a *layout*: the channel groups it is made of, in order (a concatenation joins
groups; anything else keeps one). A group is a set of channels that must keep the same width:
a convolution or linear layer *produces* a group, batch norms, layer norms, depthwise and
grouped convolutions *carry* it (a grouped one in whole groups: the group's width is then a
multiple of its channels per group), convolutions and linear layers *consume* it; residual
additions, multiplications (squeeze-excite) and a droppable block's input and output *join*
groups (union-find), as NVIDIA ModelOpt's FastNAS dependency analysis does. A group is *frozen*
(kept at full width) wherever slicing its channels would be unsafe: the network's input and
output, operations hwnas does not know (their channel semantics are unknown), parameters read
directly in ``forward``, layers called twice, flattening that mixes channels with positions,
and so on; each frozen group keeps the reason. A batch norm over a concatenation carries each
of its groups at its offset (DenseNet), and a parameter a module reads in its ``forward`` (a class
token, a layer scale) carries the group it meets. A channel count read from ``x.shape`` may size
only the same channels (SENet's ``view(b, c)``); one sizing others, or written as a number in a
``view``, keeps its channels whole.

Residual blocks (whose output is their input plus what they compute, ``x + g(x)``, followed by
nothing but layers that mix no channels or positions: :func:`_residual`) whose input and output
have the same shape can be dropped (elastic depth, Once-for-All): those at the end of an
``nn.Sequential`` / ``nn.ModuleList``, and, inside one (a flat ``features`` list such as
MobileNetV2's, stem to head), each run of them after the block that changed the shape (a stage
of OFA's); in a :class:`~hwnas.spaces.module.choices.Repeat` the user declared, any blocks that
keep their shape. Convolutions whose padding is half their odd kernel can run the centre of it
(elastic kernel).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch import nn

from hwnas.errors import HwnasError

POINTWISE = {
    "relu", "relu_", "relu6", "gelu", "silu", "sigmoid", "hardswish", "hardsigmoid", "tanh",
    "leaky_relu", "elu", "selu", "mish", "softplus", "hardtanh", "dropout", "dropout2d",
    "contiguous", "clone", "float", "abs", "neg", "exp", "sqrt", "rsqrt", "square", "pow",
    "clamp", "clamp_min", "clamp_max", "detach", "type_as", "to", "sigmoid_", "erf",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
    "bernoulli", "bernoulli_", "uniform_", "normal_", "stochastic_depth", "drop_path",
}  # fmt: skip
"""Element-wise functions and methods: a tensor's channels pass through unchanged (noise of
its shape, and a stochastic depth's per-sample mask, included: what training mode adds)."""
NEW = {"new_empty", "new_zeros", "new_ones", "new_full", "new_tensor"}
"""Methods making a tensor of a given size (``x.new_empty(shape)``): only ``x``'s dtype and
device are read; a size read from ``x.shape`` is followed as such."""
BINARY = {
    "add", "sub", "mul", "truediv", "div", "iadd", "isub", "imul", "itruediv", "radd", "rmul",
    "add_", "mul_", "maximum", "minimum",
}  # fmt: skip
"""Element-wise functions of two tensors: their channels are joined (residual add, SE)."""
SPATIAL = {
    "adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d", "max_pool2d", "interpolate",
    "upsample", "adaptive_avg_pool1d", "adaptive_max_pool1d", "avg_pool1d", "max_pool1d",
}  # fmt: skip
"""Functions over (H, W) of a (B, C, H, W) tensor, or L of a (B, C, L) one: channels pass."""
RESHAPE = {"view", "reshape", "flatten", "unsqueeze", "squeeze", "expand", "expand_as"}
REDUCE = {"mean", "sum", "amax", "amin"}
NON_TENSOR = {"size", "dim", "numel", "getattr"}

PASS_MODULES: tuple[type, ...] = (
    nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU, nn.Sigmoid, nn.Hardswish, nn.Hardsigmoid, nn.Tanh,
    nn.LeakyReLU, nn.ELU, nn.SELU, nn.Mish, nn.Softplus, nn.Hardtanh, nn.Dropout, nn.Dropout2d,
    nn.Identity, nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d, nn.AvgPool2d, nn.MaxPool2d,
    nn.Upsample, nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d, nn.AvgPool1d, nn.MaxPool1d,
    nn.Dropout1d,
)  # fmt: skip
"""Parameter-free layers whose output channels are their input's."""


@dataclass
class Group:
    """One channel group after the analysis.

    Attributes:
        id: the group's number.
        size: its channels.
        producers: layers whose output channels these are (conv, linear), in graph order.
        carriers: layers with one parameter per channel (batch norm, layer norm, depthwise
            conv).
        consumers: (layer, offset): layers taking these channels at ``offset`` of their input.
        frozen: why the group keeps its full width ("" when it may be elastic).
        quantum: its width is a multiple of this: the channels per group of the grouped
            convolutions carrying it (ResNeXt, RegNet), whose groups are kept or dropped whole;
            1 otherwise.
        spread: (layer, offset): batch norms over a concatenation holding these channels at
            ``offset`` (DenseNet's), whose per-channel parameters are sliced with them.
        params: (qualified name, axis) of the raw parameters and buffers a module reads in
            its forward that hold these channels on that axis (a ViT's class token and
            position embedding, ConvNeXt's layer scale): sliced with them.
        writer: for a group no layer produces (frozen), the first layer whose output it is (a
            grouped convolution changing the width, a layer hwnas cannot slice); "" if none.
    """

    id: int
    size: int
    producers: list[str] = field(default_factory=list)
    carriers: list[str] = field(default_factory=list)
    consumers: list[tuple[str, int]] = field(default_factory=list)
    frozen: str = ""
    quantum: int = 1
    params: list[tuple[str, int]] = field(default_factory=list)
    spread: list[tuple[str, int]] = field(default_factory=list)
    writer: str = ""

    @property
    def name(self) -> str:
        """The group's name in arch strings: its first producer's."""
        return self.producers[0] if self.producers else f"group{self.id}"


@dataclass
class Stage:
    """Consecutive blocks of a container whose last ones can be dropped (elastic depth).

    Attributes:
        path: the stage's name: the container's module name (``layer2``, ``blocks``) for the
            run of blocks that ends it; for a run inside it, its blocks' range
            (``features.3-6``: blocks 3 to 6 of ``features``, the 3rd always kept).
        children: its blocks' names, in order: a depth of d runs the first d.
        first_droppable: index in ``children`` of the first block that can be dropped (the
            smallest depth is ``max(1, first_droppable)``).
        why: why the block before the run cannot be dropped.
        container: the container's module name.
        start: index of ``children[0]`` in the container.
    """

    path: str
    children: list[str]
    first_droppable: int
    why: str = ""
    container: str = ""
    start: int = 0


@dataclass
class Analysis:
    """What tracing found.

    Attributes:
        groups: the channel groups, by id (roots of the union-find).
        layer_in: layer -> its input layout: [(group id, channels), ...].
        layer_out: producer layer -> its output group.
        layers: layer name -> module type name, for every traced layer, in graph order.
        kernels: conv name -> its kernel size where a centre crop is safe.
        kernel_why: conv name -> why its kernel cannot be elastic.
        stages: containers with droppable trailing blocks, by path.
        choices: names of the :class:`hwnas.nn.Choice` modules, in graph order.
        output_shape: the network's output shape on the example input.
    """

    groups: dict[int, Group]
    layer_in: dict[str, list[tuple[int, int]]]
    layer_out: dict[str, int]
    layers: dict[str, str]
    kernels: dict[str, int]
    kernel_why: dict[str, str]
    stages: dict[str, Stage]
    choices: list[str]
    output_shape: tuple[int, ...]
    block_io: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = field(default_factory=dict)

    def group_of(self, layer: str) -> Group | None:
        """The group a producer or carrier layer's output channels belong to."""
        for g in self.groups.values():
            if layer in g.producers or layer in g.carriers:
                return g
        return None


# -- union-find over channel groups ------------------------------------------------------------


class _Groups:
    def __init__(self) -> None:
        self.parent: list[int] = []
        self.size: list[int] = []
        self.frozen: dict[int, str] = {}

    def new(self, size: int, frozen: str = "") -> int:
        self.parent.append(len(self.parent))
        self.size.append(int(size))
        g = len(self.parent) - 1
        if frozen:
            self.frozen[g] = frozen
        return g

    def find(self, g: int) -> int:
        while self.parent[g] != g:
            self.parent[g] = self.parent[self.parent[g]]
            g = self.parent[g]
        return g

    def freeze(self, g: int, why: str) -> None:
        r = self.find(g)
        self.frozen.setdefault(r, why)

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return
        if self.size[ra] != self.size[rb]:  # cannot happen for equal shapes; stay safe
            self.freeze(ra, "joined with a group of another width")
            self.freeze(rb, "joined with a group of another width")
            return
        why = self.frozen.pop(rb, "") or self.frozen.get(ra, "")
        self.parent[rb] = ra
        if why:
            self.frozen[ra] = why


Layout = tuple[tuple[int, ...], int]
"""(group ids in channel order, channel axis)."""


# -- tracing ------------------------------------------------------------------------------------


class _Tracer(fx.Tracer):
    """torch.fx tracer that traces into :class:`hwnas.nn.Choice` (every candidate, summed) and
    remembers the module being traced (to name it when tracing fails)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        from hwnas.spaces.module.choices import Choice

        return not isinstance(m, Choice) and super().is_leaf_module(m, qualname)

    def call_module(self, m, forward, args, kwargs):
        self.stack.append(self.path_of_module(m) or type(m).__name__)
        try:
            return super().call_module(m, forward, args, kwargs)
        finally:
            self.stack.pop()


def trace(model: nn.Module, label: str, mode: str = "") -> fx.GraphModule:
    """The traced graph of ``model``.

    Raises:
        HwnasError: the forward cannot be traced (Python control flow on tensor values, ...):
            one line naming the innermost layer being traced.
    """
    from hwnas.spaces.module.choices import TRACING

    tracer = _Tracer()
    TRACING[0] = True
    try:
        graph = tracer.trace(model)
    except Exception as exc:  # torch.fx raises TraceError, TypeError, RuntimeError, ...
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if tracer.stack:
            where = tracer.stack[-1]
            kind = type(model.get_submodule(where)).__name__
            at = f"layer '{where}' ({kind})"
        else:
            at = f"the forward of {type(model).__name__}"
        raise HwnasError(
            f"{label}: cannot trace {at}{mode} with torch.fx: {first} (hwnas needs a forward "
            "without Python control flow on tensor values)"
        ) from None
    finally:
        TRACING[0] = False
    return fx.GraphModule(model, graph)


def _name(target: Any) -> str:
    if isinstance(target, str):
        return target
    return getattr(target, "__name__", str(target))


def _shape(node: Any) -> tuple[int, ...] | None:
    if not isinstance(node, fx.Node):
        return None
    meta = node.meta.get("tensor_meta")
    shape = getattr(meta, "shape", None)
    return tuple(int(s) for s in shape) if shape is not None else None


def _nodes(value: Any) -> list[fx.Node]:
    out: list[fx.Node] = []
    fx.node.map_arg(value, lambda n: out.append(n))
    return out


def analyse(model: nn.Module, example_input: torch.Tensor, label: str) -> Analysis:
    """Trace ``model`` on ``example_input`` and find its channel groups, elastic kernels and
    droppable blocks (see the module doc).

    Args:
        model: the network (not modified): traced in eval mode and in training mode (a
            supernet trains in it), whose graphs are analysed into the same channel groups.
        example_input: one input batch, (B, C, H, W) or any shape the model takes.
        label: how errors name the model.

    Raises:
        HwnasError: the model cannot be traced or run on the example input (one line naming
            the layer).
    """
    from torch.fx.passes.shape_prop import ShapeProp

    from hwnas.spaces.module.choices import Choice

    was = model.training
    model.eval()
    try:
        gm = trace(model, label)
        calls: dict[str, int] = {}
        io: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        hooks = _record_blocks(model, calls, io)
        try:
            with torch.no_grad():
                out = model(example_input)
                returned = _returned(out)
                if returned:
                    raise HwnasError(
                        f"{label}: the model must return one tensor of logits (batch, classes); "
                        f"it returns {returned}: wrap it so forward returns the logits"
                    )
                _check_batch_kept(model, example_input, out, label)
                for h in hooks:  # the traced graph calls the same leaf layers again
                    h.remove()
                ShapeProp(gm).propagate(example_input)
        except HwnasError:
            raise
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise HwnasError(
                f"{label}: the model fails on the example input of shape "
                f"{tuple(example_input.shape)}: {first}"
            ) from None
        finally:
            for h in hooks:
                h.remove()
    finally:
        model.train(was)
    train_gm = _train_graph(model, example_input, gm, label)
    modules = dict(model.named_modules())
    g = _Groups()
    layout: dict[fx.Node, Layout | None] = {}
    layer_in: dict[str, list[tuple[int, int]]] = {}
    layer_out: dict[str, int] = {}
    layers: dict[str, str] = {}
    carriers: dict[str, int] = {}
    quanta: dict[str, int] = {}  # grouped carrier -> channels per group
    spread: set[str] = set()  # batch norms over a concatenation of groups
    params: dict[str, tuple[int, int]] = {}  # raw parameter read in forward -> (group, axis)
    sizes: dict[fx.Node, tuple] = {}  # a channel count read from a shape: _track_sizes
    checks: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = []
    touched: dict[str, set[int]] = {}
    writers: dict[int, str] = {}  # a group a layer's output starts that it does not produce
    counts: dict[str, int] = {}
    direct: set[str] = set()
    first: dict[str, Any] = {}  # the eval-mode graph's groups, while the train one is walked

    def freeze_all(values: Iterable[Any], why: str) -> None:
        for n in values:
            lay = layout.get(n)
            if lay is not None:
                for gid in lay[0]:
                    g.freeze(gid, why)

    def fresh(node: fx.Node, why: str, like: Layout | None = None) -> Layout | None:
        """A new group for a tensor whose channels nothing is known of (frozen): on the
        channel axis of ``like`` (the input's layout) where the ranks agree, else axis 1."""
        shape = _shape(node)
        if shape is None or len(shape) < 2:
            return None
        x = node.args[0] if node.args else None
        axis = 1
        if like is not None and isinstance(x, fx.Node) and len(_shape(x) or ()) == len(shape):
            axis = like[1]
        return ((g.new(shape[axis], why),), axis)

    def segs(lay: Layout) -> list[tuple[int, int]]:
        return [(gid, g.size[gid]) for gid in lay[0]]

    def join(a: Layout, b: Layout, why: str) -> None:
        if [g.size[x] for x in a[0]] == [g.size[x] for x in b[0]]:
            for x, y in zip(a[0], b[0]):
                g.union(x, y)
        else:  # differently concatenated: keep both whole
            for gid in a[0] + b[0]:
                g.freeze(gid, why)

    # The training-mode graph is walked after the eval-mode one, into the same groups: a
    # layer's output is the group it produced there, what it takes or carries is joined with
    # what it took or carried there, so every layer either mode runs is sliced alike.
    def produced(name: str, size: int) -> int:
        if name in first.get("out", {}):
            return first["out"][name]
        return g.new(size)

    def takes(name: str, lay: Layout) -> None:
        before = first.get("in", {}).get(name)
        if before is None:
            layer_in[name] = segs(lay)
            return
        join((tuple(gid for gid, _ in before), 0), lay,
             f"'{name}' takes its channels concatenated otherwise in training mode")  # fmt: skip
        layer_in[name] = before

    def carries(name: str, gid: int) -> None:
        before = first.get("carriers", {}).get(name)
        if before is not None:
            g.union(before, gid)
        carriers[name] = before if before is not None else gid

    def walk(gm: fx.GraphModule, counts: dict[str, int]) -> None:
        for node in gm.graph.nodes:
            step(node, counts)

    def step(node: fx.Node, counts: dict[str, int]) -> None:
        op, args = node.op, node.args
        shape = _shape(node)
        ins = [n for n in _nodes((args, node.kwargs)) if layout.get(n) is not None]
        if op == "placeholder":
            if node.name in first.get("inputs", {}):
                layout[node] = first["inputs"][node.name]
            else:
                layout[node] = (
                    ((g.new(shape[1], "the network's input"),), 1)
                    if shape and len(shape) >= 2
                    else None
                )
        elif op == "get_attr":
            target = str(node.target)
            direct.add(target.rsplit(".", 1)[0] if "." in target else "")
            found = _param_axis(model, target)
            layout[node] = None
            if found is not None:  # a class token, position embedding, layer scale: sliced
                axis, size = found
                gid = params[target][0] if target in params else g.new(size)
                params[target] = (gid, axis)  # with the channels it meets, on its last
                layout[node] = ((gid,), axis)  # axis of more than one element
        elif op == "output":
            freeze_all(ins, "the network's output")
        elif op == "call_module":
            name = str(node.target)
            m = modules[name]
            counts[name] = counts.get(name, 0) + 1
            layers.setdefault(name, type(m).__name__)
            x = args[0] if args else None
            lay = layout.get(x) if isinstance(x, fx.Node) else None
            xs = _shape(x)
            result: Layout | None = None
            if (
                type(m) in (nn.Conv2d, nn.Conv1d)
                and lay
                and lay[1] == 1
                and len(xs) == m.weight.dim()
            ):
                grouped = m.groups > 1 and m.in_channels == m.out_channels  # depthwise too
                if m.groups == 1:
                    takes(name, lay)
                    result = ((produced(name, m.out_channels),), 1)
                    layer_out[name] = result[0][0]
                elif grouped and len(lay[0]) == 1:  # carries its input's group, whole groups
                    carries(name, lay[0][0])
                    quanta[name] = m.in_channels // m.groups
                    takes(name, lay)
                    result = lay
                else:
                    why = (
                        f"'{name}' is a grouped convolution over a concatenation"
                        if grouped
                        else f"'{name}' is a grouped convolution changing the width"
                    )
                    freeze_all(ins, why)
                    result = fresh(node, why)
            elif (
                type(m) in (nn.Conv2d, nn.Conv1d)
                and m.groups == 1
                and lay is None
                and isinstance(x, fx.Node)
                and len(shape or ()) == m.weight.dim()
            ):  # its input's channels are not followed (one of a chunk's parts, which freezes
                # them): read whole; its own output channels are sliced
                result = ((produced(name, m.out_channels),), 1)
                layer_out[name] = result[0][0]
            elif type(m) is nn.Linear and shape and (lay is not None or isinstance(x, fx.Node)):
                if lay is not None and lay[1] == len(xs) - 1:
                    takes(name, lay)
                elif lay is not None:  # it mixes features of a tensor whose channels are on
                    # another axis (an attention's heads put back together): they stay whole
                    freeze_all(ins, f"'{name}' (Linear) reads them on another axis")
                gid = produced(name, m.out_features)
                layer_out[name] = gid
                result = ((gid,), len(shape) - 1) if shape else None
            elif type(m) in (nn.BatchNorm2d, nn.BatchNorm1d) and lay is not None and lay[1] == 1:
                if len(lay[0]) == 1:
                    carries(name, lay[0][0])
                else:  # DenseNet's: a concatenation's channels, each group's at its offset
                    spread.add(name)
                takes(name, lay)
                result = lay
            elif (
                type(m) is nn.LayerNorm
                and lay is not None
                and len(m.normalized_shape) == 1
                and lay[1] == len(xs) - 1
                and len(lay[0]) == 1
            ):
                carries(name, lay[0][0])
                takes(name, lay)
                result = lay
            elif type(m) is nn.MultiheadAttention and lay is not None:
                # its heads are reshaped out of the width it reads and writes; its output
                # (a tuple: the attended query, the weights) keeps the query's layout
                freeze_all(ins, f"'{name}' (MultiheadAttention) splits its width into heads")
                result = lay
            elif isinstance(m, PASS_MODULES) and lay is not None:
                result = lay
            elif type(m) is nn.PReLU and m.num_parameters == 1 and lay is not None:  # one slope
                result = lay
            elif type(m) is nn.PReLU and lay is not None and lay[1] == 1 and len(lay[0]) == 1:
                carries(name, lay[0][0])  # a slope per channel: sliced with them
                takes(name, lay)
                result = lay
            elif isinstance(m, nn.Flatten) and lay is not None:
                result = _reshaped(lay, xs, shape)
                if result is None:
                    freeze_all(ins, f"'{name}' flattens channels with positions")
            else:
                what = (
                    f"'{name}' ({type(m).__name__}) is not a layer hwnas can slice"
                    if lay is not None or not ins
                    else f"'{name}' ({type(m).__name__}) takes its input in an unknown layout"
                )
                if type(m) is nn.LayerNorm and lay and len(lay[0]) > 1:
                    what = (
                        f"'{name}' ({type(m).__name__}) normalises a concatenation of channel "
                        "groups; hwnas slices a layer norm of one group only"
                    )
                freeze_all(ins, what)
                result = fresh(node, what, lay) if shape is not None else None
            for n in ins:
                touched.setdefault(name, set()).update(layout[n][0])  # type: ignore[index]
            if result is not None:
                touched.setdefault(name, set()).update(result[0])
                if result is not lay and name not in layer_out:
                    for gid in result[0]:
                        writers.setdefault(gid, name)
            layout[node] = result
        else:  # call_function, call_method
            fn = _name(node.target)
            layout[node] = _function(node, fn, ins, layout, shape, g, join, freeze_all, fresh)
            _track_sizes(node, fn, layout, sizes, checks, g)

    walk(gm, counts)
    train_counts: dict[str, int] = {}
    inputs = {n.name: layout.get(n) for n in gm.graph.nodes if n.op == "placeholder"}
    first.update({"out": dict(layer_out), "carriers": dict(carriers), "in": dict(layer_in)})
    first["inputs"] = inputs
    walk(train_gm, train_counts)
    for name, n in train_counts.items():  # a layer either mode runs twice shares its weights
        counts[name] = max(n, counts.get(name, 0))

    choices = [p for p, m in modules.items() if isinstance(m, Choice)]
    for name, n in counts.items():  # shared weights: a layer used twice keeps its widths
        stateful = any(True for _ in modules[name].parameters()) or any(
            True for _ in modules[name].buffers()
        )
        if n > 1 and stateful:  # a ReLU called three times (torchvision's ResNet) is no sharing
            for gid in touched.get(name, ()):
                g.freeze(gid, f"'{name}' is called {n} times (shared weights)")
    for name in direct:  # weights read in forward (weight standardisation, ...)
        for gid in touched.get(name, ()):
            g.freeze(gid, f"the weights of '{name}' are read directly in forward")

    _check_sizes(checks, g)
    stages = _stages(model, gm, layout, calls, io, join, g)
    in_training = _stages(model, train_gm, layout, calls, io, join, g)
    stages = {k: v for k, v in stages.items() if in_training.get(k) == v}  # droppable in both

    roots: dict[int, Group] = {}

    def root(gid: int) -> Group:
        r = g.find(gid)
        if r not in roots:
            roots[r] = Group(r, g.size[r], frozen=g.frozen.get(r, ""))
        return roots[r]

    order = list(layers)
    for name in order:
        if name in layer_out:
            root(layer_out[name]).producers.append(name)
        if name in carriers:
            root(carriers[name]).carriers.append(name)
            root(carriers[name]).quantum = math.lcm(root(carriers[name]).quantum,
                                                    quanta.get(name, 1))  # fmt: skip
        if name in layer_in and name not in carriers:
            offset = 0
            for gid, size in layer_in[name]:
                at = root(gid).spread if name in spread else root(gid).consumers
                at.append((name, offset))
                offset += size
    for target, (gid, axis) in params.items():
        root(gid).params.append((target, axis))
    layer_in = {k: [(g.find(a), s) for a, s in v] for k, v in layer_in.items()}
    layer_out = {k: g.find(v) for k, v in layer_out.items()}
    for r in list(roots):
        roots[r].frozen = g.frozen.get(r, "")
    for gid, name in writers.items():
        r = g.find(gid)
        if r in roots and not roots[r].producers and not roots[r].writer:
            roots[r].writer = name

    kernels, kernel_why = {}, {}
    for name in order:
        m = modules[name]
        if type(m) in (nn.Conv2d, nn.Conv1d):
            why = _kernel_why(m, counts.get(name, 0))
            if why:
                kernel_why[name] = why
            else:
                kernels[name] = int(m.kernel_size[0])
    out_shapes = [_shape(n) for n in _nodes(_output(gm).args)]
    return Analysis(
        roots,
        layer_in,
        layer_out,
        layers,
        kernels,
        kernel_why,
        stages,
        choices,
        out_shapes[0] if len(out_shapes) == 1 and out_shapes[0] else (),
        io,
    )


def _output(gm: fx.GraphModule) -> fx.Node:
    """The output node of ``gm``."""
    return next(n for n in gm.graph.nodes if n.op == "output")


def _train_graph(
    model: nn.Module, example_input: torch.Tensor, eval_gm: fx.GraphModule, label: str
) -> fx.GraphModule:
    """The traced graph of ``model``'s forward in training mode (what a supernet trains and a
    subnet is fine-tuned with), its shapes propagated on a batch of two copies of the example
    input (a batch norm in training mode needs more than one value per channel). The model's
    buffers (batch-norm statistics) are left as they were.

    Raises:
        HwnasError: in training mode, the forward cannot be traced, fails, or returns other than
            one tensor of the eval-mode output's shape (an auxiliary head's logits too): one
            line saying what differs.
    """
    from torch.fx.passes.shape_prop import ShapeProp

    eval_shape = _shape(_nodes(_output(eval_gm).args)[0]) or ()  # one tensor: checked
    saved = [(b, b.detach().clone()) for b in model.buffers()]
    was = model.training
    x = torch.cat([example_input, example_input])
    model.train()
    try:
        gm = trace(model, label, " in training mode (model.train())")
        with torch.no_grad():
            try:
                out = model(x)
                returned = _returned(out)
                if not returned:
                    ShapeProp(gm).propagate(x)
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise HwnasError(
                    f"{label}: in training mode (model.train()) the model fails on the example "
                    f"input: {first}"
                ) from None
        got = tuple(out.shape[1:]) if not returned else ()
        if returned or got != eval_shape[1:]:
            what = returned or f"shape (batch, {', '.join(map(str, got))})"
            ran = {str(n.target) for n in eval_gm.graph.nodes if n.op == "call_module"}
            more = [
                f"'{n.target}' ({type(model.get_submodule(str(n.target))).__name__})"
                for n in gm.graph.nodes
                if n.op == "call_module" and str(n.target) not in ran
            ]
            if more:
                what += f" (it runs {', '.join(dict.fromkeys(more))} then only)"
            raise HwnasError(
                f"{label}: in training mode (model.train()) the model returns {what}, in eval "
                f"mode one tensor (batch, {', '.join(map(str, eval_shape[1:]))}): hwnas trains "
                "and fine-tunes subnets in training mode, so forward must return the same "
                "logits in both modes (take an auxiliary head's output out of forward)"
            )
    finally:
        model.train(was)
        with torch.no_grad():
            for b, value in saved:
                b.copy_(value)
    return gm


def _check_batch_kept(
    model: nn.Module, example_input: torch.Tensor, out: torch.Tensor, label: str
) -> None:
    """The output ``out`` of ``example_input`` keeps its batch axis: where it does not and a
    batch twice as large gives one more axis, forward drops the batch axis when it is 1 (a bare
    ``.squeeze()``), which a batch of one (what hwnas measures) always is.

    Raises:
        HwnasError: one line with both shapes and what to write instead.
    """
    batch = int(example_input.shape[0])
    if out.dim() >= 2 and out.shape[0] == batch:
        return
    try:
        twice = model(torch.cat([example_input, example_input]))
    except Exception:
        return  # the other checks say what is wrong
    if not isinstance(twice, torch.Tensor) or twice.dim() != out.dim() + 1:
        return
    if twice.shape[0] != 2 * batch or tuple(twice.shape[1:]) != tuple(out.shape):
        return
    raise HwnasError(
        f"{label}: the model's output loses its batch axis on a batch of one: it returns "
        f"{tuple(out.shape)} for an input of shape {tuple(example_input.shape)} and "
        f"{tuple(twice.shape)} for a batch of {2 * batch} (a bare .squeeze() drops every axis "
        "of size 1, the batch's too): use .flatten(1) or .squeeze(-1) to keep it"
    )


def _returned(out: Any) -> str:
    """What a forward returned, in words, when it is not one tensor ("" for a tensor)."""
    if isinstance(out, torch.Tensor):
        return ""
    kind = type(out).__name__
    article = "an" if kind[:1].lower() in "aeiou" else "a"
    if isinstance(out, dict):
        keys = ", ".join(repr(k) for k in list(out)[:6]) + (", ..." if len(out) > 6 else "")
        return f"{article} {kind} with keys {keys}" if out else f"an empty {kind}"
    if isinstance(out, (tuple, list)):
        what = "tensor" if all(isinstance(v, torch.Tensor) for v in out) else "value"
        return f"{article} {kind} of {len(out)} {what}{'s' if len(out) != 1 else ''}"
    return f"{article} {kind}" if out is not None else "None"


def _param_axis(model: nn.Module, target: str) -> tuple[int, int] | None:
    """(channel axis, its size) of the parameter or buffer ``target`` a module reads in its
    forward: its last axis of more than one element; None for anything else (a plain tensor
    attribute, a scalar)."""
    owner, _, name = target.rpartition(".")
    try:
        m = model.get_submodule(owner) if owner else model
    except AttributeError:
        return None
    t = m._parameters.get(name) if name in m._parameters else m._buffers.get(name)
    if not isinstance(t, torch.Tensor):
        return None
    axes = [i for i, n in enumerate(t.shape) if n > 1]
    return (axes[-1], int(t.shape[axes[-1]])) if axes else None


def _kernel_why(m: nn.Conv2d | nn.Conv1d, calls: int) -> str:
    """Why a convolution's kernel cannot be cropped to its centre ("" when it can)."""
    k = tuple(m.kernel_size)
    if calls != 1:
        return "it is called more than once"
    if len(set(k)) != 1:
        return f"its kernel {tuple(int(v) for v in k)} is not square"
    if k[0] % 2 == 0:  # a smaller kernel is the centre of the largest: odd sizes have one
        even = [v for v in getattr(k[0], "values", (int(k[0]),)) if v % 2 == 0]
        sizes = ", ".join(map(str, even))
        return (
            f"its kernel size{'s' if len(even) > 1 else ''} {sizes} "
            f"{'are' if len(even) > 1 else 'is'} even (only an odd kernel has a centre)"
        )
    if set(m.dilation) != {1}:
        return "it is dilated"
    if m.padding_mode != "zeros":
        return f"its padding mode is {m.padding_mode}"
    pad = m.padding
    if pad != "same" and tuple(pad) != (k[0] // 2,) * len(k):  # type: ignore[arg-type]
        return f"its padding {pad} is not half its kernel ({k[0] // 2})"
    return ""


def _track_sizes(
    node: fx.Node, fn: str, layout: dict, sizes: dict, checks: list, g: _Groups
) -> None:
    """Follow a tensor's channel count read from its shape (``b, n, c = x.shape``,
    ``x.size(1)``, ``c // heads``): a narrower subnet changes it at run time, which is right
    where it sizes the same channels (SENet's ``view(b, c)``) and breaks the network where it
    sizes others (an attention's ``reshape(b, n, c)`` of its heads, a ``c // heads`` head
    width): there the groups keep their full width. ``sizes`` maps a node to (groups, axis,
    rank): a whole shape tuple with the channels at ``axis`` of ``rank``, or (groups, None,
    0) for the count itself or a number computed from it; ``checks`` gets (node name, the
    count's groups, the groups on the axis it sizes) for :func:`_check_sizes`."""
    args = node.args
    x = args[0] if args else None
    lay = layout.get(x) if isinstance(x, fx.Node) else None
    rank = len(_shape(x) or ()) if isinstance(x, fx.Node) else 0
    if fn in ("getattr", "size") and lay is not None and rank:
        dim = args[1] if len(args) > 1 else node.kwargs.get("dim")
        if fn == "getattr" and dim != "shape":
            return
        if fn == "getattr" or dim is None:
            sizes[node] = (lay[0], lay[1], rank)
        elif isinstance(dim, int) and dim % rank == lay[1]:
            sizes[node] = (lay[0], None, 0)
        return
    if fn == "getitem" and isinstance(x, fx.Node) and x in sizes and sizes[x][1] is not None:
        gids, axis, rank = sizes[x]
        i = args[1]
        if isinstance(i, slice) and all(isinstance(b, (int, type(None))) for b in _bounds(i)):
            kept = range(rank)[i]  # x.shape[-2:]: (H, W), no channel count in it
            if axis in kept:
                sizes[node] = (gids, kept.index(axis), len(kept))
        elif not isinstance(i, int) or i % rank == axis:
            sizes[node] = (gids, None, 0)
        return
    out = layout.get(node)
    dims = list(args[1:])  # a reshape's sizes, given one by one or as one tuple
    if len(dims) == 1 and isinstance(dims[0], (list, tuple)):
        dims = list(dims[0])
    if fn in ("view", "reshape", "expand") and out is not None:  # sizes given as numbers
        if out[1] < len(dims) and isinstance(dims[out[1]], int) and dims[out[1]] > 1:
            for gid in out[0]:  # traced as a number: it would not follow a narrower subnet
                g.freeze(gid, f"'{node.name}' is given its channel count as a number")
    used = [sizes[a] for a in _nodes((args, node.kwargs)) if a in sizes]
    if not used:
        return
    if fn in RESHAPE and out is not None:
        for k, d in enumerate(dims):
            if isinstance(d, fx.Node) and d in sizes:
                gids, axis, _ = sizes[d]
                # the same channels where it sizes their axis: checked once every group is
                # joined (SENet's gate is joined to its block's channels after its view)
                checks.append((node.name, gids, out[0] if axis is None and k == out[1] else ()))
        return
    if _shape(node) is None and fn not in RESHAPE:  # a number computed from the count
        sizes[node] = (tuple(i for u in used for i in u[0]), None, 0)
        return
    for gids, _, _ in used:  # it sizes some other tensor
        for gid in gids:
            g.freeze(gid, f"its channel count (x.shape) sizes a tensor in '{node.name}'")


def _bounds(i: slice) -> tuple[Any, Any, Any]:
    return (i.start, i.stop, i.step)


def _check_sizes(checks: list, g: _Groups) -> None:
    """Freeze the groups of a channel count that sizes other channels than its own, and those
    channels (each would change without the other)."""
    for name, counted, sized in checks:
        if sorted({g.find(i) for i in counted}) != sorted({g.find(i) for i in sized}):
            for gid in (*counted, *sized):
                g.freeze(gid, f"its channel count (x.shape) sizes other channels in '{name}'")


def _reshaped(lay: Layout, before: tuple[int, ...] | None, after: tuple[int, ...] | None):
    """The layout after a reshape that keeps the channel axis whole (same elements before and
    after it), else None."""
    if before is None or after is None:
        return None
    a = lay[1]
    n, pre, post = before[a], math.prod(before[:a]), math.prod(before[a + 1 :])
    for k, t in enumerate(after):
        if t == n and math.prod(after[:k]) == pre and math.prod(after[k + 1 :]) == post:
            return (lay[0], k)
    return None


def _function(node, fn, ins, layout, shape, g, join, freeze_all, fresh):
    """The output layout of a function or method call (see the module doc)."""
    args = node.args
    x = args[0] if args else None
    lay = layout.get(x) if isinstance(x, fx.Node) else None
    xs = _shape(x)
    if shape is None:  # not a tensor (x.shape, x.size(), tuples)
        if ins and fn not in NON_TENSOR and fn != "getitem":
            freeze_all(ins, f"'{fn}' returns several tensors")
        return None
    if not ins or fn in NEW:
        return None
    if fn in POINTWISE and lay is not None:
        return lay
    if fn in SPATIAL and lay is not None and lay[1] == 1 and xs and len(xs) in (3, 4):
        return lay
    if fn in ("softmax", "log_softmax"):
        dim = node.kwargs.get("dim", args[1] if len(args) > 1 else None)
        if lay is not None and dim is not None and xs and dim % len(xs) != lay[1]:
            return lay
    if fn in BINARY:
        return _binary(node, ins, layout, shape, join, freeze_all, g)
    if fn in ("cat", "concat", "concatenate"):
        tensors = list(args[0]) if args else []
        dim = node.kwargs.get("dim", args[1] if len(args) > 1 else 0)
        n = len(shape)
        dim %= n
        lays = [layout.get(t) for t in tensors]
        if all(v is not None and v[1] == dim for v in lays):
            return (tuple(gid for v in lays for gid in v[0]), dim)  # type: ignore[union-attr]
        if all(v is None or v[1] != dim for v in lays):  # along another axis: joined
            tracked = [v for v in lays if v is not None]
            if len(tracked) < len(lays):
                freeze_all(ins, "it is concatenated with a tensor of unknown channels")
            for v in tracked[1:]:
                join(tracked[0], v, "concatenated along another axis")
            return tracked[0] if tracked else None
        freeze_all(ins, "it is concatenated with a tensor of unknown channels")
        return fresh(node, "a concatenation with a tensor of unknown channels")
    if fn in ("transpose", "swapaxes") and lay is not None:
        d0, d1 = (a % len(xs) for a in args[1:3])
        return (lay[0], d1 if lay[1] == d0 else d0 if lay[1] == d1 else lay[1])
    if fn == "permute" and lay is not None:
        dims = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
        dims = [d % len(xs) for d in dims]
        return (lay[0], dims.index(lay[1]))
    if fn in RESHAPE and lay is not None:
        if fn in ("expand", "expand_as") and xs and len(xs) == len(shape):
            if xs[lay[1]] == shape[lay[1]]:
                return lay
        else:
            out = _reshaped(lay, xs, shape)
            if out is not None:
                return out
        freeze_all(ins, f"'{fn}' mixes channels with other axes")
        return fresh(node, f"'{fn}' mixes channels with other axes")
    if fn in REDUCE and lay is not None:
        dim = node.kwargs.get("dim", args[1] if len(args) > 1 else None)
        keep = bool(node.kwargs.get("keepdim", args[2] if len(args) > 2 else False))
        if dim is not None:
            dims = [d % len(xs) for d in (dim if isinstance(dim, (list, tuple)) else [dim])]
            if lay[1] not in dims:
                return (lay[0], lay[1] if keep else lay[1] - sum(d < lay[1] for d in dims))
    if fn == "getitem" and lay is not None and xs is None:  # a layer's tuple (attention's)
        if args[1] == 0:
            return lay
    elif fn == "getitem" and lay is not None:
        out = _indexed(lay, args[1], xs)
        if out is not None:
            return out
    what = f"'{fn}' is not an operation hwnas knows the channels of"
    freeze_all(ins, what)
    return fresh(node, what, lay)


def _binary(node, ins, layout, shape, join, freeze_all, g):
    """Element-wise op of two operands (broadcasting aligned from the right)."""
    n = len(shape)
    operands = [a for a in node.args if isinstance(a, fx.Node)]
    tracked = [a for a in operands if layout.get(a) is not None]
    out = None
    positions = {}
    for a in tracked:
        lay, s = layout[a], _shape(a)
        positions[a] = n - (len(s) - lay[1])  # the axis in the output
    for a in operands:
        s = _shape(a)
        if a in positions or s is None:
            continue
        # an untracked tensor: fine where it is constant along every tracked channel axis
        for b, p in positions.items():
            q = len(s) - (n - p)
            if 0 <= q < len(s) and s[q] != 1:
                freeze_all([b], "it is combined with a per-channel tensor of unknown channels")
    axes = set(positions.values())
    if len(axes) > 1:
        freeze_all(tracked, "it is combined with channels on another axis")
    for a in tracked:
        s = _shape(a)
        p = positions[a]
        if s[len(s) - (n - p)] == shape[p] and out is None:
            out = (layout[a][0], p)
    full = [
        a for a in tracked if _shape(a)[len(_shape(a)) - (n - positions[a])] == shape[positions[a]]
    ]
    for a in full[1:]:
        if positions[a] == positions[full[0]]:
            join(layout[full[0]], layout[a], "added to channels concatenated otherwise")
    return out


def _indexed(lay: Layout, index: Any, xs: tuple[int, ...] | None):
    """Layout after ``x[index]`` when the channel axis is taken whole, else None: an int drops
    an axis, ``None`` adds one (``gamma[:, None, None]`` is ``gamma.view(-1, 1, 1)``), ``...``
    stands for the axes not named."""
    if xs is None:
        return None
    idx = index if isinstance(index, tuple) else (index,)
    if sum(i is Ellipsis for i in idx) > 1 or not all(
        i is None or i is Ellipsis or isinstance(i, slice) or type(i) is int for i in idx
    ):
        return None  # a tensor or a bool index: advanced indexing
    rest = len(xs) - sum(i is not None and i is not Ellipsis for i in idx)  # axes not named
    if rest < 0:
        return None
    at = idx.index(Ellipsis) if Ellipsis in idx else len(idx)
    idx = idx[:at] + (slice(None),) * rest + idx[at + 1 :]
    axis = out = 0  # the input axis and the output axis the next entry stands for
    for i in idx:
        if i is None:
            out += 1
        elif axis == lay[1]:
            return (lay[0], out) if isinstance(i, slice) and i == slice(None) else None
        else:
            axis += 1
            out += 0 if isinstance(i, int) else 1
    return None


def _record_blocks(model: nn.Module, calls: dict, io: dict) -> list:
    """Forward hooks on every block of every container: how often each is called and its
    input/output shapes."""
    hooks = []
    for path, m in model.named_modules():
        if not isinstance(m, (nn.Sequential, nn.ModuleList)):
            continue
        for key, child in m._modules.items():
            name = f"{path}.{key}" if path else key

            def hook(_m, inp, out, name=name):
                calls[name] = calls.get(name, 0) + 1
                x = inp[0] if inp else None
                if isinstance(x, torch.Tensor) and isinstance(out, torch.Tensor):
                    io[name] = (tuple(x.shape), tuple(out.shape))

            hooks.append(child.register_forward_hook(hook))
    return hooks


def _is_block(m: nn.Module) -> bool:
    """A block (not a single layer): a module holding at least one conv or linear layer
    below it."""
    return any(isinstance(s, (nn.Conv2d, nn.Conv1d, nn.Linear)) for s in m.modules() if s is not m)


_KEEPING_MODULES: tuple[type, ...] = (
    nn.Identity, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.ReLU, nn.ReLU6, nn.GELU, nn.SiLU,
    nn.Hardswish, nn.LeakyReLU, nn.ELU, nn.SELU, nn.Mish, nn.Hardtanh, nn.PReLU,
    nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm, nn.GroupNorm,
)  # fmt: skip
"""Layers that may lie on a residual block's identity path (its shortcut, or after its
addition: ResNet's final ReLU, a post-norm transformer's layer norm): each computes every
value from the same position and channel (or normalises them), mixing none."""
_KEEPING_FUNCTIONS = {
    "relu", "relu_", "relu6", "gelu", "silu", "hardswish", "leaky_relu", "elu", "selu", "mish",
    "hardtanh", "dropout", "dropout1d", "dropout2d", "contiguous", "clone", "layer_norm",
    "batch_norm", "group_norm",
}  # fmt: skip
"""Functions and methods that may lie on a residual block's identity path (as above)."""


def _residual(
    inside: list[fx.Node], src: fx.Node, sink: fx.Node, modules: dict[str, nn.Module]
) -> bool:
    """Whether the block whose nodes are ``inside`` is a residual block: its output ``sink``
    is its input ``src`` plus what it computes, ``x + g(x)``, reached from ``src`` through
    additions and layers that mix no channels or positions only (ResNet's ``relu(x + g(x))``,
    a transformer's ``x1 + mlp(x1)`` with ``x1 = x + attn(x)``, a post-norm one's layer norms).
    Dropping it leaves the identity path its training already had. A block whose addition is
    followed by a convolution (ConvMixer's layer, ``pw(x + dw(x))``) is no residual block:
    nothing of it is an identity."""
    inside_set = set(inside)

    def inputs(n: fx.Node) -> list[fx.Node]:
        return [a for a in _nodes((n.args, n.kwargs)) if _shape(a) is not None]

    stack, seen = [sink], set()
    while stack:
        n = stack.pop()
        if n is src:
            return True
        if n in seen or n not in inside_set:
            continue
        seen.add(n)
        fn = _name(n.target)
        if n.op in ("call_function", "call_method") and fn in _ADDS:
            stack.extend(inputs(n))  # either operand may carry the identity
        elif (
            n.op == "call_module" and isinstance(modules.get(str(n.target)), _KEEPING_MODULES)
        ) or (n.op in ("call_function", "call_method") and fn in _KEEPING_FUNCTIONS):
            stack.extend(inputs(n)[:1])  # its one tensor input (a norm's weight is no path)
    return False


_ADDS = {"add", "iadd", "add_", "__add__", "__iadd__"}


def _why_kept(i, children, blocks, ends, residual, io, repeat: bool) -> str:
    """Why block ``i`` of a container cannot be dropped ("" if it can): in a
    :class:`~hwnas.spaces.module.choices.Repeat` the user declared, any block that keeps its
    input's shape; elsewhere only residual ones."""
    shapes = io.get(children[i])
    if not blocks[i]:
        return f"'{children[i]}' is a layer, not a block of layers"
    if ends[i] is None or shapes is None:
        return f"'{children[i]}' is not one block with one input and one output"
    if shapes[0] != shapes[1]:
        return f"'{children[i]}' changes its input's shape"
    if not (repeat or residual[i]):
        return f"'{children[i]}' does not add its input to its output (no residual)"
    return ""


def _runs(children, blocks, ends, residual, io, repeat: bool) -> list[tuple[int, int, str]]:
    """The container's runs of droppable blocks, each taking the previous one's output:
    (index of the first, index after the last, why the block before the first is kept)."""

    def why(i: int) -> str:
        return _why_kept(i, children, blocks, ends, residual, io, repeat)

    def chained(i: int) -> bool:
        prev, this = ends[i - 1], ends[i]
        return i > 0 and prev is not None and this is not None and prev[1] is this[0]

    runs = []
    i = 0
    while i < len(children):
        if why(i) or (i > 0 and not chained(i)):
            i += 1
            continue
        j = i + 1
        while j < len(children) and not why(j) and chained(j):
            j += 1
        runs.append((i, j, why(i - 1) if i > 0 else ""))
        i = j
    return runs


def _stages(model, gm, layout, calls, io, join, g) -> dict[str, Stage]:
    """Runs of droppable blocks in every container (:func:`_runs`), by stage name, with each
    droppable block's input and output channel groups joined."""
    from hwnas.spaces.module.choices import Repeat

    stack = {n: n.meta.get("nn_module_stack", {}) for n in gm.graph.nodes}
    modules = dict(model.named_modules())
    out: dict[str, Stage] = {}
    for path, m in model.named_modules():
        if type(m) not in (nn.Sequential, nn.ModuleList, Repeat) or len(m) < 2:
            continue
        children = [f"{path}.{k}" if path else k for k in m._modules]  # OrderedDict names too
        blocks = [_is_block(c) for c in m]
        if not any(blocks):
            continue
        ends: list[tuple[fx.Node, fx.Node] | None] = []
        residual: list[bool] = []
        for name, block in zip(children, blocks):
            inside = [n for n in gm.graph.nodes if name in stack[n] and n.op != "get_attr"]
            inside_set = set(inside)
            srcs = {
                a
                for n in inside
                for a in _nodes((n.args, n.kwargs))
                if a not in inside_set and a.op != "get_attr" and _shape(a) is not None
            }
            sinks = [n for n in inside if any(u not in inside_set for u in n.users)]
            ok = calls.get(name) == 1 and len(srcs) == 1 and len(sinks) == 1
            ends.append((next(iter(srcs)), sinks[0]) if ok else None)
            residual.append(ok and block and _residual(inside, next(iter(srcs)), sinks[0], modules))

        runs = _runs(children, blocks, ends, residual, io, repeat=type(m) is Repeat)
        for first, end, why in runs:
            start = first - 1 if first > 0 and end < len(children) else 0
            for k in range(max(first, 1), end):
                src, sink = ends[k]  # type: ignore[misc]
                a, b = layout.get(src), layout.get(sink)
                if a is not None and b is not None and a[1] == b[1]:
                    join(a, b, "it skips a block whose channels are concatenated otherwise")
                else:
                    for lay in (a, b):
                        if lay is not None:
                            for gid in lay[0]:
                                g.freeze(gid, f"'{children[k]}' can be dropped")
            if end == len(children):
                key = path
            else:
                key = f"{path}.{start}-{end - 1}" if path else f"{start}-{end - 1}"
            out[key] = Stage(key, children[start:end], first - start, why, path, start)
    return out


__all__ = ["Analysis", "Group", "Stage", "analyse", "trace"]
