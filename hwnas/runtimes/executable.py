"""A compiled model bound to a fixed input: what a runtime's ``compile`` returns."""

from __future__ import annotations

import numpy as np

from hwnas.runtimes.timing import perf_counter_samples


class Executable:
    """One compiled model with its input bound once.

    Subclasses implement :meth:`__call__` (one inference on the bound input) and
    :meth:`predict`; runtimes that can time on the device (TVM's ``time_evaluator``, also over
    RPC) override :meth:`samples_ms`.
    """

    def __call__(self) -> None:
        """Run one inference on the bound input."""
        raise NotImplementedError

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Outputs for input ``x`` (float32, the compiled input shape), as a NumPy array."""
        raise NotImplementedError

    def samples_ms(self, n: int) -> list[float]:
        """Run ``n`` inferences and return the time of each, in ms."""
        return perf_counter_samples(self, n)
