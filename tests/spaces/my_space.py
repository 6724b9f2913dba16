"""A search space written in PyTorch code (hwnas.nn choice points): searched by
tests/spaces/test_module_space.py as ``--space tests/spaces/my_space.py:space``."""

import torch
from torch import nn

import hwnas.nn as hn


class Block(nn.Module):
    """conv (elastic kernel) + BN + ReLU, with a residual connection."""

    def __init__(self, width: int):
        super().__init__()
        k = hn.ValueChoice([3, 5], label="kernel")
        self.conv = nn.Conv2d(width, width, k, padding=k // 2, bias=False)
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x):
        return x + torch.relu(self.bn(self.conv(x)))


class TinyNet(nn.Module):
    """Stem of elastic width, a choice of operation, a stage of elastic depth, a classifier."""

    def __init__(self, classes: int = 10):
        super().__init__()
        width = hn.ValueChoice([8, 16], label="width")
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
        )
        self.op = hn.Choice(
            {
                "conv3": nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU()),
                "dw5": nn.Sequential(
                    nn.Conv2d(width, width, 5, padding=2, groups=width), nn.ReLU()
                ),
                "skip": nn.Identity(),
            },
            label="op",
        )
        self.stage = hn.Repeat(lambda i: Block(width), hn.ValueChoice([1, 2], label="depth"))
        self.head = nn.Linear(width, classes)

    def forward(self, x):
        x = self.stage(self.op(self.stem(x)))
        return self.head(x.mean((2, 3)))


space = hn.space(TinyNet(), torch.zeros(1, 3, 16, 16), name="tinytorch", dataset="digits")


def holdout_accuracy(net: nn.Module, arch, data) -> float:
    """The user's evaluation function (``--accuracy``): top-1 % on the test split."""
    with torch.no_grad():
        pred = net(torch.from_numpy(data.test.x)).argmax(1).numpy()
    return 100.0 * float((pred == data.test.y).mean())
