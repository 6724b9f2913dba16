"""docs/api.md's Python examples run as they are written (in order, in one namespace, in a
fresh folder), on the tests' fast timing profile ``cpu-fast`` in place of ``cpu``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_the_api_page_examples_run(tmp_path, monkeypatch, capsys):
    from hwnas.spaces import reload_spaces

    blocks = re.findall(r"```python\n(.+?)\n```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    reload_spaces()
    namespace: dict = {"__name__": "api_docs"}
    try:
        for i, code in enumerate(blocks):
            code = code.replace('device="cpu"', 'device="cpu-fast"')
            exec(compile(code, f"{DOC}:block{i}", "exec"), namespace)
    finally:
        reload_spaces()
    out = capsys.readouterr().out
    assert "40 trials in the Optuna study" in out and "did you mean budget?" in out
    assert "nasbench201-cifar100-pixel3-latency-frontier-seed0" in out  # the CLI's study name
    assert "torch.Size([2, 10])" in out and "{'width': 3, 'depth': 1}" in out
    assert "pixel3: " in out and " ms (median, CV " in out
    assert "\nnsga3\n" in out  # the default strategy where no cost is known first
    assert float(out.strip().splitlines()[-1]) < 1e-4  # ONNX Runtime == PyTorch
    assert list((tmp_path / "runs" / "mynet" / "zoo").glob("*/weights.pt"))
