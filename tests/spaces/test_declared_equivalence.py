"""FBNet and OFA MobileNetV3 written in the space language build the same networks as the
hand-written builders: parameters, FLOPs and outputs equal after copying the weights, on 20
architectures of each space (the legacy spaces' own sampled architectures, translated)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from hwnas.export import count_params_flops
from hwnas.spaces import get_space


def fbnet_to_declared(legacy, declared, arch):
    tokens = legacy.layers(arch)
    return declared.from_choices({d.key: t for d, t in zip(declared.decisions, tokens)})


def ofa_to_declared(legacy, declared, arch):
    cfg = legacy.decode(arch)
    values = {"r": str(cfg.r)}
    for s in range(5):
        values[f"s{s + 1}.d"] = str(cfg.d[s])
        for i in range(4):
            b = 4 * s + i
            values[f"s{s + 1}.{i}.kernel"] = str(cfg.ks[b])
            values[f"s{s + 1}.{i}.expand"] = str(cfg.e[b])
    return declared.from_choices(values)


def _randomise_bn(net: torch.nn.Module, seed: int) -> None:
    """Batch norm as after training (so that a misplaced norm or activation shows)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                for t in (m.weight, m.bias, m.running_mean):
                    t.copy_(torch.randn(t.shape, generator=g) * 0.5)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)


def _copy_by_order(src: torch.nn.Module, dst: torch.nn.Module) -> None:
    a, b = src.state_dict(), dst.state_dict()
    assert len(a) == len(b)
    for (ka, ta), (kb, tb) in zip(a.items(), b.items()):
        assert ta.shape == tb.shape, (ka, kb, ta.shape, tb.shape)
    dst.load_state_dict({kb: ta.clone() for (_ka, ta), kb in zip(a.items(), b)})


@pytest.mark.slow
@pytest.mark.parametrize(
    ("legacy_name", "declared_name", "dataset", "translate", "side"),
    [
        ("fbnet", "fbnet_declared", "cifar100", fbnet_to_declared, None),
        ("ofa", "ofa_declared", "imagenet", ofa_to_declared, 32),
    ],
)
def test_declared_space_builds_the_legacy_networks(
    legacy_name, declared_name, dataset, translate, side
):
    """20 architectures each: the legacy space's sampled (tabulated) ones, spread over the
    table, plus its reference set; same parameters and FLOPs at the space's input size, same
    logits (within float32 rounding) after copying the weights."""
    torch.set_num_threads(1)
    legacy, declared = get_space(legacy_name), get_space(declared_name)
    archs = [legacy.arch_at(i) for i in np.linspace(0, len(legacy) - 1, 10).astype(int)]
    archs += legacy.reference_archs()
    assert len(set(archs)) == 20
    for n, arch in enumerate(archs):
        twin = translate(legacy, declared, arch)
        shape = (1, *legacy.input_shape(arch, dataset))
        assert declared.input_shape(twin, dataset) == shape[1:]
        old, new = legacy.build(arch, dataset), declared.build(twin, dataset)
        if side is not None:  # FLOPs and outputs at a smaller input: the same networks, faster
            shape = (1, 3, side, side)
        assert count_params_flops(old, shape) == count_params_flops(new, shape)
        _randomise_bn(old, n)
        _copy_by_order(old, new)
        x = torch.randn(2, *shape[1:], generator=torch.Generator().manual_seed(n))
        with torch.no_grad():
            want, got = old.eval()(x), new.eval()(x)
        scale = float(want.abs().max())
        assert float((got - want).abs().max()) <= 1e-5 * max(1.0, scale), (arch.text, scale)
