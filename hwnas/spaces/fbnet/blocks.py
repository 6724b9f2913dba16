"""FBNet's block names (``k3_e1``, ``k5_e6_g2``, ``skip``) and what they mean: read by the
space, its network (:mod:`hwnas.spaces.fbnet.model`) and its featurizer."""

from __future__ import annotations


def block_spec(name: str) -> tuple[int, int, int] | None:
    """(kernel, expansion, groups) of a block name, or None for ``skip``."""
    if name == "skip":
        return None
    parts = name.split("_")
    kernel, expansion = int(parts[0][1:]), int(parts[1][1:])
    groups = int(parts[2][1:]) if len(parts) > 2 else 1
    return kernel, expansion, groups
