"""Elastic depth drops a block only where its output is its input plus what it computes
(``x + g(x)``, then at most an activation or a normalisation): a block that adds its input
inside and transforms the sum further (ConvMixer's layers, as in the paper) has no identity path,
and dropping it removed whole layers of the network."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

import hwnas


class Residual(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) + x


def conv_mixer(dim=32, depth=3, kernel_size=5, patch_size=2, n_classes=10):
    """ConvMixer (Trockman & Kolter, 2022), the paper's listing: each layer is
    BN(GELU(pointwise(x + BN(GELU(depthwise(x))))))."""
    return nn.Sequential(
        nn.Conv2d(3, dim, kernel_size=patch_size, stride=patch_size),
        nn.GELU(),
        nn.BatchNorm2d(dim),
        *[
            nn.Sequential(
                Residual(
                    nn.Sequential(
                        nn.Conv2d(dim, dim, kernel_size, groups=dim, padding="same"),
                        nn.GELU(),
                        nn.BatchNorm2d(dim),
                    )
                ),
                nn.Conv2d(dim, dim, kernel_size=1),
                nn.GELU(),
                nn.BatchNorm2d(dim),
            )
            for _ in range(depth)
        ],
        nn.AdaptiveAvgPool2d((1, 1)),
        nn.Flatten(),
        nn.Linear(dim, n_classes),
    )


def test_convmixers_layers_add_no_identity_path_and_get_no_depth():
    torch.manual_seed(0)
    space = hwnas.elastic(conv_mixer().eval(), torch.zeros(1, 3, 16, 16), name="convmixer")
    assert [d.key for d in space.decisions if d.kind == "depth"] == []
    net = space.subnet(space.smallest())
    assert (
        len([m for m in net.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (1, 1)]) == 3
    )


class PostActivation(nn.Module):
    """ResNet's basic block: relu(x + g(x))."""

    def __init__(self, c):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

    def forward(self, x):
        out = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        out += x
        return F.relu(out)


class PreNorm(nn.Module):
    """A pre-norm transformer block over (B, C, L): x1 = x + f(x); x1 + h(x1)."""

    def __init__(self, c):
        super().__init__()
        self.f = nn.Conv1d(c, c, 3, padding=1)
        self.h = nn.Sequential(
            nn.BatchNorm1d(c), nn.Conv1d(c, 2 * c, 1), nn.GELU(), nn.Conv1d(2 * c, c, 1)
        )

    def forward(self, x):
        x = x + self.f(x)
        return x + self.h(x)


class AddThenConv(nn.Module):
    """x + f(x) and then a convolution of the sum: no identity (ConvMixer's shape)."""

    def __init__(self, c):
        super().__init__()
        self.f = nn.Conv1d(c, c, 3, padding=1)
        self.pw = nn.Conv1d(c, c, 1)

    def forward(self, x):
        return self.pw(F.relu(x + self.f(x)))


class Net2d(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.stage = nn.Sequential(PostActivation(16), PostActivation(16), PostActivation(16))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.stage(F.relu(self.stem(x))).mean((2, 3)))


class Net1d(nn.Module):
    def __init__(self, block):
        super().__init__()
        self.stem = nn.Conv1d(4, 16, 3, padding=1)
        self.stage = nn.Sequential(block(16), block(16), block(16))
        self.fc = nn.Linear(16, 5)

    def forward(self, x):
        return self.fc(self.stage(self.stem(x)).mean(-1))


def test_blocks_ending_in_their_residual_addition_keep_their_depth():
    """ResNet's relu(x + g(x)) and a pre-norm block's chained additions still get a depth, and
    a dropped block is the identity in the supernet as in the subnet cut out of it."""
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    for model, x, classes in [
        (Net2d().eval(), torch.randn(2, 3, 8, 8), 10),
        (Net1d(PreNorm).eval(), torch.randn(2, 4, 16), 5),
    ]:
        space = hwnas.elastic(model, x[:1], name="res")
        assert space.by_key["stage.d"].values == (1, 2, 3)
        net = ModuleSupernet(space, classes, tuple(x.shape[1:]), {}).eval()
        arch = space.smallest()
        with torch.no_grad():
            assert torch.allclose(net(x, net.path_of(arch)), net.extract(arch)(x), atol=1e-5)
        kept = [b for b in space.subnet(arch).stage if not isinstance(b, nn.Identity)]
        assert len(kept) == 1  # the dropped blocks are identities in their places
    model = Net1d(AddThenConv).eval()
    space = hwnas.elastic(model, torch.zeros(1, 4, 16), name="addconv")
    assert "stage.d" not in space.by_key


class ListNet(nn.Module):
    """Blocks in a ModuleList that ``forward`` reaches by position: ``blocks[i]`` for i in
    range(4), or the first three in a loop and ``blocks[-1]`` on its own."""

    def __init__(self, by_index: bool):
        super().__init__()
        self.by_index = by_index
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.blocks = nn.ModuleList([PostActivation(16) for _ in range(4)])
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.stem(x))
        if self.by_index:
            for i in range(4):
                x = self.blocks[i](x)
        else:
            for b in self.blocks[:3]:
                x = b(x)
            x = self.blocks[-1](x)
        return self.fc(x.mean((2, 3)))


def test_dropped_blocks_keep_their_places_when_forward_reaches_them_by_position():
    """A subnet of depth 2 runs stem, blocks 0 and 1, the head: the same as the supernet's
    path. Deleting the dropped blocks from the ModuleList made ``blocks[i]`` raise IndexError
    (and a search crash) and made ``blocks[-1]`` run block 1 a second time."""
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    x = torch.randn(2, 3, 8, 8)
    for by_index in (True, False):
        model = ListNet(by_index).eval()
        space = hwnas.elastic(model, x[:1], name="listnet")
        assert space.by_key["blocks.d"].values == (1, 2, 3, 4)
        arch = space.from_choices({**space.to_choices(space.largest()), "blocks.d": "2"})
        with torch.no_grad():
            want = model.fc(model.blocks[1](model.blocks[0](F.relu(model.stem(x)))).mean((2, 3)))
            got = space.subnet(arch)(x)
            assert torch.allclose(got, want, atol=1e-5), (by_index, (got - want).abs().max())
            net = ModuleSupernet(space, 10, (3, 8, 8), {}).eval()
            assert torch.allclose(net(x, net.path_of(arch)), got, atol=1e-5)
            for a in (space.smallest(), space.largest()):
                assert space.subnet(a)(x).shape == (2, 10)
