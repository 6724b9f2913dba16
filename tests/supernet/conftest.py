"""Supernet tests run single-threaded: on a small shared CPU, two torch threads are several
times slower than one for these tiny networks."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_thread():
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
