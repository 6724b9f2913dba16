"""Well-known networks written from their papers: what users deploy, outside any search space.

Each network is built in plain PyTorch from its published definition (no torchvision, no
downloaded weights; weights are random, latency does not depend on their values). They are the
"networks a user brings" of the latency ground truth (``experiments/latency_ground_truth.py``,
``experiments/kernel_latency.py``) and of the kernel-level predictor's tests: ordinary and
grouped convolutions, depthwise separable blocks, squeeze-and-excitation, channel shuffle
(Split/Reshape/Transpose) and attention.

:data:`NETWORKS` maps a name to its builder ``(num_classes, width) -> nn.Module``; ``width``
multiplies every channel count (rounded to a multiple of 8; ViT: the embedding, in heads of 64)
so tests can build small versions. Every network takes (B, 3, H, W) images (224x224 as
published; any side that is a multiple of 32, or of 16 for the ViT, works) and returns
(B, num_classes) logits.

Sources (the registry's ``paper`` info): ResNet-18/50 (He et al., CVPR 2016; ResNet-50 with
the stride on the 3x3 convolution, "v1.5", as deployed), ResNeXt-50 32x4d (Xie et al., CVPR
2017), MobileNetV2 (Sandler et al., CVPR 2018, Table 2), MobileNetV3-Small/Large (Howard et
al., ICCV 2019, Tables 1-2), EfficientNet-B0 (Tan & Le, ICML 2019, Table 1), ShuffleNetV2 1.0x
(Ma et al., ECCV 2018, Table 5), ViT-Tiny (Dosovitskiy et al., ICLR 2021, at DeiT-Ti's size:
Touvron et al., ICML 2021), MobileNetV4 Conv-S/M (Qin et al., ECCV 2024, Tables 11-12).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hwnas.registry import Registry

NETWORKS: Registry = Registry("well-known network")
"""Builders by name, each ``(num_classes, width, side) -> torch.nn.Module``."""

_PAPERS = {
    "resnet18": "He et al., Deep Residual Learning, CVPR 2016",
    "resnet50": "He et al., Deep Residual Learning, CVPR 2016 (v1.5: stride on the 3x3 conv)",
    "resnext50": "Xie et al., Aggregated Residual Transformations (ResNeXt-50 32x4d), CVPR 2017",
    "mobilenet_v2": "Sandler et al., MobileNetV2, CVPR 2018",
    "mobilenet_v3_small": "Howard et al., Searching for MobileNetV3, ICCV 2019",
    "mobilenet_v3_large": "Howard et al., Searching for MobileNetV3, ICCV 2019",
    "efficientnet_b0": "Tan & Le, EfficientNet, ICML 2019",
    "shufflenet_v2": "Ma et al., ShuffleNet V2 (1.0x), ECCV 2018",
    "vit_tiny": "Dosovitskiy et al., ViT, ICLR 2021 (DeiT-Ti size: Touvron et al., ICML 2021)",
    "mobilenetv4_conv_s": "Qin et al., MobileNetV4 (Conv-S), ECCV 2024",
    "mobilenetv4_conv_m": "Qin et al., MobileNetV4 (Conv-M), ECCV 2024",
}
for _name, _paper in _PAPERS.items():
    NETWORKS.register(_name, f"hwnas.known_networks:_{_name}", paper=_paper, side=224)


def build_network(name: str, num_classes: int = 1000, width: float = 1.0, side: int = 224) -> Any:
    """The well-known network ``name`` in eval mode, with random weights.

    Args:
        name: a key of :data:`NETWORKS`.
        num_classes: classifier outputs.
        width: channel multiplier (1.0 = as published).
        side: the input images' side in pixels (sizes the ViT's position embedding; the
            convolutional networks take any side that is a multiple of 32).

    Returns:
        A ``torch.nn.Module`` mapping (B, 3, H, W) to (B, num_classes).

    Raises:
        UnknownNameError: an unknown name.
        HwnasError: a width that is not positive.
    """
    from hwnas.errors import HwnasError

    builder = NETWORKS.get(name)
    if not width > 0:
        raise HwnasError(f"width must be positive, got {width}")
    if side < 32 or side % 16:
        raise HwnasError(f"the input side must be a multiple of 16 (at least 32), got {side}")
    with torch.random.fork_rng(devices=[]):  # fixed weights, the caller's generator kept
        torch.manual_seed(0)
        return builder(num_classes, float(width), int(side)).eval()


def _div(c: float, divisor: int = 8) -> int:
    """``c`` rounded to the nearest multiple of ``divisor``, never more than 10% below it
    (MobileNetV2's ``_make_divisible``)."""
    new = max(divisor, int(c + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * c else new


# -- building blocks ---------------------------------------------------------------------------


def _cba(c_in, c_out, k=3, s=1, groups=1, act: Any = nn.ReLU, bn=True) -> nn.Sequential:
    """Conv (no bias) + batch norm + activation (``act`` None: none)."""
    layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, k, s, k // 2, groups=groups, bias=not bn)]
    if bn:
        layers.append(nn.BatchNorm2d(c_out))
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class _SE(nn.Module):
    """Squeeze-and-excitation (Hu et al., CVPR 2018): pool, 1x1 reduce + act, 1x1 + gate."""

    def __init__(self, c: int, squeeze: int, act: Any = nn.ReLU, gate: Any = nn.Sigmoid):
        super().__init__()
        self.reduce = nn.Conv2d(c, squeeze, 1)
        self.act = act()
        self.expand = nn.Conv2d(squeeze, c, 1)
        self.gate = gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.expand(self.act(self.reduce(s))))


class _Classifier(nn.Module):
    """Global average pooling, flatten, linear."""

    def __init__(self, c: int, num_classes: int):
        super().__init__()
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x):
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# -- ResNet and ResNeXt ------------------------------------------------------------------------


class _Basic(nn.Module):
    expansion = 1

    def __init__(self, c_in, planes, stride, groups=1, base_width=64):
        super().__init__()
        self.a = _cba(c_in, planes, 3, stride)
        self.b = _cba(planes, planes, 3, 1, act=None)
        self.down = None
        if stride != 1 or c_in != planes:
            self.down = _cba(c_in, planes, 1, stride, act=None)

    def forward(self, x):
        short = x if self.down is None else self.down(x)
        return F.relu(self.b(self.a(x)) + short)


class _Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, c_in, planes, stride, groups=1, base_width=64):
        super().__init__()
        mid = int(planes * base_width / 64) * groups
        out = planes * self.expansion
        self.a = _cba(c_in, mid, 1)
        self.b = _cba(mid, mid, 3, stride, groups=groups)
        self.c = _cba(mid, out, 1, act=None)
        self.down = None
        if stride != 1 or c_in != out:
            self.down = _cba(c_in, out, 1, stride, act=None)

    def forward(self, x):
        short = x if self.down is None else self.down(x)
        return F.relu(self.c(self.b(self.a(x))) + short)


def _resnet(block, depths, num_classes, width, groups=1, base_width=64) -> nn.Module:
    planes = [_div(p * width) for p in (64, 128, 256, 512)]
    layers: list[nn.Module] = [_cba(3, planes[0], 7, 2), nn.MaxPool2d(3, 2, 1)]
    c = planes[0]
    for i, (p, n) in enumerate(zip(planes, depths)):
        for j in range(n):
            layers.append(block(c, p, 2 if (j == 0 and i > 0) else 1, groups, base_width))
            c = p * block.expansion
    return nn.Sequential(*layers, _Classifier(c, num_classes))


def _resnet18(num_classes: int, width: float, side: int) -> nn.Module:
    return _resnet(_Basic, (2, 2, 2, 2), num_classes, width)


def _resnet50(num_classes: int, width: float, side: int) -> nn.Module:
    return _resnet(_Bottleneck, (3, 4, 6, 3), num_classes, width)


def _resnext50(num_classes: int, width: float, side: int) -> nn.Module:
    return _resnet(_Bottleneck, (3, 4, 6, 3), num_classes, width, groups=32, base_width=4)


# -- MobileNetV2 / V3, EfficientNet ------------------------------------------------------------


class _InvertedResidual(nn.Module):
    """Expand 1x1, depthwise kxk, optional SE, project 1x1; residual when shapes allow."""

    def __init__(self, c_in, exp, c_out, k, s, act, se: int = 0, se_gate: Any = nn.Sigmoid,
                 se_act: Any = nn.ReLU):  # fmt: skip
        super().__init__()
        layers: list[nn.Module] = []
        if exp != c_in:
            layers.append(_cba(c_in, exp, 1, act=act))
        layers.append(_cba(exp, exp, k, s, groups=exp, act=act))
        if se:
            layers.append(_SE(exp, se, se_act, se_gate))
        layers.append(_cba(exp, c_out, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = s == 1 and c_in == c_out

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


def _mobilenet_v2(num_classes: int, width: float, side: int) -> nn.Module:
    table = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
             (6, 160, 3, 2), (6, 320, 1, 1)]  # fmt: skip
    c = _div(32 * width)
    layers: list[nn.Module] = [_cba(3, c, 3, 2, act=nn.ReLU6)]
    for t, ch, n, s in table:
        out = _div(ch * width)
        for i in range(n):
            layers.append(_InvertedResidual(c, c * t, out, 3, s if i == 0 else 1, nn.ReLU6))
            c = out
    last = _div(1280 * max(1.0, width))
    layers.append(_cba(c, last, 1, act=nn.ReLU6))
    return nn.Sequential(*layers, _Classifier(last, num_classes))


_V3_LARGE = [  # k, expansion, out, SE, activation (RE/HS), stride (Table 1)
    (3, 16, 16, 0, "RE", 1), (3, 64, 24, 0, "RE", 2), (3, 72, 24, 0, "RE", 1),
    (5, 72, 40, 1, "RE", 2), (5, 120, 40, 1, "RE", 1), (5, 120, 40, 1, "RE", 1),
    (3, 240, 80, 0, "HS", 2), (3, 200, 80, 0, "HS", 1), (3, 184, 80, 0, "HS", 1),
    (3, 184, 80, 0, "HS", 1), (3, 480, 112, 1, "HS", 1), (3, 672, 112, 1, "HS", 1),
    (5, 672, 160, 1, "HS", 2), (5, 960, 160, 1, "HS", 1), (5, 960, 160, 1, "HS", 1),
]  # fmt: skip
_V3_SMALL = [  # Table 2
    (3, 16, 16, 1, "RE", 2), (3, 72, 24, 0, "RE", 2), (3, 88, 24, 0, "RE", 1),
    (5, 96, 40, 1, "HS", 2), (5, 240, 40, 1, "HS", 1), (5, 240, 40, 1, "HS", 1),
    (5, 120, 48, 1, "HS", 1), (5, 144, 48, 1, "HS", 1), (5, 288, 96, 1, "HS", 2),
    (5, 576, 96, 1, "HS", 1), (5, 576, 96, 1, "HS", 1),
]  # fmt: skip


class _HeadV3(nn.Module):
    """MobileNetV3's head: pool, 1x1 conv without BN + hard-swish, classifier."""

    def __init__(self, c, hidden, num_classes):
        super().__init__()
        self.conv = nn.Conv2d(c, hidden, 1)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x):
        x = F.hardswish(self.conv(F.adaptive_avg_pool2d(x, 1)))
        return self.fc(torch.flatten(x, 1))


def _mobilenet_v3(table, last: int, hidden: int, num_classes: int, width: float) -> nn.Module:
    c = _div(16 * width)
    layers: list[nn.Module] = [_cba(3, c, 3, 2, act=nn.Hardswish)]
    for k, exp, out, se, nl, s in table:
        exp, out = _div(exp * width), _div(out * width)
        act = nn.ReLU if nl == "RE" else nn.Hardswish
        layers.append(
            _InvertedResidual(c, exp, out, k, s, act, _div(exp / 4) if se else 0, nn.Hardsigmoid)
        )
        c = out
    last = _div(last * width)
    layers.append(_cba(c, last, 1, act=nn.Hardswish))
    return nn.Sequential(*layers, _HeadV3(last, hidden, num_classes))


def _mobilenet_v3_large(num_classes: int, width: float, side: int) -> nn.Module:
    return _mobilenet_v3(_V3_LARGE, 960, 1280, num_classes, width)


def _mobilenet_v3_small(num_classes: int, width: float, side: int) -> nn.Module:
    return _mobilenet_v3(_V3_SMALL, 576, 1024, num_classes, width)


def _efficientnet_b0(num_classes: int, width: float, side: int) -> nn.Module:
    table = [(1, 3, 1, 16, 1), (6, 3, 2, 24, 2), (6, 5, 2, 40, 2), (6, 3, 2, 80, 3),
             (6, 5, 1, 112, 3), (6, 5, 2, 192, 4), (6, 3, 1, 320, 1)]  # fmt: skip
    c = _div(32 * width)
    layers: list[nn.Module] = [_cba(3, c, 3, 2, act=nn.SiLU)]
    for e, k, s, ch, n in table:
        out = _div(ch * width)
        for i in range(n):
            se = max(1, int(c * 0.25))  # SE ratio 0.25 of the block's input channels
            layers.append(
                _InvertedResidual(c, c * e, out, k, s if i == 0 else 1, nn.SiLU, se, se_act=nn.SiLU)
            )
            c = out
    last = _div(1280 * width)
    layers.append(_cba(c, last, 1, act=nn.SiLU))
    return nn.Sequential(*layers, _Classifier(last, num_classes))


# -- ShuffleNetV2 ------------------------------------------------------------------------------


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """ShuffleNet's channel shuffle, written as users write it (exports as Reshape/Transpose
    with shapes computed from the tensor)."""
    b, c, h, w = x.size()
    x = x.view(b, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(b, c, h, w)


class _ShuffleUnit(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.stride = stride
        half = c_out // 2
        if stride > 1:
            self.branch1 = nn.Sequential(
                _cba(c_in, c_in, 3, stride, groups=c_in, act=None), _cba(c_in, half, 1)
            )
        b_in = c_in if stride > 1 else half
        self.branch2 = nn.Sequential(
            _cba(b_in, half, 1), _cba(half, half, 3, stride, groups=half, act=None),
            _cba(half, half, 1),
        )  # fmt: skip

    def forward(self, x):
        if self.stride == 1:
            a, b = x.chunk(2, dim=1)
            out = torch.cat((a, self.branch2(b)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


def _shufflenet_v2(num_classes: int, width: float, side: int) -> nn.Module:
    outs = [_div(c * width, 4) for c in (116, 232, 464)]
    stem = _div(24 * width)
    layers: list[nn.Module] = [_cba(3, stem, 3, 2), nn.MaxPool2d(3, 2, 1)]
    c = stem
    for out, n in zip(outs, (4, 8, 4)):
        for i in range(n):
            layers.append(_ShuffleUnit(c, out, 2 if i == 0 else 1))
            c = out
    last = _div(1024 * width)
    layers.append(_cba(c, last, 1))
    return nn.Sequential(*layers, _Classifier(last, num_classes))


# -- ViT ---------------------------------------------------------------------------------------


class _Attention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
        y = att.softmax(dim=-1) @ v
        return self.proj(y.transpose(1, 2).reshape(b, n, c))


class _Encoder(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int):
        super().__init__()
        self.norm1, self.attn = nn.LayerNorm(dim, eps=1e-6), _Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class _ViT(nn.Module):
    def __init__(self, num_classes, dim=192, depth=12, heads=3, patch=16, side=224):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        tokens = (side // patch) ** 2 + 1
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, tokens, dim) * 0.02)
        self.blocks = nn.Sequential(*(_Encoder(dim, heads, 4 * dim) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1)
        x = self.blocks(x + self.pos)
        return self.head(self.norm(x)[:, 0])


def _vit_tiny(num_classes: int, width: float, side: int) -> nn.Module:
    heads = max(1, round(3 * width))
    return _ViT(num_classes, dim=64 * heads, heads=heads, side=side)


# -- MobileNetV4 -------------------------------------------------------------------------------


class _UIB(nn.Module):
    """Universal inverted bottleneck: optional start depthwise (BN), expand 1x1 (BN, ReLU),
    optional middle depthwise (BN, ReLU), project 1x1 (BN); the stride on the middle depthwise
    conv when there is one, else on the start one."""

    def __init__(self, c_in, c_out, start, mid, stride, expand):
        super().__init__()
        exp = _div(c_in * expand)
        layers: list[nn.Module] = []
        if start:
            layers.append(_cba(c_in, c_in, start, 1 if mid else stride, groups=c_in, act=None))
        layers.append(_cba(c_in, exp, 1))
        if mid:
            layers.append(_cba(exp, exp, mid, stride, groups=exp))
        layers.append(_cba(exp, c_out, 1, act=None))
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and c_in == c_out

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class _FusedIB(nn.Module):
    """Fused inverted bottleneck: kxk expand conv (BN, ReLU), project 1x1 (BN)."""

    def __init__(self, c_in, c_out, k, stride, expand):
        super().__init__()
        self.body = nn.Sequential(
            _cba(c_in, _div(c_in * expand), k, stride),
            _cba(_div(c_in * expand), c_out, 1, act=None),
        )

    def forward(self, x):
        return self.body(x)


def _mobilenetv4(spec, num_classes: int, width: float) -> nn.Module:
    """``spec``: ("cn", k, s, c) conv-BN-ReLU, ("er", k, s, e, c) fused IB, ("uir", start,
    mid, s, e, c) UIB, as timm's ``_gen_mobilenet_v4`` strings."""
    c = _div(32 * width)
    layers: list[nn.Module] = [_cba(3, c, 3, 2)]
    for item in spec:
        kind, out = item[0], _div(item[-1] * width)
        if kind == "cn":
            layers.append(_cba(c, out, item[1], item[2]))
        elif kind == "er":
            layers.append(_FusedIB(c, out, item[1], item[2], item[3]))
        else:
            layers.append(_UIB(c, out, item[1], item[2], item[3], item[4]))
        c = out
    hidden = _div(1280 * width)

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = _cba(c, hidden, 1)
            self.fc = nn.Linear(hidden, num_classes)

        def forward(self, x):
            x = self.conv(F.adaptive_avg_pool2d(x, 1))
            return self.fc(torch.flatten(x, 1))

    return nn.Sequential(*layers, Head())


_CONV_S = [
    ("cn", 3, 2, 32), ("cn", 1, 1, 32), ("cn", 3, 2, 96), ("cn", 1, 1, 64),
    ("uir", 5, 5, 2, 3, 96), *[("uir", 0, 3, 1, 2, 96)] * 4, ("uir", 3, 0, 1, 4, 96),
    ("uir", 3, 3, 2, 6, 128), ("uir", 5, 5, 1, 4, 128), ("uir", 0, 5, 1, 4, 128),
    ("uir", 0, 5, 1, 3, 128), *[("uir", 0, 3, 1, 4, 128)] * 2, ("cn", 1, 1, 960),
]  # fmt: skip
_CONV_M = [
    ("er", 3, 2, 4, 48),
    ("uir", 3, 5, 2, 4, 80), ("uir", 3, 3, 1, 2, 80),
    ("uir", 3, 5, 2, 6, 160), *[("uir", 3, 3, 1, 4, 160)] * 2, ("uir", 3, 5, 1, 4, 160),
    ("uir", 3, 3, 1, 4, 160), ("uir", 3, 0, 1, 4, 160), ("uir", 0, 0, 1, 2, 160),
    ("uir", 3, 0, 1, 4, 160),
    ("uir", 5, 5, 2, 6, 256), ("uir", 5, 5, 1, 4, 256), *[("uir", 3, 5, 1, 4, 256)] * 2,
    ("uir", 0, 0, 1, 4, 256), ("uir", 3, 0, 1, 4, 256), ("uir", 3, 5, 1, 2, 256),
    ("uir", 5, 5, 1, 4, 256), *[("uir", 0, 0, 1, 4, 256)] * 2, ("uir", 5, 0, 1, 2, 256),
    ("cn", 1, 1, 960),
]  # fmt: skip


def _mobilenetv4_conv_s(num_classes: int, width: float, side: int) -> nn.Module:
    return _mobilenetv4(_CONV_S, num_classes, width)


def _mobilenetv4_conv_m(num_classes: int, width: float, side: int) -> nn.Module:
    return _mobilenetv4(_CONV_M, num_classes, width)


DEFINITIONS_VERSION = "1"
"""Changes when a definition above changes, so stored measurements of the old one are not
reused."""
