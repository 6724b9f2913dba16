"""PyTorch modules of the declared block types (:mod:`hwnas.spaces.declared.blocks`).

One implementation serves the standalone network and the supernet. A block is built for the
candidate values of its parameters (one value each in a standalone network, every candidate in
a supernet) at its largest size; its ``forward(x, sel, out)`` runs any candidate by weight
slicing: the first channels of every convolution, linear layer and norm (Once-for-All, Cai et
al., ICLR 2020; AutoFormer's weight entanglement, Chen et al., ICCV 2021), the centre of a
depthwise superkernel (Single-Path NAS, Stamoulis et al., 2019). At full size the primitives
call the plain ``nn.Conv2d`` / ``nn.Linear`` / norm forward, so a standalone network exports to
ONNX as ordinary layers and parameter/FLOP counters see ordinary modules.

``sel`` maps an elastic parameter to its *active* candidates: ``[(value, weight), ...]``; the
block's output is the weight-summed output of the active candidates (DARTS's mixed operation):
kernel choices by computing each active kernel (0 = no depthwise conv, the identity), widths
(expansion, heads, MLP ratio) by nested channel masks computed once at the widest active width
(FBNetV2, Wan et al., CVPR 2020). With one active candidate of weight 1 this is exactly the
standalone network. ``out`` is the output width to compute (None: the block's own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hwnas.spaces.ofa.model import make_divisible
from hwnas.spaces.slicing import DBN, DConv, DLayerNorm, DLinear

__all__ = ["DBN", "DConv", "DLayerNorm", "DLinear"]  # re-exported: the shared primitives

Active = list[tuple[Any, Any]]
"""Active candidates of one parameter: (value, weight tensor or None for a fixed value)."""


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    """The activation function called ``name`` (see ``blocks.ACTIVATIONS``)."""
    return _ACTS[name]


_ACTS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "relu6": F.relu6,
    "h_swish": F.hardswish,
    "swish": F.silu,
    "gelu": F.gelu,
    "none": lambda x: x,
}


class ConvBN(nn.Module):
    """Conv (no bias) + batch norm: (B, c_in, H, W) -> (B, c_out, H/stride, W/stride)."""

    def __init__(self, c_in: int, c_out: int, kernel: int, stride: int = 1, groups: int = 1):
        super().__init__()
        self.conv = DConv(c_in, c_out, kernel, stride, kernel // 2, groups=groups, bias=False)
        self.bn = DBN(c_out)

    def forward(self, x, out: int | None = None, kernel: int | None = None):
        return self.bn(self.conv(x, out, kernel))


def mix(active: Active, fn: Callable[[Any], torch.Tensor]) -> torch.Tensor:
    """sum over active candidates of weight * fn(value) (no product for a fixed value)."""
    total = None
    for value, weight in active:
        y = fn(value)
        if weight is not None:
            y = y * weight
        total = y if total is None else total + y
    return total  # type: ignore[return-value]


def width_scale(active: Active, widths: list[int], n: int, like: torch.Tensor, dim: int):
    """The factor applying nested width masks: one weight when one candidate is active (None
    when it is fixed), else sum_k weight_k * 1[channel < width_k] over ``n`` channels, shaped
    to broadcast along ``dim`` of ``like``."""
    if len(active) == 1:
        return active[0][1]
    c = torch.arange(n, device=like.device)
    s = sum(w * (c < width).to(like.dtype) for (_v, w), width in zip(active, widths))
    shape = [1] * like.dim()
    shape[dim] = n
    return s.view(shape)


def _scaled(x: torch.Tensor, s) -> torch.Tensor:
    return x if s is None else x * s


class Block(nn.Module):
    """Base of the block modules.

    Args:
        c_in: input channels (largest).
        c_out: output channels (largest).
        stride: spatial stride.
        params: parameter -> candidate values (one for a fixed parameter).
        hw: input (H, W).

    Attributes:
        out_channels: output channels (largest).
        out_hw: output (H, W).
    """

    def __init__(self, c_in: int, c_out: int, stride: int, params: dict[str, tuple], hw):
        super().__init__()
        self.c_in, self.c_out, self.stride = c_in, c_out, stride
        self.params = params
        self.out_channels = c_out
        self.out_hw = tuple((v - 1) // stride + 1 for v in hw)

    def choice(self, sel: dict[str, Active] | None, name: str) -> Active:
        """The active candidates of parameter ``name`` (its one value when fixed)."""
        if sel is not None and name in sel:
            return sel[name]
        values = self.params[name]
        if len(values) != 1:
            raise RuntimeError(f"elastic parameter '{name}' run without a choice")
        return [(values[0], None)]

    def fixed(self, name: str) -> Any:
        return self.params[name][0]


def _residual(x: torch.Tensor, y: torch.Tensor, stride: int) -> torch.Tensor:
    return x + y if stride == 1 and x.shape == y.shape else y


class ConvBlock(Block):
    """Convolution (+ batch norm) (+ activation): (B, c_in, H, W) -> (B, c_out, H/s, W/s)."""

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_out, stride, params, hw)
        k = max(params["kernel"])
        self.conv = DConv(c_in, c_out, k, stride, k // 2, bias=self.fixed("bias"))
        self.bn = DBN(c_out) if self.fixed("bn") else None
        self.act = activation(self.fixed("act"))

    def forward(self, x, sel=None, out=None):
        def run(k):
            y = self.conv(x, out, k)
            return self.act(self.bn(y) if self.bn is not None else y)

        return mix(self.choice(sel, "kernel"), run)


class ChannelShuffle(nn.Module):
    """Channel shuffle (ShuffleNet, Zhang et al., CVPR 2018) for ``groups`` groups."""

    def __init__(self, groups: int):
        super().__init__()
        self.groups = groups

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        return x.view(b, self.groups, c // self.groups, h, w).transpose(1, 2).reshape(b, c, h, w)


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation (Hu et al., CVPR 2018), ReLU and hard sigmoid (MobileNetV3)."""

    def __init__(self, channels: int, mid: int):
        super().__init__()
        self.reduce = DConv(channels, mid, 1, bias=True)
        self.expand = DConv(mid, channels, 1, bias=True)

    def forward(self, x: torch.Tensor, mid: int | None = None) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        s = F.relu(self.reduce(s, mid))
        return x * F.hardsigmoid(self.expand(s, x.shape[1]))


class MBConvBlock(Block):
    """Inverted residual (MobileNetV2/V3; FBNet's blocks): 1x1 expand (grouped + shuffled when
    ``groups`` > 1) + BN + act, kxk depthwise (stride) + BN + act, optional squeeze-excite,
    1x1 project + BN, plus the input when shapes match. (B, c_in, H, W) -> (B, c_out, H/s, W/s).
    """

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_out, stride, params, hw)
        self.divisor = self.fixed("divisor")
        groups, se = self.fixed("groups"), self.fixed("se")
        self.has_expand = self.fixed("expand_at_1") or any(e != 1 for e in params["expand"])
        mid = max(self.mid(e) for e in params["expand"])
        self.expand = ConvBN(c_in, mid, 1, groups=groups) if self.has_expand else None
        self.shuffle = ChannelShuffle(groups) if groups > 1 and self.has_expand else None
        self.dw = ConvBN(mid, mid, max(params["kernel"]), stride, groups=mid)
        self.se = SqueezeExcite(mid, self.se_mid(mid)) if se > 0 else None
        self.project = ConvBN(mid, c_out, 1, groups=groups)
        self.act = activation(self.fixed("act"))

    def mid(self, e: float, c_in: int | None = None) -> int:
        """Hidden width at expansion ``e`` for ``c_in`` input channels (default: the most)."""
        return make_divisible((c_in or self.c_in) * e, self.divisor)

    def se_mid(self, n: int) -> int:
        return make_divisible(n * self.fixed("se"), self.divisor)

    def forward(self, x, sel=None, out=None):
        es = self.choice(sel, "expand")
        widths = [self.mid(e, int(x.shape[1])) for e, _ in es]
        n = max(widths)
        h = x
        if self.expand is not None:
            h = self.act(self.expand(x, n))
            if self.shuffle is not None:
                h = self.shuffle(h)
        h0 = h
        h = mix(self.choice(sel, "kernel"), lambda k: self.act(self.dw(h0, kernel=k)))
        if self.se is not None:
            h = self.se(h, self.se_mid(n))
        h = _scaled(h, width_scale(es, widths, n, h, 1))
        return _residual(x, self.project(h, out), self.stride)


class UIBBlock(Block):
    """Universal Inverted Bottleneck (MobileNetV4, Qin et al., ECCV 2024; as in the official
    TensorFlow and timm definitions): optional kxk depthwise + BN (start, no activation),
    1x1 expand + BN + act, optional kxk depthwise + BN + act (middle), 1x1 project + BN, plus the
    input when shapes match. The stride sits on the middle depthwise conv, or on the start one
    when there is no middle one. Start/middle kernels 0 mean absent: both = ExtraDW, middle
    only = IB, start only = ConvNext-like, neither = FFN.
    """

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_out, stride, params, hw)
        self.divisor = self.fixed("divisor")
        starts, mids = params["start_kernel"], params["mid_kernel"]
        self.start_stride = stride if max(mids) == 0 else 1
        mid = max(self.mid(e) for e in params["expand"])
        k0 = max(starts)
        self.start = ConvBN(c_in, c_in, k0, self.start_stride, groups=c_in) if k0 else None
        self.expand = ConvBN(c_in, mid, 1)
        k1 = max(mids)
        self.middle = ConvBN(mid, mid, k1, stride, groups=mid) if k1 else None
        self.project = ConvBN(mid, c_out, 1)
        self.act = activation(self.fixed("act"))

    def mid(self, e: float, c_in: int | None = None) -> int:
        """Hidden width at expansion ``e`` for ``c_in`` input channels (default: the most)."""
        return make_divisible((c_in or self.c_in) * e, self.divisor)

    def forward(self, x, sel=None, out=None):
        h = mix(self.choice(sel, "start_kernel"), lambda k: self.start(x, kernel=k) if k else x)
        es = self.choice(sel, "expand")
        widths = [self.mid(e, int(x.shape[1])) for e, _ in es]
        n = max(widths)
        h1 = self.act(self.expand(h, n))
        h = mix(
            self.choice(sel, "mid_kernel"),
            lambda k: self.act(self.middle(h1, kernel=k)) if k else h1,
        )
        h = _scaled(h, width_scale(es, widths, n, h, 1))
        return _residual(x, self.project(h, out), self.stride)


class FusedIBBlock(Block):
    """Fused inverted bottleneck (EdgeResidual; MobileNetV4-M's first stage): kxk conv to the
    expanded width (stride) + BN + act, 1x1 project + BN, plus the input when shapes match."""

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_out, stride, params, hw)
        self.divisor = self.fixed("divisor")
        mid = max(self.mid(e) for e in params["expand"])
        self.expand = ConvBN(c_in, mid, max(params["kernel"]), stride)
        self.project = ConvBN(mid, c_out, 1)
        self.act = activation(self.fixed("act"))

    def mid(self, e: float, c_in: int | None = None) -> int:
        """Hidden width at expansion ``e`` for ``c_in`` input channels (default: the most)."""
        return make_divisible((c_in or self.c_in) * e, self.divisor)

    def forward(self, x, sel=None, out=None):
        es = self.choice(sel, "expand")
        widths = [self.mid(e, int(x.shape[1])) for e, _ in es]
        n = max(widths)
        h = mix(self.choice(sel, "kernel"), lambda k: self.act(self.expand(x, n, k)))
        h = _scaled(h, width_scale(es, widths, n, h, 1))
        return _residual(x, self.project(h, out), self.stride)


class SkipBlock(Block):
    """Identity; where width or stride change, a 1x1 conv + BN + activation (HW-NAS-Bench's
    FBNet ``skip``, whose networks the recorded FBNet latencies were measured on)."""

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_out, stride, params, hw)
        same = stride == 1 and c_in == c_out
        self.proj = None if same else ConvBN(c_in, c_out, 1, stride)
        self.act = activation(self.fixed("act"))

    def forward(self, x, sel=None, out=None):
        n = out or self.c_out
        if self.proj is None or (self.stride == 1 and x.shape[1] == n):
            return x
        return self.act(self.proj(x, n))


class PoolBlock(Block):
    """Global average pooling: (B, C, H, W) -> (B, C, 1, 1)."""

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_in, 1, params, hw)
        self.out_hw = (1, 1)

    def forward(self, x, sel=None, out=None):
        return F.adaptive_avg_pool2d(x, 1)


class PatchEmbedBlock(Block):
    """Patch embedding (ViT, Dosovitskiy et al., ICLR 2021): a patch x patch conv (stride =
    patch, with bias) to the embedding width, flattened to tokens, plus learned position
    embeddings: (B, C, H, W) -> (B, (H/p)(W/p), E)."""

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_out, 1, params, hw)
        p = self.fixed("patch")
        self.conv = DConv(c_in, c_out, p, p, 0, bias=True)
        self.out_hw = (hw[0] // p, hw[1] // p)
        self.pos = nn.Parameter(torch.zeros(1, self.out_hw[0] * self.out_hw[1], c_out))
        nn.init.trunc_normal_(self.pos, std=0.02)

    def forward(self, x, sel=None, out=None):
        y = self.conv(x, out).flatten(2).transpose(1, 2)
        return y + self.pos[:, :, : y.shape[-1]]


class TransformerBlock(Block):
    """Pre-norm transformer encoder layer (Vaswani et al., 2017; ViT): x + MHSA(LN(x)), then
    x + MLP(LN(x)); (B, N, E) -> (B, N, E). Elastic heads (of fixed width ``head_dim``) and MLP
    ratio as in HAT (Wang et al., ACL 2020) and AutoFormer (Chen et al., ICCV 2021): the supernet
    keeps the most heads and the widest MLP, a subnet uses the first ones."""

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_in, 1, params, hw)
        e, hd = c_in, self.fixed("head_dim")
        inner = max(params["heads"]) * hd
        self.norm1 = DLayerNorm(e)
        self.q = DLinear(e, inner)
        self.k = DLinear(e, inner)
        self.v = DLinear(e, inner)
        self.proj = DLinear(inner, e)
        self.norm2 = DLayerNorm(e)
        hidden = max(self.hidden(e, r) for r in params["mlp_ratio"])
        self.fc1 = DLinear(e, hidden)
        self.fc2 = DLinear(hidden, e)
        self.act = activation(self.fixed("act"))

    @staticmethod
    def hidden(e: int, r: float) -> int:
        return max(1, int(round(e * r)))

    def forward(self, x, sel=None, out=None):
        b, t, e = x.shape[0], x.shape[1], int(x.shape[2])
        hd = self.fixed("head_dim")
        hs = self.choice(sel, "heads")
        heads = max(v for v, _ in hs)
        y = self.norm1(x)
        q = self.q(y, heads * hd).reshape(b, t, heads, hd).transpose(1, 2)
        k = self.k(y, heads * hd).reshape(b, t, heads, hd).transpose(1, 2)
        val = self.v(y, heads * hd).reshape(b, t, heads, hd).transpose(1, 2)
        att = torch.softmax((q @ k.transpose(-2, -1)) * (hd**-0.5), dim=-1) @ val
        att = _scaled(att, width_scale(hs, [h for h, _ in hs], heads, att, 1))
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, heads * hd), e)
        rs = self.choice(sel, "mlp_ratio")
        widths = [self.hidden(e, r) for r, _ in rs]
        n = max(widths)
        h = self.act(self.fc1(self.norm2(x), n))
        h = _scaled(h, width_scale(rs, widths, n, h, -1))
        return x + self.fc2(h, e)


class TokenPoolBlock(Block):
    """Layer norm, then the mean over tokens: (B, N, E) -> (B, E)."""

    def __init__(self, c_in, c_out, stride, params, hw):
        super().__init__(c_in, c_in, 1, params, hw)
        self.norm = DLayerNorm(c_in)

    def forward(self, x, sel=None, out=None):
        return self.norm(x).mean(dim=1)
