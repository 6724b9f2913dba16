"""NAS-Bench-201 space: arch strings, index, encoding, the PyTorch network and its ONNX export."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.errors import HwnasError, UnknownNameError
from hwnas.spaces import get_space, list_spaces

SPACE = get_space("nasbench201")

ARCHS = [
    "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|",
    "|avg_pool_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|nor_conv_1x1~0|skip_connect~1|skip_connect~2|",
    "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",  # output is constant (all-zero cell)
    "|none~0|+|none~0|nor_conv_3x3~1|+|nor_conv_1x1~0|none~1|avg_pool_3x3~2|",  # dead node 1
]


def test_registry_lists_nasbench201():
    assert "nasbench201" in list_spaces()
    with pytest.raises(UnknownNameError, match="unknown search space 'nope'; known: .*nasbench201"):
        get_space("nope")


def test_every_table_arch_string_is_canonical_and_indexed():
    archs = SPACE.all_archs()
    assert len(archs) == 15625 == 5**6
    assert len({a.text for a in archs}) == 15625
    for i in (0, 1, 777, 15624):
        a = SPACE.parse(archs[i].text)
        assert a == archs[i] and SPACE.index(a) == i and SPACE.arch_at(i) == a
    # every combination of choices is in the table exactly once
    rng = np.random.default_rng(0)
    for a in SPACE.sample(rng, 50):
        assert SPACE.arch_at(SPACE.index(a)) == a
        assert SPACE.from_choices(SPACE.to_choices(a)) == a


def test_parse_strips_whitespace_and_index_zero_matches_the_official_order():
    a = SPACE.parse("  " + ARCHS[1] + "\n")
    assert a.text == ARCHS[1]
    assert SPACE.index(a) == 0  # the data README's index 0


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        (
            "|nor_conv_3x3~0|+|conv_5x5~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|none~2|",
            "conv_5x5",
        ),
        ("|nor_conv_3x3~1|+|none~0|none~1|+|none~0|none~1|none~2|", "nor_conv_3x3~1"),
        ("|nor_conv_3x3~0|+|none~0|none~1|", "found 2"),
        ("|nor_conv_3x3|+|none~0|none~1|+|none~0|none~1|none~2|", "nor_conv_3x3"),
        ("nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|", "nor_conv_3x3~0|"),
        ("|none~0|+|none~0|+|none~0|none~1|none~2|", "node 2"),
        ("", "found 1"),
    ],
)
def test_malformed_arch_strings_name_the_bad_token(text, bad):
    with pytest.raises(HwnasError) as info:
        SPACE.parse(text)
    message = str(info.value)
    assert "malformed NAS-Bench-201 arch string" in message and bad in message
    assert "\n" not in message


def test_valid_strings_are_parsed_once_within_a_bound_and_bad_ones_every_time(monkeypatch):
    """A search reads every cell's operations many times (its candidate pool encodes all
    15,625 cells each time it is built): a valid string is parsed once; a bad one is refused
    every time; strings handed in (the same cells spaced otherwise) fill no more than the
    bound of what is kept."""
    from hwnas.spaces import nasbench201

    space = nasbench201.NasBench201Space(SPACE.config, SPACE.root)  # nothing parsed yet
    parse, calls = space._parse_new, []
    monkeypatch.setattr(space, "_parse_new", lambda text: calls.append(text) or parse(text))
    for _ in range(3):
        assert space.parse(ARCHS[0]).text == ARCHS[0]
    bad = ARCHS[0].replace("nor_conv_3x3~0", "conv_5x5~0", 1)
    for _ in range(2):
        with pytest.raises(HwnasError, match="unknown operation 'conv_5x5'"):
            space.parse(bad)
    assert calls == [ARCHS[0], bad, bad]
    monkeypatch.setattr(nasbench201, "PARSED_KEPT", 4)
    assert {space.parse(" " * k + ARCHS[1]).text for k in range(10)} == {ARCHS[1]}
    assert len(space._parsed) == 4


def test_index_out_of_range_is_a_clear_error():
    with pytest.raises(HwnasError, match="out of range"):
        SPACE.arch_at(15625)


def test_encoding_is_one_hot_per_edge():
    archs = [SPACE.parse(t) for t in ARCHS]
    x = SPACE.encode(archs)
    assert x.shape == (4, 30) and x.dtype == np.float32
    np.testing.assert_array_equal(x.reshape(4, 6, 5).sum(-1), np.ones((4, 6)))
    # edge 1<-0 of ARCHS[0] is nor_conv_3x3, the 4th operation
    assert x[0, :5].tolist() == [0, 0, 0, 1, 0]
    assert x[2].reshape(6, 5)[:, 0].tolist() == [1] * 6  # all none


def test_unknown_dataset():
    with pytest.raises(UnknownNameError, match="unknown dataset 'mnist'"):
        SPACE.dataset("mnist")


def test_accuracy_tables():
    acc200 = SPACE.table_accuracy("cifar10")
    acc12 = SPACE.table_accuracy("cifar100", epochs=12)
    assert acc200.shape == acc12.shape == (15625,)
    best = SPACE.arch_at(int(acc200.argmax()))
    assert acc200.max() == pytest.approx(94.37, abs=0.01)
    assert SPACE.ops(best).count("nor_conv_3x3") >= 3
    with pytest.raises(HwnasError, match="200 and 12"):
        SPACE.table_accuracy("cifar10", epochs=50)


# -- PyTorch network and ONNX -------------------------------------------------------------------


def _realistic_weights(model, input_shape, seed: int = 0) -> None:
    """Random affine batch-norm parameters and running statistics calibrated on random data,
    so activations have the scale of a trained network and parity tests real arithmetic."""
    import torch

    g = torch.Generator().manual_seed(seed)
    bns = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    for m in bns:
        m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
        m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
        m.reset_running_stats()
        m.momentum = None  # cumulative average over the calibration batches
    model.train()
    with torch.no_grad():
        for _ in range(2):
            model(torch.randn(16, *input_shape, generator=g))
    model.eval()


@pytest.mark.parametrize(
    ("arch", "dataset"),
    [
        (ARCHS[0], "cifar10"),
        (ARCHS[1], "cifar100"),
        (ARCHS[2], "cifar10"),
        (ARCHS[3], "imagenet16"),
    ],
)
def test_onnx_export_matches_pytorch(arch, dataset):
    import onnx
    import onnxruntime as ort
    import torch

    from hwnas.export import export_onnx

    spec = SPACE.dataset(dataset)
    torch.manual_seed(1)
    model = SPACE.build(SPACE.parse(arch), dataset)
    _realistic_weights(model, spec.input_shape)
    data = export_onnx(model, (1, *spec.input_shape))
    onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    x = np.random.default_rng(0).standard_normal((3, *spec.input_shape)).astype(np.float32)
    session = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    got = session.run(None, {"input": x})[0]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    assert got.shape == (3, spec.num_classes)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    assert np.abs(want).max() > 1e-3  # a real signal, not all zeros


def test_network_shapes_params_and_flops():
    import torch

    from hwnas.export import count_params_flops

    # Stage widths 16/32/64, 5 cells each: one conv3x3 per edge costs 9*C*C weights.
    conv_only = SPACE.parse(
        "|nor_conv_3x3~0|+|none~0|none~1|+|none~0|none~1|none~2|"
    )  # node 3 has no input: output constant -> only stem, reductions, classifier count
    all_none = SPACE.parse(ARCHS[2])
    p_none, f_none = count_params_flops(SPACE.build(all_none, "cifar10"), (1, 3, 32, 32))
    p_conv, f_conv = count_params_flops(SPACE.build(conv_only, "cifar10"), (1, 3, 32, 32))
    # The conv on edge 1<-0 feeds nothing in the output, yet it is in the network (reference
    # implementation); its cost: 5 cells x (9*C^2 weights + 2C BN) per stage.
    extra_params = sum(5 * (9 * c * c + 2 * c) for c in (16, 32, 64))
    extra_macs = sum(5 * 9 * c * c * hw * hw for c, hw in ((16, 32), (32, 16), (64, 8)))
    assert p_conv - p_none == extra_params
    assert f_conv - f_none == extra_macs
    model = SPACE.build(SPACE.parse(ARCHS[0]), "imagenet16")
    with torch.no_grad():
        assert model(torch.zeros(2, 3, 16, 16)).shape == (2, 120)


@pytest.mark.parametrize(
    ("arch", "effective"),
    [
        # node 1 feeds nothing that reaches the output: its edge is dead
        (
            "|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|",
            "|none~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|",
        ),
        # node 2 has no input: the conv on 2->3 sees zeros
        (
            "|none~0|+|none~0|none~1|+|avg_pool_3x3~0|none~1|nor_conv_3x3~2|",
            "|none~0|+|none~0|none~1|+|avg_pool_3x3~0|none~1|none~2|",
        ),
        (ARCHS[0], ARCHS[0]),  # everything live
    ],
)
def test_effective_operations(arch, effective):
    assert SPACE.effective_ops(SPACE.parse(arch)) == SPACE.ops(SPACE.parse(effective))


def test_unique_str_is_nas_bench_201s_isomorphism_key():
    """Structure.to_unique_str(consider_zero=True) of NAS-Bench-201's API: the 6,466 unique
    cells its paper counts; a dead convolution and a reordered sum change nothing."""
    keys = [SPACE.unique_str(a) for a in SPACE.all_archs()]
    assert len(set(keys)) == 6466
    key = SPACE.unique_str
    dead = SPACE.parse("|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    assert key(dead) == "#+#+0"
    assert key(dead) == key(SPACE.parse("|none~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|"))
    # the 1x1 convolution and the pooling swap places between two paths into the output
    a = SPACE.parse("|nor_conv_1x1~0|+|none~0|none~1|+|avg_pool_3x3~0|skip_connect~1|none~2|")
    b = SPACE.parse("|avg_pool_3x3~0|+|none~0|none~1|+|nor_conv_1x1~0|skip_connect~1|none~2|")
    assert key(a) == key(b) == "#+(0)@avg_pool_3x3+(0)@nor_conv_1x1"
    c = SPACE.parse("|nor_conv_3x3~0|+|none~0|none~1|+|avg_pool_3x3~0|skip_connect~1|none~2|")
    assert key(c) != key(a)


def test_surrogate_features_are_equal_for_functionally_equal_cells():
    a = SPACE.parse("|nor_conv_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    b = SPACE.parse("|avg_pool_3x3~0|+|none~0|none~1|+|skip_connect~0|none~1|none~2|")
    c = SPACE.parse("|none~0|+|none~0|none~1|+|nor_conv_3x3~0|none~1|none~2|")
    x = SPACE.surrogate_features([a, b, c])
    assert x.shape == (3, 150)
    np.testing.assert_array_equal(x[0], x[1])  # the zero-cost column too: averaged per function
    assert (x[0] != x[2]).any()
    # c's one live path is a single 3x3 convolution: canonical path kind 2 (after the empty
    # path 0 and conv 1x1 1), counted once
    assert x[2, :40].tolist() == [0, 0, 1] + [0] * 37


@pytest.mark.parametrize("index", [0, 1, 9999])
def test_the_shipped_synflow_table_is_what_the_code_computes(index):
    """search_spaces/nasbench201/synflow.csv.gz was made by hwnas.spaces.zero_cost (16 minutes
    of one core for all cells): a cell recomputed here gives the same score."""
    import torch

    from hwnas.spaces.zero_cost import synflow_of_cell

    shipped = SPACE.synflow_scores()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        computed = synflow_of_cell(SPACE, index)
    finally:
        torch.set_num_threads(threads)
    assert computed > 1e10 and computed == pytest.approx(shipped[index], rel=1e-9)


def test_synflow_ranks_cells_by_accuracy_and_is_zero_where_the_output_ignores_the_input():
    """The proxy's Spearman rho with CIFAR-100 accuracy is about 0.75 over the cells above
    chance (Abdelfattah et al., ICLR 2021, report about 0.75 on NAS-Bench-201); the 341
    cells with no live path from input to output score 0."""
    from scipy.stats import spearmanr

    from hwnas.spaces.zero_cost import synflow_of_cell

    score = SPACE.synflow_scores()
    acc = SPACE.table_accuracy("cifar100")
    above_chance = acc > 1.5
    assert 0.7 < spearmanr(score[above_chance], acc[above_chance])[0] < 0.8
    dead = np.flatnonzero(score == 0)
    assert len(dead) == 341 and (acc[dead] <= 1.5).all()
    assert synflow_of_cell(SPACE, int(dead[0])) == 0.0
