"""Runtimes that compile an exported ONNX model and time it: a registry by name.

A runtime has two methods: ``compile(onnx_bytes, input_shape)`` returns a callable that runs
one inference, and ``versions()`` names what did the work. Timing is shared by all runtimes
(:func:`hwnas.runtimes.timing.time_callable`).
"""

from __future__ import annotations

from hwnas.registry import Registry

RUNTIMES: Registry = Registry("runtime")
RUNTIMES.register("ort", "hwnas.runtimes.onnxruntime:OnnxRuntime")


def get_runtime(name: str, **options):
    """An instance of the runtime called ``name`` ("ort").

    Raises:
        hwnas.errors.UnknownNameError: unknown runtime.
    """
    return RUNTIMES.get(name)(**options)
