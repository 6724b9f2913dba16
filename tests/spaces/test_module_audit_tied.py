"""Channels tied together in ``forward`` (two branches added, a gate multiplied) have one
width: two different ``hwnas.nn.ValueChoice`` sizing them stop the space in one line naming
both. Before, both became decisions and the last one written silently won, so half the
architectures searched were the same network."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hwnas.nn as hn
from hwnas.errors import HwnasError


class Tied(nn.Module):
    """Two branches added together, their widths given by ``a`` and ``b``."""

    def __init__(self, a, b):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.a = nn.Conv2d(16, a, 3, padding=1)
        self.b = nn.Conv2d(16, b, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        return self.fc((self.a(x) + self.b(x)).mean((2, 3)))


@pytest.mark.parametrize(
    "a, b",
    [
        (hn.ValueChoice([8, 16], label="wa"), hn.ValueChoice([4, 16], label="wb")),
        (hn.ValueChoice([8, 16], label="wa"), hn.ValueChoice([8, 16], label="wb")),
        (hn.ValueChoice([8, 16]), hn.ValueChoice([4, 16])),
    ],
)
def test_two_value_choices_on_added_channels_are_refused_naming_both(a, b):
    with pytest.raises(HwnasError) as err:
        hn.space(Tied(a, b), torch.zeros(1, 3, 8, 8), name="tie")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("tie: 'b' (Conv2d): its out_channels ")
    assert repr(b) in text and repr(a) in text and "'a' (Conv2d)" in text
    assert "tied" in text and "added" in text and "same ValueChoice" in text


def test_one_value_choice_on_added_channels_is_one_decision():
    w = hn.ValueChoice([8, 16], label="w")
    space = hn.space(Tied(w, w), torch.zeros(1, 3, 8, 8), name="tie")
    assert space.choices() == {"w": ("8", "16")}
    assert space.num_architectures() == 2
    small = space.subnet(space.parse("w=8"))
    assert small.a.out_channels == small.b.out_channels == small.fc.in_features == 8
    assert small(torch.zeros(2, 3, 8, 8)).shape == (2, 10)


def test_the_same_label_on_added_channels_is_one_decision():
    a, b = hn.ValueChoice([8, 16], label="w"), hn.ValueChoice([8, 16], label="w")
    space = hn.space(Tied(a, b), torch.zeros(1, 3, 8, 8), name="tie")
    assert space.choices() == {"w": ("8", "16")}
    assert space.subnet(space.parse("w=8")).b.out_channels == 8
