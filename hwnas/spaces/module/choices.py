"""The choice points of a search space written as a PyTorch module (:class:`Choice`,
:class:`ValueChoice`, :class:`Repeat`), public as :mod:`hwnas.nn` (its docstring says where each
may go); here so that the space code that reads them does not import the public module that
builds spaces from them."""

from __future__ import annotations

import copy
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from hwnas.errors import HwnasError

__all__ = ["Choice", "MADE_IN", "Repeat", "TRACING", "ValueChoice"]

TRACING = [False]
"""Set while :func:`hwnas.spaces.module.analysis.trace` traces a module."""

MADE_IN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""module -> the :class:`ValueChoice` objects made while its ``__init__`` ran (the innermost
module constructor on the stack). A space checks that each is still held by a layer of the
model: one consumed as a number (``range(depth)``, only ever ``width * 4``) leaves no decision
(:func:`hwnas.spaces.module.module_space`)."""


class ValueChoice(int):
    """A number chosen among ``values``: a width, a kernel size or a depth.

    It is an ``int`` equal to its largest value, so layers are built at their largest and the
    module is the supernet; tracing finds where it was used (:mod:`hwnas.spaces.module`).

    Args:
        values: the candidate values (at least two positive integers, distinct; kept sorted,
            smallest first).
        label: the decision's name in arch strings (default: the name of the layer it sizes).

    Raises:
        HwnasError: fewer than two values, a value that is not a positive integer (0 too: a
            :class:`Repeat` runs at least one block), or a repeated value.
    """

    values: tuple[int, ...]
    label: str | None

    def __new__(cls, values: Sequence[int], label: str | None = None) -> ValueChoice:
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            raise HwnasError(
                "ValueChoice takes a list of candidate values (ValueChoice([8, 16, 32])), got "
                f"{type(values).__name__} {values!r}"
            )
        vals = list(values)
        if not vals:
            raise HwnasError(f"ValueChoice needs a list of integers, got {values!r}")
        for v in vals:
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                zero = (
                    " (a Repeat's depth of 0 is not supported: at least one of its blocks runs; "
                    "for a block that may be left out use hwnas.nn.Choice([block, nn.Identity()]))"
                    if v == 0 and not isinstance(v, bool)
                    else ""
                )
                raise HwnasError(f"ValueChoice values must be positive integers, got {v!r}{zero}")
        if len(set(vals)) != len(vals):
            raise HwnasError(f"ValueChoice values repeat: {vals}")
        if len(vals) < 2:
            raise HwnasError(
                f"ValueChoice needs at least two values, got {vals} (for a fixed number pass "
                "the int itself)"
            )
        if label is not None and (not isinstance(label, str) or not _valid_label(label)):
            raise HwnasError(
                f"ValueChoice label {label!r}: use letters, digits, '.', '_' and '-' only"
            )
        obj = super().__new__(cls, max(vals))
        obj.values = tuple(sorted(int(v) for v in vals))
        obj.label = label
        owner = _constructing_module()
        if owner is not None:
            MADE_IN.setdefault(owner, []).append(obj)
        return obj

    def __getnewargs__(self) -> tuple[Any, ...]:  # copy and pickle
        return (self.values, self.label)

    def __deepcopy__(self, memo: dict) -> ValueChoice:
        """A copy that knows the choice it copies (:attr:`origin`): :class:`Repeat` copies a
        block module for every position, and the block's choice made in the model's
        constructor is then held only through its copies."""
        new = ValueChoice(self.values, self.label)
        new.origin = self.origin
        return new

    @property
    def origin(self) -> ValueChoice:
        """The choice this one was deep-copied from (itself when it is no copy)."""
        return self.__dict__.get("_origin", self)

    @origin.setter
    def origin(self, value: ValueChoice) -> None:
        self.__dict__["_origin"] = value

    def __repr__(self) -> str:
        label = f", label={self.label!r}" if self.label else ""
        return f"ValueChoice({list(self.values)}{label})"


def _constructing_module(depth: int = 12) -> nn.Module | None:
    """The module whose ``__init__`` is running nearest the caller's caller (None if none within
    ``depth`` frames): where a :class:`ValueChoice` being made belongs."""
    frame = sys._getframe(2)
    for _ in range(depth):
        if frame is None:
            return None
        if frame.f_code.co_name == "__init__":
            owner = frame.f_locals.get("self")
            if isinstance(owner, nn.Module):
                return owner
        frame = frame.f_back
    return None


def _valid_label(text: str) -> bool:
    return bool(text) and all(c.isalnum() or c in "._-" for c in text)


class Choice(nn.Module):
    """One operation chosen among candidates (NNI's ``LayerChoice``; DARTS's mixed operation).

    Every candidate takes the input this module is given and returns the same output shape.
    Run on its own, the module computes its first candidate; in the supernet, the chosen one
    (or, for a differentiable strategy, the weighted sum of the active ones).

    Args:
        candidates: a list of modules (named ``0``, ``1``, ... in arch strings) or a dict
            name -> module.
        label: the decision's name in arch strings (default: this module's name).

    Raises:
        HwnasError: fewer than two candidates, a candidate that is not a module, a bad name.
    """

    def __init__(
        self, candidates: Sequence[nn.Module] | dict[str, nn.Module], label: str | None = None
    ):
        super().__init__()
        items = (
            list(candidates.items())
            if isinstance(candidates, dict)
            else [(str(i), m) for i, m in enumerate(candidates)]
        )
        if len(items) < 2:
            raise HwnasError(f"Choice needs at least two candidates, got {len(items)}")
        for name, m in items:
            if not isinstance(m, nn.Module):
                raise HwnasError(f"Choice candidate {name!r} is a {type(m).__name__}, not a module")
            if not _valid_label(str(name)):
                raise HwnasError(
                    f"Choice candidate name {name!r}: use letters, digits, '.', '_' and '-' only"
                )
        if label is not None and not _valid_label(label):
            raise HwnasError(f"Choice label {label!r}: use letters, digits, '.', '_' and '-' only")
        self.names = tuple(str(n) for n, _ in items)
        self.candidates = nn.ModuleList([m for _, m in items])
        self.label = label
        self.active: tuple[int, ...] = (0,)
        self.weights: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The active candidate's output (weighted sum when several are active). While traced
        by torch.fx, the sum of every candidate: the analysis then sees each candidate take the
        input and their outputs joined (:mod:`hwnas.spaces.module.analysis`)."""
        if TRACING[0]:
            total = self.candidates[0](x)
            for m in self.candidates[1:]:
                total = total + m(x)
            return total
        if self.weights is None:
            return self.candidates[self.active[0]](x)
        total = None
        for k in self.active:
            y = self.candidates[k](x) * self.weights[k]
            total = y if total is None else total + y
        return total  # type: ignore[return-value]


class Repeat(nn.Sequential):
    """``depth`` blocks in sequence, of which the first d run (NNI's ``Repeat``;
    Once-for-All's elastic depth keeps a stage's first blocks).

    Args:
        block: a function ``i -> module`` (called for i = 0 .. largest depth - 1) or a module
            (deep-copied for every position).
        depth: the number of blocks, or a :class:`ValueChoice` of them.

    Raises:
        HwnasError: a depth below 1, or a block function that returns no module.
    """

    def __init__(self, block: Callable[[int], nn.Module] | nn.Module, depth: int):
        n = int(depth)
        if n < 1:
            raise HwnasError(f"Repeat needs a depth of at least 1, got {depth!r}")
        blocks = []
        for i in range(n):
            m = copy.deepcopy(block) if isinstance(block, nn.Module) else block(i)
            if not isinstance(m, nn.Module):
                raise HwnasError(
                    f"Repeat's block function returned {type(m).__name__}, not a module"
                )
            blocks.append(m)
        super().__init__(*blocks)
        self.depth = depth
