"""Sliceable layers: the weight-sharing primitives of every supernet built from ordinary layers.

A layer here is an ordinary ``nn.Conv2d`` / ``nn.Conv1d`` / ``nn.BatchNorm2d`` /
``nn.BatchNorm1d`` / ``nn.Linear`` / ``nn.LayerNorm`` / ``nn.PReLU`` that can also run on its
*first* input/output channels and, for a convolution, on the centre of its kernel (Once-for-All, Cai
et al., ICLR 2020; AutoFormer's weight entanglement, Chen et al., ICCV 2021; Single-Path NAS's
superkernel, Stamoulis et al., 2019). At full size each calls the plain layer's forward, so a
network of them exports to ONNX as ordinary layers. Declared spaces
(:mod:`hwnas.spaces.declared.modules`) and spaces made from a user's own module
(:mod:`hwnas.spaces.module`) both build on them.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def _sliced_conv(conv: nn.Conv1d | nn.Conv2d, x, out, kernel, index, fn) -> torch.Tensor:
    """``conv`` run on ``x``'s channels, at ``out`` output channels and the centre ``kernel``
    of its kernel (see :meth:`DConv.forward`), with ``fn`` (``F.conv2d`` or ``F.conv1d``)."""
    c_in, k_full = x.shape[1], conv.kernel_size[0]
    out = out or conv.out_channels
    k = kernel or k_full
    w = conv.weight
    if conv.groups > 1 and conv.in_channels == conv.out_channels:  # depthwise or grouped
        per_group = conv.in_channels // conv.groups  # a grouped one keeps whole groups
        w, groups, out = w[:c_in], c_in // per_group, c_in
    elif conv.groups == 1:
        w, groups = w[:out], 1
        w = w[:, :c_in] if index is None else w.index_select(1, index)
    else:  # groups changing the width (a channel multiplier): run whole
        if c_in != conv.in_channels:
            raise RuntimeError("a grouped convolution changing the width runs at full size only")
        w, groups, out = w, conv.groups, conv.out_channels
    if k != k_full:
        lo = (k_full - k) // 2
        w = w[(slice(None), slice(None)) + (slice(lo, lo + k),) * (w.dim() - 2)]
    pad = k // 2 if conv.padding[0] == k_full // 2 else conv.padding
    bias = conv.bias[:out] if conv.bias is not None else None
    return fn(x, w, bias, conv.stride, pad, conv.dilation, groups)


class _SlicedConv:
    """The forward of :class:`DConv` and :class:`DConv1d` (before ``nn.ConvNd`` in their
    bases): the plain layer's at full size, else :func:`_sliced_conv` with ``_conv``."""

    _conv: Any

    def forward(
        self,
        x: torch.Tensor,
        out: int | None = None,
        kernel: int | None = None,
        index: torch.Tensor | None = None,
    ):
        """(B, c_in, ...) -> (B, out, ...); ``kernel``: the centre k (x k) of the kernel;
        ``index``: the weight's input channels that ``x``'s channels are, in order (an input
        concatenated from several sliced tensors), instead of the first ``c_in``."""
        k_full = self.kernel_size[0]
        full = (
            index is None
            and x.shape[1] == self.in_channels
            and (out or self.out_channels) == self.out_channels
            and (kernel or k_full) == k_full
        )
        if full:
            return super().forward(x)
        return _sliced_conv(self, x, out, kernel, index, self._conv)


class DConv(_SlicedConv, nn.Conv2d):
    """A convolution runnable on its first input/output channels and its centre kernel:
    (B, c_in, H, W) -> (B, out, H', W') (:meth:`_SlicedConv.forward`).

    Depthwise and grouped convolutions keeping their width follow their input's channel count
    (a grouped one in whole groups); one changing the width runs at full size only.
    """

    _conv = staticmethod(F.conv2d)


class DConv1d(_SlicedConv, nn.Conv1d):
    """:class:`DConv` of ``nn.Conv1d`` (audio, sensor and sequence models): (B, c_in, L) ->
    (B, out, L'); ``kernel`` the centre k of the kernel."""

    _conv = staticmethod(F.conv1d)


def _first_channels_batch_norm(
    bn: nn.modules.batchnorm._BatchNorm, x: torch.Tensor, index: torch.Tensor | None = None
):
    """``bn`` on ``x``, whose channels (axis 1) are the first of ``bn``'s, or those at
    ``index`` (a concatenation's active channels; running statistics updated in place)."""
    n = x.shape[1]
    momentum = bn.momentum
    if bn.training and momentum is None:  # cumulative average (recalibration)
        bn.num_batches_tracked += 1
        momentum = 1.0 / float(bn.num_batches_tracked)
    pick = (lambda t: t[:n]) if index is None else (lambda t: t.index_select(0, index))
    stats = [pick(t) if t is not None else None for t in (bn.running_mean, bn.running_var)]
    out = F.batch_norm(
        x,
        stats[0],
        stats[1],
        pick(bn.weight) if bn.weight is not None else None,
        pick(bn.bias) if bn.bias is not None else None,
        bn.training or bn.running_mean is None,
        momentum if momentum is not None else 0.1,
        bn.eps,
    )
    if index is not None and bn.training and bn.running_mean is not None:
        with torch.no_grad():  # a gathered copy was updated: put it back
            bn.running_mean[index] = stats[0]
            bn.running_var[index] = stats[1]
    return out


class _SlicedBN:
    """The forward of :class:`DBN` and :class:`DBN1d` (before ``nn.BatchNormNd`` in their
    bases): the plain layer's at full size, else over the first channels, or over those at
    ``hw_index`` (a concatenation's active ones, set by ``hwnas.spaces.module.network``)."""

    hw_index: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] == self.num_features:
            return super().forward(x)
        return _first_channels_batch_norm(self, x, self.hw_index)


class DBN(_SlicedBN, nn.BatchNorm2d):
    """Batch norm over the first channels of its input (running statistics shared):
    (N, n, H, W) -> (N, n, H, W)."""


class DBN1d(_SlicedBN, nn.BatchNorm1d):
    """:class:`DBN` of ``nn.BatchNorm1d`` (an MLP head's, a 1-D conv's): (N, n) or (N, n, L)."""


class DLinear(nn.Linear):
    """A linear layer runnable on its first input/output features: (..., n_in) -> (..., out)."""

    def forward(
        self, x: torch.Tensor, out: int | None = None, index: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``index``: the weight's input features that ``x``'s are (see :meth:`DConv.forward`)."""
        n_in, out = x.shape[-1], out or self.out_features
        if index is None and n_in == self.in_features and out == self.out_features:
            return super().forward(x)
        bias = self.bias[:out] if self.bias is not None else None
        w = self.weight[:out]
        w = w[:, :n_in] if index is None else w.index_select(1, index)
        return F.linear(x, w, bias)


class DPReLU(nn.PReLU):
    """PReLU with one slope per channel over the first channels of its input (face-recognition
    networks use it): (N, n, ...) -> (N, n, ...)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        if n == self.num_parameters or self.num_parameters == 1:
            return super().forward(x)
        return F.prelu(x, self.weight[:n])


class DLayerNorm(nn.LayerNorm):
    """Layer norm over the first features of its input: (..., n) -> (..., n)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        if n == self.normalized_shape[0]:
            return super().forward(x)
        return F.layer_norm(x, (n,), self.weight[:n], self.bias[:n], self.eps)
