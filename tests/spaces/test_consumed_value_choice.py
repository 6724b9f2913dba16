"""A ValueChoice consumed as a plain number while the model is built (``range(depth)``, only
ever used as ``width * 2``) left the model at its largest value with no decision: the space was
made and searched without it, silently. It is refused in one line naming it and its module, from
Python and from the CLI; a ValueChoice that a layer holds may still be used in arithmetic too."""

from __future__ import annotations

import pytest
import torch
from helpers import hwnas_main
from torch import nn

import hwnas.nn as hn
from hwnas.errors import HwnasError


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return x + torch.relu(self.conv(x))


class LoopDepth(nn.Module):
    """The depth written as a Python loop instead of hwnas.nn.Repeat."""

    def __init__(self):
        super().__init__()
        w = hn.ValueChoice([16, 32], label="w")
        d = hn.ValueChoice([1, 2, 3], label="depth")
        self.stem = nn.Conv2d(3, w, 3, padding=1)
        self.blocks = nn.Sequential(*[Block(w) for _ in range(d)])
        self.head = nn.Linear(w, 10)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


def _width(values):  # made in a helper the constructor calls: belongs to that constructor
    return hn.ValueChoice(values, label="hidden")


class OnlyArithmetic(nn.Module):
    """The width choice reaches the layers only as ``w * 2``, a plain int."""

    def __init__(self):
        super().__init__()
        k = hn.ValueChoice([3, 5], label="k")
        w = _width([8, 16])
        self.stem = nn.Conv2d(3, w * 2, k, padding=k // 2)
        self.head = nn.Linear(w * 2, 10)

    def forward(self, x):
        return self.head(self.stem(x).mean((2, 3)))


class Honoured(nn.Module):
    """Repeat for the depth; the width held by layers and also used as ``w * 2``."""

    def __init__(self):
        super().__init__()
        w = hn.ValueChoice([16, 32], label="w")
        self.stem = nn.Conv2d(3, w, 3, padding=1)
        self.blocks = hn.Repeat(lambda i: Block(w), hn.ValueChoice([1, 2], label="depth"))
        self.expand = nn.Conv2d(w, w * 2, 1)
        self.head = nn.Linear(w * 2, 10)

    def forward(self, x):
        return self.head(self.expand(self.blocks(self.stem(x))).mean((2, 3)))


class Bottleneck(nn.Module):
    def __init__(self, c, w):
        super().__init__()
        self.a = nn.Conv2d(c, w, 1)
        self.b = nn.Conv2d(w, c, 1)

    def forward(self, x):
        return x + self.b(torch.relu(self.a(x)))


class HeldThroughRepeatCopies(nn.Module):
    """The width choice is in a block module that Repeat deep-copies for every position: the
    model holds only its copies."""

    def __init__(self):
        super().__init__()
        w = hn.ValueChoice([8, 16], label="w")
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.stage = hn.Repeat(Bottleneck(16, w), hn.ValueChoice([1, 2], label="depth"))
        self.head = nn.Linear(16, 10)

    def forward(self, x):
        return self.head(self.stage(self.stem(x)).mean((2, 3)))


X = torch.zeros(1, 3, 8, 8)


@pytest.mark.parametrize(
    "model, named",
    [
        (LoopDepth, "ValueChoice([1, 2, 3], label='depth'), made in LoopDepth.__init__"),
        (OnlyArithmetic, "ValueChoice([8, 16], label='hidden'), made in OnlyArithmetic.__init__"),
    ],
)
def test_a_value_choice_consumed_as_a_number_is_refused_naming_it(model, named):
    with pytest.raises(HwnasError) as info:
        hn.space(model(), X, name=f"consumed-{model.__name__.lower()}")
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(f"consumed-{model.__name__.lower()}: {named}, is in no layer")
    assert "hwnas.nn.Repeat(block, depth)" in text


def test_a_held_value_choice_may_also_be_used_in_arithmetic():
    space = hn.space(Honoured(), X, name="consumed-honoured")
    assert {d.key: d.values for d in space.decisions} == {"w": (16, 32), "depth": (1, 2)}


def test_a_value_choice_held_only_by_repeats_copies_of_its_block_is_a_decision():
    space = hn.space(HeldThroughRepeatCopies(), X, name="consumed-copies")
    assert {d.key: d.values for d in space.decisions} == {"w": (8, 16), "depth": (1, 2)}


def test_the_cli_refuses_a_file_space_with_a_consumed_depth_in_one_line(tmp_path, hwnas_home):
    """`hwnas search --space loop.py:space` exits 2 before any trial."""
    file = tmp_path / "loop.py"
    file.write_text(
        "import torch\nfrom torch import nn\nimport hwnas.nn as hn\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        d = hn.ValueChoice([1, 2], label='depth')\n"
        "        w = hn.ValueChoice([8, 16], label='w')\n"
        "        self.stem = nn.Conv2d(3, w, 3, padding=1)\n"
        "        self.body = nn.Sequential(*[nn.Conv2d(w, w, 3, padding=1) for _ in range(d)])\n"
        "        self.head = nn.Linear(w, 10)\n\n"
        "    def forward(self, x):\n"
        "        return self.head(self.body(self.stem(x)).mean((2, 3)))\n\n"
        "space = hn.space(Net(), torch.zeros(1, 3, 8, 8), name='loopcli', dataset='digits')\n"
    )
    out = tmp_path / "run"
    r = hwnas_main("search", "--space", f"{file}:space", "--device", "cpu-fast", "--budget", "4",
                   "--out", str(out))  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.count("\n") <= 1
    assert "ValueChoice([1, 2], label='depth'), made in Net.__init__, is in no layer" in r.stderr
    assert not out.exists()
