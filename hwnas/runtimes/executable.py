"""A compiled model bound to a fixed input: what a runtime's ``compile`` returns."""

from __future__ import annotations

import numpy as np

from hwnas.runtimes.timing import perf_counter_samples

CALL_LIMIT_S = 120.0
"""Seconds the first inference of a model being measured may take before it is stopped, on
runtimes that can stop one (:meth:`Executable.first_call`): a model that never ends (an ONNX
``Loop`` of 10^17 steps) is refused instead of waited for. The timing protocol takes at least
90 calls, so a model near this limit would take hours to measure anyway."""


class Executable:
    """One compiled model with its input bound once.

    Subclasses implement :meth:`__call__` (one inference on the bound input) and
    :meth:`predict`; runtimes that can time on the device (TVM's ``time_evaluator``, also over
    RPC) override :meth:`samples_ms`.
    """

    untimed_calls: int = 0
    """Inferences each :meth:`samples_ms` call runs beyond those it times (TVM's
    ``time_evaluator`` runs one untimed call first): an energy meter's window counts them."""

    def __call__(self) -> None:
        """Run one inference on the bound input."""
        raise NotImplementedError

    def first_call(self, limit_s: float) -> None:
        """One inference before the timed ones, stopped after ``limit_s`` seconds where the
        runtime can stop a run (ONNX Runtime); elsewhere it runs to its end.

        Raises:
            hwnas.errors.CandidateError: the inference was stopped.
        """
        self()

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Outputs for input ``x`` (float32, the compiled input shape), as a NumPy array."""
        raise NotImplementedError

    def samples_ms(self, n: int) -> list[float]:
        """Run ``n`` inferences and return the time of each, in ms."""
        return perf_counter_samples(self, n)
