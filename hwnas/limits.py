"""Limits that keep a command's memory and time bounded, checked before any work.

A number a user types or a file declares is refused in one line (:func:`bounded`) when it is
not finite or lies outside the range hwnas can honour in bounded memory and time: widths of
1e9 channels would allocate terabytes, an input of 100000 x 100000 pixels 120 GB, a depth of a
million layers takes minutes to even describe. The bounds are far above any published network
and any sensible run (``docs/robustness.md`` lists them); what they keep out are typos and
hostile files.
"""

from __future__ import annotations

import math
import numbers
import re
from typing import Any

from hwnas.errors import HwnasError

MAX_EPOCHS = 10_000
"""Training or fine-tuning epochs of one run."""

MAX_BATCH_SIZE = 65_536
"""Mini-batch size (training) and batch size (measuring)."""

MAX_SEED = 2**32 - 1
"""Largest seed: what NumPy, PyTorch and Optuna all accept (seeds run from 0)."""

MAX_THREADS = 256
"""CPU threads a run may ask for."""

MAX_INPUT_ELEMENTS = 64 * 2**20
"""Elements of one input tensor, batch included (256 MiB of float32): 1x3x4096x4096 is 50M."""

MAX_INPUT_SIDE = 16_384
"""Pixels of one side of an input image."""

MAX_CHANNELS = 16_384
"""Channels (width) of one layer of a declared space."""

MAX_KERNEL = 31
"""Kernel size of a convolution of a declared space."""

MAX_STRIDE = 16
"""Stride of a layer of a declared space."""

MAX_DEPTH = 256
"""Layers of one stage of a declared space."""

MAX_EXPAND = 64.0
"""Expansion ratio (or MLP ratio) of a block of a declared space."""

MAX_CLASSES = 1_000_000
"""Classes of a dataset."""

MAX_PARAMETERS = 2**30
"""Parameters and buffers of a network built from what a file declares (a zoo card's
``build`` section, a supernet included; a declared space's supernet at width 1, counted from
its file as it is read): 4 GiB of float32, above the largest network a search space ships
(fbnet's supernet at 8x width has 0.67e9)."""

MAX_CHOICES = 1024
"""Options of one decision of a declared space."""

MAX_LEARNING_RATE = 100.0
"""A learning rate (any larger one diverges at once)."""

MAX_COST = {"latency_ms": 3.6e6, "energy_mj": 3.6e9}
"""A measured cost of one inference a user file may give: an hour of latency (ms), a
kilowatt-hour of energy (mJ); a value beyond (1e308) is a typo, and would overflow a fit."""

MIN_COST = 1e-6
"""The smallest measured cost of one inference a user file may give, in ms or mJ (a
nanosecond, a nanojoule; the shipped tables start at 0.001): a value below (1e-12) is a unit
slip, and made the predictors' fit singular."""


def _shown(bound: float) -> str:
    """A bound as a user reads it: whole numbers in full (4294967295, not 4.29497e+09)."""
    return str(int(bound)) if float(bound).is_integer() and abs(bound) < 1e15 else f"{bound:g}"


def bounded(
    what: str,
    value: Any,
    low: float | None = None,
    high: float | None = None,
    integer: bool = False,
    low_open: bool = False,
) -> Any:
    """``value`` if it is a finite number within [``low``, ``high``] (``low`` excluded when
    ``low_open``), an integer where ``integer``; else a one-line error.

    Args:
        what: how the user knows the value ("--epochs", "timing.warmup in cpu.yaml").
        value: the value (a number, or anything YAML gave).
        low: the least value allowed (None: no bound).
        high: the largest value allowed (None: no bound).
        integer: whether it must be a whole number.
        low_open: whether ``low`` itself is refused (a positive number: ``low=0``).

    Returns:
        The value (an int where ``integer``).

    Raises:
        HwnasError: not a number, not finite, not whole, or out of range.
    """
    kind = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # NumPy's too
        exponent = isinstance(value, str) and re.fullmatch(r"([-+]?[0-9]+)([eE][-+]?[0-9]+)", value)
        hint = (  # YAML 1.1 reads 1e300 and 5e-3, without a '.', as text
            f" (YAML reads a number with an exponent but no '.' as text: write "
            f"{exponent[1]}.0{exponent[2]})"
            if exponent
            else ""
        )
        raise HwnasError(f"{what} must be {kind}, got {value!r}{hint}")
    if not math.isfinite(value):
        raise HwnasError(f"{what} must be a finite number, got {value}")
    if integer:
        if value != int(value):
            raise HwnasError(f"{what} must be an integer, got {value}")
        value = int(value)
    if low is not None and (value < low or (low_open and value == low)):
        rule = f"above {_shown(low)}" if low_open else f"at least {_shown(low)}"
        if high is not None:
            rule += f" and at most {_shown(high)}"
        raise HwnasError(f"{what} must be {rule}, got {value}")
    if high is not None and value > high:
        raise HwnasError(f"{what} must be at most {_shown(high)}, got {value}")
    return value


def input_size(what: str, shape: tuple[int, ...] | list[int]) -> None:
    """Refuse an input tensor shape too large to allocate (:data:`MAX_INPUT_ELEMENTS`) or with
    an empty axis.

    Raises:
        HwnasError: one line naming the shape.
    """
    dims = [int(d) for d in shape]
    if any(d < 1 for d in dims):
        raise HwnasError(f"{what}: input shape {'x'.join(map(str, dims))} has an empty axis")
    elements = math.prod(dims)
    if elements > MAX_INPUT_ELEMENTS:
        raise HwnasError(
            f"{what}: input shape {'x'.join(map(str, dims))} has {elements:.3g} elements, more "
            f"than the {MAX_INPUT_ELEMENTS:.3g} hwnas allocates for one input "
            f"({4 * elements / 2**30:.3g} GiB of float32)"
        )


def positive_ms(what: str, value: Any) -> float:
    """``value`` if it is a positive, finite number of milliseconds (a latency limit); else a
    one-line error.

    Raises:
        HwnasError: not a number (a string from Python), not finite, or not above 0.
    """
    number = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if not (number and math.isfinite(value) and value > 0):
        raise HwnasError(f"{what} must be a positive number of ms, got {value!r}")
    return float(value)
