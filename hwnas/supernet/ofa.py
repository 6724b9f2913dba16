"""Once-for-All / ProxylessNAS MobileNetV3 supernet (Cai et al., ICLR 2019 and ICLR 2020) with
elastic kernel (3/5/7), expansion (3/4/6), depth (2-4 per stage) and input resolution.

Weight sharing follows Once-for-All and Single-Path NAS (Stamoulis et al., ECML-PKDD 2019): each
block keeps one 7x7 depthwise *superkernel*, a smaller kernel is its centre; each expansion uses
the first channels of the widest block; depth d keeps a stage's first d blocks. Under a one-path
:class:`~hwnas.spaces.mixed.Path` the block runs the sliced weights (exactly the subnet);
under a mixture, the kernel is the weighted sum of the nested kernels (the Single-Path NAS
superkernel) and the expansion a weighted sum of nested channel masks (FBNetV2 channel
masking, Wan et al., CVPR 2020), so any mixture costs one widest path. The resolution is
always sampled (one candidate per step): images are resized to ``round(r * resolution_scale)``.

Size settings: ``width`` multiplies every channel count (1.0 = OFA's MobileNetV3) and
``resolution_scale`` maps the arch string's resolution (128-224) to the trained input side
(default 0.25: 32-56 pixels). The derived arch string keeps the space's resolution, so recorded
tables and lookup tables fitted on them (full width, ImageNet) apply to it.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hwnas.spaces.base import Arch, SearchSpace
from hwnas.spaces.mixed import Choice, Path
from hwnas.spaces.ofa.model import (
    MBConv,
    OFAMobileNetV3,
    activation,
    make_divisible,
    ofa_head,
)
from hwnas.supernet.base import Supernet, inherit
from hwnas.supernet.settings import supernet_defaults

DEFAULTS = supernet_defaults("ofa")
"""Size settings and their defaults (declared in :mod:`hwnas.supernet.settings`)."""


def _bn(x: torch.Tensor, bn: nn.BatchNorm2d, n: int) -> torch.Tensor:
    """Batch norm over the first ``n`` channels of ``bn`` (running statistics shared)."""
    momentum = bn.momentum
    if bn.training and momentum is None:  # cumulative average (batch-norm recalibration)
        bn.num_batches_tracked += 1
        momentum = 1.0 / float(bn.num_batches_tracked)
    return F.batch_norm(
        x,
        bn.running_mean[:n],
        bn.running_var[:n],
        bn.weight[:n],
        bn.bias[:n],
        bn.training,
        momentum if momentum is not None else 0.1,
        bn.eps,
    )


class DynamicMBConv(nn.Module):
    """An MBConv block with elastic kernel and expansion: (B, c_in, H, W) -> (B, c_out, H/s, W/s).

    Args:
        c_in: input channels.
        c_out: output channels.
        stride: 1 or 2.
        act: "relu" or "h_swish".
        se: with squeeze-and-excitation.
        kernels: candidate kernel sizes (odd, increasing).
        expands: candidate expansion ratios (increasing).
    """

    def __init__(
        self,
        c_in: int,
        c_out: int,
        stride: int,
        act: str,
        se: bool,
        kernels: tuple[int, ...],
        expands: tuple[int, ...],
    ):
        super().__init__()
        self.c_in, self.c_out, self.stride, self.act_name, self.se = c_in, c_out, stride, act, se
        self.kernels, self.expands = kernels, expands
        self.mids = [make_divisible(c_in * e) for e in expands]
        mid, kmax = max(self.mids), max(kernels)
        self.expand_conv = nn.Conv2d(c_in, mid, 1, bias=False)
        self.expand_bn = nn.BatchNorm2d(mid)
        self.dw = nn.Parameter(torch.empty(mid, 1, kmax, kmax))
        nn.init.kaiming_normal_(self.dw, mode="fan_out")
        self.dw_bn = nn.BatchNorm2d(mid)
        if se:
            self.se_mids = [make_divisible(m // 4) for m in self.mids]
            self.se_reduce = nn.Conv2d(mid, max(self.se_mids), 1)
            self.se_expand = nn.Conv2d(max(self.se_mids), mid, 1)
        self.project = nn.Conv2d(mid, c_out, 1, bias=False)
        self.project_bn = nn.BatchNorm2d(c_out)
        self.act = activation(act)
        self.residual = stride == 1 and c_in == c_out

    def _kernel(self, kc: Choice, n: int) -> tuple[torch.Tensor, int]:
        """Depthwise kernel for channels [:n]: the weighted nested crops of the superkernel."""
        kmax = max(self.kernels)
        if len(kc.active) == 1:
            k = self.kernels[kc.active[0]]
            lo = (kmax - k) // 2
            return self.dw[:n, :, lo : lo + k, lo : lo + k] * kc.weights[kc.active[0]], k
        k_big = max(self.kernels[i] for i in kc.active)
        weight = None
        for i in kc.active:
            k = self.kernels[i]
            lo = (kmax - k) // 2
            crop = self.dw[:n, :, lo : lo + k, lo : lo + k] * kc.weights[i]
            pad = (k_big - k) // 2
            crop = F.pad(crop, (pad, pad, pad, pad))
            weight = crop if weight is None else weight + crop
        return weight, k_big

    def forward(self, x: torch.Tensor, kc: Choice, ec: Choice) -> torch.Tensor:
        n = max(self.mids[i] for i in ec.active)
        h = F.conv2d(x, self.expand_conv.weight[:n])
        h = self.act(_bn(h, self.expand_bn, n))
        kernel, k = self._kernel(kc, n)
        h = F.conv2d(h, kernel, None, self.stride, k // 2, 1, n)
        h = self.act(_bn(h, self.dw_bn, n))
        if len(ec.active) == 1:
            scale = ec.weights[ec.active[0]]
        else:  # nested channel masks: channel c counts for every expansion whose width covers c
            c = torch.arange(n, device=x.device)
            scale = sum(ec.weights[i] * (c < self.mids[i]).to(h.dtype) for i in ec.active)
            scale = scale.view(1, n, 1, 1)
        if self.se:
            m = max(self.se_mids[i] for i in ec.active)
            s = F.adaptive_avg_pool2d(h, 1)
            s = F.relu(F.conv2d(s, self.se_reduce.weight[:m, :n], self.se_reduce.bias[:m]))
            s = F.hardsigmoid(F.conv2d(s, self.se_expand.weight[:n, :m], self.se_expand.bias[:n]))
            h = h * s
        h = h * scale
        y = _bn(F.conv2d(h, self.project.weight[:, :n]), self.project_bn, self.c_out)
        return x + y if self.residual else y

    def static_state(self, k: int, e: int) -> dict[str, torch.Tensor]:
        """State of the standalone :class:`MBConv` (kernel k, expansion e), keys of its body."""
        i = self.expands.index(e)
        n = self.mids[i]
        kmax = max(self.kernels)
        lo = (kmax - k) // 2
        out = {"0.weight": self.expand_conv.weight[:n]}
        for key in ("weight", "bias", "running_mean", "running_var"):
            out[f"1.{key}"] = getattr(self.expand_bn, key)[:n]
            out[f"4.{key}"] = getattr(self.dw_bn, key)[:n]
        out["1.num_batches_tracked"] = self.expand_bn.num_batches_tracked
        out["4.num_batches_tracked"] = self.dw_bn.num_batches_tracked
        out["3.weight"] = self.dw[:n, :, lo : lo + k, lo : lo + k]
        p = 6
        if self.se:
            m = self.se_mids[i]
            out["6.fc.1.weight"] = self.se_reduce.weight[:m, :n]
            out["6.fc.1.bias"] = self.se_reduce.bias[:m]
            out["6.fc.3.weight"] = self.se_expand.weight[:n, :m]
            out["6.fc.3.bias"] = self.se_expand.bias[:n]
            p = 7
        out[f"{p}.weight"] = self.project.weight[:, :n]
        for key in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked"):
            out[f"{p + 1}.{key}"] = getattr(self.project_bn, key)
        return out


class OFASupernet(Supernet):
    """OFA MobileNetV3 supernet.

    Config keys: ``width`` (default 0.5), ``resolution_scale`` (default 0.25).
    Input: images of any size (B, 3, H, W); they are resized to the sampled resolution.
    """

    def __init__(
        self,
        space: SearchSpace,
        num_classes: int,
        image_shape: tuple[int, int, int],
        config: dict[str, Any],
    ):
        config = {**DEFAULTS, **config}
        super().__init__(space, num_classes, image_shape, config)
        w = float(config["width"])
        m = copy.deepcopy(space.macro)
        for key in ("first_channels", "final_expand_channels", "feature_mix_channels"):
            m[key] = make_divisible(int(m[key]) * w)
        m["stage_channels"] = [make_divisible(int(c) * w) for c in m["stage_channels"]]
        self.macro = m
        self.max_depth = int(m["max_depth"])
        nb = space.num_blocks
        self.k_dims = list(range(nb))
        self.e_dims = list(range(nb, 2 * nb))
        self.d_dims = list(range(2 * nb, 2 * nb + space.num_stages))
        self.r_dim = 2 * nb + space.num_stages
        self.hard_only = frozenset({self.r_dim})

        c0 = int(m["first_channels"])
        self.stem = nn.Sequential(
            nn.Conv2d(3, c0, 3, 2, 1, bias=False), nn.BatchNorm2d(c0), nn.Hardswish(inplace=True)
        )
        self.first = MBConv(c0, c0, 3, 1, 1, "relu", False)
        blocks, c_prev = [], c0
        for c, stride, act, se in zip(
            m["stage_channels"], m["stage_strides"], m["stage_activations"], m["stage_se"]
        ):
            for i in range(self.max_depth):
                blocks.append(
                    DynamicMBConv(
                        c_prev,
                        int(c),
                        stride if i == 0 else 1,
                        act,
                        bool(se),
                        tuple(space.kernel_sizes),
                        tuple(space.expand_ratios),
                    )
                )
                c_prev = int(c)
        self.blocks = nn.ModuleList(blocks)
        self.final_expand, self.pool, self.feature_mix, self.classifier = ofa_head(
            c_prev, m, num_classes
        )

    def side(self, r: int) -> int:
        """Trained input side for the arch resolution ``r``."""
        return max(8, int(round(r * float(self.config["resolution_scale"]))))

    def forward(self, x: torch.Tensor, path: Path) -> torch.Tensor:
        rc = path[self.r_dim]
        if len(rc.active) != 1:
            raise ValueError("the OFA supernet computes one resolution at a time")
        side = self.side(self.space.resolutions[rc.active[0]])
        if x.shape[-1] != side or x.shape[-2] != side:
            x = F.interpolate(x, size=(side, side), mode="bilinear", align_corners=False)
        x = self.first(self.stem(x))
        for s in range(self.space.num_stages):
            dc = path[self.d_dims[s]]
            depths = [self.space.depths[i] for i in dc.active]
            outs = {}
            for i in range(max(depths)):
                b = s * self.max_depth + i
                x = self.blocks[b](x, path[self.k_dims[b]], path[self.e_dims[b]])
                outs[i + 1] = x
            x = None
            for i in dc.active:
                y = outs[self.space.depths[i]] * dc.weights[i]
                x = y if x is None else x + y
        x = self.pool(self.final_expand(x))
        return self.classifier(torch.flatten(self.feature_mix(x), 1)) * rc.weights[rc.active[0]]

    def input_shape(self, arch: Arch) -> tuple[int, int, int]:
        s = self.side(self.space.decode(arch).r)
        return (3, s, s)

    def extract(self, arch: Arch) -> nn.Module:
        cfg = self.space.decode(arch)
        static = OFAMobileNetV3(cfg, self.num_classes, self.macro)
        src = self.state_dict()
        body: dict[str, torch.Tensor] = {}
        n = 1
        for s, d in enumerate(cfg.d):
            for i in range(d):
                b = s * self.max_depth + i
                for key, t in self.blocks[b].static_state(cfg.ks[b], cfg.e[b]).items():
                    body[f"blocks.{n}.body.{key}"] = t
                n += 1

        def rename(key: str):
            if key.startswith("blocks.0."):
                return "first." + key[len("blocks.0.") :]
            if key.startswith("blocks."):
                return body[key]
            return key

        return inherit(static, src, rename)
