"""One-shot training of the FBNet supernet: every residual candidate starts as the identity
(zero-gamma), so that uniformly sampling the 16 residual layers trains. From scale 1, each
sampled residual layer added an unrelated unit-variance map to the features and the training
loss stayed at chance, ln 10 = 2.303 on digits (docs/supernets.md, "One-shot training on
FBNet", also says what is still open: the 6 layers without a shortcut)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers_supernet import TINY

from hwnas.datasets import load_data
from hwnas.loops import batches
from hwnas.spaces.mixed import one_hot_path
from hwnas.supernet import build_supernet
from hwnas.supernet.strategies import SUPERNET_STRATEGIES


@pytest.fixture(scope="module")
def digits():
    return load_data("digits", seed=0, image_size=16, limit=700)


def _oneshot(space: str, digits, total_steps: int = 1):
    torch.manual_seed(0)
    config, _ = TINY[space]
    net = build_supernet(space, digits.num_classes, digits.image_shape, config)
    strategy = SUPERNET_STRATEGIES.get("oneshot")(net, None, {}, total_steps, seed=0)
    return net, strategy


def test_one_shot_starts_every_fbnet_residual_candidate_as_the_identity(digits):
    """Each residual candidate's last batch norm starts at scale 0; the layers that change
    width or resolution (no shortcut) keep scale 1."""
    net, _ = _oneshot("fbnet", digits)
    residual = transition = 0
    with torch.no_grad():
        feats = net.stem(torch.randn(4, *net.image_shape))
        for d, block in enumerate(net.blocks):
            for k, name in enumerate(block.names):
                op = block.ops[name]
                if name == "skip":
                    continue
                y = block(feats.clone(), one_hot_path([k] * len(net.sizes), net.sizes)[d])
                if op.residual:
                    residual += 1
                    assert torch.equal(y, feats), (d, name)
                else:
                    transition += 1
                    last = [m for m in op.body.modules() if isinstance(m, torch.nn.BatchNorm2d)]
                    assert bool((last[-1].weight == 1).all()), (d, name)
            feats = block(feats, one_hot_path([0] * len(net.sizes), net.sizes)[d])
    assert residual + transition == 22 * 8 and residual > 0 and transition > 0


def test_uniformly_sampled_residual_layers_of_the_fbnet_supernet_train(digits):
    """3 epochs of the tiny FBNet supernet with every residual layer sampled uniformly (the 5
    layers without a shortcut held at k5_e6): the loss falls well below chance (from scale 1
    it stayed at 2.30-2.33)."""
    epochs, batch = 3, 32
    net, strategy = _oneshot("fbnet", digits, epochs * math.ceil(len(digits.train) / batch))
    k5_e6 = net.options[0].index("k5_e6")
    shortcut = [b.ops["k3_e1"].residual for b in net.blocks]
    rng = np.random.default_rng(0)
    net.train()
    for epoch in range(epochs):
        losses = []
        for x, y in batches(digits.train, batch, np.random.default_rng(epoch), torch.device("cpu")):
            idx = [int(rng.integers(n)) if s else k5_e6 for n, s in zip(net.sizes, shortcut)]
            losses.append(strategy.weight_step(x, y, one_hot_path(idx, net.sizes)))
    assert sum(shortcut) == 17  # at width 0.125, 5 layers change width or resolution
    assert float(np.mean(losses)) < 0.6 * math.log(10), losses


def test_one_shot_leaves_the_other_supernets_initialisation_alone(digits):
    """NAS-Bench-201 and OFA, whose one-shot training learns from their own initialisation."""
    for space in ("nasbench201", "ofa"):
        torch.manual_seed(0)
        config, _ = TINY[space]
        fresh = build_supernet(space, digits.num_classes, digits.image_shape, config)
        net, _ = _oneshot(space, digits)
        for (key, a), b in zip(net.state_dict().items(), fresh.state_dict().values()):
            assert torch.equal(a, b), (space, key)


def test_one_shot_on_fbnet_warns_that_it_does_not_rank_subnets_yet(digits):
    """FBNet's one-shot training stays near chance (its layers without a shortcut): a search
    said nothing of it and scored its subnets as if their inherited weights ranked them."""
    assert "does not yet rank FBNet's subnets" in " ".join(_oneshot("fbnet", digits)[1].warnings())
    for space in ("nasbench201", "ofa"):
        assert _oneshot(space, digits)[1].warnings() == []


def test_a_table_search_of_fbnet_suggests_a_strategy_that_trains_it(hwnas_home):
    """FBNet has no accuracy table: the refusal suggested --strategy oneshot, which does not
    rank its subnets; now a differentiable one (OFA, whose one-shot training does, keeps it)."""
    from helpers import hwnas_main

    for space, device, strategy in (("fbnet", "pixel3", "gdas"), ("ofa", "v100_64", "oneshot")):
        r = hwnas_main("search", "--space", space, "--device", device, "--budget", "5")
        assert r.returncode == 2 and r.stderr.strip().endswith(
            f"a supernet strategy (--strategy {strategy})"
        ), r.stderr
