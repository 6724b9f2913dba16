"""--data whose inputs the space's networks cannot take (images for a Conv1d model) is refused
in one line before any work (a search ran its trials into a conv1d RuntimeError traceback)."""

from __future__ import annotations

import textwrap

import pytest
from helpers import hwnas_main

SPACE = textwrap.dedent(
    """
    import torch
    from torch import nn

    import hwnas


    class Audio(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv1d(8, 16, 5, padding=2)
            self.c2 = nn.Conv1d(16, 16, 3, padding=1)
            self.fc = nn.Linear(16, 4)

        def forward(self, x):
            return self.fc(torch.relu(self.c2(torch.relu(self.c1(x)))).mean(2))


    torch.manual_seed(0)
    space = hwnas.elastic(Audio().eval(), torch.zeros(1, 8, 64), name="datashape_audio")


    def accuracy(net, arch, data=None):
        return 50.0
    """
)


@pytest.mark.parametrize(
    "args",
    [
        ["--accuracy", "audio.py:accuracy", "--budget", "2"],  # the function's data
        ["--train-zoo", "--accuracy", "audio.py:accuracy", "--budget", "2", "--epochs", "1"],
        ["--strategy", "oneshot", "--epochs", "1"],  # a supernet's proxy images
    ],
)
def test_images_for_a_conv1d_model_are_refused_before_any_trial(tmp_path, hwnas_home, args):
    (tmp_path / "audio.py").write_text(SPACE)
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "cpu-fast", "--space", "audio.py:space", "--data",
                   "digits", *args, "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert "--data digits: its images are (3, " in r.stderr
    assert "space 'datashape_audio' take (8, 64)" in r.stderr
    assert not out.exists()
