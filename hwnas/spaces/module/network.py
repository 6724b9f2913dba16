"""Running a user's module as a supernet, and cutting standalone subnets out of it.

:func:`convert` makes a copy of the module whose layers can run any subnet: the plain layers of
elastic channel groups become the sliceable layers of :mod:`hwnas.spaces.slicing` (by changing
their class, so parameter names and values stay), the blocks that can be dropped learn to pass
their input through. :func:`configure` sets one subnet (widths per group, kernel per conv,
depth per stage, operation per :class:`hwnas.nn.Choice`) before a forward; :func:`extract`
returns the subnet as an ordinary module (plain ``nn.Conv2d`` etc. of the subnet's sizes, the
dropped blocks gone, each Choice replaced by its candidate) with the weights sliced out of the
supernet's: the first channels of every group, the centre of every kernel (Once-for-All, Cai et
al., ICLR 2020). :func:`order_channels` sorts each group's channels by importance (L1 norm of the
weights producing and consuming them) once, so that the first channels are the most important
ones (OFA's channel sorting; ModelOpt FastNAS's importance ordering), without changing what the
full network computes.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from hwnas.spaces.module.analysis import Analysis
from hwnas.spaces.slicing import DBN, DBN1d, DConv, DConv1d, DLayerNorm, DLinear, DPReLU


class _ElasticConv:
    """A convolution of a supernet (before :class:`DConv` / :class:`DConv1d` in its bases):
    runs at the width, kernel and input channels :func:`configure` set."""

    hw_out: int | None = None
    hw_kernel: int | None = None
    hw_index: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x, self.hw_out, self.hw_kernel, self.hw_index)


class ElasticConv2d(_ElasticConv, DConv):
    """A ``nn.Conv2d`` of a supernet (:class:`_ElasticConv`)."""


class ElasticConv1d(_ElasticConv, DConv1d):
    """A ``nn.Conv1d`` of a supernet (:class:`_ElasticConv`)."""


class ElasticLinear(DLinear):
    """A ``nn.Linear`` of a supernet: runs at the width and input features :func:`configure`
    set."""

    hw_out: int | None = None
    hw_index: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return DLinear.forward(self, x, self.hw_out, self.hw_index)


ELASTIC = {nn.Conv2d: ElasticConv2d, nn.Conv1d: ElasticConv1d, nn.Linear: ElasticLinear,
           nn.BatchNorm2d: DBN, nn.BatchNorm1d: DBN1d, nn.LayerNorm: DLayerNorm,
           nn.PReLU: DPReLU}  # fmt: skip
"""Plain layer type -> its sliceable type (the same parameters and buffers)."""
PLAIN = {sliceable: plain for plain, sliceable in ELASTIC.items()}
"""Sliceable type -> the plain layer type a subnet gets."""

_SKIPPABLE: dict[type, type] = {}
_SLICED_PARAMS: dict[tuple[type, tuple[tuple[str, int], ...]], type] = {}


def sliced_params(cls: type, params: tuple[tuple[str, int], ...]) -> type:
    """``cls`` whose raw parameters or buffers ``params`` ((name, channel axis), read in its
    forward: a class token, a layer scale) read as their first ``hw_widths[name]`` channels
    on that axis (all of them where it is None). They stay registered under their names, so
    the state dict and the optimiser see the whole tensors."""
    key = (cls, params)
    if key not in _SLICED_PARAMS:

        def reader(name: str, axis: int) -> property:
            def get(self):
                t = self._parameters[name] if name in self._parameters else self._buffers[name]
                n = self.hw_widths.get(name)
                return t if n is None or n == t.shape[axis] else t.narrow(axis, 0, n)

            return property(get)

        attrs = {name: reader(name, axis) for name, axis in params}
        _SLICED_PARAMS[key] = type(cls.__name__, (cls,), {**attrs, "hw_plain": cls})
    return _SLICED_PARAMS[key]


def _owner(net: nn.Module, target: str) -> tuple[nn.Module | None, str]:
    """The module holding the parameter ``target`` and its name there (None when the module
    is gone: a dropped block's)."""
    path, _, name = target.rpartition(".")
    try:
        return (net.get_submodule(path) if path else net), name
    except AttributeError:
        return None, name


def skippable(cls: type) -> type:
    """``cls`` with a forward that returns its input when the block is dropped."""
    if cls not in _SKIPPABLE:

        def forward(self, x, *args, **kwargs):
            if self.hw_skip:
                return x
            return cls.forward(self, x, *args, **kwargs)

        _SKIPPABLE[cls] = type(
            cls.__name__, (cls,), {"forward": forward, "hw_skip": False, "hw_plain": cls}
        )
    return _SKIPPABLE[cls]


@dataclass
class Subnet:
    """One subnet: what :func:`configure` sets.

    Attributes:
        widths: group id -> channels (groups not named keep their full width).
        kernels: conv name -> kernel size.
        depths: stage path -> blocks that run.
        ops: Choice name -> (active candidate indices, their weights or None).
    """

    widths: dict[int, int] = field(default_factory=dict)
    kernels: dict[str, int] = field(default_factory=dict)
    depths: dict[str, int] = field(default_factory=dict)
    ops: dict[str, tuple[tuple[int, ...], Any]] = field(default_factory=dict)


def convert(model: nn.Module, analysis: Analysis, groups: set[int], kernels: set[str],
            stages: set[str]) -> nn.Module:  # fmt: skip
    """A copy of ``model`` that can run every subnet (see the module doc).

    Args:
        model: the user's module (not modified).
        analysis: its analysis.
        groups: the elastic channel groups.
        kernels: the convolutions with an elastic kernel.
        stages: the containers with an elastic depth.
    """
    net = copy.deepcopy(model)
    modules = dict(net.named_modules())
    owned: dict[str, list[tuple[str, int]]] = {}
    for gid in groups:
        for target, axis in analysis.groups[gid].params:
            path, _, name = target.rpartition(".")
            owned.setdefault(path, []).append((name, axis))
    for path, params in owned.items():
        m = modules[path]
        m.__class__ = sliced_params(type(m), tuple(sorted(params)))
        m.hw_widths = {}
    for name in _sliced_layers(analysis, groups) | kernels:
        m = modules[name]
        m.__class__ = ELASTIC[type(m)]
    for path in stages:
        stage = analysis.stages[path]
        for child in stage.children[max(1, stage.first_droppable) :]:
            m = modules[child]
            m.__class__ = skippable(type(m))
    return net


def _sliced_layers(analysis: Analysis, groups: set[int]) -> set[str]:
    out: set[str] = set()
    for gid in groups:
        g = analysis.groups[gid]
        out.update(g.producers)
        out.update(g.carriers)
        out.update(name for name, _ in g.consumers + g.spread)
    return out


def _active(analysis: Analysis, sub: Subnet, segments: list[tuple[int, int]]) -> list[int]:
    return [sub.widths.get(gid, size) for gid, size in segments]


def _index(segments: list[tuple[int, int]], active: list[int]) -> torch.Tensor | None:
    """Input channels of a layer fed by a concatenation, or None when they are a prefix."""
    if len(segments) == 1 or all(a == s for (_, s), a in zip(segments, active)):
        return None
    parts, offset = [], 0
    for (_, size), a in zip(segments, active):
        parts.append(torch.arange(offset, offset + a))
        offset += size
    return torch.cat(parts)


def configure(net: nn.Module, analysis: Analysis, sub: Subnet) -> None:
    """Set ``net`` (from :func:`convert`) to compute the subnet ``sub``."""
    from hwnas.spaces.module.choices import Choice

    modules = dict(net.named_modules())
    for name, m in modules.items():
        if isinstance(m, (_ElasticConv, ElasticLinear, DBN, DBN1d)):  # inputs that run
            segments = analysis.layer_in.get(name, [])
            index = _index(segments, _active(analysis, sub, segments)) if segments else None
            m.hw_index = index.to(m.weight.device) if index is not None else None
        if isinstance(m, (_ElasticConv, ElasticLinear)):
            gid = analysis.layer_out.get(name)
            m.hw_out = sub.widths.get(gid) if gid is not None else None
            if isinstance(m, _ElasticConv):
                m.hw_kernel = sub.kernels.get(name)
    for gid, g in analysis.groups.items():
        for target, _axis in g.params:
            owner, name = _owner(net, target)
            if owner is not None and hasattr(owner, "hw_widths"):
                owner.hw_widths[name] = sub.widths.get(gid)
    for path, d in sub.depths.items():
        stage = analysis.stages[path]
        first = max(1, stage.first_droppable)  # the blocks before may be another stage's
        for i, child in enumerate(stage.children[first:], first):
            m = modules[child]
            if hasattr(m, "hw_skip"):
                m.hw_skip = i >= d
    for path, (active, weights) in sub.ops.items():
        m = modules[path]
        assert isinstance(m, Choice)
        m.active, m.weights = tuple(active), weights


class DroppedBlock(nn.Identity):
    """A block the subnet drops, in its place: returns its first input (``forward(x, *args,
    **kwargs)``, as a transformer layer is called with masks), as the supernet's skipped block
    does. Its place is kept because a model's ``forward`` may reach its blocks by position."""

    def forward(self, x, *args, **kwargs):
        return x


@torch.no_grad()
def extract(net: nn.Module, analysis: Analysis, sub: Subnet) -> nn.Module:
    """The subnet ``sub`` of ``net`` (from :func:`convert`) as an ordinary module with the
    weights sliced out of ``net``'s (a copy, eval mode).

    Raises:
        ValueError: a Choice with several active candidates (a mixture is no subnet).
    """
    from hwnas.spaces.module.choices import Choice, Repeat

    mixtures = [(m, m.weights) for m in net.modules() if isinstance(m, Choice)]
    for m, _ in mixtures:  # a supernet path's weights carry gradients: not copied
        m.weights = None
    try:
        out = copy.deepcopy(net)
    finally:
        for m, w in mixtures:
            m.weights = w
    modules = dict(out.named_modules())

    def replace(name: str, new: nn.Module) -> None:
        parent, _, child = name.rpartition(".")
        setattr(out.get_submodule(parent) if parent else out, child, new)

    for name, m in modules.items():
        if type(m) in PLAIN:
            replace(name, _plain(name, m, analysis, sub))
    for path, depth in sub.depths.items():
        # a dropped block becomes an identity in its place, as the supernet skips it: the
        # user's forward may reach the container's blocks by position (``blocks[i]`` for i in
        # range(4), ``blocks[-1]``), which deleting them would shift or break
        for child in analysis.stages[path].children[depth:]:
            replace(child, DroppedBlock())
    for gid, g in analysis.groups.items():  # raw parameters: their first channels, as such
        for target, axis in g.params:
            owner, name = _owner(out, target)
            n = sub.widths.get(gid)
            if owner is None or n is None or isinstance(owner, DroppedBlock):
                continue
            if name in owner._parameters:
                p = owner._parameters[name]
                owner._parameters[name] = nn.Parameter(p.narrow(axis, 0, n).clone(),
                                                       requires_grad=p.requires_grad)  # fmt: skip
            else:
                owner._buffers[name] = owner._buffers[name].narrow(axis, 0, n).clone()
    for m in list(out.modules()):
        while "hw_plain" in type(m).__dict__:  # a dropped block's, a raw parameter owner's
            m.__class__ = type(m).__dict__["hw_plain"]
        m.__dict__.pop("hw_skip", None)
        m.__dict__.pop("hw_widths", None)
    for name, m in list(out.named_modules()):  # outermost first: inner names stay valid
        if isinstance(m, Choice):
            active, _ = sub.ops.get(name, (m.active, None))
            if len(active) != 1:
                raise ValueError(f"Choice '{name}' has {len(active)} active candidates")
            replace(name, m.candidates[active[0]])
    for name, m in list(out.named_modules()):
        if type(m) is Repeat:
            replace(name, nn.Sequential(*m))
    return out.eval()


def _plain(name: str, m: nn.Module, analysis: Analysis, sub: Subnet) -> nn.Module:
    """The plain layer of ``m`` at the subnet's sizes, with ``m``'s weights sliced."""
    segments = analysis.layer_in.get(name, [])
    active = _active(analysis, sub, segments)
    index = _index(segments, active)
    n_in = sum(active) if segments else None
    gid = analysis.layer_out.get(name)
    if isinstance(m, _ElasticConv):
        k_full = m.kernel_size[0]
        k = sub.kernels.get(name, k_full)
        lo = (k_full - k) // 2
        w = m.weight[(slice(None), slice(None)) + (slice(lo, lo + k),) * (m.weight.dim() - 2)]
        grouped = m.groups > 1 and m.in_channels == m.out_channels  # depthwise too
        pad = m.padding if k == k_full else (k // 2,) * (m.weight.dim() - 2)
        if grouped:  # whole groups of its input's channels (a carrier of their group)
            c = n_in if n_in is not None else m.in_channels
            w, c_in, c_out, groups = w[:c], c, c, c // (m.in_channels // m.groups)
        elif m.groups > 1:  # changes the width: its groups stay whole (frozen)
            c_in, c_out, groups = m.in_channels, m.out_channels, m.groups
        else:
            c_out = sub.widths.get(gid, m.out_channels) if gid is not None else m.out_channels
            w = w[:c_out]
            w = w.index_select(1, index) if index is not None else w[:, : n_in or m.in_channels]
            c_in, groups = w.shape[1], 1
        new = PLAIN[type(m)](
            c_in, c_out, k, m.stride, pad, m.dilation, groups, m.bias is not None,
            m.padding_mode,
        )  # fmt: skip
        new.weight.copy_(w)
        if m.bias is not None:
            new.bias.copy_(m.bias[:c_out])
        return new
    if isinstance(m, ElasticLinear):
        c_out = sub.widths.get(gid, m.out_features) if gid is not None else m.out_features
        w = m.weight[:c_out]
        w = w.index_select(1, index) if index is not None else w[:, : n_in or m.in_features]
        new = nn.Linear(w.shape[1], c_out, m.bias is not None)
        new.weight.copy_(w)
        if m.bias is not None:
            new.bias.copy_(m.bias[:c_out])
        return new
    n = n_in if n_in is not None else m.weight.shape[0]
    if isinstance(m, DPReLU):
        new = nn.PReLU(n)
        new.weight.copy_(m.weight[:n])
        return new
    if isinstance(m, (DBN, DBN1d)):  # its first channels, or a concatenation's active ones
        new = PLAIN[type(m)](n, m.eps, m.momentum, m.affine, m.track_running_stats)
        keep = index.to(m.weight.device) if index is not None else torch.arange(n)
        if m.affine:
            new.weight.copy_(m.weight[keep])
            new.bias.copy_(m.bias[keep])
        if m.track_running_stats:
            new.running_mean.copy_(m.running_mean[keep])
            new.running_var.copy_(m.running_var[keep])
            new.num_batches_tracked.copy_(m.num_batches_tracked)
        return new
    new = nn.LayerNorm(n, m.eps, m.elementwise_affine, bias=m.bias is not None)
    if m.elementwise_affine:
        new.weight.copy_(m.weight[:n])
        if m.bias is not None:
            new.bias.copy_(m.bias[:n])
    return new


@torch.no_grad()
def order_channels(net: nn.Module, analysis: Analysis, groups: set[int]) -> None:
    """Sort the channels of every group in ``groups`` by importance, most important first, in
    place: the L1 norm of the weights that produce each channel plus that of the weights that
    consume it (each layer's share normalised to mean 1). What the full network computes does
    not change (every layer holding the channels is permuted alike)."""
    modules = dict(net.named_modules())
    for gid in sorted(groups):
        g = analysis.groups[gid]
        score = torch.zeros(g.size, dtype=torch.float64)
        for name in g.producers:
            w = modules[name].weight.detach().double()
            v = w.abs().reshape(g.size, -1).mean(1)
            score += v / v.mean().clamp_min(1e-12)
        for name, off in g.consumers:
            w = modules[name].weight.detach().double()[:, off : off + g.size]
            v = w.abs().transpose(0, 1).reshape(g.size, -1).mean(1)
            score += v / v.mean().clamp_min(1e-12)
        q = g.quantum  # a grouped convolution's groups move whole, in their own order
        blocks = torch.argsort(score.reshape(-1, q).sum(1), descending=True, stable=True)
        perm = (blocks[:, None] * q + torch.arange(q)).reshape(-1)
        for name in g.producers + g.carriers:
            m = modules[name]
            for key in ("weight", "bias", "running_mean", "running_var"):
                t = getattr(m, key, None)
                if isinstance(t, torch.Tensor) and t.dim() >= 1 and t.shape[0] == g.size:
                    t.copy_(t[perm])
        for name, off in g.consumers:
            w = modules[name].weight
            w[:, off : off + g.size] = w[:, off : off + g.size][:, perm]
        for target, axis in g.params:  # ``net`` is the plain model: attributes read whole
            owner, name = _owner(net, target)
            t = getattr(owner, name)
            t.copy_(t.index_select(axis, perm))
        for name, off in g.spread:  # a batch norm over a concatenation: its share of channels
            m = modules[name]
            for key in ("weight", "bias", "running_mean", "running_var"):
                t = getattr(m, key, None)
                if isinstance(t, torch.Tensor):
                    t[off : off + g.size] = t[off : off + g.size][perm]
