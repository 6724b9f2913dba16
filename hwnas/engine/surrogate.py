"""Surrogate-assisted multi-objective search for when the device cost is cheap to know.

When every candidate's cost is known before its accuracy is queried (a recorded table, or a
predictor adapted to the device), the scarce resource is accuracy queries (training runs). This
sampler spends them where the Pareto front can still move:

1. Start with ``init`` architectures spread over the cost range (one random architecture per
   cost quantile).
2. Each round, fit a random-forest accuracy surrogate (Breiman, Machine Learning 2001) on the
   queried architectures, using the space's structural ``surrogate_features`` plus log cost; its
   per-tree spread, with a noise floor, is the uncertainty.
3. For every unqueried candidate compute the probability that it is not dominated by the
   current front, P(acc > F(cost)), where F(c) is the best accuracy found at cost <= c (the
   probability-of-improvement criterion for Pareto fronts, Keane, AIAA J. 2006).
4. Split the candidates into ``bins`` cost quantiles and take the most probable one from each
   bin, so the front is explored evenly across costs rather than where it is easiest to improve.
5. Under a latency limit (the pool is then the candidates whose known or predicted latency
   meets it), what the user gets is the most accurate architecture within the limit, so a share
   ``focus`` of each round's picks are instead the candidates with the largest expected
   improvement over the best accuracy found so far (Jones, Schonlau & Welch, J. Global Optim.
   1998; :func:`hwnas.engine.frontier.log_expected_improvement`), regardless of cost bin. As in
   ``frontier``, it replaced the probability of improvement, which favours near-certain small
   gains (15 table cases x 5 seeds at 60 queries: mean 1.28 -> 1.13 points below the best within
   the limit, worst 3.65 -> 2.81; ``experiments/latency_constrained.py --costs table``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hwnas.engine.costs import CostContext
from hwnas.engine.frontier import log_expected_improvement
from hwnas.engine.pool import PoolSampler, candidate_pool, no_candidate
from hwnas.errors import HwnasError


def surrogate(seed: int | None, context: CostContext, **options: Any) -> SurrogateSampler:
    """The ``surrogate`` strategy (see the module docstring)."""
    return SurrogateSampler(context, seed, **options)


NEEDS_COSTS_MESSAGE = (
    "strategy 'surrogate' needs the cost of every candidate before measuring it "
    "(a recorded device table or a latency predictor); use --strategy nsga3"
)


class SurrogateSampler(PoolSampler):
    """Optuna sampler implementing the strategy in this module's docstring.

    Args:
        context: the space and its cost model (``context.cost`` is required).
        seed: random seed (initial design and forest).
        init: size of the initial design (default: 10% of ``budget``, at least ``bins``).
        bins: cost quantiles per round; one architecture is proposed per bin per round.
        trees: number of trees in the forest.
        noise: accuracy noise floor in points added to the forest's spread.
        max_pool: candidate pool size for spaces that are not enumerable.
        focus: under a latency limit, the share of each round's picks that go to the
            candidates with the largest expected improvement over the best accuracy found
            (step 5).

    Raises:
        HwnasError: the context has no cost model.
    """

    def __init__(
        self,
        context: CostContext,
        seed: int | None = None,
        init: int | None = None,
        bins: int = 20,
        trees: int = 100,
        noise: float = 0.2,
        max_pool: int = 20000,
        focus: float = 0.5,
    ):
        if context.cost is None:
            raise HwnasError(NEEDS_COSTS_MESSAGE)
        self._start(context, seed)
        self.bins = bins
        self.init = init if init is not None else max(bins, context.budget // 10)
        self.trees = trees
        self.noise = noise
        self.max_pool = max_pool
        self.focus = focus if context.max_latency is not None else 0.0

    # -- candidate pool -----------------------------------------------------------------------

    def _setup(self) -> None:
        space = self.context.space
        pool, cost, keep = candidate_pool(self.context, self.pool_generator(), self.max_pool)
        limit = self.context.max_latency
        if limit is not None:
            latency = self.context.latency
            lat = cost if latency is None else np.asarray(latency.predict(pool)[0], dtype=float)
            keep &= lat <= limit
        if not keep.any():
            raise no_candidate(limit, None if limit is None else lat)
        self._pool = [a for a, k in zip(pool, keep) if k]
        self._cost = cost[keep]
        features = space.surrogate_features(self._pool)
        self._x = np.hstack([features, np.log(self._cost)[:, None]])
        self._row = {a.text: i for i, a in enumerate(self._pool)}
        order = np.argsort(self._cost, kind="stable")
        self._strata = [s for s in np.array_split(order, self.bins) if len(s)]
        self._init_strata = [s for s in np.array_split(order, self.init) if len(s)]

    # -- the strategy -------------------------------------------------------------------------

    def _plan(
        self, rows: list[int], accuracies: list[float], rng: np.random.Generator
    ) -> list[int]:
        """The next round of candidate rows (one per cost bin, or the initial design), from the
        pool rows scored so far and their accuracies (%); ``rng`` draws the initial design and
        seeds the forest."""
        free = np.ones(len(self._pool), dtype=bool)
        free[list(self._taken)] = False
        if len(rows) < self.init:
            picks = []
            for s in self._init_strata:
                s = s[free[s]]
                if len(s):
                    picks.append(int(rng.choice(s)))
            return picks
        from scipy.stats import norm
        from sklearn.ensemble import RandomForestRegressor

        rows = np.array(rows)
        acc = np.array(accuracies, dtype=float)
        forest = RandomForestRegressor(
            self.trees, random_state=int(rng.integers(2**31)), n_jobs=1
        ).fit(self._x[rows], acc)
        per_tree = np.stack([t.predict(self._x) for t in forest.estimators_])
        mu = per_tree.mean(0)
        sd = np.sqrt(per_tree.var(0) + self.noise**2)
        # F(c): best accuracy found at cost <= c (a staircase over the queried costs)
        cost_q = self._cost[rows]
        order = np.argsort(cost_q, kind="stable")
        best = np.maximum.accumulate(acc[order])
        pos = np.searchsorted(cost_q[order], self._cost, side="right") - 1
        front = np.where(pos >= 0, best[np.maximum(pos, 0)], -np.inf)
        score = norm.sf((front - mu) / sd)
        score[~free] = -np.inf
        picks: list[int] = []
        n_focus = int(round(self.focus * len(self._strata)))
        if n_focus:
            beat = log_expected_improvement(mu, sd, float(acc.max()))
            beat[~free] = -np.inf
            picks = [int(j) for j in np.argsort(-beat)[:n_focus] if np.isfinite(beat[j])]
            score[picks] = -np.inf
        n_spread = len(self._strata) - n_focus  # bins spread evenly over the cost range
        for k in np.unique(np.linspace(0, len(self._strata) - 1, n_spread).round().astype(int)):
            s = self._strata[k]
            j = s[int(np.argmax(score[s]))]
            if np.isfinite(score[j]):
                picks.append(int(j))
        return picks
