"""Aging (regularized) evolution over a space's categorical choices, as an Optuna sampler.

Real, Aggarwal, Huang & Le, "Regularized Evolution for Image Classifier Architecture Search",
AAAI 2019: a population of the ``population`` most recently scored architectures (the oldest
dies when a child is born); each child is one random mutation (one choice changed to another
value) of the best of ``sample`` population members drawn at random. The paper maximises one
objective; for hwnas's two (accuracy up, cost down) "best" is Pareto rank within the sample
(non-dominated sorting, Deb et al. 2002), ties broken by accuracy; under a latency limit,
feasible members rank before infeasible ones (constrained domination). Until ``population``
architectures are scored, children are uniform random architectures.

Age is the trial number (the order architectures were taken for scoring), and every draw for
trial ``n`` comes from a generator seeded with (seed, n) (:mod:`hwnas.engine.seeding`): a child
is a function of the seed and the trials before it, so a resumed search proposes what the
uninterrupted one did.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna

from hwnas.engine.seeding import INDEPENDENT, TRIAL, generator


def aging(seed: int | None, context: object = None, population: int = 50, sample: int = 10):
    """The ``aging`` strategy (see the module docstring)."""
    return AgingEvolutionSampler(seed, population=population, sample=sample)


class AgingEvolutionSampler(optuna.samplers.BaseSampler):
    """Regularized evolution (see the module docstring).

    Args:
        seed: random seed.
        population: architectures alive at once (the most recently completed trials).
        sample: tournament size.
    """

    def __init__(self, seed: int | None = None, population: int = 50, sample: int = 10):
        self.seed = seed
        self.population = population
        self.sample = sample

    def reseed_rng(self) -> None:
        """Another worker shares the seed: draw from fresh entropy from now on."""
        self.seed = None

    def infer_relative_search_space(self, study, trial) -> dict[str, Any]:
        from optuna.search_space import intersection_search_space

        return intersection_search_space(study.get_trials(deepcopy=False))

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution
        from optuna.trial import TrialState

        if not search_space or not all(
            isinstance(d, CategoricalDistribution) for d in search_space.values()
        ):
            return {}
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        done = [t for t in done if all(p in t.params for p in search_space)]
        if len(done) < self.population:
            return {}  # uniform random (sample_independent) until the population is full
        rng = generator(self.seed, TRIAL, trial.number)
        alive = sorted(done, key=lambda t: t.number)[-self.population :]
        drawn = [alive[i] for i in rng.choice(len(alive), self.sample, replace=False)]
        parent = drawn[_best(drawn)]
        child = {name: parent.params[name] for name in search_space}
        name = list(search_space)[int(rng.integers(len(search_space)))]
        others = [c for c in search_space[name].choices if c != child[name]]
        if others:
            child[name] = others[int(rng.integers(len(others)))]
        return child

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        choices = param_distribution.choices
        rng = generator(self.seed, INDEPENDENT, trial.number, param_name)
        return choices[int(rng.integers(len(choices)))]


def _best(trials: list) -> int:
    """Index of the best trial: lowest constrained Pareto rank, then highest accuracy."""
    from hwnas.engine.pareto import pareto_mask

    acc = np.array([t.values[0] for t in trials], dtype=float)
    cost = np.array([t.values[1] for t in trials], dtype=float)
    over = np.array([max(t.constraints.values(), default=0.0) for t in trials], dtype=float)
    feasible = over <= 0
    pool = np.flatnonzero(feasible) if feasible.any() else np.argsort(over)[:1]
    rank = np.full(len(trials), np.inf)
    left = list(pool)
    level = 0
    while left:
        front = pareto_mask(acc[left], cost[left])
        for k in np.asarray(left)[front]:
            rank[k] = level
        left = [k for k, f in zip(left, front) if not f]
        level += 1
    order = np.lexsort((-acc, rank))
    return int(order[0])
