"""Kernel configurations to time: generated patterns, sampled where the prediction is least
certain (nn-Meter's adaptive sampling, Zhang et al., MobiSys 2021).

A *pattern* is a small ONNX graph of the operators networks are made of, with sampled sizes:
a convolution (dense, pointwise, depthwise or grouped; kernel 1-7, stride 1-2) with a bias
(batch norm folds into it), an activation and optionally a residual addition; a linear layer
of tokens (with GELU or ReLU); attention products and softmax; layer norm; element-wise
operations and squeeze-and-excitation gating; pooling; reshapes, transposes, channel shuffles,
concatenation and channel split. ONNX Runtime optimises each pattern as it would a network
(:func:`~hwnas.predictors.kernels.read.read_kernels`), so the kernels timed are the runtime's
own (fused convolutions, NCHWc reorders, ``FusedMatMul``...), never hand-written guesses of
its fusion rules.

Sizes are drawn log-uniformly over the ranges image and token networks use (sides 1-224,
channels 3-2048, tokens 1-1024, embeddings 16-1536). :func:`adaptive_sample` first times a
random set, then repeatedly fits the per-type regressors, draws many candidate patterns,
reads their kernels and times the patterns whose kernels the regressors are least certain
about (the largest standard deviation of the log, extrapolated and unseen kernels first).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hwnas.predictors.kernels.read import Kernel, read_kernels

OPSET = 17


def _loguniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


def _channels(rng: np.random.Generator, low: int = 3, high: int = 2048) -> int:
    c = _loguniform(rng, low, high)
    if rng.random() < 0.75 and c >= 8:  # most networks round widths to multiples of 8
        return int(max(8, round(c / 8) * 8))
    return int(max(low, round(c)))


def _side(rng: np.random.Generator, low: int = 1, high: int = 224) -> int:
    return int(max(low, round(_loguniform(rng, low, high))))


def _stage(rng: np.random.Generator) -> tuple[int, int]:
    """(side, channels) as networks couple them: 70% of draws at a stage of a network (the
    side halves and the width roughly doubles per stage, from inputs of 32-256 pixels), the
    rest anywhere in the broad ranges."""
    if rng.random() < 0.7:
        s = int(rng.integers(0, 6))
        side = max(1, int(round(int(rng.choice([32, 64, 96, 128, 160, 192, 224, 256])) / 2**s)))
        width = _loguniform(rng, 8, 48) * 2**s * _loguniform(rng, 0.5, 6)
        c = int(min(2048, max(8, round(width / 8) * 8)))
        return side, c
    return _side(rng, 1, 224), _channels(rng, 3, 2048)


@dataclass(frozen=True)
class Pattern:
    """One sampled pattern.

    Attributes:
        family: which generator made it ("conv", "linear", ...).
        params: its sampled sizes.
        model: the serialised ONNX model.
        input_shape: its first input's shape.
    """

    family: str
    params: tuple
    model: bytes
    input_shape: tuple[int, ...]


class _Builder:
    """A tiny ONNX graph builder (float32 tensors, random weights)."""

    def __init__(self, rng: np.random.Generator):
        self.rng, self.nodes, self.inits, self.inputs, self.n = rng, [], [], [], 0

    def name(self, prefix: str = "t") -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def input(self, shape) -> str:
        """A graph input; a leading 1 is the dynamic batch axis of exported networks (ONNX
        Runtime fuses differently when the batch is static: MatMul + Add into Gemm)."""
        from onnx import TensorProto, helper

        name = self.name("x")
        dims = ["batch", *shape[1:]] if shape and shape[0] == 1 else list(shape)
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, dims))
        return name

    def weight(self, shape, values=None, dtype=np.float32) -> str:
        from onnx import numpy_helper

        name = self.name("w")
        arr = (
            np.asarray(values, dtype=dtype).reshape(shape)
            if values is not None
            else (self.rng.standard_normal(shape) * 0.05).astype(dtype)
        )
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op_type: str, inputs, n_out: int = 1, **attrs):
        from onnx import helper

        outs = [self.name() for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, outputs) -> bytes:
        from onnx import TensorProto, helper

        outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs]
        g = helper.make_graph(self.nodes, "pattern", self.inputs, outs, self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 8
        return m.SerializeToString()


def _act(b: _Builder, x: str, act: str) -> str:
    if act == "relu":
        return b.op("Relu", [x])
    if act == "relu6":
        return b.op("Clip", [x, b.weight((), [0.0]), b.weight((), [6.0])])
    if act == "hswish":
        return b.op("HardSwish", [x])
    if act == "hsigmoid":
        return b.op("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)
    if act == "silu":
        return b.op("Mul", [x, b.op("Sigmoid", [x])])
    if act == "gelu":  # the opset-17 export of nn.GELU: x * 0.5 * (1 + erf(x / sqrt 2))
        e = b.op("Erf", [b.op("Div", [x, b.weight((), [1.4142135])])])
        return b.op("Mul", [b.op("Mul", [x, b.op("Add", [e, b.weight((), [1.0])])]),
                            b.weight((), [0.5])])  # fmt: skip
    return x


def conv_pattern(rng: np.random.Generator) -> Pattern:
    """Conv (+ bias) + activation (+ residual add)."""
    kind = rng.choice(["dense", "pointwise", "depthwise", "grouped"], p=[0.25, 0.3, 0.3, 0.15])
    side, cin = _stage(rng)
    side = max(2, side)
    if kind == "dense" and rng.random() < 0.1:
        cin = 3  # a stem
    k = 1 if kind == "pointwise" else int(rng.choice([3, 5, 7], p=[0.6, 0.3, 0.1]))
    if kind == "dense" and rng.random() < 0.1:
        k = int(rng.choice([2, 4, 16]))  # patch embeddings
    stride = int(rng.choice([1, 2], p=[0.7, 0.3])) if k > 1 or rng.random() < 0.1 else 1
    if k in (4, 16) and rng.random() < 0.5:  # non-overlapping patches
        stride = k
        side = max(k, side // k * k)
    if kind == "depthwise":
        cout, group = cin, cin
    elif kind == "grouped":
        group = int(rng.choice([2, 4, 8, 16, 32, 64]))
        cin = max(group, cin // group * group)
        cout = max(group, _channels(rng, 8, 2048) // group * group)
    else:
        cout = int(min(2048, max(8, round(cin * _loguniform(rng, 0.15, 6) / 8) * 8)))
        group = 1
    while cout * (cin // group) * k * k > 4e6 and cout > group:  # weights <= 16 MB
        cout = max(group, cout // 2 // group * group)
    # keep the work within what one kernel of a network does (<= ~2 GMACs)
    while side > 2 and side * side * cout * (cin // group) * k * k > 2e9:
        side = max(2, side // 2)
    act = str(
        rng.choice(["none", "relu", "relu6", "hswish", "silu"], p=[0.3, 0.35, 0.1, 0.15, 0.1])
    )
    residual = stride == 1 and cin == cout and rng.random() < 0.4
    b = _Builder(rng)
    x = b.input((1, cin, side, side))
    y = b.op("Conv", [x, b.weight((cout, cin // group, k, k)), b.weight((cout,))],
             kernel_shape=[k, k], strides=[stride, stride], group=group,
             pads=[0] * 4 if k == stride else [k // 2] * 4)  # fmt: skip
    y = _act(b, y, act)
    if residual:
        y = b.op("Add", [y, x])
    params = (str(kind), side, cin, cout, k, stride, group, act, residual)
    return Pattern("conv", params, b.model([y]), (1, cin, side, side))


def linear_pattern(rng: np.random.Generator) -> Pattern:
    """Tokens x weights + bias (+ GELU / ReLU), or the classifier's Gemm."""
    b = _Builder(rng)
    din, dout = _channels(rng, 16, 2048), _channels(rng, 16, 4096)
    while din * dout > 8e6:  # weights <= 32 MB
        dout //= 2
    if rng.random() < 0.2:  # the classifier: global pooling, flatten, Gemm
        side = int(rng.choice([1, 2, 4, 7, 8, 14]))
        x = b.input((1, din, side, side))
        y = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
        y = b.op("Gemm", [y, b.weight((dout, din)), b.weight((dout,))], transB=1)
        return Pattern("linear", ("gemm", din, dout, side), b.model([y]), (1, din, side, side))
    tokens = int(rng.choice([int(rng.choice([50, 65, 197, 257, 50, 197])), _side(rng, 1, 1024)]))
    while tokens > 1 and tokens * din * dout > 2e9:
        tokens //= 2
    act = str(rng.choice(["none", "gelu", "relu"], p=[0.55, 0.35, 0.1]))
    x = b.input((1, tokens, din))
    y = b.op("Add", [b.op("MatMul", [x, b.weight((din, dout))]), b.weight((dout,))])
    y = _act(b, y, act)
    return Pattern("linear", ("matmul", tokens, din, dout, act), b.model([y]), (1, tokens, din))


def attention_pattern(rng: np.random.Generator) -> Pattern:
    """softmax(Q K^T * scale) V for one layer's heads."""
    b = _Builder(rng)
    heads = int(rng.integers(1, 17))
    dim = int(rng.choice([16, 32, 48, 64, 96, 128]))
    tokens = _side(rng, 1, 1024)
    q = b.input((1, heads, tokens, dim))
    kt = b.input((1, heads, dim, tokens))
    v = b.input((1, heads, tokens, dim))
    s = b.op("Mul", [b.op("MatMul", [q, kt]), b.weight((), [dim**-0.5])])
    y = b.op("MatMul", [b.op("Softmax", [s], axis=-1), v])
    return Pattern("attention", (heads, dim, tokens), b.model([y]), (1, heads, tokens, dim))


def norm_pattern(rng: np.random.Generator) -> Pattern:
    """Layer norm of tokens (after a residual add, or not)."""
    b = _Builder(rng)
    tokens, dim = _side(rng, 1, 1024), _channels(rng, 16, 2048)
    x = b.input((1, tokens, dim))
    if rng.random() < 0.5:
        x = b.op("Add", [x, b.input((1, tokens, dim))])
    y = b.op("LayerNormalization", [x, b.weight((dim,)), b.weight((dim,))], axis=-1, epsilon=1e-6)
    return Pattern("norm", (tokens, dim), b.model([y]), (1, tokens, dim))


def eltwise_pattern(rng: np.random.Generator) -> Pattern:
    """Element-wise ops on feature maps or tokens, squeeze-and-excitation gating."""
    b = _Builder(rng)
    c, side = _channels(rng, 3, 2048), _side(rng, 1, 112)
    shape = (1, c, side, side) if rng.random() < 0.7 else (1, _side(rng, 1, 1024), c)
    kind = str(rng.choice(["add", "mul", "gate", "act", "scale"]))
    x = b.input(shape)
    if kind in ("add", "mul"):
        y = b.op("Add" if kind == "add" else "Mul", [x, b.input(shape)])
    elif kind == "gate" and len(shape) == 4:
        g = b.op("HardSigmoid" if rng.random() < 0.5 else "Sigmoid", [b.input((1, c, 1, 1))])
        y = b.op("Mul", [x, g])
    elif kind == "scale":
        y = b.op("Add", [b.op("Mul", [x, b.weight((shape[-1],))]), b.weight((shape[-1],))])
    else:
        y = _act(b, x, str(rng.choice(["relu", "relu6", "hswish", "hsigmoid", "silu", "gelu"])))
        if y == x:
            y = b.op("Relu", [x])
    return Pattern("eltwise", (kind, shape), b.model([y]), shape)


def pool_pattern(rng: np.random.Generator) -> Pattern:
    """Max / average pooling, global pooling, the mean over tokens."""
    b = _Builder(rng)
    c, side = _channels(rng, 3, 2048), _side(rng, 2, 112)
    kind = str(rng.choice(["max", "avg", "global", "tokens"], p=[0.3, 0.15, 0.4, 0.15]))
    if kind == "tokens":
        x = b.input((1, side * side // 4 + 1, c))
        y = b.op("ReduceMean", [x], axes=[1], keepdims=0)
        return Pattern("pool", (kind, c, side), b.model([y]), (1, side * side // 4 + 1, c))
    x = b.input((1, c, side, side))
    if kind == "global":
        y = b.op("GlobalAveragePool", [x])
    else:
        k = int(rng.choice([2, 3]))
        y = b.op("MaxPool" if kind == "max" else "AveragePool", [x], kernel_shape=[k, k],
                 strides=[2, 2], pads=[1] * 4 if k == 3 else [0] * 4)  # fmt: skip
    return Pattern("pool", (kind, c, side), b.model([y]), (1, c, side, side))


def layout_pattern(rng: np.random.Generator) -> Pattern:
    """Reshapes and transposes: channel shuffle, patch flattening, heads split / merge,
    concatenation and channel split."""
    b = _Builder(rng)
    kind = str(rng.choice(
        ["shuffle", "flatten", "heads", "merge", "concat", "split", "slice", "transpose",
         "select"]
    ))  # fmt: skip
    c, side = _channels(rng, 8, 1024), _side(rng, 1, 112)
    c += c % 2
    if kind == "shuffle":
        x = b.input((1, c, side, side))
        y = b.op("Reshape", [x, b.weight((5,), [1, 2, c // 2, side, side], np.int64)])
        y = b.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
        y = b.op("Reshape", [y, b.weight((4,), [1, c, side, side], np.int64)])
        return Pattern("layout", (kind, c, side), b.model([y]), (1, c, side, side))
    if kind == "flatten":
        x = b.input((1, c, side, side))
        y = b.op("Reshape", [x, b.weight((3,), [1, c, side * side], np.int64)])
        y = b.op("Transpose", [y], perm=[0, 2, 1])
        return Pattern("layout", (kind, c, side), b.model([y]), (1, c, side, side))
    if kind in ("heads", "merge"):
        heads, dim, tokens = (
            int(rng.integers(1, 17)),
            int(rng.choice([32, 64])),
            _side(rng, 1, 1024),
        )
        if kind == "heads":
            x = b.input((1, tokens, 3 * heads * dim))
            y = b.op("Reshape", [x, b.weight((5,), [1, tokens, 3, heads, dim], np.int64)])
            y = b.op("Transpose", [y], perm=[2, 0, 3, 1, 4])
            return Pattern(
                "layout", (kind, heads, dim, tokens), b.model([y]), (1, tokens, 3 * heads * dim)
            )
        x = b.input((1, heads, tokens, dim))
        y = b.op("Transpose", [x], perm=[0, 2, 1, 3])
        y = b.op("Reshape", [y, b.weight((3,), [1, tokens, heads * dim], np.int64)])
        return Pattern("layout", (kind, heads, dim, tokens), b.model([y]), (1, heads, tokens, dim))
    if kind == "concat":
        c2 = _channels(rng, 8, 1024)
        x = b.input((1, c, side, side))
        y = b.op("Concat", [x, b.input((1, c2, side, side))], axis=1)
        return Pattern("layout", (kind, c, c2, side), b.model([y]), (1, c, side, side))
    if kind == "select":  # a ViT's class token: x[:, 0]
        tokens = _side(rng, 2, 1024)
        x = b.input((1, tokens, c))
        y = b.op("Gather", [x, b.weight((), [0], np.int64)], axis=1)
        return Pattern("layout", (kind, tokens, c), b.model([y]), (1, tokens, c))
    if kind == "slice":  # one half of a channel split
        x = b.input((1, c, side, side))
        y = b.op("Slice", [x, b.weight((1,), [c // 2], np.int64), b.weight((1,), [c], np.int64),
                           b.weight((1,), [1], np.int64)])  # fmt: skip
        return Pattern("layout", (kind, c, side), b.model([y]), (1, c, side, side))
    if kind == "split":
        x = b.input((1, c, side, side))
        lo = b.op("Slice", [x, b.weight((1,), [0], np.int64), b.weight((1,), [c // 2], np.int64),
                            b.weight((1,), [1], np.int64)])  # fmt: skip
        hi = b.op("Slice", [x, b.weight((1,), [c // 2], np.int64), b.weight((1,), [c], np.int64),
                            b.weight((1,), [1], np.int64)])  # fmt: skip
        return Pattern("layout", (kind, c, side), b.model([lo, hi]), (1, c, side, side))
    x = b.input((1, c, side, side))
    perm = [0, 2, 3, 1] if rng.random() < 0.5 else [0, 1, 3, 2]
    y = b.op("Transpose", [x], perm=perm)
    return Pattern("layout", (kind, c, side, tuple(perm)), b.model([y]), (1, c, side, side))


GENERATORS: dict[str, tuple[Callable[[np.random.Generator], Pattern], float]] = {
    "conv": (conv_pattern, 0.45),
    "linear": (linear_pattern, 0.15),
    "attention": (attention_pattern, 0.07),
    "norm": (norm_pattern, 0.05),
    "eltwise": (eltwise_pattern, 0.12),
    "pool": (pool_pattern, 0.06),
    "layout": (layout_pattern, 0.10),
}
"""Pattern generators by family, with the share of samples drawn from each."""


def draw(rng: np.random.Generator, n: int) -> list[Pattern]:
    """``n`` random patterns, families in the shares of :data:`GENERATORS`."""
    names = list(GENERATORS)
    p = np.array([GENERATORS[f][1] for f in names])
    fams = rng.choice(names, size=n, p=p / p.sum())
    return [GENERATORS[f][0](rng) for f in fams]


def pattern_kernels(pattern: Pattern) -> list[Kernel]:
    """The kernels ONNX Runtime runs for ``pattern`` ([] if it cannot run it)."""
    from hwnas.errors import HwnasError

    try:
        return list(read_kernels(pattern.model, pattern.input_shape).kernels)
    except HwnasError:
        return []


def adaptive_sample(
    time_kernels: Callable[[list[Kernel]], dict[str, float]],
    budget: int,
    seed: int = 0,
    initial: float = 0.4,
    rounds: int = 6,
    candidates_per_pick: int = 6,
    known: tuple[list[Kernel], list[float]] | None = None,
    log: Callable[[str], None] | None = None,
) -> tuple[list[Kernel], list[float]]:
    """Time about ``budget`` kernels: a random ``initial`` share, then rounds that time the
    patterns whose kernels the regressors are least certain about.

    Args:
        time_kernels: times kernels on the device (through the store), returns key -> ms.
        budget: kernels to time in all (new ones; kernels already known count as free).
        seed: random seed.
        initial: share of the budget drawn at random first.
        rounds: adaptive rounds sharing the rest.
        candidates_per_pick: candidate patterns drawn per pattern timed in a round.
        known: kernels and times already measured (the store's), fitted on from the start.
        log: progress messages.

    Returns:
        (kernels, times in ms) of everything known at the end.
    """
    from hwnas.predictors.kernels.regress import KernelRegressors

    rng = np.random.default_rng(seed)
    kernels: dict[str, Kernel] = {}
    times: dict[str, float] = {}
    if known is not None:
        for k, v in zip(*known):
            kernels[k.key], times[k.key] = k, float(v)
    start = len(times)
    log = log or (lambda _m: None)

    def take(patterns: list[Pattern]) -> None:
        new = []
        for p in patterns:
            for k in pattern_kernels(p):
                if k.key not in times and k.key not in {n.key for n in new}:
                    new.append(k)
        if new:
            got = time_kernels(new)
            for k in new:
                if k.key in got:
                    kernels[k.key], times[k.key] = k, float(got[k.key])

    first = int(budget * initial)
    while len(times) - start < first:
        take(draw(rng, 8))
    log(f"random: {len(times) - start} kernels")
    per_round = max(1, (budget - first) // max(1, rounds))
    for r in range(rounds):
        reg = KernelRegressors(seed=seed + r).fit(list(kernels.values()), list(times.values()))
        goal = len(times) - start + per_round
        while len(times) - start < min(goal, budget):
            pool = draw(rng, 4 * candidates_per_pick)
            scored = []
            for p in pool:
                ks = [k for k in pattern_kernels(p) if k.key not in times]
                if not ks:
                    continue
                pred = reg.predict(ks)
                std = np.where(np.isnan(pred.log_std), 10.0, pred.log_std)
                scored.append((float(std.max()), p))
            scored.sort(key=lambda s: -s[0])
            take([p for _, p in scored[:4]])
        log(f"round {r + 1}/{rounds}: {len(times) - start} kernels, {len(reg.models)} types fitted")
    keys = list(times)
    return [kernels[k] for k in keys], [times[k] for k in keys]


def sample_device(
    profiler, budget: int, seed: int = 0, log: Callable[[str], None] | None = None
) -> tuple[list[Kernel], list[float]]:
    """Adaptive sampling on a live device: time about ``budget`` new kernels through
    ``profiler`` (and its store), starting from every kernel the store already has for it.

    Returns:
        (kernels, times in ms) of every kernel the store then has for the device.

    Raises:
        HwnasError: the device does not run ONNX Runtime models.
    """
    from hwnas.errors import HwnasError
    from hwnas.predictors.kernels.timing import alone_ms, overheads, stored_kernels, time_kernels

    dev = profiler.device
    if getattr(dev, "runtime_name", None) != "ort" or not dev.runs_models:
        raise HwnasError(
            f"kernel sampling times ONNX Runtime kernels; device '{dev.name}' runs "
            f"{dev.runtime or 'no runtime'}"
        )
    stored = stored_kernels(profiler.store, dev.name, dev.runtime)
    o = overheads(profiler)[0]  # each time as if its call had paid the device's overhead
    known = ([k for k, _ in stored.values()], [alone_ms(m, o) for _, m in stored.values()])

    def timer(kernels: list[Kernel]) -> dict[str, float]:
        got, _ = time_kernels(profiler, kernels)
        return {key: alone_ms(m, o) for key, m in got.items()}

    return adaptive_sample(timer, budget, seed=seed, known=known, log=log)
