"""ONNX Runtime: the CPU execution provider, or CUDA when onnxruntime-gpu is installed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from hwnas.errors import CandidateError, DeviceUnavailableError, HwnasError
from hwnas.runtimes.base import BuildInfo, Runtime
from hwnas.runtimes.executable import Executable

PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
"""Short provider names accepted in profiles and on the command line."""


@contextmanager
def stop_after(limit_s: float, what: str, error: type[HwnasError] = HwnasError) -> Iterator:
    """ONNX Runtime ``RunOptions`` that stop the run they are passed to after ``limit_s``
    seconds (``RunOptions.terminate``, set from a timer thread).

    A model with a ``Loop`` whose trip count it computes can run for ever (a trip count of
    10^17); the runs hwnas makes of a user's model to read or measure it go through this.

    Raises:
        error: ("{what} did not end in {limit_s} s (stopped)") when the run was stopped;
            any other exception of the run passes through unchanged.
    """
    import onnxruntime as ort

    run = ort.RunOptions()
    run.log_severity_level = 4  # the stop is reported by the error below, not ORT's log
    timer = threading.Timer(limit_s, lambda: setattr(run, "terminate", True))
    timer.daemon = True
    timer.start()
    try:
        yield run
    except Exception:
        if run.terminate:
            raise error(f"{what} did not end in {limit_s:g} s (stopped)") from None
        raise
    finally:
        timer.cancel()


class OrtExecutable(Executable):
    """An ONNX Runtime session with input and outputs bound once (I/O binding)."""

    def __init__(self, session, binding, input_name: str):
        self.session = session
        self.binding = binding
        self.input_name = input_name

    def __call__(self) -> None:
        self.session.run_with_iobinding(self.binding)

    def first_call(self, limit_s: float) -> None:
        """One inference, stopped after ``limit_s`` seconds (:func:`stop_after`).

        Raises:
            CandidateError: the inference did not end in ``limit_s`` seconds, or ONNX Runtime
                failed on it (a Reshape whose shape does not fit the input the model was fixed
                to: its first line).
        """
        with stop_after(limit_s, "one inference", CandidateError) as run:
            try:
                self.session.run_with_iobinding(self.binding, run)
            except Exception as exc:  # onnxruntime's RuntimeError / Fail / InvalidArgument
                if run.terminate:
                    raise  # stop_after names the stop
                text = str(exc).strip()
                first = text.splitlines()[0] if text else type(exc).__name__
                raise CandidateError(f"ONNX Runtime failed on one inference: {first}") from None

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self.session.run(None, {self.input_name: np.asarray(x, np.float32)})[0]


class OnnxRuntime(Runtime):
    """Compile with ONNX Runtime (all graph optimisations, sequential execution).

    Args:
        threads: intra-op threads; 1 gives the most stable timings on small machines.
        provider: "cpu" or "cuda" (or a full execution-provider name).
        device_id: GPU index for the CUDA provider.
    """

    name = "ort"

    def __init__(self, threads: int = 1, provider: str = "cpu", device_id: int = 0, **_ignored):
        super().__init__()
        self.threads = threads
        self.provider = PROVIDERS.get(provider, provider)
        self.device_id = device_id

    @property
    def key(self) -> str:
        """Store key: "ort" on the CPU provider (as before), "ort:cuda" on CUDA, with
        ":t<N>" for N intra-op threads other than 1 (a 2-thread latency is not a 1-thread
        one: a profile with `threads: 2` reused the 1-thread values)."""
        threads = "" if int(self.threads) == 1 else f":t{int(self.threads)}"
        if self.provider == "CPUExecutionProvider":
            return f"ort{threads}"
        short = {v: k for k, v in PROVIDERS.items()}.get(self.provider, self.provider)
        return f"ort:{short}{threads}"

    def status(self) -> tuple[bool, str]:
        """(the provider is installed, one line saying which or what to install)."""
        import onnxruntime as ort

        have = ort.get_available_providers()
        if self.provider in have:
            return True, f"ONNX Runtime {ort.__version__} with {self.provider}"
        hint = " (pip install onnxruntime-gpu)" if self.provider == PROVIDERS["cuda"] else ""
        return False, (
            f"ONNX Runtime {ort.__version__} has no {self.provider}{hint}; it has {', '.join(have)}"
        )

    def compile(self, onnx_bytes: bytes, input_shape: tuple[int, ...]) -> OrtExecutable:
        """An executable running one inference on fixed inputs: the first of ``input_shape``,
        the others at their declared shapes, each fed as :mod:`hwnas.onnx_inputs` says (token
        ids spread over the vocabulary, masks of ones, floats standard-normal).

        Inputs and outputs are bound once (I/O binding; on CUDA they stay on the GPU), so a
        call costs the model plus about 8 microseconds.

        Raises:
            DeviceUnavailableError: the execution provider is not installed.
            CandidateError: ONNX Runtime rejects the model.
        """
        import onnxruntime as ort

        ok, why = self.status()
        if not ok:
            raise DeviceUnavailableError(why)
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        providers: list = [self.provider]
        if self.provider == PROVIDERS["cuda"]:
            providers = [(self.provider, {"device_id": self.device_id})]
        started = time.perf_counter()
        try:
            session = ort.InferenceSession(onnx_bytes, options, providers=providers)
        except Exception as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CandidateError(f"ONNX Runtime cannot load the model: {first}") from None
        from hwnas.onnx_inputs import bytes_inputs, feeds

        try:
            specs = bytes_inputs(onnx_bytes, tuple(input_shape))
        except HwnasError as exc:
            raise CandidateError(str(exc)) from None
        fed = feeds(specs)
        binding = session.io_binding()
        if self.provider == PROVIDERS["cuda"]:
            for name, x in fed.items():
                binding.bind_ortvalue_input(
                    name, ort.OrtValue.ortvalue_from_numpy(x, "cuda", self.device_id)
                )
            for out in session.get_outputs():
                binding.bind_output(out.name, "cuda", self.device_id)
        else:
            for name, x in fed.items():
                binding.bind_cpu_input(name, x)
            for out in session.get_outputs():
                binding.bind_output(out.name)
        self.last_build = BuildInfo(cached=False, compile_s=time.perf_counter() - started)
        return OrtExecutable(session, binding, specs[0].name)

    def versions(self) -> dict[str, str]:
        import onnxruntime as ort

        return {"onnxruntime": ort.__version__, "provider": self.provider}
