"""Search spaces declared in a YAML file (the space language of :mod:`.schema`).

A :class:`DeclaredSpace` gets everything from its file: its decisions (elastic block parameters,
stage depths and widths, categorical block choices, input resolution), arch strings and
encodings, a PyTorch builder (:mod:`.network`), a weight-sharing supernet
(:mod:`hwnas.supernet.declared`), ONNX export and a reference set. No code names a declared
space.

Decisions (:meth:`DeclaredSpace.choices`) are named ``r`` (resolution), ``STAGE.d`` (depth),
``STAGE.out`` (width), ``STAGE.I.PARAM`` (a block parameter of the layer at position I),
``STAGE.I.op`` (a categorical block choice), ``stem.I.PARAM`` / ``head.I.PARAM``.

Arch string: one ``TOKEN=VALUE`` per stage-level decision and per layer with decisions, in
decision order; a layer's decisions are joined by ``/`` in the order the file declares them
(``op``, the block's parameters, ``out``): ``r=224 s1.d=2 s1.0=5/4 s1.1=3/6 ...`` (kernel 5,
expansion 4; kernel 3, expansion 6). Layers past their stage's depth do not change the network:
the canonical string leaves them out (parsing accepts and ignores them), their decisions take
the first value in :meth:`DeclaredSpace.to_choices`, and :meth:`DeclaredSpace.encode` zeroes
them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import HwnasError, UnknownNameError
from hwnas.spaces.base import (
    Arch,
    DatasetSpec,
    SearchSpace,
    key_value_tokens,
    missing_keys_error,
    spread_archs,
)
from hwnas.spaces.declared.schema import (
    Choices,
    LayerSpec,
    SpaceSpec,
    read_space_file,
    resolve_value,
)


@dataclass(frozen=True)
class Decision:
    """One decision of a declared space.

    Attributes:
        key: its name in arch strings (``s1.0.kernel``).
        values: the candidate values, in the file's order.
        labels: the values as written in arch strings.
        kind: ``resolution``, ``depth``, ``width``, ``param`` or ``op``.
        part: ``input``, ``stem``, ``stage`` or ``head``.
        index: stage index (stages), layer index (stem/head), else -1.
        position: layer position in its stage (-1 if not a layer decision of a stage).
        param: the block parameter (``param`` decisions).
    """

    key: str
    values: tuple[Any, ...]
    labels: tuple[str, ...]
    kind: str
    part: str
    index: int = -1
    position: int = -1
    param: str = ""

    @property
    def token(self) -> str:
        """The arch-string token this decision is written in: its layer's (``s1.0``) for the
        decisions of a layer, else its own key (``r``, ``s1.d``, ``s1.out``)."""
        if self.kind in ("param", "op") or (self.kind == "width" and self.part != "stage"):
            return self.key.rsplit(".", 1)[0]
        return self.key


def label(value: Any) -> str:
    """How a value is written in an arch string (``4``, ``3.5``, ``true``, ``k3_e6``): a
    number as short as reads back as itself (``%g``: 6 digits, or all it needs: ``4.0000001``
    was written ``4`` beside a choice of 4, and both were one label), so no two values of a
    decision share a label."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


class DeclaredSpace(SearchSpace):
    """A search space read from a space file.

    Args:
        spec: the validated file (:func:`hwnas.spaces.declared.schema.read_space_file`).
    """

    supernet_name = "declared"
    featurizer_name = "declared"

    def __init__(self, spec: SpaceSpec):
        self.spec = spec
        self.name = spec.name
        self.path = spec.path
        self._datasets = {
            n: DatasetSpec(n, classes, shape) for n, (classes, shape) in spec.datasets.items()
        }
        self.decisions: list[Decision] = self._decisions()
        if not self.decisions:
            raise HwnasError(f"{spec.path}: the space declares no decision (no choices anywhere)")
        self.by_key = {d.key: d for d in self.decisions}
        self.tokens: dict[str, list[Decision]] = {}
        for d in self.decisions:
            self.tokens.setdefault(d.token, []).append(d)
        self._choices = {d.key: d.labels for d in self.decisions}
        self._value_of = {d.key: dict(zip(d.labels, d.values)) for d in self.decisions}
        mixable = all(bt.width_mixable for layer in self.all_layers() for bt in layer.types())
        self.hard_only_keys = tuple(
            d.key
            for d in self.decisions
            if d.kind == "resolution" or (d.kind == "width" and not mixable)
        )

    @cached_property
    def identity(self) -> str:
        """The space's name plus a hash of what its file declares (not its path, description
        or paper): an edited file is another network, whose latency is measured anew. A
        shipped space is its name alone (its file changes only with hwnas, and its studies,
        measurements and checkpoints keep their names)."""
        import dataclasses
        import json

        from hwnas.assets import asset_path
        from hwnas.export import content_hash

        if Path(self.path).resolve().is_relative_to(asset_path("search_spaces").resolve()):
            return self.name

        spec = dataclasses.asdict(self.spec)
        for key in ("path", "description", "paper"):
            spec.pop(key, None)
        return f"{self.name}@" + content_hash(json.dumps(spec, sort_keys=True, default=repr))

    # -- structure ------------------------------------------------------------------------------

    def all_layers(self) -> list[LayerSpec]:
        """Every layer spec of the skeleton (stem, stage positions, head)."""
        out = list(self.spec.stem)
        for st in self.spec.stages:
            out += st.layers
        return out + list(self.spec.head)

    def _decisions(self) -> list[Decision]:
        out: list[Decision] = []

        def add(key, values, kind, part, index=-1, position=-1, param=""):
            out.append(
                Decision(
                    key,
                    tuple(values),
                    tuple(map(label, values)),
                    kind,
                    part,
                    index,
                    position,
                    param,
                )
            )

        def layer(prefix, spec: LayerSpec, part, index, position):
            if spec.candidates is not None:
                add(f"{prefix}.op", tuple(spec.candidates), "op", part, index, position)
            for p, v in spec.params.items():
                if isinstance(v, Choices):
                    add(f"{prefix}.{p}", v.values, "param", part, index, position, p)
            if isinstance(spec.out, Choices):
                add(f"{prefix}.out", spec.out.values, "width", part, index, position)

        if self.spec.resolution is not None:
            add("r", self.spec.resolution.values, "resolution", "input")
        for i, spec in enumerate(self.spec.stem):
            layer(f"stem.{i}", spec, "stem", i, -1)
        for s, st in enumerate(self.spec.stages):
            if isinstance(st.depth, Choices):
                add(f"{st.name}.d", st.depth.values, "depth", "stage", s)
            if isinstance(st.out, Choices):
                add(f"{st.name}.out", st.out.values, "width", "stage", s)
            for i, spec in enumerate(st.layers):
                layer(f"{st.name}.{i}", spec, "stage", s, i)
        for i, spec in enumerate(self.spec.head):
            layer(f"head.{i}", spec, "head", i, -1)
        return out

    # -- the SearchSpace interface ----------------------------------------------------------------

    def choices(self) -> dict[str, tuple[str, ...]]:
        return dict(self._choices)

    def lut_terms(self) -> list:
        """The lookup-table terms (:func:`hwnas.spaces.declared.terms.declared_terms`)."""
        from hwnas.spaces.declared.terms import declared_terms

        return declared_terms(self)

    def parse(self, text: str) -> Arch:
        """Parse ``TOKEN=VALUE`` tokens (any order) and canonicalise.

        Raises:
            HwnasError: a malformed token, an unknown token, a value not among the choices (the
                message lists them), a missing or repeated token.
        """
        labels: dict[str, str] = {}
        for key, val in key_value_tokens(self.name, text, list(self.tokens)):
            decs = self.tokens[key]
            parts = val.split("/")
            if len(parts) != len(decs):
                names = "/".join(d.param or d.kind for d in decs)
                raise HwnasError(
                    f"malformed {self.name} arch string: {key} needs {len(decs)} values "
                    f"({names}), got '{val}'"
                )
            for d, part in zip(decs, parts):
                if part not in d.labels:
                    raise HwnasError(
                        f"malformed {self.name} arch string: {key}={val}: "
                        f"{d.param or d.kind} {part} not in {', '.join(d.labels)}"
                    )
                labels[d.key] = part
        for d in self.decisions:  # layers past their stage's depth may be left out
            if d.key not in labels and not self._needed(labels, d):
                labels[d.key] = d.labels[0]
        missing = [k for k, decs in self.tokens.items() if any(d.key not in labels for d in decs)]
        if missing:
            raise missing_keys_error(self.name, missing)
        return self._arch(labels)

    def min_input_side(self) -> int:
        from hwnas.spaces.declared.schema import min_input_side

        return min_input_side(self.spec)

    def num_architectures(self) -> int:
        """Distinct architectures: a layer past its stage's depth does not count (for each
        stage, the sum over its depths of the product of its used layers' choices)."""
        total = 1
        stages: dict[int, list[Decision]] = {}
        for d in self.decisions:
            if d.part == "stage" and (d.position >= 0 or d.kind == "depth"):
                stages.setdefault(d.index, []).append(d)
            else:
                total *= len(d.values)
        for s, decs in stages.items():
            st = self.spec.stages[s]
            layers = [d for d in decs if d.kind != "depth"]
            if not isinstance(st.depth, Choices):
                total *= math.prod(len(d.values) for d in layers)
                continue
            total *= sum(
                math.prod(len(d.values) for d in layers if d.position < int(depth))
                for depth in st.depth.values
            )
        return total

    def _needed(self, labels: dict[str, str], d: Decision) -> bool:
        """Whether ``d`` is needed: not a layer past its stage's depth (depth unknown: yes)."""
        if d.part != "stage" or d.position < 0:
            return True
        depth_key = f"{self.spec.stages[d.index].name}.d"
        return depth_key not in labels or self._active(labels, d)

    def _arch(self, labels: dict[str, str]) -> Arch:
        labels = self._canonical(labels)
        parts = []
        for key, decs in self.tokens.items():
            if all(self._needed(labels, d) for d in decs):
                parts.append(f"{key}={'/'.join(labels[d.key] for d in decs)}")
        return Arch(self.name, " ".join(parts))

    def _canonical(self, labels: dict[str, str]) -> dict[str, str]:
        out = dict(labels)
        for d in self.decisions:
            if d.part == "stage" and d.position >= 0 and not self._active(out, d):
                out[d.key] = d.labels[0]
        return out

    def _active(self, labels: dict[str, str], d: Decision) -> bool:
        st = self.spec.stages[d.index]
        if not isinstance(st.depth, Choices):
            return True
        return d.position < int(self._value_of[f"{st.name}.d"][labels[f"{st.name}.d"]])

    def from_choices(self, values: dict[str, str]) -> Arch:
        missing = [k for k in self._choices if k not in values]
        if missing:
            raise HwnasError(f"{self.name}: no value for {', '.join(missing[:5])}")
        for k in self._choices:
            if values[k] not in self._choices[k]:
                raise HwnasError(
                    f"{self.name}: {k}={values[k]} not in {', '.join(self._choices[k])}"
                )
        return self._arch({k: str(values[k]) for k in self._choices})

    def to_choices(self, arch: Arch) -> dict[str, str]:
        if arch.space != self.name:
            raise HwnasError(f"architecture of space '{arch.space}' given to {self.name}")
        labels: dict[str, str] = {}
        for tok in arch.text.split():
            key, _, val = tok.partition("=")
            for d, part in zip(self.tokens[key], val.split("/")):
                labels[d.key] = part
        return self._canonical({d.key: labels.get(d.key, d.labels[0]) for d in self.decisions})

    def values(self, arch: Arch) -> dict[str, Any]:
        """Decision key -> the architecture's value (typed: 5, 3.5, "k3_e6")."""
        return {k: self._value_of[k][v] for k, v in self.to_choices(arch).items()}

    def encode(self, archs: Sequence[Arch]) -> np.ndarray:
        """One-hot encoding, shape (n, sum of choice counts), with the decisions of layers past
        their stage's depth zeroed (architectures that build the same network encode the
        same)."""
        x = super().encode(archs)
        starts, col = {}, 0
        for d in self.decisions:
            starts[d.key] = (col, len(d.values))
            col += len(d.values)
        for row, arch in enumerate(archs):
            labels = self.to_choices(arch)
            for d in self.decisions:
                if d.part == "stage" and d.position >= 0 and not self._active(labels, d):
                    a, n = starts[d.key]
                    x[row, a : a + n] = 0
        return x

    def dataset(self, name: str) -> DatasetSpec:
        try:
            return self._datasets[name]
        except KeyError:
            raise UnknownNameError("dataset", name, list(self._datasets)) from None

    def datasets(self) -> list[str]:
        return list(self._datasets)

    def input_shape(self, arch: Arch, dataset: str) -> tuple[int, int, int]:
        """The dataset's (C, H, W), or (C, r, r) when the space has a resolution decision."""
        c, h, w = self.dataset(dataset).input_shape
        if self.spec.resolution is None:
            return (c, h, w)
        r = int(self.values(arch)["r"])
        return (c, r, r)

    def build(self, arch: Arch, dataset: str, num_classes: int | None = None):
        """The network of ``arch`` for ``dataset`` (eval mode, float32, fresh weights):
        input (B, *input_shape(arch, dataset)), output (B, classes) logits; ``num_classes``
        replaces the dataset's classifier width (a zoo model trained on other data)."""
        from hwnas.spaces.declared.network import DeclaredNetwork

        spec = self.dataset(dataset)
        values = {k: (v,) for k, v in self.values(arch).items()}
        classes = num_classes or spec.num_classes
        return DeclaredNetwork(
            self, dataset, values, 1.0, classes, self.input_shape(arch, dataset)
        ).eval()

    @property
    def reference_dataset(self) -> str:
        """The file's ``reference_dataset`` (default: its first dataset)."""
        return self.spec.reference_dataset

    # -- reference set ----------------------------------------------------------------------------

    def reference_archs(self, n: int = 10) -> list[Arch]:
        """``n`` distinct architectures spread from the smallest to the largest
        (:func:`hwnas.spaces.base.spread_archs`)."""
        keys = [d.key for d in self.decisions]
        return spread_archs(
            self,
            [d.labels for d in self.decisions],
            lambda chosen: self._arch({keys[i]: v for i, v in chosen.items()}),
            n,
        )

    def describe(self) -> dict[str, Any]:
        """Name, file, decisions and their sizes (for cards and ``hwnas arch``)."""
        size = 1.0
        for d in self.decisions:
            size *= len(d.values)
        return {
            "name": self.name,
            "file": str(self.path),
            "description": self.spec.description,
            "paper": self.spec.paper,
            "decisions": len(self.decisions),
            "size": size,
        }


def load_declared(path: str | Path) -> DeclaredSpace:
    """The declared space of a file.

    Raises:
        HwnasError: an unreadable or invalid file (one line: file, line, key).
    """
    return DeclaredSpace(read_space_file(path))


__all__ = ["Decision", "DeclaredSpace", "label", "load_declared", "resolve_value"]
