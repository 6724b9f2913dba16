"""A new runtime in one module (tests/runtimes/test_new_runtime.py): ONNX Runtime with every
graph optimisation turned off, registered when this module is imported."""

from __future__ import annotations

import numpy as np

from hwnas.runtimes import RUNTIMES
from hwnas.runtimes.base import Runtime
from hwnas.runtimes.executable import Executable


class PlainExecutable(Executable):
    def __init__(self, session, x: np.ndarray):
        self.session, self.x = session, x
        self.name = session.get_inputs()[0].name

    def __call__(self) -> None:
        self.session.run(None, {self.name: self.x})

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.name: np.asarray(x, np.float32)})[0]


class PlainOrt(Runtime):
    """ONNX Runtime, CPU, graph optimisations off (``ORT_DISABLE_ALL``)."""

    name = "ort-plain"
    key = "ort-plain"

    def __init__(self, threads: int = 1, **_profile):
        super().__init__()
        self.threads = threads

    def status(self) -> tuple[bool, str]:
        return True, "onnxruntime, graph optimisations off"

    def compile(self, onnx_bytes: bytes, input_shape: tuple[int, ...]) -> Executable:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        opts.intra_op_num_threads = self.threads
        session = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
        x = np.random.default_rng(0).random(input_shape, dtype=np.float32)
        return PlainExecutable(session, x)

    def versions(self) -> dict[str, str]:
        import onnxruntime as ort

        return {"onnxruntime": ort.__version__, "graph_optimization": "off"}


RUNTIMES.register(
    "ort-plain", PlainOrt, description="ONNX Runtime with graph optimisations off (a test's)"
)
