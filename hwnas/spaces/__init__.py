"""Search spaces by name.

Each space is defined by ``search_spaces/<name>/space.yaml`` (its parameters and data) and a
class named by the YAML's ``implementation`` key.
"""

from __future__ import annotations

from functools import cache
from typing import TypeVar

import yaml

from hwnas.assets import asset_path
from hwnas.errors import UnknownNameError
from hwnas.registry import load
from hwnas.spaces.base import Arch, DatasetSpec, IndexedSpace, SearchSpace, TabulatedSpace

T = TypeVar("T")

__all__ = [
    "Arch",
    "DatasetSpec",
    "IndexedSpace",
    "SearchSpace",
    "TabulatedSpace",
    "ability",
    "get_space",
    "list_spaces",
]


def ability(space: SearchSpace, protocol: type[T]) -> T | None:
    """``space`` typed as ``protocol`` (:class:`IndexedSpace`, :class:`TabulatedSpace`) if it has
    that optional ability, else None: the one place where abilities are looked up."""
    return space if isinstance(space, protocol) else None  # type: ignore[return-value]


def list_spaces() -> list[str]:
    """Names of the spaces shipped in ``search_spaces/`` (those with a ``space.yaml``)."""
    root = asset_path("search_spaces")
    return sorted(p.parent.name for p in root.glob("*/space.yaml"))


@cache
def get_space(name: str) -> SearchSpace:
    """The search space called ``name`` (one instance per process).

    Raises:
        UnknownNameError: no ``search_spaces/<name>/space.yaml``.
    """
    path = asset_path("search_spaces", name, "space.yaml")
    if not path.is_file():
        raise UnknownNameError("search space", name, list_spaces())
    config = yaml.safe_load(path.read_text())
    cls = load(config["implementation"])
    return cls(config, path.parent)
