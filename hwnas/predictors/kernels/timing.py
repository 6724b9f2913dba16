"""Timing kernels alone on a live device, through the measurement store (each kernel once).

A kernel (:class:`~hwnas.predictors.kernels.read.Kernel`) is timed as its one-node ONNX model
by the device's own runtime and timing protocol, through :class:`hwnas.measure.Profiler`: the
store keeps every kernel measured (key: the kernel's content hash), so a kernel shared by many
networks, searches or workers is timed once per device. The one-node model's time includes the
runtime's per-call overhead (binding, dispatch), which a kernel inside a network does not pay:
:func:`overhead_workload` times an empty kernel (a ReLU of one element) to subtract it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from hwnas.devices.base import Measurement, Workload
from hwnas.errors import CandidateError
from hwnas.predictors.kernels.read import Kernel


def kernel_workload(kernel: Kernel) -> Workload:
    """The workload timing ``kernel`` alone (its one-node model; input: its first float
    input's shape)."""
    shape = kernel.x_inputs[0].shape if kernel.x_inputs else (1,)
    return Workload(
        kernel.key,
        f"kernel {kernel.label}",
        tuple(shape) or (1,),
        onnx_factory=kernel.onnx_bytes,
        info={"kernel": kernel.record()},
    )


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
    for kernel in {k.key: k for k in kernels}.values():
        before = profiler.counts.taken
        try:
            m = profiler.measure(kernel_workload(kernel), metric, allow_flagged=True)
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
    measurement); the kernel re-created from the description stored with it."""
    if store is None:
        return {}
    out = {}
    for m in store.measurements(device, metric):
        record = m.extra.get("workload", {}).get("kernel") if m.runtime == runtime else None
        if record is not None:
            out[m.model_hash] = (Kernel.from_record(record), m)
    return out
