"""Control flow in an ONNX graph: the subgraphs of ``Loop``, ``Scan`` and ``If`` nodes.

A model written with a Python loop and exported by TorchScript's scripting (a hand-written
recurrent cell stepped over a sequence, a decoder's fixed number of refinement steps), or
converted from TensorFlow (``tf.while_loop``, ``tf.cond``), holds its heavy layers inside
a control-flow node's subgraph. The subgraph reads tensors of the graph around it by name
(*outer-scope* values: the weights and the model's input) without listing them among the
node's inputs. Both of hwnas's ONNX readers need them:

- the graph features (:func:`hwnas.predictors.graph.read_graph`) count a subgraph's nodes
  once per iteration: :func:`body_model` makes each subgraph a model of its own to read;
- the kernel-level predictor (:func:`hwnas.predictors.kernels.read.read_kernels`) times a
  control-flow node as one kernel, whose one-node model must carry the outer-scope values
  its subgraphs read (:func:`outer_reads`).
"""

from __future__ import annotations

from typing import Any

CONTROL_FLOW = frozenset({"Loop", "Scan", "If"})
"""Operators whose work is in their subgraphs (graph-valued attributes)."""


def subgraphs(node) -> list[Any]:
    """The subgraphs (``onnx.GraphProto``) of ``node``'s graph-valued attributes, in order
    (a Loop's or Scan's ``body``; an If's ``then_branch``, ``else_branch``)."""
    from onnx import AttributeProto

    out = []
    for a in node.attribute:
        if a.type == AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def _graph_reads(graph) -> list[str]:
    """Names ``graph``'s nodes (and their own subgraphs) read that ``graph`` does not define:
    the outer-scope values it captures, in first-use order."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    seen: dict[str, None] = {}
    for node in graph.node:
        reads = [*node.input]
        for sub in subgraphs(node):
            reads.extend(_graph_reads(sub))
        for name in reads:
            if name and name not in defined:
                seen.setdefault(name, None)
        defined.update(o for o in node.output if o)
    return list(seen)


def outer_reads(node) -> list[str]:
    """The outer-scope values ``node``'s subgraphs read (names of the graph around ``node``,
    not among its inputs), in first-use order; [] for a node without subgraphs."""
    listed = set(node.input)
    seen: dict[str, None] = {}
    for sub in subgraphs(node):
        for name in _graph_reads(sub):
            if name not in listed:
                seen.setdefault(name, None)
    return list(seen)


def body_model(
    graph,
    input_types: list[tuple[int, list[int | None]]],
    outer_weights: dict[str, Any],
    outer_types: dict[str, tuple[int, list[int | None]]],
    opsets,
) -> Any:
    """``graph`` (a subgraph) as a model of its own (``onnx.ModelProto``), for the graph
    features to read.

    Args:
        graph: the subgraph (``onnx.GraphProto``).
        input_types: (ONNX element type, shape) of each of its inputs, as one iteration sees
            them (a Loop's iteration number and condition, then its loop-carried values).
        outer_weights: the enclosing graphs' weights, name -> ``onnx.TensorProto``: the
            outer-scope values among them become the model's initializers.
        outer_types: (element type, shape) of the enclosing graphs' other tensors: the
            outer-scope values among them become the model's inputs.
        opsets: the enclosing model's ``opset_import``.

    Raises:
        KeyError: an outer-scope value of unknown type (the caller counts the node as unread).
    """
    import onnx
    from onnx import helper

    inputs = [
        helper.make_tensor_value_info(i.name, elem, shape)
        for i, (elem, shape) in zip(graph.input, input_types)
    ]
    initializers = list(graph.initializer)
    for name in _graph_reads(graph):
        if name in outer_weights:
            t = onnx.TensorProto()
            t.CopyFrom(outer_weights[name])
            t.name = name
            initializers.append(t)
        else:
            elem, shape = outer_types[name]
            inputs.append(helper.make_tensor_value_info(name, elem, shape))
    outputs = [
        helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type or 1, None)
        for o in graph.output
    ]  # their shapes are inferred (a body may declare symbolic ones)
    sub = helper.make_graph(list(graph.node), graph.name or "body", inputs, outputs, initializers)
    model = helper.make_model(sub, opset_imports=list(opsets))
    model.ir_version = 8
    return model


def computes_its_condition(node) -> bool:
    """Whether ``node`` is a Loop whose body computes the condition that ends it from what the
    loop computes (its iteration number or its loop-carried values: a while loop on the data,
    as TorchScript exports ``while ...:`` with the largest int64 as its trip count): how many
    times it runs is known only by running it. A body that passes its condition through, or
    makes it from constants (TorchScript's ``for`` loops), runs its trip count."""
    from collections import deque

    if node.op_type != "Loop":
        return False
    body = next((g for g in subgraphs(node)), None)
    if body is None or not body.output or len(body.input) < 2:
        return False
    varying = {body.input[0].name, *(i.name for i in body.input[2:])}
    producer = {out: n for n in body.node for out in n.output}
    seen, queue = {body.output[0].name}, deque([body.output[0].name])
    while queue:
        name = queue.popleft()
        if name in varying:
            return True
        for inp in getattr(producer.get(name), "input", ()):
            if inp and inp not in seen:
                seen.add(inp)
                queue.append(inp)
    return False


def node_runs(model) -> float:
    """How many nodes one run of ``model`` (an ``onnx.ModelProto``, static shapes: a kernel's
    one-node model) executes, counting each subgraph's nodes once per iteration: a Loop's
    trip count where it is one of the model's weights (else 1; and 1 for a loop whose body
    computes its condition, :func:`computes_its_condition`), a Scan's scanned length where
    it scans one of the model's inputs (else 1), an If's larger branch.
    Each costs the runtime a dispatch, which a loop of small steps spends mostly on."""
    from onnx import numpy_helper

    weights = {t.name: t for t in model.graph.initializer}
    shapes = {
        i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input
    }
    shapes.update({n: list(t.dims) for n, t in weights.items()})

    def trips(node, attrs) -> float:
        if computes_its_condition(node):  # a while loop: its trip count is no count (2^63)
            return 1.0
        if node.op_type == "Loop" and node.input and node.input[0] in weights:
            return float(numpy_helper.to_array(weights[node.input[0]]).reshape(-1)[0])
        if node.op_type == "Scan" and "num_scan_inputs" in attrs:
            first = node.input[len(node.input) - attrs["num_scan_inputs"].i]
            axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else [0]
            shape = shapes.get(first) or []
            return float(shape[axes[0] % len(shape)]) if shape else 1.0
        return 1.0

    def runs(graph) -> float:
        total = 0.0
        for node in graph.node:
            total += 1.0
            inner = [runs(g) for g in subgraphs(node)]
            if inner:
                attrs = {a.name: a for a in node.attribute}
                steps = trips(node, attrs)  # names are unique across a model's scopes
                total += steps * (max(inner) if node.op_type == "If" else sum(inner))
        return total

    return runs(model.graph)
