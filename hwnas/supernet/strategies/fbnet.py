"""FBNet DNAS (Wu et al., CVPR 2019): a soft Gumbel-softmax mixture over the blocks of every
layer, with the temperature annealed exponentially from ``tau_max`` to ``tau_min`` (the paper:
5.0, times exp(-0.045) = 0.956 per epoch for 90 epochs, so 0.087 at the end; compressed to the
run's length), weights trained alone for the ``warmup`` share of steps (the paper: 10 of 90
epochs), then weights on the training split and the architecture on the validation split,
alternating.

Defaults are the paper's (section 4.1): weights SGD lr 0.1 cosine-annealed, momentum 0.9,
weight decay 1e-4; architecture Adam lr 0.01, weight decay 5e-4; hardware term the paper's
multiplicative ``CE * alpha * log(LAT)^beta`` (``hw_form=fbnet``, alpha = ``hw_alpha`` 0.2,
beta = ``--latency-weight``, the paper's 0.6; :class:`hwnas.supernet.cost.HardwareLoss`).
``--latency-target`` uses the absolute reward every strategy uses in target mode. The term's
latency is the paper's (eq. 6): each block's latency weighted by the same Gumbel-softmax sample
``m`` that weighs its output in the step's forward pass, not by softmax(alpha).
"""

from __future__ import annotations

from hwnas.supernet.strategies.base import SupernetStrategy


class FBNetDnas(SupernetStrategy):
    name = "fbnet"
    paper = "Wu et al., FBNet: Hardware-Aware Efficient ConvNet Design via DNAS, CVPR 2019"

    @property
    def tau(self) -> float:
        o = self.options
        return o.tau_max * (o.tau_min / o.tau_max) ** self.progress

    def step(self, train, val):
        x, y = train
        out = {}
        if not self.warming_up:
            xv, yv = val
            path = self.soft_path(self.tau)  # LAT(a) = sum over blocks of m * LAT(block)
            out["arch_loss"], out["hw_loss"] = self.arch_step(xv, yv, path, self.path_weights(path))
        out["loss"] = self.weight_step(x, y, self.soft_path(self.tau))
        self.steps += 1
        return out
