"""The hardware cost model: exact expectations, gradients to the architecture parameters,
fit quality on recorded tables, target-constrained derivation, and a measured block table."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from helpers_supernet import TINY

from hwnas.devices import get_device
from hwnas.spaces import get_space
from hwnas.supernet.cost import (
    HardwareLoss,
    MultilinearLUT,
    additive_terms,
    constrained_choice,
    fit_table_lut,
    flops_lut,
    measured_block_lut,
    predicted_lut,
)


@functools.cache
def table_lut(space: str, device: str):
    """The lookup table fitted on a recorded device's table, fitted once per test session."""
    return fit_table_lut(get_space(space), get_device(device))


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
    lut = table_lut(space, device)
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
    lut = table_lut("nasbench201", "fpga")
    column = dev.column("nasbench201", "latency_ms")
    for i in (0, 100, 15_000):
        assert lut.cost(sp.arch_at(i)) == pytest.approx(float(column[i]), rel=0.05)


def test_a_fitted_table_predicts_no_cost_below_zero():
    """The least-squares table of the Pixel 3 predicted -0.9 ms for NAS-Bench-201's all-none
    cell (recorded 0.003 ms), so a hardware term rewarded ``none`` without end (DARTS with a
    latency weight derived the disconnected cell) and a limit check passed negative costs.
    Now no cost, nor the expectation a supernet trains on, goes below half the least value
    the table was fitted on."""
    sp = get_space("nasbench201")
    lut = table_lut("nasbench201", "pixel3")
    column = get_device("pixel3").column("nasbench201", "latency_ms")
    assert lut.floor == pytest.approx(0.5 * np.nanmin(column))
    raw = lut.bias + lut.features(lut.indices(sp.all_archs())) @ lut.weights
    assert raw.min() < 0  # what the fit alone gives
    none = sp.parse("|none~0|+|none~0|none~1|+|none~0|none~1|none~2|")
    assert lut.cost(none) == pytest.approx(lut.floor)
    assert float(lut.expected(_one_hot(sp, none))) == pytest.approx(lut.floor)
    assert lut.min_cost() == pytest.approx(lut.floor)


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
    lut = table_lut("nasbench201", "pixel3")
    probs = [torch.full((5,), 0.2) for _ in range(6)]
    ref = float(lut.expected(probs))
    assert float(HardwareLoss(lut, weight=2.0, reference=ref)(probs)) == pytest.approx(2.0)
    assert float(HardwareLoss(lut, target=ref, strength=3.0)(probs)) == pytest.approx(0.0)
    assert float(HardwareLoss(lut, target=ref / 2, strength=3.0)(probs)) == pytest.approx(3.0)


def test_constrained_choice_is_judged_by_the_recorded_table():
    """pixel3's NAS-Bench-201 latencies are far from additive (the fitted table misses some cells
    by 2x): the derivation judges every cell by the recorded value and returns the most
    probable one within the band."""
    sp = get_space("nasbench201")
    device = get_device("pixel3")
    lut = table_lut("nasbench201", "pixel3")
    column = np.asarray(device.column("nasbench201", "latency_ms"))
    rng = np.random.default_rng(0)
    logp = [np.log(rng.dirichlet(np.ones(5))) for _ in range(6)]
    idx = lut.indices(sp.all_archs())
    score = sum(logp[j][idx[:, j]] for j in range(6))
    for target in (6.0, 12.0, 20.0):
        choice = constrained_choice(logp, lut, target, tolerance=0.05)
        ops = [sp.operations[k] for k in choice.indices]
        true = float(column[sp.index(sp.from_ops(ops))])
        assert choice.exact and choice.inside and choice.method == "exhaustive"
        assert true == pytest.approx(choice.cost) and abs(true / target - 1) <= 0.05
        band = np.abs(column / target - 1) <= 0.05
        assert choice.log_prob == pytest.approx(score[band].max())


@pytest.mark.parametrize(("space", "device"), [("fbnet", "pixel3"), ("ofa", "titan_rtx_1")])
def test_constrained_choice_beyond_the_table(space, device):
    """Spaces too large to list: Lagrangian candidates judged by the table's prediction within
    the band less its error margin (FBNet on pixel3: HW-NAS-Bench's additive table, margin 0),
    or, where that margin exceeds the band (OFA on titan_rtx_1: 14%), among the recorded
    architectures."""
    sp = get_space(space)
    lut = table_lut(space, device)
    column = np.asarray(get_device(device).table(space, "latency_ms"))
    rng = np.random.default_rng(1)
    logp = [np.log(rng.dirichlet(np.ones(n))) for n in lut.sizes]
    target = float(np.quantile(column, 0.5))
    choice = constrained_choice(logp, lut, target, tolerance=0.05)
    assert choice.inside and choice.method == "lagrangian"
    arch = sp.from_choices({d: o[k] for (d, o), k in zip(sp.choices().items(), choice.indices)})
    if choice.exact:
        assert lut.margin > 0.05
        assert choice.cost == pytest.approx(float(column[sp.index(arch)]))
        assert abs(choice.cost / target - 1) <= 0.05
    else:
        assert lut.margin < 1e-6
        assert abs(lut.cost(arch) / target - 1) <= 0.05
    known = lut.known_indices()  # never less probable than the best recorded one in the band
    in_band = np.abs(column / target - 1) <= 0.05
    best_known = max(
        sum(logp[j][row[j]] for j in range(len(logp))) for row, ok in zip(known, in_band) if ok
    )
    assert choice.log_prob >= best_known - 1e-9


def test_a_truth_that_is_slow_to_query_is_not_asked_for_every_candidate():
    """The kernel-level predictor stands behind a declared space's table on a live CPU: the
    derivation under --max-latency asked it for every candidate (4,000 deployed networks of
    mobilenetv4, each built, exported and read: minutes and 14 GB, never finishing) and called
    its predictions exact. Now it is asked only for the table's own fit; candidates are judged
    by the table and its margin, none exact."""
    from hwnas.engine.costs import CostModel
    from hwnas.supernet.cost import lut_of

    sp = get_space("nasbench201")
    pixel3 = get_device("pixel3")
    column = np.asarray(pixel3.column("nasbench201", "latency_ms"))
    asked = []

    class Slow(CostModel):  # like KernelCostModel: each prediction costs a network
        metric, source, lut_samples = "latency_ms", "kernel:fake", 40

        def __init__(self):
            self.fit = {}

        def predict(self, archs):
            asked.extend(archs)
            values = np.array([column[sp.index(a)] for a in archs])
            return values, np.zeros(len(archs))

    lut = lut_of(Slow(), sp)
    fitted = len(asked)
    assert fitted == 40 and not lut.truth_judges
    rng = np.random.default_rng(0)
    logp = [np.log(rng.dirichlet(np.ones(5))) for _ in range(6)]
    for at_most in (True, False):
        choice = constrained_choice(logp, lut, 8.0, tolerance=0.1, at_most=at_most)
        assert not choice.exact
    assert len(asked) == fitted


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


def test_a_block_tables_calibration_never_saves_time():
    """Whole subnets cost their blocks' sum times a scale plus the stem, head and call overhead,
    which cost time: a line through 3 subnets with a negative bias priced a fifth of a 16x16
    supernet's cells below zero (then at the floor, half the fastest subnet's latency)."""
    from hwnas.supernet.cost import block_calibration

    sums = np.array([0.05, 0.10, 0.15])
    measured = np.array([0.020, 0.070, 0.125])  # a line of slope 1.05 and bias -0.033 ms
    assert np.polyfit(sums, measured, 1)[1] < 0
    scale, bias = block_calibration(sums, measured)
    assert bias == pytest.approx(0.0, abs=1e-9) and scale > 0
    assert np.all(scale * sums + bias > 0)
    scale, bias = block_calibration(sums, 0.5 * sums + 0.03)  # an exact line is kept
    assert scale == pytest.approx(0.5) and bias == pytest.approx(0.03)


@pytest.mark.slow
def test_a_measured_block_tables_margin_is_its_held_out_error(hwnas_home):
    """The margin target-mode derivation trusts the table by was the in-sample error of its
    3 calibration subnets (13% on the CPU, where subnets it had not seen were 47% off); it is
    now the 90th percentile of each of 8 subnets predicted by the fit on the other 7."""
    from hwnas.measure import Profiler
    from hwnas.store import MeasurementStore
    from hwnas.supernet import build_supernet
    from hwnas.supernet.cost import BLOCK_CALIBRATION, block_calibration, subnet_workload

    config, shape = TINY["nasbench201"]
    net = build_supernet("nasbench201", 10, shape, config)
    with MeasurementStore(hwnas_home / "m.db") as store:
        profiler = Profiler(get_device("cpu-fast"), store)
        lut = measured_block_lut(net, profiler)
        assert profiler.counts.taken == 4 * 3 + BLOCK_CALIBRATION
        assert lut.fit["calibration_subnets"] == BLOCK_CALIBRATION and lut.fit["bias_ms"] >= 0
        archs = net.space.sample(np.random.default_rng(1), BLOCK_CALIBRATION)  # the same ones
        meas = np.array([profiler.measure(subnet_workload(net, a)).value for a in archs])
        assert profiler.counts.taken == 4 * 3 + BLOCK_CALIBRATION  # all from the store
        sums = lut.features(lut.indices(archs)) @ (lut.weights / lut.fit["scale"])  # blocks
        loo = []
        for i in range(len(archs)):
            rest = np.arange(len(archs)) != i
            s, b = block_calibration(sums[rest], meas[rest])
            loo.append(abs(s * sums[i] + b - meas[i]) / meas[i])
        assert lut.margin == pytest.approx(float(np.quantile(loo, 0.9)))


def test_multiplicative_hardware_terms_follow_the_papers():
    """FBNet: CE * alpha * ln(LAT)^beta; ProxylessNAS mul#log: alpha * CE * (ln LAT / ln ref)^beta;
    both lower the expected latency; a form that cannot take the log is refused when asked for
    and replaced by the additive one when it is only the strategy's default."""
    from hwnas.errors import HwnasError
    from hwnas.supernet import build_supernet
    from hwnas.supernet.strategies import SUPERNET_STRATEGIES

    lut = table_lut("fbnet", "pixel3")
    alphas = [torch.zeros(9, requires_grad=True) for _ in range(22)]
    probs = [torch.softmax(a, -1) for a in alphas]
    e = float(lut.expected(probs).detach())
    task = torch.tensor(2.0)
    fb = HardwareLoss(lut, weight=0.6, reference=e, form="fbnet", alpha=0.2)
    total, factor = fb.objective(task, probs)
    assert float(total.detach()) == pytest.approx(2.0 * 0.2 * np.log(e) ** 0.6, rel=1e-6)
    px = HardwareLoss(lut, weight=0.3, reference=e, form="proxyless", alpha=0.2)
    assert float(px.objective(task, probs)[1].detach()) == pytest.approx(0.2)  # at the reference
    for hw in (fb, px):
        for a in alphas:
            a.grad = None
        hw.objective(task, [torch.softmax(a, -1) for a in alphas])[0].backward()
        with torch.no_grad():
            stepped = [torch.softmax(a - 0.5 * a.grad / a.grad.abs().max(), -1) for a in alphas]
        assert float(lut.expected(stepped)) < e
    config, shape = TINY["nasbench201"]
    net = build_supernet("nasbench201", 10, shape, config)
    terms = additive_terms(net.space)  # a table whose cheapest cell costs 0.5 ms
    nb = MultilinearLUT(net.space, terms, np.linspace(0, 0.05, len(terms)), 0.5)
    hw = HardwareLoss(nb, weight=0.3, reference=10.0)
    with pytest.raises(HwnasError, match="hw_form=fbnet takes the log of the cost in ms"):
        SUPERNET_STRATEGIES.get("fbnet")(net, hw, {"hw_form": "fbnet"}, total_steps=1)
    strategy = SUPERNET_STRATEGIES.get("fbnet")(net, hw, {}, total_steps=1)
    assert hw.active_form == "additive" and "not the default fbnet" in hw.describe()["note"]
    # summary.json's strategy says the form in use too (it said fbnet beside the note)
    assert strategy.describe()["hw_form"] == "additive"


def test_a_checkpoint_freezes_the_lookup_table_a_resumed_training_steers_with(tmp_path):
    """A resumed supernet training rebuilt its cost model from the measurement store as it
    is now (a kernel-level model calibrated on 20 networks where it began with 10: another
    table, another hardware term mid-training). The checkpoint keeps the table; a resume
    thaws it over the model made now."""
    import dataclasses

    import torch

    from hwnas.supernet.checkpoint import read_checkpoint, save_checkpoint
    from hwnas.supernet.cost import frozen_lut, thaw_lut

    began = table_lut("nasbench201", "pixel3")
    now = dataclasses.replace(began, weights=began.weights * 1.3, bias=began.bias + 1.0,
                              fit={"r2": 0.5})  # fmt: skip
    path = tmp_path / "supernet.pt"
    save_checkpoint(path, "fp", 1, {}, {}, [], frozen_lut(began))
    state = read_checkpoint(path, "fp")
    thawed = thaw_lut(now, state["cost"])
    archs = get_space("nasbench201").sample(np.random.default_rng(0), 50)
    assert np.allclose(thawed.predict(archs)[0], began.predict(archs)[0])
    uniform = [torch.full((n,), 1.0 / n) for n in began.sizes]
    assert float(thawed.expected(uniform)) == pytest.approx(float(began.expected(uniform)))
    assert thawed.fit == began.fit and thawed.truth is now.truth
    assert thaw_lut(now, None) is now  # nothing frozen (a checkpoint of an older hwnas)
    assert thaw_lut(now, {**state["cost"], "terms": 3}) is now  # another table's terms


def test_a_checkpoint_of_the_same_search_with_another_seed_is_refused(tmp_path):
    """Two workers of one study with their own --seed and the default --out: the second read
    the first's supernet.pt as another search's, trained over it from epoch 1, and the last
    zoo export removed the other's models. Refused now in one line naming both seeds; a
    checkpoint of settings that differ otherwise (not this study) is still trained over."""
    import json

    from hwnas.errors import HwnasError
    from hwnas.supernet.checkpoint import read_checkpoint, save_checkpoint

    path = tmp_path / "supernet.pt"
    theirs = json.dumps({"strategy": "gdas", "seed": 1, "epochs": 3})
    save_checkpoint(path, theirs, 2, {"w": torch.ones(2)}, {}, [])
    with pytest.raises(HwnasError, match="is the supernet of the same search with seed 1 .this "
                                         "one: seed 0.: give each seed its own --out"):  # fmt: skip
        read_checkpoint(path, json.dumps({"strategy": "gdas", "seed": 0, "epochs": 3}))
    assert read_checkpoint(path, json.dumps({"strategy": "gdas", "seed": 0, "epochs": 5})) is None
    assert read_checkpoint(path, theirs)["epoch"] == 2


def test_a_checkpoint_written_with_the_fine_tuning_in_its_fingerprint_is_resumed(tmp_path):
    """Checkpoints written before the fingerprint held only what training reads carry
    ``finetune_epochs`` and one-shot's NSGA-II settings: they are the same supernet. One that
    differs in what training reads is said in one warning line naming it."""
    import json

    from hwnas.jobs.supernet import SupernetSettings, _fingerprint, _training
    from hwnas.supernet.checkpoint import read_checkpoint, save_checkpoint

    settings = SupernetSettings(space="fbnet", device="pixel3", strategy="oneshot",
                                options={"evolution_trials": 30, "limit": 100})  # fmt: skip
    old = {k: v for k, v in settings.as_dict().items() if k not in ("study", "budget")}
    older = json.dumps({**old, "finetune_epochs": 7}, sort_keys=True, default=str)
    path = tmp_path / "supernet.pt"
    save_checkpoint(path, older, 2, {"w": torch.ones(2)}, {}, [])
    lines: list[str] = []
    state = read_checkpoint(path, _fingerprint(settings), lines.append, _training)
    assert state is not None and state["epoch"] == 2 and lines == []
    other = SupernetSettings(space="fbnet", device="pixel3", strategy="oneshot",
                             options={"evolution_trials": 9, "limit": 200})  # fmt: skip
    assert read_checkpoint(path, _fingerprint(other), lines.append, _training) is None
    assert lines == [
        f"warning: --out {tmp_path}: supernet.pt was trained under other settings (--set "
        "limit=100 there, 200 here): training starts over and replaces it"
    ]


def test_each_seeds_trained_supernet_is_recorded_for_the_workers_of_that_seed(tmp_path):
    """The study kept one record of a trained supernet: after a seed-0 worker and then a
    seed-1 worker finished, a third worker with seed 0 (its own --out) trained all its epochs
    again. Each set of settings has its own record now; the third copies seed 0's."""
    import contextlib

    from hwnas.supernet.turn import TrainingTurn

    class Study:
        study_name = "s"

        def __init__(self):
            self.user_attrs = {}

        def set_user_attr(self, key, value):
            self.user_attrs[key] = value

    study, lines = Study(), []
    for seed, folder in ((0, "a"), (1, "b")):
        ckpt = tmp_path / folder / "supernet.pt"
        ckpt.parent.mkdir()
        ckpt.write_bytes(f"weights of seed {seed}".encode())
        TrainingTurn(study, contextlib.ExitStack(), f"seed {seed}").done(ckpt, 3)
    third = tmp_path / "c" / "supernet.pt"
    third.parent.mkdir()
    TrainingTurn(study, contextlib.ExitStack(), "seed 0")._reuse(third, 3, lines.append)
    assert third.read_bytes() == b"weights of seed 0"
    assert lines and lines[0].startswith("using the supernet another worker trained")


@pytest.mark.parametrize(
    ("space", "device"), [("nasbench201", "pixel3"), ("fbnet", "pixel3"), ("ofa", "titan_rtx_1")]
)
def test_a_tables_cost_bounds_hold_every_architecture(space, device):
    """What an impossible limit on a sampled table (OFA's, FBNet's 5,000) is refused by: the
    table's bounds over the whole space, exact for an additive table (FBNet's: each layer's
    dearest choice summed), and near the extremes of what it prices, not vacuous."""
    lut = table_lut(space, device)
    low, high = lut.cost_bounds()
    enum = lut.enumeration()
    if enum is not None:  # NAS-Bench-201: every cell
        costs = lut.cost_indices(enum[0])
    else:  # a sample, and the table's own architectures
        rng = np.random.default_rng(0)
        sample = np.stack([rng.integers(0, n, 20_000) for n in lut.sizes], 1)
        ends = np.array([np.zeros(len(lut.sizes), int), np.array(lut.sizes) - 1])
        costs = lut.cost_indices(np.concatenate([sample, lut.known_indices(), ends]))
    assert low <= min(costs.min(), lut.min_cost()) and costs.max() <= high
    assert low >= max(lut.floor, 0.9 * lut.min_cost())
    assert space == "fbnet" or high <= 1.1 * costs.max()  # FBNet's: exact, below
    if space == "fbnet":  # additive: each decision's dearest choice, together, is one network
        dearest = [
            int(np.argmax([lut.weights[t] for t, ((e, _),) in enumerate(lut.terms) if e == d]))
            for d in range(len(lut.sizes))
        ]
        assert high == pytest.approx(float(lut.cost_indices(np.array([dearest]))[0]))
