"""A model whose output drops the batch axis on a batch of one (``.squeeze()`` after a global
pool) is refused in one line saying so and what to write instead. Before, hwnas.elastic said the
model returned another shape in training mode than in eval mode and suggested taking an
auxiliary head's output out of forward, which this model does not have."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hwnas
from hwnas.errors import HwnasError


class Pooled(nn.Module):
    def __init__(self, squeeze):
        super().__init__()
        self.squeeze = squeeze
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.squeeze(F.adaptive_avg_pool2d(F.relu(self.c2(F.relu(self.c1(x)))), 1)))


def test_an_output_squeezing_the_batch_axis_is_named():
    with pytest.raises(HwnasError) as err:
        hwnas.elastic(Pooled(lambda t: t.squeeze()), torch.randn(1, 3, 16, 16), name="sq")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("sq: the model's output loses its batch axis on a batch of one")
    assert "(10,)" in text and "(2, 10)" in text and ".flatten(1)" in text
    assert "training mode" not in text and "auxiliary" not in text


def test_an_output_keeping_the_batch_axis_is_searched():
    space = hwnas.elastic(Pooled(lambda t: t.flatten(1)), torch.randn(1, 3, 16, 16), name="fl")
    net = space.subnet(space.smallest())
    assert net(torch.randn(1, 3, 16, 16)).shape == (1, 10)
