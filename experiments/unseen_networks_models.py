"""Sixteen networks written from their papers in PyTorch, none of them in hwnas's search spaces
or reference sets: the "unseen networks" of ``experiments/unseen_networks.py``.

They cover what the kernel-level predictor has to read beyond MobileNet- and ViT-like
networks: ghost modules, squeeze-excite, grouped and dilated convolutions, dense
concatenations, factorised 1x7/7x1 convolutions, channels-last layer norms, windowed and
shifted attention with a relative position bias (``torch.roll``, a Gather), Einsum attention,
bilinear Resize, an LSTM, 1-D convolutions on audio, causal padding, a channel Split with
reflect padding, and token mixing MLPs. Sizes are the paper's (widths, depths, kernels) at
small inputs so that one run takes 0.5-35 ms on one CPU core.

No torchvision, no pretrained weights: :func:`build` seeds the weights (``torch.manual_seed(0)``)
and gives every batch norm non-trivial running statistics, so that no activation collapses to
zero or to subnormal floats (which would time differently from a trained network).

    from unseen_networks_models import NAMES, build
    model, input_shape = build("ghostnet")   # eval mode; input_shape = (1, 3, 160, 160)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


def cba(ci, co, k=3, s=1, g=1, act=nn.ReLU, d=1, p=None) -> nn.Sequential:
    """Conv2d (no bias) + BatchNorm2d (+ ``act``); ``p`` defaults to 'same' padding."""
    p = (k // 2) * d if p is None else p
    layers = [nn.Conv2d(ci, co, k, s, p, dilation=d, groups=g, bias=False), nn.BatchNorm2d(co)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def _div(v, d=4) -> int:
    """``v`` rounded to a multiple of ``d`` (at least ``d``)."""
    return max(d, int(v + d / 2) // d * d)


class HSigmoid(nn.Module):
    """Hard sigmoid as GhostNet writes it: relu6(x + 3) / 6."""

    def forward(self, x):
        return F.relu6(x + 3.0) / 6.0


class SE(nn.Module):
    """Squeeze-and-excitation (Hu et al., CVPR 2018): ``c`` -> ``r`` -> ``c`` channel gate."""

    def __init__(self, c, r, gate=nn.Sigmoid, act=nn.ReLU):
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(c, r, 1), nn.Conv2d(r, c, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


# ----------------------------------------------------------------------------------- GhostNet
class Ghost(nn.Module):
    """Ghost module: a 1x1 primary convolution and a cheap depthwise 3x3, concatenated."""

    def __init__(self, ci, co, relu=True):
        super().__init__()
        init = math.ceil(co / 2)
        self.co = co
        act = nn.ReLU if relu else None
        self.primary = cba(ci, init, 1, act=act)
        self.cheap = cba(init, init, 3, g=init, act=act)

    def forward(self, x):
        a = self.primary(x)
        return torch.cat([a, self.cheap(a)], 1)[:, : self.co]


class GhostBottleneck(nn.Module):
    """Ghost bottleneck: ghost module, strided depthwise, optional SE, ghost module + shortcut."""

    def __init__(self, ci, mid, co, k, s, se):
        super().__init__()
        self.g1 = Ghost(ci, mid, True)
        self.dw = cba(mid, mid, k, s, g=mid, act=None) if s > 1 else nn.Identity()
        self.se = SE(mid, _div(mid * se), gate=HSigmoid) if se else nn.Identity()
        self.g2 = Ghost(mid, co, False)
        if ci == co and s == 1:
            self.short = nn.Identity()
        else:
            self.short = nn.Sequential(cba(ci, ci, k, s, g=ci, act=None), cba(ci, co, 1, act=None))

    def forward(self, x):
        return self.g2(self.se(self.dw(self.g1(x)))) + self.short(x)


def ghostnet() -> nn.Module:
    """GhostNet 1.0x (Han et al., CVPR 2020); input (1, 3, 160, 160)."""
    # (kernel, expansion width, out, SE ratio, stride)
    cfg = [[3, 16, 16, 0, 1], [3, 48, 24, 0, 2], [3, 72, 24, 0, 1], [5, 72, 40, 0.25, 2],
           [5, 120, 40, 0.25, 1], [3, 240, 80, 0, 2], [3, 200, 80, 0, 1], [3, 184, 80, 0, 1],
           [3, 184, 80, 0, 1], [3, 480, 112, 0.25, 1], [3, 672, 112, 0.25, 1],
           [5, 672, 160, 0.25, 2], [5, 960, 160, 0, 1], [5, 960, 160, 0.25, 1],
           [5, 960, 160, 0, 1], [5, 960, 160, 0.25, 1]]  # fmt: skip
    layers, c = [cba(3, 16, 3, 2)], 16
    for k, mid, co, se, s in cfg:
        layers.append(GhostBottleneck(c, mid, co, k, s, se))
        c = co
    layers += [cba(c, 960, 1), nn.AdaptiveAvgPool2d(1), nn.Conv2d(960, 1280, 1), nn.ReLU(),
               nn.Flatten(), nn.Linear(1280, 1000)]  # fmt: skip
    return nn.Sequential(*layers)


# --------------------------------------------------------------------------------- MnasNet-A1
class MB(nn.Module):
    """Inverted residual (MobileNetV2): 1x1 expansion, depthwise, optional SE, 1x1 projection."""

    def __init__(self, ci, co, k, s, e, se=False, act=nn.ReLU, se_act=nn.ReLU, gate=nn.Sigmoid):
        super().__init__()
        mid = ci * e
        self.exp = cba(ci, mid, 1, act=act) if e != 1 else nn.Identity()
        self.dw = cba(mid, mid, k, s, g=mid, act=act)
        self.se = SE(mid, max(8, ci // 4), gate=gate, act=se_act) if se else nn.Identity()
        self.proj = cba(mid, co, 1, act=None)
        self.res = s == 1 and ci == co

    def forward(self, x):
        y = self.proj(self.se(self.dw(self.exp(x))))
        return x + y if self.res else y


def mnasnet_a1() -> nn.Module:
    """MnasNet-A1 (Tan et al., CVPR 2019); input (1, 3, 192, 192)."""
    # (expansion, out, repeats, stride, kernel, SE)
    cfg = [(6, 24, 2, 2, 3, False), (3, 40, 3, 2, 5, True), (6, 80, 4, 2, 3, False),
           (6, 112, 2, 1, 3, True), (6, 160, 3, 2, 5, True), (6, 320, 1, 1, 3, False)]  # fmt: skip
    layers = [cba(3, 32, 3, 2), cba(32, 32, 3, 1, g=32), cba(32, 16, 1, act=None)]
    c = 16
    for e, co, n, s, k, se in cfg:
        for i in range(n):
            layers.append(MB(c, co, k, s if i == 0 else 1, e, se))
            c = co
    layers += [cba(c, 1280, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1280, 1000)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------------------ RegNetX-400MF
class XBlock(nn.Module):
    """RegNet X block: 1x1, grouped 3x3 (group width ``gw``), 1x1, residual, ReLU."""

    def __init__(self, ci, co, s, gw):
        super().__init__()
        self.f = nn.Sequential(cba(ci, co, 1), cba(co, co, 3, s, g=co // gw),
                               cba(co, co, 1, act=None))  # fmt: skip
        self.proj = cba(ci, co, 1, s, act=None) if (ci != co or s != 1) else nn.Identity()

    def forward(self, x):
        return F.relu(self.f(x) + self.proj(x))


def regnetx_400mf() -> nn.Module:
    """RegNetX-400MF (Radosavovic et al., CVPR 2020); input (1, 3, 224, 224)."""
    layers, c = [cba(3, 32, 3, 2)], 32
    for d, w in zip([1, 2, 7, 12], [32, 64, 160, 384]):
        for i in range(d):
            layers.append(XBlock(c, w, 2 if i == 0 else 1, 16))
            c = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 1000)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------------------- DenseNet-121
class DenseLayer(nn.Module):
    """Dense layer: BN-ReLU-1x1 (4 x growth), BN-ReLU-3x3 (growth), concatenated to its input."""

    def __init__(self, ci, growth=32, bn_size=4):
        super().__init__()
        self.f = nn.Sequential(
            nn.BatchNorm2d(ci), nn.ReLU(), nn.Conv2d(ci, bn_size * growth, 1, bias=False),
            nn.BatchNorm2d(bn_size * growth), nn.ReLU(),
            nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False))  # fmt: skip

    def forward(self, x):
        return torch.cat([x, self.f(x)], 1)


def densenet121() -> nn.Module:
    """DenseNet-121 (Huang et al., CVPR 2017); input (1, 3, 128, 128)."""
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
              nn.MaxPool2d(3, 2, 1)]  # fmt: skip
    c = 64
    for i, n in enumerate([6, 12, 24, 16]):
        for _ in range(n):
            layers.append(DenseLayer(c))
            c += 32
        if i < 3:
            layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False),
                       nn.AvgPool2d(2, 2)]  # fmt: skip
            c //= 2
    layers += [nn.BatchNorm2d(c), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(c, 1000)]  # fmt: skip
    return nn.Sequential(*layers)


# ------------------------------------------------------------------------------- Inception-v3
def bc(ci, co, k, s=1, p=0) -> nn.Sequential:
    """Inception's BasicConv2d: Conv2d (no bias) + BatchNorm2d (eps 1e-3) + ReLU."""
    return nn.Sequential(nn.Conv2d(ci, co, k, s, p, bias=False), nn.BatchNorm2d(co, eps=1e-3),
                         nn.ReLU())  # fmt: skip


class IncA(nn.Module):
    """Inception-A (35x35 grid): 1x1, 5x5, double 3x3 and pooled branches."""

    def __init__(self, ci, pf):
        super().__init__()
        self.b1 = bc(ci, 64, 1)
        self.b5 = nn.Sequential(bc(ci, 48, 1), bc(48, 64, 5, p=2))
        self.b3 = nn.Sequential(bc(ci, 64, 1), bc(64, 96, 3, p=1), bc(96, 96, 3, p=1))
        self.bp = bc(ci, pf, 1)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b5(x), self.b3(x),
                          self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)  # fmt: skip


class IncB(nn.Module):
    """Grid reduction 35 -> 17: strided 3x3, strided double 3x3 and max pooling."""

    def __init__(self, ci):
        super().__init__()
        self.b3 = bc(ci, 384, 3, 2)
        self.bd = nn.Sequential(bc(ci, 64, 1), bc(64, 96, 3, p=1), bc(96, 96, 3, 2))

    def forward(self, x):
        return torch.cat([self.b3(x), self.bd(x), F.max_pool2d(x, 3, 2)], 1)


class IncC(nn.Module):
    """Inception-C (17x17 grid): factorised 1x7/7x1 convolutions."""

    def __init__(self, ci, c7):
        super().__init__()
        self.b1 = bc(ci, 192, 1)
        self.b7 = nn.Sequential(bc(ci, c7, 1), bc(c7, c7, (1, 7), p=(0, 3)),
                                bc(c7, 192, (7, 1), p=(3, 0)))  # fmt: skip
        self.bd = nn.Sequential(bc(ci, c7, 1), bc(c7, c7, (7, 1), p=(3, 0)),
                                bc(c7, c7, (1, 7), p=(0, 3)), bc(c7, c7, (7, 1), p=(3, 0)),
                                bc(c7, 192, (1, 7), p=(0, 3)))  # fmt: skip
        self.bp = bc(ci, 192, 1)

    def forward(self, x):
        return torch.cat([self.b1(x), self.b7(x), self.bd(x),
                          self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)  # fmt: skip


class IncD(nn.Module):
    """Grid reduction 17 -> 8: strided 3x3 after 1x1 and after 1x7/7x1, and max pooling."""

    def __init__(self, ci):
        super().__init__()
        self.b3 = nn.Sequential(bc(ci, 192, 1), bc(192, 320, 3, 2))
        self.b7 = nn.Sequential(bc(ci, 192, 1), bc(192, 192, (1, 7), p=(0, 3)),
                                bc(192, 192, (7, 1), p=(3, 0)), bc(192, 192, 3, 2))  # fmt: skip

    def forward(self, x):
        return torch.cat([self.b3(x), self.b7(x), F.max_pool2d(x, 3, 2)], 1)


class IncE(nn.Module):
    """Inception-E (8x8 grid): branches split into parallel 1x3 and 3x1 convolutions."""

    def __init__(self, ci):
        super().__init__()
        self.b1 = bc(ci, 320, 1)
        self.b3 = bc(ci, 384, 1)
        self.b3a, self.b3b = bc(384, 384, (1, 3), p=(0, 1)), bc(384, 384, (3, 1), p=(1, 0))
        self.bd = nn.Sequential(bc(ci, 448, 1), bc(448, 384, 3, p=1))
        self.bda, self.bdb = bc(384, 384, (1, 3), p=(0, 1)), bc(384, 384, (3, 1), p=(1, 0))
        self.bp = bc(ci, 192, 1)

    def forward(self, x):
        a, d = self.b3(x), self.bd(x)
        return torch.cat([self.b1(x), self.b3a(a), self.b3b(a), self.bda(d), self.bdb(d),
                          self.bp(F.avg_pool2d(x, 3, 1, 1))], 1)  # fmt: skip


def inception_v3() -> nn.Module:
    """Inception-v3 without the auxiliary head (Szegedy et al., CVPR 2016); input (1, 3, 160,
    160)."""
    return nn.Sequential(
        bc(3, 32, 3, 2),
        bc(32, 32, 3),
        bc(32, 64, 3, p=1),
        nn.MaxPool2d(3, 2),
        bc(64, 80, 1),
        bc(80, 192, 3),
        nn.MaxPool2d(3, 2),
        IncA(192, 32),
        IncA(256, 64),
        IncA(288, 64),
        IncB(288),
        IncC(768, 128),
        IncC(768, 160),
        IncC(768, 160),
        IncC(768, 192),
        IncD(768),
        IncE(1280),
        IncE(2048),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(2048, 1000),
    )


# ------------------------------------------------------------------------------ ConvNeXt-nano
class LN2d(nn.Module):
    """Channels-first LayerNorm as the paper's code writes it: permute, LayerNorm, permute."""

    def __init__(self, c):
        super().__init__()
        self.ln = nn.LayerNorm(c, eps=1e-6)

    def forward(self, x):
        return self.ln(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class CNBlock(nn.Module):
    """ConvNeXt block: depthwise 7x7, channels-last LayerNorm, 4x MLP (GELU), layer scale.

    The layer scale starts at 0.1 (the paper's 1e-6 would make the residual branch vanish in a
    network that is never trained)."""

    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, 1, 3, groups=c)
        self.ln = nn.LayerNorm(c, eps=1e-6)
        self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
        self.gamma = nn.Parameter(torch.full((c,), 1e-6 * 1e5))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.ln(y)))) * self.gamma
        return x + y.permute(0, 3, 1, 2)


def convnext_nano() -> nn.Module:
    """ConvNeXt-nano, widths 80-640, depths 2-2-8-2 (Liu et al., CVPR 2022); input (1, 3, 160,
    160)."""
    dims, depths = [80, 160, 320, 640], [2, 2, 8, 2]
    layers = [nn.Conv2d(3, dims[0], 4, 4), LN2d(dims[0])]
    for i, (c, d) in enumerate(zip(dims, depths)):
        if i:
            layers += [LN2d(dims[i - 1]), nn.Conv2d(dims[i - 1], c, 2, 2)]
        layers += [CNBlock(c) for _ in range(d)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(dims[-1]),
               nn.Linear(dims[-1], 1000)]  # fmt: skip
    return nn.Sequential(*layers)


# ------------------------------------------------------------------------------- MobileViT-XS
class TBlock(nn.Module):
    """Pre-norm transformer encoder block: multi-head attention, MLP (SiLU)."""

    def __init__(self, d, heads, mlp):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)
        self.h = heads

    def attn(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1)) * (d // self.h) ** -0.5
        return self.proj((a.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(F.silu(self.fc1(self.ln2(x))))


class MViTBlock(nn.Module):
    """MobileViT block: local 3x3 + 1x1, unfold into 2x2 patches, transformers, fold, fuse."""

    def __init__(self, c, d, L, heads=4, p=2):
        super().__init__()
        self.local = nn.Sequential(cba(c, c, 3, act=nn.SiLU), nn.Conv2d(c, d, 1, bias=False))
        self.tr = nn.Sequential(*[TBlock(d, heads, 2 * d) for _ in range(L)], nn.LayerNorm(d))
        self.back = cba(d, c, 1, act=nn.SiLU)
        self.fuse = cba(2 * c, c, 3, act=nn.SiLU)
        self.p = p

    def forward(self, x):
        b, _, h, w = x.shape
        p = self.p
        y = self.local(x)
        d = y.shape[1]
        # unfold: (b, d, h/p, p, w/p, p) -> (b*p*p, n, d)
        y = y.reshape(b, d, h // p, p, w // p, p).permute(0, 3, 5, 2, 4, 1)
        y = y.reshape(b * p * p, -1, d)
        y = self.tr(y)
        y = y.reshape(b, p, p, h // p, w // p, d).permute(0, 5, 3, 1, 4, 2).reshape(b, d, h, w)
        return self.fuse(torch.cat([x, self.back(y)], 1))


def mobilevit_xs() -> nn.Module:
    """MobileViT-XS (Mehta & Rastegari, ICLR 2022); input (1, 3, 192, 192)."""

    def mv2(ci, co, s):
        return MB(ci, co, 3, s, 4, act=nn.SiLU)

    return nn.Sequential(
        cba(3, 16, 3, 2, act=nn.SiLU),
        mv2(16, 32, 1),
        mv2(32, 48, 2),
        mv2(48, 48, 1),
        mv2(48, 48, 1),
        mv2(48, 64, 2),
        MViTBlock(64, 96, 2),
        mv2(64, 80, 2),
        MViTBlock(80, 120, 4),
        mv2(80, 96, 2),
        MViTBlock(96, 144, 3),
        cba(96, 384, 1, act=nn.SiLU),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(384, 1000),
    )


# ------------------------------------------------------------------------------------- Swin
class WindowAttn(nn.Module):
    """(Shifted) window attention with a relative position bias table and the shift's mask."""

    def __init__(self, d, heads, ws, shift, res):
        super().__init__()
        self.h, self.ws, self.shift = heads, ws, shift
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, heads) * 0.02)
        c = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij"))
        c = c.flatten(1)
        rel = (c[:, :, None] - c[:, None, :]).permute(1, 2, 0) + ws - 1
        self.register_buffer("index", rel[..., 0] * (2 * ws - 1) + rel[..., 1], persistent=False)
        if shift:
            img = torch.zeros(1, res, res, 1)
            cnt = 0
            for hs in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                for wsl in (slice(0, -ws), slice(-ws, -shift), slice(-shift, None)):
                    img[:, hs, wsl, :] = cnt
                    cnt += 1
            mw = img.reshape(1, res // ws, ws, res // ws, ws, 1).permute(0, 1, 3, 2, 4, 5)
            mw = mw.reshape(-1, ws * ws)
            mask = (mw[:, None, :] - mw[:, :, None]) != 0
            self.register_buffer("mask", mask.float() * -100.0, persistent=False)
        else:
            self.mask = None

    def forward(self, x):  # x: (b, H, W, d)
        b, H, W, d = x.shape
        ws, h = self.ws, self.h
        if self.shift:
            x = torch.roll(x, (-self.shift, -self.shift), (1, 2))
        w = x.reshape(b, H // ws, ws, W // ws, ws, d).permute(0, 1, 3, 2, 4, 5)
        w = w.reshape(-1, ws * ws, d)
        nw = w.shape[0]
        q, k, v = self.qkv(w).reshape(nw, ws * ws, 3, h, d // h).permute(2, 0, 3, 1, 4)
        a = (q * (d // h) ** -0.5) @ k.transpose(-2, -1)
        bias = self.table[self.index.reshape(-1)].reshape(ws * ws, ws * ws, h)
        a = a + bias.permute(2, 0, 1)[None]
        if self.mask is not None:
            a = a.reshape(b, -1, h, ws * ws, ws * ws) + self.mask[None, :, None]
            a = a.reshape(-1, h, ws * ws, ws * ws)
        o = (a.softmax(-1) @ v).transpose(1, 2).reshape(nw, ws * ws, d)
        o = self.proj(o).reshape(b, H // ws, W // ws, ws, ws, d).permute(0, 1, 3, 2, 4, 5)
        o = o.reshape(b, H, W, d)
        if self.shift:
            o = torch.roll(o, (self.shift, self.shift), (1, 2))
        return o


class SwinBlock(nn.Module):
    """Swin block: LayerNorm, (shifted) window attention, LayerNorm, 4x MLP (GELU)."""

    def __init__(self, d, heads, ws, shift, res):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = WindowAttn(d, heads, ws, shift, res)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Merge(nn.Module):
    """Patch merging: 2x2 neighbours concatenated (4d), LayerNorm, linear to 2d."""

    def __init__(self, d):
        super().__init__()
        self.ln, self.red = nn.LayerNorm(4 * d), nn.Linear(4 * d, 2 * d, bias=False)

    def forward(self, x):
        x = torch.cat([x[:, 0::2, 0::2], x[:, 1::2, 0::2], x[:, 0::2, 1::2], x[:, 1::2, 1::2]], -1)
        return self.red(self.ln(x))


class Swin(nn.Module):
    """Swin transformer, channels-last between the 4x4 patch embedding and the head."""

    def __init__(self, C=48, depths=(2, 2, 6, 2), heads=(3, 6, 12, 24), side=224, ws=7):
        super().__init__()
        self.patch = nn.Conv2d(3, C, 4, 4)
        self.ln0 = nn.LayerNorm(C)
        blocks, res, d = [], side // 4, C
        for i, (n, h) in enumerate(zip(depths, heads)):
            if i:
                blocks.append(Merge(d))
                d, res = 2 * d, res // 2
            for j in range(n):
                shift = ws // 2 if (j % 2 and res > ws) else 0
                blocks.append(SwinBlock(d, h, ws, shift, res))
        self.blocks = nn.Sequential(*blocks)
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

    def forward(self, x):
        x = self.ln0(self.patch(x).permute(0, 2, 3, 1))
        x = self.ln(self.blocks(x))
        return self.head(x.mean((1, 2)))


def swin_c48() -> nn.Module:
    """Swin-T's depths 2-2-6-2 and window 7 at half its width, C=48 (Liu et al., ICCV 2021);
    input (1, 3, 224, 224)."""
    return Swin()


# -------------------------------------------------------------------------------- LeViT-128S
class LinBN(nn.Module):
    """Linear (no bias) + BatchNorm1d over the tokens, as LeViT's attention and MLP use."""

    def __init__(self, ci, co):
        super().__init__()
        self.l, self.bn = nn.Linear(ci, co, bias=False), nn.BatchNorm1d(co)

    def forward(self, x):
        return self.bn(self.l(x).flatten(0, 1)).reshape(x.shape[0], x.shape[1], -1)


class LeAttn(nn.Module):
    """Attention with a learned per-head bias; q.k and a.v written as Einsum; ``stride`` 2
    subsamples the queries (LeViT's shrink attention)."""

    def __init__(self, d, heads, kd, ratio, res, res_out=None, stride=1):
        super().__init__()
        self.h, self.kd, self.vd, self.stride, self.res = heads, kd, ratio * kd, stride, res
        self.res_out = res_out or res
        if stride == 1:
            self.qkv = LinBN(d, heads * (2 * kd + self.vd))
        else:
            self.kv = LinBN(d, heads * (kd + self.vd))
            self.q = LinBN(d, heads * kd)
        self.proj = nn.Sequential(nn.Hardswish(), LinBN(heads * self.vd, d))
        self.bias = nn.Parameter(torch.randn(heads, self.res_out**2, res**2) * 0.02)

    def forward(self, x):
        b, n, _ = x.shape
        if self.stride == 1:
            q, k, v = self.qkv(x).reshape(b, n, self.h, -1).split([self.kd, self.kd, self.vd], 3)
        else:
            k, v = self.kv(x).reshape(b, n, self.h, -1).split([self.kd, self.vd], 3)
            r = self.res
            xs = x.reshape(b, r, r, -1)[:, :: self.stride, :: self.stride]
            xs = xs.reshape(b, -1, x.shape[-1])
            q = self.q(xs).reshape(b, -1, self.h, self.kd)
        a = torch.einsum("bqhd,bkhd->bhqk", q, k) * self.kd**-0.5 + self.bias
        o = torch.einsum("bhqk,bkhd->bqhd", a.softmax(-1), v)
        return self.proj(o.reshape(b, o.shape[1], -1))


class LeMLP(nn.Module):
    """LeViT's residual MLP: LinBN, Hardswish, LinBN."""

    def __init__(self, d, r):
        super().__init__()
        self.f = nn.Sequential(LinBN(d, d * r), nn.Hardswish(), LinBN(d * r, d))

    def forward(self, x):
        return x + self.f(x)


class LeRes(nn.Module):
    """Residual around ``m``."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return x + self.m(x)


class LeShrink(nn.Module):
    """Shrink attention between stages: queries at stride 2, projected to the next width."""

    def __init__(self, d, do, heads, res):
        super().__init__()
        self.a = LeAttn(d, heads, 16, 4, res, (res + 1) // 2, 2)
        self.a.proj = nn.Sequential(nn.Hardswish(), LinBN(heads * 64, do))

    def forward(self, x):
        return self.a(x)


class LeViT(nn.Module):
    """LeViT: 4 strided 3x3 convolutions (16x16 patches), token stages, mean-pooled head."""

    def __init__(self, dims=(128, 256, 384), heads=(4, 6, 8), depths=(2, 3, 4), res=14):
        super().__init__()
        self.stem = nn.Sequential(
            cba(3, 16, 3, 2, act=nn.Hardswish), cba(16, 32, 3, 2, act=nn.Hardswish),
            cba(32, 64, 3, 2, act=nn.Hardswish), cba(64, 128, 3, 2, act=None))  # fmt: skip
        blocks = []
        for i, (d, h, n) in enumerate(zip(dims, heads, depths)):
            for _ in range(n):
                blocks += [LeRes(LeAttn(d, h, 16, 2, res)), LeMLP(d, 2)]
            if i < len(dims) - 1:
                blocks += [LeShrink(d, dims[i + 1], d // 16, res), LeMLP(dims[i + 1], 2)]
                res = (res + 1) // 2
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(dims[-1], 1000)

    def forward(self, x):
        x = self.stem(x).flatten(2).transpose(1, 2)
        return self.head(self.blocks(x).mean(1))


def levit_128s() -> nn.Module:
    """LeViT-128S, Einsum attention, no distillation head (Graham et al., ICCV 2021); input
    (1, 3, 224, 224)."""
    return LeViT()


# -------------------------------------------------------------------------------------- U-Net
class UNet(nn.Module):
    """U-Net: 5 levels of double 3x3 convolutions, max-pool down, bilinear Resize up."""

    def __init__(self, c=(32, 64, 128, 256, 512), classes=2):
        super().__init__()

        def dbl(ci, co):
            return nn.Sequential(cba(ci, co), cba(co, co))

        self.down = nn.ModuleList([dbl(3, c[0])] + [dbl(c[i], c[i + 1]) for i in range(4)])
        self.up = nn.ModuleList([dbl(c[i] + c[i + 1], c[i]) for i in range(4)])
        self.out = nn.Conv2d(c[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else F.max_pool2d(x, 2))
            skips.append(x)
        x = skips.pop()
        for i in reversed(range(4)):
            x = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=True)
            x = self.up[i](torch.cat([skips.pop(), x], 1))
        return self.out(x)


def unet() -> nn.Module:
    """U-Net, widths 32-512, bilinear upsampling (Ronneberger et al., MICCAI 2015); input
    (1, 3, 128, 128)."""
    return UNet()


# ------------------------------------------------------------------------ LSTM acoustic model
class LSTMNet(nn.Module):
    """2-layer LSTM, 256 wide, on 40 filterbank features per frame, 29 outputs per frame."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(40, 256, 2, batch_first=True)
        self.fc = nn.Linear(256, 29)

    def forward(self, x):
        return self.fc(self.lstm(x)[0])


def lstm_am() -> nn.Module:
    """LSTM acoustic model (Hochreiter & Schmidhuber, Neural Computation 1997; as in Graves et
    al., ICASSP 2013): 2 x 256, 100 frames; input (1, 100, 40)."""
    return LSTMNet()


# ------------------------------------------------------------------------------------ DS-CNN-L
def dscnn_l() -> nn.Module:
    """DS-CNN-L keyword spotting, 276 channels (Zhang et al., "Hello Edge", arXiv 2017); input
    (1, 1, 49, 10) MFCCs."""
    layers = [cba(1, 276, (10, 4), 2, p=(5, 1))]
    for _ in range(5):
        layers += [cba(276, 276, 3, g=276), cba(276, 276, 1)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(276, 12)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------------------------------ M5
def m5() -> nn.Module:
    """M5 raw-waveform classifier (Dai et al., ICASSP 2017); input (1, 1, 16000) samples."""

    def c1(ci, co, k, s=1):
        return nn.Sequential(nn.Conv1d(ci, co, k, s, k // 2 if k < 80 else 0),
                             nn.BatchNorm1d(co), nn.ReLU())  # fmt: skip

    return nn.Sequential(c1(1, 128, 80, 4), nn.MaxPool1d(4), c1(128, 128, 3), nn.MaxPool1d(4),
                         c1(128, 256, 3), nn.MaxPool1d(4), c1(256, 512, 3), nn.MaxPool1d(4),
                         nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(512, 10))  # fmt: skip


# ----------------------------------------------------------------------------------------- TCN
class TCNBlock(nn.Module):
    """Residual block of two causal (left-padded) dilated 1-D convolutions."""

    def __init__(self, c, d):
        super().__init__()
        self.pad = d * 2
        self.c1, self.c2 = nn.Conv1d(c, c, 3, dilation=d), nn.Conv1d(c, c, 3, dilation=d)

    def forward(self, x):
        y = F.relu(self.c1(F.pad(x, (self.pad, 0))))
        y = F.relu(self.c2(F.pad(y, (self.pad, 0))))
        return F.relu(x + y)


def tcn() -> nn.Module:
    """TCN, 128 channels, dilations 1-128 (Bai, Kolter & Koltun, arXiv 2018); input (1, 40,
    400)."""
    return nn.Sequential(nn.Conv1d(40, 128, 1), *[TCNBlock(128, 2**i) for i in range(8)],
                         nn.Conv1d(128, 29, 1))  # fmt: skip


# ---------------------------------------------------------------------------------- DeepLab
class ASPP(nn.Module):
    """Atrous spatial pyramid pooling: 1x1, 3x3 at rates 6/12/18, image pooling, projection."""

    def __init__(self, ci, co=128):
        super().__init__()
        self.b = nn.ModuleList([cba(ci, co, 1)] + [cba(ci, co, 3, d=r) for r in (6, 12, 18)])
        self.pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(ci, co, 1), nn.ReLU())
        self.proj = cba(5 * co, co, 1)

    def forward(self, x):
        p = self.pool(x).expand(-1, -1, x.shape[2], x.shape[3])
        return self.proj(torch.cat([b(x) for b in self.b] + [p], 1))


class SplitDil(nn.Module):
    """Half the channels at dilation 1, half at dilation 2 (torch.split), reflect-padded."""

    def __init__(self, c):
        super().__init__()
        self.a = nn.Conv2d(c // 2, c // 2, 3, groups=3)
        self.b = nn.Conv2d(c // 2, c // 2, 3, dilation=2, groups=3)

    def forward(self, x):
        a, b = x.split(x.shape[1] // 2, 1)
        a = self.a(F.pad(a, (1, 1, 1, 1), mode="reflect"))
        b = self.b(F.pad(b, (2, 2, 2, 2), mode="reflect"))
        return F.relu(torch.cat([a, b], 1)) + x


class DeepLabLite(nn.Module):
    """Grouped (groups=3) dilated backbone at output stride 8, ASPP, bilinear Resize back."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(cba(3, 48, 3, 2), cba(48, 96, 3, 2, g=3), SplitDil(96),
                                  cba(96, 192, 3, 2, g=3), SplitDil(192), SplitDil(192),
                                  cba(192, 384, 3, 1, g=3, d=2), SplitDil(384))  # fmt: skip
        self.aspp = ASPP(384)
        self.cls = nn.Conv2d(128, 21, 1)

    def forward(self, x):
        y = self.cls(self.aspp(self.stem(x)))
        return F.interpolate(y, size=x.shape[2:], mode="bilinear", align_corners=False)


def deeplab_lite() -> nn.Module:
    """DeepLabv3-style segmentation (Chen et al., "Rethinking Atrous Convolution", arXiv 2017)
    on a small grouped backbone; input (1, 3, 160, 160)."""
    return DeepLabLite()


# -------------------------------------------------------------------------------- MLP-Mixer
class MixerBlock(nn.Module):
    """Mixer block: token-mixing MLP across the ``n`` patches, channel-mixing MLP (GELU)."""

    def __init__(self, n, d, tok, ch):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.t1, self.t2 = nn.Linear(n, tok), nn.Linear(tok, n)
        self.c1, self.c2 = nn.Linear(d, ch), nn.Linear(ch, d)

    def forward(self, x):
        y = self.ln1(x).transpose(1, 2)
        x = x + self.t2(F.gelu(self.t1(y))).transpose(1, 2)
        return x + self.c2(F.gelu(self.c1(self.ln2(x))))


class Mixer(nn.Module):
    """MLP-Mixer: 16x16 patch embedding, mixer blocks, LayerNorm, mean-pooled head."""

    def __init__(self, side=160, p=16, d=256, depth=8, tok=128, ch=1024):
        super().__init__()
        n = (side // p) ** 2
        self.patch = nn.Conv2d(3, d, p, p)
        self.blocks = nn.Sequential(*[MixerBlock(n, d, tok, ch) for _ in range(depth)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        return self.head(self.ln(self.blocks(x)).mean(1))


def mixer_s16() -> nn.Module:
    """MLP-Mixer, patch 16, width 256, 8 blocks (Tolstikhin et al., NeurIPS 2021); input (1, 3,
    160, 160)."""
    return Mixer()


NETS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "ghostnet": (ghostnet, (1, 3, 160, 160)),
    "mnasnet_a1": (mnasnet_a1, (1, 3, 192, 192)),
    "regnetx_400mf": (regnetx_400mf, (1, 3, 224, 224)),
    "densenet121": (densenet121, (1, 3, 128, 128)),
    "inception_v3": (inception_v3, (1, 3, 160, 160)),
    "convnext_nano": (convnext_nano, (1, 3, 160, 160)),
    "mobilevit_xs": (mobilevit_xs, (1, 3, 192, 192)),
    "swin_c48": (swin_c48, (1, 3, 224, 224)),
    "levit_128s": (levit_128s, (1, 3, 224, 224)),
    "unet": (unet, (1, 3, 128, 128)),
    "lstm_am": (lstm_am, (1, 100, 40)),
    "dscnn_l": (dscnn_l, (1, 1, 49, 10)),
    "m5": (m5, (1, 1, 16000)),
    "tcn": (tcn, (1, 40, 400)),
    "deeplab_lite": (deeplab_lite, (1, 3, 160, 160)),
    "mixer_s16": (mixer_s16, (1, 3, 160, 160)),
}
"""name -> (builder, input shape at batch 1)."""

NAMES: tuple[str, ...] = tuple(NETS)
"""The networks' names, in the order the tables list them."""


def describe(name: str) -> str:
    """The first line of the builder's docstring of ``name`` (its paper), without the shape."""
    doc = " ".join((NETS[name][0].__doc__ or name).split())
    return doc.split("; input")[0]


def build(name: str) -> tuple[nn.Module, tuple[int, ...]]:
    """(the network ``name`` in eval mode, its input shape at batch 1).

    Weights come from ``torch.manual_seed(0)``; every batch norm gets running means in
    [-0.1, 0.1] and variances in [0.5, 1.5] (not the identity statistics of a fresh module),
    so the same name builds the same network, with realistic activations, every time.

    Raises:
        KeyError: ``name`` is not one of :data:`NAMES`.
    """
    builder, shape = NETS[name]
    return seeded(builder), shape


def seeded(builder) -> nn.Module:
    """``builder()`` in eval mode, its weights from ``torch.manual_seed(0)`` and every batch
    norm's running means in [-0.1, 0.1] and variances in [0.5, 1.5] (:func:`build`'s rule)."""
    torch.manual_seed(0)
    model = builder().eval()
    for mod in model.modules():
        if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
            mod.running_mean.uniform_(-0.1, 0.1)
            mod.running_var.uniform_(0.5, 1.5)
    return model
