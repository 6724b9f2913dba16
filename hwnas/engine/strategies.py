"""Search strategies by name, one registry for every strategy ``hwnas search`` knows.

Each entry declares its ``pipeline``: ``table`` strategies are ask/tell optimisers over the
space's categorical choices (a factory making an Optuna sampler; the engine owns the loop and
the study); ``supernet`` strategies train a weight-sharing supernet and hand the candidates they
derive to the same engine (:mod:`hwnas.supernet.strategies`; they also declare the ``space`` of
their paper, searched when ``--space`` is not given, and, where the paper's method has a
hardware term, its ``latency_weight``: the weight used when neither ``--latency-weight`` nor
``--latency-target`` is given).

- ``nsga2``: NSGA-II (Deb et al., IEEE TEVC 2002), Optuna's ``NSGAIISampler``; under a
  latency limit, constrained domination (each trial carries its excess latency as a
  constraint).
- ``random``: uniform random search (Bergstra & Bengio, JMLR 2012), the standard baseline.
- ``nsga3``, ``tpe``, ``gp``: Optuna's NSGA-III, multivariate multi-objective TPE and
  Gaussian-process samplers, for comparison and for users who want them by name.
- ``aging``: aging (regularized) evolution (Real et al., AAAI 2019) with a Pareto-rank
  tournament (:mod:`hwnas.engine.evolution`).
- ``surrogate``: random-forest accuracy surrogate with a probability-of-non-domination
  acquisition stratified over cost (:mod:`hwnas.engine.surrogate`); needs every candidate's
  cost before measuring it (a recorded table or a predictor).

A strategy is a factory ``(seed, context, **options) -> optuna sampler``; ``context`` is a
:class:`hwnas.engine.surrogate.CostContext` (the space and what is known of costs). Its
sampler's proposal for a trial must be a function of the seed and the study's trials before it
(:mod:`hwnas.engine.seeding`), so a search killed and resumed ends as the uninterrupted one;
Optuna's samplers are wrapped in :class:`hwnas.engine.seeding.TrialSeeded` for that.
"""

from __future__ import annotations

from typing import Any

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

    from hwnas.engine.seeding import TrialSeeded, genetic

    return TrialSeeded(
        lambda s: genetic(optuna.samplers.NSGAIISampler, seed, s, population_size=population_size),
        seed,
    )


def random(seed: int | None, context: object = None):
    """Uniform random sampling of the choices."""
    import optuna

    from hwnas.engine.seeding import TrialSeeded

    return TrialSeeded(lambda s: optuna.samplers.RandomSampler(seed=s), seed)


def nsga3(seed: int | None, context: object = None, population_size: int = 20):
    """NSGA-III (Deb & Jain, IEEE TEVC 2014), Optuna's ``NSGAIIISampler``: NSGA-II with
    reference-point niching instead of crowding distance; constrained domination under a
    latency limit, as ``nsga2``.

    Args:
        seed: sampler seed.
        context: unused.
        population_size: individuals per generation.
    """
    import warnings

    import optuna

    from hwnas.engine.seeding import TrialSeeded, genetic

    def make(s: int | None):
        with warnings.catch_warnings():  # "experimental" is Optuna's label, not news for a user
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            return genetic(optuna.samplers.NSGAIIISampler, seed, s, population_size=population_size)

    return TrialSeeded(make, seed)


def tpe(seed: int | None, context: object = None, n_startup_trials: int = 10):
    """Multi-objective TPE (Ozaki et al., GECCO 2020 / JAIR 2022), Optuna's ``TPESampler``,
    which models the choices jointly (multivariate) since Optuna 5; feasible trials rank first
    under a latency limit.

    Args:
        seed: sampler seed.
        context: unused.
        n_startup_trials: random trials before the Parzen estimators are used.
    """
    import optuna

    from hwnas.engine.seeding import TrialSeeded

    return TrialSeeded(
        lambda s: optuna.samplers.TPESampler(seed=s, n_startup_trials=n_startup_trials), seed
    )


def gp(seed: int | None, context: object = None, n_startup_trials: int = 10):
    """Gaussian-process Bayesian optimisation, Optuna's ``GPSampler`` (log expected hypervolume
    improvement for two objectives, Daulton et al., NeurIPS 2020; constrained under a latency
    limit). Needs PyTorch and SciPy; its cost grows with the cube of the trials (slow beyond a
    few hundred).

    Args:
        seed: sampler seed.
        context: unused.
        n_startup_trials: random trials before the GP is used.
    """
    import optuna

    from hwnas.engine.seeding import TrialSeeded

    return TrialSeeded(
        lambda s: optuna.samplers.GPSampler(seed=s, n_startup_trials=n_startup_trials), seed
    )


STRATEGIES.register(
    "nsga2", nsga2, pipeline="table",
    description="NSGA-II (Deb et al. 2002), constrained domination under a latency limit",
)
STRATEGIES.register(
    "random", random, pipeline="table",
    description="uniform random search (Bergstra & Bengio 2012), the baseline",
)
STRATEGIES.register(
    "nsga3", nsga3, pipeline="table",
    description="NSGA-III, Optuna's sampler",
)
STRATEGIES.register(
    "tpe", tpe, pipeline="table",
    description="multi-objective TPE, Optuna's sampler",
)
STRATEGIES.register(
    "gp", gp, pipeline="table",
    description="Gaussian-process sampler, Optuna's",
)
STRATEGIES.register(
    "aging", "hwnas.engine.evolution:aging", pipeline="table",
    description="aging evolution (Real et al. 2019), Pareto-rank tournament",
)
STRATEGIES.register(
    "frontier",
    "hwnas.engine.frontier:frontier",
    pipeline="table",
    needs_costs=True,
    description="Bayesian accuracy model, queries the likeliest front members (needs costs)",
)
STRATEGIES.register(
    "surrogate",
    "hwnas.engine.surrogate:surrogate",
    pipeline="table",
    needs_costs=True,
    description="random-forest accuracy surrogate, non-domination acquisition (needs costs)",
)
STRATEGIES.register(
    "exact",
    "hwnas.engine.exact:exact",
    pipeline="table",
    needs_costs=True,
    check="hwnas.engine.exact:check",
    description="the exact front from full accuracy and cost tables",
)
_SUPERNET = "hwnas.supernet.strategies"
STRATEGIES.register(
    "darts",
    f"{_SUPERNET}.darts:Darts",
    pipeline="supernet",
    space="nasbench201",
    description="DARTS (Liu et al. 2019), differentiable relaxation",
)
STRATEGIES.register(
    "gdas",
    f"{_SUPERNET}.gdas:Gdas",
    pipeline="supernet",
    space="nasbench201",
    description="GDAS (Dong & Yang 2019), Gumbel-softmax sampled paths",
)
STRATEGIES.register(
    "fbnet",
    f"{_SUPERNET}.fbnet:FBNetDnas",
    pipeline="supernet",
    space="fbnet",
    latency_weight=0.6,
    description="FBNet (Wu et al. 2019), latency-aware differentiable search",
)
STRATEGIES.register(
    "proxyless",
    f"{_SUPERNET}.proxyless:ProxylessNas",
    pipeline="supernet",
    space="ofa",
    latency_weight=0.3,
    description="ProxylessNAS (Cai et al. 2019), binarized paths, latency loss",
)
STRATEGIES.register(
    "singlepath",
    f"{_SUPERNET}.singlepath:SinglePathNas",
    pipeline="supernet",
    space="ofa",
    description="Single-Path NAS (Stamoulis et al. 2019), superkernel thresholds",
)
STRATEGIES.register(
    "oneshot",
    f"{_SUPERNET}.oneshot:OneShotEvolution",
    pipeline="supernet",
    space="nasbench201",
    description="SPOS (Guo et al. 2020): one-shot supernet, then evolution",
)

TABLE_STRATEGIES: Registry = STRATEGIES.select("table strategy", pipeline="table")
"""The table strategies (Optuna sampler factories)."""


def strategy_help() -> str:
    """``--strategy``'s help: every registered strategy with the one-line description it was
    registered with, table strategies first, and the default."""
    lines = []
    for pipeline, title in (("table", "Table search"), ("supernet", "Supernet search")):
        entries = [
            f"{name}: {STRATEGIES.info(name).get('description', '')}"
            for name in STRATEGIES.names()
            if STRATEGIES.info(name)["pipeline"] == pipeline
        ]
        lines.append(f"{title}: " + "; ".join(entries) + ".")
    lines.append(
        f"Default: {DEFAULT} wherever every candidate's cost can be known before its accuracy "
        "is queried (a recorded table, a few-shot search, or a live device's reference set "
        f"measured first), else {FALLBACK}."
    )
    return " ".join(lines)


def pipeline_of(name: str) -> str:
    """ "table" or "supernet": which kind of search the strategy ``name`` runs.

    Raises:
        UnknownNameError: no strategy has that name (the message lists them all).
    """
    return STRATEGIES.info(name)["pipeline"]


DEFAULT = "frontier"
"""The default strategy wherever every candidate's cost can be known before its accuracy is
queried (``experiments/search_quality.py``: 60-65% of the true front at 300 queries against
11-17% for the strategies that learn costs only from evaluated trials)."""

FALLBACK = "nsga3"
"""The default where no cost can be known up front: the best of the strategies that need none
on ``experiments/search_quality.py`` (see README, Benchmarks)."""


def default_strategy(space: Any, device: Any, metric: str, fewshot: bool) -> str:
    """The strategy ``hwnas search`` runs when none is named.

    :data:`DEFAULT` when every candidate's cost can be known before its accuracy is queried:
    the device has a recorded table of the space for ``metric``, the search is few-shot (a
    predictor or a measurement budget was given, or the device is imported), or the device can
    measure the space's reference set for a predictor artifact of the space to be calibrated
    on (a live device: then every queried architecture is still measured). Else
    :data:`FALLBACK`.

    Args:
        space: the :class:`~hwnas.spaces.base.SearchSpace`.
        device: the :class:`~hwnas.devices.base.Device`.
        metric: "latency_ms" or "energy_mj".
        fewshot: whether the search is few-shot.
    """
    if fewshot or device.table(space.name, metric) is not None:
        return DEFAULT
    if device.can_measure and can_predict(space):
        return DEFAULT
    return FALLBACK


def can_predict(space: Any) -> bool:
    """Whether the space has a reference set and a predictor artifact of its own name, so a
    device's costs can be predicted from the reference set measured on it."""
    from hwnas.errors import HwnasError
    from hwnas.predictors import list_artifacts
    from hwnas.predictors.data import reference_indices

    try:
        reference_indices(space.name)
    except HwnasError:
        return False
    return space.name in list_artifacts()
