"""Search strategies by name: each makes an Optuna sampler for a space.

A strategy here is an ask/tell optimiser over the space's categorical choices; Optuna owns
the ask/tell loop and the study, the strategy only decides what to ask next.

- ``nsga2``: NSGA-II (Deb et al., IEEE TEVC 2002), Optuna's ``NSGAIISampler``; under a
  latency limit, constrained domination (each trial carries its excess latency as a
  constraint).
- ``random``: uniform random search (Bergstra & Bengio, JMLR 2012), the standard baseline.
"""

from __future__ import annotations

from hwnas.registry import Registry

STRATEGIES: Registry = Registry("strategy")


def nsga2(seed: int | None, population_size: int = 20):
    """NSGA-II with uniform crossover over the choices; trials carrying constraint values
    (``trial.set_constraint``) are ranked by constrained domination.

    Args:
        seed: sampler seed.
        population_size: individuals per generation.
    """
    import optuna

    return optuna.samplers.NSGAIISampler(population_size=population_size, seed=seed)


def random(seed: int | None):
    """Uniform random sampling of the choices."""
    import optuna

    return optuna.samplers.RandomSampler(seed=seed)


STRATEGIES.register("nsga2", nsga2)
STRATEGIES.register("random", random)
