"""``describe()["fixed_widths"]`` explains every frozen channel group, also one no layer
produces: the output of a grouped convolution changing the width was frozen, its reason naming
the convolution, but left out (only groups with producers were listed), so its channels were
neither searched nor explained."""

from __future__ import annotations

import torch
from torch import nn

import hwnas


class Grouped(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, padding=1)
        self.g = nn.Conv2d(32, 64, 3, padding=1, groups=4)
        self.bn = nn.BatchNorm2d(64)
        self.pw = nn.Conv2d(64, 32, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.g(torch.relu(self.stem(x)))))
        return self.fc(torch.relu(self.pw(x)).mean((2, 3)))


def test_a_grouped_convolution_changing_the_width_explains_its_output():
    torch.manual_seed(0)
    space = hwnas.elastic(Grouped().eval(), torch.randn(1, 3, 16, 16), name="grouped")
    why = "'g' is a grouped convolution changing the width"
    assert space.describe()["fixed_widths"] == {"stem": why, "g": why}
    assert space.choices() == {"pw.w": ("8", "16", "24", "32")}
    small = space.subnet(space.smallest())
    assert small.g.out_channels == small.bn.num_features == small.pw.in_channels == 64
