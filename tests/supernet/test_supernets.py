"""Each supernet under a one-path architecture computes exactly its extracted subnet, and the
subnet exports to ONNX with the same outputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_supernet import TINY, onnx_matches

from hwnas.supernet import build_supernet


def _randomise_bn(net: torch.nn.Module) -> None:
    g = torch.Generator().manual_seed(0)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g))
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
            m.weight.data.copy_(torch.randn(m.weight.shape, generator=g))
            m.bias.data.copy_(torch.randn(m.bias.shape, generator=g))


@pytest.mark.parametrize("space", sorted(TINY))
def test_extracted_subnet_equals_the_supernet_path_and_its_onnx(space):
    config, shape = TINY[space]
    torch.manual_seed(0)
    net = build_supernet(space, 10, shape, config)
    _randomise_bn(net)
    net.eval()
    archs = net.space.sample(np.random.default_rng(3), 2)
    for arch in archs:
        assert net.space.parse(arch.text) == arch
        sub = net.extract(arch)
        sub_shape = net.input_shape(arch)
        x = torch.randn(2, *sub_shape)
        with torch.no_grad():
            want = net(x, net.path_of(arch))
            got = sub(x)
        assert torch.allclose(got, want, atol=1e-5), float((got - want).abs().max())
        # the subnet is smaller than the supernet and is a plain module of the space's family
        assert sum(p.numel() for p in sub.parameters()) < sum(p.numel() for p in net.parameters())
    onnx_matches(sub, sub_shape)


def test_nasbench201_subnet_is_the_space_network_with_the_supernet_size():
    config, shape = TINY["nasbench201"]
    net = build_supernet("nasbench201", 10, shape, config)
    arch = net.space.parse(
        "|nor_conv_3x3~0|+|none~0|nor_conv_3x3~1|+|skip_connect~0|none~1|none~2|"
    )
    sub = net.extract(arch)
    names = {k.split(".")[-2] for k in sub.state_dict() if ".edges." in k}
    assert "ops" not in names  # a static network, no mixed operations left
    # the 'none' edges have no modules
    assert sorted(sub.cells[0].edges.keys()) == ["1_0", "2_1", "3_0"]


def test_ofa_soft_mixture_is_one_superkernel_path():
    """A mixture over kernels and expansions computes the weighted nested kernels in one
    convolution: with one-hot weights it equals the one-path subnet."""
    from hwnas.spaces.mixed import Choice

    config, shape = TINY["ofa"]
    torch.manual_seed(0)
    net = build_supernet("ofa", 10, shape, config).eval()
    arch = net.space.sample(np.random.default_rng(1), 1)[0]
    one = net.path_of(arch)
    mixed = []
    for d, c in enumerate(one):
        mixed.append(c if d == net.r_dim else Choice(c.weights, tuple(range(len(c.weights)))))
    x = torch.randn(2, *shape)
    with torch.no_grad():
        assert torch.allclose(net(x, mixed), net(x, one), atol=1e-5)


def test_a_training_whose_loss_is_not_finite_stops_in_one_line():
    """`--set lr=...` large enough to diverge: training went on with loss nan, and the
    all-`none` cell came out as the search's best with exit 0."""
    import numpy as np
    import torch

    from hwnas.datasets import Split
    from hwnas.errors import HwnasError
    from hwnas.supernet.train import search_epoch

    class Diverged:
        bilevel = False
        supernet = torch.nn.Linear(1, 1)

        def step(self, batch, val):
            return {"loss": float("nan")}

    split = Split(np.zeros((8, 3, 4, 4), np.float32), np.zeros(8, np.int64))
    with pytest.raises(HwnasError, match=r"diverged in epoch 3 \(training loss nan\)"):
        search_epoch(Diverged(), split, split, 4, 2, torch.device("cpu"))
