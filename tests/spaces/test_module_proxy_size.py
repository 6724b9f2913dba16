"""A supernet search of a model made elastic trains and measures its subnets at the size the
model was made elastic at (it used 16-pixel proxies: a 32x32 model's latencies were of
16x16 networks)."""

from __future__ import annotations

import textwrap

from helpers import hwnas_main

SPACE = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F
    from torch import nn

    import hwnas


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(3, 16, 3, padding=1)
            self.c2 = nn.Conv2d(16, 32, 3, padding=1)
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            return self.fc(F.relu(self.c2(F.relu(self.c1(x)))).mean((2, 3)))


    torch.manual_seed(0)
    space = hwnas.elastic(Net().eval(), torch.zeros(1, 3, 32, 32), name="proxysize32",
                          dataset="digits")
    """
)


def test_a_model_made_elastic_at_32_pixels_is_searched_at_32(tmp_path, hwnas_home):
    (tmp_path / "net.py").write_text(SPACE)
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "cpu-fast", "--space", "net.py:space", "--strategy",
                   "oneshot", "--data", "digits", "--epochs", "1", "--finetune-epochs", "0",
                   "--set", "evolution_trials=4", "--set", "population=4", "--set",
                   "candidates=2", "--set", "limit=120", "--no-zoo", "--out", str(out),
                   cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = (out / "summary.json").read_text()
    assert "trained-subnet[1, 3, 32, 32]" in summary
    assert "trained-subnet[1, 3, 16, 16]" not in summary
