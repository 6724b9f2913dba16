"""The hardware cost model: exact expectations, gradients to the architecture parameters,
fit quality on recorded tables, target-constrained derivation, and a measured block table."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_supernet import TINY

from hwnas.devices import get_device
from hwnas.spaces import get_space
from hwnas.supernet.cost import (
    HardwareLoss,
    constrained_choice,
    fit_table_lut,
    flops_lut,
    measured_block_lut,
    predicted_lut,
)


def _one_hot(space, arch):
    values = space.to_choices(arch)
    out = []
    for d, opts in space.choices().items():
        p = torch.zeros(len(opts), dtype=torch.float64)
        p[opts.index(values[d])] = 1.0
        out.append(p)
    return out


@pytest.mark.parametrize(
    ("space", "device", "min_rho"),
    [("nasbench201", "fpga", 0.99), ("fbnet", "pixel3", 0.99), ("ofa", "v100_64", 0.9)],
)
def test_table_lut_is_exact_for_one_hot_and_differentiable(space, device, min_rho):
    sp = get_space(space)
    lut = fit_table_lut(sp, get_device(device))
    assert lut.fit["spearman_rho"] >= min_rho  # held-out rank correlation of the fit
    for arch in sp.sample(np.random.default_rng(0), 3):
        assert float(lut.expected(_one_hot(sp, arch))) == pytest.approx(lut.cost(arch), rel=1e-9)
    alphas = [torch.zeros(len(o), requires_grad=True) for o in sp.choices().values()]
    e = lut.expected([torch.softmax(a, -1) for a in alphas])
    e.backward()
    grads = torch.cat([a.grad for a in alphas])
    assert torch.isfinite(grads).all() and grads.abs().max() > 0
    # the expectation under the uniform distribution is the mean over uniform samples
    archs = sp.sample(np.random.default_rng(1), 4000)
    mean = np.mean([lut.cost(a) for a in archs[:400]])
    assert float(e.detach()) == pytest.approx(mean, rel=0.1)


def test_table_lut_predicts_the_recorded_latency():
    sp = get_space("nasbench201")
    dev = get_device("fpga")
    lut = fit_table_lut(sp, dev)
    column = dev.column("nasbench201", "latency_ms")
    for i in (0, 100, 15_000):
        assert lut.cost(sp.arch_at(i)) == pytest.approx(float(column[i]), rel=0.05)


@pytest.mark.parametrize(("space", "device"), [("nasbench201", "fpga"), ("fbnet", "raspi4")])
def test_predicted_lut_needs_only_the_reference_set_of_an_unseen_device(space, device):
    from scipy.stats import spearmanr

    from hwnas.measure import Profiler

    sp, dev = get_space(space), get_device(device)
    profiler = Profiler(dev, None)
    lut = predicted_lut(sp, profiler, predictor=f"{space}-help")  # never trained on `device`
    assert profiler.counts.read == 10  # the reference set, nothing else of the table
    assert lut.source.startswith(f"lut-fit:predicted:{space}-help")
    archs = sp.all_archs()
    column = dev.column(space, "latency_ms")
    rng = np.random.default_rng(0).choice(len(archs), 500, replace=False)
    rho = spearmanr([lut.cost(archs[i]) for i in rng], column[rng])[0]
    assert rho >= 0.9, rho


def test_hardware_loss_modes():
    sp = get_space("nasbench201")
    lut = fit_table_lut(sp, get_device("pixel3"))
    probs = [torch.full((5,), 0.2) for _ in range(6)]
    ref = float(lut.expected(probs))
    assert float(HardwareLoss(lut, weight=2.0, reference=ref)(probs)) == pytest.approx(2.0)
    assert float(HardwareLoss(lut, target=ref, strength=3.0)(probs)) == pytest.approx(0.0)
    assert float(HardwareLoss(lut, target=ref / 2, strength=3.0)(probs)) == pytest.approx(3.0)


def test_constrained_choice_meets_targets_on_the_table():
    sp = get_space("nasbench201")
    lut = fit_table_lut(sp, get_device("fpga"))
    rng = np.random.default_rng(0)
    logp = [np.log(rng.dirichlet(np.ones(5))) for _ in range(6)]
    column = get_device("fpga").column("nasbench201", "latency_ms")
    for target in (2.0, 4.0, 6.0):
        idx, predicted = constrained_choice(logp, lut, target, tolerance=0.1)
        ops = [sp.operations[k] for k in idx]
        true = float(column[sp.index(sp.from_ops(ops))])
        assert abs(predicted / target - 1) <= 0.1
        assert abs(true / target - 1) <= 0.15


def test_flops_lut_is_additive_for_nasbench201():
    from hwnas.supernet import build_supernet

    config, shape = TINY["nasbench201"]
    net = build_supernet("nasbench201", 10, shape, config)
    lut = flops_lut(net, samples=40)
    assert lut.metric == "mflops" and lut.fit["r2"] > 0.99


@pytest.mark.slow
def test_measured_block_lut_on_the_live_cpu(hwnas_home):
    from hwnas.measure import Profiler
    from hwnas.store import MeasurementStore
    from hwnas.supernet import build_supernet

    config, shape = TINY["nasbench201"]
    net = build_supernet("nasbench201", 10, shape, config)
    with MeasurementStore(hwnas_home / "m.db") as store:
        profiler = Profiler(get_device("cpu-fast"), store)
        lut = measured_block_lut(net, profiler, calibration=3)
        taken = profiler.counts.taken
        # 4 operations x 3 stages (identical blocks are timed once) + 3 calibration subnets
        assert taken == 4 * 3 + 3
        assert lut.source.startswith("lut-measured:cpu-fast")
        conv3 = sp_index = net.space.operations.index("nor_conv_3x3")
        table = lut.weights.reshape(6, 5)
        assert (table[:, conv3] > table[:, net.space.operations.index("none")]).all()
        # again: every block comes from the store
        measured_block_lut(net, profiler, calibration=3)
        assert profiler.counts.taken == taken and sp_index == conv3
