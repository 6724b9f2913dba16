"""A model's forward in training mode is traced and analysed too (a supernet trains in it, a
subnet is fine-tuned in it): an auxiliary head run only in training is refused in one line
(it broke the fine-tune with 'mat1 and mat2 shapes cannot be multiplied' and a one-shot search
with "'tuple' object has no attribute 'dtype'"), and what training mode alone reads is sliced
with the channels it meets."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hwnas
from hwnas.errors import HwnasError


class AuxNet(nn.Module):
    """An auxiliary classifier used only in training (GoogLeNet, Inception)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)
        self.aux = nn.Linear(16, 10)

    def forward(self, x):
        h = F.relu(self.c1(x))
        out = self.fc(F.relu(self.c2(h)).mean((2, 3)))
        if self.training:
            return out, self.aux(h.mean((2, 3)))
        return out


def test_an_auxiliary_head_run_in_training_only_is_refused_in_one_line():
    with pytest.raises(HwnasError) as err:
        hwnas.elastic(AuxNet().eval(), torch.zeros(1, 3, 16, 16), name="auxnet")
    text = str(err.value)
    assert text.startswith(
        "auxnet: in training mode (model.train()) the model returns a tuple of 2 tensors (it "
        "runs 'aux' (Linear) then only), in eval mode one tensor (batch, 10)"
    )
    assert "\n" not in text


class NoisyNet(nn.Module):
    """Feature noise scaled per channel, added in training only."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)
        self.noise = nn.Parameter(torch.full((16,), 0.1))

    def forward(self, x):
        h = F.relu(self.bn1(self.c1(x)))
        if self.training:
            h = h + torch.randn_like(h) * self.noise[:, None, None]
        return self.fc(F.relu(self.c2(h)).mean((2, 3)))


def test_what_training_mode_alone_reads_is_sliced_with_its_channels():
    """The noise scale is read in training only: it is sliced with c1's channels, so the
    supernet trains a narrow path and a narrow subnet fine-tunes; the analysis leaves the
    model's batch-norm statistics as they were."""
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    model = NoisyNet().eval()
    with torch.no_grad():
        model.bn1.running_mean.uniform_(-0.5, 0.5)
    x = torch.randn(4, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="noisy")
    assert space.by_key["c1.w"].values == (8, 16) and space.describe()["fixed_widths"] == {}
    with torch.no_grad():
        assert torch.allclose(space.subnet(space.largest())(x), model(x), atol=1e-5)
    net = ModuleSupernet(space, 10, (3, 16, 16), {}).train()
    arch = space.smallest()
    net(x, net.path_of(arch)).sum().backward()  # a training step of the narrowest path
    small = space.subnet(arch).train()
    assert small.noise.shape == (8,)
    small(x).sum().backward()  # a fine-tune step


def drop_path(x, drop_prob: float = 0.0, training: bool = False):
    """Stochastic depth per sample, as timm writes it."""
    if drop_prob == 0.0 or not training:
        return x
    keep_prob = 1 - drop_prob
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    random_tensor = x.new_empty(shape).bernoulli_(keep_prob)
    random_tensor.div_(keep_prob)
    return x * random_tensor


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return drop_path(x, self.p, self.training)


class Block(nn.Module):
    def __init__(self, c, p):
        super().__init__()
        self.c1, self.bn = nn.Conv2d(c, 2 * c, 1), nn.BatchNorm2d(2 * c)
        self.c2 = nn.Conv2d(2 * c, c, 1)
        self.drop = DropPath(p)

    def forward(self, x):
        return x + self.drop(self.c2(F.relu(self.bn(self.c1(x)))))


class DropNet(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.blocks = nn.Sequential(Block(16, p), Block(16, p), Block(16, p))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


def test_stochastic_depth_in_training_keeps_every_decision():
    def decisions(p):
        space = hwnas.elastic(DropNet(p).eval(), torch.zeros(1, 3, 8, 8), name="drop")
        return [(d.key, d.values) for d in space.decisions]

    assert decisions(0.2) == decisions(0.0)
    assert ("blocks.d", (1, 2, 3)) in decisions(0.2)
