"""A third set of ten networks hwnas has never seen, written from their papers (plain torch.nn,
random initialisation) for helper-79's report-only audit on 2026-12-07 and taken in here so that
the benchmark can be run again:

- EfficientNetV2-S at width 0.5 (Tan & Le, ICML 2021), input (1, 3, 128, 128);
- RegNetY-200MF (Radosavovic et al., CVPR 2020), input (1, 3, 224, 224);
- MobileOne-S0 in its inference (reparameterised) form (Vasu et al., CVPR 2023), 224 px;
- a FastViT-T8-like network (Vasu et al., ICCV 2023; attention in its last stage), 192 px;
- ConvNeXt-V2-atto with global response normalisation (Woo et al., CVPR 2023), 160 px;
- CSPDarknet53-tiny, the YOLOv4-tiny backbone with two outputs (Bochkovskiy et al., 2020),
  256 px;
- WaveNet, two stacks of dilated gated causal 1-D convolutions (van den Oord et al., 2016),
  input (1, 1, 8000) (one second of 8 kHz audio);
- a Conformer encoder, four blocks of width 144 (Gulati et al., Interspeech 2020), input
  (1, 1, 400, 80) (400 frames of 80 mel bins);
- a MixNet-S-like network with mixed depthwise kernels (Tan & Le, BMVC 2019), 224 px;
- RepVGG-A0 in its inference form (Ding et al., CVPR 2021), 160 px.

None of these families is in :mod:`unseen_networks_models`, :mod:`unseen_networks_models_b`,
``experiments/onnx_beyond_images.py``, the mobilenetv4 and vit spaces or
``hwnas.known_networks``.

``python experiments/unseen_networks.py --models unseen_networks_models_c --out
runs/unseen_networks_c --passes 3``. ``build(name)`` -> (model, input shape, input dtype);
``example(name)``: an input of that shape and dtype. Weights follow :func:`seeded`, the rule of
the other two sets.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from unseen_networks_models import SE, LN2d, cba, seeded  # the same blocks and weights rule


def _rd(v, d=8):
    """``v`` rounded to a multiple of ``d`` (at least ``d``)."""
    return max(d, int(v + d / 2) // d * d)


def conv_relu(ci, co, k, s, g=1):
    """Conv (bias, batch norm folded in) + ReLU: a reparameterised block at inference."""
    return nn.Sequential(nn.Conv2d(ci, co, k, s, k // 2, groups=g, bias=True), nn.ReLU())


# ------------------------------------------------------------------ EfficientNetV2-S (w 0.5)
class FusedMB(nn.Module):
    def __init__(self, ci, co, s, e):
        super().__init__()
        h = ci * e
        self.res = s == 1 and ci == co
        if e == 1:
            self.body = cba(ci, co, 3, s, act=nn.SiLU)
        else:
            self.body = nn.Sequential(cba(ci, h, 3, s, act=nn.SiLU), cba(h, co, 1, act=None))

    def forward(self, x):
        y = self.body(x)
        return x + y if self.res else y


class MBConv(nn.Module):
    def __init__(self, ci, co, s, e, k=3):
        super().__init__()
        h = ci * e
        self.res = s == 1 and ci == co
        self.body = nn.Sequential(
            cba(ci, h, 1, act=nn.SiLU),
            cba(h, h, k, s, g=h, act=nn.SiLU),
            SE(h, max(1, ci // 4), act=nn.SiLU),
            cba(h, co, 1, act=None),
        )

    def forward(self, x):
        y = self.body(x)
        return x + y if self.res else y


def efficientnetv2_s_w05(w=0.5):
    """EfficientNetV2-S at width 0.5 (Tan & Le, ICML 2021, Table 4: Fused-MBConv stages then
    MBConv with SE, depths 2-4-4-6-9-15); input (1, 3, 128, 128)."""
    cfg = [
        ("f", 1, 1, 24, 2),
        ("f", 4, 2, 48, 4),
        ("f", 4, 2, 64, 4),
        ("m", 4, 2, 128, 6),
        ("m", 6, 1, 160, 9),
        ("m", 6, 2, 256, 15),
    ]  # (type, expansion, stride, out, repeats)
    c0 = _rd(24 * w)
    layers = [cba(3, c0, 3, 2, act=nn.SiLU)]
    ci = c0
    for t, e, s, c, n in cfg:
        co = _rd(c * w)
        for i in range(n):
            layers.append((FusedMB if t == "f" else MBConv)(ci, co, s if i == 0 else 1, e))
            ci = co
    last = _rd(1280 * w)
    layers += [
        cba(ci, last, 1, act=nn.SiLU),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(last, 1000),
    ]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ RegNetY-200MF
class YBlock(nn.Module):
    def __init__(self, ci, co, s, gw):
        super().__init__()
        self.a = cba(ci, co, 1)
        self.b = cba(co, co, 3, s, g=co // gw)
        self.se = SE(co, max(1, int(ci * 0.25)))
        self.c = cba(co, co, 1, act=None)
        self.proj = cba(ci, co, 1, s, act=None) if (s != 1 or ci != co) else None

    def forward(self, x):
        y = self.c(self.se(self.b(self.a(x))))
        sc = x if self.proj is None else self.proj(x)
        return F.relu(y + sc)


def regnety_200mf():
    """RegNetY-200MF (Radosavovic et al., CVPR 2020: widths 24-56-152-368, depths 1-1-4-7,
    group width 8, SE 0.25); input (1, 3, 224, 224)."""
    layers = [cba(3, 32, 3, 2)]
    ci = 32
    for w, d in zip([24, 56, 152, 368], [1, 1, 4, 7]):
        for i in range(d):
            layers.append(YBlock(ci, w, 2 if i == 0 else 1, 8))
            ci = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(ci, 1000)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ MobileOne-S0 (inference)
def mobileone_s0():
    """MobileOne-S0 in its inference form (Vasu et al., CVPR 2023: depthwise 3x3 + pointwise
    1x1 blocks, widths 48-128-256-1024, blocks 2-8-10-1); input (1, 3, 224, 224)."""
    layers = [conv_relu(3, 48, 3, 2)]
    ci = 48
    for c, n in zip([48, 128, 256, 1024], [2, 8, 10, 1]):
        for i in range(n):
            layers += [conv_relu(ci, ci, 3, 2 if i == 0 else 1, g=ci), conv_relu(ci, c, 1, 1)]
            ci = c
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(ci, 1000)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ FastViT-T8-like
class RepMixer(nn.Module):
    """FastViT's token mixer at inference: x + depthwise 3x3(x) (reparameterised)."""

    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 3, 1, 1, groups=c)

    def forward(self, x):
        return x + self.dw(x)


class ConvFFN(nn.Module):
    def __init__(self, c, r=3):
        super().__init__()
        self.dw = cba(c, c, 7, g=c, act=None)
        self.f1 = nn.Conv2d(c, c * r, 1)
        self.f2 = nn.Conv2d(c * r, c, 1)

    def forward(self, x):
        return x + self.f2(F.gelu(self.f1(self.dw(x))))


class MHSA2d(nn.Module):
    def __init__(self, c, hd=32):
        super().__init__()
        self.h = c // hd
        self.norm = nn.BatchNorm2d(c)
        self.qkv = nn.Linear(c, 3 * c, bias=False)
        self.proj = nn.Linear(c, c)

    def forward(self, x):
        b, c, hh, ww = x.shape
        t = self.norm(x).flatten(2).transpose(1, 2)
        n = t.shape[1]
        q, k, v = self.qkv(t).reshape(b, n, 3, self.h, c // self.h).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1)) * (c // self.h) ** -0.5
        o = (a.softmax(-1) @ v).transpose(1, 2).reshape(b, n, c)
        o = self.proj(o).transpose(1, 2).reshape(b, c, hh, ww)
        return x + o


def fastvit_t8():
    """FastViT-T8-like (Vasu et al., ICCV 2023: widths 48-96-192-384, depths 2-2-4-2, RepMixer
    and ConvFFN; here the last stage uses attention as the SA variants do); input (1, 3, 192,
    192)."""
    ws, ds = [48, 96, 192, 384], [2, 2, 4, 2]
    layers = [
        cba(3, 48, 3, 2, act=nn.GELU),
        cba(48, 48, 3, 2, g=48, act=nn.GELU),
        cba(48, 48, 1, act=nn.GELU),
    ]
    ci = 48
    for si, (w, d) in enumerate(zip(ws, ds)):
        if si > 0:  # grouped 7x7 downsampling (w is a multiple of ci)
            layers += [cba(ci, w, 7, 2, g=ci, act=nn.GELU), cba(w, w, 1, act=nn.GELU)]
            ci = w
        for _ in range(d):
            layers += [MHSA2d(w) if si == 3 else RepMixer(w), ConvFFN(w)]
    layers += [
        cba(ci, 768, 3, g=ci, act=nn.GELU),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(768, 1000),
    ]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ ConvNeXt-V2-atto
class GRN(nn.Module):
    """Global response normalisation (ConvNeXt V2) on channels-last tensors."""

    def __init__(self, c):
        super().__init__()
        self.g = nn.Parameter(torch.randn(1, 1, 1, c) * 0.1)
        self.b = nn.Parameter(torch.randn(1, 1, 1, c) * 0.1)

    def forward(self, x):
        gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
        nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
        return self.g * (x * nx) + self.b + x


class CNv2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, 1, 3, groups=c)
        self.ln = nn.LayerNorm(c, eps=1e-6)
        self.p1 = nn.Linear(c, 4 * c)
        self.grn = GRN(4 * c)
        self.p2 = nn.Linear(4 * c, c)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.p2(self.grn(F.gelu(self.p1(self.ln(y)))))
        return x + y.permute(0, 3, 1, 2)


def convnextv2_atto():
    """ConvNeXt-V2-atto (Woo et al., CVPR 2023: widths 40-80-160-320, depths 2-2-6-2, GRN);
    input (1, 3, 160, 160)."""
    ws, ds = [40, 80, 160, 320], [2, 2, 6, 2]
    layers = [nn.Conv2d(3, 40, 4, 4), LN2d(40)]
    ci = 40
    for si, (w, d) in enumerate(zip(ws, ds)):
        if si > 0:
            layers += [LN2d(ci), nn.Conv2d(ci, w, 2, 2)]
            ci = w
        layers += [CNv2Block(w) for _ in range(d)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(ci), nn.Linear(ci, 1000)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ CSPDarknet53-tiny
def cbl(ci, co, k=3, s=1):
    """Conv + batch norm + LeakyReLU(0.1), Darknet's block."""
    return cba(ci, co, k, s, act=lambda: nn.LeakyReLU(0.1))


class CSPTinyBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c1 = cbl(c, c)
        self.c2 = cbl(c // 2, c // 2)
        self.c3 = cbl(c // 2, c // 2)
        self.c4 = cbl(c, c, 1)
        self.pool = nn.MaxPool2d(2, 2)

    def forward(self, x):
        x = self.c1(x)
        r = x
        x = x[:, x.shape[1] // 2 :]  # route groups=2, group_id=1
        x = self.c2(x)
        r1 = x
        x = self.c3(x)
        x = self.c4(torch.cat([x, r1], 1))
        f = x
        return self.pool(torch.cat([r, x], 1)), f


class CSPDarknetTiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(cbl(3, 32, 3, 2), cbl(32, 64, 3, 2))
        self.b1, self.b2, self.b3 = CSPTinyBlock(64), CSPTinyBlock(128), CSPTinyBlock(256)
        self.c5 = cbl(512, 512)

    def forward(self, x):
        x = self.stem(x)
        x, _ = self.b1(x)
        x, _ = self.b2(x)
        x, f4 = self.b3(x)
        return self.c5(x), f4


def cspdarknet_tiny():
    """CSPDarknet53-tiny, the YOLOv4-tiny backbone (Bochkovskiy et al., 2020; two outputs,
    strides 32 and 16); input (1, 3, 256, 256)."""
    return CSPDarknetTiny()


# ------------------------------------------------------------------ WaveNet
class WaveBlock(nn.Module):
    def __init__(self, c, skip, d):
        super().__init__()
        self.d = d
        self.conv = nn.Conv1d(c, 2 * c, 2, dilation=d)
        self.res = nn.Conv1d(c, c, 1)
        self.skip = nn.Conv1d(c, skip, 1)

    def forward(self, x):
        a, b = self.conv(F.pad(x, (self.d, 0))).chunk(2, 1)
        z = torch.tanh(a) * torch.sigmoid(b)
        return x + self.res(z), self.skip(z)


class WaveNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Conv1d(1, 32, 1)
        self.blocks = nn.ModuleList([WaveBlock(32, 64, 2**i) for _ in range(2) for i in range(10)])
        self.o1 = nn.Conv1d(64, 64, 1)
        self.o2 = nn.Conv1d(64, 256, 1)

    def forward(self, x):
        x = self.inp(x)
        s = 0
        for b in self.blocks:
            x, k = b(x)
            s = s + k
        return self.o2(F.relu(self.o1(F.relu(s))))


def wavenet():
    """WaveNet (van den Oord et al., 2016: two stacks of gated causal convolutions with
    dilations 1-512, 32 residual and 64 skip channels, 256-way output); input (1, 1, 8000)."""
    return WaveNet()


# ------------------------------------------------------------------ Conformer
class FF(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.l1 = nn.Linear(d, 4 * d)
        self.l2 = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.l2(F.silu(self.l1(self.ln(x))))


class ConvModule(nn.Module):
    def __init__(self, d, k=31):
        super().__init__()
        self.ln = nn.LayerNorm(d)
        self.pw1 = nn.Conv1d(d, 2 * d, 1)
        self.dw = nn.Conv1d(d, d, k, padding=k // 2, groups=d)
        self.bn = nn.BatchNorm1d(d)
        self.pw2 = nn.Conv1d(d, d, 1)

    def forward(self, x):  # (B, T, D)
        y = F.glu(self.pw1(self.ln(x).transpose(1, 2)), dim=1)
        y = self.pw2(F.silu(self.bn(self.dw(y))))
        return y.transpose(1, 2)


class ConformerBlock(nn.Module):
    def __init__(self, d, h=4):
        super().__init__()
        self.ff1, self.ff2 = FF(d), FF(d)
        self.ln_a = nn.LayerNorm(d)
        self.att = nn.MultiheadAttention(d, h, batch_first=True)
        self.conv = ConvModule(d)
        self.ln_o = nn.LayerNorm(d)

    def forward(self, x):
        x = x + 0.5 * self.ff1(x)
        a = self.ln_a(x)
        x = x + self.att(a, a, a, need_weights=False)[0]
        x = x + self.conv(x)
        x = x + 0.5 * self.ff2(x)
        return self.ln_o(x)


class Conformer(nn.Module):
    def __init__(self, d=144, n=4):
        super().__init__()
        self.sub = nn.Sequential(nn.Conv2d(1, d, 3, 2), nn.ReLU(), nn.Conv2d(d, d, 3, 2), nn.ReLU())
        self.lin = nn.Linear(d * 19, d)  # 80 mel bins -> 19 after two stride-2 convolutions
        self.blocks = nn.Sequential(*[ConformerBlock(d) for _ in range(n)])
        self.out = nn.Linear(d, 128)

    def forward(self, x):  # (B, 1, T, 80)
        y = self.sub(x)
        b, c, t, f = y.shape
        y = self.lin(y.permute(0, 2, 1, 3).reshape(b, t, c * f))
        return self.out(self.blocks(y))


def conformer():
    """Conformer encoder (Gulati et al., Interspeech 2020: Conformer-S width 144, four blocks,
    4x convolutional subsampling); input (1, 1, 400, 80)."""
    return Conformer()


# ------------------------------------------------------------------ MixNet-S-like
class MixDW(nn.Module):
    """Mixed depthwise convolution: channel groups with kernels ``ks``."""

    def __init__(self, c, ks, s):
        super().__init__()
        n = len(ks)
        self.split = [c // n + (1 if i < c % n else 0) for i in range(n)]
        self.convs = nn.ModuleList(
            [
                nn.Conv2d(cs, cs, k, s, k // 2, groups=cs, bias=False)
                for cs, k in zip(self.split, ks)
            ]
        )

    def forward(self, x):
        parts = torch.split(x, self.split, 1)
        return torch.cat([cv(t) for cv, t in zip(self.convs, parts)], 1)


class MixBlock(nn.Module):
    def __init__(self, ci, co, ks, s, e, se, act):
        super().__init__()
        h = ci * e
        self.res = s == 1 and ci == co
        layers = [cba(ci, h, 1, act=act)] if e != 1 else []
        layers += [MixDW(h, ks, s), nn.BatchNorm2d(h), act()]
        if se:
            layers.append(SE(h, max(1, int(ci * se)), act=act))
        layers.append(cba(h, co, 1, act=None))
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        y = self.body(x)
        return x + y if self.res else y


def mixnet_s():
    """MixNet-S-like (Tan & Le, BMVC 2019: mixed depthwise kernels 3-11, SE, ReLU then Swish,
    16 blocks); input (1, 3, 224, 224)."""
    R, S = nn.ReLU, nn.SiLU
    cfg = [  # (out, kernels, stride, expansion, se, act)
        (16, [3], 1, 1, 0, R),
        (24, [3], 2, 6, 0, R),
        (24, [3], 1, 3, 0, R),
        (40, [3, 5, 7], 2, 6, 0.5, S),
        (40, [3, 5], 1, 6, 0.5, S),
        (40, [3, 5], 1, 6, 0.5, S),
        (40, [3, 5], 1, 6, 0.5, S),
        (80, [3, 5, 7], 2, 6, 0.25, S),
        (80, [3, 5], 1, 6, 0.25, S),
        (80, [3, 5], 1, 6, 0.25, S),
        (120, [3, 5, 7], 1, 6, 0.5, S),
        (120, [3, 5, 7, 9], 1, 3, 0.5, S),
        (120, [3, 5, 7, 9], 1, 3, 0.5, S),
        (200, [3, 5, 7, 9, 11], 2, 6, 0.5, S),
        (200, [3, 5, 7, 9], 1, 6, 0.5, S),
        (200, [3, 5, 7, 9], 1, 6, 0.5, S),
    ]
    layers = [cba(3, 16, 3, 2)]
    ci = 16
    for co, ks, s, e, se, act in cfg:
        layers.append(MixBlock(ci, co, ks, s, e, se, act))
        ci = co
    layers += [cba(ci, 1536, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1536, 1000)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ RepVGG-A0 (inference)
def repvgg_a0():
    """RepVGG-A0 in its inference form (Ding et al., CVPR 2021: plain 3x3 conv + ReLU, a=0.75,
    b=2.5, widths 48-48-96-192-1280, layers 1-2-4-14-1); input (1, 3, 160, 160)."""
    layers = [conv_relu(3, 48, 3, 2)]
    ci = 48
    for w, n in zip([48, 96, 192, 1280], [2, 4, 14, 1]):
        for i in range(n):
            layers.append(conv_relu(ci, w, 3, 2 if i == 0 else 1))
            ci = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(ci, 1000)]
    return nn.Sequential(*layers)


NETS = {
    "efficientnetv2_s_w05": (efficientnetv2_s_w05, (1, 3, 128, 128), torch.float32),
    "regnety_200mf": (regnety_200mf, (1, 3, 224, 224), torch.float32),
    "mobileone_s0": (mobileone_s0, (1, 3, 224, 224), torch.float32),
    "fastvit_t8": (fastvit_t8, (1, 3, 192, 192), torch.float32),
    "convnextv2_atto": (convnextv2_atto, (1, 3, 160, 160), torch.float32),
    "cspdarknet_tiny": (cspdarknet_tiny, (1, 3, 256, 256), torch.float32),
    "wavenet": (wavenet, (1, 1, 8000), torch.float32),
    "conformer": (conformer, (1, 1, 400, 80), torch.float32),
    "mixnet_s": (mixnet_s, (1, 3, 224, 224), torch.float32),
    "repvgg_a0": (repvgg_a0, (1, 3, 160, 160), torch.float32),
}
"""name -> (builder, input shape at batch 1, input dtype)."""

NAMES = tuple(NETS)
"""The networks' names, in the order the tables list them."""


def describe(name):
    """The builder's docstring of ``name`` (its paper), without the input shape."""
    doc = " ".join((NETS[name][0].__doc__ or name).split())
    return doc.split("; input")[0]


def build(name):
    """(the network ``name`` by :func:`seeded`, its input shape at batch 1, its input dtype)."""
    builder, shape, dtype = NETS[name]
    return seeded(builder), shape, dtype


def example(name):
    """A random input of ``name``'s shape and dtype."""
    _, shape, dtype = NETS[name]
    return torch.randn(shape, dtype=dtype)
