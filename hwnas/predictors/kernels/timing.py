"""Timing kernels alone on a live device, through the measurement store (each kernel once).

A kernel (:class:`~hwnas.predictors.kernels.read.Kernel`) is timed as its one-node ONNX model
by the device's own runtime and timing protocol, through :class:`hwnas.measure.Profiler`: the
store keeps every kernel measured (key: the kernel's content hash), so a kernel shared by many
networks, searches or workers is timed once per device. The one-node model's time includes the
runtime's per-call overhead (binding, dispatch), which a kernel inside a network does not pay:
:func:`overhead_workload` times an empty kernel (a ReLU of one element) to subtract it. A kernel
timed alone also finds its weights where its previous call left them, in the caches; inside a
network of more weights than the caches hold it reads them from further away:
:func:`stream_rate` times how fast the device streams weights at each size.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hwnas.devices.base import Measurement, Workload
from hwnas.errors import CandidateError
from hwnas.predictors.kernels.read import Kernel


def kernel_workload(
    kernel: Kernel, overhead_ms: float | None = None, slowdown: float | None = None
) -> Workload:
    """The workload timing ``kernel`` alone (its one-node model; input: its first float
    input's shape); ``overhead_ms``: the device's per-call overhead timed just before it, and
    ``slowdown``: how much slower the device ran its speed probe just before it than when the
    probe was first timed (:func:`slowdown_now`), both kept with its measurement
    (:func:`alone_ms`)."""
    shape = kernel.x_inputs[0].shape if kernel.x_inputs else (1,)
    info: dict = {"kernel": kernel.record()}
    if overhead_ms is not None:
        info["overhead_ms"] = float(overhead_ms)
    if slowdown is not None:
        info["slowdown"] = float(slowdown)
    return Workload(
        kernel.key,
        f"kernel {kernel.label}",
        tuple(shape) or (1,),
        onnx_factory=kernel.onnx_bytes,
        info=info,
    )


OVERHEAD_REFRESH_S = 30.0
"""While kernels are being timed, the per-call overhead and the slowdown kept with each are
timed again after this many seconds: on a shared or throttling machine they move (the overhead
3.0-6.2 us from one minute to the next on this project's 2-core VM), and a kernel of a few
microseconds is its difference from the overhead."""


SLOWDOWN_BAND = 1.15
"""A kernel timed while the device's speed probe ran more than this factor slower than when the
probe was first timed is scaled back to the probe's first speed (:func:`alone_ms`); below it,
the probe's own noise would only add to the kernel's. A probe running faster than at first is
not taken as a speed-up: a first timing that was slow itself (cold caches, a busy moment)
would otherwise scale every later kernel up (1.16x for 531 of 827 kernels in one home)."""

SLOWDOWN_RANGE = (0.2, 5.0)
"""Slowdowns (kept with a kernel's measurement) outside this range are not a machine's state
but a store edited by hand: ignored."""


def alone_ms(m: Measurement, overhead_ms: float) -> float:
    """A kernel's time alone (ms) as if its call had paid ``overhead_ms`` (the device's
    per-call overhead, :func:`overheads`) at the device's usual speed: its measured value less
    the overhead timed with it (:func:`time_kernels`), divided by the slowdown timed with it
    where that is above :data:`SLOWDOWN_BAND`, plus ``overhead_ms``; its value as measured
    where no overhead was kept (a kernel timed before hwnas kept one, or a recorded device's;
    also where the one kept is not a finite number of ms from 0 up to the value, as in a store
    edited by hand).

    Subtracting one overhead timed once per device from kernels timed at other moments
    credited each small kernel with the machine's drift in between: a text classifier of 37
    kernels of 5-10 us each was predicted at 0.151 ms against 0.062 ms measured. A kernel is
    timed once per device, ever: on a shared machine that runs at half speed for minutes at a
    time (this project's 2-core VM), nine MatMul kernels timed in such a
    spell ran at 41 GMAC/s against 81-86 for every other one in the store, and moved the
    correction fitted on the networks using them from x0.877 to x0.809 (an audit); the
    slowdown kept with each kernel takes such a spell back out."""
    workload = getattr(m, "extra", {}).get("workload")
    own = workload.get("overhead_ms") if isinstance(workload, dict) else None
    number = isinstance(own, (int, float)) and not isinstance(own, bool)
    if not (number and math.isfinite(own) and 0 <= own <= m.value):
        return float(m.value)
    slow = workload.get("slowdown")
    ok = isinstance(slow, (int, float)) and not isinstance(slow, bool) and math.isfinite(slow)
    if not (ok and SLOWDOWN_RANGE[0] <= slow <= SLOWDOWN_RANGE[1]) or slow <= SLOWDOWN_BAND:
        slow = 1.0
    return (float(m.value) - float(own)) / float(slow) + float(overhead_ms)


def overhead_workload(nodes: int = 1) -> Workload:
    """A chain of ``nodes`` ReLUs of a 1x1x1x1 tensor: with one node, the runtime's per-call
    overhead (what every kernel timed alone pays once); the difference between 65 nodes and
    one, over 64, is the dispatch of one node inside a network (ms)."""
    from onnx import TensorProto, helper

    from hwnas.export import content_hash

    def factory() -> bytes:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 1, 1])
        y = helper.make_tensor_value_info(f"t{nodes}", TensorProto.FLOAT, [1, 1, 1, 1])
        chain = [helper.make_node("Relu", [f"t{i}" if i else "x"], [f"t{i + 1}"])
                 for i in range(nodes)]  # fmt: skip
        g = helper.make_graph(chain, "overhead", [x], [y])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m.SerializeToString()

    key = content_hash("kernel-overhead", "relu-1x1x1x1" + ("" if nodes == 1 else f"x{nodes}"))
    label = "kernel overhead (empty call)" if nodes == 1 else f"kernel overhead ({nodes} nodes)"
    return Workload(key, label, (1, 1, 1, 1), onnx_factory=factory)


SPEED_PROBES = {
    "compute": ("nchwc:Conv k3x3 Relu 1x64x56x56->1x64x56x56", 0.86102),
    "memory": ("Mul 1x256x56x56,1x256x56x56->1x256x56x56", 0.100585),
}
"""Work class -> (label of the probe kernel, its time alone in ms on the reference CPU): a
ResNet-18 3x3 convolution at 56x56 and an elementwise product of two 3.2 MB tensors, both in
``devices/data/cpu_ground_truth/kernels.jsonl.gz`` (the reference CPU that
:data:`~hwnas.predictors.kernels.regress.PRIOR_NS_PER_WORK` comes from)."""


@functools.cache
def speed_probe_workloads() -> dict[str, Workload]:
    """Work class -> the workload timing its probe kernel (:data:`SPEED_PROBES`), read from a
    two-node model as ONNX Runtime runs it (once per process: reading runs ONNX Runtime)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from hwnas.predictors.kernels.read import read_kernels

    def model(nodes, inits, shape) -> bytes:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        m = helper.make_model(helper.make_graph(nodes, "probe", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
        m.ir_version = 8
        return m.SerializeToString()

    w = np.random.default_rng(0).standard_normal((64, 64, 3, 3)).astype(np.float32) * 0.05
    conv = model(
        [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1] * 4),
         helper.make_node("Relu", ["c"], ["y"])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(64, np.float32), "b")],
        [1, 64, 56, 56],
    )  # fmt: skip
    mul = model([helper.make_node("Neg", ["x"], ["n"]), helper.make_node("Mul", ["x", "n"], ["y"])],
                [], [1, 256, 56, 56])  # fmt: skip
    out = {}
    for cls, data in (("compute", conv), ("memory", mul)):
        label = SPEED_PROBES[cls][0]
        kernel = next((k for k in read_kernels(data).kernels if k.label == label), None)
        if kernel is not None:  # another ONNX Runtime may fuse otherwise: no probe, no scale
            out[cls] = kernel_workload(kernel)
    return out


def device_speed(profiler) -> dict[str, float]:
    """Work class -> how many times longer this device takes than the reference CPU on the
    class's probe kernel (:data:`SPEED_PROBES`; timed once through ``profiler`` and its
    store): what scales the reference CPU's time per unit of work for kernels of a type
    nobody timed here."""
    return {
        cls: float(
            profiler.measure(wl, "latency_ms", allow_flagged=True).value / SPEED_PROBES[cls][1]
        )
        for cls, wl in speed_probe_workloads().items()
    }


STREAM_PROBE_MB = (0.5, 2.0, 8.0, 32.0, 128.0)
"""Weight sizes (MB) at which :func:`stream_rate` times the device: from inside a core's
second-level cache to beyond most last-level caches (a network with more weights streams them
at the rate of the largest)."""


def stream_workload(mb: float) -> Workload:
    """A matrix-vector product, (1, k) x (k, 1024) float32 with a weight matrix of ``mb`` MB:
    each call reads every weight once for two flops per four bytes, so its time is the time to
    stream that many weights from where a working set of that size lives between calls (the
    caches while it fits, memory beyond)."""
    from onnx import TensorProto, helper, numpy_helper

    from hwnas.export import content_hash

    n = 1024
    k = max(1, int(round(mb * 2**20 / 4 / n)))

    def factory() -> bytes:
        import numpy as np

        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])
        w = numpy_helper.from_array(np.full((k, n), 0.01, np.float32), "w")
        g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "stream",
                              [x], [y], [w])  # fmt: skip
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        return m.SerializeToString()

    key = content_hash("weight-stream-probe", f"{k}x{n}")
    return Workload(key, f"weight streaming probe ({mb:g} MB)", (1, k), onnx_factory=factory)


def stream_rate(profiler, mb: float, overhead_ms: float) -> float:
    """Bytes per ms at which the device streams ``mb`` MB of weights
    (:func:`stream_workload`, less the per-call overhead ``overhead_ms``, :func:`overheads`),
    timed once through ``profiler`` and its store."""
    wl = stream_workload(mb)
    ms = profiler.measure(wl, "latency_ms", allow_flagged=True).value
    size = 4 * wl.input_shape[1] * 1024
    return float(size / max(ms - overhead_ms, 1e-6))


def slowdown_now(profiler, overhead_ms: float = 0.0) -> float | None:
    """How many times longer the device takes on its compute speed probe now
    (:data:`SPEED_PROBES`, timed now) than when the probe was first timed (kept in the store),
    each less the per-call overhead ``overhead_ms`` (ms); None where the runtime has no such
    probe kernel or its first timing stayed too noisy (flagged)."""
    wl = speed_probe_workloads().get("compute")
    if wl is None:
        return None
    kept = profiler.measure(wl, "latency_ms", allow_flagged=True)
    if kept.flagged:  # a first timing too noisy to compare with: no slowdown known
        return None
    first = kept.value - overhead_ms
    now = profiler.device.measure(wl, "latency_ms").value - overhead_ms
    return float(now / first) if first > 0 and now > 0 else None


def call_overhead_now(profiler) -> float:
    """The device's per-call overhead (ms) timed now, not read from the store (what
    :func:`time_kernels` keeps with the kernels it times)."""
    return float(profiler.device.measure(overhead_workload(1), "latency_ms").value)


def overheads(profiler) -> tuple[float, float]:
    """(per-call overhead, per-node dispatch) of the device's runtime in ms, timed once
    through ``profiler`` (and its store)."""
    one = profiler.measure(overhead_workload(1), "latency_ms", allow_flagged=True).value
    many = profiler.measure(overhead_workload(65), "latency_ms", allow_flagged=True).value
    return float(one), float(max(0.0, (many - one) / 64))


@dataclass
class KernelCounts:
    """What timing kernels cost.

    Attributes:
        measured: kernels timed now (new to the store).
        reused: kernels found in the store.
        failed: kernels the runtime could not run alone (left to the regressors).
    """

    measured: int = 0
    reused: int = 0
    failed: int = 0


def time_kernels(
    profiler,
    kernels: Iterable[Kernel],
    metric: str = "latency_ms",
    on_kernel: Callable[[Kernel], None] | None = None,
) -> tuple[dict[str, Measurement], KernelCounts]:
    """Measure each distinct kernel through ``profiler`` (from the store when it has it).

    A kernel that stays too noisy is kept with its flagged measurement (kernel times are
    short and many; the predictor's interval accounts for their noise).

    Returns:
        (kernel key -> measurement, counts). Kernels the runtime rejects alone are left out.
    """
    out: dict[str, Measurement] = {}
    counts = KernelCounts()
    # (monotonic s, per-call overhead ms, slowdown) timed now
    fresh: tuple[float, float, float | None] | None = None
    for kernel in {k.key: k for k in kernels}.values():
        before = profiler.counts.taken
        wl = kernel_workload(kernel)
        can_time = profiler.device.can_measure and profiler.store is not None
        found = profiler.stored(wl, metric) if can_time else None
        if can_time and (found is None or found.flagged):  # to be timed: keep the overhead
            if fresh is None or time.monotonic() - fresh[0] > OVERHEAD_REFRESH_S:
                overhead = call_overhead_now(profiler)
                fresh = (time.monotonic(), overhead, slowdown_now(profiler, overhead))
            wl = kernel_workload(kernel, fresh[1], fresh[2])
        try:
            m = profiler.measure(wl, metric, allow_flagged=True)
        except CandidateError:
            counts.failed += 1
            continue
        if profiler.counts.taken > before:
            counts.measured += 1
        else:
            counts.reused += 1
        out[kernel.key] = m
        if on_kernel is not None:
            on_kernel(kernel)
    return out, counts


def stored_kernels(
    store, device: str, runtime: str, metric: str = "latency_ms"
) -> dict[str, tuple[Kernel, Measurement]]:
    """Every kernel timed alone on ``device`` (and runtime) in the store: key -> (kernel,
    measurement); the kernel re-created from the description stored with it. A row whose
    description does not parse (a store edited by hand) is left out, as the store leaves out
    a row whose value is no measurement (:func:`hwnas.store.valid_measurement`)."""
    if store is None:
        return {}
    out = {}
    for m in store.measurements(device, metric):
        workload = m.extra.get("workload") if m.runtime == runtime else None
        record = workload.get("kernel") if isinstance(workload, dict) else None
        if record is None:
            continue
        try:
            kernel = Kernel.from_record(record)
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        out[m.model_hash] = (kernel, m)
    return out
