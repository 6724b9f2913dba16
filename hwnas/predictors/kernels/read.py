"""The kernels a runtime actually runs for a model, read from the runtime's own optimised graph.

nn-Meter (Zhang et al., MobiSys 2021) showed that a network's latency on a device is the sum of
the latencies of the *kernels* the runtime executes, where a kernel is what the runtime makes
of the graph after its fusions (conv + batch norm + activation, conv + residual add, ...), not
an operator of the exported graph. Rather than re-implementing ONNX Runtime's fusion rules,
:func:`read_kernels` asks ONNX Runtime: it optimises the model exactly as the ``ort`` runtime
does before timing (all graph optimisations, :mod:`hwnas.runtimes.onnxruntime`), saves the
optimised graph (``SessionOptions.optimized_model_filepath``) and reads its nodes: fused
convolutions (``FusedConv``, the NCHWc layout's ``com.microsoft.nchwc:Conv`` with its fused
activation and residual input), layout reorders, ``FusedMatMul``, ``BiasGelu``,
``LayerNormalization``... Shapes and the values of computed shape tensors (a channel shuffle's
``Shape -> Gather -> Concat -> Reshape``) come from running the optimised graph once on the
inputs :mod:`hwnas.onnx_inputs` feeds (random floats, token ids within their vocabulary, masks
of ones) with every intermediate tensor as an output, so every operator ONNX Runtime can run is
read, whatever its domain.

A node is a *kernel* when it reads a tensor of the network's data (a float tensor that is not a
weight, or a tensor whose values come from the inputs' values: token ids an embedding gathers,
a mask, an int8 model's quantized activations) and writes data (a float tensor, or one whose
values come from the inputs': an int8 model's ``ConvInteger`` writes int32), or when it turns
integer weights into float ones (a QDQ model's ``DequantizeLinear`` of int8 weights, which ONNX
Runtime does not fold: it runs every call). Nodes that only compute shapes (``Shape``,
``Gather`` of a shape, ``Unsqueeze``...) are *bookkeeping*, counted but not timed (their cost
is a dispatch, which the network-level correction of :mod:`hwnas.predictors.kernels.model`
accounts for). Each kernel can be written as a one-node ONNX model (:meth:`Kernel.onnx_bytes`:
its data inputs as graph inputs, weights and computed shape values as initializers) that ONNX
Runtime runs unchanged (re-optimising a one-node optimised graph leaves it as it is), so it can
be timed alone on the device.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import HwnasError
from hwnas.export import content_hash
from hwnas.predictors.subgraphs import outer_reads
from hwnas.runtimes.onnxruntime import stop_after

SUBNORMAL_SHARE = 0.01
"""A kernel reading more than this share of subnormal floats is counted in
:attr:`ModelKernels.subnormal`."""

READ_RUN_LIMIT_S = 120.0
"""The one run of a model that reading it takes (its shapes, a loop's trip count, its kernels'
inputs) is stopped after this many seconds: a model whose loop would run for ever is refused in
one line instead of hanging."""

SMALL_CONSTANT = 64
"""Constant inputs with at most this many elements are part of a kernel's identity by value (a
Reshape's target shape, a Clip's bounds), but for float weights of more than one value (a
convolution's bias: trained, so another export of the same network had other kernels); larger
ones (weights, float or an int8 model's) by shape and type."""


@dataclass(frozen=True)
class TensorSpec:
    """One input of a kernel.

    Attributes:
        name: the tensor's name in the one-node model.
        shape: its shape.
        dtype: numpy dtype name ("float32", "int64").
        role: "x" (data fed at run time: a float tensor, token ids), "w" (a weight: its
            shape matters, not its values) or "c" (a small or non-float constant: its values
            matter).
        values: the values of a "c" tensor (a flat tuple), else ().
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    role: str
    values: tuple = ()

    @property
    def elems(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1


@dataclass(frozen=True)
class Kernel:
    """One kernel of a model as the runtime runs it.

    Attributes:
        op: ``domain:op_type`` ("com.microsoft.nchwc:Conv"; the default ONNX domain is left
            out: "MatMul").
        attrs: the node's attributes, as sorted (name, value) pairs of JSON-able values.
        inputs: its inputs (:class:`TensorSpec`), in the node's order ("" inputs left out).
        outputs: the shapes of its outputs.
        key: content hash of everything above (what identifies the kernel in the store).
        label: a short readable description ("nchwc:Conv k3 s2 g1 1x3x224x224->1x32x112x112").
    """

    op: str
    attrs: tuple[tuple[str, Any], ...]
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[tuple[int, ...], ...]
    key: str
    label: str
    model: bytes = field(default=b"", repr=False, compare=False)
    """The serialised one-node ONNX model (empty for kernels re-created from a record)."""
    node: str = field(default="", repr=False, compare=False)
    """The node's name in the optimised graph (what ONNX Runtime's profiles name it by; empty
    for kernels re-created from a record)."""

    @property
    def attr(self) -> dict[str, Any]:
        return dict(self.attrs)

    @property
    def weight_bytes(self) -> int:
        """Bytes of its weights (its "w" inputs): what it reads from memory inside a network
        whose weights do not stay in the caches between calls."""
        return sum(t.elems * np.dtype(t.dtype).itemsize for t in self.inputs if t.role == "w")

    @property
    def x_inputs(self) -> tuple[TensorSpec, ...]:
        """The inputs fed at run time."""
        return tuple(t for t in self.inputs if t.role == "x")

    def onnx_bytes(self) -> bytes:
        """The one-node ONNX model that times this kernel alone.

        Raises:
            HwnasError: the kernel was re-created from a record and has no model.
        """
        if not self.model:
            raise HwnasError(f"kernel {self.label} has no ONNX model (re-created from a record)")
        return self.model

    def record(self) -> dict[str, Any]:
        """A JSON-able description (everything but the model), for data sets."""
        return {
            "op": self.op,
            "attrs": [list(a) for a in self.attrs],
            "inputs": [
                [t.name, list(t.shape), t.dtype, t.role, list(t.values)] for t in self.inputs
            ],
            "outputs": [list(s) for s in self.outputs],
            "key": self.key,
            "label": self.label,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> Kernel:
        """Inverse of :meth:`record` (without the model)."""
        return cls(
            op=rec["op"],
            attrs=tuple((a, _freeze(v)) for a, v in rec["attrs"]),
            inputs=tuple(
                TensorSpec(n, tuple(s), d, r, tuple(v)) for n, s, d, r, v in rec["inputs"]
            ),
            outputs=tuple(tuple(s) for s in rec["outputs"]),
            key=rec["key"],
            label=rec["label"],
        )


@dataclass(frozen=True)
class ModelKernels:
    """What a runtime runs for one model.

    Attributes:
        kernels: the timed kernels, in execution order (repeats included).
        bookkeeping: how many shape-only nodes run besides them.
        ops: op -> count over every node (kernels and bookkeeping).
        subnormal: kernels whose float data read in the run more than
            :data:`SUBNORMAL_SHARE` subnormal values (activations that underflow, as a
            network's untrained weights can make them; a CPU computes on them many times
            slower than on normal floats, while each kernel is timed alone on normal ones).
        steered: ``If`` and ``Loop`` kernels whose branch, trip count or start condition the
            model computes from its input (:data:`CONTROL_INPUTS`): each is timed as the run
            on :mod:`hwnas.onnx_inputs`' inputs took it.
    """

    kernels: tuple[Kernel, ...]
    bookkeeping: int
    ops: dict[str, int]
    subnormal: int = 0
    steered: int = 0

    def distinct(self) -> dict[str, Kernel]:
        """Kernel key -> kernel, one per distinct kernel."""
        return {k.key: k for k in self.kernels}


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    return v


def _attr_value(a) -> Any:
    from onnx import helper

    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if hasattr(v, "node") and hasattr(v, "initializer"):  # a subgraph (Loop's body): a digest
        return ("graph", content_hash(v.SerializeToString(deterministic=True)))
    if isinstance(v, (list, tuple)) and v and hasattr(v[0], "node"):
        return tuple(("graph", content_hash(g.SerializeToString(deterministic=True))) for g in v)
    if isinstance(v, (list, tuple)):
        return tuple(x.decode() if isinstance(x, bytes) else x for x in v)
    if hasattr(v, "dims"):  # a tensor attribute: its shape and a digest of its values
        from onnx import numpy_helper

        arr = numpy_helper.to_array(v)
        return ("tensor", tuple(arr.shape), content_hash(arr.tobytes()))
    if isinstance(v, float):
        return round(v, 6)
    return v


def _op_name(node) -> str:
    return f"{node.domain}:{node.op_type}" if node.domain not in ("", "ai.onnx") else node.op_type


def optimise(onnx_bytes: bytes, threads: int = 1) -> Any:
    """The ``onnx.ModelProto`` of ``onnx_bytes`` after ONNX Runtime's optimisations, as the
    ``ort`` runtime makes them (all levels, CPU execution provider, ``threads`` threads).

    Raises:
        HwnasError: ONNX Runtime cannot load the model.
    """
    import onnx
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 4  # a model it cannot run is reported by the caller
    with tempfile.TemporaryDirectory(prefix="hwnas-kernels-") as tmp:
        path = Path(tmp) / "optimised.onnx"
        options.optimized_model_filepath = str(path)
        try:
            ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise HwnasError(f"ONNX Runtime cannot load the model: {first}") from None
        return onnx.load(str(path))


def _tensor_values(model, fed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every tensor of ``model`` (an optimised graph) on the inputs ``fed`` (input name ->
    array, :func:`hwnas.onnx_inputs.feeds`): name -> array."""
    import onnx
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    have = {o.name for o in probe.graph.output}
    for node in probe.graph.node:
        for out in node.output:
            if out and out not in have:
                probe.graph.output.append(onnx.ValueInfoProto(name=out))
                have.add(out)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.log_severity_level = 4  # a model it cannot run is reported by the caller
    session = ort.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    feeds = {i.name: fed[i.name] for i in session.get_inputs()}
    names = [o.name for o in session.get_outputs()]
    # a loop of a billion steps: named, not waited for
    with stop_after(READ_RUN_LIMIT_S, "one run of the model") as run:
        outputs = session.run(names, feeds, run)
    values = dict(zip(names, outputs))
    values.update(feeds)
    return values


@dataclass(frozen=True)
class Probe:
    """What one run of a model tells its graph reader.

    Attributes:
        shapes: the shape of every tensor, as run (batch 1 for a dynamic batch axis).
        small: the value of every tensor of at most :data:`SMALL_CONSTANT` elements (a Loop's
            trip count, a computed shape).
        error: ONNX Runtime's error where it could not run the model (its first line), else "".
    """

    shapes: dict[str, list[int]]
    small: dict[str, np.ndarray]
    error: str = ""


def probe(model, why: str) -> Probe:
    """One ONNX Runtime run of ``model`` (an ``onnx.ModelProto``, not optimised) on the inputs
    :mod:`hwnas.onnx_inputs` feeds: what the graph reader cannot infer without running it
    (``why``, for the error). Empty when ONNX Runtime cannot run it (the caller reports what
    it still cannot read).

    Raises:
        HwnasError: an input too large to allocate (:func:`hwnas.limits.input_size`).
    """
    from hwnas.limits import input_size
    from hwnas.onnx_inputs import feeds, model_inputs

    try:
        specs = model_inputs(model)
    except HwnasError:
        return Probe({}, {})
    for s in specs:  # the run allocates the inputs: refuse one too large (one line)
        input_size(f"reading {why} needs one run of the model; input '{s.name}'", s.shape)
    try:
        values = _tensor_values(model, feeds(specs))
    except Exception as exc:  # noqa: BLE001 (the reader names the node it cannot read)
        lines = str(exc).strip().splitlines()
        return Probe({}, {}, (lines[0] if lines else type(exc).__name__)[:300])
    return Probe(
        {name: list(v.shape) for name, v in values.items()},
        {name: v for name, v in values.items() if v.size <= SMALL_CONSTANT},
    )


def _data_dependent(model) -> set[str]:
    """The tensors of ``model`` whose values depend on its inputs' values: the graph inputs
    and every output of a node reading one, except ``Shape``/``Size`` (a shape is known before
    the values are)."""
    weights = {t.name for t in model.graph.initializer}
    out = {i.name for i in model.graph.input if i.name not in weights}
    for node in model.graph.node:  # a graph's nodes are in topological order
        if node.op_type not in ("Shape", "Size") and any(i in out for i in _reads(node)):
            out.update(o for o in node.output if o)
    return out


def _reads(node) -> list[str]:
    """Every tensor ``node`` reads: its inputs, then the outer-scope values its subgraphs
    read (a Loop's body reading the model's input by name)."""
    return [*node.input, *outer_reads(node)]


def read_kernels(
    onnx_bytes: bytes, input_shape: tuple[int, ...] | None = None, threads: int = 1
) -> ModelKernels:
    """The kernels ONNX Runtime runs for a model (see the module docstring).

    Args:
        onnx_bytes: the serialised model (as it would be timed).
        input_shape: the first input's shape (a dynamic batch axis is 1 otherwise).
        threads: intra-op threads of the session (some fusions depend on it).

    Returns:
        The model's kernels, bookkeeping count and op counts.

    Raises:
        HwnasError: ONNX Runtime cannot load or run the model (or its run does not end in
            :data:`READ_RUN_LIMIT_S`), or an input hwnas cannot feed
            (:func:`hwnas.onnx_inputs.model_inputs`: a string, a dynamic axis other than the
            batch) or allocate (:func:`hwnas.limits.input_size`).
    """
    model, values = _optimised_run(onnx_bytes, input_shape, threads)
    dynamic = _data_dependent(model)
    weights = _weights(model)
    opsets = [o for o in model.opset_import]
    kernels, bookkeeping, ops, subnormal, steered = [], 0, {}, 0, 0
    for node in model.graph.node:
        op = _op_name(node)
        ops[op] = ops.get(op, 0) + 1
        if node.op_type == "Constant":
            bookkeeping += 1
            continue
        reads = _reads(node)
        floats_in = _float_reads(node, weights, values)
        indices_in = [
            i for i in reads
            if i and i not in weights and i in dynamic and not _floating(values[i].dtype)
        ]  # fmt: skip (token ids an embedding gathers)
        data_out = [
            o for o in node.output
            if o in values and (_floating(values[o].dtype) or o in dynamic)
        ]  # fmt: skip (an int8 model's ConvInteger writes int32 data)
        # ONNX Runtime folds constant work into weights, but not a QDQ model's
        # DequantizeLinear of int8 weights: it turns them into float ones every call
        unfolded = not (floats_in or indices_in) and any(
            i in weights and _integer_weight(weights[i]) for i in reads
        ) and any(
            _floating(values[o].dtype) and values[o].size > SMALL_CONSTANT
            for o in node.output if o in values
        )  # fmt: skip
        reads_data = (floats_in or indices_in) and data_out
        if not (reads_data or unfolded) or node.op_type in ("Shape", "Size"):
            bookkeeping += 1
            continue
        kernels.append(_kernel(node, op, weights, values, opsets, dynamic, unfolded))
        subnormal += _subnormal_share([values[i] for i in floats_in]) > SUBNORMAL_SHARE
        steered += bool(_control_reads(node) & dynamic)
    return ModelKernels(tuple(kernels), bookkeeping, ops, int(subnormal), int(steered))


CONTROL_INPUTS: dict[str, tuple[int, ...]] = {"If": (0,), "Loop": (0, 1)}
"""Inputs of control-flow nodes that choose what runs (``If``'s condition; ``Loop``'s trip
count and start condition). A kernel takes the value each had in the run it was read from,
as a constant: fed, an ``If`` was timed on the branch a ``True`` input picks whatever the
model's condition (an always-false condition guarding a 7x7 convolution: 0.013 ms predicted,
0.71 ms measured), and a ``Loop`` whose condition the model computed was refused alone and
guessed (17.9 ms measured against 0.38 ms)."""


def _control_reads(node) -> set[str]:
    """The names :data:`CONTROL_INPUTS` names among ``node``'s inputs."""
    at = CONTROL_INPUTS.get(node.op_type, ())
    return {node.input[i] for i in at if i < len(node.input) and node.input[i]}


def _optimised_run(
    onnx_bytes: bytes, input_shape: tuple[int, ...] | None, threads: int
) -> tuple[Any, dict[str, np.ndarray]]:
    """The model as ONNX Runtime optimises it, and every tensor of one run of it on
    :mod:`hwnas.onnx_inputs`' inputs (name -> array).

    Raises:
        HwnasError: as :func:`read_kernels`.
    """
    from hwnas.limits import input_size
    from hwnas.onnx_inputs import bytes_inputs, feeds

    specs = bytes_inputs(onnx_bytes, input_shape)  # read on the graph as exported
    for s in specs:  # the run below allocates them
        input_size(f"input '{s.name}'", s.shape)
    model = optimise(onnx_bytes, threads)
    try:
        values = _tensor_values(model, feeds(specs))
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise HwnasError(f"ONNX Runtime cannot run the optimised model: {first}") from None
    return model, values


def _weights(model) -> dict[str, Any]:
    """The weights of ``model`` by name (``onnx.TensorProto``): its initializers and the
    values of its ``Constant`` nodes."""
    import onnx

    weights = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    t = onnx.TensorProto()
                    t.CopyFrom(a.t)
                    t.name = node.output[0]
                    weights[node.output[0]] = t
    return weights


def _float_reads(node, weights: dict[str, Any], values: dict[str, np.ndarray]) -> list[str]:
    """The float tensors ``node`` reads that are data, not weights (its subgraphs' reads
    of outer values included)."""
    return [
        i for i in _reads(node)
        if i and i not in weights and i in values and _floating(values[i].dtype)
    ]  # fmt: skip


def subnormal_reads(
    onnx_bytes: bytes, input_shape: tuple[int, ...] | None = None, threads: int = 1
) -> tuple[int, int]:
    """How many of a model's nodes, as ONNX Runtime optimises it, read data that is more than
    :data:`SUBNORMAL_SHARE` subnormal floats in one run on :mod:`hwnas.onnx_inputs`' inputs,
    and how many read float data at all: ``(subnormal, reading floats)``.

    A CPU computes on subnormal floats up to 100x slower (x86 without flush-to-zero), so a
    file whose untrained weights make its activations underflow takes far longer than the
    same network trained (a randomly initialised MobileViT: 351 ms against 19 ms). What
    ``hwnas measure`` warns about for an ONNX file; ``hwnas predict`` counts the same per kernel
    (:attr:`ModelKernels.subnormal`).

    Raises:
        HwnasError: ONNX Runtime cannot load or run the model, or the run does not end in
            :data:`READ_RUN_LIMIT_S`; an input hwnas cannot feed or allocate.
    """
    model, values = _optimised_run(onnx_bytes, input_shape, threads)
    weights = _weights(model)
    reading = [
        f for node in model.graph.node if node.op_type != "Constant"
        for f in [_float_reads(node, weights, values)] if f
    ]  # fmt: skip
    hit = sum(_subnormal_share([values[i] for i in f]) > SUBNORMAL_SHARE for f in reading)
    return int(hit), len(reading)


def _subnormal_share(arrays: list[np.ndarray]) -> float:
    """The share of subnormal values (non-zero, smaller than the type's smallest normal)
    among the elements of ``arrays`` (float tensors of any width)."""
    total = sum(a.size for a in arrays)
    if not total:
        return 0.0
    tiny = [np.finfo(a.dtype).tiny for a in arrays]
    count = sum(int(np.count_nonzero((a != 0) & (np.abs(a) < t))) for a, t in zip(arrays, tiny))
    return count / total


def _kernel(
    node, op: str, weights, values, opsets, dynamic: set[str], unfolded: bool = False
) -> Kernel:
    """One :class:`Kernel` (its one-node model built from the optimised graph); ``dynamic``:
    the tensors that depend on the model's input values (:func:`_data_dependent`);
    ``unfolded``: a node turning integer weights into float ones, whose integer weights are
    fed as its input (a model needs one; a runtime may not fold a fed tensor)."""
    import onnx
    from onnx import helper, numpy_helper

    specs: list[TensorSpec] = []
    graph_inputs, initializers, renamed = [], [], {}
    control = _control_reads(node)  # the run's values, as constants (:data:`CONTROL_INPUTS`)
    captured = [n for n in outer_reads(node) if n in weights or n in values]
    for k, name in enumerate([*node.input, *captured]):
        if not name:
            continue
        if name in renamed:
            continue
        # a subgraph reads an outer-scope value by its own name: it keeps it
        new = f"in{k}" if k < len(node.input) else name
        renamed[name] = new
        if name in weights and not (unfolded and _integer_weight(weights[name])):
            t = weights[name]
            arr_shape = tuple(int(d) for d in t.dims)
            dtype = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).name
            elems = int(np.prod(arr_shape))
            # a float weight of several values (a bias, a norm's scale) is trained, not part of
            # the kernel: another export of the network re-timed its kernels and moved the
            # prediction; a float scalar (a Pow's exponent, a Clip's bound) stays by value
            small = elems <= SMALL_CONSTANT and not (_floating(np.dtype(dtype)) and elems > 1)
            vals = tuple(numpy_helper.to_array(t).reshape(-1).tolist()) if small else ()
            specs.append(TensorSpec(new, arr_shape, dtype, "c" if small else "w", _round(vals)))
            init = onnx.TensorProto()
            init.CopyFrom(t)
            init.name = new
            initializers.append(init)
            continue
        arr = values[name] if name in values else numpy_helper.to_array(weights[name])
        if (_floating(arr.dtype) or name in dynamic or name in weights) and name not in control:
            specs.append(TensorSpec(new, tuple(arr.shape), arr.dtype.name, "x"))
            graph_inputs.append(
                helper.make_tensor_value_info(
                    new, helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape
                )
            )
        else:  # a computed shape or index: a constant of the kernel (large ones by shape)
            small = arr.size <= SMALL_CONSTANT
            vals = tuple(arr.reshape(-1).tolist()) if small else ()
            specs.append(TensorSpec(new, tuple(arr.shape), arr.dtype.name, "c" if small else "w",
                                    vals))  # fmt: skip
            initializers.append(numpy_helper.from_array(arr, new))
    outs, out_shapes = [], []
    for k, name in enumerate(node.output):
        if not name:
            continue
        arr = values[name]
        out_shapes.append(tuple(int(d) for d in arr.shape))
        outs.append(
            helper.make_tensor_value_info(
                f"out{k}", helper.np_dtype_to_tensor_dtype(arr.dtype), arr.shape
            )
        )
    single = onnx.NodeProto()
    single.CopyFrom(node)
    single.name = "kernel"
    del single.input[:]
    single.input.extend(renamed.get(i, "") for i in node.input)
    del single.output[:]
    single.output.extend(f"out{k}" if o else "" for k, o in enumerate(node.output))
    graph = helper.make_graph([single], "kernel", graph_inputs, outs, initializers)
    proto = helper.make_model(graph, opset_imports=opsets)
    proto.ir_version = min(proto.ir_version, 8)
    attrs = tuple(sorted((a.name, _attr_value(a)) for a in node.attribute))
    identity = json.dumps(
        [op, attrs, [(t.shape, t.dtype, t.role, t.values) for t in specs], out_shapes],
        default=str,
    )
    key = content_hash("kernel", identity)
    label = _label(op, attrs, specs, out_shapes)
    return Kernel(op, attrs, tuple(specs), tuple(out_shapes), key, label, proto.SerializeToString(),
                  node.name)  # fmt: skip


def _integer_weight(t) -> bool:
    """An initializer (``onnx.TensorProto``) of integer weights: more than
    :data:`SMALL_CONSTANT` elements of an integer type (an int8 model's)."""
    from onnx import helper

    dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
    return np.issubdtype(dtype, np.integer) and int(np.prod(t.dims)) > SMALL_CONSTANT


def _floating(dtype) -> bool:
    """A float tensor of any width (float32, float16, float64): data or weights, not a shape."""
    return bool(np.issubdtype(dtype, np.floating))


def _round(vals: tuple) -> tuple:
    return tuple(round(v, 6) if isinstance(v, float) else v for v in vals)


def _label(op, attrs, specs, out_shapes) -> str:
    a = dict(attrs)
    parts = [op.replace("com.microsoft.", "").replace("com.microsoft:", "ms:")]
    if "kernel_shape" in a:
        parts.append("k" + "x".join(map(str, a["kernel_shape"])))
    if "strides" in a and any(s != 1 for s in a["strides"]):
        parts.append("s" + "x".join(map(str, a["strides"])))
    if a.get("group", 1) != 1:
        parts.append(f"g{a['group']}")
    if a.get("activation"):
        parts.append(str(a["activation"]))
    ins = ",".join("x".join(map(str, t.shape)) for t in specs if t.role == "x")
    outs = ",".join("x".join(map(str, s)) for s in out_shapes)
    return " ".join(parts) + f" {ins}->{outs}"
