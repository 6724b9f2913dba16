"""A second set of thirteen networks hwnas has never seen, written from their papers (plain
torch.nn, random initialisation) for a report-only audit on 2026-12-06: ResNet-50,
EfficientNet-B0, MobileNetV3-Large, ShuffleNetV2 1.0x, SqueezeNet 1.1, DeiT-Tiny, a BERT-tiny
text encoder (int64 token ids), a bidirectional-GRU speech model, a YOLO-style detector with three
outputs, a VAE decoder (ConvTranspose, PixelShuffle), a causal GPT-style decoder (int64 tokens),
PoolFormer-S12 and an EfficientViT-style network with linear attention. None of these families is
in :mod:`unseen_networks_models`, ``experiments/onnx_beyond_images.py`` or the mobilenetv4 and
vit spaces (ResNet-50, EfficientNet-B0, MobileNetV3, ShuffleNetV2 and SqueezeNet are among
``hwnas.known_networks``' families, written again here).

``python experiments/unseen_networks.py --models unseen_networks_models_b``. ``build(name)`` ->
(model, input shape, input dtype); ``example(name)``: an input of that shape and dtype.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from unseen_networks_models import SE, cba, seeded  # the same blocks and weights rule


def _div(v, d=8):
    n = max(d, int(v + d / 2) // d * d)
    if n < 0.9 * v:
        n += d
    return n


# ------------------------------------------------------------------ ResNet-50
class Bottleneck(nn.Module):
    def __init__(self, ci, mid, s):
        super().__init__()
        co = mid * 4
        self.body = nn.Sequential(cba(ci, mid, 1), cba(mid, mid, 3, s), cba(mid, co, 1, act=None))
        self.down = cba(ci, co, 1, s, act=None) if (s != 1 or ci != co) else None

    def forward(self, x):
        sc = x if self.down is None else self.down(x)
        return F.relu(self.body(x) + sc)


def resnet50():
    """ResNet-50 (He et al., CVPR 2016); input (1, 3, 224, 224)."""
    layers = [cba(3, 64, 7, 2, p=3), nn.MaxPool2d(3, 2, 1)]
    ci = 64
    for mid, n, s in [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]:
        for i in range(n):
            layers.append(Bottleneck(ci, mid, s if i == 0 else 1))
            ci = mid * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(ci, 1000)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ EfficientNet-B0
class MBConv(nn.Module):
    def __init__(
        self,
        ci,
        co,
        k,
        s,
        e,
        se_ratio=0.25,
        act=nn.SiLU,
        se_gate=nn.Sigmoid,
        se_r=None,
        use_se=True,
        mid=None,
    ):
        super().__init__()
        mid = ci * e if mid is None else mid
        layers = []
        if mid != ci:
            layers.append(cba(ci, mid, 1, act=act))
        layers.append(cba(mid, mid, k, s, g=mid, act=act))
        if use_se:
            r = se_r if se_r is not None else max(1, int(ci * se_ratio))
            layers.append(SE(mid, r, act=nn.SiLU if act is nn.SiLU else nn.ReLU, gate=se_gate))
        layers.append(cba(mid, co, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.res = s == 1 and ci == co

    def forward(self, x):
        y = self.body(x)
        return x + y if self.res else y


def efficientnet_b0():
    """EfficientNet-B0 (Tan & Le, ICML 2019); input (1, 3, 224, 224)."""
    cfg = [
        (1, 3, 1, 16, 1),
        (6, 3, 2, 24, 2),
        (6, 5, 2, 40, 2),
        (6, 3, 2, 80, 3),
        (6, 5, 1, 112, 3),
        (6, 5, 2, 192, 4),
        (6, 3, 1, 320, 1),
    ]
    layers = [cba(3, 32, 3, 2, act=nn.SiLU)]
    ci = 32
    for e, k, s, co, n in cfg:
        for i in range(n):
            layers.append(MBConv(ci, co, k, s if i == 0 else 1, e))
            ci = co
    layers += [
        cba(ci, 1280, 1, act=nn.SiLU),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Dropout(0.2),
        nn.Linear(1280, 1000),
    ]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ MobileNetV3-Large
def mobilenetv3_large():
    """MobileNetV3-Large (Howard et al., ICCV 2019), hard-swish, hard-sigmoid SE; input (1, 3, 224,
    224).
    """
    HS, RE = nn.Hardswish, nn.ReLU
    cfg = [  # k, exp, out, se, act, s
        (3, 16, 16, False, RE, 1),
        (3, 64, 24, False, RE, 2),
        (3, 72, 24, False, RE, 1),
        (5, 72, 40, True, RE, 2),
        (5, 120, 40, True, RE, 1),
        (5, 120, 40, True, RE, 1),
        (3, 240, 80, False, HS, 2),
        (3, 200, 80, False, HS, 1),
        (3, 184, 80, False, HS, 1),
        (3, 184, 80, False, HS, 1),
        (3, 480, 112, True, HS, 1),
        (3, 672, 112, True, HS, 1),
        (5, 672, 160, True, HS, 2),
        (5, 960, 160, True, HS, 1),
        (5, 960, 160, True, HS, 1),
    ]
    layers = [cba(3, 16, 3, 2, act=HS)]
    ci = 16
    for k, exp, co, se, act, s in cfg:
        layers.append(
            MBConv(
                ci,
                co,
                k,
                s,
                1,
                mid=exp,
                act=act,
                se_gate=nn.Hardsigmoid,
                se_r=_div(exp // 4),
                use_se=se,
            )
        )
        ci = co
    layers += [
        cba(ci, 960, 1, act=HS),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(960, 1280),
        nn.Hardswish(),
        nn.Linear(1280, 1000),
    ]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ ShuffleNetV2 1.0x
def channel_shuffle(x, g):
    b, c, h, w = x.shape
    return x.view(b, g, c // g, h, w).transpose(1, 2).reshape(b, c, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, ci, co, s):
        super().__init__()
        self.s = s
        bc = co // 2
        if s > 1:
            self.b1 = nn.Sequential(cba(ci, ci, 3, s, g=ci, act=None), cba(ci, bc, 1))
        self.b2 = nn.Sequential(
            cba(ci if s > 1 else bc, bc, 1), cba(bc, bc, 3, s, g=bc, act=None), cba(bc, bc, 1)
        )

    def forward(self, x):
        if self.s == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat((a, self.b2(b)), 1)
        else:
            out = torch.cat((self.b1(x), self.b2(x)), 1)
        return channel_shuffle(out, 2)


def shufflenetv2():
    """ShuffleNetV2 1.0x (Ma et al., ECCV 2018); input (1, 3, 224, 224)."""
    layers = [cba(3, 24, 3, 2), nn.MaxPool2d(3, 2, 1)]
    ci = 24
    for co, n in [(116, 4), (232, 8), (464, 4)]:
        for i in range(n):
            layers.append(ShuffleUnit(ci, co, 2 if i == 0 else 1))
            ci = co
    layers += [cba(ci, 1024, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(1024, 1000)]
    return nn.Sequential(*layers)


# ------------------------------------------------------------------ SqueezeNet 1.1
class Fire(nn.Module):
    def __init__(self, ci, sq, e):
        super().__init__()
        self.sq = nn.Sequential(nn.Conv2d(ci, sq, 1), nn.ReLU())
        self.e1 = nn.Sequential(nn.Conv2d(sq, e, 1), nn.ReLU())
        self.e3 = nn.Sequential(nn.Conv2d(sq, e, 3, padding=1), nn.ReLU())

    def forward(self, x):
        x = self.sq(x)
        return torch.cat([self.e1(x), self.e3(x)], 1)


def squeezenet11():
    """SqueezeNet 1.1 (Iandola et al., arXiv 2016); input (1, 3, 224, 224)."""
    mp = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # noqa: E731
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, 2),
        nn.ReLU(),
        mp(),
        Fire(64, 16, 64),
        Fire(128, 16, 64),
        mp(),
        Fire(128, 32, 128),
        Fire(256, 32, 128),
        mp(),
        Fire(256, 48, 192),
        Fire(384, 48, 192),
        Fire(384, 64, 256),
        Fire(512, 64, 256),
        nn.Dropout(0.5),
        nn.Conv2d(512, 1000, 1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )


# ------------------------------------------------------------------ DeiT-Tiny
class Attn(nn.Module):
    """Hand-written multi-head self-attention (qkv Linear, softmax, proj), optional causal mask."""

    def __init__(self, d, h, causal=False, n=None):
        super().__init__()
        self.h, self.dh = h, d // h
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.causal = causal
        if causal:
            self.register_buffer("mask", torch.full((n, n), float("-inf")).triu(1))

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1)) * (self.dh**-0.5)
        if self.causal:
            a = a + self.mask[:n, :n]
        a = a.softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    def __init__(self, d, h, mlp=4, causal=False, n=None, act=nn.GELU):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attn(d, h, causal, n)
        self.mlp = nn.Sequential(nn.Linear(d, mlp * d), act(), nn.Linear(mlp * d, d))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class DeiT(nn.Module):
    def __init__(self, d=192, depth=12, h=3, img=224, p=16):
        super().__init__()
        self.patch = nn.Conv2d(3, d, p, p)
        n = (img // p) ** 2
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, n + 1, d) * 0.02)
        self.blocks = nn.Sequential(*[Block(d, h) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 1000)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


def deit_tiny():
    """DeiT-Tiny, 12 blocks, d=192, 3 heads (Touvron et al., ICML 2021); input (1, 3, 224, 224)."""
    return DeiT()


# ------------------------------------------------------------------ BERT-tiny (int64 tokens)
class BertTiny(nn.Module):
    def __init__(self, vocab=30522, d=128, depth=2, h=2, n=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(512, d)
        self.ln = nn.LayerNorm(d)
        self.blocks = nn.ModuleList(
            [
                nn.TransformerEncoderLayer(d, h, 4 * d, 0.0, "gelu", batch_first=True)
                for _ in range(depth)
            ]
        )
        self.pool = nn.Linear(d, d)
        self.cls = nn.Linear(d, 2)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        x = self.ln(self.tok(ids) + self.pos(pos))
        for b in self.blocks:
            x = b(x)
        return self.cls(torch.tanh(self.pool(x[:, 0])))


def bert_tiny():
    """BERT-tiny text encoder, L=2 H=128 A=2 (Turc et al., 2019), nn.TransformerEncoderLayer; input
    (1, 128) int64 token ids.
    """
    return BertTiny()


# ------------------------------------------------------------------ GRU speech model
class GRUSpeech(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(80, 256, 5, 2, 2), nn.BatchNorm1d(256), nn.ReLU())
        self.gru = nn.GRU(256, 320, num_layers=3, batch_first=True, bidirectional=True)
        self.out = nn.Linear(640, 29)

    def forward(self, x):  # x: (B, T, 80)
        x = self.conv(x.transpose(1, 2)).transpose(1, 2)
        y, _ = self.gru(x)
        return self.out(y).log_softmax(-1)


def gru_speech():
    """GRU acoustic model, conv front end + 3 bidirectional GRU layers of 320 (DeepSpeech2-style,
    Amodei et al., ICML 2016); input (1, 200, 80) filterbanks.
    """
    return GRUSpeech()


# ------------------------------------------------------------------ small YOLO-style detector
def cbs(ci, co, k=1, s=1, p=None):
    return cba(ci, co, k, s, act=nn.SiLU, p=p)


class C3(nn.Module):
    """CSP bottleneck with 3 convolutions (YOLOv5)."""

    def __init__(self, ci, co, n=1, shortcut=True):
        super().__init__()
        c = co // 2
        self.cv1, self.cv2, self.cv3 = cbs(ci, c), cbs(ci, c), cbs(2 * c, co)
        self.m = nn.ModuleList([nn.Sequential(cbs(c, c, 1), cbs(c, c, 3)) for _ in range(n)])
        self.shortcut = shortcut

    def forward(self, x):
        y = self.cv1(x)
        for m in self.m:
            y = y + m(y) if self.shortcut else m(y)
        return self.cv3(torch.cat([y, self.cv2(x)], 1))


class SPPF(nn.Module):
    def __init__(self, ci, co):
        super().__init__()
        c = ci // 2
        self.cv1, self.cv2, self.mp = cbs(ci, c), cbs(4 * c, co), nn.MaxPool2d(5, 1, 2)

    def forward(self, x):
        x = self.cv1(x)
        y1 = self.mp(x)
        y2 = self.mp(y1)
        return self.cv2(torch.cat([x, y1, y2, self.mp(y2)], 1))


class YoloN(nn.Module):
    def __init__(self, w=(16, 32, 64, 128, 256), nc=80, na=3):
        super().__init__()
        a, b, c, d, e = w
        self.b0 = nn.Sequential(cbs(3, a, 6, 2, p=2), cbs(a, b, 3, 2), C3(b, b, 1))
        self.b1 = nn.Sequential(cbs(b, c, 3, 2), C3(c, c, 2))  # P3 /8
        self.b2 = nn.Sequential(cbs(c, d, 3, 2), C3(d, d, 3))  # P4 /16
        self.b3 = nn.Sequential(cbs(d, e, 3, 2), C3(e, e, 1), SPPF(e, e))  # P5 /32
        self.up = nn.Upsample(scale_factor=2, mode="nearest")
        self.l1, self.c1 = cbs(e, d), C3(2 * d, d, 1, False)
        self.l2, self.c2 = cbs(d, c), C3(2 * c, c, 1, False)
        self.d1, self.c3 = cbs(c, c, 3, 2), C3(2 * c, d, 1, False)
        self.d2, self.c4 = cbs(d, d, 3, 2), C3(2 * d, e, 1, False)
        no = na * (nc + 5)
        self.heads = nn.ModuleList([nn.Conv2d(ch, no, 1) for ch in (c, d, e)])

    def forward(self, x):
        x = self.b0(x)
        p3 = self.b1(x)
        p4 = self.b2(p3)
        p5 = self.b3(p4)
        h5 = self.l1(p5)
        f4 = self.c1(torch.cat([self.up(h5), p4], 1))
        h4 = self.l2(f4)
        o3 = self.c2(torch.cat([self.up(h4), p3], 1))
        o4 = self.c3(torch.cat([self.d1(o3), h4], 1))
        o5 = self.c4(torch.cat([self.d2(o4), h5], 1))
        return tuple(h(o).sigmoid() for h, o in zip(self.heads, (o3, o4, o5)))


def yolo_nano():
    """YOLOv5n-style detector: CSP (C3) backbone, SPPF, PANet neck with nearest Upsample + Concat,
    3 output heads (Jocher et al., 2020); input (1, 3, 320, 320).
    """
    return YoloN()


# ------------------------------------------------------------------ VAE decoder
class ResBlk(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.b = nn.Sequential(
            nn.GroupNorm(8, c),
            nn.SiLU(),
            nn.Conv2d(c, c, 3, 1, 1),
            nn.GroupNorm(8, c),
            nn.SiLU(),
            nn.Conv2d(c, c, 3, 1, 1),
        )

    def forward(self, x):
        return x + self.b(x)


def vae_decoder():
    """VAE decoder (Kingma & Welling 2014; up-sampling as in ESPCN, Shi et al., CVPR 2016): latent
    4x32x32 -> ResBlocks with GroupNorm/SiLU, ConvTranspose2d x2, PixelShuffle x2 -> 3x256x256;
    input (1, 4, 32, 32).
    """
    return nn.Sequential(
        nn.Conv2d(4, 128, 3, 1, 1),
        ResBlk(128),
        ResBlk(128),
        nn.ConvTranspose2d(128, 128, 4, 2, 1),
        ResBlk(128),  # 64
        nn.ConvTranspose2d(128, 64, 4, 2, 1),
        ResBlk(64),  # 128
        nn.Conv2d(64, 32 * 4, 3, 1, 1),
        nn.PixelShuffle(2),
        nn.SiLU(),  # 256
        nn.GroupNorm(8, 32),
        nn.Conv2d(32, 3, 3, 1, 1),
        nn.Tanh(),
    )


# ------------------------------------------------------------------ GPT-style causal decoder
class GPT(nn.Module):
    def __init__(self, vocab=8192, d=256, depth=6, h=8, n=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, n, d) * 0.02)
        self.blocks = nn.Sequential(*[Block(d, h, causal=True, n=n) for _ in range(depth)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, ids):
        x = self.tok(ids) + self.pos[:, : ids.shape[1]]
        return self.head(self.ln(self.blocks(x)))


def gpt_mini():
    """GPT-style causal decoder, 6 layers, d=256, 8 heads, vocab 8192, causal mask (Radford et al.,
    2019); input (1, 64) int64 token ids.
    """
    return GPT()


# ------------------------------------------------------------------ PoolFormer-S12
class GNorm(nn.GroupNorm):
    def __init__(self, c):
        super().__init__(1, c)


class PoolBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n1, self.n2 = GNorm(c), GNorm(c)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.mlp = nn.Sequential(nn.Conv2d(c, 4 * c, 1), nn.GELU(), nn.Conv2d(4 * c, c, 1))
        self.s1 = nn.Parameter(torch.full((c, 1, 1), 1e-5 * 0 + 0.1))
        self.s2 = nn.Parameter(torch.full((c, 1, 1), 0.1))

    def forward(self, x):
        y = self.n1(x)
        x = x + self.s1 * (self.pool(y) - y)
        return x + self.s2 * self.mlp(self.n2(x))


def poolformer_s12():
    """PoolFormer-S12, widths 64-512, depths 2-2-6-2 (Yu et al., CVPR 2022); input (1, 3, 224,
    224).
    """
    ws, ds = (64, 128, 320, 512), (2, 2, 6, 2)
    layers = [nn.Conv2d(3, 64, 7, 4, 2)]
    for i, (w, d) in enumerate(zip(ws, ds)):
        if i:
            layers.append(nn.Conv2d(ws[i - 1], w, 3, 2, 1))
        layers += [PoolBlock(w) for _ in range(d)]
    layers += [GNorm(512), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


# -- EfficientViT-style linear attention
class LiteMLA(nn.Module):
    """ReLU linear attention (EfficientViT, Cai et al., ICCV 2023): O(N) global attention."""

    def __init__(self, c, dh=16):
        super().__init__()
        self.h, self.dh = c // dh, dh
        self.qkv = nn.Conv2d(c, 3 * c, 1, bias=False)
        self.agg = nn.Sequential(
            nn.Conv2d(3 * c, 3 * c, 5, 1, 2, groups=3 * c, bias=False),
            nn.Conv2d(3 * c, 3 * c, 1, groups=3 * self.h, bias=False),
        )
        self.proj = cba(2 * c, c, 1, act=None)

    def _att(self, qkv):
        b, _, hh, ww = qkv.shape
        qkv = qkv.reshape(b, -1, 3 * self.dh, hh * ww).transpose(-1, -2)
        q, k, v = qkv.split(self.dh, -1)
        q, k = F.relu(q), F.relu(k)
        v = F.pad(v, (0, 1), value=1.0)
        kv = k.transpose(-1, -2) @ v
        out = q @ kv
        out = out[..., :-1] / (out[..., -1:] + 1e-15)
        return out.transpose(-1, -2).reshape(b, -1, hh, ww)

    def forward(self, x):
        qkv = self.qkv(x)
        ms = torch.cat([qkv, self.agg(qkv)], 1)
        return self.proj(self._att(ms))


class EViTBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.att = LiteMLA(c)
        self.mb = MBConv(c, c, 3, 1, 4, act=nn.Hardswish, use_se=False)

    def forward(self, x):
        x = x + self.att(x)
        return self.mb(x)


def efficientvit_b1():
    """EfficientViT-B1 (Cai et al., ICCV 2023): MBConv stages, then ReLU linear attention stages
    (widths 16-256); input (1, 3, 224, 224).
    """
    HS = nn.Hardswish
    layers = [cba(3, 16, 3, 2, act=HS), MBConv(16, 16, 3, 1, 1, act=HS, use_se=False)]
    ci = 16
    for co, n in [(32, 2), (64, 3)]:
        for i in range(n):
            layers.append(MBConv(ci, co, 3, 2 if i == 0 else 1, 4, act=HS, use_se=False))
            ci = co
    for co, n in [(128, 3), (256, 4)]:
        layers.append(MBConv(ci, co, 3, 2, 4, act=HS, use_se=False))
        ci = co
        layers += [EViTBlock(co) for _ in range(n)]
    layers += [
        cba(ci, 1536, 1, act=HS),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(1536, 1600),
        nn.LayerNorm(1600),
        HS(),
        nn.Linear(1600, 1000),
    ]
    return nn.Sequential(*layers)


NETS = {
    "resnet50": (resnet50, (1, 3, 224, 224), torch.float32),
    "efficientnet_b0": (efficientnet_b0, (1, 3, 224, 224), torch.float32),
    "mobilenetv3_large": (mobilenetv3_large, (1, 3, 224, 224), torch.float32),
    "shufflenetv2": (shufflenetv2, (1, 3, 224, 224), torch.float32),
    "squeezenet11": (squeezenet11, (1, 3, 224, 224), torch.float32),
    "deit_tiny": (deit_tiny, (1, 3, 224, 224), torch.float32),
    "bert_tiny": (bert_tiny, (1, 128), torch.int64),
    "gru_speech": (gru_speech, (1, 200, 80), torch.float32),
    "yolo_nano": (yolo_nano, (1, 3, 320, 320), torch.float32),
    "vae_decoder": (vae_decoder, (1, 4, 32, 32), torch.float32),
    "gpt_mini": (gpt_mini, (1, 64), torch.int64),
    "poolformer_s12": (poolformer_s12, (1, 3, 224, 224), torch.float32),
    "efficientvit_b1": (efficientvit_b1, (1, 3, 224, 224), torch.float32),
}
NAMES = tuple(NETS)


def describe(name):
    doc = " ".join((NETS[name][0].__doc__ or name).split())
    return doc.split("; input")[0]


def build(name):
    builder, shape, dtype = NETS[name]
    return seeded(builder), shape, dtype


def example(name):
    _, shape, dtype = NETS[name]
    if dtype == torch.int64:
        return torch.randint(0, 1000, shape, dtype=torch.int64)
    return torch.randn(shape)
