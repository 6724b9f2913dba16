"""A user's own network, trained a few steps and made elastic, with the user's evaluation
function: searched by tests/spaces/test_module_space.py from Python (``hwnas.search(space=space,
accuracy=val_accuracy)``) and from the CLI (``--space tests/spaces/my_model.py:space --accuracy
tests/spaces/my_model.py:val_accuracy``).

The training is deterministic (one thread, seeded), so every process that imports this file
gets the same weights, and so the same subnets and the same stored latencies."""

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import hwnas
from hwnas.datasets import load_data


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


class ResCNN(nn.Module):
    """The user's network: not from any shipped space."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU()
        )
        self.stage1 = nn.Sequential(Residual(32), Residual(32))
        self.down = nn.Sequential(
            nn.Conv2d(32, 64, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU()
        )
        self.stage2 = nn.Sequential(Residual(64), Residual(64))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc(self.stage2(self.down(self.stage1(self.stem(x)))).mean((2, 3)))


def trained(steps: int = 30) -> ResCNN:
    """ResCNN after ``steps`` SGD steps on digits (16x16), the same in every process."""
    data = load_data("digits", image_size=16)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        torch.manual_seed(0)
        model = ResCNN()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        rng = np.random.default_rng(0)
        for _ in range(steps):
            idx = rng.choice(len(data.train), 64, replace=False)
            x, y = torch.from_numpy(data.train.x[idx]), torch.from_numpy(data.train.y[idx])
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    return model.eval()


def val_accuracy(net: nn.Module, arch, data) -> float:
    """The user's evaluation function: top-1 % on the validation split hwnas hands over."""
    with torch.no_grad():
        pred = net(torch.from_numpy(data.val.x)).argmax(1).numpy()
    return 100.0 * float((pred == data.val.y).mean())


model = trained()
space = hwnas.elastic(
    model, torch.zeros(1, 3, 16, 16), name="rescnn", dataset="digits"
)
