"""A layer scale broadcast by indexing (``gamma[:, None, None]``, ``gamma[None, :, None,
None]``) is ``gamma.view(1, -1, 1, 1)``: sliced with the channels it meets."""

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


class LayerScaleBlock(nn.Module):
    """ConvNeXt's block, its layer scale broadcast as ``index`` writes it."""

    def __init__(self, dim, index):
        super().__init__()
        self.index = index
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.BatchNorm2d(dim)
        self.pw1 = nn.Conv2d(dim, 4 * dim, 1)
        self.pw2 = nn.Conv2d(4 * dim, dim, 1)
        self.gamma = nn.Parameter(torch.full((dim,), 0.1))

    def forward(self, x):
        y = self.pw2(F.gelu(self.pw1(self.norm(self.dw(x)))))
        if self.index == "none":
            g = self.gamma[:, None, None]
        elif self.index == "leading":
            g = self.gamma[None, :, None, None]
        elif self.index == "ellipsis":
            g = self.gamma[..., None, None]
        else:
            g = self.gamma.unsqueeze(-1).unsqueeze(-1)
        return x + g * y


class LayerScaleNet(nn.Module):
    def __init__(self, index):
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 4, 4)
        self.blocks = nn.Sequential(LayerScaleBlock(32, index), LayerScaleBlock(32, index))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


@pytest.mark.parametrize("index", ["none", "leading", "ellipsis", "unsqueeze"])
def test_a_layer_scale_broadcast_by_indexing_is_sliced_with_its_channels(index):
    """``gamma[:, None, None]`` is ``gamma.view(1, -1, 1, 1)``: the residual stream stays
    elastic and the layer scale is sliced with it."""
    torch.manual_seed(0)
    model = LayerScaleNet(index).eval()
    with torch.no_grad():
        for b in model.blocks:
            b.gamma.uniform_(0.5, 1.5)
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="layerscale")
    assert space.describe()["fixed_widths"] == {}
    assert space.by_key["stem.w"].values == (8, 16, 24, 32)
    _assert_subnets_exact(space, model, x)
    arch = space.parse(space.largest().text.replace("stem.w=32", "stem.w=8"))
    assert space.subnet(arch).blocks[0].gamma.shape == (8,)
