"""Search strategies by name: each makes an Optuna sampler for a space.

A strategy here is an ask/tell optimiser over the space's categorical choices; Optuna owns
the ask/tell loop and the study, the strategy only decides what to ask next.

- ``nsga2``: NSGA-II (Deb et al., IEEE TEVC 2002), Optuna's ``NSGAIISampler``; under a
  latency limit, constrained domination (each trial carries its excess latency as a
  constraint).
- ``random``: uniform random search (Bergstra & Bengio, JMLR 2012), the standard baseline.
- ``surrogate``: random-forest accuracy surrogate with a probability-of-non-domination
  acquisition stratified over cost (:mod:`hwnas.search.surrogate`); needs every candidate's
  cost before measuring it (a recorded table or a predictor).

A strategy is a factory ``(seed, context, **options) -> optuna sampler``; ``context`` is a
:class:`hwnas.search.surrogate.CostContext` (the space and what is known of costs).
"""

from __future__ import annotations

from hwnas.registry import Registry

STRATEGIES: Registry = Registry("strategy")


def nsga2(seed: int | None, context: object = None, population_size: int = 20):
    """NSGA-II with uniform crossover over the choices; trials carrying constraint values
    (``trial.set_constraint``) are ranked by constrained domination.

    Args:
        seed: sampler seed.
        context: unused (NSGA-II learns only from evaluated trials).
        population_size: individuals per generation.
    """
    import optuna

    return optuna.samplers.NSGAIISampler(population_size=population_size, seed=seed)


def random(seed: int | None, context: object = None):
    """Uniform random sampling of the choices."""
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


STRATEGIES.register("nsga2", nsga2)
STRATEGIES.register("random", random)
STRATEGIES.register("surrogate", "hwnas.search.surrogate:surrogate", needs_costs=True)
