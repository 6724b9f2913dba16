"""Every supernet strategy runs a few steps on real digits, moves its architecture
distribution, and derives a valid architecture whose extracted subnet exports to ONNX with the
same outputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_supernet import TINY, onnx_matches

from hwnas.datasets import load_data
from hwnas.devices import get_device
from hwnas.supernet import build_supernet
from hwnas.supernet.cost import HardwareLoss, fit_table_lut
from hwnas.supernet.strategies import SUPERNET_STRATEGIES
from hwnas.supernet.train import accuracy, recalibrate_bn, resized_forward, search_epoch

CASES = [
    ("darts", "nasbench201", "pixel3", {}),
    ("darts", "nasbench201", "pixel3", {"order": 2}),
    ("gdas", "nasbench201", "pixel3", {}),
    ("fbnet", "fbnet", "pixel3", {"warmup": 0.0}),
    ("proxyless", "ofa", "v100_64", {"warmup": 0.0}),
    ("proxyless", "nasbench201", "pixel3", {"warmup": 0.0}),
    ("singlepath", "ofa", "v100_64", {}),
    (
        "oneshot",
        "nasbench201",
        "pixel3",
        {"sampling": "sandwich", "evolution_trials": 8, "population": 4, "candidates": 2},
    ),
]


@pytest.fixture(scope="module")
def digits():
    return load_data("digits", seed=0, image_size=16, limit=200)


def test_every_registered_strategy_is_covered():
    assert {c[0] for c in CASES} == set(SUPERNET_STRATEGIES.names())


@pytest.mark.parametrize(
    ("name", "space", "device", "options"), CASES, ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in CASES]
)
def test_strategy_derives_a_valid_exportable_subnet(digits, name, space, device, options):
    torch.manual_seed(0)
    config, _ = TINY[space]
    net = build_supernet(space, digits.num_classes, digits.image_shape, config)
    lut = fit_table_lut(net.space, get_device(device))
    uniform = [torch.full((n,), 1.0 / n) for n in net.sizes]
    ref = float(lut.expected(uniform))
    hw = HardwareLoss(lut, weight=1.0, reference=ref)
    strategy = SUPERNET_STRATEGIES.get(name)(net, hw, options, total_steps=4, seed=0)
    before = [p.detach().clone() for p in strategy.arch_parameters()]
    weights_before = [p.detach().clone() for p in net.parameters()]
    stats = search_epoch(strategy, digits.train, digits.val, 40, 0, torch.device("cpu"))
    assert np.isfinite(stats.loss)
    assert any(not torch.equal(a, b) for a, b in zip(net.parameters(), weights_before))
    if before:  # differentiable strategies moved their architecture parameters
        after = strategy.arch_parameters()
        assert any(not torch.allclose(a, b) for a, b in zip(after, before))
        for p in strategy.probs():
            assert torch.isclose(p.sum(), torch.tensor(1.0), atol=1e-5) and (p >= 0).all()

    def score(arch):
        path = net.path_of(arch)
        recalibrate_bn(lambda x: net(x, path), net, digits.train, max_batches=2)
        return accuracy(lambda x: net(x, path), digits.val)

    candidates = strategy.finish(score)
    arch = candidates[0]
    assert net.space.parse(arch.text) == arch  # a valid arch string of the space
    sub = net.extract(arch)
    shape = net.input_shape(arch)
    fwd = resized_forward(sub, shape[-1])
    recalibrate_bn(fwd, sub, digits.train, max_batches=2)
    assert 0.0 <= accuracy(fwd, digits.test) <= 100.0
    onnx_matches(sub, shape)


def test_target_mode_moves_gdas_towards_the_target(digits):
    """A low target makes the expected latency under the distribution fall."""
    torch.manual_seed(0)
    config, _ = TINY["nasbench201"]
    net = build_supernet("nasbench201", 10, digits.image_shape, config)
    lut = fit_table_lut(net.space, get_device("fpga"))
    probs = [torch.full((n,), 1.0 / n) for n in net.sizes]
    start = float(lut.expected(probs))
    hw = HardwareLoss(lut, target=0.5 * start, strength=5.0)
    strategy = SUPERNET_STRATEGIES.get("gdas")(net, hw, {"arch_lr": 0.05}, total_steps=8)
    search_epoch(strategy, digits.train, digits.val, 20, 0, torch.device("cpu"))
    end = float(lut.expected(strategy.probs()))
    assert end < start
    derived = strategy.derive()
    assert lut.cost(derived) == pytest.approx(0.5 * start, rel=0.1)


def test_unknown_setting_and_wrong_space_are_user_errors(digits):
    from hwnas.errors import HwnasError

    net = build_supernet("nasbench201", 10, digits.image_shape, TINY["nasbench201"][0])
    with pytest.raises(HwnasError, match="unknown setting 'tua_max'"):
        SUPERNET_STRATEGIES.get("gdas")(net, None, {"tua_max": 3}, total_steps=1)
    with pytest.raises(HwnasError, match="works on the ofa space"):
        SUPERNET_STRATEGIES.get("singlepath")(net, None, {}, total_steps=1)
