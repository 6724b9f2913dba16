"""Registries by name, resolved lazily.

An entry is a ``"module:attribute"`` string, imported only when the entry is first used, so
that ``import hwnas`` and ``hwnas --help`` do not import torch, onnxruntime or tvm.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any, Generic, TypeVar

from hwnas.errors import UnknownNameError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names mapped to lazily imported objects (classes or factories).

    Args:
        kind: what the entries are, used in error messages ("search space", "strategy"...).
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._targets: dict[str, str | T] = {}
        self._info: dict[str, dict[str, Any]] = {}

    def register(self, name: str, target: str | T, **info: Any) -> None:
        """Add ``name``; ``target`` is an object or a ``"module:attribute"`` path; ``info``
        declares facts about the entry that are known without importing it."""
        self._targets[name] = target
        self._info[name] = dict(info)

    def unregister(self, name: str) -> None:
        """Remove ``name`` (a plugin's or a test's entry); no error when it is not there."""
        self._targets.pop(name, None)
        self._info.pop(name, None)

    def info(self, name: str) -> dict[str, Any]:
        """What ``name`` was registered with (``register``'s keywords).

        Raises:
            UnknownNameError: ``name`` is not registered.
        """
        if name not in self._targets:
            raise UnknownNameError(self.kind, name, list(self._targets))
        return self._info[name]

    def get(self, name: str) -> T:
        """The object registered as ``name``.

        Raises:
            UnknownNameError: ``name`` is not registered (the message lists the known names).
        """
        try:
            target = self._targets[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, list(self._targets)) from None
        if isinstance(target, str):
            target = load(target)
            self._targets[name] = target
        return target

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._targets)

    def select(self, kind: str, **info: Any) -> Registry[T]:
        """A registry of the entries registered with ``info`` (e.g. ``pipeline="supernet"``),
        called ``kind`` in its messages."""
        out: Registry[T] = Registry(kind)
        for name, target in self._targets.items():
            if all(self._info[name].get(k) == v for k, v in info.items()):
                out.register(name, target, **self._info[name])
        return out

    def __contains__(self, name: object) -> bool:
        return name in self._targets

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {self.names()})"


def load(target: str) -> Any:
    """Import ``"module:attribute"`` and return the attribute."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
