"""A search from Python takes the space's own dataset when none is given, for supernet
strategies as for table ones (the CLI did; hwnas.search(strategy="oneshot") took cifar100 and
refused a space made elastic on digits)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hwnas
from hwnas.jobs.settings import build_settings
from hwnas.spaces import user_space


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.c1(x)).mean((2, 3)))


@pytest.mark.parametrize("strategy", ["oneshot", "darts", "random"])
def test_the_space_dataset_is_the_default_for_every_strategy(strategy):
    torch.manual_seed(0)
    space = hwnas.elastic(_Net().eval(), torch.zeros(1, 3, 16, 16),
                          name=f"defaults-{strategy}", dataset="digits")  # fmt: skip
    options = {"space": user_space(space).name, "strategy": strategy}
    settings = build_settings({"device": "cpu-fast", **options}, given=set(options))
    assert settings.dataset == "digits"
    options["dataset"] = "cifar100"  # given: taken, and refused later if the space lacks it
    settings = build_settings({"device": "cpu-fast", **options}, given=set(options))
    assert settings.dataset == "cifar100"


def test_a_space_smaller_than_the_default_budget_is_searched_whole_when_none_is_given(
    tmp_path, monkeypatch
):
    """README's line, ``hwnas.search(device=..., space=space, accuracy=...)``, on a model whose
    space holds fewer architectures than the default budget (300): it refused 'budget=300 is
    more than the 4 architectures', a budget the user never gave. A budget given is kept and
    still refused in one line."""
    monkeypatch.chdir(tmp_path)  # the run folder: runs/<study>
    torch.manual_seed(0)
    space = hwnas.elastic(_Net().eval(), torch.zeros(1, 3, 16, 16), name="small-budget",
                          dataset="digits")  # fmt: skip
    size = space.num_architectures()
    assert size < 300
    run = hwnas.search(device="cpu-fast", space=space, accuracy=lambda net, data: 50.0, zoo=False)
    completed = [t for t in run.study.trials if t.state.name == "COMPLETE"]
    assert len(completed) == size
    with pytest.raises(hwnas.HwnasError, match=f"more than the {size} architectures"):
        hwnas.search(device="cpu-fast", space=space, accuracy=lambda net, data: 50.0, zoo=False,
                     budget=size + 1, study="small-budget-given")  # fmt: skip


def test_a_dataset_a_declared_space_is_not_measured_at_is_refused_for_a_supernet_search():
    """`--space vit --dataset cifar10 --strategy oneshot`: a declared space's supernet search
    measures its networks at its reference_dataset (ImageNet's 224x224 for vit) whatever
    --dataset says, so the option was ignored, while it made the study another search's."""
    options = {"space": "vit", "strategy": "oneshot", "dataset": "cifar10"}
    with pytest.raises(hwnas.HwnasError, match="reference_dataset, imagenet: leave --dataset out"):
        build_settings({"device": "cpu-fast", **options}, given=set(options))
    options["dataset"] = build_settings(
        {"device": "cpu-fast", "space": "vit", "strategy": "oneshot"}, {"space", "strategy"}
    ).dataset  # the default, given: the same search
    assert build_settings({"device": "cpu-fast", **options}, set(options)).dataset == "cifar100"
    options = {"space": "nasbench201", "strategy": "gdas", "dataset": "imagenet16"}
    assert build_settings({"device": "pixel3", **options}, set(options)).dataset == "imagenet16"
