"""One-shot supernet training + evolutionary search over its subnets (SPOS, Guo et al., ECCV
2020; Once-for-All, Cai et al., ICLR 2020).

Training: every step trains one uniformly sampled subnet (``sampling=uniform``, SPOS) or, with
``sampling=sandwich`` (BigNAS/OFA-style sandwich rule, Yu et al., ECCV 2020), the largest, the
smallest and two random subnets, gradients accumulated, one update (the largest and smallest by
the cost model); the supernet is first initialised for it
(:meth:`~hwnas.supernet.base.Supernet.init_for_one_shot`: FBNet's residual candidates start as
the identity).

Search: NSGA-II (Deb et al., 2002; Optuna's sampler) over subnets, each scored
by its validation accuracy with the inherited weights (batch norm recalibrated) and by its
device cost: the device's own value where it has one (a recorded table), else the cost
model's. The derived architecture is the most accurate evaluated subnet within
``target_tolerance`` of the latency target (target mode; judged as in
:func:`hwnas.supernet.cost.constrained_choice`), or the one maximising accuracy - weight *
cost / reference (weight mode); the Pareto front's subnets are handed on as further candidates.
"""

from __future__ import annotations

import numpy as np
import torch

from hwnas.spaces.mixed import one_hot_path
from hwnas.supernet.cost import in_band
from hwnas.supernet.strategies.base import SupernetStrategy


class OneShotEvolution(SupernetStrategy):
    name = "oneshot"
    paper = "Guo et al., Single Path One-Shot NAS with Uniform Sampling, ECCV 2020 (+ NSGA-II)"
    bilevel = False
    hw_in_training = False  # every subnet trained alike; the term picks among evaluated ones

    def __init__(self, supernet, hw, options, total_steps, seed=0):
        super().__init__(supernet, hw, options, total_steps, seed)
        if self.options.sampling not in ("uniform", "sandwich"):
            from hwnas.errors import HwnasError

            raise HwnasError("oneshot sampling must be 'uniform' or 'sandwich'")
        supernet.init_for_one_shot()  # a resumed run then loads its trained weights over it
        self.seed = seed
        self.evaluated: list[tuple[str, float, float]] = []
        self._extremes = None

    def arch_parameters(self):
        return []

    def _uniform(self):
        return [int(self.rng.integers(n)) for n in self.supernet.sizes]

    def extremes(self) -> tuple[list[int], list[int]]:
        """(largest, smallest) subnet by the cost model (coordinate search), else by index."""
        if self._extremes is None:
            sizes = self.supernet.sizes
            model = self.hw.model if self.hw is not None else None
            if model is None:
                self._extremes = ([n - 1 for n in sizes], [0] * len(sizes))
            else:
                out = []
                for sign in (1.0, -1.0):
                    idx = np.zeros(len(sizes), dtype=np.int64)
                    for _ in range(3):
                        for j, n in enumerate(sizes):
                            cand = np.repeat(idx[None], n, axis=0)
                            cand[:, j] = np.arange(n)
                            archs = [self.supernet.arch([int(v) for v in c]) for c in cand]
                            idx[j] = int(np.argmax(sign * model.predict(archs)[0]))
                    out.append(idx.tolist())
                self._extremes = (out[0], out[1])
        return self._extremes

    def step(self, train, val):
        x, y = train
        sizes = self.supernet.sizes
        if self.options.sampling == "uniform":
            loss = self.weight_step(x, y, one_hot_path(self._uniform(), sizes))
        else:
            big, small = self.extremes()
            self.set_lr()
            self.w_opt.zero_grad(set_to_none=True)
            total = 0.0
            for idx in (big, small, self._uniform(), self._uniform()):
                part = self.loss(x, y, one_hot_path(idx, sizes))
                part.backward()
                total += float(part.detach())
            torch.nn.utils.clip_grad_norm_(self.supernet.parameters(), self.options.grad_clip)
            self.w_opt.step()
            loss = total / 4
        self.steps += 1
        return {"loss": loss}

    def probs(self):
        return [torch.full((n,), 1.0 / n) for n in self.supernet.sizes]

    def warnings(self):
        caveat = self.supernet.one_shot_caveat
        return [caveat] if caveat else []

    def finish(self, score):
        """NSGA-II over subnets; ``score(arch)`` is the inherited-weight validation accuracy."""
        import optuna

        space = self.supernet.space
        model = self.hw.model if self.hw is not None else None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.create_study(
            directions=["maximize", "minimize"],
            sampler=optuna.samplers.NSGAIISampler(
                population_size=self.options.population, seed=self.seed
            ),
        )
        dims = space.choices()
        seen: dict[str, tuple[float, float]] = {}
        for _ in range(self.options.evolution_trials):
            trial = study.ask()
            arch = space.from_choices(
                {d: trial.suggest_categorical(d, list(o)) for d, o in dims.items()}
            )
            if arch.text not in seen:
                acc = float(score(arch))
                cost = self._device_cost(arch) if model is not None else 0.0
                seen[arch.text] = (acc, cost)
            study.tell(trial, list(seen[arch.text]))
        self.evaluated = [(a, acc, c) for a, (acc, c) in seen.items()]
        derived = self._pick(self.evaluated)
        front = _pareto(self.evaluated)
        if len(front) > self.options.candidates:
            keep = np.linspace(0, len(front) - 1, self.options.candidates).round().astype(int)
            front = [front[i] for i in sorted(set(keep))]
        texts = [derived] + [a for a, _, _ in front if a != derived]
        return [space.parse(t) for t in texts]

    def _pick(self, evaluated):
        hw = self.hw
        if hw is None:
            return max(evaluated, key=lambda r: r[1])[0]
        if hw.target is not None:  # judged by the device's own value where it has one
            tol, model = self.options.target_tolerance, hw.model
            cost = np.array([r[2] for r in evaluated])
            exact = np.zeros(len(cost), dtype=bool)
            margin = 0.0
            if model.lookup_table:
                space = self.supernet.space
                cost, exact = model.judged(model.indices([space.parse(r[0]) for r in evaluated]))
                margin = model.margin
            inside = in_band(cost, exact, hw.target, tol, margin)
            if inside.any():
                return max((r for r, k in zip(evaluated, inside) if k), key=lambda r: r[1])[0]
            return evaluated[int(np.argmin(np.abs(cost / hw.target - 1)))][0]
        if hw.limit is not None:  # under --max-latency: the most accurate within it
            cost = np.array([r[2] for r in evaluated])
            if hw.model.lookup_table:
                space = self.supernet.space
                cost, exact = hw.model.judged(
                    hw.model.indices([space.parse(r[0]) for r in evaluated])
                )
                inside = np.where(exact, cost <= hw.limit, cost <= hw.limit * (1 - hw.model.margin))
            else:
                inside = cost <= hw.limit
            if inside.any():
                k = max(
                    (i for i in range(len(evaluated)) if inside[i]), key=lambda i: evaluated[i][1]
                )
            else:  # none surely within: the cheapest, said (hwnas.jobs.supernet warns of it)
                k = int(np.argmin(cost))
            self.derivation = {
                "rule": "most accurate candidate within --max-latency",
                "limit": hw.limit,
                "lut_margin": float(getattr(hw.model, "margin", 0.0)),
                "within_tolerance": bool(inside.any()),
                "cost": float(cost[k]),
            }
            return evaluated[k][0]
        w = hw.weight or 0.0
        return max(evaluated, key=lambda r: r[1] / 100 - w * r[2] / hw.reference)[0]

    def _device_cost(self, arch) -> float:
        """Cost of ``arch`` (ms or mJ) as the search judges it: the device's own value where the
        lookup table stands for a table that has one (a recorded device), else the cost
        model's. The lookup table is a fit (a few percent off a recorded value): NSGA-II, the
        weighted pick and the candidates handed on ranked recorded architectures by it."""
        model = self.hw.model
        if model.lookup_table:
            cost, _ = model.judged(model.indices([arch]))
            return float(cost[0])
        return float(model.cost(arch))

    def derive(self):
        if self.evaluated:
            return self.supernet.space.parse(self._pick(self.evaluated))
        return super().derive()


def _pareto(rows):
    """Rows (arch, accuracy, cost) on the accuracy/cost Pareto front, by cost
    (:func:`hwnas.engine.pareto.pareto_order`)."""
    from hwnas.engine.pareto import pareto_order

    order = pareto_order(np.array([r[1] for r in rows]), np.array([r[2] for r in rows]))
    return [rows[i] for i in order]
