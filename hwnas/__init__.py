"""hwnas: hardware-aware neural architecture search.

``import hwnas`` is kept light: torch, onnx, onnxruntime, optuna and tvm are imported only by
the modules that need them, so the CLI's ``--help`` and the registries stay fast.
"""

__version__ = "0.1.0"
