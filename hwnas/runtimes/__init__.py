"""Runtimes that compile an exported ONNX model and time it: a registry by name.

A runtime has a ``key`` (its part of a measurement's store key: "ort", "ort:cuda",
"tvm:llvm-1a2b3c4d"...) and two methods: ``compile(onnx_bytes, input_shape)`` returns an
:class:`~hwnas.runtimes.executable.Executable` (call it to run one inference), and
``versions()`` names what did the work. Timing is shared by all runtimes
(:func:`hwnas.runtimes.timing.time_callable`).

A new runtime is a module with a :class:`~hwnas.runtimes.base.Runtime` subclass and one
``RUNTIMES.register(name, target, description=...)``: the CLI's ``--runtime`` choices and the
live devices' usable runtimes are read from this registry.

Registered: ``ort`` (ONNX Runtime, CPU or CUDA execution provider) and ``tvm`` (Apache TVM
Relax, tuned with MetaSchedule, run locally or over TVM RPC). TVM is imported only when a TVM
model is compiled.
"""

from __future__ import annotations

from hwnas.registry import Registry

RUNTIMES: Registry = Registry("runtime")
RUNTIMES.register(
    "ort",
    "hwnas.runtimes.onnxruntime:OnnxRuntime",
    description="ONNX Runtime (CPU, or CUDA with onnxruntime-gpu)",
)
RUNTIMES.register(
    "tvm",
    "hwnas.runtimes.tvm:TvmRuntime",
    description="Apache TVM Relax, tuned with MetaSchedule (locally or over RPC)",
)


def get_runtime(name: str, **options):
    """An instance of the runtime called ``name`` ("ort", "tvm").

    Raises:
        hwnas.errors.UnknownNameError: unknown runtime.
    """
    return RUNTIMES.get(name)(**options)
