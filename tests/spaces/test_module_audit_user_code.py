"""A space written in PyTorch code (``hwnas.nn.space``) and a user's model made elastic
(``hwnas.elastic``), searched with the user's own files and functions: what the zoo ships,
what the cards and summaries claim, how the user's files are imported."""

from __future__ import annotations

import json

import torch
from torch import nn

import hwnas
import hwnas.nn as hn


class Tiny(nn.Module):
    """Stem of elastic width, a classifier: 2 architectures."""

    def __init__(self, width=None):
        super().__init__()
        width = width if width is not None else hn.ValueChoice([4, 8], label="w")
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.fc = nn.Linear(width, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.stem(x)).mean((2, 3)))


def test_a_space_written_in_pytorch_has_no_inherited_weights(tmp_path):
    """Every module space has ``subnet``, so ``ability(space, InheritedSpace)`` held for a
    ``hwnas.nn.space`` space too: its accuracy function scored the module's random starting
    weights "on inherited weights", summary.json said ``zoo_weights: inherited`` and the cards
    ``license: other`` ("derive from the model made elastic"). Only ``hwnas.elastic``'s
    spaces have inherited weights."""
    from hwnas.spaces import InheritedSpace, ability
    from hwnas.zoo.card import license_of

    space = hn.space(Tiny(), torch.zeros(1, 3, 8, 8), name="tinyinh", dataset="digits")
    model = hwnas.elastic(Tiny(8), torch.zeros(1, 3, 8, 8), name="tinyel", dataset="digits")
    assert space.describe()["inherited_weights"] is False
    assert ability(space, InheritedSpace) is None and ability(model, InheritedSpace) is model
    assert license_of(space, False)[0] == "mit" and license_of(model, False)[0] == "other"
    run = hwnas.search(
        device="cpu-fast", space=space, accuracy=lambda net, arch: 50.0, budget=2,
        out=tmp_path / "run", storage=f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    assert all("on a fresh network" in r.attrs["accuracy_source"] for r in run.result.records)
    assert run.summary["zoo_weights"] == "random"
    for entry in run.zoo:
        card = json.loads((entry / "card.json").read_text())
        assert card["license"] == "mit" and "made elastic" not in card["license_note"]
