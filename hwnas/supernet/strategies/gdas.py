"""GDAS: searching for a robust neural architecture in four GPU hours (Dong & Yang, CVPR 2019).

Each step samples one candidate per decision with the Gumbel-softmax straight-through estimator
(hard one-hot forward, soft gradient), so only one path is computed. The temperature anneals
linearly from ``tau_max`` to ``tau_min``. Bilevel: weights on the training split, alpha on the
validation split.
"""

from __future__ import annotations

from hwnas.supernet.settings import own_defaults
from hwnas.supernet.strategies.base import SupernetStrategy


class Gdas(SupernetStrategy):
    name = "gdas"
    paper = "Dong & Yang, Searching for a Robust Neural Architecture in Four GPU Hours, CVPR 2019"
    own_options = own_defaults("gdas")

    @property
    def tau(self) -> float:
        o = self.options
        return o["tau_max"] - (o["tau_max"] - o["tau_min"]) * self.progress

    def step(self, train, val):
        x, y = train
        out = {}
        if not self.warming_up:
            xv, yv = val
            out["arch_loss"], out["hw_loss"] = self.arch_step(xv, yv, self.hard_path(self.tau))
        out["loss"] = self.weight_step(x, y, self.hard_path(self.tau))
        self.steps += 1
        return out
