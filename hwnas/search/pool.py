"""What the cost-aware table strategies (``frontier``, ``surrogate``) share: an Optuna sampler
that proposes architectures from a pool of candidates whose costs are known before their
accuracy is queried."""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna

from hwnas.search.costs import CostContext
from hwnas.spaces import TabulatedSpace, ability
from hwnas.spaces.base import Arch


def candidate_pool(
    context: CostContext, rng: np.random.Generator, max_pool: int
) -> tuple[list[Arch], np.ndarray, np.ndarray]:
    """The candidates of ``context.space`` and their costs.

    Args:
        context: the space and its cost model (``context.cost`` must be set).
        rng: draws ``max_pool`` architectures where the space cannot be enumerated.
        max_pool: pool size for spaces that are not enumerable.

    Returns:
        (every architecture of an enumerable space, or up to ``max_pool`` distinct samples;
        their predicted costs in the cost model's unit (ms or mJ), shape (n,); a mask, shape
        (n,), of the candidates whose cost is finite and positive).
    """
    tabulated = ability(context.space, TabulatedSpace)
    if tabulated is not None:
        pool = tabulated.all_archs()
    else:
        pool = list(dict.fromkeys(context.space.sample(rng, max_pool)))
    cost = np.asarray(context.cost.predict(pool)[0], dtype=float)
    return pool, cost, np.isfinite(cost) & (cost > 0)


class PoolSampler(optuna.samplers.BaseSampler):
    """Base of samplers that propose whole architectures (``sample_relative``) over the space's
    choices; a parameter Optuna asks for outside them is drawn uniformly from ``self.rng``."""

    context: CostContext
    rng: np.random.Generator

    def infer_relative_search_space(self, study, trial) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution

        return {
            d: CategoricalDistribution(list(opts))
            for d, opts in self.context.space.choices().items()
        }

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        choices = param_distribution.choices
        return choices[int(self.rng.integers(len(choices)))]
