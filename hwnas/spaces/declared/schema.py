"""Reading and validating a space file of the declarative language (torch-free).

A file is YAML; it is composed node by node so that every key keeps its line, and checked
against the schema below before anything else happens. A mistake is one :class:`HwnasError`
line: ``FILE:LINE: KEY: what is wrong`` (``stages[2].layer.kernel``).

Schema (see ``docs/spaces.md`` for the guide)::

    name: myspace                         # [a-z0-9_-]+
    description: ...                      # optional
    paper: ...                            # optional
    datasets:                             # at least one
      cifar10: {classes: 10, input_shape: [3, 32, 32]}
    reference_dataset: cifar10            # optional (default: the first dataset)
    channel_divisor: 8                    # optional: widths scaled by a multiplier round to it
    resolution: {choices: [160, 192, 224]}  # optional: elastic input side (or {min, max, step})
    stem: [LAYER, ...]                    # optional fixed layers before the stages
    stages:                               # at least one
      - name: s1                          # optional (default s0, s1, ...)
        out: 24 | {choices: [16, 24]}     # output width (elastic: a width decision)
        stride: 2                         # stride of the stage's first layer (default 1)
        depth: 3 | {choices: [2, 3, 4]}   # repeats (elastic: a depth decision)
        layer: LAYER                      # the layer of every position ...
        first: {...}                      # ... with these keys replaced at position 0
        layers: [LAYER, ...]              # or one layer per position (fixed depth)
    head: [LAYER, ...]                    # optional layers before the classifier

    LAYER = {block: NAME, PARAM: VALUE, ..., out: N, stride: S}
          | {candidates: {NAME: LAYER, ...}}   # a categorical choice among blocks

A value may be a number, ``{choices: [...]}`` (a search decision, where the block's parameter is
elastic) or ``{by_dataset: {DATASET: value, ...}}`` (strides and widths of a skeleton that
differ between CIFAR and ImageNet).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from hwnas.errors import HwnasError
from hwnas.limits import (
    MAX_CHANNELS,
    MAX_CHOICES,
    MAX_CLASSES,
    MAX_DEPTH,
    MAX_INPUT_ELEMENTS,
    MAX_INPUT_SIDE,
    MAX_PARAMETERS,
    MAX_STRIDE,
)
from hwnas.paths import MAX_NAME_CHARS, read_bounded_text
from hwnas.spaces.declared.blocks import BLOCKS, BlockType, Param
from hwnas.yamlfile import load_yaml

Where = tuple[Any, ...]


@dataclass(frozen=True)
class Choices:
    """The values of a search decision, in the file's order."""

    values: tuple[Any, ...]


@dataclass(frozen=True)
class ByDataset:
    """A value that depends on the dataset a network is built for."""

    values: dict[str, Any]

    def get(self, dataset: str) -> Any:
        return self.values[dataset]


def resolve_value(value: Any, dataset: str) -> Any:
    """A value of the file for ``dataset`` (:class:`ByDataset` resolved; others as they are)."""
    return value.get(dataset) if isinstance(value, ByDataset) else value


@dataclass
class LayerSpec:
    """One layer of the skeleton.

    Attributes:
        block: block type name (None for a categorical choice among ``candidates``).
        params: block parameters (plain values, :class:`Choices` or :class:`ByDataset`),
            defaults filled in.
        candidates: name -> fixed layer, for a categorical choice.
        out: output width override (None: the stage's).
        stride: stride override (None: the stage's for position 0, else 1).
        where: the key path in the file, for messages.
        origin: the same path as a tuple of keys and indices (the file's lines are keyed by it).
    """

    block: str | None
    params: dict[str, Any] = field(default_factory=dict)
    candidates: dict[str, LayerSpec] | None = None
    out: Any = None
    stride: Any = None
    where: str = ""
    origin: tuple = ()

    def types(self) -> list[BlockType]:
        """The block types this layer may be."""
        if self.candidates is not None:
            return [BLOCKS.get(c.block) for c in self.candidates.values()]  # type: ignore[arg-type]
        return [BLOCKS.get(self.block)]  # type: ignore[arg-type]


@dataclass
class StageSpec:
    """A stage: ``layers[i]`` is the layer at position i (``len(layers)`` = the largest depth)."""

    name: str
    out: Any
    stride: Any
    depth: int | Choices
    layers: list[LayerSpec]


@dataclass
class SpaceSpec:
    """A validated space file."""

    name: str
    path: Path
    description: str
    paper: str
    datasets: dict[str, tuple[int, tuple[int, int, int]]]
    reference_dataset: str
    channel_divisor: int
    resolution: Choices | None
    stem: list[LayerSpec]
    stages: list[StageSpec]
    head: list[LayerSpec]


# -- reading YAML with line marks -----------------------------------------------------------------


def dotted(where: Where) -> str:
    """``("stages", 2, "layer")`` -> ``stages[2].layer``."""
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


class _Reader:
    """The file's data with the line of every key, and the one-line error format."""

    def __init__(self, path: Path):
        self.path = path
        self.lines: dict[Where, int] = {}
        try:
            text = read_bounded_text(path)
        except (OSError, UnicodeDecodeError) as exc:
            raise HwnasError(f"space file {path} cannot be read: {exc}") from None
        try:
            self.data, node = load_yaml(text, nodes=True)  # aliases bounded, no self-reference
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else 0
            what = exc.problem or exc.context or "invalid YAML"
            raise HwnasError(f"{path}:{line}: invalid YAML: {what}") from None
        except yaml.YAMLError as exc:
            raise HwnasError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
        if node is not None:
            self._walk(node, ())

    def _walk(self, node: yaml.Node, where: Where) -> None:
        self.lines.setdefault(where, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = (*where, key.value)
                self.lines[sub] = key.start_mark.line + 1
                self._walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self._walk(item, (*where, i))

    def fail(self, where: Where, message: str) -> HwnasError:
        line = 0
        for n in range(len(where), -1, -1):
            if where[:n] in self.lines:
                line = self.lines[where[:n]]
                break
        return HwnasError(f"{self.path}:{line}: {dotted(where)}: {message}")


# -- validation --------------------------------------------------------------------------------

_WIDTH = Param(int, None, low=1, high=MAX_CHANNELS)
_STRIDE = Param(int, 1, low=1, high=MAX_STRIDE)
_DEPTH = Param(int, 1, low=1, high=MAX_DEPTH)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*\Z")  # \Z: "$" matches before a final newline
_TYPE_WORD = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


class _Validator:
    def __init__(self, reader: _Reader):
        self.r = reader
        self.datasets: list[str] = []

    def mapping(self, value: Any, where: Where, keys: set[str], required: set[str] = frozenset()):
        if not isinstance(value, dict):
            raise self.r.fail(where, f"must be a mapping, got {_kind(value)}")
        for key in value:
            if key not in keys:
                raise self.r.fail(
                    (*where, key), f"unknown key '{key}'; allowed: {', '.join(sorted(keys))}"
                )
        for key in sorted(required):
            if key not in value:
                raise self.r.fail(where, f"missing required key '{key}'")
        return value

    def scalar(self, value: Any, where: Where, param: Param) -> Any:
        t = param.type
        ok = (
            isinstance(value, bool)
            if t is bool
            else isinstance(value, str)
            if t is str
            else isinstance(value, int) and not isinstance(value, bool)
            if t is int
            else isinstance(value, (int, float)) and not isinstance(value, bool)
        )
        if not ok:
            raise self.r.fail(where, f"must be {_TYPE_WORD[t]}, got {value!r}")
        if t is float:
            value = float(value)
        if t is float and not math.isfinite(value):
            raise self.r.fail(where, f"must be a finite number, got {value!r}")
        if param.allowed is not None and value not in param.allowed:
            allowed = ", ".join(map(str, param.allowed))
            raise self.r.fail(where, f"must be one of {allowed}, got {value!r}")
        if param.low is not None and value < param.low:
            raise self.r.fail(where, f"must be >= {param.low:g}, got {value!r}")
        if param.high is not None and value > param.high:
            raise self.r.fail(where, f"must be <= {param.high:g}, got {value!r}")
        if param.odd and value % 2 == 0 and not (value == 0 and param.low == 0):
            zero = "0 or " if param.low == 0 else ""
            raise self.r.fail(
                where,
                f"must be {zero}an odd kernel size (same padding keeps the size), got {value}",
            )
        return value

    def value(
        self,
        value: Any,
        where: Where,
        param: Param,
        elastic: bool,
        by_dataset: bool,
        fixed_why: str = "",
    ):
        """A plain value, ``{choices: [...]}`` (if ``elastic``), ``{min, max, step}`` (if
        ``elastic``) or ``{by_dataset: {...}}`` (if ``by_dataset``); ``fixed_why`` says, where
        a decision is given but the parameter cannot be one here, where it can be."""
        if isinstance(value, dict):
            keys = set(value)
            if keys == {"choices"} and elastic:
                items = value["choices"]
                if not isinstance(items, list) or not items:
                    raise self.r.fail((*where, "choices"), "must be a non-empty list")
                if len(items) > MAX_CHOICES:
                    raise self.r.fail(
                        (*where, "choices"), f"lists {len(items)} values, more than {MAX_CHOICES}"
                    )
                vals = tuple(
                    self.scalar(v, (*where, "choices", i), param) for i, v in enumerate(items)
                )
                if len(set(vals)) != len(vals):
                    raise self.r.fail((*where, "choices"), f"repeats a value: {list(vals)}")
                return Choices(vals) if len(vals) > 1 else vals[0]
            if keys == {"min", "max", "step"} and elastic and param.type is int:
                lo, hi = (self.scalar(value[k], (*where, k), param) for k in ("min", "max"))
                st = self.scalar(value["step"], (*where, "step"), Param(int, 1, low=1))
                if st < 1 or hi < lo:
                    raise self.r.fail(where, "needs min <= max and step >= 1")
                count = (hi - lo) // st + 1
                if count > MAX_CHOICES:
                    raise self.r.fail(where, f"gives {count} values, more than {MAX_CHOICES}")
                vals = tuple(range(lo, hi + 1, st))
                for k, v in enumerate(vals):  # each value as a choice would be (an even kernel)
                    self.scalar(v, (*where, f"min + {k} * step"), param)
                return Choices(vals) if len(vals) > 1 else vals[0]
            if keys == {"by_dataset"} and by_dataset:
                per = value["by_dataset"]
                if not isinstance(per, dict) or set(per) != set(self.datasets):
                    raise self.r.fail(
                        (*where, "by_dataset"),
                        f"must give a value for each dataset: {', '.join(self.datasets)}",
                    )
                return ByDataset(
                    {d: self.scalar(v, (*where, "by_dataset", d), param) for d, v in per.items()}
                )
            forms = ["a value"]
            if elastic:
                forms.append("{choices: [...]}")
            if by_dataset:
                forms.append("{by_dataset: {...}}")
            why = ""
            if not elastic and keys & {"choices", "min", "max"}:
                why = f" ({fixed_why or 'not a search decision here'})"
            raise self.r.fail(where, f"must be {' or '.join(forms)}, got keys {sorted(keys)}{why}")
        if isinstance(value, list):
            hint = " (a search decision is written {choices: [...]})" if elastic else ""
            raise self.r.fail(where, f"must be {_TYPE_WORD[param.type]}, got a list{hint}")
        return self.scalar(value, where, param)

    # -- layers -------------------------------------------------------------------------------

    def layer(self, raw: Any, where: Where, in_stage: bool) -> LayerSpec:
        if isinstance(raw, dict) and "candidates" in raw:
            self.mapping(raw, where, {"candidates", "stride"})
            cands = raw["candidates"]
            if not isinstance(cands, dict) or len(cands) < 2:
                raise self.r.fail((*where, "candidates"), "must map at least 2 names to layers")
            out = {}
            for name, sub in cands.items():
                if not isinstance(name, str) or not _NAME.match(name):
                    raise self.r.fail((*where, "candidates", name), "bad candidate name")
                spec = self.layer(sub, (*where, "candidates", name), in_stage)
                if spec.candidates is not None or _is_elastic(spec):
                    raise self.r.fail(
                        (*where, "candidates", name), "a candidate must be one fixed block"
                    )
                if spec.out is not None or spec.stride is not None:
                    raise self.r.fail(
                        (*where, "candidates", name), "set out and stride on the stage"
                    )
                out[name] = spec
            stride = self._stride(raw, where)
            return LayerSpec(None, {}, out, None, stride, dotted(where), where)
        if not isinstance(raw, dict) or "block" not in raw:
            raise self.r.fail(where, "a layer needs 'block: NAME' (or 'candidates:')")
        name = raw["block"]
        if not isinstance(name, str) or name not in BLOCKS:
            raise self.r.fail(
                (*where, "block"), f"unknown block '{name}'; known: {', '.join(BLOCKS.names())}"
            )
        bt: BlockType = BLOCKS.get(name)
        self.mapping(raw, where, {"block", "out", "stride", *bt.params})
        params = {}
        for key, p in bt.params.items():
            if key in raw:
                params[key] = self.value(raw[key], (*where, key), p, p.elastic, True)
            else:
                params[key] = p.default
        out = None
        if "out" in raw:
            out = self.value(
                raw["out"], (*where, "out"), _WIDTH, not in_stage, True,
                "a stage's layers take its width: a width decision is the stage's out",
            )  # fmt: skip
        return LayerSpec(name, params, None, out, self._stride(raw, where), dotted(where), where)

    def _stride(self, raw: dict, where: Where):
        if "stride" not in raw:
            return None
        return self.value(raw["stride"], (*where, "stride"), _STRIDE, False, True)

    def layer_list(self, raw: Any, where: Where) -> list[LayerSpec]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            raise self.r.fail(where, f"must be a list of layers, got {_kind(raw)}")
        out = [self.layer(item, (*where, i), in_stage=False) for i, item in enumerate(raw)]
        for spec in out:
            spec.stride = 1 if spec.stride is None else spec.stride
        return out

    def stage(self, raw: Any, where: Where, index: int) -> StageSpec:
        keys = {"name", "out", "stride", "depth", "layer", "layers", "first"}
        self.mapping(raw, where, keys)
        name = raw.get("name", f"s{index}")
        if not isinstance(name, str) or not _NAME.match(name) or "." in name:
            raise self.r.fail((*where, "name"), f"bad stage name {name!r} (letters, digits, _ -)")
        out = None
        if "out" in raw:
            out = self.value(raw["out"], (*where, "out"), _WIDTH, True, True)
        stride = 1
        if "stride" in raw:
            stride = self.value(raw["stride"], (*where, "stride"), _STRIDE, False, True)
        if ("layer" in raw) == ("layers" in raw):
            raise self.r.fail(where, "give exactly one of 'layer' (with 'depth') or 'layers'")
        if "layers" in raw:
            for key in ("depth", "first"):
                if key in raw:
                    raise self.r.fail((*where, key), f"'{key}' goes with 'layer', not 'layers'")
            items = raw["layers"]
            if not isinstance(items, list) or not items:
                raise self.r.fail((*where, "layers"), "must be a non-empty list of layers")
            layers = [self.layer(x, (*where, "layers", i), True) for i, x in enumerate(items)]
            depth: int | Choices = len(layers)
        else:
            depth = self.value(raw.get("depth", 1), (*where, "depth"), _DEPTH, True, False)
            top = max(depth.values) if isinstance(depth, Choices) else depth
            template = raw["layer"]
            if "first" in raw and isinstance(template, dict):  # a mistake in the layer's own
                self.layer(template, (*where, "layer"), True)  # keys is reported as its own
            layers = []
            for i in range(top):
                item = template
                if i == 0 and "first" in raw:
                    first = raw["first"]
                    if not isinstance(first, dict) or not isinstance(template, dict):
                        raise self.r.fail((*where, "first"), "must be a mapping of layer keys")
                    item = {**template, **first}
                    if (
                        "block" in first
                        and "block" in template
                        and first["block"] != template["block"]
                    ):
                        item = dict(first)
                spot = (*where, "first") if (i == 0 and "first" in raw) else (*where, "layer")
                layers.append(self.layer(item, spot, True))
        for i, spec in enumerate(layers):
            spot = (*where, "layers", i) if "layers" in raw else (*where, "layer")
            if spec.stride is None:
                spec.stride = stride if i == 0 else 1
            if spec.out is not None and isinstance(out, Choices):
                raise self.r.fail((*where, "out"), "a stage with a width decision sets every width")
            if spec.candidates is not None and isinstance(out, Choices):
                raise self.r.fail(
                    (*where, "out"), "a stage with block candidates needs a fixed width"
                )
            for bt in spec.types():
                if bt.tokens_in != bt.tokens_out:
                    raise self.r.fail(spot, f"block '{bt.name}' belongs in the stem or head")
        return StageSpec(name, out, stride, depth, layers)

    def datasets_(self, raw: Any) -> dict[str, tuple[int, tuple[int, int, int]]]:
        where: Where = ("datasets",)
        if not isinstance(raw, dict) or not raw:
            raise self.r.fail(where, "must map at least one dataset name to {classes, input_shape}")
        out = {}
        for name, spec in raw.items():
            w = (*where, name)
            if not isinstance(name, str) or not _NAME.match(name):
                raise self.r.fail(w, f"bad dataset name {name!r}")
            self.mapping(spec, w, {"classes", "input_shape"}, {"classes", "input_shape"})
            classes = self.scalar(
                spec["classes"], (*w, "classes"), Param(int, None, low=1, high=MAX_CLASSES)
            )
            shape = spec["input_shape"]
            if (
                not isinstance(shape, list)
                or len(shape) != 3
                or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape)
            ):
                raise self.r.fail(
                    (*w, "input_shape"), f"must be [C, H, W] (3 positive integers), got {shape!r}"
                )
            if shape[0] > MAX_CHANNELS or max(shape[1:]) > MAX_INPUT_SIDE:
                raise self.r.fail(
                    (*w, "input_shape"),
                    f"must have at most {MAX_CHANNELS} channels and {MAX_INPUT_SIDE} pixels a "
                    f"side, got {shape!r}",
                )
            if math.prod(shape) > MAX_INPUT_ELEMENTS:
                raise self.r.fail((*w, "input_shape"), _too_many_elements(shape))
            out[name] = (classes, tuple(shape))
        self.datasets = list(out)
        return out


def _too_many_elements(shape: list[int]) -> str:
    """Why an input of ``shape`` (C, H, W) is refused: more elements than hwnas allocates for
    one input (:data:`MAX_INPUT_ELEMENTS`, as :func:`hwnas.limits.input_size` checks where a
    network runs: a search stopped at its first trial)."""
    n = math.prod(shape)
    return (
        f"an input of {'x'.join(map(str, shape))} has {n:.3g} elements, more than the "
        f"{MAX_INPUT_ELEMENTS:.3g} hwnas allocates for one input ({4 * n / 2**30:.3g} GiB of "
        "float32)"
    )


def _kind(value: Any) -> str:
    """What ``value`` is, never its text: a file read as a space may be anything (a key file
    YAML reads as one string), and a message must not show it."""
    if value is None:
        return "nothing"
    words = {dict: "a mapping", list: "a list", **_TYPE_WORD}
    return words.get(type(value), type(value).__name__)


def _is_elastic(spec: LayerSpec) -> bool:
    return any(isinstance(v, Choices) for v in spec.params.values())


TOP_KEYS = {
    "name",
    "description",
    "paper",
    "datasets",
    "reference_dataset",
    "channel_divisor",
    "resolution",
    "stem",
    "stages",
    "head",
}


def read_space_file(path: str | Path) -> SpaceSpec:
    """Read and validate a space file.

    Raises:
        HwnasError: unreadable file, invalid YAML, or a schema violation; one line
            ``FILE:LINE: KEY: problem``.
    """
    path = Path(path)
    r = _Reader(path)
    v = _Validator(r)
    data = v.mapping(r.data, (), TOP_KEYS, {"name", "datasets", "stages"})
    name = data["name"]
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > MAX_NAME_CHARS:
        raise r.fail(("name",), f"must be letters, digits, '_' or '-' (at most "
                                f"{MAX_NAME_CHARS}), got {name!r}"[:300])  # fmt: skip
    datasets = v.datasets_(data["datasets"])
    ref = data.get("reference_dataset", next(iter(datasets)))
    if not isinstance(ref, str):
        raise r.fail(("reference_dataset",), f"must be a dataset's name, got {ref!r}"[:200])
    if ref not in datasets:
        raise r.fail(
            ("reference_dataset",), f"'{ref}' is not one of the datasets: {', '.join(datasets)}"
        )
    divisor = v.scalar(data.get("channel_divisor", 8), ("channel_divisor",),
                       Param(int, 8, low=1, high=MAX_CHANNELS))  # fmt: skip
    resolution = None
    if "resolution" in data:
        res = v.value(
            data["resolution"],
            ("resolution",),
            Param(int, None, low=8, high=MAX_INPUT_SIDE),
            True,
            False,
        )
        if not isinstance(res, Choices):
            raise r.fail(
                ("resolution",), "must be {choices: [...]} or {min, max, step} with 2+ values"
            )
        resolution = res
        channels = max(shape[0] for _c, shape in datasets.values())
        side = max(res.values)
        if channels * side * side > MAX_INPUT_ELEMENTS:
            raise r.fail(("resolution",), _too_many_elements([channels, side, side]))
    stem = v.layer_list(data.get("stem"), ("stem",))
    head = v.layer_list(data.get("head"), ("head",))
    raw_stages = data["stages"]
    if not isinstance(raw_stages, list) or not raw_stages:
        raise r.fail(("stages",), "must be a non-empty list of stages")
    stages = [v.stage(s, ("stages", i), i) for i, s in enumerate(raw_stages)]
    names = [s.name for s in stages]
    for i, n in enumerate(names):
        if n in names[:i] or n in ("stem", "head", "r"):
            raise r.fail(("stages", i, "name"), f"stage name '{n}' is used twice or reserved")
    spec = SpaceSpec(
        name=name,
        path=path,
        description=str(data.get("description", "")),
        paper=str(data.get("paper", "")),
        datasets=datasets,
        reference_dataset=ref,
        channel_divisor=divisor,
        resolution=resolution,
        stem=stem,
        stages=stages,
        head=head,
    )
    _check_structure(spec, r)
    _check_maps(spec, r)
    _check_size(spec, r)
    return spec


def _values(v: Any) -> set:
    """Every value a file value may take (the choices, the per-dataset values, or itself)."""
    if isinstance(v, Choices):
        return set(v.values)
    if isinstance(v, ByDataset):
        return set(v.values.values())
    return {v}


def _check_groups(
    spec: SpaceSpec, layer: LayerSpec, w: tuple, r: _Reader, seen: list[tuple[str, set]]
) -> None:
    """Grouped 1x1 convs need every width they see to split into the groups: the widths the
    supernet scales are multiples of the space's ``channel_divisor`` (stage widths) and of the
    block's ``divisor`` (hidden widths), and the widths as written are taken at full size
    (``seen``: what the layer takes and gives, as (name, values) pairs: the image's channels
    for the first layer, the widths the file gives), so ``groups`` must divide all of them (5
    groups of 8 channels, 2 of an RGB image's 3, or 8 of a fixed width of 20 ended in
    PyTorch's traceback when a network was built)."""
    for g in _values(layer.params.get("groups", 1)):
        if not isinstance(g, int) or g <= 1:
            continue
        multiple = "every width is a multiple of it"
        for name, d, why in (("the space's channel_divisor", spec.channel_divisor, multiple),
                             ("the block's divisor", layer.params.get("divisor", 1), multiple),
                             *((what, c, "a width this layer takes or gives")
                               for what, widths in seen for c in sorted(
                                   v for v in widths if isinstance(v, int)))):  # fmt: skip
            if isinstance(d, int) and d % g:
                raise r.fail((*w, "groups"), f"{g} groups must divide {name} ({d}): {why}")


def _for_dataset(v: Any, dataset: str) -> set:
    """The values ``v`` may take in the network of ``dataset`` (a ``by_dataset`` value its
    own; choices all of them)."""
    if isinstance(v, ByDataset):
        return _values(v.values.get(dataset))
    return _values(v)


def _largest(value: Any, dataset: str) -> int | None:
    """The largest width ``value`` gives in the network of ``dataset`` (None: not given)."""
    if value is None:
        return None
    return max(v for v in _for_dataset(value, dataset) if isinstance(v, int))


def _candidate_values(params: dict[str, Any], dataset: str) -> dict[str, tuple]:
    """A layer's parameters as its module is built with in a supernet: parameter -> every
    value it may take in the network of ``dataset``."""
    return {
        p: v.values if isinstance(v, Choices) else (resolve_value(v, dataset),)
        for p, v in params.items()
    }


def _out_hw(bt: BlockType, hw: tuple[int, int], stride: int, values: dict[str, tuple]):
    if bt.out_hw is not None:
        return bt.out_hw(hw, stride, values)
    return ((hw[0] - 1) // stride + 1, (hw[1] - 1) // stride + 1)


@dataclass
class _Step:
    """One block of a network as its supernet builds it (every candidate, each stage at its
    largest depth, every width at its largest, at width 1).

    Attributes:
        where: the layer's key path in the file (a candidate's, of a categorical choice).
        block: the block type (one step per candidate of a categorical choice).
        c_in: input width.
        c_out: the width the layer is given (``out``, or its stage's).
        stride: the layer's stride.
        values: parameter -> its candidate values (:func:`_candidate_values`).
        hw: the input feature map of the built network.
        maps: every input feature map a choice before it may give (a categorical choice
            between a pool and a conv, a depth decision over strided layers).
        out: every feature map it may give.
        factor: the product of the strides before it in the built network.
    """

    where: Where
    block: BlockType
    c_in: int
    c_out: int
    stride: int
    values: dict[str, tuple]
    hw: tuple[int, int]
    maps: set[tuple[int, int]]
    out: set[tuple[int, int]]
    factor: int


def _steps(spec: SpaceSpec, dataset: str, hw: tuple[int, int]) -> tuple[list[_Step], int]:
    """The blocks of the network of ``dataset`` built for an input map ``hw``, in order, and
    the width the classifier takes. Follows :class:`hwnas.spaces.declared.network.
    DeclaredNetwork` without building it (the file's checks and its size bound)."""
    c = spec.datasets[dataset][1][0]
    maps, factor = {hw}, 1
    steps: list[_Step] = []

    def layer(spec_: LayerSpec, where: Where, c_in: int, c_out: int) -> int:
        nonlocal hw, maps, factor
        stride = int(resolve_value(spec_.stride, dataset))
        if spec_.candidates is not None:
            blocks = [(BLOCKS.get(x.block), x.params, x.origin) for x in spec_.candidates.values()]
        else:
            blocks = [(BLOCKS.get(spec_.block), spec_.params, where)]
        out_maps: set[tuple[int, int]] = set()
        first = None
        for bt, params, at in blocks:
            values = _candidate_values(params, dataset)
            out = {_out_hw(bt, m, stride, values) for m in maps}
            steps.append(_Step(at, bt, c_in, c_out, stride, values, hw, maps, out, factor))
            out_maps |= out
            if first is None:
                first = (bt, values)
        bt, values = first  # type: ignore[misc]
        hw = _out_hw(bt, hw, stride, values)
        maps = out_maps
        factor *= stride if bt.out_hw is None else 1
        return c_in if bt.keeps_width else c_out

    for j, x in enumerate(spec.stem):
        c = layer(x, x.origin or ("stem", j), c, _largest(x.out, dataset) or c)
    for st in spec.stages:
        stage_out = _largest(st.out, dataset) or c
        depths = set(st.depth.values) if isinstance(st.depth, Choices) else {st.depth}
        ends: set[tuple[int, int]] = set()  # the maps after each depth the stage may have
        for i, x in enumerate(st.layers):
            if i in depths:
                ends |= maps
            c = layer(x, x.origin, c, _largest(x.out, dataset) or stage_out)
        maps = ends | maps
    for j, x in enumerate(spec.head):
        c = layer(x, x.origin or ("head", j), c, _largest(x.out, dataset) or c)
    return steps, c


def _fits(steps: list[_Step], k: int) -> bool:
    """Whether every feature map step ``k`` may get is large enough for it."""
    step = steps[k]
    if step.block.min_side is None:
        return True
    _param, need = step.block.min_side(step.values)
    return min(min(m) for m in step.maps) >= need


def _least_side(spec: SpaceSpec, dataset: str, k: int) -> int | None:
    """The least side of a square input for which step ``k`` of ``dataset``'s network fits
    (None: no input up to :data:`MAX_INPUT_SIDE` is large enough)."""
    if not _fits(_steps(spec, dataset, (MAX_INPUT_SIDE, MAX_INPUT_SIDE))[0], k):
        return None
    lo, hi = 1, MAX_INPUT_SIDE  # every map shrinks as the input does: a bisection
    while lo < hi:
        mid = (lo + hi) // 2
        if _fits(_steps(spec, dataset, (mid, mid))[0], k):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _check_maps(spec: SpaceSpec, r: _Reader) -> None:
    """Every block that needs a feature map of some size (:attr:`BlockType.min_side`: a
    ``patch_embed``'s patch) gets one at each dataset's input and the smallest elastic
    resolution, whatever the choices before it, following every block that changes the map
    (strides, a global pool's 1x1: :attr:`BlockType.out_hw`); a block that needs one input
    size (:attr:`BlockType.fixed_input`) gets one map. A smaller map made PyTorch's "Kernel
    size can't be greater than actual input size" traceback when a network ran, and a pool
    before a ``patch_embed`` passed the old check, which multiplied strides alone."""
    for dataset, (_c, shape) in spec.datasets.items():
        sources = {f"{dataset}'s {shape[1]}x{shape[2]} input": (shape[1], shape[2])}
        if spec.resolution is not None:
            low = min(spec.resolution.values)
            sources[f"the resolution {low}"] = (low, low)
        for source, hw in sources.items():
            steps = _steps(spec, dataset, hw)[0]
            for k, step in enumerate(steps):
                if not _fits(steps, k):
                    param, need = step.block.min_side(step.values)  # type: ignore[misc]
                    small = min(step.maps, key=min)
                    what = (
                        f"a {need}x{need} {param} is larger than the {small[0]}x{small[1]} "
                        f"feature map it gets from {source}"
                    )
                    side = _least_side(spec, dataset, k)
                    if side is not None:
                        raise r.fail(
                            (*step.where, param),
                            f"{what} (strides before it: x{step.factor}); it needs an input "
                            f"side of at least {side}",
                        )
                    big = _steps(spec, dataset, (MAX_INPUT_SIDE, MAX_INPUT_SIDE))[0]
                    cause = next(s for s in big[:k] if min(min(m) for m in s.out) < need)
                    left = min(cause.out, key=min)
                    raise r.fail(
                        (*step.where, param),
                        f"{what}; no input is large enough: {dotted(cause.where)} "
                        f"({cause.block.name}) before it leaves a {left[0]}x{left[1]} map of "
                        f"any input; put the {step.block.name} before it",
                    )
                if step.block.fixed_input and len(step.maps) > 1:
                    sizes = ", ".join(f"{h}x{w}" for h, w in sorted(step.maps))
                    raise r.fail(
                        step.where,
                        f"the feature map {step.block.name} gets from {source} depends on the "
                        f"choices before it ({sizes}); it needs one size (learned position "
                        "embeddings): give those layers one feature map size",
                    )


def min_input_side(spec: SpaceSpec) -> int:
    """The smallest side (pixels) of a square input every network of the space can take: 1,
    or what its ``patch_embed`` needs after the blocks before it (see :func:`_check_maps`;
    more than :data:`MAX_INPUT_SIDE` where no input is enough, a file its read refuses); what
    a supernet's proxy image size (``--set image_size``) must reach."""
    need = 1
    for dataset in spec.datasets:
        steps = _steps(spec, dataset, (1, 1))[0]
        for k, step in enumerate(steps):
            if step.block.min_side is not None:
                side = _least_side(spec, dataset, k)
                need = max(need, MAX_INPUT_SIDE + 1 if side is None else side)
    return need


def network_size(spec: SpaceSpec, dataset: str) -> tuple[int, dict[Where, int]]:
    """The parameters and buffers of the supernet of ``dataset`` at width 1 (every candidate,
    the largest of every choice: at least any network of the space), counted from the file
    (:attr:`BlockType.size`) without building it, and by key path (a stage's ``layer`` holds
    all its positions; the classifier is the dataset's ``classes``)."""
    _classes, shape = spec.datasets[dataset]
    hw = (shape[1], shape[2])
    if spec.resolution is not None:
        hw = (max(spec.resolution.values),) * 2
    steps, c = _steps(spec, dataset, hw)
    parts: dict[Where, int] = {}
    for step in steps:
        if step.block.size is not None:
            n = step.block.size(step.c_in, step.c_out, step.stride, step.values, step.hw)
            parts[step.where] = parts.get(step.where, 0) + n
    parts[("datasets", dataset, "classes")] = c * _classes + _classes
    return sum(parts.values()), parts


def _check_size(spec: SpaceSpec, r: _Reader) -> None:
    """Refuse a space whose largest network has more than :data:`MAX_PARAMETERS`
    parameters and buffers, naming the layer (or the classifier's classes) that holds the
    most: a 16384-wide stage at expansion 64 was accepted, then needed 68 GB to build."""
    for dataset in spec.datasets:
        total, parts = network_size(spec, dataset)
        if total > MAX_PARAMETERS:
            where = max(parts, key=lambda w: parts[w])
            raise r.fail(
                where,
                f"the {dataset} network at its largest (every choice at its most) has "
                f"{total:.3g} parameters and buffers ({4 * total / 2**30:.3g} GiB of float32), "
                f"more than the {MAX_PARAMETERS:.3g} hwnas builds from a file; this holds "
                f"{parts[where]:.3g} of them",
            )


def _check_structure(spec: SpaceSpec, r: _Reader) -> None:
    """Checks across keys: tokens and feature maps in order, each block's own rule
    (:attr:`BlockType.check`), one input size for blocks that need it."""
    tokens = False
    groups = [(spec.stem, ("stem",), False)]
    groups += [(s.layers, ("stages", i, "layers"), True) for i, s in enumerate(spec.stages)]
    groups.append((spec.head, ("head",), False))
    fixed_input = None
    pooled = False  # a layer has reduced the image to one vector (the classifier's input)
    ended = None  # the block whose (B, E) output only the classifier takes (token_pool)
    # the widths the next layer takes (the image's channels first)
    widths = ("the image's channels", {shape[0] for _c, shape in spec.datasets.values()})
    outs = [None] + [s.out for s in spec.stages] + [None]
    for (items, where, _in_stage), stage_out in zip(groups, outs):
        for j, layer in enumerate(items):
            w = layer.origin or (*where, j)
            given = layer.out if layer.out is not None else stage_out
            gives = (f"{dotted(w)}'s width", _values(given)) if given is not None else widths
            pooled = pooled or all(bt.pools for bt in layer.types())
            if ended is not None:
                raise r.fail(
                    w,
                    f"no block may follow {ended}: it gives one vector per image (batch, "
                    "width), which only the classifier takes; put this layer before it",
                )
            for bt in layer.types():
                if bt.tokens_in != tokens:
                    want = "tokens (after patch_embed)" if bt.tokens_in else "feature maps"
                    raise r.fail(w, f"block '{bt.name}' takes {want}, not what precedes it")
                if bt.fixed_input:
                    fixed_input = bt.name
            tokens = layer.types()[0].tokens_out
            ended = next((bt.name for bt in layer.types() if bt.ends), None)
            if layer.block is not None:
                bt = BLOCKS.get(layer.block)
                if bt.check is not None:
                    values = {p: _values(v) for p, v in layer.params.items()}
                    problem = bt.check(values, _values(layer.stride))
                    if problem is not None:
                        raise r.fail((*w, problem[0]), problem[1])
                _check_groups(spec, layer, w, r, [widths, gives])
            widths = gives
    if not pooled:  # the classifier (Linear to classes) would get C x H x W inputs
        raise r.fail(
            ("head",) if spec.head else ("stages",),
            "the network ends in a feature map (or tokens), not one vector per image: end "
            "head: with {block: pool} (global average pooling; token_pool after transformer "
            "layers) before the classifier",
        )
    if fixed_input is not None and spec.resolution is not None:
        raise r.fail(
            ("resolution",),
            f"an elastic resolution cannot go with {fixed_input} (one input size)",
        )
