"""``F.interpolate(b, size=a.shape[-2:])`` (U-Net, FPN) reads a's H and W, not its channel
count: a's channels stay elastic."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hwnas


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _assert_subnets_exact(space, model, x, classes=10):
    """The full subnet computes what ``model`` does; the supernet's path of the smallest and
    2 random subnets equals the subnet cut out of it."""
    from hwnas.supernet.module import ModuleSupernet

    with torch.no_grad():
        assert torch.allclose(space.subnet(space.largest())(x), model(x), atol=1e-5)
        net = ModuleSupernet(space, classes, tuple(x.shape[1:]), {}).eval()
        for arch in [space.smallest(), *space.sample(np.random.default_rng(0), 2)]:
            assert torch.allclose(net(x, net.path_of(arch)), net.extract(arch)(x), atol=1e-5)


class FPN(nn.Module):
    """A coarse map upsampled to a finer one's size and added to it (U-Net, FPN)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.up = nn.Conv2d(32, 16, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        a = F.relu(self.c1(x))
        b = F.interpolate(self.up(F.relu(self.c2(a))), size=a.shape[-2:], mode="nearest")
        return self.fc((a + b).mean((2, 3)))


def test_interpolating_to_another_maps_spatial_size_keeps_its_channels_elastic():
    torch.manual_seed(0)
    model = FPN().eval()
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="fpn")
    assert space.by_key["c1.w"].values == (8, 16)  # a's channels: only its H, W were read
    assert space.describe()["fixed_widths"] == {}
    _assert_subnets_exact(space, model, x)
