"""Multiply-accumulates of conv and linear layers (NAS-Bench-201's convention) for every kind a
user's network has: 1-D convolutions and multi-head attention's projections were not counted
(a Conv1d audio model's card said 40 MACs)."""

from __future__ import annotations

import torch
from torch import nn

from hwnas.export import count_params_flops


def test_one_dimensional_convolutions_are_counted():
    net = nn.Sequential(nn.Conv1d(4, 8, 5), nn.ReLU(), nn.Conv1d(8, 8, 3, groups=2))
    _, macs = count_params_flops(net, (2, 4, 100))
    # out positions x output channels x (input channels per group x kernel), batch of two
    assert macs == 2 * (96 * 8 * 4 * 5 + 94 * 8 * 4 * 3)


def test_attention_projections_are_counted_as_linear_layers():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    _, macs = count_params_flops(layer, (1, 10, 16))
    # q, k, v and output projections (4 x 10 tokens x 16 x 16) + the two feed-forward layers
    assert macs == 4 * 10 * 16 * 16 + 2 * 10 * 16 * 32

    class KeywordCall(nn.Module):  # called with key= and value= as keywords
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(16, 2, batch_first=True)

        def forward(self, x):
            return self.attn(x, key=x, value=x, need_weights=False)[0]

    assert count_params_flops(KeywordCall(), (1, 10, 16))[1] == 4 * 10 * 16 * 16
