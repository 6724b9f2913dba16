"""Fixtures of the space tests: a small user-written space file."""

from __future__ import annotations

import pytest

TINY_SPACE = """\
# a user's space: elastic width, depth, kernel, expansion; a categorical block choice
name: tiny
datasets:
  digits: {classes: 10, input_shape: [3, 16, 16]}
stem:
  - {block: conv, out: 8, kernel: 3}
stages:
  - name: a
    out: {choices: [8, 16]}
    stride: 2
    depth: {choices: [1, 2]}
    layer: {block: mbconv, kernel: {choices: [3, 5]}, expand: {choices: [2, 4]}, se: 0.25}
  - name: b
    out: 16
    stride: 2
    layer:
      candidates:
        ib: {block: uib, start_kernel: 0, mid_kernel: 3, expand: 2}
        extradw: {block: uib, start_kernel: 3, mid_kernel: 5, expand: 2}
        skip: {block: skip}
head:
  - {block: pool}
"""


@pytest.fixture
def tiny_space_file(hwnas_home):
    """``tiny.yaml`` in ``$HWNAS_HOME/spaces`` (found by name and by path)."""
    folder = hwnas_home / "spaces"
    folder.mkdir(exist_ok=True)
    path = folder / "tiny.yaml"
    path.write_text(TINY_SPACE)
    from hwnas.spaces import reload_spaces

    reload_spaces()
    yield path
    reload_spaces()
