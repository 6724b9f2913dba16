"""hwnas: hardware-aware neural architecture search.

``import hwnas`` is kept light: torch, onnx, onnxruntime, optuna and tvm are imported only by
the modules that need them, so the CLI's ``--help`` and the registries stay fast. The names
below are imported on first use (:func:`__getattr__`).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_LAZY: dict[str, tuple[str, str | None]] = {
    "search": ("hwnas.api", "search"),
    "SearchRun": ("hwnas.api", "SearchRun"),
    "measure": ("hwnas.measure", None),  # the module, callable as hwnas.measure.measure
    "predict": ("hwnas.api", "predict"),
    "get_space": ("hwnas.api", "get_space"),  # FILE.py:ATTR imported: the caller's own
    "get_device": ("hwnas.devices", "get_device"),
    "HwnasError": ("hwnas.errors", "HwnasError"),
    "HwnasWarning": ("hwnas.errors", "HwnasWarning"),
    "elastic": ("hwnas.spaces.module", "elastic"),
    "register_space": ("hwnas.spaces", "register_space"),
    "nn": ("hwnas.nn", None),
    "zoo": ("hwnas.zoo", None),
}
"""Public name -> (module, attribute; None: the module itself), imported on first use."""

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'hwnas' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = import_module(module) if attr is None else getattr(import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:  # the public names, not this module's imports
    return sorted({"__version__", *_LAZY, *(n for n in globals() if n in _LAZY)})
