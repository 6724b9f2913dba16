"""PyTorch's transformer encoder, made traceable for :func:`hwnas.elastic`.

``nn.TransformerEncoderLayer`` and ``nn.TransformerEncoder`` choose between a fused fast path
and the plain computation by inspecting their input (``src.is_nested``, devices, grad mode):
torch.fx cannot trace that, and treats them as opaque layers, so a model built on them had
nothing hwnas could make elastic. :func:`make_traceable` gives every such module in a (copied)
model the class below, whose forward is the plain computation of PyTorch's own (the same
submodules, parameters and state-dict keys, so the trained weights are kept as they are):

- ``EncoderLayer``: self-attention block and feed-forward block, each with its residual
  addition, layer norm before (``norm_first``) or after; the feed-forward width
  (``dim_feedforward``, ``linear1``'s outputs) can then be made elastic, and the layer
  dropped (it is a residual block);
- ``Encoder``: its ``layers`` in turn, then its ``norm``: elastic depth over ``layers``.

``nn.MultiheadAttention`` stays one opaque layer (its heads are reshaped out of the model
width, so the width the attention reads and writes stays fixed). Vaswani et al., NeurIPS 2017.
"""

from __future__ import annotations

import torch
from torch import nn


class EncoderLayer(nn.TransformerEncoderLayer):
    """``nn.TransformerEncoderLayer`` without its fast path: (N, S, E) or (S, N, E) as the
    layer's ``batch_first`` says -> the same shape. Computes what PyTorch's slow path does."""

    def forward(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool = False,
    ) -> torch.Tensor:
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            return x + self._ff_block(self.norm2(x))
        x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
        return self.norm2(x + self._ff_block(x))


class Encoder(nn.TransformerEncoder):
    """``nn.TransformerEncoder`` without its nested-tensor fast path: its ``layers`` in turn,
    then ``norm``. The same shapes as the layers'. (With a key padding mask, PyTorch's fast
    path returns zeros at the padded positions; this returns what the layers compute there.)"""

    def forward(
        self,
        src: torch.Tensor,
        mask: torch.Tensor | None = None,
        src_key_padding_mask: torch.Tensor | None = None,
        is_causal: bool | None = None,
    ) -> torch.Tensor:
        x = src
        for layer in self.layers:
            x = layer(x, mask, src_key_padding_mask, bool(is_causal))
        return self.norm(x) if self.norm is not None else x


TRACEABLE: dict[type, type] = {
    nn.TransformerEncoderLayer: EncoderLayer,
    nn.TransformerEncoder: Encoder,
}
"""PyTorch module class -> the traceable class it is given."""


def make_traceable(model: nn.Module) -> nn.Module:
    """Give every module of ``model`` whose class is a key of :data:`TRACEABLE` (exactly: a
    subclass may have changed its forward) the traceable class, in place; returns ``model``."""
    for m in model.modules():
        new = TRACEABLE.get(type(m))
        if new is not None:
            m.__class__ = new
    return model


__all__ = ["TRACEABLE", "Encoder", "EncoderLayer", "make_traceable"]
