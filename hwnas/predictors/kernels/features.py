"""Kernel types and the numeric description of a kernel's configuration.

nn-Meter (Zhang et al., MobiSys 2021) fits one regressor per kernel type on the kernel's
configuration (input size, channels, kernel size, stride...). Here a kernel's *type* is its
operator (``com.microsoft.nchwc:Conv``, ``MatMul``, ``Softmax``...), convolutions split by
kind (dense, pointwise, depthwise, grouped: their costs scale differently), and its
*features* are one fixed-length vector for every type (:data:`FEATURES`): the work and memory
it touches (multiply-accumulates, input, output and weight elements, all log-scaled), the last
four dimensions of its first input and output, and the attributes that change the code path
(kernel size, stride, groups, fused activation, a fused residual input, a transpose's
permutation). A regressor of one type sees the columns that vary within it.
"""

from __future__ import annotations

import math

import numpy as np

from hwnas.predictors.kernels.read import Kernel
from hwnas.predictors.subgraphs import CONTROL_FLOW

FEATURES: tuple[str, ...] = (
    "log_macs",
    "log_in_elems",
    "log_out_elems",
    "log_weight_elems",
    "x_inputs",
    "log_in_d0",
    "log_in_d1",
    "log_in_d2",
    "log_in_d3",
    "log_out_d0",
    "log_out_d1",
    "log_out_d2",
    "log_out_d3",
    "kernel",
    "stride",
    "log_group",
    "activation",
    "perm",
)
"""Names of the feature columns, in order."""

CONV_OPS = frozenset({"Conv", "com.microsoft:FusedConv", "com.microsoft.nchwc:Conv",
                      "ConvInteger", "QLinearConv", "com.microsoft:QLinearConv"})  # fmt: skip
MATMUL_OPS = frozenset({"MatMul", "Gemm", "com.microsoft:FusedMatMul", "com.microsoft:FusedGemm",
                        "MatMulInteger", "QLinearMatMul", "com.microsoft:DynamicQuantizeMatMul",
                        "com.microsoft:MatMulIntegerToFloat", "com.microsoft:QGemm"})  # fmt: skip
"""Convolutions and matrix products, float and integer (an int8 model's, quantized by ONNX
Runtime's tools: the first input is the data, the weight has the float one's shape)."""
RECURRENT_OPS = frozenset({"LSTM", "GRU", "RNN"})
COMPUTE_OPS = CONV_OPS | MATMUL_OPS | RECURRENT_OPS | {"Attention"}
"""Ops whose time follows their multiply-accumulates (:func:`macs` counts them); every other
op is memory-bound: its time follows the elements it touches."""
ACTIVATIONS = {"": 0, "Relu": 1, "Clip": 2, "HardSigmoid": 3, "Sigmoid": 4, "LeakyRelu": 5,
               "Tanh": 6, "HardSwish": 7}  # fmt: skip


def conv_kind(kernel: Kernel) -> str:
    """ "depthwise" (one input channel per group, groups > 1), "grouped", "pointwise" (1x1)
    or "dense"."""
    a = kernel.attr
    w = next((t for t in kernel.inputs if t.role in ("w", "c") and len(t.shape) >= 3), None)
    group = int(a.get("group", 1))
    if group > 1 and w is not None and w.shape[1] == 1:
        return "depthwise"
    if group > 1:
        return "grouped"
    ks = a.get("kernel_shape") or (w.shape[2:] if w is not None else (1, 1))
    return "pointwise" if all(int(k) == 1 for k in ks) else "dense"


def kernel_type(kernel: Kernel) -> str:
    """The kernel's type: its op, and for convolutions their kind ("Conv/depthwise")."""
    if kernel.op in CONV_OPS:
        return f"{kernel.op}/{conv_kind(kernel)}"
    return kernel.op


def macs(kernel: Kernel) -> float:
    """Multiply-accumulates of a convolution, matrix product or recurrent layer (ONNX
    ``LSTM``/``GRU``/``RNN``: every step multiplies the input by ``W`` and the state by ``R``,
    shapes (directions, gates x hidden, input or hidden size)), of an opset-23 ``Attention``
    (:func:`hwnas.predictors.graph.attention_products`) and of a control-flow kernel's
    subgraphs; the larger of input and output elements for any other kernel (what a
    memory-bound kernel touches)."""
    out = float(np.prod(kernel.outputs[0])) if kernel.outputs else 0.0
    if kernel.op == "Attention" and len(kernel.inputs) >= 3:  # opset 23's, every batch element
        from hwnas.predictors.graph import attention_products

        q, k, v = (t.shape for t in kernel.inputs[:3])
        counted = attention_products(q, k, v, attrs=kernel.attr)
        if counted is not None:
            return float(q[0]) * counted[0]
    if kernel.op in CONTROL_FLOW and kernel.model:  # its subgraphs' work, every iteration
        products, elements = subgraph_work(kernel)
        return products or max(elements, out)
    if kernel.op in RECURRENT_OPS and len(kernel.inputs) >= 3 and kernel.inputs[0].shape:
        x = kernel.inputs[0].shape  # (steps, batch, input size); (batch, steps, ...) if layout=1
        w, r = kernel.inputs[1], kernel.inputs[2]
        return float(x[0] * x[1]) * (w.elems + r.elems) if len(x) == 3 else float(w.elems + r.elems)
    if kernel.op in CONV_OPS:
        w = next((t for t in kernel.inputs if t.role in ("w", "c") and len(t.shape) >= 3), None)
        if w is not None:
            return out * float(np.prod(w.shape[1:]))  # 1-D, 2-D or 3-D
    if kernel.op in MATMUL_OPS and kernel.inputs:
        a = kernel.inputs[0].shape
        k = a[-1] if a else 1
        if kernel.op in ("Gemm", "com.microsoft:FusedGemm") and int(kernel.attr.get("transA", 0)):
            k = a[0]
        return out * k
    ins = sum(t.elems for t in kernel.x_inputs)
    return float(max(ins, out))


def work(kernel: Kernel) -> float:
    """What a kernel's time follows, in multiply-accumulates or elements: :func:`macs` plus
    every weight element it reads."""
    return float(macs(kernel)) + float(sum(t.elems for t in kernel.inputs if t.role != "x"))


def _spatial(shape: tuple[int, ...], kernel: Kernel, n: int) -> tuple[int, ...]:
    """The ``n`` spatial sizes of a convolution's tensor: NCHW..., NCHWc (5-D, the nchwc
    layout's blocked channels last) or NHWC (``channels_last``, an int8 ``QLinearConv``)."""
    if kernel.op.startswith("com.microsoft.nchwc:") and len(shape) == 2 + n + 1:
        return tuple(shape[2 : 2 + n])
    if int(kernel.attr.get("channels_last", 0)) and len(shape) == n + 2:
        return tuple(shape[1 : 1 + n])
    return tuple(shape[-n:])


GATHER_OPS = frozenset({"Gather", "GatherElements", "GatherND"})
"""Ops that read only the entries of their data input that their indices name."""


def streamed_bytes(kernel: Kernel) -> float:
    """Bytes of weights the kernel reads in one call: its weights (:attr:`Kernel.weight_bytes`),
    for a convolution only the kernel positions that meet the input for some output (a 3x3
    convolution, padded by 1, on a 1x1 map reads its centre tap alone: 1/9 of its weights), for
    a lookup in a table of weights (:data:`GATHER_OPS`: an embedding) only the entries it
    returns."""
    total = float(kernel.weight_bytes)
    if kernel.op in GATHER_OPS and kernel.inputs and kernel.inputs[0].role == "w":
        # an embedding table: the rows looked up, not the table (a 250,000-word vocabulary
        # is 256 MB, of which a 16-token lookup reads 16 rows)
        data = kernel.inputs[0]
        rows = math.prod(kernel.outputs[0]) * np.dtype(data.dtype).itemsize if kernel.outputs else 0
        rest = total - data.elems * np.dtype(data.dtype).itemsize  # constant indices
        return min(total, float(rows) + rest)
    a = kernel.attr
    w = next((t for t in kernel.inputs if t.role == "w" and len(t.shape) >= 3), None)
    x = kernel.x_inputs
    if kernel.op not in CONV_OPS or w is None or not x or not kernel.outputs:
        return total
    ks = a.get("kernel_shape") or w.shape[2:]
    n = len(ks)
    ins, outs = _spatial(x[0].shape, kernel, n), _spatial(kernel.outputs[0], kernel, n)
    strides = a.get("strides") or (1,) * n
    dilations = a.get("dilations") or (1,) * n
    pads = a.get("pads") or (0,) * (2 * n)
    if len(ins) != n or len(outs) != n:
        return total
    fraction = 1.0
    for i in range(n):
        k, s, d, p = int(ks[i]), int(strides[i]), int(dilations[i]), int(pads[i])
        o = np.arange(int(outs[i])) * s - p
        used = sum(bool(np.any((o + t * d >= 0) & (o + t * d < int(ins[i])))) for t in range(k))
        fraction *= max(used, 1) / k
    return total * fraction


def work_class(kernel: Kernel) -> str:
    """ "compute" for :data:`COMPUTE_OPS` and a control-flow kernel whose subgraphs multiply,
    else "memory"."""
    if kernel.op in CONTROL_FLOW and kernel.model:
        return "compute" if subgraph_work(kernel)[0] else "memory"
    return "compute" if kernel.op in COMPUTE_OPS else "memory"


def subgraph_work(kernel: Kernel) -> tuple[float, float]:
    """(multiply-accumulates, output elements) of a control-flow kernel's subgraphs (a Loop's
    body every iteration: :func:`hwnas.predictors.graph.read_graph` on its one-node model);
    (0, 0) where they cannot be read. What its time follows before it is timed."""
    if kernel.key not in _SUBGRAPH_WORK:
        import onnx

        from hwnas.errors import HwnasError
        from hwnas.predictors.graph import COLUMN, read_graph

        try:
            f = read_graph(onnx.load_from_string(kernel.model), per_image=False)[0]
        except HwnasError:
            f = np.zeros(len(COLUMN))
        products = sum(f[i] for n, i in COLUMN.items() if n.startswith("macs_"))
        elements = sum(
            f[i] for n, i in COLUMN.items() if n.endswith("_elems") and n != "input_elems"
        )
        _SUBGRAPH_WORK[kernel.key] = (float(products), float(elements))
    return _SUBGRAPH_WORK[kernel.key]


_SUBGRAPH_WORK: dict[str, tuple[float, float]] = {}


def subgraph_runs(kernel: Kernel) -> float:
    """Nodes a control-flow kernel's subgraphs run, every iteration
    (:func:`hwnas.predictors.subgraphs.node_runs`); 0 for any other kernel. Each is a
    dispatch the kernel pays inside."""
    if kernel.op not in CONTROL_FLOW or not kernel.model:
        return 0.0
    import onnx

    from hwnas.predictors.subgraphs import node_runs

    return max(node_runs(onnx.load_from_string(kernel.model)) - 1.0, 0.0)


def _dims(shape: tuple[int, ...]) -> list[float]:
    last = list(shape[-4:])
    return [0.0] * (4 - len(last)) + [float(np.log1p(d)) for d in last]


def features(kernel: Kernel) -> np.ndarray:
    """The kernel's feature vector, shape (len(FEATURES),)."""
    a = kernel.attr
    x = kernel.x_inputs
    first_in = x[0].shape if x else ()
    first_out = kernel.outputs[0] if kernel.outputs else ()
    ks = a.get("kernel_shape") or ()
    strides = a.get("strides") or ()
    act = str(a.get("activation", "")) if kernel.op in CONV_OPS else ""
    perm = a.get("perm") or ()
    row = [
        np.log1p(macs(kernel)),
        np.log1p(sum(t.elems for t in x)),
        np.log1p(sum(float(np.prod(s)) for s in kernel.outputs)),
        np.log1p(sum(t.elems for t in kernel.inputs if t.role == "w")),
        float(len(x)),
        *_dims(first_in),
        *_dims(first_out),
        float(max(ks)) if ks else 0.0,
        float(max(strides)) if strides else 0.0,
        float(np.log1p(int(a.get("group", 1)))),
        float(ACTIVATIONS.get(act, 8)),
        float(int("".join(str(int(p)) for p in perm[:9]) or 0)) if perm else 0.0,
    ]
    return np.asarray(row, dtype=np.float64)


def feature_matrix(kernels) -> np.ndarray:
    """Features of many kernels, shape (n, len(FEATURES))."""
    rows = [features(k) for k in kernels]
    return np.stack(rows) if rows else np.zeros((0, len(FEATURES)))
