"""``hwnas.nn.ValueChoice`` takes at least two values, as ``hwnas.nn.Choice`` takes at least two
candidates (one value made a one-option decision); a value of 0, which a user writes for a
``Repeat`` that may run no block, is refused saying that a depth of 0 is not supported and what
to write instead (before: only 'values must be positive integers')."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hwnas.nn as hn
from hwnas.errors import HwnasError


def test_one_value_is_refused_as_one_candidate_is():
    with pytest.raises(HwnasError) as err:
        hn.ValueChoice([16], label="w")
    assert str(err.value) == (
        "ValueChoice needs at least two values, got [16] (for a fixed number pass the int itself)"
    )
    with pytest.raises(HwnasError, match="Choice needs at least two candidates, got 1"):
        hn.Choice([nn.Identity()])


def test_a_repeat_depth_of_zero_is_named_with_what_to_write():
    with pytest.raises(HwnasError) as err:
        hn.Repeat(nn.Conv2d(8, 8, 3, padding=1), hn.ValueChoice([0, 1, 2], label="d"))
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("ValueChoice values must be positive integers, got 0")
    assert "Repeat's depth of 0 is not supported" in text
    assert "hwnas.nn.Choice([block, nn.Identity()])" in text
    with pytest.raises(HwnasError) as err:  # other bad values keep the short message
        hn.ValueChoice([-1, 2])
    assert str(err.value) == "ValueChoice values must be positive integers, got -1"


class Optional(nn.Module):
    """What the message suggests: a block that may be left out, as a Choice with nn.Identity."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.extra = hn.Choice({"block": block, "none": nn.Identity()}, label="extra")
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.extra(torch.relu(self.stem(x))).mean((2, 3)))


def test_the_suggested_optional_block_is_a_decision():
    space = hn.space(Optional(), torch.zeros(1, 3, 8, 8), name="optional")
    assert space.choices() == {"extra": ("block", "none")}
    net = space.subnet(space.parse("extra=none"))
    assert net(torch.zeros(2, 3, 8, 8)).shape == (2, 10)
    assert sum(p.numel() for p in net.parameters()) < sum(
        p.numel() for p in space.subnet(space.parse("extra=block")).parameters()
    )
