"""GDAS: searching for a robust neural architecture in four GPU hours (Dong & Yang, CVPR 2019).

Each step samples one candidate per decision with the Gumbel-softmax straight-through estimator
(hard one-hot forward, soft gradient), so only one path is computed. The temperature anneals
linearly from ``tau_max`` to ``tau_min``. Bilevel: weights on the training split, alpha on the
validation split.

Defaults are those of the authors' NAS-Bench-201 GDAS (D-X-Y/AutoDL-Projects ``GDAS.sh`` and
``configs/nas-benchmark/algos/GDAS.config``): tau 10 -> 0.1; weights SGD lr 0.025
cosine-annealed to 0.001, momentum 0.9, Nesterov, weight decay 5e-4; architecture Adam lr 3e-4,
betas (0.5, 0.999), weight decay 1e-3; no warm-up.
"""

from __future__ import annotations

from hwnas.supernet.strategies.base import SupernetStrategy


class Gdas(SupernetStrategy):
    name = "gdas"
    paper = "Dong & Yang, Searching for a Robust Neural Architecture in Four GPU Hours, CVPR 2019"

    @property
    def tau(self) -> float:
        o = self.options
        return o.tau_max - (o.tau_max - o.tau_min) * self.progress

    def step(self, train, val):
        x, y = train
        out = {}
        if not self.warming_up:
            xv, yv = val
            out["arch_loss"], out["hw_loss"] = self.arch_step(xv, yv, self.hard_path(self.tau))
        out["loss"] = self.weight_step(x, y, self.hard_path(self.tau))
        self.steps += 1
        return out
