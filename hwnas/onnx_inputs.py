"""What hwnas feeds an ONNX model it times or reads: one value per graph input.

A model's latency barely depends on its input *values*, but some values must make sense for
the model to run the way it will in use:

- float inputs (float32, float16, float64) get standard-normal values;
- integer inputs used as indices (token ids, position or segment ids: the ``indices`` of a
  ``Gather``/``GatherElements``, directly or through casts and reshapes) get uniform values in
  ``[0, n)``, ``n`` the size of the gathered axis (a vocabulary), so that an embedding looks up
  rows spread over its table as real text does;
- ``uint8``/``int8`` inputs that are not indices (a quantised model's image) get uniform values
  over their whole range;
- other integer inputs (an attention mask, a length) are all ones, and bool inputs all True: a
  mask that keeps every position, the work the model does on a full-length input;
- an input that sets a ``Loop``'s trip count or condition is refused: its value, which hwnas
  cannot know, sets how often the loop runs.

Every axis must be static but the first, which takes the batch size when it is dynamic: the
size of a sequence or image changes the work done, so a model exported with a dynamic sequence
axis is first fixed to the size it will run at (:func:`fix_dims`: ``--dim sequence_length=128``
on the command line). Used by the runtimes (:mod:`hwnas.runtimes`), the workloads of ONNX files
(:func:`hwnas.measure.onnx_workload`) and the graph and kernel readers of the predictors.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from hwnas.errors import HwnasError

DTYPES = {
    "FLOAT": "float32",
    "FLOAT16": "float16",
    "DOUBLE": "float64",
    "INT64": "int64",
    "INT32": "int32",
    "INT16": "int16",
    "INT8": "int8",
    "UINT8": "uint8",
    "BOOL": "bool",
}
"""ONNX element type -> the numpy dtype hwnas feeds; inputs of any other type are refused."""

PASS_THROUGH = frozenset(
    {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand", "Transpose",
     "Slice", "Tile", "Clip"}
)  # fmt: skip
"""Operators through which an integer input stays an index into the same table."""


@dataclass(frozen=True)
class InputSpec:
    """One graph input and the values hwnas feeds it.

    Attributes:
        name: the input's name in the graph.
        shape: its shape, batch first where it has one.
        dtype: the numpy dtype name ("float32", "int64", "bool").
        high: for an integer input used as indices, the size of the gathered axis (values are
            drawn from ``[0, high)``); None otherwise.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    high: int | None = None

    def value(self, rng: np.random.Generator) -> np.ndarray:
        """The array fed to this input (see the module docstring), of :attr:`shape`."""
        if self.dtype.startswith("float"):
            return rng.standard_normal(self.shape).astype(self.dtype)
        if self.dtype == "bool":
            return np.ones(self.shape, dtype=bool)
        if self.high is not None:
            return rng.integers(0, max(1, self.high), self.shape).astype(self.dtype)
        if self.dtype in ("uint8", "int8"):
            info = np.iinfo(self.dtype)
            return rng.integers(info.min, info.max + 1, self.shape).astype(self.dtype)
        return np.ones(self.shape, dtype=self.dtype)


def model_inputs(
    model: Any,
    where: str = "the model",
    batch_size: int = 1,
    first_shape: tuple[int, ...] | None = None,
) -> list[InputSpec]:
    """The inputs of ``model`` (an ``onnx.ModelProto``) and how each is fed, in graph order
    (initialisers listed as inputs left out).

    Args:
        model: the ONNX model.
        where: names the model in errors (its path).
        batch_size: what a dynamic first axis takes.
        first_shape: the first input's shape, overriding its declared one (a workload's shape,
            a kernel's shape); the batch size is then its first axis.

    Raises:
        HwnasError: no input; an input of a type hwnas does not feed (string, complex...), with
            no declared shape, or with a dynamic axis other than the first; an input that
            sets a ``Loop``'s trip count or condition (its value sets the work: fed 1, the loop
            would run once, silently); a ``batch_size`` below 1.
    """
    from onnx import TensorProto

    if batch_size < 1:
        raise HwnasError(f"batch size must be at least 1, got {batch_size}")
    weights = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in weights]
    if not inputs:
        raise HwnasError(f"{where}: the graph has no input to feed")
    if first_shape is not None:
        batch_size = int(first_shape[0]) if len(first_shape) else batch_size
    bounds = _index_bounds(model, {i.name for i in inputs})
    for name in _trip_count_inputs(model, {i.name for i in inputs}):
        raise HwnasError(
            f"{where}: input '{name}' sets how many times a Loop runs (its trip count or its "
            "condition), which hwnas cannot choose for you (fed 1, the loop would run once); "
            "export the model with the count fixed (a constant, or the length of an input axis)"
        )
    specs = []
    for k, inp in enumerate(inputs):
        tt = inp.type.tensor_type
        if not inp.type.HasField("tensor_type"):
            raise HwnasError(f"{where}: input '{inp.name}' is not a tensor; hwnas feeds tensors")
        kind = TensorProto.DataType.Name(tt.elem_type)
        if kind not in DTYPES:
            raise HwnasError(
                f"{where}: input '{inp.name}' is {kind.lower()}; hwnas feeds inputs of type "
                f"{', '.join(k.lower() for k in DTYPES)}"
            )
        if k == 0 and first_shape is not None:
            shape = tuple(int(d) for d in first_shape)
        else:
            if not tt.HasField("shape"):
                raise HwnasError(
                    f"{where}: input '{inp.name}' declares no shape; export the model with "
                    "its input shapes"
                )
            shape = _static_shape(inp, where, batch_size)
        specs.append(InputSpec(inp.name, shape, DTYPES[kind], bounds.get(inp.name)))
    return specs


def _static_shape(inp, where: str, batch_size: int) -> tuple[int, ...]:
    dims = []
    for i, d in enumerate(inp.type.tensor_type.shape.dim):
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif i == 0:
            dims.append(int(batch_size))
        else:
            # every dynamic axis of the input, named or by input and position: all need a size
            rest = [
                e.dim_param or f"{inp.name}:{j}"
                for j, e in enumerate(inp.type.tensor_type.shape.dim)
                if j and not (e.HasField("dim_value") and e.dim_value > 0)
            ]
            sizes = " ".join(f"--dim {n}=N" for n in rest)
            how = f"give {'its size' if len(rest) == 1 else 'their sizes'} with {sizes} or "
            how += "export the model at that size"
            raise HwnasError(
                f"{where}: input '{inp.name}' axis {i} is dynamic ('{d.dim_param or '?'}'); only "
                f"the batch axis may be, as latency depends on the size: {how}"
            )
    return tuple(dims)


def _consumers(model) -> dict[str, list]:
    """Tensor name -> [(node, input position)] of the graph's top-level nodes reading it."""
    consumers: dict[str, list] = {}
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
    return consumers


def _index_bounds(model, names: set[str]) -> dict[str, int]:
    """Input name -> the smallest gathered axis it indexes (through :data:`PASS_THROUGH`
    operators), for the integer inputs used as ``Gather``/``GatherElements`` indices of a
    tensor of known size (an initialiser or a Constant)."""
    from onnx import numpy_helper

    sizes = {t.name: tuple(int(d) for d in t.dims) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    sizes[node.output[0]] = tuple(numpy_helper.to_array(a.t).shape)
    consumers = _consumers(model)
    bounds: dict[str, int] = {}
    for start in names:
        seen, queue = {start}, deque([start])
        while queue:
            name = queue.popleft()
            for node, i in consumers.get(name, []):
                if node.op_type in ("Gather", "GatherElements") and i == 1:
                    data = sizes.get(node.input[0])
                    axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                    if data and -len(data) <= axis < len(data):
                        n = data[axis]
                        bounds[start] = min(bounds.get(start, n), n)
                elif node.op_type in PASS_THROUGH and i == 0:
                    for out in node.output:
                        if out and out not in seen:
                            seen.add(out)
                            queue.append(out)
    return bounds


SHAPE_ONLY = frozenset({"Shape", "Size"})
"""Operators whose output depends on their input's shape, not its values."""


def _flow_consumers(graph, into: dict[str, list] | None = None) -> dict[str, list]:
    """Tensor name -> [(node, input position)] of every node reading it, in ``graph`` and in
    the subgraphs of its ``If``/``Loop``/``Scan`` nodes at any depth (a subgraph reads its
    outer scope's tensors by name). Where a value enters a node holding subgraphs (as one of
    its inputs, or read inside a subgraph), it may reach everything the subgraphs compute, so
    the node's subgraph inputs and outputs read it too: an outer input on its way into a
    nested ``Loop``'s trip count is followed, never lost at a subgraph's edge."""
    from onnx import AttributeProto

    consumers = {} if into is None else into
    for node in graph.node:
        for i, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, i))
        subgraphs = [a.g for a in node.attribute if a.type == AttributeProto.GRAPH]
        subgraphs += [
            g for a in node.attribute if a.type == AttributeProto.GRAPHS for g in a.graphs
        ]
        for sub in subgraphs:
            _flow_consumers(sub, consumers)
            # A value entering the node reaches the subgraph's inputs; what the subgraph
            # computes leaves through the node's outputs (a pseudo-node carries it there).
            for name in node.input:
                if name:
                    for inner in sub.input:
                        consumers.setdefault(name, []).append((_Carry(inner.name), -1))
            for out in sub.output:
                consumers.setdefault(out.name, []).append((_Carry(*node.output), -1))
    return consumers


class _Carry:
    """A pseudo-node of :func:`_flow_consumers`: what reaches it flows on to ``output``."""

    __slots__ = ("output",)
    op_type = "Carry"

    def __init__(self, *names: str) -> None:
        self.output = names


def _trip_count_inputs(model, names: set[str]) -> list[str]:
    """The integer and bool graph inputs whose values reach a ``Loop``'s trip count or first
    condition, through any operators but :data:`SHAPE_ONLY` ones (an ``Add`` on the way
    changes nothing) and into subgraphs (a ``Loop`` inside an ``If`` branch or another
    ``Loop``'s body counted by it): their value, which hwnas cannot know, sets how often the
    loop runs. A float input's loop (a while loop on the data) is read as uncounted instead."""
    from onnx import TensorProto

    integer = {
        i.name
        for i in model.graph.input
        if i.name in names and i.type.tensor_type.elem_type not in
        (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16)
    }  # fmt: skip
    consumers = _flow_consumers(model.graph)
    found = []
    for start in sorted(integer):
        seen, queue = {start}, deque([start])
        while queue and start not in found:
            name = queue.popleft()
            for node, i in consumers.get(name, []):
                if node.op_type == "Loop" and i in (0, 1):
                    found.append(start)
                    break
                if node.op_type in SHAPE_ONLY:
                    continue
                for out in node.output:
                    if out and out not in seen:
                        seen.add(out)
                        queue.append(out)
    return found


def dynamic_dims(model) -> list[str]:
    """The names of the dynamic axes of ``model``'s inputs, in order: each ``dim_param``, and
    ``INPUT:AXIS`` for an axis after the first that has neither a name nor a size (``[1, 3,
    ?, ?]``: ``X:2`` and ``X:3``; an unnamed first axis is the batch)."""
    weights = {t.name for t in model.graph.initializer}
    names: list[str] = []
    for inp in model.graph.input:
        if inp.name not in weights:
            for i, d in enumerate(inp.type.tensor_type.shape.dim):
                if d.HasField("dim_value"):
                    continue
                name = d.dim_param or (f"{inp.name}:{i}" if i else "")
                if name and name not in names:
                    names.append(name)
    return names


def batch_dims(model) -> list[str]:
    """The names of the dynamic batch axes of ``model``'s inputs: the ``dim_param`` of each
    input's first axis that has no size (``[batch, 3, 224, 224]``: ``batch``)."""
    weights = {t.name for t in model.graph.initializer}
    names: list[str] = []
    for inp in model.graph.input:
        shape = inp.type.tensor_type.shape.dim
        if inp.name not in weights and len(shape) and not shape[0].HasField("dim_value"):
            if shape[0].dim_param and shape[0].dim_param not in names:
                names.append(shape[0].dim_param)
    return names


def positional_names(model) -> dict[str, str]:
    """``INPUT:AXIS`` -> the axis's own name, for each dynamic input axis after the first that
    has a name (``dynamic_axes={"X": [0, 2, 3]}`` names them ``X_dynamic_axes_2``...): the
    documented ``--dim X:2=64`` form reaches a named axis too."""
    weights = {t.name for t in model.graph.initializer}
    out: dict[str, str] = {}
    for inp in model.graph.input:
        if inp.name in weights:
            continue
        for i, d in enumerate(inp.type.tensor_type.shape.dim):
            if i and d.dim_param and not d.HasField("dim_value"):
                out[f"{inp.name}:{i}"] = d.dim_param
    return out


def by_own_names(model, dims: dict[str, int]) -> dict[str, int]:
    """``dims`` with each ``INPUT:AXIS`` of a named axis (:func:`positional_names`) under that
    axis's name."""
    alias = positional_names(model)
    return {alias.get(name, name): size for name, size in dims.items()}


def _unnamed_axis(model, name: str):
    """The dimension proto of the unnamed input axis ``INPUT:AXIS`` (:func:`dynamic_dims`)."""
    inp_name, _, axis = name.rpartition(":")
    for inp in model.graph.input:
        shape = inp.type.tensor_type.shape.dim
        if inp.name == inp_name and axis.isdigit() and int(axis) < len(shape):
            dim = shape[int(axis)]
            if not dim.dim_param and not dim.HasField("dim_value"):
                return dim
    return None


def fix_dims(model: Any, dims: dict[str, int]) -> list[str]:
    """Fix each dynamic axis of ``model``'s inputs (an ``onnx.ModelProto``, changed in place)
    that ``dims`` names to the size it gives, in every tensor of the graph (ONNX Runtime's
    ``make_dim_param_fixed``); names the model does not have are left out (:func:`check_dims`
    finds those no model has). An axis named by several inputs (``sequence_length`` of ids and
    mask) takes the size in all of them.

    Returns:
        What was fixed, "NAME=SIZE" each, in the model's order of its axes.
    """
    from onnxruntime.tools.onnx_model_utils import make_dim_param_fixed

    fixed = []
    dims = by_own_names(model, dims)
    for name in dynamic_dims(model):
        if name in dims:
            unnamed = _unnamed_axis(model, name)
            if unnamed is not None:  # the input's own axis: ONNX Runtime infers the others
                unnamed.dim_value = int(dims[name])
            else:
                make_dim_param_fixed(model.graph, name, int(dims[name]))
            fixed.append(f"{name}={int(dims[name])}")
    return fixed


def read_fixed(path: Any, dims: dict[str, int] | None) -> tuple[Any, bytes, list[str]]:
    """(model, the bytes a runtime loads, what :func:`fix_dims` fixed) of the ONNX file
    ``path`` (:func:`hwnas.export.read_onnx`), its dynamic axes named in ``dims`` fixed.

    Raises:
        HwnasError: as :func:`hwnas.export.read_onnx`.
    """
    from hwnas.export import read_onnx

    model, data = read_onnx(path)
    fixed = fix_dims(model, dims) if dims else []
    return model, (model.SerializeToString() if fixed else data), fixed


def check_dims(paths: list[Any], dims: dict[str, int]) -> None:
    """Refuse a ``--dim`` name that no ONNX file of ``paths`` has as a dynamic input axis, or a
    size below 1, before any work.

    Raises:
        HwnasError: one line naming the dynamic axes the files have.
    """
    from collections.abc import Mapping

    if not isinstance(dims, Mapping):
        raise HwnasError(f"dims must map axis names to sizes ({{'sequence_length': 128}}), got "
                         f"{type(dims).__name__}")  # fmt: skip
    for name, size in dims.items():
        if not isinstance(name, str) or isinstance(size, bool) or not isinstance(size, int):
            raise HwnasError(f"dims: {name!r}: {size!r} is not an axis name and an integer size")
        if size < 1:
            raise HwnasError(f"--dim {name}={size}: the size must be at least 1")
    if not dims:
        return
    from hwnas.export import load_graph

    have: list[str] = []
    also: set[str] = set()  # INPUT:AXIS of a named axis: the same axis
    for path in paths:
        model = load_graph(path)  # a pipe or a device is refused here, not waited on
        have += [d for d in dynamic_dims(model) if d not in have]
        also |= set(positional_names(model))
    unknown = [n for n in dims if n not in have and n not in also]
    if unknown:
        raise HwnasError(
            f"--dim {unknown[0]}: no input axis of the ONNX model(s) is named '{unknown[0]}' "
            f"(their dynamic axes: {', '.join(have) or 'none'})"
        )


def feeds(specs: list[InputSpec], seed: int = 0) -> dict[str, np.ndarray]:
    """Input name -> the array fed to it (:meth:`InputSpec.value`), the same for a seed."""
    rng = np.random.default_rng(seed)
    return {s.name: s.value(rng) for s in specs}


def bytes_inputs(
    onnx_bytes: bytes, first_shape: tuple[int, ...] | None = None
) -> list[InputSpec]:
    """:func:`model_inputs` of a serialised model (its weights are not needed, only its
    graph's inputs and index uses).

    Raises:
        HwnasError: as :func:`model_inputs`; bytes that are not an ONNX model.
    """
    import onnx

    try:
        model = onnx.load_from_string(onnx_bytes)
    except Exception as exc:  # DecodeError and others
        raise HwnasError(f"not an ONNX model: {type(exc).__name__}") from None
    return model_inputs(model, first_shape=first_shape)
