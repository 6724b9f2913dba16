"""Conformance tests run on every registered search space."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.devices import get_device
from hwnas.errors import HwnasError
from hwnas.measure import arch_workload
from hwnas.spaces import IndexedSpace, ability, get_space, list_spaces

SPACES = list_spaces()
INDEXED = [n for n in SPACES if ability(get_space(n), IndexedSpace) is not None]


def test_the_shipped_spaces_are_registered():
    assert SPACES == [
        "fbnet",
        "fbnet_declared",
        "mobilenetv4",
        "mobilenetv4_m",
        "nasbench201",
        "ofa",
        "ofa_declared",
        "vit",
    ]
    assert INDEXED == ["fbnet", "nasbench201", "ofa"]


@pytest.mark.parametrize("name", SPACES)
def test_choices_roundtrip_and_sampling(name):
    space = get_space(name)
    rng = np.random.default_rng(0)
    for arch in space.sample(rng, 20):
        assert space.parse(arch.text) == arch
        assert space.from_choices(space.to_choices(arch)) == arch
    dims = space.choices()
    x = space.encode(space.sample(rng, 5))
    assert x.shape == (5, sum(len(v) for v in dims.values()))


@pytest.mark.parametrize("name", ["mobilenetv4", "vit"])
def test_a_declared_spaces_malformed_arch_string_is_one_line_naming_the_token(name):
    space = get_space(name)
    text = space.sample(np.random.default_rng(0), 1)[0].text
    first, rest = text.split()[0], " ".join(text.split()[1:])
    key = first.partition("=")[0]
    cases = {
        f"{first} {first} {rest}": f"'{key}' given twice",
        f"{key} {rest}": f"token '{key}' is not KEY=VALUE",
        f"x{first} {rest}": f"unknown key 'x{key}'; keys: ",
        rest: f"missing {key}",
    }
    for bad, message in cases.items():
        with pytest.raises(HwnasError, match=f"^malformed {name} arch string: {message}"):
            space.parse(bad)
    with pytest.raises(HwnasError, match="^arch must be a string, got int$"):
        space.parse(3)


@pytest.mark.parametrize("name", INDEXED)
def test_sampled_table_index(name):
    space = get_space(name)
    archs = space.all_archs()
    for i in (0, len(archs) // 2, len(archs) - 1):
        assert space.index(archs[i]) == i and space.arch_at(i) == archs[i]
        assert space.parse(archs[i].text) == archs[i]  # table strings are canonical


@pytest.mark.parametrize(
    ("name", "garbage", "named"),
    [
        ("fbnet", "k3_e1 " * 21 + "k7_e9", "k7_e9"),
        ("fbnet", "k3_e1 " * 21, "21 blocks"),
        ("ofa", "ks=3;e=3;d=2;r=128", "'ks' needs 20 values"),
        (
            "ofa",
            "ks=" + ",".join(["9"] * 20) + ";e=" + ",".join(["3"] * 20) + ";d=2,2,2,2,2;r=128",
            "ks value 9",
        ),
        ("ofa", "kernels=3", "bad part 'kernels=3'"),
    ],
)
def test_malformed_strings_name_the_problem(name, garbage, named):
    with pytest.raises(HwnasError, match=named):
        get_space(name).parse(garbage)


def test_ofa_encoding_masks_inactive_blocks():
    space = get_space("ofa")
    base = space.decode(space.arch_at(0))
    assert base.d[0] == 2
    # change the kernel of block 3 (stage 0, past depth 2): same network, same encoding
    ks = list(base.ks)
    ks[3] = 3 if ks[3] != 3 else 5
    other = space.from_config(type(base)(tuple(ks), base.e, base.d, base.r))
    assert other != space.arch_at(0)
    np.testing.assert_array_equal(space.encode([other]), space.encode([space.arch_at(0)]))
    assert space.input_shape(other, "imagenet") == (3, base.r, base.r)


@pytest.mark.parametrize(
    ("name", "dataset", "device"),
    [
        ("fbnet", "cifar100", "pixel3"),
        ("ofa", "imagenet", "2080ti_1"),
    ],
)
def test_network_exports_to_onnx_and_matches_pytorch(name, dataset, device):
    import onnxruntime as ort
    import torch

    space = get_space(name)
    arch = space.arch_at(7)
    wl = arch_workload(space, arch, dataset)
    torch.manual_seed(0)
    model = space.build(arch, dataset)
    for m in model.modules():  # calibrated batch norm, as a trained network has
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        model(torch.randn(8, *wl.input_shape[1:]))
    model.eval()
    from hwnas.export import export_onnx

    data = export_onnx(model, wl.input_shape)
    x = np.random.default_rng(0).standard_normal((2, *wl.input_shape[1:])).astype(np.float32)
    got = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    with torch.no_grad():
        want = model(torch.from_numpy(x)).numpy()
    assert got.shape == (2, space.dataset(dataset).num_classes)
    np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)
    # the recorded table has this architecture
    assert get_device(device).measure(wl).value > 0
