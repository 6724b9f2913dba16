"""``hwnas.elastic``'s arguments are checked before any work, each in one line: a divisor of 0
raised a bare ZeroDivisionError and a negative one was taken, and an even kernel size (or one
below 1), which no centre crop of an odd kernel can be, silently gave no kernel decision."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import hwnas
from hwnas.errors import HwnasError


def net():
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1),
        nn.ReLU(),
        nn.Conv2d(32, 32, 5, padding=2, groups=32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    ).eval()


X = torch.randn(1, 3, 16, 16)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"divisor": 0}, "divisor must be a positive integer (widths a multiple of it), got 0"),
        ({"divisor": -8}, "divisor must be a positive integer (widths a multiple of it), got -8"),
        ({"divisor": 2.5}, "divisor must be a positive integer (widths a multiple of it), got 2.5"),
        ({"kernels": (4,)}, "kernel sizes must be odd positive integers"),
        ({"kernels": (3, 0)}, "kernel sizes must be odd positive integers"),
        ({"kernels": (-3,)}, "kernel sizes must be odd positive integers"),
        ({"kernels": (3.0,)}, "kernel sizes must be odd positive integers"),
        ({"kernels": 3}, "kernels must be a list or tuple (or None), got 3"),
        ({"widths": (1.5,)}, "width ratios must be in (0, 1], got 1.5"),
        ({"widths": 0.5}, "widths must be a list or tuple (or None), got 0.5"),
    ],
)
def test_a_bad_argument_is_refused_in_one_line(kwargs, message):
    with pytest.raises(HwnasError) as err:
        hwnas.elastic(net(), X, name="args", **kwargs)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_good_arguments_still_give_their_decisions():
    space = hwnas.elastic(net(), X, name="args", kernels=np.array([3]), divisor=16)
    assert space.choices()["2.k"] == ("3", "5")
    assert space.choices()["0.w"] == ("16", "32")
    small = space.subnet(space.smallest())
    assert small(X).shape == (1, 10)
