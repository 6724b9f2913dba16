"""A ``hwnas.nn.ValueChoice`` is a decision wherever hwnas can slice it (the width and kernel of
an ``nn.Conv1d`` too, as of an ``nn.Conv2d``), and anywhere else it stops in one line naming the
layer and the argument: a stride, a pooling kernel, an attention's heads gave no decision and no
word before."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import hwnas.nn as hn
from hwnas.errors import HwnasError


class Audio(nn.Module):
    """A 1-D space: its width and kernel chosen."""

    def __init__(self):
        super().__init__()
        w = hn.ValueChoice([16, 32], label="width")
        k = hn.ValueChoice([3, 5, 7], label="kernel")
        self.conv = nn.Conv1d(8, w, k, padding=k // 2)
        self.bn = nn.BatchNorm1d(w)
        self.dw = nn.Conv1d(w, w, 3, padding=1, groups=w)
        self.act = hn.Choice({"relu": nn.ReLU(), "gelu": nn.GELU()}, label="act")
        self.fc = nn.Linear(w, 5)

    def forward(self, x):
        return self.fc(self.act(self.dw(self.bn(self.conv(x)))).mean(-1))


def test_a_conv1d_width_and_kernel_value_choice_are_decisions():
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    space = hn.space(Audio().eval(), torch.zeros(1, 8, 64), name="audio")
    assert space.choices() == {
        "width": ("16", "32"),
        "kernel": ("3", "5", "7"),
        "act": ("relu", "gelu"),
    }
    net = ModuleSupernet(space, 5, (8, 64), {}).eval()
    x = torch.randn(2, 8, 64)
    with torch.no_grad():
        for arch in [space.smallest(), *space.sample(np.random.default_rng(0), 3)]:
            cut = net.extract(arch)
            assert torch.allclose(net(x, net.path_of(arch)), cut(x), atol=1e-5)
    small = space.subnet(space.smallest())
    assert small.conv.out_channels == 16 and small.conv.kernel_size == (3,)
    assert small.bn.num_features == 16 and small.fc.in_features == 16


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(6, 32)
        self.attn = nn.MultiheadAttention(
            32, hn.ValueChoice([2, 4], label="heads"), batch_first=True
        )
        self.fc = nn.Linear(32, 5)

    def forward(self, x):
        t = self.embed(x)
        return self.fc(self.attn(t, t, t)[0].mean(1))


class Strided(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, stride=hn.ValueChoice([1, 2]), padding=1)
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


class Pooled(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.pool = nn.MaxPool2d(hn.ValueChoice([2, 4], label="pool"))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(self.pool(self.conv(x)).mean((2, 3)))


class Heads(nn.Module):
    """The user's own attention keeps its head count and reshapes with it."""

    def __init__(self):
        super().__init__()
        self.heads = hn.ValueChoice([2, 4])
        self.qkv = nn.Linear(6, 24)
        self.fc = nn.Linear(24, 5)

    def forward(self, x):
        b, n, _ = x.shape
        q = self.qkv(x).reshape(b, n, self.heads, -1)
        return self.fc(q.reshape(b, n, -1).mean(1))


class NormOnly(nn.Module):
    """The width chosen on a batch norm, its convolution's width a plain int."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(hn.ValueChoice([8, 16]))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(self.bn(self.conv(x)).mean((2, 3)))


class OtherValues(nn.Module):
    """A layer taking channels whose width is chosen, among other values."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, hn.ValueChoice([8, 16]), 3, padding=1)
        self.fc = nn.Linear(hn.ValueChoice([4, 16]), 5)

    def forward(self, x):
        return self.fc(self.conv(x).mean((2, 3)))


@pytest.mark.parametrize(
    "model, x, message",
    [
        (
            Attn,
            (1, 7, 6),
            "'attn' (MultiheadAttention): its num_heads ValueChoice([2, 4], label='heads') "
            "cannot be searched: hwnas searches a ValueChoice only as",
        ),
        (Strided, (1, 3, 16, 16), "'conv' (Conv2d): its stride ValueChoice([1, 2]) cannot be"),
        (Pooled, (1, 3, 16, 16), "'pool' (MaxPool2d): its kernel_size ValueChoice([2, 4], "),
        (Heads, (1, 7, 6), "the model (Heads): its attribute 'heads' holds ValueChoice([2, 4])"),
        (
            NormOnly,
            (1, 3, 16, 16),
            "'bn' (BatchNorm2d): its num_features ValueChoice([8, 16]) cannot be searched: the "
            "channels it takes have no width decision",
        ),
        (
            OtherValues,
            (1, 3, 16, 16),
            "'fc' (Linear): its in_features ValueChoice([4, 16]) cannot be searched: the "
            "channels it takes are searched among [8, 16], not [4, 16]",
        ),
    ],
)
def test_a_value_choice_hwnas_cannot_search_stops_in_one_line(model, x, message):
    with pytest.raises(HwnasError) as err:
        hn.space(model(), torch.zeros(*x), name="vc")
    assert message in str(err.value) and "\n" not in str(err.value)
