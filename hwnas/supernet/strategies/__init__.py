"""Supernet search strategies by name (lazily imported).

They are registered, with the space of their paper, in the one strategy registry
(:data:`hwnas.engine.strategies.STRATEGIES`, ``pipeline="supernet"``); this is the view of them.
"""

from __future__ import annotations

from hwnas.engine.strategies import STRATEGIES
from hwnas.registry import Registry

SUPERNET_STRATEGIES: Registry = STRATEGIES.select("supernet strategy", pipeline="supernet")
"""The supernet strategies of :data:`hwnas.engine.strategies.STRATEGIES` (classes)."""

DEFAULT_SPACE = {name: STRATEGIES.info(name)["space"] for name in SUPERNET_STRATEGIES}
"""Space each strategy searches when ``--space`` is not given (the space of its paper)."""
