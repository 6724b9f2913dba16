"""The search-space interface and the architecture value.

A search space names its architectures with canonical strings, exposes its decisions as
categorical choices (which samplers and encoders use), and builds a PyTorch module for an
architecture. Everything else (tables, supernets) is an optional ability of a concrete space.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    import torch


@dataclass(frozen=True, order=True)
class Arch:
    """An immutable architecture of a search space.

    Attributes:
        space: name of the search space ("nasbench201").
        text: the canonical arch string; it is the architecture's stable id.
    """

    space: str
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class DatasetSpec:
    """What a network is built for.

    Attributes:
        name: dataset name ("cifar10", "cifar100", "imagenet16").
        num_classes: classifier width.
        input_shape: one image as (channels, height, width).
    """

    name: str
    num_classes: int
    input_shape: tuple[int, int, int]


class SearchSpace(ABC):
    """A space of architectures (the three required methods are ``parse``, ``choices`` and
    ``build``; the rest have defaults built on them)."""

    name: str
    task: str | None = None
    """What the networks do, for zoo cards (``audio-classification``); None: told by their
    input's rank (:func:`hwnas.zoo.card.input_task`)."""

    @abstractmethod
    def parse(self, text: str) -> Arch:
        """Parse and canonicalise an arch string.

        Raises:
            hwnas.errors.HwnasError: malformed string; the message names the bad token.
        """

    @abstractmethod
    def choices(self) -> dict[str, tuple[str, ...]]:
        """The space's decisions: dimension name -> allowed values, in a fixed order."""

    @abstractmethod
    def build(self, arch: Arch, dataset: str, num_classes: int | None = None) -> torch.nn.Module:
        """A freshly initialised PyTorch network for ``arch`` (eval mode, float32).

        Its input is a float tensor of shape (batch, *self.input_shape(arch, dataset)); its
        output the logits, shape (batch, num_classes).

        Args:
            arch: the architecture.
            dataset: the dataset the space defines the network for (its input shape and,
                unless ``num_classes`` is given, its classifier width).
            num_classes: classifier width for other data (a zoo model trained on a user's
                classes); the rest of the network is the dataset's.
        """

    @abstractmethod
    def dataset(self, name: str) -> DatasetSpec:
        """The dataset spec the space is defined for.

        Raises:
            hwnas.errors.UnknownNameError: a dataset the space does not know.
        """

    @abstractmethod
    def datasets(self) -> list[str]:
        """Names of the datasets the space defines networks for."""

    def num_architectures(self) -> int:
        """How many distinct architectures the space holds: the product of its decisions'
        sizes. A space whose depth decisions leave some decisions unused (a layer past its
        stage's depth) overrides it to count each network once."""
        return math.prod(len(v) for v in self.choices().values())

    def min_input_side(self) -> int:
        """The smallest input side (pixels) every network of the space takes: what a
        supernet's proxy images (``--set image_size``) must reach; 1 unless a layer needs
        more (a declared space's ``patch_embed`` after strides)."""
        return 1

    def proxy_input_side(self, dataset: str) -> int:
        """The input side (pixels) a supernet search trains and scores its subnets at by default
        (``--set image_size=0``): 16, a proxy of the dataset's size that keeps a CPU epoch
        short, or :meth:`min_input_side` where that is more. A space whose networks only work
        at their own size (a user's model made elastic) returns that size.

        Args:
            dataset: the search's dataset (one of :meth:`datasets`)."""
        return max(16, self.min_input_side())

    def default_dataset(self, preferred: str = "cifar100") -> str:
        """The dataset used where none is given: ``preferred`` where the space defines it (a
        search's default, and the one every shipped table was measured on), else the
        space's first (a user's model made elastic knows only its own)."""
        known = self.datasets()
        return preferred if preferred in known else known[0]

    # -- derived abilities ------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """What measurement-store keys and export caches name the space by: its name here;
        spaces made from a Python object or read from a space file add a hash of their
        structure (:class:`hwnas.spaces.module.ModuleSpace`,
        :class:`hwnas.spaces.declared.DeclaredSpace`), so two different networks given one
        name (a file edited, a model changed) never share a measurement."""
        return self.name

    @property
    def fingerprint(self) -> str:
        """What a study and a supernet checkpoint know the space by: :attr:`identity`, plus a
        hash of the weights for a user's trained model made elastic (its subnets' accuracy
        depends on them, their latency does not), so a search over a retrained or changed
        model is another study, never the old one's results."""
        return self.identity

    @property
    def supernet_name(self) -> str:
        """Name of the space's supernet in :data:`hwnas.supernet.SUPERNETS` (its own name;
        every declared space shares ``declared``)."""
        return self.name

    @property
    def featurizer_name(self) -> str:
        """Name of the space's featurizer in :data:`hwnas.predictors.featurize.FEATURIZERS`
        (its own name; every declared space shares ``declared``)."""
        return self.name

    @property
    def reference_dataset(self) -> str:
        """The dataset the reference set is built for by default (the first one here)."""
        return self.datasets()[0]

    def reference_archs(self, n: int = 10) -> list[Arch]:
        """The space's reference set: the architectures a new device is measured on (its
        hardware embedding and a predictor's calibration). By default the rows listed for the
        space in ``search_spaces/reference_sets.json`` (HELP's, for the indexed spaces).

        Raises:
            hwnas.errors.HwnasError: the space has no reference set.
        """
        import json

        from hwnas.assets import asset_path
        from hwnas.errors import HwnasError

        sets = json.loads(asset_path("search_spaces", "reference_sets.json").read_text())
        if self.name not in sets or not isinstance(self, IndexedSpace):
            raise HwnasError(f"no reference set for space '{self.name}' (have: {', '.join(sets)})")
        return [self.arch_at(int(i)) for i in sets[self.name][:n]]

    def input_shape(self, arch: Arch, dataset: str) -> tuple[int, int, int]:
        """Input of one image (C, H, W) for ``arch`` (the dataset's, unless the architecture
        fixes its own resolution)."""
        return self.dataset(dataset).input_shape

    def from_choices(self, values: dict[str, str]) -> Arch:
        """The architecture that takes ``values[dim]`` for every dimension of :meth:`choices`."""
        raise NotImplementedError

    def to_choices(self, arch: Arch) -> dict[str, str]:
        """Inverse of :meth:`from_choices`."""
        raise NotImplementedError

    def sample(self, rng: np.random.Generator, n: int = 1) -> list[Arch]:
        """``n`` architectures drawn uniformly from the choices."""
        dims = self.choices()
        return [
            self.from_choices({d: opts[rng.integers(len(opts))] for d, opts in dims.items()})
            for _ in range(n)
        ]

    def surrogate_features(self, archs: Sequence[Arch]) -> np.ndarray:
        """Features for accuracy surrogates, shape (len(archs), F), float32; by default the
        one-hot :meth:`encode` (spaces with structure to exploit override it)."""
        return self.encode(archs)

    def encode(self, archs: Sequence[Arch]) -> np.ndarray:
        """One-hot encoding of the choices, shape (len(archs), sum of choice counts), float32.

        Column order follows :meth:`choices` (dimension by dimension, value by value).
        """
        dims = self.choices()
        offsets, width = {}, 0
        for d, opts in dims.items():
            offsets[d] = (width, {v: i for i, v in enumerate(opts)})
            width += len(opts)
        out = np.zeros((len(archs), width), dtype=np.float32)
        for row, arch in enumerate(archs):
            for d, v in self.to_choices(arch).items():
                start, index = offsets[d]
                out[row, start + index[v]] = 1.0
        return out


def spread_archs(
    space: SearchSpace,
    labels: Sequence[Sequence[str]],
    make: Callable[[dict[int, str]], Arch],
    n: int = 10,
    seed: int = 20240614,
) -> list[Arch]:
    """``n`` distinct architectures spread over a space, the same on every machine (a
    reference set): the first takes every decision's first value, the last every decision's
    last value (choices are listed smallest first by convention), those between take for each
    decision the value at their quantile with seeded jitter, so costs spread from smallest to
    largest and decisions do not move in lockstep.

    Args:
        space: the space (its :meth:`SearchSpace.sample` fills a tiny space).
        labels: every decision's labels, in decision order.
        make: decision index -> label, to the architecture (canonical).
        n: how many.
        seed: the jitter's seed.
    """
    rng = np.random.default_rng(seed)
    out: dict[str, Arch] = {}
    tries = 0
    while len(out) < n and tries < 50 * n:
        k = len(out)
        q = k / max(1, n - 1)
        chosen = {}
        for d, opts in enumerate(labels):
            m = len(opts)
            jitter = 0.0 if k in (0, n - 1) else rng.normal(0.0, 0.3 + 0.1 * (tries // n))
            i = int(np.clip(round(q * (m - 1) + jitter * m), 0, m - 1))
            chosen[d] = opts[i]
        arch = make(chosen)
        out.setdefault(arch.text, arch)
        tries += 1
    for arch in space.sample(rng, 20 * n):  # a tiny space: fill with random ones
        if len(out) >= n:
            break
        out.setdefault(arch.text, arch)
    return list(out.values())[:n]


def make_divisible(v: float, divisor: int = 8) -> int:
    """Round channels to a multiple of ``divisor`` without going below 90% (MobileNet rule);
    torch-free (a declared space counts its parameters with it before importing PyTorch)."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def key_value_tokens(name: str, text: object, keys: Sequence[str]) -> list[tuple[str, str]]:
    """The ``KEY=VALUE`` tokens of an arch string (whitespace-separated), checked: every token
    has an ``=``, names one of ``keys`` and is given once. The values are the caller's to check.

    Args:
        name: the space's name, for the messages.
        text: the arch string.
        keys: the keys a token may name, in the order the message lists them (first 12).

    Returns:
        ``(key, value)`` per token, in the string's order.

    Raises:
        HwnasError: ``text`` is not a string, a token is not KEY=VALUE, names an unknown key,
            or repeats one (one line naming it).
    """
    from hwnas.errors import HwnasError

    if not isinstance(text, str):
        raise HwnasError(f"arch must be a string, got {type(text).__name__}")
    known = set(keys)
    tokens: list[tuple[str, str]] = []
    seen: set[str] = set()
    for tok in text.split():
        key, sep, val = tok.partition("=")
        if not sep:
            raise HwnasError(f"malformed {name} arch string: token '{tok}' is not KEY=VALUE")
        if key not in known:
            more = ", ..." if len(keys) > 12 else ""
            raise HwnasError(
                f"malformed {name} arch string: unknown key '{key}'; keys: "
                f"{', '.join(list(keys)[:12])}{more}"
            )
        if key in seen:
            raise HwnasError(f"malformed {name} arch string: '{key}' given twice")
        seen.add(key)
        tokens.append((key, val))
    return tokens


def missing_keys_error(name: str, missing: Sequence[str]) -> Exception:
    """The one-line error for an arch string of ``name`` that leaves out ``missing`` (the
    first 5 named)."""
    from hwnas.errors import HwnasError

    more = " ..." if len(missing) > 5 else ""
    return HwnasError(f"malformed {name} arch string: missing {', '.join(missing[:5])}{more}")


# -- optional abilities, declared as typed protocols ---------------------------------------------
# A space has an ability when it implements the protocol's methods; code asks for one with
# :func:`hwnas.spaces.ability` (which returns the space, typed, or None) instead of probing.


@runtime_checkable
class IndexedSpace(Protocol):
    """A finite space whose architectures are numbered 0..len-1 (a benchmark's index)."""

    def __len__(self) -> int: ...

    def index(self, arch: Arch) -> int:
        """Row of ``arch``. Raises hwnas.errors.HwnasError: not in the indexed set."""
        ...

    def arch_at(self, index: int) -> Arch:
        """The architecture at row ``index``. Raises hwnas.errors.HwnasError: out of range."""
        ...

    def all_archs(self) -> list[Arch]:
        """Every architecture, in index order."""
        ...


@runtime_checkable
class TabulatedSpace(IndexedSpace, Protocol):
    """An indexed space with a trained-accuracy table (NAS-Bench-201)."""

    def table_accuracy(self, dataset: str, epochs: int = 200) -> np.ndarray:
        """Top-1 accuracy (%) of every architecture on ``dataset``, index order."""
        ...

    def accuracy_source(self, dataset: str, epochs: int = 200) -> str:
        """Where :meth:`table_accuracy` comes from ("nasbench201-table:cifar100_test_200ep")."""
        ...


@runtime_checkable
class IsomorphicSpace(IndexedSpace, Protocol):
    """An indexed space whose benchmark groups architectures that compute the same function
    (NAS-Bench-201's 6,466 unique cells of 15,625)."""

    def unique_str(self, arch: Arch) -> str:
        """The key shared by every architecture of ``arch``'s isomorphism class."""
        ...


@runtime_checkable
class InheritedSpace(Protocol):
    """A space whose architectures come with inherited weights: the subnets of a trained module
    (:func:`hwnas.elastic`). Evaluators score those rather than fresh networks."""

    def subnet(self, arch: Arch, num_classes: int | None = None) -> torch.nn.Module:
        """The standalone network of ``arch`` with the space's weights (eval mode)."""
        ...


@runtime_checkable
class CostTermsSpace(Protocol):
    """A space that says how its cost decomposes: the term structure of a supernet's lookup
    table (:class:`hwnas.supernet.cost.MultilinearLUT`), such as a layer's decisions counting
    only while its stage is deep enough. Spaces without it get one term per candidate."""

    def lut_terms(self) -> list:
        """Terms: tuples of (decision index, per-candidate factor array), multiplied."""
        ...
