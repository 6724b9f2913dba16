"""ONNX Runtime on this machine's CPU (CPU execution provider)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hwnas.errors import HwnasError


class OnnxRuntime:
    """Compile with ONNX Runtime (all graph optimisations, sequential execution).

    Args:
        threads: intra-op threads; 1 gives the most stable timings on small machines.
        provider: execution provider ("CPUExecutionProvider").
    """

    name = "onnxruntime"

    def __init__(self, threads: int = 1, provider: str = "CPUExecutionProvider"):
        self.threads = threads
        self.provider = provider

    def compile(self, onnx_bytes: bytes, input_shape: tuple[int, ...]) -> Callable[[], object]:
        """A callable running one inference on a fixed random input of ``input_shape``.

        Inputs and outputs are bound once (I/O binding), so a call costs the model plus about
        8 microseconds.

        Raises:
            HwnasError: ONNX Runtime rejects the model.
        """
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        try:
            session = ort.InferenceSession(onnx_bytes, options, providers=[self.provider])
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise HwnasError(f"ONNX Runtime cannot load the model: {first}") from None
        inp = session.get_inputs()[0]
        x = np.random.default_rng(0).standard_normal(input_shape).astype(np.float32)
        binding = session.io_binding()
        binding.bind_cpu_input(inp.name, x)
        for out in session.get_outputs():
            binding.bind_output(out.name)

        def run() -> None:
            session.run_with_iobinding(binding)

        return run

    def versions(self) -> dict[str, str]:
        import onnxruntime as ort

        return {"onnxruntime": ort.__version__, "provider": self.provider}
