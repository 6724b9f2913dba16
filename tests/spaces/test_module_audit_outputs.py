"""A model whose forward returns anything but one tensor of logits (a dict as Hugging Face
models do, a list, a 1-tuple) is refused in one line before any work: the single tensor inside
was taken, and the space failed later (export: 'dict' object has no attribute 'numpy')."""

from __future__ import annotations

from collections import OrderedDict, namedtuple

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hwnas
from hwnas.errors import HwnasError

Output = namedtuple("Output", ["logits"])


class ModelOutput(OrderedDict):
    """What a Hugging Face model returns (an OrderedDict subclass)."""


class Net(nn.Module):
    def __init__(self, wrap):
        super().__init__()
        self.wrap = wrap
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.wrap(self.fc(F.relu(self.c2(F.relu(self.c1(x)))).mean((2, 3))))


@pytest.mark.parametrize(
    "wrap, returned",
    [
        (lambda y: {"logits": y}, "a dict with keys 'logits'"),
        (lambda y: ModelOutput(logits=y), "a ModelOutput with keys 'logits'"),
        (lambda y: [y], "a list of 1 tensor"),
        (lambda y: (y,), "a tuple of 1 tensor"),
        (lambda y: Output(y), "an Output of 1 tensor"),
    ],
)
def test_a_model_not_returning_one_tensor_is_refused_in_one_line(wrap, returned):
    with pytest.raises(HwnasError) as err:
        hwnas.elastic(Net(wrap).eval(), torch.zeros(1, 3, 16, 16), name="wrapped")
    text = str(err.value)
    assert text == (
        "wrapped: the model must return one tensor of logits (batch, classes); it returns "
        f"{returned}: wrap it so forward returns the logits"
    )


def test_the_same_model_returning_its_logits_is_a_space():
    space = hwnas.elastic(Net(lambda y: y).eval(), torch.zeros(1, 3, 16, 16), name="plain")
    assert space.subnet(space.smallest())(torch.zeros(2, 3, 16, 16)).shape == (2, 10)
