"""Search strategies by name, one registry for every strategy ``hwnas search`` knows.

Each entry declares its ``pipeline``: ``table`` strategies are ask/tell optimisers over the
space's categorical choices (a factory making an Optuna sampler; the engine owns the loop and
the study); ``supernet`` strategies train a weight-sharing supernet and hand the candidates they
derive to the same engine (:mod:`hwnas.supernet.strategies`; they also declare the ``space`` of
their paper, searched when ``--space`` is not given).

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


STRATEGIES.register("nsga2", nsga2, pipeline="table")
STRATEGIES.register("random", random, pipeline="table")
STRATEGIES.register(
    "surrogate", "hwnas.search.surrogate:surrogate", pipeline="table", needs_costs=True
)
STRATEGIES.register(
    "exact",
    "hwnas.search.exact:exact",
    pipeline="table",
    needs_costs=True,
    check="hwnas.search.exact:check",
)
_SUPERNET = "hwnas.supernet.strategies"
STRATEGIES.register("darts", f"{_SUPERNET}.darts:Darts", pipeline="supernet", space="nasbench201")
STRATEGIES.register("gdas", f"{_SUPERNET}.gdas:Gdas", pipeline="supernet", space="nasbench201")
STRATEGIES.register("fbnet", f"{_SUPERNET}.fbnet:FBNetDnas", pipeline="supernet", space="fbnet")
STRATEGIES.register(
    "proxyless", f"{_SUPERNET}.proxyless:ProxylessNas", pipeline="supernet", space="ofa"
)
STRATEGIES.register(
    "singlepath", f"{_SUPERNET}.singlepath:SinglePathNas", pipeline="supernet", space="ofa"
)
STRATEGIES.register(
    "oneshot", f"{_SUPERNET}.oneshot:OneShotEvolution", pipeline="supernet", space="nasbench201"
)

TABLE_STRATEGIES: Registry = STRATEGIES.select("table strategy", pipeline="table")
"""The table strategies (Optuna sampler factories)."""


def pipeline_of(name: str) -> str:
    """ "table" or "supernet": which kind of search the strategy ``name`` runs.

    Raises:
        UnknownNameError: no strategy has that name (the message lists them all).
    """
    return STRATEGIES.info(name)["pipeline"]
