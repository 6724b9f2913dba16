"""Spaces made from PyTorch modules (hwnas.nn choice points; a user's own model made elastic):
exact subnets across residual additions and concatenations, refusals in one line, a one-shot
search of a space written in PyTorch code from the CLI, and a user's residual CNN made elastic
and searched on the live CPU with the user's own evaluation function, its front written to a
zoo that hwnas.zoo.load reads back."""

from __future__ import annotations

import json
import math
from collections import OrderedDict

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import hwnas_cli, hwnas_main
from torch import nn

import hwnas
import hwnas.nn as hn
from hwnas.errors import HwnasError
from hwnas.spaces import get_space, reload_spaces


def kept(container: nn.Module) -> list[str]:
    """The names of ``container``'s blocks a subnet runs (a dropped one keeps its place as a
    :class:`~hwnas.spaces.module.network.DroppedBlock`)."""
    from hwnas.spaces.module.network import DroppedBlock

    return [k for k, m in container._modules.items() if not isinstance(m, DroppedBlock)]


@pytest.fixture(autouse=True)
def _one_thread_and_fresh_spaces():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    reload_spaces()
    yield
    reload_spaces()
    torch.set_num_threads(before)


class Residual(nn.Module):
    """A ResNet basic block (two 3x3 convs + BN, identity shortcut)."""

    def __init__(self, c: int):
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class InvertedResidual(nn.Module):
    """MobileNetV2's block: 1x1 expand, 7x7 depthwise, squeeze-excite, 1x1 project, shortcut."""

    def __init__(self, c: int, e: int = 4):
        super().__init__()
        h = c * e
        self.expand = nn.Sequential(nn.Conv2d(c, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU6())
        self.dw = nn.Sequential(
            nn.Conv2d(h, h, 7, padding=3, groups=h, bias=False), nn.BatchNorm2d(h), nn.ReLU6()
        )
        self.se1, self.se2 = nn.Conv2d(h, 8, 1), nn.Conv2d(8, h, 1)
        self.project = nn.Sequential(nn.Conv2d(h, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, x):
        h = self.dw(self.expand(x))
        h = h * torch.sigmoid(self.se2(F.relu(self.se1(h.mean((2, 3), keepdim=True)))))
        return x + self.project(h)


class Mixed(nn.Module):
    """Residual stage, inverted residuals, two branches concatenated, a classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16))
        self.stage1 = nn.Sequential(Residual(16), Residual(16), Residual(16))
        self.down = nn.Conv2d(16, 24, 3, stride=2, padding=1)
        self.stage2 = nn.Sequential(InvertedResidual(24), InvertedResidual(24))
        self.a, self.b = nn.Conv2d(24, 16, 1), nn.Conv2d(24, 16, 3, padding=1)
        self.mix = nn.Conv2d(32, 32, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(F.relu(self.stem(x)))))
        x = self.mix(torch.cat([self.a(x), self.b(x)], 1))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def _randomised(model: nn.Module) -> nn.Module:
    """Batch-norm statistics and scales away from their defaults (as after training)."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.copy_(torch.rand(m.num_features, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
    return model.eval()


def _assert_subnets_exact(space, model, x, classes=10, atol=1e-5):
    """The full subnet computes what ``model`` does, and the supernet's path of the smallest
    and 3 random subnets equals the subnet cut out of it."""
    from hwnas.supernet.module import ModuleSupernet

    with torch.no_grad():
        assert torch.allclose(space.subnet(space.largest())(x), model(x), atol=atol)
        net = ModuleSupernet(space, classes, tuple(x.shape[1:]), {}).eval()
        for arch in [space.smallest(), *space.sample(np.random.default_rng(0), 3)]:
            got = net(x, net.path_of(arch))
            assert torch.allclose(got, net.extract(arch)(x), atol=atol), arch.text


def test_elastic_subnets_are_exact_across_residuals_se_and_concatenation():
    """The full subnet computes what the model does (channels reordered by importance change
    nothing); every sampled subnet's supernet path equals its extracted module, whose ONNX
    export equals it too; residual groups are one decision, concatenated branches two."""
    import onnxruntime as ort

    from hwnas.export import export_onnx
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    model = _randomised(Mixed())
    x = torch.randn(3, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="mixed")
    kinds = {d.key: d.kind for d in space.decisions}
    assert kinds["stem.0.w"] == "width" and kinds["stage1.d"] == "depth"
    assert kinds["stage2.0.dw.0.k"] == "kernel" and space.by_key["stage2.0.dw.0.k"].values == (
        3,
        5,
        7,
    )
    assert {"a.w", "b.w", "mix.w"} <= set(kinds)  # both branches of the concatenation
    assert not any(k.startswith(("stage1.0.c2", "stage1.1.c2")) for k in kinds)  # residual: stem's
    with torch.no_grad():
        assert torch.allclose(space.subnet(space.largest())(x), model(x), atol=1e-5)
        net = ModuleSupernet(space, 10, (3, 16, 16), {}).eval()
        archs = [space.smallest(), *space.sample(np.random.default_rng(0), 4)]
        for arch in archs:
            sub = net.extract(arch)
            assert torch.allclose(net(x, net.path_of(arch)), sub(x), atol=1e-5), arch.text
        small = net.extract(space.smallest())
    assert (
        sum(p.numel() for p in small.parameters()) < sum(p.numel() for p in model.parameters()) / 4
    )
    session = ort.InferenceSession(export_onnx(small, (1, 3, 16, 16)))
    got = session.run(None, {"input": x.numpy()})[0]
    assert np.abs(got - small(x).detach().numpy()).max() < 1e-4
    assert space.parse(archs[1].text) == archs[1]


class Attention(nn.Module):
    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = (q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, n, c))


class ViT(nn.Module):
    """A small ViT: patch embedding, class token, position embeddings, pre-norm blocks."""

    def __init__(self, d: int = 32, depth: int = 3):
        super().__init__()
        self.embed = nn.Conv2d(3, d, 4, 4)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.02)
        self.blocks = nn.Sequential(*[self._block(d) for _ in range(depth)])
        self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 10)

    @staticmethod
    def _block(d):
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.n1, self.attn = nn.LayerNorm(d), Attention(d, 4)
                self.n2, self.fc1, self.fc2 = (
                    nn.LayerNorm(d),
                    nn.Linear(d, 4 * d),
                    nn.Linear(4 * d, d),
                )

            def forward(self, x):
                x = x + self.attn(self.n1(x))
                return x + self.fc2(F.gelu(self.fc1(self.n2(x))))

        return Block()

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


def test_a_vit_gets_elastic_mlp_widths_and_depth_with_attention_fixed():
    torch.manual_seed(0)
    model = ViT().eval()
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="vit_t")
    assert {d.key: d.kind for d in space.decisions} == {
        "blocks.d": "depth",
        **{f"blocks.{i}.fc1.w": "width" for i in range(3)},
    }
    fixed = space.describe()["fixed_widths"]
    assert "reshape" in fixed["blocks.0.attn.qkv"]  # heads are reshaped out of the channels
    with torch.no_grad():
        assert torch.allclose(space.subnet(space.largest())(x), model(x), atol=1e-5)
        small = space.subnet(space.smallest())
    assert len(kept(small.blocks)) == 1 and small.blocks[0].fc1.out_features == 32


@pytest.mark.parametrize(
    "network, depths",
    [  # flat stem-to-head nn.Sequentials, as written from their papers (hwnas.known_networks)
        (
            "mobilenet_v2",
            {
                "2-3.d": (1, 2),
                "4-6.d": (1, 2, 3),
                "7-10.d": (1, 2, 3, 4),
                "11-13.d": (1, 2, 3),
                "14-16.d": (1, 2, 3),
            },
        ),  # fmt: skip
        ("resnet18", {"1-3.d": (1, 2, 3), "4-5.d": (1, 2), "6-7.d": (1, 2), "8-9.d": (1, 2)}),
        ("shufflenet_v2", {}),  # its units split and shuffle channels: none adds its input
    ],
)
def test_flat_networks_get_a_depth_per_run_of_residual_blocks(network, depths):
    """Once-for-All's stages inside one flat list: each run of residual blocks after the block
    that changed the shape can be shortened (that block kept); blocks that do not add their
    input (ShuffleNetV2's units, a depthwise conv inside a block's body) are never dropped;
    the supernet's path of every sampled subnet equals its extracted module."""
    from hwnas.known_networks import build_network

    torch.manual_seed(0)
    model = _randomised(build_network(network, num_classes=10, width=0.5, side=32))
    x = torch.randn(2, 3, 32, 32)
    space = hwnas.elastic(model, x[:1], name=network)
    assert {d.key: d.values for d in space.decisions if d.kind == "depth"} == depths
    _assert_subnets_exact(space, model, x)
    dropped = sum(len(v) - 1 for v in depths.values())
    assert len(kept(space.subnet(space.smallest()))) == len(model) - dropped


class TorchvisionBottleneck(nn.Module):
    """torchvision's ResNet Bottleneck as written there: one ``self.relu`` called three times,
    ``out += identity``, a ``downsample`` Sequential; plus squeeze-excite through ``view`` and
    ``expand_as`` (SENet's code)."""

    def __init__(self, c_in: int, c: int, stride: int):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c_in, c, 1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, stride, 1, bias=False), nn.BatchNorm2d(c)
        self.conv3, self.bn3 = nn.Conv2d(c, 4 * c, 1, bias=False), nn.BatchNorm2d(4 * c)
        self.fc1, self.fc2 = nn.Linear(4 * c, c), nn.Linear(c, 4 * c)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or c_in != 4 * c:
            self.downsample = nn.Sequential(
                nn.Conv2d(c_in, 4 * c, 1, stride, bias=False), nn.BatchNorm2d(4 * c)
            )

    def forward(self, x):
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        b, c, _, _ = out.size()
        se = F.adaptive_avg_pool2d(out, 1).view(b, c)
        se = torch.sigmoid(self.fc2(self.relu(self.fc1(se)))).view(b, c, 1, 1)
        out = out * se.expand_as(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class TorchvisionResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.relu = nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU()
        block = TorchvisionBottleneck
        self.layer1 = nn.Sequential(block(16, 8, 1), block(32, 8, 1))
        self.layer2 = nn.Sequential(block(32, 16, 2), block(64, 16, 1))
        self.avgpool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(64, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(self.relu(self.conv1(x))))
        x = self.avgpool(x)
        return self.fc(x.view(x.size(0), -1))


def test_a_layer_without_weights_called_many_times_leaves_widths_elastic():
    """torchvision's blocks call one ``nn.ReLU`` three times: no weights are shared, so every
    bottleneck width and the residual stream stay elastic, and the subnets stay exact."""

    torch.manual_seed(0)
    model = _randomised(TorchvisionResNet())
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="tv_resnet")
    assert space.describe()["fixed_widths"] == {}
    keys = {d.key for d in space.decisions}
    assert {"layer1.0.conv1.w", "layer1.0.conv2.w", "layer2.1.conv1.w", "conv1.w"} <= keys
    assert {"layer1.d", "layer2.d"} <= keys
    _assert_subnets_exact(space, model, x)


class ControlFlow(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 8, 3), nn.Linear(8, 10)

    def forward(self, x):
        y = self.conv(x)
        if y.sum() > 0:  # data-dependent: torch.fx cannot trace it
            y = -y
        return self.fc(y.mean((2, 3)))


class Frozen(nn.Module):
    """Channels flattened with positions into the classifier: nothing can be sliced."""

    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 4, 3, padding=1), nn.Linear(4 * 16 * 16, 10)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


class BadChoice(nn.Module):
    def __init__(self):
        super().__init__()
        self.op = hn.Choice([nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(3, 8, 3)])
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.op(x).mean((2, 3)))


class WidthIntoFlatten(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, hn.ValueChoice([2, 4]), 3, padding=1)
        self.fc = nn.Linear(4 * 16 * 16, 10)

    def forward(self, x):
        return self.fc(self.conv(x).flatten(1))


@pytest.mark.parametrize(
    "model, make, message",
    [
        (ControlFlow, hwnas.elastic, "cannot trace the forward of ControlFlow with torch.fx"),
        (Frozen, hwnas.elastic, "nothing can be made elastic"),
        (BadChoice, hn.space, "Choice 'op': candidates give different shapes"),
        (WidthIntoFlatten, hn.space, "'conv': its width ValueChoice([2, 4]) cannot be searched"),
    ],
)
def test_unsupported_models_are_refused_in_one_line_naming_the_layer(model, make, message):
    with pytest.raises(HwnasError) as err:
        make(model(), torch.zeros(1, 3, 16, 16))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_evaluator_protocol_checks_the_users_function():
    from hwnas.engine.evaluate import accuracy_function
    from hwnas.spaces.base import Arch

    arch = Arch("s", "a=1")
    assert accuracy_function(lambda model, arch: 87.5)(None, arch) == 87.5
    assert accuracy_function(lambda model, arch, data: data)(None, arch, 12) == 12.0
    with pytest.raises(HwnasError, match="must take \\(model, arch\\) or \\(model, arch, data\\)"):
        accuracy_function(lambda model: 1.0)

    def fraction(model, arch):
        return 0.9 + 1e9  # not a percentage

    with pytest.raises(HwnasError, match="fraction returned .* for a=1: it must return top-1"):
        accuracy_function(fraction)(None, arch)

    def broken(model, arch):
        return {}["missing"]

    # an error in the user's code stops the search in one line, not a traceback
    with pytest.raises(HwnasError, match="^the accuracy function .*broken failed on a=1: KeyE"):
        accuracy_function(broken)(None, arch)
    with pytest.raises(HwnasError, match="got the network Linear$"):  # callable, but a network
        accuracy_function(nn.Linear(2, 2))
    checked = accuracy_function(fraction)
    assert accuracy_function(checked) is checked  # not wrapped twice


def test_an_accuracy_that_is_not_a_number_is_refused_and_one_value_arrays_are_read():
    """float() read the str "55" as 55.0 and True as 1.0 (stored as accuracies), and warned
    for a tensor that needs grad; a one-value tensor or array is read, without a warning."""
    import warnings

    from hwnas.engine.evaluate import accuracy_function
    from hwnas.spaces.base import Arch

    arch = Arch("s", "a=1")
    for value in ("55", b"55", True, np.bool_(True), torch.tensor(True), np.array("55")):

        def returns(model, arch, *, value=value):
            return value

        with pytest.raises(HwnasError, match="^the accuracy function .*returns returned the "):
            accuracy_function(returns)(None, arch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for value in (55, 55.0, np.float32(55), np.int64(55), np.array([55.0]),
                      torch.tensor(55.0, requires_grad=True),
                      torch.tensor([[55.0]], requires_grad=True)):  # fmt: skip
            assert accuracy_function(lambda model, arch, *, v=value: v)(None, arch) == 55.0
    for value in (torch.ones(2), np.ones(2), None):
        with pytest.raises(HwnasError, match="it must return top-1 accuracy in %"):
            accuracy_function(lambda model, arch, *, v=value: v)(None, arch)


def test_an_error_in_the_accuracy_function_keeps_the_users_traceback_and_one_cli_line(tmp_path):
    """The HwnasError was raised `from None`: a Python user lost their own traceback. It is
    chained now (its __cause__ is the user's exception); the CLI still prints one line."""
    from pathlib import Path

    from hwnas.engine.evaluate import accuracy_function
    from hwnas.spaces.base import Arch

    def broken(model, arch):
        return {}["missing"]

    with pytest.raises(HwnasError, match="broken failed on a=1: KeyError") as err:
        accuracy_function(broken)(None, Arch("s", "a=1"))
    assert isinstance(err.value.__cause__, KeyError)
    file = tmp_path / "acc.py"
    file.write_text("def broken(model, arch):\n    return {}['missing']\n")
    space = Path(__file__).parent / "my_space.py"
    result = hwnas_main(
        "search", "--space", f"{space}:space", "--accuracy", f"{file}:broken", "--data", "digits",
        "--device", "cpu-fast", "--strategy", "random", "--no-zoo", "--budget", "1",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert result.returncode == 2
    assert "broken failed on" in result.stderr and "KeyError: 'missing'" in result.stderr
    assert "Traceback" not in result.stderr and "{}['missing']" not in result.stderr
    # sys.exit in it ended the search with the status it gave: 0, nothing said, no front
    file = tmp_path / "quits.py"
    file.write_text("import sys\ndef quits(model, arch):\n    sys.exit(0)\n")
    result = hwnas_main(
        "search", "--space", f"{space}:space", "--accuracy", f"{file}:quits", "--data", "digits",
        "--device", "cpu-fast", "--strategy", "random", "--no-zoo", "--budget", "1",
        "--out", str(tmp_path / "run2"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith("error: the accuracy function quits called"), (
        result.stderr
    )
    assert " called sys.exit(0) on " in errors[0]
    assert errors[0].endswith(": it must return the accuracy (%), not end the program")


def test_a_misspelt_or_mistyped_argument_of_elastic_or_nn_space_is_one_line():
    """hwnas.elastic(m, x, widht=...) and hwnas.nn.space(Net(), x, nmae=...) raised Python's
    TypeError, name=3 a TypeError from the name check, ValueChoice(8) "'int' object is not
    iterable", and a ModuleSpace's subnet("w=8") an AttributeError: each is one line now."""
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(8, 10))  # fmt: skip
    x = torch.zeros(1, 3, 16, 16)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            width = hn.ValueChoice([8, 16], label="w")
            self.conv, self.head = nn.Conv2d(3, width, 3), nn.Linear(width, 10)

        def forward(self, x):
            return self.head(self.conv(x).mean((2, 3)))

    listed = "ValueChoice takes a list of candidate values .*got "
    for call, message in (
        (lambda: hwnas.elastic(model, x, widht=[0.5, 1]), "elastic 'widht'; did you mean widths"),
        (lambda: hwnas.elastic(model), "hwnas.elastic: missing a required argument: 'example_i"),
        (lambda: hwnas.elastic(model, x, name=3), "name must be a string, got int 3"),
        (lambda: hn.space(Net(), x, nmae="x"), "of hwnas.nn.space 'nmae'; did you mean name"),
        (lambda: hn.ValueChoice(8), listed + "int 8"),
        (lambda: hn.ValueChoice(None), listed + "NoneType"),
    ):  # fmt: skip
        with pytest.raises(HwnasError, match=message) as err:
            call()
        assert "\n" not in str(err.value)
    space = hn.space(Net(), x)
    assert space.subnet("w=8").hwnas_build["arch"] == "w=8"  # the space's own parse
    assert space.subnet("w=16")(x).shape == (1, 10)
    with pytest.raises(HwnasError, match="w=9 not in 8, 16"):
        space.subnet("w=9")
    with pytest.raises(HwnasError, match="subnet takes an Arch .* or an arch string, got dict"):
        space.subnet({"w": "8"})


def _import(path):
    """The user's file as their own script imports it (not through hwnas)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("users_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_users_residual_cnn_made_elastic_is_searched_from_python_and_the_cli(tmp_path):
    """tests/spaces/my_model.py (a residual CNN trained 30 steps on digits, made elastic) searched
    with hwnas.search(space=..., accuracy=...) on the live CPU: inherited weights score above
    chance before any fine-tuning, the subnets' measured latencies span more than 2x, its zoo
    entries load (hwnas.zoo.load) as ONNX Runtime sessions and PyTorch modules that agree. The
    same network searched with `hwnas search --space FILE:space --accuracy FILE:val_accuracy`
    gives the same front (its own study; latencies from the store, measured once per subnet)."""
    from pathlib import Path

    from hwnas.zoo import load

    file = Path(__file__).parent / "my_model.py"
    user = _import(file)
    options = dict(device="cpu-fast", budget=8, seed=0, data="digits")
    run = hwnas.search(
        space=user.space, accuracy=user.val_accuracy, out=tmp_path / "py",
        storage=f"sqlite:///{tmp_path / 'py.db'}", **options,
    )  # fmt: skip
    records = run.result.records
    assert len(records) == 8 and run.summary["settings"]["strategy"] == "nsga3"
    accuracies = [r.accuracy for r in records]
    assert max(accuracies) > 50 and np.median(accuracies) > 1.5 * 10  # chance: 10%
    assert all(r.attrs["accuracy_source"].startswith("function:val_accuracy") for r in records)
    assert "inherited weights" in records[0].attrs["accuracy_source"]
    front = run.front
    # Over all 8 subnets (3.2x here): the front alone spanned 1.97x on one CI machine, where
    # per-call overhead weighs more on the smallest subnet's 0.1 ms.
    latency = [r.costs["latency_ms"].value for r in records]
    assert len(front) >= 2 and max(latency) >= 2 * min(latency)
    assert all(s.startswith("measured:cpu-fast") for s in front["latency_ms_source"])
    # every front subnet above chance is in the zoo (a chance-level one can be on the front:
    # the fastest subnet, when its inherited weights score 10%)
    assert run.summary["zoo_weights"] == "inherited"
    assert len(run.zoo) == int((~front["chance_level"].astype(bool)).sum()) >= 1

    x = np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32)
    for entry in run.zoo:
        session, module = load(entry), load(entry, torch=True)
        card = json.loads((entry / "card.json").read_text())
        assert card["build"]["kind"] == "space"
        # the user's model and weights: its licence, not hwnas's MIT and benchmark NOTICE
        assert card["license"] == "other" and "NOTICE" not in card["license_note"]
        assert "the model made elastic" in card["license_note"]
        assert "license: other" in (entry / "README.md").read_text()
        with torch.no_grad():
            want = module(torch.from_numpy(x)).numpy()
        assert np.abs(session.run(None, {"input": x})[0] - want).max() < 1e-4

    cli = hwnas_main(
        "search", "--space", f"{file}:space", "--accuracy", f"{file}:val_accuracy",
        "--device", "cpu-fast", "--budget", "8", "--seed", "0", "--data", "digits",
        "--storage", f"sqlite:///{tmp_path / 'cli.db'}", "--out", str(tmp_path / "cli"),
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    summary = json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert summary["measurements"]["taken"] == 0  # every subnet's latency from the store
    columns = ["arch", "accuracy", "latency_ms"]
    import pandas as pd

    assert pd.read_csv(tmp_path / "cli" / "pareto.csv")[columns].equals(front[columns])

    reload_spaces()  # a fresh process: the space object must be handed over
    with pytest.raises(HwnasError, match="pass it, hwnas.zoo.load\\(entry, torch=True, space="):
        load(run.zoo[0], torch=True)
    assert isinstance(load(run.zoo[0], torch=True, space=user.space), nn.Module)


def test_a_space_in_pytorch_code_runs_oneshot_from_the_cli(tmp_path):
    """`hwnas search --space tests/spaces/my_space.py:space --strategy oneshot --accuracy
    tests/spaces/my_space.py:holdout_accuracy` (the file's Choice / ValueChoice / Repeat space)
    trains its supernet, derives subnets of the space, scores them with the user's function and
    measures them on the live CPU; a misnamed attribute stops in one line."""
    from pathlib import Path

    file = Path(__file__).parent / "my_space.py"
    out = tmp_path / "run"
    result = hwnas_main(
        "search", "--space", f"{file}:space", "--strategy", "oneshot", "--device", "cpu-fast",
        "--data", "digits", "--epochs", "1", "--finetune-epochs", "0", "--batch-size", "50",
        "--set", "limit=150", "--set", "cost=flops", "--set", "evolution_trials=6",
        "--set", "population=4", "--set", "candidates=2", "--out", str(out),
        "--accuracy", f"{file}:holdout_accuracy",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads((out / "summary.json").read_text())
    space = get_space(f"{file}:space", code=True)
    assert summary["settings"]["space"] == "tinytorch" == space.name
    assert summary["strategy"]["name"] == "oneshot"
    best = summary["best"]
    assert space.parse(best["arch"]).text == best["arch"]
    assert best["latency_ms_source"].startswith("measured:cpu-fast")
    assert best["accuracy_source"].startswith("function:")  # the user's function, fine-tuned
    assert summary["settings"]["accuracy"].endswith("my_space.py:holdout_accuracy")
    assert {d.kind for d in space.decisions} == {"width", "op", "depth", "kernel"}
    assert (
        space.parse("depth=1 kernel=3 width=8 op=skip").text == "width=8 op=skip depth=1 kernel=3"
    )
    with pytest.raises(HwnasError, match="arch string: missing op$"):
        space.parse("width=8 depth=1 kernel=3")
    for text, message in (("width=8 width=8", "'width' given twice"),
                          ("width8", "token 'width8' is not KEY=VALUE"),
                          ("wdth=8", "unknown key 'wdth'; keys: ")):  # fmt: skip
        with pytest.raises(HwnasError, match=f"^malformed tinytorch arch string: {message}"):
            space.parse(text)
    bad = hwnas_main(
        "search", "--space", f"{file}:spaec", "--device", "cpu-fast", "--strategy", "oneshot"
    )
    assert bad.returncode == 2
    assert "unknown attribute of" in bad.stderr and "did you mean space" in bad.stderr
    shown = hwnas_main("spaces", "show", f"{file}:space")  # typed by the user: imported
    assert shown.returncode == 0, shown.stderr
    assert f"file        {file}:space" in shown.stdout and "depth" in shown.stdout
    archs = tmp_path / "archs.csv"
    archs.write_text(f'arch\n"{best["arch"]}"\n')
    predicted = hwnas_main(  # no reference set measured in this home yet: says how, usably
        "predict", "--device", "cpu", "--space", f"{file}:space", "--archs", archs,
        "--out", tmp_path / "pred.csv",
    )  # fmt: skip
    assert predicted.returncode == 2
    assert f"run `hwnas refset measure --device cpu --space {file}:space`" in predicted.stderr


def test_nproc_passes_a_space_given_by_path_on_as_typed():
    """`--nproc N` starts the command again under torchrun: the space's path goes on (its name
    alone would be unknown in the new processes), the other options as given."""
    from pathlib import Path

    from hwnas.cli.search import search_cmd
    from hwnas.cli.supernet_search import command_line

    typed = f"{Path(__file__).parent / 'my_space.py'}:space"
    ctx = search_cmd.make_context(
        "search",
        ["--space", typed, "--device", "cpu-fast", "--strategy", "oneshot", "--nproc", "2"],
    )
    assert ctx.params["space"] == "tinytorch"  # the study and run folder use the name
    args = command_line(ctx, leave_out=("nproc",))
    assert args[args.index("--space") + 1] == typed and "--nproc" not in args
    assert args[args.index("--strategy") + 1] == "oneshot"


def test_a_users_file_may_import_the_files_beside_it(tmp_path):
    """As `python mynet.py` would: main imported mynet.py without its folder on sys.path, so
    its `import blocks` (a file beside it) failed with ModuleNotFoundError."""
    from hwnas.usercode import code_object

    (tmp_path / "blocks_beside.py").write_text("WIDTH = 24\n")
    (tmp_path / "mynet_beside.py").write_text("import blocks_beside\nwidth = blocks_beside.WIDTH\n")
    assert code_object(f"{tmp_path / 'mynet_beside.py'}:width") == 24


class DenseLayers(nn.Module):
    """DenseNet's pattern: each layer normalises the concatenation of all before it."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.bn1, self.conv1 = nn.BatchNorm2d(16), nn.Conv2d(16, 8, 3, padding=1)
        self.bn2, self.conv2 = nn.BatchNorm2d(24), nn.Conv2d(24, 8, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = self.stem(x)
        x = torch.cat([x, self.conv1(F.relu(self.bn1(x)))], 1)
        x = torch.cat([x, self.conv2(F.relu(self.bn2(x)))], 1)
        return self.fc(x.mean((2, 3)))


def test_a_batch_norm_over_a_concatenation_slices_each_groups_share():
    """DenseNet's layers normalise the concatenation of every layer before: each growth
    width is searched (they were fixed: "normalises a concatenation"), the batch norm keeps
    each group's active channels at its offset, in a supernet path, an extracted subnet and
    supernet training (its running statistics updated where those channels are)."""
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    model = _randomised(DenseLayers())
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="dense")
    assert space.describe()["fixed_widths"] == {}
    assert {"stem.w", "conv1.w", "conv2.w"} <= {d.key for d in space.decisions}
    _assert_subnets_exact(space, model, x)
    small = space.smallest()
    widths = space.values(small)
    net = ModuleSupernet(space, 10, (3, 16, 16), {}).train()
    bn2 = net.get_submodule("net.bn2")
    before = bn2.running_mean.clone()
    net(x, net.path_of(small))
    moved = (bn2.running_mean != before).nonzero().flatten().tolist()
    stem, grown = widths["stem.w"], widths["conv1.w"]
    assert moved == [*range(stem), *range(16, 16 + grown)]  # each group's first channels
    assert net.eval().extract(small).bn2.num_features == stem + grown


class BNHead(nn.Module):
    """A CNN with a BatchNorm1d in its MLP head (a re-ID model's BNNeck, tabular-style heads)."""

    def __init__(self):
        super().__init__()
        self.conv, self.bn = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.fc1, self.bn1 = nn.Linear(16, 64), nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn(self.conv(x))).mean((2, 3))
        return self.fc2(F.relu(self.bn1(self.fc1(x))))


def test_a_batchnorm1d_head_keeps_its_width_elastic():

    torch.manual_seed(0)
    model = BNHead().eval()
    with torch.no_grad():
        model.bn1.running_mean.uniform_(-0.5, 0.5)
        model.bn1.running_var.uniform_(0.5, 1.5)
    x = torch.randn(3, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="bnhead")
    assert space.by_key["fc1.w"].values == (16, 32, 48, 64)
    _assert_subnets_exact(space, model, x)
    assert space.subnet(space.smallest()).bn1.num_features == 16


class TorchEncoderViT(nn.Module):
    """A ViT written with PyTorch's own nn.TransformerEncoder (opaque to torch.fx as is)."""

    def __init__(self, norm_first: bool, d: int = 32):
        super().__init__()
        self.embed = nn.Conv2d(3, d, 4, 4)
        layer = nn.TransformerEncoderLayer(d, 4, 64, dropout=0.0, batch_first=True,
                                           norm_first=norm_first)  # fmt: skip
        self.encoder = nn.TransformerEncoder(
            layer, 3, norm=nn.LayerNorm(d), enable_nested_tensor=False
        )
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x).flatten(2).transpose(1, 2)).mean(1))


@pytest.mark.parametrize("norm_first", [False, True])
def test_pytorchs_transformer_encoder_gets_elastic_feed_forward_widths_and_depth(norm_first):
    """nn.TransformerEncoder(Layer) is traced through its plain computation: each layer's
    feed-forward width and the encoder's depth are searched, the subnets are exact (against
    PyTorch's own fast path for the full model) and export to ONNX."""
    import onnxruntime as ort

    from hwnas.export import export_onnx

    torch.manual_seed(0)
    model = TorchEncoderViT(norm_first).eval()
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="torch_vit")
    assert {d.key: d.kind for d in space.decisions} == {
        **{f"encoder.layers.{i}.linear1.w": "width" for i in range(3)},
        "encoder.layers.d": "depth",
    }
    assert type(model.encoder) is nn.TransformerEncoder  # the user's model is left as it was
    _assert_subnets_exact(space, model, x)
    with torch.no_grad():
        small = space.subnet(space.smallest())
        assert len(kept(small.encoder.layers)) == 1
        assert small.encoder.layers[0].linear1.out_features == 16
        session = ort.InferenceSession(export_onnx(small, (1, 3, 16, 16)))
        got = session.run(None, {"input": x.numpy()})[0]
        assert np.abs(got - small(x).numpy()).max() < 1e-4


class AttentionBlock(nn.Module):
    """nn.MultiheadAttention then an MLP, each with its residual."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.embed = nn.Conv2d(3, d, 4, 4)
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 64), nn.GELU(), nn.Linear(64, d))
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = self.embed(x).flatten(2).transpose(1, 2)
        x = x + self.attn(x, x, x, need_weights=False)[0]
        return self.head((x + self.mlp(x)).mean(1))


def test_a_subnet_with_multihead_attention_exports_to_onnx():
    """Without gradients nn.MultiheadAttention takes a fused fast path that has no ONNX
    export: export_onnx turns it off, so such a model reaches the zoo."""
    import onnxruntime as ort

    from hwnas.export import export_onnx

    torch.manual_seed(0)
    space = hwnas.elastic(AttentionBlock().eval(), torch.zeros(1, 3, 16, 16), name="attn")
    assert [d.key for d in space.decisions] == ["mlp.0.w"]
    small = space.subnet(space.smallest())
    x = torch.randn(2, 3, 16, 16)
    session = ort.InferenceSession(export_onnx(small, (1, 3, 16, 16)))
    with torch.no_grad():
        want = small(x).numpy()
    assert np.abs(session.run(None, {"input": x.numpy()})[0] - want).max() < 1e-4
    assert torch.backends.mha.get_fastpath_enabled()  # as it was


class NamedStages(nn.Module):
    """A flat nn.Sequential built from an OrderedDict (torchvision's ViT and DenseNet are): its
    blocks are named, not numbered."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            OrderedDict(
                stem=nn.Conv2d(3, 16, 3, padding=1),
                block_a=Residual(16),
                block_b=Residual(16),
                down=nn.Conv2d(16, 32, 3, 2, 1),
                block_c=Residual(32),
                block_d=Residual(32),
            )
        )
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.features(x).mean((2, 3)))


def test_blocks_named_in_an_ordereddict_get_depths_and_keep_their_names():
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    model = _randomised(NamedStages())
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="named")
    depths = {d.key: d.values for d in space.decisions if d.kind == "depth"}
    assert depths == {"features.0-2.d": (1, 2, 3), "features.d": (4, 5, 6)}
    small = space.subnet(space.smallest())
    assert kept(small.features) == ["stem", "down"]
    with torch.no_grad():
        net = ModuleSupernet(space, 10, (3, 16, 16), {}).eval()
        for arch in [space.smallest(), *space.sample(np.random.default_rng(0), 3)]:
            sub = net.extract(arch)
            assert torch.allclose(net(x, net.path_of(arch)), sub(x), atol=1e-5)
            assert set(sub.state_dict()) <= set(net.net.state_dict())  # names as trained


class TorchvisionEncoderBlock(nn.Module):
    """torchvision's ViT EncoderBlock as written there (the attention's output added first)."""

    def __init__(self, d: int = 32, mlp: int = 64):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(d, 4, batch_first=True)
        self.dropout = nn.Dropout(0.0)
        self.ln_2 = nn.LayerNorm(d, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(d, mlp), nn.GELU(), nn.Dropout(0.0), nn.Linear(mlp, d))

    def forward(self, input):
        torch._assert(input.dim() == 3, "expected (batch_size, seq_length, hidden_dim)")
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x)
        x = x + input
        return x + self.mlp(self.ln_2(x))


class TorchvisionViT(nn.Module):
    """torchvision's VisionTransformer's structure: patches, class token, position embedding,
    encoder layers named in an OrderedDict, the class token's output to the head."""

    def __init__(self, d: int = 32):
        super().__init__()
        self.conv_proj = nn.Conv2d(3, d, 4, 4)
        self.class_token = nn.Parameter(torch.zeros(1, 1, d))
        self.pos_embedding = nn.Parameter(torch.randn(1, 17, d) * 0.02)
        blocks = ((f"encoder_layer_{i}", TorchvisionEncoderBlock(d)) for i in range(3))
        self.layers = nn.Sequential(OrderedDict(blocks))
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.heads = nn.Sequential(OrderedDict(head=nn.Linear(d, 10)))

    def forward(self, x):
        n = x.shape[0]
        x = self.conv_proj(x).reshape(n, self.conv_proj.out_channels, -1).permute(0, 2, 1)
        x = torch.cat([self.class_token.expand(n, -1, -1), x], dim=1) + self.pos_embedding
        return self.heads(self.ln(self.layers(x))[:, 0])


def test_torchvisions_vit_gets_elastic_mlp_widths_and_depth():
    """The attention's output (a tuple's first element) keeps the query's layout, so the blocks
    after it are analysed: each MLP width and the encoder's depth are searched."""

    torch.manual_seed(0)
    model = TorchvisionViT().eval()
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="tv_vit")
    assert {d.key: d.kind for d in space.decisions} == {
        "layers.d": "depth",
        **{f"layers.encoder_layer_{i}.mlp.0.w": "width" for i in range(3)},
    }
    fixed = space.describe()["fixed_widths"]  # the class token is sliced, but torchvision's
    # _process_input reshapes with self.hidden_dim (and the attention splits it into heads)
    assert fixed == {"conv_proj": "'reshape' is given its channel count as a number"}
    _assert_subnets_exact(space, model, x)


class Residual1d(nn.Module):
    """A 1-D residual block: depthwise conv 9, pointwise expand and project, batch norms."""

    def __init__(self, c: int):
        super().__init__()
        self.dw, self.bn1 = nn.Conv1d(c, c, 9, padding=4, groups=c, bias=False), nn.BatchNorm1d(c)
        self.pw, self.pw2 = nn.Conv1d(c, 2 * c, 1), nn.Conv1d(2 * c, c, 1)
        self.bn2 = nn.BatchNorm1d(c)

    def forward(self, x):
        return x + self.bn2(self.pw2(F.relu(self.pw(F.relu(self.bn1(self.dw(x)))))))


class KeywordSpotter(nn.Module):
    """A 1-D CNN over 40 MFCCs x 98 frames (keyword spotting), flat stem to pooling."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Sequential(nn.Conv1d(40, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU()),
            Residual1d(32),
            Residual1d(32),
            nn.Sequential(nn.Conv1d(32, 48, 3, 2, 1), nn.BatchNorm1d(48), nn.ReLU()),
            Residual1d(48),
        )
        self.pool, self.fc = nn.AdaptiveAvgPool1d(1), nn.Linear(48, 12)

    def forward(self, x):
        return self.fc(self.pool(self.net(x)).flatten(1))


def test_a_1d_cnn_gets_elastic_widths_kernels_and_depths():
    """nn.Conv1d and nn.BatchNorm1d are sliced as their 2-D kin: widths, depthwise kernels
    (the centre of the trained one) and depths; exact subnets that export to ONNX."""
    import onnxruntime as ort

    from hwnas.export import export_onnx

    torch.manual_seed(0)
    model = KeywordSpotter().eval()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 40, 98)
    space = hwnas.elastic(model, x[:1], name="kws")
    kinds = {d.key: d.kind for d in space.decisions}
    assert kinds == {
        "net.0.0.w": "width", "net.0-2.d": "depth", "net.d": "depth", "net.1.dw.k": "kernel",
        "net.1.pw.w": "width", "net.2.dw.k": "kernel", "net.2.pw.w": "width",
        "net.3.0.w": "width", "net.4.dw.k": "kernel", "net.4.pw.w": "width",
    }  # fmt: skip
    assert space.by_key["net.1.dw.k"].values == (3, 5, 7, 9)
    _assert_subnets_exact(space, model, x, classes=12)
    with torch.no_grad():
        small = space.subnet(space.smallest())
        want = small(x).numpy()
    assert kept(small.net) == ["0", "3"]  # the stem and the downsampling block
    session = ort.InferenceSession(export_onnx(small, (1, 40, 98)))
    assert np.abs(session.run(None, {"input": x.numpy()})[0] - want).max() < 1e-4


def test_a_prelu_passes_channels_and_slices_its_slopes():
    """nn.PReLU() (one learned slope) is element-wise; nn.PReLU(C) (a slope per channel, as in
    face-recognition networks) is sliced with its channels: the width before either stays
    elastic and subnets are exact."""

    torch.manual_seed(0)
    for slopes in (1, 16):
        model = nn.Sequential()
        model.conv, model.act = nn.Conv2d(3, 16, 3, padding=1), nn.PReLU(slopes, init=0.1)
        model.pool, model.flat = nn.AdaptiveAvgPool2d(1), nn.Flatten()
        model.fc1, model.relu, model.fc2 = nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 10)
        with torch.no_grad():
            model.act.weight.uniform_(0.0, 0.5)
        space = hwnas.elastic(model.eval(), torch.zeros(1, 3, 8, 8), name="prelu")
        assert space.describe()["fixed_widths"] == {}
        assert space.by_key["conv.w"].values == (8, 16)  # ratios 0.25-1, multiples of 8
        x = torch.randn(2, 3, 8, 8)
        _assert_subnets_exact(space, model, x, atol=1e-6)


def test_grouped_convolutions_keep_or_drop_whole_groups():
    """ResNeXt's grouped 3x3 convolutions (hwnas.known_networks, from the paper) carry their
    input's width in whole groups: each bottleneck width is searched in multiples of its
    channels per group, a subnet's grouped convolution has fewer groups of the same width, and
    every subnet is exact (supernet path, extracted module, ONNX). They were frozen before."""
    import onnxruntime as ort

    from hwnas.export import export_onnx
    from hwnas.known_networks import build_network
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    model = _randomised(build_network("resnext50", num_classes=10, width=0.5, side=32))
    x = torch.randn(2, 3, 32, 32)
    space = hwnas.elastic(model, x[:1], name="resnext")
    grouped = {n: m for n, m in model.named_modules() if isinstance(m, nn.Conv2d) and m.groups > 1}
    per_group = {n: m.in_channels // m.groups for n, m in grouped.items()}
    carried = {}
    for d in space.decisions:
        g = space.analysis.groups[d.sites[0]] if d.kind == "width" else None
        for conv in set(g.carriers if g else ()) & set(grouped):
            carried[conv] = d
    assert set(carried) == set(grouped)  # every bottleneck width is searched
    for conv, d in carried.items():
        assert len(d.values) > 1 and all(v % per_group[conv] == 0 for v in d.values), d
    _assert_subnets_exact(space, model, x)
    small = ModuleSupernet(space, 10, (3, 32, 32), {}).eval().extract(space.smallest())
    convs = dict(small.named_modules())
    kept = [c for c in carried if c in convs]  # blocks the depths dropped are gone
    assert kept
    for conv in kept:
        d = carried[conv]
        assert convs[conv].in_channels == min(d.values)
        assert convs[conv].groups == min(d.values) // per_group[conv]
    session = ort.InferenceSession(export_onnx(small, (1, 3, 32, 32)))
    with torch.no_grad():
        want = small(x[:1]).numpy()
    assert np.abs(session.run(None, {"input": x[:1].numpy()})[0] - want).max() < 1e-4


class Multiplier(nn.Module):
    """A depthwise convolution with a channel multiplier (groups = input channels, twice as
    many outputs), as in some mobile networks."""

    def __init__(self):
        super().__init__()
        self.a, self.dw = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 16, 5, padding=2, groups=8)
        self.b = nn.Conv2d(16, 24, 1)
        self.head = nn.Sequential(nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(24, 4))  # fmt: skip

    def forward(self, x):
        return self.head(self.b(self.dw(self.a(x))))


def test_a_grouped_convolution_changing_the_width_stays_whole():
    """A depthwise convolution with a channel multiplier keeps its width and its kernel, with
    the reason (it got an elastic kernel its supernet could not run: "a grouped convolution
    runs at its full size only"); the rest is still searched and exact."""
    torch.manual_seed(0)
    model = Multiplier().eval()
    x = torch.randn(2, 3, 8, 8)
    space = hwnas.elastic(model, x[:1], name="multiplier")
    assert not any(d.key.startswith("dw.") for d in space.decisions)
    assert [d.key for d in space.decisions] == ["b.w"]
    why = "'dw' is a grouped convolution changing the width"
    assert any(g.frozen == why for g in space.analysis.groups.values())
    _assert_subnets_exact(space, model, x, classes=4)


class ConvNeXtBlock(nn.Module):
    """ConvNeXt's block as its paper's code writes it (Liu et al., CVPR 2022): depthwise 7x7,
    channels-last LayerNorm and MLP, a layer scale ``gamma`` read as a raw parameter."""

    def __init__(self, dim: int):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1, self.act = nn.Linear(dim, 4 * dim), nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x):
        y = self.dwconv(x).permute(0, 2, 3, 1)
        y = self.gamma * self.pwconv2(self.act(self.pwconv1(self.norm(y))))
        return x + y.permute(0, 3, 1, 2)


class ConvNeXtLike(nn.Module):
    def __init__(self, dims=(16, 32)):
        super().__init__()
        self.stem = nn.Conv2d(3, dims[0], 4, 4)
        self.stage1 = nn.Sequential(ConvNeXtBlock(dims[0]), ConvNeXtBlock(dims[0]))
        self.down = nn.Conv2d(dims[0], dims[1], 2, 2)
        self.stage2 = nn.Sequential(ConvNeXtBlock(dims[1]), ConvNeXtBlock(dims[1]))
        self.norm, self.head = nn.LayerNorm(dims[1]), nn.Linear(dims[1], 10)

    def forward(self, x):
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.head(self.norm(x.mean((2, 3))))


class TokenViT(nn.Module):
    """A ViT whose attention never reads its input's width from ``x.shape`` (Hugging Face's
    way: the heads' sizes are constants), with a class token and a position embedding."""

    def __init__(self, dim=32, heads=2, depth=2, tokens=16):
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, tokens + 1, dim))
        self.heads, self.hd = heads, 16
        self.norms = nn.ModuleList(nn.LayerNorm(dim) for _ in range(depth))
        self.qkv = nn.ModuleList(nn.Linear(dim, 3 * heads * 16) for _ in range(depth))
        self.proj = nn.ModuleList(nn.Linear(heads * 16, dim) for _ in range(depth))
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls.expand(x.shape[0], -1, -1), x), dim=1) + self.pos
        for norm, qkv, proj in zip(self.norms, self.qkv, self.proj):
            b, n = x.shape[0], x.shape[1]
            q, k, v = qkv(norm(x)).reshape(b, n, 3, self.heads, self.hd).permute(2, 0, 3, 1, 4)
            y = ((q @ k.transpose(-2, -1)) * self.hd**-0.5).softmax(-1) @ v
            x = x + proj(y.transpose(1, 2).reshape(b, n, self.heads * self.hd))
        return self.head(x[:, 0])


@pytest.mark.parametrize(
    "build, width, params",
    [
        (ConvNeXtLike, "stem.w", {"stage1.0.gamma", "stage1.1.gamma"}),
        (TokenViT, "patch.w", {"cls", "pos"}),
    ],
)
def test_raw_parameters_are_sliced_with_the_channels_they_meet(build, width, params):
    """A layer scale (ConvNeXt) or a class token and position embedding (ViT), read as raw
    parameters in ``forward``, are sliced with the channels they are multiplied, added or
    concatenated to, so the residual stream's width is searched (it was fixed: "combined with a
    per-channel tensor of unknown channels"); the supernet keeps their names and whole
    values, a subnet gets their first channels, and every subnet is exact."""
    from hwnas.supernet.module import ModuleSupernet

    torch.manual_seed(0)
    model = _randomised(build())
    x = torch.randn(2, 3, 16, 16)
    space = hwnas.elastic(model, x[:1], name="raw")
    decision = space.by_key[width]
    assert decision.kind == "width" and len(decision.values) > 1
    group = space.analysis.groups[decision.sites[0]]
    assert {target for target, _ in group.params} == params
    _assert_subnets_exact(space, model, x)
    net = ModuleSupernet(space, 10, (3, 16, 16), {}).eval()
    whole = net.state_dict()  # trained as whole tensors under their own names
    original = model.state_dict()
    assert all(whole[f"net.{p}"].shape == original[p].shape for p in params)
    small = net.extract(space.smallest())
    state = small.state_dict()
    assert any(target in state for target, _ in group.params)
    for target, axis in group.params:
        if target in state:  # not in a dropped block
            assert state[target].shape[axis] == min(decision.values)
            owner = target.rpartition(".")[0]
            plain = model.get_submodule(owner) if owner else model
            assert type(small.get_submodule(owner) if owner else small) is type(plain)


def test_a_channel_count_read_from_x_shape_that_sizes_other_channels_keeps_them_whole():
    """timm's attention (``b, n, c = x.shape`` ... ``reshape(b, n, c)`` of its heads) ties the
    residual stream's width to the heads': it stays whole, with the reason, and every subnet
    is exact (slicing it broke the supernet: "shape '[2, 17, 48]' is invalid")."""
    from hwnas.known_networks import build_network

    torch.manual_seed(0)
    model = _randomised(build_network("vit_tiny", num_classes=10, width=1.0, side=32))
    x = torch.randn(2, 3, 32, 32)
    space = hwnas.elastic(model, x[:1], name="timm_vit")
    fixed = space.describe()["fixed_widths"]
    assert fixed["patch"].startswith("its channel count (x.shape) sizes")
    _assert_subnets_exact(space, model, x)


class ConstantView(nn.Module):
    """Channels reshaped with their count written as a number (traced as a constant)."""

    def __init__(self):
        super().__init__()
        self.conv, self.fc = nn.Conv2d(3, 16, 3, padding=1), nn.Linear(16, 4)
        self.a, self.b = nn.Conv2d(3, 12, 1), nn.Conv2d(12, 4, 1)

    def forward(self, x):
        y = self.conv(x).view(x.shape[0], 16, -1).mean(2)
        return self.fc(y) + self.b(self.a(x)).mean((2, 3))


def test_a_channel_count_written_as_a_number_keeps_its_channels_whole():
    """``view(b, 16, -1)`` of 16 channels is traced with 16 as a constant: a subnet of 8 would
    be viewed as 16 (silently wrong, or a shape error); the width stays whole, with the
    reason."""
    torch.manual_seed(0)
    model = ConstantView().eval()
    x = torch.randn(2, 3, 8, 8)
    space = hwnas.elastic(model, x[:1], name="constant")
    why = "'view' is given its channel count as a number"
    assert space.describe()["fixed_widths"]["conv"] == why
    assert [d.key for d in space.decisions] == ["a.w"]
    _assert_subnets_exact(space, model, x, classes=4)


def test_a_layer_reading_untracked_channels_still_has_its_own_width_searched():
    """ShuffleNetV2's units split their input with ``chunk`` (its parts' channels are not
    followed, so they stay whole); the convolution reading one part still produces channels
    of its own, and their width (the branch's bottleneck) is searched in every unit (only the
    3 downsampling units' were), with exact subnets."""
    from hwnas.known_networks import build_network

    torch.manual_seed(0)
    model = _randomised(build_network("shufflenet_v2", num_classes=10, width=0.5, side=32))
    x = torch.randn(2, 3, 32, 32)
    space = hwnas.elastic(model, x[:1], name="shufflenet")
    units = [n for n, m in model.named_children() if hasattr(m, "branch2")]
    assert len(units) == 16
    widths = {d.key for d in space.decisions if d.kind == "width"}
    assert {f"{u}.branch2.0.0.w" for u in units} <= widths
    _assert_subnets_exact(space, model, x)


def test_a_retrained_or_changed_model_is_another_study_not_the_old_results(tmp_path):
    """A user's model retrained (other weights) or changed, searched with the same command:
    the rerun resumed the old study and reported the old model's accuracies ("6 architectures
    scored (2 this run)"). Now the study knows the model by its structure and weights, and
    the file of the accuracy function: the same file resumes, an edited one is a new study."""
    from pathlib import Path

    source = (Path(__file__).parent / "my_space.py").read_text()
    file = tmp_path / "mynet.py"
    file.write_text(source.replace("space = hn.space(", "torch.manual_seed(0)\nspace = hn.space("))
    args = ["search", "--space", f"{file}:space", "--accuracy", f"{file}:holdout_accuracy",
            "--data", "digits", "--device", "cpu-fast", "--strategy", "random",
            "--no-zoo"]  # fmt: skip

    def run(budget: int, out: str, cli=hwnas_cli) -> dict:
        r = cli(*args, "--budget", str(budget), "--out", str(tmp_path / out))
        assert r.returncode == 0, r.stderr
        return json.loads((tmp_path / out / "summary.json").read_text())

    # the first search in this process, the reruns in processes of their own (a process
    # imports a file once: the edited file needs a new one)
    first = run(2, "a", cli=hwnas_main)
    again = run(3, "b")  # the same file: the same study, extended
    assert again["settings"]["study"] == first["settings"]["study"]
    assert again["trials"]["completed"] == 3
    file.write_text(file.read_text().replace("torch.manual_seed(0)", "torch.manual_seed(1)"))
    retrained = run(3, "c")
    assert retrained["settings"]["study"] != first["settings"]["study"]
    assert retrained["settings"]["space_fingerprint"] != first["settings"]["space_fingerprint"]
    assert retrained["trials"]["completed"] == 3


def test_the_count_of_a_module_space_counts_each_subnet_once():
    """A decision inside a block its stage's depth drops does not make another subnet:
    `hwnas spaces` showed the product of every decision's choices (128 for the docs' mynet,
    whose searches stopped at 80: "the space is exhausted")."""
    import itertools

    class Block(nn.Module):
        def __init__(self, i):
            super().__init__()
            k = hn.ValueChoice([3, 5], label=f"k{i}")  # each block its own kernel decision
            self.conv = nn.Conv2d(8, 8, k, padding=k // 2)

        def forward(self, x):
            return x + torch.relu(self.conv(x))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 3, padding=1)
            self.stage = hn.Repeat(lambda i: Block(i), hn.ValueChoice([1, 2, 3], label="d"))
            self.head = nn.Linear(8, 10)

        def forward(self, x):
            return self.head(self.stage(self.stem(x)).mean((2, 3)))

    space = hn.space(Net(), torch.zeros(1, 3, 8, 8), name="depthcount", dataset="digits")
    ch = space.choices()
    distinct = {space.from_choices(dict(zip(ch, c))).text for c in itertools.product(*ch.values())}
    assert math.prod(len(v) for v in ch.values()) == 24
    assert space.num_architectures() == len(distinct) == 2 + 4 + 8
    # a budget above that is refused before any work, as a table's is: the search stopped
    # at 14 and every rerun added about 100 pruned trials to the study
    with pytest.raises(hwnas.HwnasError, match="budget=15 is more than the 14 architectures"):
        hwnas.search(device="cpu-fast", space=space, accuracy=lambda m, a: 50.0, budget=15)


@pytest.mark.parametrize(
    "bad",
    [
        ["--budget", "0"],
        ["--max-latency", "-1"],
        ["--strategy", "nosuch"],
        ["--objective", "foo"],
        ["--budget", "abc"],
        ["--strategy", "oneshot", "--latency-target", "-5"],
        ["--nproc", "0"],
        ["--strategy", "oneshot", "--finetune-epochs", "-1"],
        ["--storage", "sqlite:////no/such/folder/x.db"],
        ["--storage", "sqlite://"],
        ["--storage", "mysql://u:secret@h/db"],
    ],  # fmt: skip
    ids=str,
)
def test_a_bad_option_is_refused_before_the_space_file_is_imported(tmp_path, bad):
    """`--space mynet.py:space` typed before the other options imported the file (the user's
    model trained) and only then refused `--budget 0` and the like; click processes options in
    the order typed."""
    marker = tmp_path / "imported"
    file = tmp_path / "mynet.py"
    file.write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    r = hwnas_main("search", "--space", f"{file}:space", "--device", "cpu", *bad)
    assert r.returncode == 2 and r.stderr.startswith("error:"), r.stderr
    assert not marker.exists() and "secret" not in r.stderr


def test_a_model_built_without_a_seed_is_the_same_model_in_every_process(tmp_path):
    """A study knows a user's model by its weights; a model the file builds without seeding
    torch (the docs' TinyNet) had new weights in every process, so the same command never
    resumed its study. hwnas imports the file with the generators seeded."""
    import subprocess
    import sys
    from pathlib import Path

    source = (Path(__file__).parent / "my_space.py").read_text()
    file = tmp_path / "unseeded.py"
    file.write_text(source)
    code = (
        "from hwnas.spaces import get_space; "
        f"print(get_space({str(file) + ':space'!r}, code=True).fingerprint)"
    )
    prints = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
        ).stdout.strip()  # fmt: skip
        for _ in range(2)
    }
    assert len(prints) == 1 and prints.pop().startswith("tinytorch@")
