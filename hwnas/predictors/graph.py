"""Graph features: a fixed-length cost description of any convolutional network.

The same columns are read from an ONNX graph (:func:`onnx_graph_features`, for a user's own
model) and computed analytically for the architectures of a search space (the space
featurizers in :mod:`hwnas.predictors.featurize`, for speed: 15,625 NAS-Bench-201
architectures in milliseconds instead of hours of ONNX export). They are additive over the
graph's nodes (counts, multiply-accumulates, tensor elements), which is what latency and
energy models built from per-layer costs need (nn-Meter, Zhang et al., MobiSys 2021, predicts
latency as a sum of kernel latencies).

Conventions (batch 1): a convolution is *depthwise* when ``group == C_in > 1``, *grouped* when
``1 < group < C_in``, *pointwise* when its kernel is 1x1 and ``group == 1``, *dense* otherwise;
1-D and 3-D convolutions (audio, video) count as 2-D ones with the same sizes' products.
Multiply-accumulates (MACs) count convolution (``Conv``, ``ConvTranspose``) and Gemm/MatMul
products; the products of recurrent layers (``LSTM``, ``GRU``, ``RNN``), contracting
``Einsum`` nodes and opset 23's ``Attention`` (queries x keys and scores x values, its softmax
an activation) count as Gemm MACs. Element counts are the output elements of a node. The nodes
of a control-flow node's subgraphs are counted as the node runs them: a ``Loop``'s body once
per iteration, a ``Scan``'s once per scanned element, an ``If``'s costlier branch (their
parameters once; :mod:`hwnas.predictors.subgraphs`), and a local function's (a module exported
by ``export_modules_as_functions``) as if inlined. ONNX ``Identity``, ``Shape``,
``Constant``, ``Flatten`` and other shape bookkeeping nodes, and cheap element-wise math, have
no cost here. Any other operator (``Resize``, a quantised convolution, a loop whose number of
iterations depends on the data...) is not counted either, but it is named:
:attr:`GraphModel.uncounted`, and the predictions that rest on these features say so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hwnas.errors import HwnasError
from hwnas.predictors.subgraphs import CONTROL_FLOW

if TYPE_CHECKING:  # pragma: no cover
    import onnx

GRAPH_COLUMNS: tuple[str, ...] = (
    "macs_conv_pointwise",
    "macs_conv_dense",
    "macs_conv_depthwise",
    "macs_conv_grouped",
    "macs_gemm",
    "params",
    "n_conv",
    "n_conv_depthwise",
    "n_conv_strided",
    "conv_in_elems",
    "conv_out_elems",
    "n_pool",
    "pool_out_elems",
    "n_global_pool",
    "n_add",
    "add_elems",
    "n_mul",
    "mul_elems",
    "n_act",
    "act_elems",
    "transpose_elems",
    "input_elems",
)
"""Names of the graph-feature columns, in order."""

COLUMN = {name: i for i, name in enumerate(GRAPH_COLUMNS)}

ACTIVATIONS = frozenset(
    ("Relu HardSwish HardSigmoid Sigmoid Clip LeakyRelu Tanh Gelu Elu Erf Softmax Mish Swish "
     "LayerNormalization RMSNormalization "
     # ONNX Runtime's own (com.microsoft), in models its transformer optimiser wrote
     "SkipLayerNormalization SimplifiedLayerNormalization SkipSimplifiedLayerNormalization "
     "EmbedLayerNormalization BiasGelu FastGelu QuickGelu BiasSoftmax").split()
)  # fmt: skip
"""Element-wise and row-wise nonlinear nodes counted as activations (``n_act``, ``act_elems``):
a GELU exported at opset 17 is ``Erf`` between Div/Add/Mul, a transformer's attention has
``Softmax`` and its layer norms ``LayerNormalization`` (``RMSNormalization`` at opset 23)."""
POOLS = frozenset({"AveragePool", "MaxPool", "LpPool"})
GLOBAL_POOLS = frozenset({"GlobalAveragePool", "GlobalMaxPool"})
RESHAPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity"})
RECURRENT = {"LSTM": 4, "GRU": 3, "RNN": 1}
"""Recurrent operators and their gates: each step multiplies ``[x, h]`` by ``gates * hidden``
weight columns per direction."""
NOT_COUNTED = frozenset(
    ("Shape Size Gather GatherElements GatherND Constant ConstantOfShape Cast CastLike Concat "
     "Slice Split Expand Tile Pad Range Where Equal Less LessOrEqual Greater GreaterOrEqual Not "
     "And Or Xor NonZero Dropout BatchNormalization ScatterND ScatterElements Trilu "
     "Neg Abs Exp Log Sqrt Reciprocal Pow Min Max Mean Floor Ceil Round Sign Mod "
     "Sin Cos Softplus Softsign Selu ThresholdedRelu PRelu HardMax LogSoftmax IsNaN IsInf "
     "ReduceMean ReduceSum ReduceMax ReduceMin ReduceProd ReduceL2 ArgMax ArgMin "
     "InstanceNormalization GroupNormalization DepthToSpace SpaceToDepth RotaryEmbedding").split()
)  # fmt: skip
"""Operators the features leave out by design: shape bookkeeping, and element-wise math or
reductions that are cheap beside the products (ONNX Runtime folds BatchNormalization into the
convolution before it). Every other operator the reader does not count is reported."""


class GraphAccumulator:
    """Adds up graph features node by node (used by the ONNX reader and the space featurizers).

    Shapes are (C, H, W) of one image; MACs and elements are per image.
    """

    def __init__(self) -> None:
        self.values = np.zeros(len(GRAPH_COLUMNS), dtype=np.float64)

    def add(self, column: str, value: float) -> None:
        self.values[COLUMN[column]] += value

    def conv(
        self,
        c_in: int,
        c_out: int,
        kernel: tuple[int, int] | int,
        groups: int,
        in_hw: tuple[int, int],
        out_hw: tuple[int, int],
        transposed: bool = False,
        batch: int = 1,
    ) -> None:
        """A convolution from (c_in, *in_hw) to (c_out, *out_hw); ``transposed``: a transposed
        convolution (each input element meets ``c_out // groups * kh * kw`` weights);
        ``batch``: of so many images (its MACs and elements scale, its parameters do not)."""
        kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
        out_elems = c_out * out_hw[0] * out_hw[1]
        if transposed:
            macs = c_in * in_hw[0] * in_hw[1] * (c_out // groups) * kh * kw
        else:
            macs = out_elems * (c_in // groups) * kh * kw
        if groups > 1 and groups == c_in:
            kind = "macs_conv_depthwise"
            self.add("n_conv_depthwise", 1)
        elif groups > 1:
            kind = "macs_conv_grouped"
        elif kh * kw == 1:
            kind = "macs_conv_pointwise"
        else:
            kind = "macs_conv_dense"
        self.add(kind, macs * batch)
        self.add("params", c_out * (c_in // groups) * kh * kw)
        self.add("n_conv", 1)
        if out_hw[0] < in_hw[0] or out_hw[1] < in_hw[1]:
            self.add("n_conv_strided", 1)
        self.add("conv_in_elems", c_in * in_hw[0] * in_hw[1] * batch)
        self.add("conv_out_elems", out_elems * batch)

    def gemm(self, n_in: int, n_out: int) -> None:
        """A fully connected layer of one row."""
        self.add("macs_gemm", n_in * n_out)
        self.add("params", n_in * n_out)

    def elementwise(self, kind: str, elems: float, count: float = 1) -> None:
        """``kind`` is "pool", "add", "mul", "act" or "transpose"."""
        if kind == "pool":
            self.add("n_pool", count)
            self.add("pool_out_elems", elems)
        elif kind == "transpose":
            self.add("transpose_elems", elems)
        else:
            self.add(f"n_{kind}", count)
            self.add(f"{kind}_elems", elems)


@dataclass(frozen=True)
class GraphModel:
    """A model known only by its graph (for example a user's ONNX file), not by a space.

    Attributes:
        label: a name for tables and errors (the file name).
        features: its graph features, shape (len(GRAPH_COLUMNS),).
        onnx: the serialised model, when read from a file (what the kernel-level predictor
            reads its kernels from); empty otherwise.
        uncounted: operators of its graph the features do not count, type (:func:`op_name`:
            control characters escaped) -> nodes (:func:`read_graph`); a prediction from the
            features leaves their time out.
        inputs: its inputs as hwnas feeds them (:func:`hwnas.onnx_inputs.model_inputs`: a
            dynamic batch at 1), read with the file; empty otherwise.
        batch: the batch size it was exported at (its first input's static first axis), or
            None: a dynamic batch axis, or a first input of rank 3, whose first axis may be a
            sequence (PyTorch's sequence-first layout).
    """

    label: str
    features: np.ndarray
    onnx: bytes = field(default=b"", repr=False, compare=False)
    uncounted: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    inputs: tuple = field(default=(), repr=False, compare=False)
    batch: int | None = field(default=None, repr=False, compare=False)

    def __str__(self) -> str:
        return self.label

    def __hash__(self) -> int:
        return hash(self.label)


def _dims(value_info, per_image: bool = True) -> list[int] | None:
    """Dimensions of a tensor at batch 1 (``per_image``; else its first one as written), or
    None when a non-batch dimension is unknown."""
    dims = list(value_info.type.tensor_type.shape.dim)
    out = [1] if dims else []
    if dims and not per_image and dims[0].HasField("dim_value") and dims[0].dim_value > 0:
        out = [int(dims[0].dim_value)]
    for d in dims[1:]:
        if not d.HasField("dim_value") or d.dim_value <= 0:
            return None
        out.append(int(d.dim_value))
    return out


def _infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """ONNX shape inference at batch 1, with data propagation so that shapes computed in the
    graph (``zeros_like``, channel shuffles exported as Shape/Gather/Reshape) are resolved."""
    from onnx import shape_inference

    model = type(model).FromString(model.SerializeToString())  # do not touch the caller's
    for vi in [*model.graph.input, *model.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value"):
            dims[0].dim_value = 1
    try:
        return shape_inference.infer_shapes(model, data_prop=True)
    except Exception as exc:  # onnx raises InferenceError and others
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HwnasError(f"ONNX shape inference failed: {first}") from None


def onnx_graph_features(model: onnx.ModelProto) -> np.ndarray:
    """Graph features of an ONNX model at batch 1, shape (len(GRAPH_COLUMNS),).

    Runs ONNX shape inference; a dynamic (symbolic) batch dimension counts as 1. Shapes it
    cannot propagate (a channel split's Slice bounds computed by Shape/Gather/Div) are read
    from one run of the model by ONNX Runtime on a random input
    (:func:`hwnas.predictors.kernels.read.probe`), so every operator ONNX Runtime runs
    is read.

    Raises:
        HwnasError: the graph has a convolution or Gemm whose shapes cannot be inferred.
    """
    return read_graph(model)[0]


def read_graph(model: onnx.ModelProto, per_image: bool = True) -> tuple[np.ndarray, dict[str, int]]:
    """(:func:`onnx_graph_features` of ``model``, the operators it holds that the features do
    not count: type -> nodes), e.g. ``{"Resize": 2}``; see the module docstring. A type is
    named as :func:`op_name` shows it (a file's op type is any string: its control characters,
    a newline included, are escaped, so a warning listing it stays one line).
    ``per_image=False`` counts every tensor at its written first axis instead of one image
    (what a kernel of a static model does: :func:`hwnas.predictors.kernels.features.macs`).

    Raises:
        HwnasError: as :func:`onnx_graph_features`.
    """
    import onnx
    from onnx import numpy_helper

    if model.functions:  # a module exported as a local function (export_modules_as_functions)
        from onnx.inliner import inline_local_functions

        model = inline_local_functions(model)
    graph = _infer_shapes(model).graph
    shapes: dict[str, list[int]] = {}
    full: dict[str, list[int | None]] = {}  # every dimension as written (None: symbolic)
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        if not vi.type.tensor_type.HasField("shape"):  # rank unknown (a Loop's output), not []
            continue
        dims = _dims(vi, per_image)
        if dims is not None:
            shapes[vi.name] = dims
        full[vi.name] = [
            int(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else None
            for d in vi.type.tensor_type.shape.dim
        ]
    for init in graph.initializer:
        shapes[init.name] = list(init.dims)
    missing = [o for node in graph.node for o in node.output if o and o not in shapes]
    # a first axis that is symbolic but not the inputs' batch: the batch folded with another
    # axis (Swin's windows, (batch x windows, tokens, width)), not one image
    batch_names = {
        i.type.tensor_type.shape.dim[0].dim_param
        for i in graph.input
        if i.type.tensor_type.shape.dim and i.type.tensor_type.shape.dim[0].dim_param
    }
    folded = [
        vi.name
        for vi in graph.value_info
        if per_image
        and vi.name in full
        and len(full[vi.name]) >= 2
        and full[vi.name][0] is None
        and None not in full[vi.name][1:]
        and vi.type.tensor_type.shape.dim[0].dim_param not in batch_names
    ]
    probed: set[str] = set()  # shapes from the run: as the model runs them, not per image
    run = None  # one run of the model, made where reading it needs one
    if missing or folded:  # shapes ONNX inference cannot propagate (a chunk's computed Slice
        from hwnas.predictors.kernels.read import probe  # bounds), or whole at batch 1

        run = probe(model, "the shapes ONNX cannot infer")
        for name, shape in run.shapes.items():
            if name not in shapes:
                shapes[name] = shape
                probed.add(name)
        for name in folded:  # the run is at batch 1: its first axis as it is there
            if name in run.shapes and len(run.shapes[name]) == len(full[name]):
                full[name] = list(run.shapes[name])
    # a tensor of rank 2 or more is counted as written, over the batch the model was exported
    # at: the first axis of a sequence-first tensor (PyTorch's attention, (tokens, batch,
    # width)) or of a (tokens x batch, width) matrix is not the batch
    batch = float(_counted_batch(model))
    initializers = {init.name for init in graph.initializer}
    constants = set(initializers)
    weights = {init.name: init for init in graph.initializer}
    for node in graph.node:  # Constant nodes make weights too (some exporters)
        if node.op_type == "Constant":
            constants.update(node.output)
            for attr in node.attribute:
                if attr.name == "value":
                    shapes[node.output[0]] = list(numpy_helper.to_array(attr.t).shape)
                    weights[node.output[0]] = attr.t
        elif node.op_type in RESHAPES | {"Cast"} and node.input[0] in constants:
            # a weight re-laid out or shared through an Identity (the TorchScript exporter's
            # for a layer deep-copied): a weight still, whose first axis is no batch
            constants.update(o for o in node.output if o)
            dims = full.get(node.output[0])
            if dims and None not in dims:
                shapes[node.output[0]] = dims

    acc = GraphAccumulator()
    uncounted: Counter[str] = Counter()
    inputs = [i for i in graph.input if i.name not in initializers]
    for i in inputs:
        acc.add("input_elems", float(np.prod((_dims(i) or [1])[1:])))

    producer = {out: node for node in graph.node for out in node.output}
    scope = _Scope(model, graph, shapes, full, weights, per_image, run)

    def written(name: str) -> float | None:
        """Elements of one image's tensor ``name`` of rank 2 or more, from its shape as written
        (or as run) over the exported batch; None otherwise."""
        if not per_image or name in constants:
            return None
        dims = full.get(name)
        if dims and len(dims) >= 2 and None not in dims:
            return float(np.prod(dims)) / batch
        if name in probed and len(shapes[name]) >= 2:
            return float(np.prod(shapes[name])) / batch
        return None

    def elems(name: str, depth: int = 0) -> float:
        """Elements of one image's tensor ``name``; through element-preserving reshapes when
        its own shape is unknown; 0 if unknown."""
        shape = shapes.get(name)
        if shape:
            size = written(name)
            return size if size is not None else float(np.prod(shape[1:] if per_image else shape))
        node = producer.get(name)
        if node is not None and node.op_type in RESHAPES and depth < 8:
            return elems(node.input[0], depth + 1)
        return 0.0

    # what reading cannot infer where the run that would have told it failed: that failure
    failed = run.error if run is not None else ""
    ran = f" (ONNX Runtime could not run the model as fed: {failed})" if failed else ""
    for node in graph.node:
        op = node.op_type
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if op == "Conv":
            x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
            y = shapes.get(node.output[0])
            if not _conv_shapes(x, w, y):
                raise HwnasError(
                    f"cannot infer the shapes of Conv node '{node.name or node.output[0]}' "
                    f"(its input, weight and output need static sizes){ran}"
                )
            groups = int(attrs.get("group", 1))
            acc.conv(x[1], y[1], _plane(w[2:]), groups, _plane(x[2:]), _plane(y[2:]),
                     batch=1 if per_image else x[0])  # fmt: skip
        elif op in ("Gemm", "MatMul"):
            a, b = shapes.get(node.input[0]), shapes.get(node.input[1])
            if not a or not b:
                raise HwnasError(f"cannot infer the shapes of {op} node '{node.name}'{ran}")
            transposed = op == "Gemm" and int(attrs.get("transB", 0)) == 1
            n_in, n_out = (b[-1], b[0]) if transposed else (b[-2] if len(b) >= 2 else b[0], b[-1])
            rows = float(np.prod(a[1:-1] if per_image else a[:-1])) if len(a) >= 2 else 1.0
            size = written(node.input[0])
            if size is not None and a[-1] > 0:  # (tokens, batch, width) x W: every token
                k = a[0] if op == "Gemm" and int(attrs.get("transA", 0)) else a[-1]
                rows = size / k
            acc.add("macs_gemm", n_in * n_out * rows)
            if node.input[1] in constants:  # weights (not activation x activation)
                acc.add("params", n_in * n_out)
        elif op in POOLS:
            acc.elementwise("pool", elems(node.output[0]))
        elif op in GLOBAL_POOLS:
            acc.add("n_global_pool", 1)
        elif op in ("Add", "Sum", "Mul", "Sub", "Div"):
            tensors = [n for n in node.input if n not in constants]
            out = elems(node.output[0])
            big = [n for n in tensors if elems(n) == out]
            if out > 0 and len(tensors) >= 2 and big:  # tensor-tensor, not bias/scale/shape math
                acc.elementwise("mul" if op in ("Mul", "Div") else "add", out)
        elif op in ACTIVATIONS:
            acc.elementwise("act", elems(node.output[0]))
        elif op == "Transpose":
            acc.elementwise("transpose", elems(node.output[0]))
        elif op == "ConvTranspose":
            if not _transposed_conv(acc, node, attrs, shapes, 1 if per_image else None):
                uncounted[op] += 1
        elif op in RECURRENT:
            if not _recurrent(acc, node, attrs, shapes, full):
                uncounted[op] += 1
        elif op == "Einsum":
            if not _einsum(acc, node, attrs, shapes, full, constants, elems):
                uncounted[op] += 1
        elif op == "Attention" and node.domain in ("", "ai.onnx"):  # opset 23's
            counted = attention_products(*[shapes.get(n) if n else None for n in
                                           (list(node.input) + [""] * 6)[:6]], attrs)  # fmt: skip
            if counted is None:
                uncounted[op] += 1
            else:
                acc.add("macs_gemm", counted[0])
                acc.elementwise("act", counted[1])  # its softmax over the scores
        elif op in ("Attention", "MultiHeadAttention") and node.domain == "com.microsoft":
            counted = _fused_attention(node, attrs, shapes)
            if counted is None:
                uncounted[op] += 1
            else:
                acc.add("macs_gemm", counted[0])
                acc.add("params", counted[2])
                acc.elementwise("act", counted[1])
        elif op in CONTROL_FLOW:
            counted = _control_flow(node, attrs, scope)
            if counted is None:
                uncounted[op] += 1
            else:
                acc.values += counted[0]
                uncounted.update(counted[1])
        elif op not in NOT_COUNTED and op not in RESHAPES:
            uncounted[op] += 1
    named: Counter[str] = Counter()
    for op, n in uncounted.items():
        named[op_name(op)] += n
    return acc.values, dict(named)


def op_name(op: str) -> str:
    """An ONNX op type as shown in warnings: every character that is not printable (control
    characters, a newline or carriage return included, Unicode line separators) as Python
    escapes it (``\\n``, ``\\x1b``, ``\\u2028``); ``op`` itself when it has none."""
    if op.isprintable():
        return op
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in op)


class _Scope:
    """What a control-flow node's subgraphs may read of the graph around it (see
    :mod:`hwnas.predictors.subgraphs`): its weights, its tensors' types and shapes at batch
    1, and the values of small tensors (a Loop's trip count), from the weights or else from
    one run of the model."""

    def __init__(self, model, graph, shapes, full, weights, per_image, run=None) -> None:
        self.model, self.weights, self.opsets = model, weights, model.opset_import
        self.per_image = per_image
        self.types: dict[str, tuple[int, list[int | None]]] = {}
        self.written = full  # every dimension as written (None: symbolic)
        for vi in [*graph.input, *graph.value_info, *graph.output]:
            tt = vi.type.tensor_type
            if tt.HasField("shape") and vi.name in full:
                self.types[vi.name] = (tt.elem_type, shapes.get(vi.name) or full[vi.name])
        for name, shape in shapes.items():  # probed where ONNX could not infer (float data)
            self.types.setdefault(name, (1, shape))
        self._run: dict | None = None if run is None else run.small  # the shapes' run, reused

    def value(self, name: str) -> np.ndarray | None:
        """The value of tensor ``name``: a weight's, or from one run of the model (None when
        it cannot run)."""
        from onnx import numpy_helper

        if name in self.weights:
            return numpy_helper.to_array(self.weights[name])
        if self._run is None:
            from hwnas.predictors.kernels.read import probe

            try:
                self._run = probe(self.model, "a loop's iterations").small
            except HwnasError:  # an input too large to run: the loop stays uncounted
                self._run = {}
        return self._run.get(name)

    def type(self, name: str) -> tuple[int, list[int | None]]:
        """(ONNX element type, shape at batch 1) of tensor ``name``.

        Raises:
            KeyError: unknown.
        """
        if name in self.weights:
            t = self.weights[name]
            return t.data_type, list(t.dims)
        return self.types[name]


def _control_flow(node, attrs, scope: _Scope) -> tuple[np.ndarray, dict[str, int]] | None:
    """Graph features of a Loop, Scan or If node and the operators its subgraphs hold that
    they do not count: a Loop's body counted once per iteration (its trip count a weight, or
    read from one run of the model, and its condition absent or constant true), a Scan's
    once per element of its scanned axis, an If's costlier branch (by multiply-accumulates:
    which branch runs depends on the data). None when that cannot be read: a loop whose
    number of iterations depends on the data, a subgraph with shapes ONNX cannot infer."""
    from onnx import TensorProto

    from hwnas.predictors.subgraphs import body_model

    def read(graph, input_types):
        try:
            features, uncounted = read_graph(
                body_model(graph, input_types, scope.weights, scope.types, scope.opsets),
                scope.per_image,
            )
        except (HwnasError, KeyError):
            return None
        features = features.copy()
        features[COLUMN["input_elems"]] = 0.0  # the body's inputs are the graph's tensors
        return features, uncounted

    def declared(i, fallback):  # a body input's own element type, else the outer tensor's
        return i.type.tensor_type.elem_type or fallback[0], fallback[1]

    try:
        if node.op_type == "If":
            branches = [read(attrs[b], []) for b in ("then_branch", "else_branch")]
            if None in branches:
                return None
            macs = [i for n, i in COLUMN.items() if n.startswith("macs_")]
            return max(branches, key=lambda b: (b[0][macs].sum(), b[0].sum()))
        body = attrs["body"]
        if node.op_type == "Loop":
            from hwnas.predictors.subgraphs import computes_its_condition

            if computes_its_condition(node):  # iterations known only by running it
                return None
            trip = node.input[0] if node.input else ""
            cond = node.input[1] if len(node.input) > 1 else ""
            trips = scope.value(trip) if trip else None
            go = scope.value(cond) if cond else np.array(True)
            if trips is None or trips.size != 1 or go is None or not bool(go.reshape(-1)[0]):
                return None
            given = [(TensorProto.INT64, []), (TensorProto.BOOL, [])]
            given += [scope.type(n) for n in node.input[2:]]
            steps = float(trips.reshape(-1)[0])
        else:  # Scan (opset 9+): state values, then the scanned inputs
            n_scan = int(attrs["num_scan_inputs"])
            states, scanned = node.input[: len(node.input) - n_scan], node.input[-n_scan:]
            axes = list(attrs.get("scan_input_axes") or [0] * n_scan)
            given = [scope.type(n) for n in states]
            steps = None
            for name, axis in zip(scanned, axes):
                elem, shape = scope.type(name)
                axis = axis % len(shape)
                written = scope.written.get(name) or []  # a time-first axis 0 is no batch
                size = written[axis] if len(written) == len(shape) else None
                steps = (size or shape[axis]) if steps is None else steps
                given.append((elem, shape[:axis] + shape[axis + 1 :]))
            if not steps:
                return None
        counted = read(body, [declared(i, t) for i, t in zip(body.input, given)])
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if counted is None:
        return None
    features = counted[0] * steps
    features[COLUMN["params"]] = counted[0][COLUMN["params"]]  # the same weights every step
    return features, counted[1]


def attention_products(q, k, v, mask=None, past_key=None, past_value=None, attrs=None):
    """(multiply-accumulates, attention scores) of one ONNX ``Attention`` node (opset 23: the
    dynamo exporter's ``scaled_dot_product_attention``) per batch element: queries times keys
    and scores times values, ``heads x q_seq x kv_seq x (head_size + v_head_size)``, the keys
    of a cache (``past_key``) included. ``q``, ``k``, ``v``: shapes (batch, heads, seq, size),
    or (batch, seq, hidden) with the ``q_num_heads`` and ``kv_num_heads`` attributes; None
    where a shape or an attribute it needs is unknown."""
    attrs = attrs or {}
    if not q or not k or not v or len(q) != len(k) or len(q) not in (3, 4):
        return None
    past = past_key[-2] if past_key and len(past_key) == 4 else 0
    if len(q) == 4:
        heads, q_seq, size = q[1], q[2], q[3]
        kv_seq, v_size = k[2] + past, v[3]
    else:
        heads, kv_heads = int(attrs.get("q_num_heads", 0)), int(attrs.get("kv_num_heads", 0))
        if heads <= 0 or kv_heads <= 0:
            return None
        q_seq, size = q[1], q[2] / heads
        kv_seq, v_size = k[1] + past, v[2] / kv_heads
    scores = float(heads * q_seq * kv_seq)
    return scores * (size + v_size), scores


def _fused_attention(node, attrs, shapes) -> tuple[float, float, float] | None:
    """(multiply-accumulates, attention scores, parameters) per batch element of ONNX
    Runtime's fused ``com.microsoft`` ``Attention`` (input (batch, seq, hidden) times its packed
    query/key/value weights, then attention over the sequence) or ``MultiHeadAttention``
    (query (batch, seq, hidden), key and value (batch, kv_seq, hidden) already projected): the
    nodes its transformer optimiser writes for BERT-like models. None where a shape or the
    number of heads is unknown."""
    heads = int(attrs.get("num_heads", 0))
    if heads <= 0:
        return None
    if node.op_type == "Attention":
        x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
        if not x or not w or len(x) != 3 or len(w) != 2:
            return None
        sizes = list(attrs.get("qkv_hidden_sizes") or [w[1] / 3] * 3)
        seq, params = x[1], float(w[0] * w[1])
        products = seq * params + seq * seq * (sizes[0] + sizes[2])
        return float(products), float(heads * seq * seq), params
    names = list(node.input) + [""] * 3
    q, k, v = (shapes.get(n) if n else None for n in names[:3])
    if not q or not k or not v or len(q) != 3:
        return None
    kv_seq = k[1] if len(k) == 3 else k[2]  # (batch, kv_seq, hidden), (batch, heads, kv_seq, d)
    v_hidden = v[2] if len(v) == 3 else v[1] * v[3]
    scores = float(heads * q[1] * kv_seq)
    return float(q[1] * kv_seq * (q[2] + v_hidden)), scores, 0.0


def _conv_shapes(x, w, y) -> bool:
    """Whether a convolution's input, weight and output shapes are known and agree in rank:
    (N, C, *spatial) with 1 to 3 (or more) spatial dimensions."""
    return bool(x and w and y) and len(x) == len(w) == len(y) >= 3 and all(d > 0 for d in x + y)


def _plane(spatial) -> tuple[int, int]:
    """Spatial sizes (a 1-D, 2-D or 3-D convolution's length, height x width, or depth x
    height x width) as the two of a 2-D convolution with the same products: a 1-D length L is
    1 x L, a 3-D D x H x W is (D * H) x W. Multiply-accumulates, parameters and elements are
    products of these sizes, so they are counted exactly."""
    dims = [int(d) for d in spatial]
    if len(dims) == 1:
        return 1, dims[0]
    return int(np.prod(dims[:-1])), dims[-1]


def _transposed_conv(acc, node, attrs, shapes, batch: int | None = 1) -> bool:
    """Count a ConvTranspose node (1-D, 2-D or 3-D), for ``batch`` inputs (None: its input's
    first axis); False when its shapes are unknown."""
    x, w = shapes.get(node.input[0]), shapes.get(node.input[1])
    y = shapes.get(node.output[0])
    if not _conv_shapes(x, w, y):
        return False
    groups = int(attrs.get("group", 1))  # weight: (C_in, C_out / group, *kernel)
    acc.conv(x[1], y[1], _plane(w[2:]), groups, _plane(x[2:]), _plane(y[2:]), transposed=True,
             batch=x[0] if batch is None else batch)  # fmt: skip
    return True


def _recurrent(acc, node, attrs, shapes, full) -> bool:
    """Count an LSTM / GRU / RNN node's products as Gemm MACs (every step, every direction);
    False when its weights or its number of steps are unknown."""
    w, r = shapes.get(node.input[1]), shapes.get(node.input[2])
    x = full.get(node.input[0])
    if not w or not r or len(w) != 3 or len(r) != 3 or not x or len(x) != 3:
        return False
    steps = x[1] if int(attrs.get("layout", 0)) == 1 else x[0]
    if steps is None:
        return False
    directions, gate_rows, n_in = w
    hidden = r[2]
    per_step = directions * gate_rows * (n_in + hidden)
    acc.add("macs_gemm", steps * per_step)
    acc.add("params", per_step)
    return True


def _einsum(acc, node, attrs, shapes, full, constants, elems) -> bool:
    """Count an Einsum node: a contraction's products as Gemm MACs (the product of every index's
    size), a pure permutation as a transpose; False when an operand's shape is unknown.

    An operand's first axis is taken as written where it is static (a sequence-first operand's
    first axis is its steps, not the batch), else as the batch (1)."""
    equation = attrs.get("equation", b"")
    equation = (equation.decode() if isinstance(equation, bytes) else equation).replace(" ", "")
    if "->" not in equation or "..." in equation:
        return False
    lhs, rhs = equation.split("->")
    operands = lhs.split(",")
    sizes: dict[str, int] = {}
    for term, name in zip(operands, node.input):
        written = full.get(name)
        shape = written if written and None not in written else shapes.get(name)
        if not shape or len(shape) != len(term):
            return False
        for letter, size in zip(term, shape):
            sizes[letter] = max(sizes.get(letter, 1), size)
    if len(operands) == 1 and set(operands[0]) == set(rhs):
        acc.elementwise("transpose", elems(node.output[0]))
        return True
    acc.add("macs_gemm", float(np.prod([sizes[c] for c in sizes])))
    for term, name in zip(operands, node.input):
        if name in constants:
            acc.add("params", float(np.prod([sizes[c] for c in term])))
    return True


def load_graph_model(path: str | Path, dims: dict[str, int] | None = None) -> GraphModel:
    """A :class:`GraphModel` from an ONNX file, the dynamic input axes ``dims`` names fixed
    to its sizes (:func:`hwnas.onnx_inputs.fix_dims`).

    Raises:
        HwnasError: missing, corrupt or unsupported ONNX file, or one with an input hwnas
            cannot feed (:func:`hwnas.onnx_inputs.model_inputs`; one line naming it).
    """
    from hwnas.onnx_inputs import model_inputs, read_fixed

    model, data, _ = read_fixed(path, dims)
    inputs = model_inputs(model, str(path))  # feedable; allocated only where the model is run
    try:
        features, uncounted = read_graph(model)
    except HwnasError as exc:
        raise HwnasError(f"{path}: {exc}") from None
    return GraphModel(
        Path(path).name, features, data, uncounted, tuple(inputs), _exported_batch(model)
    )


def _counted_batch(model) -> int:
    """The batch a model's written tensors hold (:func:`read_graph` counts them over it):
    :func:`_exported_batch`; for a first input of rank 3, its second axis's batch of 1 when
    that axis is 1 (sequence first, PyTorch's default layout: (tokens, 1, width)), else its
    first axis (batch first); 1 where it is dynamic."""
    exported = _exported_batch(model)
    if exported is not None:
        return exported
    weights = {t.name for t in model.graph.initializer}
    first = next((i for i in model.graph.input if i.name not in weights), None)
    dims = [d.dim_value if d.HasField("dim_value") else 0
            for d in (first.type.tensor_type.shape.dim if first is not None else [])]  # fmt: skip
    if len(dims) == 3 and dims[0] > 0 and dims[1] != 1:
        return dims[0]
    return 1


def _exported_batch(model) -> int | None:
    """:attr:`GraphModel.batch` of an ``onnx.ModelProto``."""
    weights = {t.name for t in model.graph.initializer}
    first = next((i for i in model.graph.input if i.name not in weights), None)
    dims = list(first.type.tensor_type.shape.dim) if first is not None else []
    if len(dims) == 3 or not dims or not dims[0].HasField("dim_value"):
        return None
    return int(dims[0].dim_value) if dims[0].dim_value > 0 else None
