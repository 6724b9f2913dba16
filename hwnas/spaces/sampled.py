"""Spaces too large to enumerate whose measured architectures are a fixed sample (FBNet, OFA).

The sample file lists the architectures that recorded devices have values for; its row order
is the index that device tables use.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path

from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch


class SampledArchs:
    """Index over a space's sampled architectures.

    Args:
        space: the space name.
        path: the sample file.
        read: returns the canonical arch strings of the file, in row order.
    """

    def __init__(self, space: str, path: Path, read: Callable[[Path], list[str]]):
        self.space = space
        self.path = path
        self._read = read

    @cached_property
    def texts(self) -> list[str]:
        return self._read(self.path)

    @cached_property
    def _positions(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.texts)}

    def __len__(self) -> int:
        return len(self.texts)

    def index(self, arch: Arch) -> int:
        """Row of ``arch`` in the sample.

        Raises:
            HwnasError: the architecture is not one of the sampled ones.
        """
        try:
            return self._positions[arch.text]
        except KeyError:
            raise HwnasError(
                f"{self.space} architecture '{arch.text}' is not among the {len(self)} "
                "sampled architectures with recorded measurements"
            ) from None

    def arch_at(self, index: int) -> Arch:
        """The sampled architecture at row ``index``.

        Raises:
            HwnasError: index out of range.
        """
        if not 0 <= index < len(self):
            raise HwnasError(f"{self.space} index {index} out of range 0..{len(self) - 1}")
        return Arch(self.space, self.texts[index])

    def all_archs(self) -> list[Arch]:
        return [Arch(self.space, t) for t in self.texts]


class SampledIndex:
    """The :class:`hwnas.spaces.IndexedSpace` ability of a space whose indexed architectures
    are its fixed sample: a space mixes this in and sets ``self.sampled`` (a
    :class:`SampledArchs`)."""

    sampled: SampledArchs

    def index(self, arch: Arch) -> int:
        """Row of ``arch`` among the sampled architectures.

        Raises:
            HwnasError: not a sampled architecture.
        """
        return self.sampled.index(arch)

    def arch_at(self, index: int) -> Arch:
        """The sampled architecture at row ``index``.

        Raises:
            HwnasError: index out of range.
        """
        return self.sampled.arch_at(index)

    def all_archs(self) -> list[Arch]:
        """The sampled architectures, in index order."""
        return self.sampled.all_archs()

    def __len__(self) -> int:
        return len(self.sampled)
