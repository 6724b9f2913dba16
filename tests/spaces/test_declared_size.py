"""A declared space's size, counted from its file (the bound a file is read under), against the
network PyTorch builds."""

from __future__ import annotations

import pytest
import torch

from hwnas.spaces import get_space, reload_spaces
from hwnas.spaces.declared.network import DeclaredNetwork
from hwnas.spaces.declared.schema import network_size

CNN = """\
name: every_conv_block
datasets:
  small: {classes: 10, input_shape: [3, 32, 32]}
  large: {classes: 100, input_shape: [3, 64, 48]}
stem:
  - {block: conv, out: {by_dataset: {small: 16, large: 24}}, kernel: {choices: [3, 5]},
     bias: true, bn: false}
stages:
  - out: {choices: [16, 32]}
    stride: {by_dataset: {small: 1, large: 2}}
    depth: {choices: [1, 2, 3]}
    layer: {block: mbconv, kernel: {choices: [3, 5]}, expand: {choices: [1, 3]},
            expand_at_1: true, se: 0.25, groups: 2}
  - out: 40
    stride: 2
    layers:
      - {block: uib, start_kernel: {choices: [0, 3]}, mid_kernel: {choices: [3, 5]},
         expand: {choices: [2, 4]}}
      - {block: fused_ib, kernel: {choices: [3, 5]}, expand: 3}
      - {block: skip, out: 48}
  - out: 48
    layer:
      candidates:
        ib: {block: mbconv, expand: 6}
        skip: {block: skip}
        conv: {block: conv, kernel: 3}
head:
  - {block: conv, out: {choices: [64, 96]}, kernel: 1}
  - {block: pool}
  - {block: conv, out: 128, kernel: 1, bias: true}
"""

VIT = """\
name: every_token_block
datasets:
  small: {classes: 10, input_shape: [3, 32, 32]}
stem:
  - {block: conv, out: 16, kernel: 3, stride: 2}
  - {block: patch_embed, out: {choices: [48, 64]}, patch: 4}
stages:
  - depth: {choices: [2, 3]}
    layer: {block: transformer, heads: {choices: [2, 4]}, head_dim: 16,
            mlp_ratio: {choices: [2, 3.5]}}
head:
  - {block: token_pool}
"""


def _built(space, dataset: str) -> int:
    """Parameters and buffers of the supernet at width 1, built on the meta device."""
    classes, shape = space.spec.datasets[dataset]
    values = {d.key: d.values for d in space.decisions}
    with torch.device("meta"):
        net = DeclaredNetwork(space, dataset, values, 1.0, classes, shape)
    return sum(t.numel() for t in (*net.parameters(), *net.buffers()))


@pytest.mark.parametrize("name", ["mobilenetv4", "mobilenetv4_m", "vit", "fbnet_declared",
                                  "ofa_declared", "CNN", "VIT"])  # fmt: skip
def test_a_declared_spaces_size_counted_from_its_file_is_the_built_networks(name, tmp_path):
    """Every block type's count (:attr:`BlockType.size`) follows its module: a file is
    refused above :data:`hwnas.limits.MAX_PARAMETERS` by this count, before anything is
    built (a 16384-wide stage at expansion 64 needed 68 GB to build)."""
    if name in ("CNN", "VIT"):
        path = tmp_path / f"{name.lower()}.yaml"
        path.write_text(globals()[name])
        name = str(path)
    try:
        space = get_space(name)
        for dataset in space.datasets():
            counted, parts = network_size(space.spec, dataset)
            assert counted == _built(space, dataset), dataset
            assert all(n >= 0 for n in parts.values())
    finally:
        reload_spaces()
