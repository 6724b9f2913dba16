"""Search spaces made from a PyTorch module: a space written with :mod:`hwnas.nn` choice points,
or the user's own trained model made elastic.

Both are a :class:`ModuleSpace`: the module, traced once (:mod:`.analysis`), is the weight-sharing
supernet; its decisions are channel widths (one per channel group, kept consistent across
residual additions and concatenations), kernel sizes (a centre crop), block depths (a stage's
last residual blocks dropped: a container's last ones, or a run inside a flat stem-to-head list)
and operations (:class:`hwnas.nn.Choice`). From that a space gets arch
strings, sampling, encodings, a supernet with exact subnet extraction
(:class:`hwnas.supernet.module.ModuleSupernet`), ONNX export, cost models and zoo entries, like a
declared space.

- :func:`module_space` (also ``hwnas.nn.space``): the decisions the module declares with
  :class:`hwnas.nn.ValueChoice` / :class:`hwnas.nn.Choice` / :class:`hwnas.nn.Repeat`;
- :func:`elastic` (also ``hwnas.elastic``): every decision that is safe in an ordinary
  ``nn.Module`` (its trained weights inherited: channels ordered by importance once, a smaller
  kernel the centre of the trained one, a shallower stage its first blocks), as NVIDIA
  ModelOpt's FastNAS and Once-for-All do, plus any choice points it declares.

Arch strings: one ``KEY=VALUE`` per decision, in the order of the network: ``layer1.0.conv1.w=32
layer2.d=1 layer2.0.dw.k=3 features.3-6.d=2 ...`` (``.w`` a width in channels, ``.k`` a kernel
size, ``.d`` a depth: of a container, or of its blocks 3 to 6, the 3rd always kept; ``.op`` an
operation; a :class:`hwnas.nn.ValueChoice` / :class:`hwnas.nn.Choice` with a
label is written by its label). Decisions that only concern dropped blocks take their first
value and may be left out.
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from hwnas.errors import HwnasError, UnknownNameError, keyword_terms, shown
from hwnas.spaces.base import (
    Arch,
    DatasetSpec,
    SearchSpace,
    key_value_tokens,
    missing_keys_error,
    spread_archs,
)

NAME = re.compile(r"^[A-Za-z0-9_-]+\Z")  # \Z: "$" matches before a final newline

WIDTHS = (0.25, 0.5, 0.75, 1.0)
"""Default width ratios of :func:`elastic` (of each group's trained width)."""
KERNELS = (3, 5, 7)
"""Default kernel sizes of :func:`elastic` (those up to each depthwise conv's own)."""


@dataclass(frozen=True)
class Decision:
    """One decision of a module space.

    Attributes:
        key: its name in arch strings.
        kind: ``width`` (channels), ``kernel``, ``depth`` (blocks) or ``op``.
        values: the candidate values (ints; candidate names for ``op``), smallest first.
        sites: what it sets: group ids (width), conv names (kernel), stage paths (depth),
            Choice names (op).
        layers: the layers it concerns (to know when they are all dropped).
    """

    key: str
    kind: str
    values: tuple[Any, ...]
    sites: tuple[Any, ...]
    layers: tuple[str, ...]

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(str(v) for v in self.values)


class ModuleSpace(SearchSpace):
    """The space of a module's subnets (see the module doc). Made by :func:`module_space` or
    :func:`elastic`, not directly.

    Attributes:
        name: the space's name.
        net: the converted module (every subnet runnable; the supernet's starting weights).
        analysis: what tracing found (:class:`hwnas.spaces.module.analysis.Analysis`).
        decisions: the decisions, in network order.
    """

    supernet_name = "module"
    featurizer_name = "module"
    language = "PyTorch module"

    def __init__(
        self,
        name: str,
        net: Any,
        analysis: Any,
        decisions: list[Decision],
        dataset: DatasetSpec,
        description: str = "",
        inherited: bool = False,
        task: str | None = None,
    ):
        self.name = name
        self.task = task
        self.net = net
        self.analysis = analysis
        self.decisions = decisions
        self.by_key = {d.key: d for d in decisions}
        self._dataset = dataset
        self.description = description
        self.inherited = inherited
        self._choices = {d.key: d.labels for d in decisions}
        self._conditions = self._depth_conditions()

    def has_ability(self, protocol: type) -> bool:
        """Whether this space has ``protocol``'s ability (:func:`hwnas.spaces.ability`): every
        ability whose methods it has, but :class:`hwnas.spaces.InheritedSpace` only where its
        weights are a trained model's (:func:`hwnas.elastic`), not those a space written in
        PyTorch code (:func:`hwnas.nn.space`) happened to be built with."""
        from hwnas.spaces.base import InheritedSpace

        return protocol is not InheritedSpace or self.inherited

    # -- identity -------------------------------------------------------------------------------

    @cached_property
    def identity(self) -> str:
        """The space's name plus a hash of its structure (layers, parameter shapes, decisions,
        input): what measurement-store keys use, so two different models given the same name
        never share a measured latency."""
        from hwnas.export import content_hash

        shapes = [f"{k}:{tuple(v.shape)}" for k, v in self.net.state_dict().items()]
        layers = [f"{k}:{v}" for k, v in self.analysis.layers.items()]
        decisions = [f"{d.key}:{d.kind}:{d.values}:{d.sites}" for d in self.decisions]
        shape = "x".join(map(str, self._dataset.input_shape))
        return f"{self.name}@" + content_hash(*shapes, *layers, *decisions, shape)

    @cached_property
    def fingerprint(self) -> str:
        """:attr:`identity` plus a hash of the module's weights (its subnets' accuracy, and a
        supernet trained from them, depend on them)."""
        import hashlib

        import torch

        h = hashlib.sha256()
        for k, v in self.net.state_dict().items():
            h.update(k.encode())
            if isinstance(v, torch.Tensor):  # any dtype (bfloat16 has no NumPy twin)
                t = v.detach().cpu()
                if t.is_quantized:
                    t = t.dequantize()
                h.update(f"{t.dtype}{tuple(t.shape)}".encode())
                h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            else:  # a module's extra state
                h.update(repr(v).encode())
        return f"{self.identity}:{h.hexdigest()[:16]}"

    # -- decisions ------------------------------------------------------------------------------

    def _depth_conditions(self) -> dict[str, list[tuple[str, int]]]:
        """layer -> [(depth decision key, block index)]: the layer runs when every such depth
        is above its index."""
        depth_of = {}
        for d in self.decisions:
            if d.kind == "depth":
                for path in d.sites:
                    depth_of[path] = d.key
        out: dict[str, list[tuple[str, int]]] = {}
        for layer in self.analysis.layers:
            conds = []
            for path, key in depth_of.items():
                stage = self.analysis.stages[path]
                first = max(1, stage.first_droppable)
                for i, child in enumerate(stage.children[first:], first):
                    if layer.startswith(child + "."):
                        conds.append((key, i))
            out[layer] = conds
        return out

    def _active(self, values: dict[str, Any], d: Decision) -> bool:
        if not d.layers:
            return True
        for layer in d.layers:
            conds = self._conditions.get(layer, [])
            if all(int(values[key]) > i for key, i in conds if key in values):
                return True
        return False

    def choices(self) -> dict[str, tuple[str, ...]]:
        return dict(self._choices)

    def num_architectures(self) -> int:
        """Distinct subnets: a decision of a block its stage's depth drops does not count
        (for each combination of the depths, the product of the decisions that are used;
        a depth decision inside a dropped block counts once)."""
        import itertools

        depths = [d for d in self.decisions if d.kind == "depth"]
        others = [d for d in self.decisions if d.kind != "depth"]
        total = 0
        for combo in itertools.product(*(d.values for d in depths)):
            values = {d.key: v for d, v in zip(depths, combo)}
            if any(v != d.values[0] and not self._active(values, d) for d, v in zip(depths, combo)):
                continue  # the same subnet as with this depth at its first value
            total += math.prod(len(d.values) for d in others if self._active(values, d))
        return total

    def lut_terms(self) -> list:
        """The lookup-table terms of a supernet's cost model: one indicator per candidate of
        every decision, times ``1[stage depth > block index]`` where all the layers a decision
        concerns sit in one droppable block (a dropped block costs nothing), as declared
        spaces' terms do."""
        import numpy as np

        index = {d.key: i for i, d in enumerate(self.decisions)}
        terms = []
        for i, d in enumerate(self.decisions):
            conds = {tuple(self._conditions.get(layer, [])) for layer in d.layers}
            extra = []
            if d.kind != "depth" and len(conds) == 1 and len(next(iter(conds))) == 1:
                key, block = next(iter(conds))[0]
                values = self.by_key[key].values
                g = np.array([1.0 if int(v) > block else 0.0 for v in values])
                if not g.all():
                    extra.append((index[key], g))
            for c in range(len(d.values)):
                terms.append(((i, np.eye(len(d.values))[c]), *extra))
        return terms

    def _value(self, d: Decision, label: str) -> Any:
        return d.values[d.labels.index(label)]

    def _arch(self, labels: dict[str, str]) -> Arch:
        values = {k: self._value(self.by_key[k], v) for k, v in labels.items()}
        parts = []
        for d in self.decisions:
            label = labels[d.key] if self._active(values, d) else d.labels[0]
            parts.append(f"{d.key}={label}")
        return Arch(self.name, " ".join(parts))

    def parse(self, text: str) -> Arch:
        """Parse ``KEY=VALUE`` tokens (any order) and canonicalise.

        Raises:
            HwnasError: a malformed or unknown token, a value not among the choices, a missing
                or repeated token (one line naming it).
        """
        labels: dict[str, str] = {}
        for key, val in key_value_tokens(self.name, text, list(self.by_key)):
            d = self.by_key[key]
            if val not in d.labels:
                raise HwnasError(
                    f"malformed {self.name} arch string: {key}={val} not in {', '.join(d.labels)}"
                )
            labels[key] = val
        depth_values = {
            d.key: self._value(d, labels[d.key]) for d in self.decisions if d.key in labels
        }
        missing = []
        for d in self.decisions:
            if d.key not in labels:
                if self._active(depth_values, d) or any(
                    c[0] not in labels
                    for layer in d.layers
                    for c in self._conditions.get(layer, [])
                ):
                    missing.append(d.key)
                labels[d.key] = d.labels[0]
        if missing:
            raise missing_keys_error(self.name, missing)
        return self._arch(labels)

    def from_choices(self, values: dict[str, str]) -> Arch:
        for k, opts in self._choices.items():
            if k not in values:
                raise HwnasError(f"{self.name}: no value for {k}")
            if str(values[k]) not in opts:
                raise HwnasError(f"{self.name}: {k}={values[k]} not in {', '.join(opts)}")
        return self._arch({k: str(values[k]) for k in self._choices})

    def to_choices(self, arch: Arch) -> dict[str, str]:
        if arch.space != self.name:
            raise HwnasError(f"architecture of space '{arch.space}' given to {self.name}")
        out = {}
        for tok in arch.text.split():
            key, _, val = tok.partition("=")
            out[key] = val
        return {d.key: out.get(d.key, d.labels[0]) for d in self.decisions}

    def values(self, arch: Arch) -> dict[str, Any]:
        """Decision key -> the architecture's value (an int, or a candidate name)."""
        return {k: self._value(self.by_key[k], v) for k, v in self.to_choices(arch).items()}

    def subnet_of(self, arch: Arch, weights: Sequence[Any] | None = None):
        """The :class:`hwnas.spaces.module.network.Subnet` of ``arch`` (with ``weights``, one
        tensor per decision, for the Choice mixtures of a supernet path)."""
        from hwnas.spaces.module.network import Subnet

        sub = Subnet()
        for d, v in zip(self.decisions, self.values(arch).values()):
            if d.kind == "width":
                sub.widths.update({gid: int(v) for gid in d.sites})
            elif d.kind == "kernel":
                sub.kernels.update({name: int(v) for name in d.sites})
            elif d.kind == "depth":
                sub.depths.update({path: int(v) for path in d.sites})
            else:
                sub.ops.update({path: ((d.values.index(v),), None) for path in d.sites})
        return sub

    # -- networks -------------------------------------------------------------------------------

    def dataset(self, name: str) -> DatasetSpec:
        if name != self._dataset.name:
            raise UnknownNameError("dataset", name, [self._dataset.name])
        return self._dataset

    def datasets(self) -> list[str]:
        return [self._dataset.name]

    def proxy_input_side(self, dataset: str) -> int:
        """The example input's last side: a user's model is trained, measured and shipped at
        the size it was made elastic at (16-pixel proxies measured another network's latency,
        and a flatten before a linear layer takes that size only)."""
        self.dataset(dataset)
        return int(self._dataset.input_shape[-1])

    def _check_classes(self, num_classes: int | None) -> None:
        if num_classes is not None and num_classes != self._dataset.num_classes:
            raise HwnasError(
                f"space '{self.name}': its network outputs {self._dataset.num_classes} classes, "
                f"not {num_classes} (change the model's classifier and make the space again)"
            )

    def subnet(self, arch: Arch, num_classes: int | None = None):
        """The standalone network of ``arch`` with the weights of the module the space was made
        from (an elastic model's trained weights: inherited), eval mode, float32. Input (B,
        *input_shape), output (B, classes) logits; its batch-norm statistics are the full
        network's (recalibrate with :func:`hwnas.loops.recalibrate_bn`).

        Raises:
            HwnasError: ``num_classes`` other than the model's.
        """
        from hwnas.spaces.module.network import extract

        self._check_classes(num_classes)
        if isinstance(arch, str):  # "w=8 op=a": the arch string, as space.parse reads it
            arch = self.parse(arch)
        if not isinstance(arch, Arch):
            raise HwnasError(
                f"{self.name}: subnet takes an Arch (space.parse('KEY=VALUE ...')) or an arch "
                f"string, got {type(arch).__name__}"
            )
        arch = self.parse(arch.text)
        net = extract(self.net, self.analysis, self.subnet_of(arch))
        net.hwnas_build = {  # how a zoo card rebuilds it (hwnas.zoo.load)
            "kind": "space",
            "space": self.name,
            "arch": arch.text,
            "dataset": self._dataset.name,
            "num_classes": self._dataset.num_classes,
        }
        return net

    def build(self, arch: Arch, dataset: str, num_classes: int | None = None):
        """The network of ``arch`` with freshly initialised weights (every layer's
        ``reset_parameters``, drawn from torch's global generator): what a random-weight export
        measures; :meth:`subnet` keeps the inherited weights.

        Raises:
            UnknownNameError: a dataset other than the space's.
            HwnasError: ``num_classes`` other than the model's.
        """
        import torch

        self.dataset(dataset)
        net = self.subnet(arch, num_classes)
        del net.hwnas_build
        with torch.no_grad():
            for m in net.modules():
                reset = getattr(m, "reset_parameters", None)
                if callable(reset):
                    reset()
        return net.eval()

    @property
    def reference_dataset(self) -> str:
        return self._dataset.name

    def reference_archs(self, n: int = 10) -> list[Arch]:
        """``n`` architectures spread from the smallest to the largest
        (:func:`hwnas.spaces.base.spread_archs`)."""
        keys = [d.key for d in self.decisions]
        return spread_archs(
            self,
            [d.labels for d in self.decisions],
            lambda chosen: self._arch({keys[i]: v for i, v in chosen.items()}),
            n,
        )

    def smallest(self) -> Arch:
        """Every decision's first (smallest) value."""
        return self._arch({d.key: d.labels[0] for d in self.decisions})

    def largest(self) -> Arch:
        """Every decision's last (largest) value: the whole module."""
        return self._arch({d.key: d.labels[-1] for d in self.decisions})

    def describe(self) -> dict[str, Any]:
        """Name, decisions and their sizes, what stayed fixed and why (for cards and
        ``hwnas spaces show``): ``fixed_widths`` maps each frozen channel group to why, named
        by the layer producing it, or, for one no layer produces (a grouped convolution
        changing the width), by the layer whose output it is."""
        size = 1.0
        for d in self.decisions:
            size *= len(d.values)
        kinds: dict[str, int] = {}
        for d in self.decisions:
            kinds[d.kind] = kinds.get(d.kind, 0) + 1
        fixed: dict[str, str] = {}
        for g in self.analysis.groups.values():
            if not g.frozen or g.frozen.startswith("the network's"):
                continue
            if g.producers:
                fixed[g.name] = g.frozen
            elif g.writer:  # the output of a layer that produces no group (a grouped conv)
                fixed.setdefault(g.writer, g.frozen)
        return {
            "name": self.name,
            "description": self.description,
            "decisions": len(self.decisions),
            "by_kind": kinds,
            "size": size,
            "inherited_weights": self.inherited,
            "input_shape": list(self._dataset.input_shape),
            "num_classes": self._dataset.num_classes,
            "fixed_widths": fixed,
        }


# -- making spaces ------------------------------------------------------------------------------


TASKS = (
    "image-classification",
    "audio-classification",
    "tabular-classification",
    "video-classification",
    "classification",
)
"""What a space made from a module may say its networks do (``task=``): Hugging Face's
pipeline tags of classifiers, or plain ``classification``."""


def module_space(
    model: Any,
    example_input: Any,
    *,
    name: str | None = None,
    dataset: str = "custom",
    description: str = "",
    widths: Sequence[float] | None = None,
    kernels: Sequence[int] | None = None,
    depth: bool = False,
    divisor: int = 8,
    order: bool = False,
    task: str | None = None,
) -> ModuleSpace:
    """The search space of ``model``'s subnets.

    Decisions: every :class:`hwnas.nn.ValueChoice` / :class:`hwnas.nn.Choice` /
    :class:`hwnas.nn.Repeat` the module declares, plus, when asked, widths, kernels and
    depths wherever they are safe (what :func:`elastic` asks for).

    Args:
        model: an ``nn.Module`` taking one float tensor and returning (batch, classes) logits;
            it is copied (later changes to it do not reach the space).
        example_input: a float tensor the model takes, (B, C, H, W) for images; its shape
            without the batch is the space's input shape.
        name: the space's name (letters, digits, ``_``, ``-``; default the model's class name
            in lower case).
        dataset: the name of what the networks are for (their input shape and classes).
        description: one line for cards.
        widths: ratios of each free channel group's width to offer (1.0 = the model's), or None.
        kernels: kernel sizes to offer (odd, at least 1), each on the depthwise convs whose
            trained kernel is larger, or None.
        depth: offer dropping the last blocks of every stage whose blocks keep their shape.
        divisor: widths are rounded to a multiple of this positive integer (groups narrower
            than twice it: 1).
        order: sort every elastic group's channels by importance first (trained weights).
        task: what the networks classify, for zoo cards: one of :data:`TASKS`
            (``audio-classification`` for a 1-D model of sounds); None: told by the input's
            rank (images, feature vectors; ``classification`` for other inputs).

    Raises:
        HwnasError: a bad argument, a model that cannot be traced or run on the input, an
            output that is not (batch, classes), a choice point that cannot be honoured, or
            no decision at all (each in one line naming the layer).
    """
    import torch
    from torch import nn

    from hwnas.spaces.module.analysis import analyse
    from hwnas.spaces.module.network import convert, order_channels
    from hwnas.spaces.module.transformer import make_traceable

    if not isinstance(model, nn.Module):
        raise HwnasError(f"expected a torch.nn.Module, got {type(model).__name__}")
    wrapped = _wrapper(model)
    if wrapped:
        raise HwnasError(wrapped)
    for what, given in (("name", name), ("dataset", dataset), ("description", description)):
        if given is not None and not isinstance(given, str):  # NAME.match(3): a TypeError
            raise HwnasError(f"{what} must be a string, got {type(given).__name__} {shown(given)}")
    label = name or type(model).__name__.lower()
    if not NAME.match(label):
        raise HwnasError(f"space name '{label}': use letters, digits, '_' and '-' only")
    if not NAME.match(dataset):
        raise HwnasError(f"dataset name '{dataset}': use letters, digits, '_' and '-' only")
    if task is not None and task not in TASKS:
        raise HwnasError(f"task {task!r}: one of {', '.join(TASKS)} (or None: from the input)")
    if not isinstance(example_input, torch.Tensor) or not example_input.is_floating_point():
        raise HwnasError(
            "example_input must be a float tensor, (batch, C, H, W) for images, (batch, C, L) "
            "for 1-D signals"
        )
    if example_input.dim() < 2 or example_input.shape[0] < 1:
        raise HwnasError(
            f"example_input needs a batch axis, got shape {tuple(example_input.shape)}"
        )
    widths, kernels = _check_elastic(widths, kernels, divisor)
    x = example_input[:1].detach().float().cpu()
    _check_consumed(model, label)
    model = make_traceable(copy.deepcopy(model).float().cpu())  # PyTorch's encoder layers
    try:
        _check_choices(model, x, label)
        analysis = analyse(model, x, label)
    except HwnasError:
        _check_batch_axis(model, example_input, label)  # (3, H, W): unbatched, say so
        raise
    if len(analysis.output_shape) != 2:
        raise HwnasError(
            f"{label}: the model returns {analysis.output_shape or 'no single tensor'}; hwnas "
            "searches networks returning (batch, classes) logits"
        )
    _check_exportable(model, x, label)
    decisions = _declared(model, analysis, x, label)
    taken_groups = {gid for d in decisions if d.kind == "width" for gid in d.sites}
    taken_convs = {c for d in decisions if d.kind == "kernel" for c in d.sites}
    taken_stages = {p for d in decisions if d.kind == "depth" for p in d.sites}
    modules = dict(model.named_modules())
    if widths:
        for gid, g in analysis.groups.items():
            if g.frozen or not g.producers or gid in taken_groups:
                continue
            values = _widths(g.size, widths, divisor, g.quantum)
            if len(values) > 1:
                decisions.append(_decision(f"{g.name}.w", "width", values, (gid,), analysis))
    if kernels:
        for conv, k in analysis.kernels.items():
            m = modules[conv]
            if conv in taken_convs or not (m.groups == m.in_channels == m.out_channels > 1):
                continue
            values = sorted({v for v in kernels if v % 2 == 1 and v < k} | {k})
            if len(values) > 1:
                decisions.append(_decision(f"{conv}.k", "kernel", values, (conv,), analysis))
    if depth:
        for path, stage in analysis.stages.items():
            if path in taken_stages:
                continue
            values = list(range(max(1, stage.first_droppable), len(stage.children) + 1))
            if len(values) > 1:
                decisions.append(_decision(f"{path}.d", "depth", values, (path,), analysis))
    if not decisions:
        raise HwnasError(f"{label}: {_nothing_elastic(analysis, widths, kernels, depth)}")
    seen: set[str] = set()
    for d in decisions:
        if d.key in seen:
            raise HwnasError(f"{label}: two decisions are called '{d.key}'; give them labels")
        seen.add(d.key)
    position = {layer: i for i, layer in enumerate(analysis.layers)}
    decisions.sort(key=lambda d: min((position.get(n, 10**9) for n in d.layers), default=10**9))
    groups = {gid for d in decisions if d.kind == "width" for gid in d.sites}
    convs = {c for d in decisions if d.kind == "kernel" for c in d.sites}
    stages = {p for d in decisions if d.kind == "depth" for p in d.sites}
    if order:
        order_channels(model, analysis, groups)
    net = convert(model, analysis, groups, convs, stages)
    classes = int(analysis.output_shape[1])
    spec = DatasetSpec(dataset, classes, tuple(int(s) for s in x.shape[1:]))  # type: ignore[arg-type]
    return ModuleSpace(
        label, net, analysis, decisions, spec, description, inherited=order, task=task
    )


def _check_exportable(model: Any, x: Any, label: str) -> None:
    """Export ``model`` (a copy, in eval mode) to ONNX once on ``x``: every subnet is measured
    and shipped as ONNX with a dynamic batch axis, and a model PyTorch's exporter refuses (a
    pooling kernel read from the input's size) failed only at the search's first measurement,
    in 150 lines of TorchScript IR.

    Raises:
        HwnasError: the exporter's refusal, in one line naming the space.
    """
    from hwnas.export import ExportError, export_onnx

    try:
        export_onnx(copy.deepcopy(model).eval(), tuple(x.shape), check=False)
    except ExportError as exc:
        raise HwnasError(f"{label}: {exc}") from None


@keyword_terms()
def elastic(
    model: Any,
    example_input: Any,
    *,
    name: str | None = None,
    dataset: str = "custom",
    description: str = "",
    widths: Sequence[float] | None = WIDTHS,
    kernels: Sequence[int] | None = KERNELS,
    depth: bool = True,
    divisor: int = 8,
    task: str | None = None,
) -> ModuleSpace:
    """The user's own model made a searchable supernet, its trained weights inherited.

    Channel widths (``widths`` of each channel group's trained width, the most important
    channels kept: the L1 norm of the weights producing and consuming each channel, ordered
    once), kernel sizes of depthwise convolutions (the centre of the trained kernel) and block
    depths (the first blocks of a stage kept, where the dropped ones are residual blocks that
    keep their input's shape: those ending an ``nn.Sequential`` / ``nn.ModuleList``, and in a
    flat stem-to-head list such as MobileNetV2's ``features`` each run of them after the block
    that changed the shape) become elastic wherever tracing shows it is safe: channel groups
    stay consistent across residual additions, multiplications and concatenations (NVIDIA
    ModelOpt FastNAS's dependency analysis; Once-for-All's elastic width, kernel and depth, Cai
    et al., ICLR 2020).
    What stays fixed, and why, is in :meth:`ModuleSpace.describe`.

    Args:
        model: the trained ``nn.Module`` (2-D or 1-D conv/bn/linear stacks, residual blocks,
            inverted residuals, a ViT's MLPs and blocks, ``nn.TransformerEncoder``); not
            modified.
        example_input: a float tensor the model takes (a batch of one is enough): (1, C, H, W)
            for images, (1, C, L) for a 1-D model.
        name, dataset, description, divisor, task: as for :func:`module_space`.
        widths: width ratios to offer (None: no elastic width).
        kernels: kernel sizes to offer (None: no elastic kernel).
        depth: offer shallower stages.

    Returns:
        A :class:`ModuleSpace` (register it with :func:`hwnas.spaces.register_space` to search
        it by name).

    Raises:
        HwnasError: a model that cannot be traced (one line naming the layer), that fails on
            the example input, whose output is not (batch, classes), or in which nothing can
            be made elastic.
    """
    return module_space(
        model,
        example_input,
        name=name,
        dataset=dataset,
        description=description,
        widths=widths,
        kernels=kernels,
        depth=depth,
        divisor=divisor,
        order=True,
        task=task,
    )


def _check_elastic(widths: Any, kernels: Any, divisor: Any) -> tuple[Any, Any]:
    """``widths``, ``kernels`` and ``divisor`` checked (the sequences as tuples, kernel sizes
    as ints).

    Raises:
        HwnasError: a width ratio outside (0, 1], a kernel size that is not an odd positive
            integer (a centre crop of an odd kernel is odd), a divisor that is not a positive
            integer, or a bare number for a sequence (one line each).
    """
    import numbers

    def integer(v: Any) -> bool:
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)

    if not integer(divisor) or divisor < 1:
        raise HwnasError(
            f"divisor must be a positive integer (widths a multiple of it), got {divisor!r}"
        )
    for what, given in (("widths", widths), ("kernels", kernels)):
        if given is not None and (
            isinstance(given, (str, bytes)) or not hasattr(given, "__iter__")
        ):
            raise HwnasError(f"{what} must be a list or tuple (or None), got {given!r}")
    if widths is not None:
        for r in widths:
            if isinstance(r, bool) or not isinstance(r, numbers.Real) or not 0 < float(r) <= 1:
                raise HwnasError(f"width ratios must be in (0, 1], got {r!r}")
        widths = tuple(widths)
    if kernels is not None:
        for k in kernels:
            if not integer(k) or k < 1 or k % 2 == 0:
                raise HwnasError(
                    f"kernel sizes must be odd positive integers (a smaller kernel is the centre "
                    f"of the trained one), got {k!r}"
                )
        kernels = tuple(int(k) for k in kernels)
    return widths, kernels


def _widths(size: int, ratios: Sequence[float], divisor: int, quantum: int = 1) -> list[int]:
    """The widths of a group of ``size`` channels: ``ratios`` of it rounded to a multiple of
    ``divisor`` and of ``quantum`` (the channels per group of a grouped convolution carrying
    it: whole groups only); of ``quantum`` alone for groups narrower than twice that."""
    from hwnas.spaces.ofa.model import make_divisible

    step = math.lcm(divisor, quantum)
    step = step if size >= 2 * step else quantum
    out = set()
    for r in ratios:
        if not 0 < float(r) <= 1:
            raise HwnasError(f"width ratios must be in (0, 1], got {r}")
        out.add(min(size, make_divisible(size * float(r), step)))
    out.add(size)
    return sorted(out)


def _decision(key, kind, values, sites, analysis) -> Decision:
    layers: list[str] = []
    for s in sites:
        if kind == "width":
            g = analysis.groups[s]
            layers += g.producers + g.carriers + [c for c, _ in g.consumers + g.spread]
        elif kind == "depth":  # the layers of the blocks it counts
            blocks = tuple(c + "." for c in analysis.stages[s].children)
            layers += [n for n in analysis.layers if (n + ".").startswith(blocks)]
        else:
            layers.append(s)
            layers += [n for n in analysis.layers if n.startswith(s + ".")]
    return Decision(key, kind, tuple(values), tuple(sites), tuple(dict.fromkeys(layers)))


def _declared(model, analysis, x, label: str) -> list[Decision]:
    """The decisions the module declares with hwnas.nn choice points."""
    from torch import nn

    from hwnas.spaces.module.choices import Repeat, ValueChoice

    modules = dict(model.named_modules())
    found: dict[str, dict[str, Any]] = {}

    def add(key: str, kind: str, vc_values, site, where: str) -> None:
        entry = found.setdefault(key, {"kind": kind, "values": vc_values, "sites": [], "at": where})
        if entry["kind"] != kind or tuple(entry["values"]) != tuple(vc_values):
            raise HwnasError(
                f"{label}: '{where}' and '{entry['at']}' use the label '{key}' for different "
                f"choices ({kind} {list(vc_values)} vs {entry['kind']} {list(entry['values'])})"
            )
        if site not in entry["sites"]:
            entry["sites"].append(site)

    group_of = {}
    for gid, g in analysis.groups.items():
        for p in g.producers + g.carriers:  # a depthwise conv carries its input's width
            group_of[p] = gid
    honoured: set[tuple[str, str]] = set()  # (layer, attribute) made a decision
    sized: dict[int, tuple[ValueChoice, str]] = {}  # group -> the first width on it, its layer
    convs = (nn.Conv1d, nn.Conv2d)
    for path, m in modules.items():
        out = getattr(m, "out_channels", None) if isinstance(m, convs) else None
        if isinstance(m, nn.Linear):
            out = m.out_features
        if isinstance(out, ValueChoice):
            gid = group_of.get(path)
            if gid is None:
                raise HwnasError(
                    f"{label}: '{path}' ({type(m).__name__}): its width {out!r} cannot be "
                    "searched: hwnas slices plain nn.Conv1d / nn.Conv2d (groups 1, depthwise, or "
                    "grouped keeping their width) and nn.Linear layers only"
                )
            g = analysis.groups[gid]
            if g.frozen:
                raise HwnasError(
                    f"{label}: '{path}': its width {out!r} cannot be searched: {g.frozen}"
                )
            if any(v % g.quantum for v in out.values):
                raise HwnasError(
                    f"{label}: '{path}': its widths {list(out.values)} must be multiples of "
                    f"{g.quantum}, the channels per group of the grouped convolutions carrying "
                    "them (whole groups are kept or dropped)"
                )
            attr = "out_features" if isinstance(m, nn.Linear) else "out_channels"
            first, at = sized.setdefault(gid, (out, path))
            if first.origin is not out.origin and not (out.label and out.label == first.label):
                raise HwnasError(
                    f"{label}: '{path}' ({type(m).__name__}): its {attr} {out!r} cannot be "
                    f"searched: its channels are tied to those of '{at}' "
                    f"({type(modules[at]).__name__}), sized by {first!r} (added or multiplied "
                    "together in forward, they have one width): give both layers the same "
                    "ValueChoice"
                )
            add(out.label or f"{g.name}.w", "width", out.values, gid, path)
            honoured.add((path, attr))
        if isinstance(m, convs) and isinstance(m.kernel_size[0], ValueChoice):
            vc = m.kernel_size[0]
            if path not in analysis.kernels:
                why = analysis.kernel_why.get(path, f"it is not a plain nn.{type(m).__name__}")
                raise HwnasError(f"{label}: '{path}': its kernel {vc!r} cannot be searched: {why}")
            bad = [v for v in vc.values if v % 2 == 0]
            if bad:
                raise HwnasError(f"{label}: '{path}': kernel sizes must be odd, got {bad}")
            add(vc.label or f"{path}.k", "kernel", vc.values, path, path)
            if all(k is vc for k in m.kernel_size):
                honoured.add((path, "kernel_size"))
        if type(m) is Repeat and isinstance(m.depth, ValueChoice):
            stage = analysis.stages.get(path)
            least = min(m.depth.values)
            if stage is None or least < max(1, stage.first_droppable):
                why = stage.why if stage is not None else "its blocks change their input's shape"
                raise HwnasError(
                    f"{label}: '{path}': depth {m.depth!r} needs its blocks from {least} on to "
                    f"keep their input's shape: {why or 'they do not'}"
                )
            add(m.depth.label or f"{path}.d", "depth", m.depth.values, path, path)
            honoured.add((path, "depth"))
    _check_value_choices(modules, analysis, found, honoured, group_of, label)
    for path in analysis.choices:
        m = modules[path]
        add(m.label or f"{path}.op", "op", m.names, path, path)
    return [
        _decision(key, e["kind"], e["values"], tuple(e["sites"]), analysis)
        for key, e in found.items()
    ]


SEARCHED = (
    "hwnas searches a ValueChoice only as the out_channels or kernel_size of an nn.Conv1d or "
    "nn.Conv2d, the out_features of an nn.Linear (the in_channels, in_features or num_features "
    "of the layers taking those channels may be the same ValueChoice) and the depth of a Repeat"
)
"""Where a :class:`hwnas.nn.ValueChoice` is honoured, for messages."""
_TAKERS = {"in_channels", "in_features"}
"""Attributes of a convolution or linear layer sizing the channels it takes."""
_CARRIED = {"num_features", "normalized_shape", "num_parameters", "groups", "out_channels",
            "in_channels"}  # fmt: skip
"""Attributes of a layer carrying a channel group (a batch or layer norm, a PReLU, a
depthwise convolution) that its width sizes."""


def _value_choices(value: Any, depth: int = 0) -> list:
    """The :class:`ValueChoice` objects in an attribute's value (in tuples and lists too)."""
    from hwnas.spaces.module.choices import ValueChoice

    if isinstance(value, ValueChoice):
        return [value]
    if isinstance(value, (tuple, list)) and depth < 3:
        return [vc for v in value for vc in _value_choices(v, depth + 1)]
    return []


def _check_consumed(model, label: str) -> None:
    """Every :class:`ValueChoice` made while one of ``model``'s modules was being constructed
    is still held by a module of it (a layer's argument, a :class:`Repeat`'s depth, an
    attribute): one that is not was consumed as a plain number (``range(depth)``, ``[b] *
    depth``, only ever used as ``width * 4``), so the model holds its largest value and no
    decision, and the search would silently not search it.

    Raises:
        HwnasError: one line naming the ValueChoice and the module that made it.
    """
    from hwnas.spaces.module.choices import MADE_IN

    held = {
        id(c)
        for m in model.modules()
        for v in vars(m).values()
        for vc in _value_choices(v)
        for c in (vc, vc.origin)  # a Repeat's copy of a block holds its choices' copies
    }
    for m in model.modules():
        for vc in MADE_IN.get(m, ()):
            if id(vc) not in held:
                raise HwnasError(
                    f"{label}: {vc!r}, made in {type(m).__name__}.__init__, is in no layer of the "
                    "model: it was used as a plain number (range(), [block] * n, only in "
                    "arithmetic such as width * 4), which leaves nothing to search; use "
                    "hwnas.nn.Repeat(block, depth) for a number of blocks, give the ValueChoice "
                    "itself to a layer (out_channels, kernel_size), or a plain int to fix it"
                )


def _check_value_choices(modules, analysis, found, honoured, group_of, label: str) -> None:
    """Every :class:`ValueChoice` an attribute of a module holds (a constructor argument) is a
    decision: one hwnas made (``honoured``), the size of channels whose width is that decision
    (a batch norm's ``num_features``, the ``in_channels`` of the layer taking them), or, in the
    user's own modules, the same object or label as one.

    Raises:
        HwnasError: a ValueChoice nothing searches (a stride, a pooling kernel, an attention's
            heads, ...): one line naming the layer and the argument.
    """
    from torch import nn

    widths: dict[int, tuple] = {}
    used: list = []
    for e in found.values():
        if e["kind"] == "width":
            widths.update({gid: tuple(e["values"]) for gid in e["sites"]})
    for path, attr in honoured:
        used += _value_choices(getattr(modules[path], attr))

    def pytorchs(m) -> bool:  # one of PyTorch's own layers
        return type(m).__module__.startswith("torch.")

    for path, m in sorted(modules.items(), key=lambda pm: not pytorchs(pm[1])):  # theirs first
        ours = pytorchs(m)
        where = f"'{path}' ({type(m).__name__})" if path else f"the model ({type(m).__name__})"
        for attr, value in vars(m).items():
            vcs = _value_choices(value)
            if not vcs or (path, attr) in honoured or (ours and attr.startswith("_")):
                continue
            vc = vcs[0]
            if not ours:  # the user's module keeps it: fine where it is a decision
                if any(vc is u for u in used) or (
                    vc.label in found and tuple(found[vc.label]["values"]) == vc.values
                ):
                    continue
                raise HwnasError(
                    f"{label}: {where}: its attribute '{attr}' holds {vc!r}, which is no "
                    f"decision: {SEARCHED}"
                )
            gid = None
            segments = analysis.layer_in.get(path, [])
            if attr in _TAKERS and isinstance(m, (nn.Conv1d, nn.Conv2d, nn.Linear)):
                gid = segments[0][0] if len(segments) == 1 else None
            elif attr in _CARRIED and path in group_of and path not in analysis.layer_out:
                gid = group_of[path]  # a norm, a PReLU, a depthwise conv: carries the group
            elif attr not in _TAKERS | _CARRIED or not isinstance(
                m, (nn.Conv1d, nn.Conv2d, nn.Linear, nn.BatchNorm1d, nn.BatchNorm2d,
                    nn.LayerNorm, nn.PReLU)
            ):  # fmt: skip
                raise HwnasError(
                    f"{label}: {where}: its {attr} {vc!r} cannot be searched: {SEARCHED}"
                )
            if gid is not None and widths.get(gid) == vc.values:
                used.append(vc)
                continue
            have = widths.get(gid) if gid is not None else None
            why = (
                f"the channels it takes are searched among {list(have)}, not {list(vc.values)}"
                if have
                else "the channels it takes have no width decision (give the same ValueChoice "
                "to the out_channels or out_features of the layer producing them)"
            )
            raise HwnasError(f"{label}: {where}: its {attr} {vc!r} cannot be searched: {why}")


def _wrapper(model) -> str:
    """Why ``model`` is a wrapper to unwrap first ("" when it is not): ``nn.DataParallel``,
    ``DistributedDataParallel`` and ``torch.compile``'s module run another module's forward,
    which torch.fx does not see through; a TorchScript module has no Python forward."""
    kind = type(model).__name__
    if kind in ("DataParallel", "DistributedDataParallel") and hasattr(model, "module"):
        return (
            f"got an nn.{kind}: pass the model it wraps, its .module (hwnas.elastic(model.module, "
            "example_input))"
        )
    if kind == "OptimizedModule" and hasattr(model, "_orig_mod"):
        return (
            "got a torch.compile'd model: pass the model before torch.compile, its ._orig_mod "
            "(hwnas.elastic(model._orig_mod, example_input))"
        )
    if kind in ("RecursiveScriptModule", "TopLevelTracedModule", "ScriptModule"):
        return (
            "got a TorchScript module (torch.jit.script or torch.jit.trace): pass the "
            "nn.Module it was made from"
        )
    return ""


def _check_batch_axis(model, example_input, label: str) -> None:
    """After the analysis failed: where the model fails on ``example_input[:1]`` and runs on
    ``example_input`` with a batch axis added, the input was unbatched (an image (C, H, W)).

    Raises:
        HwnasError: the input needs a batch axis (one line, the shape given).
    """
    import torch

    shape = tuple(example_input.shape)
    x = example_input.detach().float().cpu()
    with torch.no_grad():
        try:
            model.eval()(x[:1])
            return  # it runs: the analysis failed for another reason
        except Exception:
            pass
        try:
            model(x[None])
        except Exception:
            return
    raise HwnasError(
        f"{label}: example_input has shape {shape}, without a batch axis (hwnas reads the first "
        f"axis as the batch): pass example_input.unsqueeze(0), of shape {(1, *shape)}"
    )


def _check_choices(model, x, label: str) -> None:
    """Every :class:`hwnas.nn.Choice`'s candidates run on its input and give one shape.

    Raises:
        HwnasError: a candidate fails on the input, or candidates' shapes differ.
    """
    import torch

    from hwnas.spaces.module.choices import Choice

    modules = dict(model.named_modules())
    paths = [p for p, m in modules.items() if isinstance(m, Choice)]
    if not paths:
        return
    inputs: dict[str, torch.Tensor] = {}
    hooks = [
        modules[p].register_forward_pre_hook(
            lambda _m, a, p=p: inputs.__setitem__(p, a[0]) if a else None
        )
        for p in paths
    ]
    try:
        with torch.no_grad():
            model.eval()(x)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise HwnasError(
            f"{label}: the model fails on the example input of shape {tuple(x.shape)}: {first}"
        ) from None
    finally:
        for h in hooks:
            h.remove()
    for path in paths:
        m = modules[path]
        if path not in inputs:
            raise HwnasError(f"{label}: Choice '{path}' is not called in forward")
        shapes = []
        for cname, cand in zip(m.names, m.candidates):
            try:
                with torch.no_grad():
                    shapes.append((cname, tuple(cand.eval()(inputs[path]).shape)))
            except Exception as exc:
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise HwnasError(
                    f"{label}: Choice '{path}': candidate '{cname}' fails on its input: {first}"
                ) from None
        if len({s for _, s in shapes}) > 1:
            listed = ", ".join(f"{n} -> {s}" for n, s in shapes)
            raise HwnasError(
                f"{label}: Choice '{path}': candidates give different shapes ({listed})"
            )


def _nothing_elastic(analysis, widths, kernels, depth) -> str:
    if not (widths or kernels or depth):
        return (
            "the module declares no choice point (hwnas.nn.Choice, ValueChoice, Repeat); use "
            "hwnas.elastic to make its widths, kernels and depths elastic"
        )
    reasons = sorted(
        {
            g.frozen
            for g in analysis.groups.values()
            if g.frozen and g.producers and not g.frozen.startswith("the network's")
        }
    )
    why = f"; channel groups stay fixed because {'; '.join(reasons[:3])}" if reasons else ""
    return f"nothing can be made elastic (no free channel group, kernel or stage){why}"


__all__ = ["Decision", "ModuleSpace", "elastic", "module_space"]
