"""FBNet DNAS (Wu et al., CVPR 2019): a soft Gumbel-softmax mixture over the blocks of every
layer, with the temperature annealed exponentially from ``tau_max`` to ``tau_min`` (the paper:
5.0, decayed by 0.956 per epoch), weights trained first alone for the ``warmup`` share of
steps (the paper: 10 of 90 epochs), then weights on the training split and the architecture on
the validation split, alternating.

Hardware term: the paper multiplies the loss by ``alpha * log(LAT)^beta``; hwnas uses the
additive form of :class:`hwnas.supernet.cost.HardwareLoss` (the same expected latency from the
lookup table, added with a penalty weight or pulled to a target), so every strategy's latency
settings mean the same thing.
"""

from __future__ import annotations

from hwnas.supernet.settings import own_defaults
from hwnas.supernet.strategies.base import SupernetStrategy


class FBNetDnas(SupernetStrategy):
    name = "fbnet"
    paper = "Wu et al., FBNet: Hardware-Aware Efficient ConvNet Design via DNAS, CVPR 2019"
    own_options = own_defaults("fbnet")

    @property
    def tau(self) -> float:
        o = self.options
        return o["tau_max"] * (o["tau_min"] / o["tau_max"]) ** self.progress

    def step(self, train, val):
        x, y = train
        out = {}
        if not self.warming_up:
            xv, yv = val
            out["arch_loss"], out["hw_loss"] = self.arch_step(xv, yv, self.soft_path(self.tau))
        out["loss"] = self.weight_step(x, y, self.soft_path(self.tau))
        self.steps += 1
        return out
