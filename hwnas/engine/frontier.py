"""Frontier search: spend accuracy queries on the candidates most likely to be on the true
Pareto front, when every candidate's cost is known before its accuracy is queried.

With a recorded device table, or a predictor adapted to the device (few-shot search), the
cost of every candidate is known; the scarce resource is accuracy (training runs). Each round
of ``batch`` queries:

1. Fits a Gaussian process of accuracy on the queried architectures (:class:`AccuracyModel`):
   a Bayesian linear model on the space's ``surrogate_features`` (for NAS-Bench-201 the
   function a cell computes, its paths, rather than its edges, and a zero-cost proxy, SynFlow
   at initialisation, :mod:`hwnas.spaces.zero_cost`; prior and noise precisions by evidence
   maximisation, MacKay, Neural Computation 1992) plus a local kernel on how many choices two
   architectures differ in (what the features miss, architectures one choice apart share;
   its weight and length by marginal likelihood, none where it does not help). Accuracies below the
   ``quantile`` of the queried ones are compressed logarithmically before fitting: only the
   top of each cost range decides the front, and a few broken networks (1% accuracy) would
   otherwise bend the whole model. The model is fitted on that warped scale, where the
   acquisition also works (the warp is monotone, so the probabilities are the same).
2. Scores every unqueried candidate by the probability that it is on the *true* front: that it
   beats the front found so far at its cost, and every other plausible candidate that costs no
   more (:func:`log_prob_front`; independent Gaussian posteriors, integrated on a grid). This is
   the probability-of-Pareto-optimality criterion of Keane (AIAA J. 2006) extended from the
   queried front to the whole pool, so that a crowd of near-equal cheap candidates shares one
   expected front point instead of each claiming one (which, with latencies tied across
   hundreds of architectures, would spend the budget on one tier).
3. In the first ``ehvi_horizon`` queries, takes a share ``ehvi`` of the batch by expected
   hypervolume improvement over the front found so far (:func:`expected_hv_improvement`; costs
   scaled to [0, 1] over the pool, reference point 10% beyond the costliest candidate and below
   the cheapest front point), one candidate at a time, each next one scored as if the previous
   had their predicted accuracy (the Kriging believer, Ginsbourger et al., 2010). Hypervolume
   rewards a candidate by the area it would add, so cheap architectures that beat the front at
   a wide range of costs come first: the front is covered early (the first 100 queries reach
   about 98-99.5% of the true front's hypervolume on NAS-Bench-201, against 86-99% without);
   afterwards the probability of being on the true front (step 2) completes it.
4. Takes a share ``spread`` of the batch as the most probably non-dominated candidate of each
   of that many cost quantiles (the front is explored across the whole cost range even where
   the model underrates it), and the rest as the candidates with the highest probability of
   being on the front.
5. Under a latency limit (the pool is then the candidates whose known or predicted latency
   meets it) what the user gets is the most accurate architecture within the limit, so a share
   ``focus`` of each batch goes to the candidates with the largest expected improvement over
   the best accuracy found within it (Jones, Schonlau & Welch, J. Global Optim. 1998), and none
   by hypervolume. Expected improvement weighs how far a candidate may beat the best, not only
   how likely it is to: the probability of improvement it replaced favours near-certain
   small gains and stalled 2.2 points below the best within 4 ms on fpga after 60 queries
   (on 15 table cases x 5 seeds at 60 queries: mean 0.30 -> 0.18 points, worst 2.29 -> 0.86).

The first ``init`` queries are one random architecture per cost quantile. The model's fit and
the scores cost well under a second per round in NumPy and SciPy.
Rounds are planned at fixed points of the study's trial sequence, each with a generator seeded
from (seed, round) (:class:`hwnas.engine.pool.PoolSampler`), so a search killed and resumed
plans what the uninterrupted one did. Several workers on one study each plan batches from the
study they read; a worker told that another shares its seed (``reseed_rng``) takes its batch in
random order, so the workers' claims rarely collide.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hwnas.engine.costs import CostContext
from hwnas.engine.pool import PoolSampler, candidate_pool, no_candidate
from hwnas.errors import HwnasError


def frontier(seed: int | None, context: CostContext, **options: Any) -> FrontierSampler:
    """The ``frontier`` strategy (see the module docstring)."""
    return FrontierSampler(context, seed, **options)


MIN_P_FEASIBLE = 0.05
"""Under a latency limit, candidates whose predicted probability of meeting it is below this
are neither searched nor measured (a predicted latency may miss by more than its spread)."""

NEEDS_COSTS_MESSAGE = (
    "strategy '{name}' needs the cost of every candidate before measuring it "
    "(a recorded device table or a latency predictor); use --strategy nsga3"
)


# -- the normal distribution in NumPy ---------------------------------------------------------
# SciPy's special functions would cost an import of about 0.2 s for two functions; the
# Chebyshev fit of erfc of Press et al. (Numerical Recipes, 2nd ed., section 6.2; fractional
# error below 1.2e-7 everywhere) gives both, and log Phi without underflow in the far tail.

_ERFC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def _log_erfc_pos(z: np.ndarray) -> np.ndarray:
    """log erfc(z) for z >= 0."""
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(z)
    for c in _ERFC[:0:-1]:
        poly = (poly + c) * t
    return np.log(t) - z * z + _ERFC[0] + poly


def _log_ndtr_exact(x: np.ndarray) -> np.ndarray:
    z = -x / math.sqrt(2.0)
    out = np.empty_like(x)
    pos = z >= 0  # Phi(x) = erfc(z) / 2 is small: log erfc directly
    out[pos] = _log_erfc_pos(z[pos]) - math.log(2.0)
    neg = ~pos  # Phi(x) = 1 - erfc(-z) / 2
    out[neg] = np.log1p(-0.5 * np.exp(_log_erfc_pos(-z[neg])))
    return out


_Z0, _ZSTEP, _ZN = -40.0, 0.005, 16001  # linear interpolation error below 1e-5
_LOG_PHI = _log_ndtr_exact(_Z0 + _ZSTEP * np.arange(_ZN))
_LOG_PHI_SLOPE = np.diff(_LOG_PHI)


def log_ndtr(x: np.ndarray) -> np.ndarray:
    """log of the standard normal CDF, elementwise, accurate in both tails (absolute error
    below 1e-5; values beyond +-40 are taken at +-40)."""
    pos = np.clip((np.asarray(x, dtype=float) - _Z0) / _ZSTEP, 0.0, _ZN - 1.000001)
    i = pos.astype(np.intp)
    return _LOG_PHI[i] + (pos - i) * _LOG_PHI_SLOPE[i]


def ndtr(x: np.ndarray) -> np.ndarray:
    """The standard normal CDF, elementwise."""
    return np.exp(log_ndtr(x))


# -- the accuracy model -----------------------------------------------------------------------


def warp(y: np.ndarray, floor: float) -> np.ndarray:
    """Identity above ``floor``; below it, ``floor - log(1 + floor - y)`` (monotone)."""
    y = np.asarray(y, dtype=float)
    return np.where(y >= floor, y, floor - np.log1p(np.maximum(floor - y, 0.0)))


BETA_CAP = 1e4
"""Most noise precision :class:`AccuracyModel` takes, times the targets' variance (a noise
standard deviation of at least 1% of the targets' spread)."""


LOCAL_GRID = {
    "linear": (1.0, 3.0, 10.0),
    "local": (0.0, 0.03, 0.1, 0.3),
    "length": (1.5, 3.0, 6.0, 12.0),
    "noise": (0.3, 1.0),
}
"""Hyperparameters :class:`AccuracyModel` chooses among by marginal likelihood when it has the
candidates' choices: the linear kernel's prior variance over the evidence-maximising one
(``linear``), the local kernel's variance over the targets' (``local``; 0 is the linear model
alone), its length in differing choices (``length``) and the noise variance over the linear
model's (``noise``)."""


class AccuracyModel:
    """Gaussian-process regression of (warped) accuracy: a Bayesian linear model on features,
    plus, where the candidates' choices are given, a local kernel on the number of choices in
    which two candidates differ (their Hamming distance ``h``, ``s2 exp(-h / length)``).

    The linear model's prior precision ``alpha`` and noise precision ``beta`` are chosen by
    evidence maximisation (MacKay's fixed-point updates; Bishop, Pattern Recognition and Machine
    Learning, section 3.5.2). The noise variance is at least 1e-4 of the targets' variance
    (:data:`BETA_CAP`): with fewer rows than features the evidence would otherwise fit them
    exactly, with no noise at all. With choices, the kernel ``x x' / (alpha a) + s2
    exp(-h / length) + n / beta`` then takes ``a``, ``s2``, ``length`` and ``n`` from
    :data:`LOCAL_GRID` by marginal likelihood (``s2 = 0`` is the linear model alone). The local
    kernel carries what the features miss but neighbours share: on NAS-Bench-201 (CIFAR-100)
    what the linear model fitted on every cell leaves unexplained correlates 0.36 between cells
    one edge apart (0.46 among cells above 65%) and 0.00 between random ones, and ``frontier``'s
    first 100 queries reach more of the true front's hypervolume on the devices whose latencies
    are tied in tiers (docs/benchmarks.md, "Search quality"). The local kernel is COMBO's (Oh
    et al., NeurIPS 2019): its diffusion kernel on the graph of choices, with one diffusion
    rate for every choice, is this exponential of the Hamming distance, up to scale.

    Args:
        features: (U, D) features of the distinct candidates (rows may repeat in the pool).
        choices: (U, C) one-hot choices of each distinct candidate (the space's ``encode``; the
            same number of ones in every row), or None for the linear model alone.
        iterations: most fixed-point updates per fit (warm-started from the last fit).

    Attributes:
        kernel: after a fit with choices, the chosen ``linear`` prior variance scale (the
            linear kernel is ``x x' / linear``), ``local`` variance, ``length`` and ``noise``
            variance, in the targets' units; None for the linear model alone.
    """

    def __init__(
        self, features: np.ndarray, choices: np.ndarray | None = None, iterations: int = 50
    ):
        self.x = np.asarray(features, dtype=float)
        self.x32 = self.x.astype(np.float32)
        self.choices = None if choices is None else np.asarray(choices, dtype=np.float32)
        self.dims = 0.0 if choices is None else float(self.choices[0].sum())
        self.iterations = iterations
        self.alpha = 1.0
        self.beta: float | None = None
        self.kernel: dict[str, float] | None = None

    def fit(self, rows: np.ndarray, y: np.ndarray) -> AccuracyModel:
        """Fit on the feature rows ``rows`` (n,) with targets ``y`` (n,)."""
        p = self.x[rows]
        self.offset = float(y.mean())
        yc = y - self.offset
        n, d = p.shape
        ptp, pty = p.T @ p, p.T @ yc
        eig = np.linalg.eigvalsh(ptp).clip(min=0.0)
        alpha = self.alpha
        # the noise variance is at least 1e-4 of the targets' variance: with fewer rows than
        # features the evidence can fit them exactly (residual 0, beta without bound), and a
        # precision 1e12 times the prior's makes the posterior's matrix singular
        var = max(float(yc.var()), 1e-6)
        max_beta = BETA_CAP / var
        beta = min(self.beta or 1.0 / var, max_beta)
        for _ in range(self.iterations):
            a = beta * ptp + alpha * np.eye(d)
            mean = beta * np.linalg.solve(a, pty)
            lam = beta * eig
            gamma = float((lam / (lam + alpha)).sum())
            resid = yc - p @ mean
            new_alpha = gamma / max(float(mean @ mean), 1e-12)
            new_beta = min(max(n - gamma, 1.0) / max(float(resid @ resid), 1e-12), max_beta)
            done = abs(new_alpha - alpha) < 1e-3 * alpha and abs(new_beta - beta) < 1e-3 * beta
            alpha, beta = new_alpha, new_beta
            if done:
                break
        self.alpha, self.beta = alpha, beta
        if self.choices is not None:
            return self._fit_kernel(np.asarray(rows), yc, var)
        a = beta * ptp + alpha * np.eye(d)
        chol = np.linalg.cholesky(a)
        self.mean = beta * np.linalg.solve(a, pty)
        self.root = np.linalg.inv(chol)  # covariance = root.T @ root
        self.kernel = None
        return self

    def _fit_kernel(self, rows: np.ndarray, yc: np.ndarray, var: float) -> AccuracyModel:
        """Choose the kernel's hyperparameters (:data:`LOCAL_GRID`) by marginal likelihood."""
        from scipy.linalg import LinAlgError, cho_factor, cho_solve, solve_triangular

        p, c = self.x[rows], self.choices[rows].astype(float)
        linear = p @ p.T / self.alpha
        local = {length: np.exp(-(self.dims - c @ c.T) / length) for length in LOCAL_GRID["length"]}
        eye = np.eye(len(rows))
        best = None
        for a in LOCAL_GRID["linear"]:
            for s2 in LOCAL_GRID["local"]:
                for length in LOCAL_GRID["length"] if s2 else LOCAL_GRID["length"][:1]:
                    k0 = linear / a + (s2 * var) * local[length]
                    for noise in LOCAL_GRID["noise"]:
                        try:
                            chol = cho_factor(k0 + (noise / self.beta) * eye, lower=True,
                                              check_finite=False)  # fmt: skip
                        except LinAlgError:
                            continue
                        w = cho_solve(chol, yc, check_finite=False)
                        evidence = -0.5 * float(yc @ w) - float(np.log(np.diag(chol[0])).sum())
                        if best is None or evidence > best[0]:
                            best = (evidence, a, s2 * var, length, noise / self.beta, chol, w)
        _, a, s2, length, noise, chol, w = best
        self.kernel = {"linear": self.alpha * a, "local": s2, "length": length, "noise": noise}
        self._rows, self._weights = rows, w
        lower = np.tril(chol[0])
        self._inverse = solve_triangular(lower, eye, lower=True, check_finite=False)
        return self

    def predict(self) -> tuple[np.ndarray, np.ndarray]:
        """Posterior predictive mean and standard deviation of every feature row, (U,) each."""
        if self.kernel is None:
            mu = self.offset + self.x @ self.mean
            v = self.x32 @ self.root.T.astype(np.float32)
            return mu, np.sqrt(np.einsum("ij,ij->i", v, v) + 1.0 / self.beta)
        k = self.kernel
        rows = self._rows
        cross = (self.x32 @ self.x32[rows].T) / np.float32(k["linear"])  # (U, n)
        prior = np.einsum("ij,ij->i", self.x32, self.x32) / k["linear"]
        if k["local"] > 0:
            same = self.choices @ self.choices[rows].T
            cross += np.float32(k["local"]) * np.exp((same - self.dims) / np.float32(k["length"]))
            prior = prior + k["local"]
        mu = self.offset + cross.astype(float) @ self._weights
        v = self._inverse.astype(np.float32) @ cross.T  # (n, U): L^-1 k(rows, candidates)
        post = np.maximum(prior - np.einsum("ij,ij->j", v, v), 0.0)
        return mu, np.sqrt(post + k["noise"])


# -- the acquisition --------------------------------------------------------------------------


def log_prob_front(
    cost: np.ndarray,
    mu: np.ndarray,
    sd: np.ndarray,
    free: np.ndarray,
    front: np.ndarray,
    grid: int = 48,
    threshold: float = 1e-6,
) -> np.ndarray:
    """log P(candidate is on the true Pareto front), for every free candidate.

    A free candidate x is on the front when its accuracy beats ``front[x]`` (the best
    accuracy found at cost <= cost[x]) and every other free candidate whose cost is not
    higher. Accuracies are independent Gaussians N(mu, sd); the integral over x's accuracy is
    a sum over ``grid`` bins. Candidates whose probability of beating ``front`` is below
    ``threshold`` neither count as rivals nor get a score.

    Args:
        cost: (N,) costs (ms or mJ).
        mu: (N,) predictive means.
        sd: (N,) predictive standard deviations.
        free: (N,) bool, candidates not yet queried.
        front: (N,) best accuracy found at cost <= cost (-inf where none).
        grid: bins of the accuracy grid.
        threshold: probability below which a candidate is left out.

    Returns:
        (N,) log probabilities, -inf for queried and left-out candidates.
    """
    out = np.full(len(cost), -np.inf)
    lpnd = log_ndtr((mu - front) / sd)
    cand = np.flatnonzero(free & (lpnd > math.log(threshold)))
    if len(cand) == 0:
        return out
    cand = cand[np.argsort(cost[cand], kind="stable")]
    m, s, f = mu[cand], sd[cand], front[cand]
    lo = max(float(f.min()), float((m - 5 * s).min()))
    hi = float((m + 5 * s).max())
    step = (hi - lo) / grid
    level = lo + step * (np.arange(grid) + 0.5)
    z = (level[None, :] - m[:, None]) / s[:, None]
    below = log_ndtr(z)  # log P(rival < level)
    upto = np.cumsum(below, axis=0)
    last = np.searchsorted(cost[cand], cost[cand], side="right") - 1  # ties are rivals too
    terms = upto[last] - below  # every rival costing no more, but the candidate itself
    terms += -0.5 * z * z + np.log(step / (math.sqrt(2 * math.pi) * s))[:, None]  # its density
    terms[level[None, :] <= f[:, None]] = -np.inf  # it must beat the front found so far
    top = terms.max(axis=1)
    ok = np.isfinite(top)
    score = np.full(len(cand), -np.inf)
    score[ok] = top[ok] + np.log(np.exp(terms[ok] - top[ok, None]).sum(axis=1))
    out[cand] = score
    return out


def log_expected_improvement(mu: np.ndarray, sd: np.ndarray, target: float) -> np.ndarray:
    """log of the expected improvement E[max(0, a - target)] of accuracies a ~ N(mu, sd)
    (Jones, Schonlau & Welch, J. Global Optim. 1998), elementwise, finite far below the target.

    EI = sd * h(z), z = (mu - target) / sd, h(z) = z Phi(z) + phi(z); for z < -6, where the
    difference cancels in floating point, h(z) = phi(z) / z^2 (1 - 3 / z^2 + 15 / z^4) (the
    asymptotic series of Mills' ratio), so candidates far below the target are still ranked.

    Args:
        mu: (N,) predictive means (%).
        sd: (N,) predictive standard deviations (%), > 0.
        target: the accuracy to beat (%).

    Returns:
        (N,) log expected improvements (log %).
    """
    z = (np.asarray(mu, dtype=float) - target) / sd
    log_phi = -0.5 * z * z - 0.5 * math.log(2 * math.pi)
    far = z < -6.0
    zz = np.where(far, z, -6.0) ** 2
    tail = log_phi - np.log(zz) + np.log1p(-3.0 / zz + 15.0 / (zz * zz))
    near = np.where(far, 0.0, z)
    h = near * ndtr(near) + np.exp(np.where(far, 0.0, log_phi))
    return np.log(sd) + np.where(far, tail, np.log(np.maximum(h, 1e-300)))


def expected_hv_improvement(
    x: np.ndarray,
    mu: np.ndarray,
    sd: np.ndarray,
    front_x: np.ndarray,
    front_y: np.ndarray,
    ref_x: float,
    ref_y: float,
) -> np.ndarray:
    """Expected hypervolume improvement of each candidate over a 2-D staircase (Emmerich et
    al., 2006; here the cost is known exactly, so the expectation is over accuracy alone).

    The staircase is the found front: accuracies ``front_y`` (rising) at costs ``front_x``
    (rising); the dominated region is bounded by the reference point (``ref_x``, ``ref_y``)
    (a cost above every candidate's, an accuracy below the front's). A candidate at cost x with
    accuracy a adds ``sum_k w_k max(0, a - g_k)``, g_k the staircase level over the cost
    segment k to its right and w_k the segment's width, so its expectation under N(mu, sd) is
    ``sum_k w_k (d_k Phi(d_k / sd) + sd phi(d_k / sd))`` with d_k = mu - g_k.

    Args:
        x: (N,) candidates' costs (any unit, the same as ``front_x`` and ``ref_x``).
        mu: (N,) predictive means of accuracy.
        sd: (N,) predictive standard deviations.
        front_x: (M,) costs of the found front, rising.
        front_y: (M,) its accuracies, rising.
        ref_x: reference cost (>= every cost).
        ref_y: reference accuracy (<= every front accuracy).

    Returns:
        (N,) expected improvements (cost unit x accuracy unit), >= 0.
    """
    knots = np.concatenate(([-np.inf], front_x, [ref_x]))  # segment k: [knots[k], knots[k+1])
    levels = np.concatenate(([ref_y], front_y))  # (M+1,)
    left = np.maximum(knots[None, :-1], x[:, None])
    width = np.clip(knots[None, 1:] - left, 0.0, None)  # (N, M+1)
    d = mu[:, None] - levels[None, :]
    z = d / sd[:, None]
    gain = d * ndtr(z) + sd[:, None] * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return (width * np.maximum(gain, 0.0)).sum(axis=1)


def staircase(cost_q: np.ndarray, acc_q: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Best queried accuracy at cost <= each of ``cost`` (-inf where nothing is that cheap)."""
    order = np.argsort(cost_q, kind="stable")
    best = np.maximum.accumulate(acc_q[order])
    pos = np.searchsorted(cost_q[order], cost, side="right") - 1
    return np.where(pos >= 0, best[np.maximum(pos, 0)], -np.inf)


# -- the sampler ------------------------------------------------------------------------------


class FrontierSampler(PoolSampler):
    """Optuna sampler implementing the strategy in this module's docstring.

    Args:
        context: the space and its cost model (``context.cost`` is required).
        seed: random seed (initial design, bins' ties, worker order).
        init: queries of the initial design (default: budget / 15, within 10..20).
        batch: queries planned per round (default: budget / 15, within 5..20).
        spread: share of a round taken one per cost quantile.
        quantile: accuracies below this quantile of the queried ones are compressed.
        focus: under a latency limit, share of a round that goes to the candidates with the
            largest expected improvement over the best accuracy found within the limit.
        ehvi: share of a round taken by expected hypervolume improvement (none under a
            latency limit).
        ehvi_horizon: queries after which rounds take no candidate by hypervolume.
        grid: bins of the accuracy grid of :func:`log_prob_front`.
        max_pool: candidate pool size for spaces that are not enumerable.

    Raises:
        HwnasError: the context has no cost model, or no candidate meets the latency limit.
    """

    name = "frontier"

    def __init__(
        self,
        context: CostContext,
        seed: int | None = None,
        init: int | None = None,
        batch: int | None = None,
        spread: float = 0.3,
        quantile: float = 0.7,
        focus: float = 0.5,
        ehvi: float = 0.5,
        ehvi_horizon: int = 100,
        grid: int = 48,
        max_pool: int = 20000,
    ):
        if context.cost is None:
            raise HwnasError(NEEDS_COSTS_MESSAGE.format(name=self.name))
        self._start(context, seed)
        scale = context.budget // 15
        self.init = init if init is not None else min(max(scale, 10), 20)
        self.batch = batch if batch is not None else min(max(scale, 5), 20)
        self.spread = spread
        self.quantile = quantile
        self.focus = focus if context.max_latency is not None else 0.0
        self.ehvi = ehvi if context.max_latency is None else 0.0  # a limit: one best, no front
        self.ehvi_horizon = ehvi_horizon
        self.grid = grid
        self.max_pool = max_pool

    # -- candidate pool -----------------------------------------------------------------------

    def _setup(self) -> None:
        space = self.context.space
        pool, cost, keep = candidate_pool(self.context, self.pool_generator(), self.max_pool)
        limit = self.context.max_latency
        lat = cost
        if limit is not None:
            model = self.context.latency or self.context.cost
            lat, lat_sd = (np.asarray(v, dtype=float) for v in model.predict(pool))
            # a predicted latency may miss by more than its spread: keep every candidate
            # with a fair chance of meeting the limit (exact tables: those that meet it)
            with np.errstate(invalid="ignore", over="ignore"):  # 1e300 ms: z = inf, kept
                z = (limit - lat) / np.maximum(lat_sd, 1e-12)
            # no value (a table row never measured): not a candidate
            keep &= np.isfinite(lat) & ~np.isnan(z)
            keep[keep] = ndtr(z[keep]) >= MIN_P_FEASIBLE
        if not keep.any():
            raise no_candidate(limit, None if limit is None else lat)
        self._pool = [a for a, k in zip(pool, keep) if k]
        self._cost = cost[keep]
        self._within = lat[keep] <= limit if limit is not None else None
        features = np.ascontiguousarray(space.surrogate_features(self._pool), dtype=float)
        rows = features.view(np.dtype((np.void, features.dtype.itemsize * features.shape[1])))
        _, first, self._feature_row = np.unique(
            rows.reshape(-1), return_index=True, return_inverse=True
        )
        # one row per distinct feature vector, with the choices of its first candidate
        choices = space.encode([self._pool[i] for i in first])
        self._model = AccuracyModel(features[first], choices)
        self._row = {a.text: i for i, a in enumerate(self._pool)}
        self._order = np.argsort(self._cost, kind="stable")

    # -- the strategy -------------------------------------------------------------------------

    def _plan(
        self, rows: list[int], accuracies: list[float], rng: np.random.Generator
    ) -> list[int]:
        """The next round of candidate rows (see the module docstring), from the pool rows
        scored so far and their accuracies (%); ``rng`` draws the initial design."""
        free = np.ones(len(self._pool), dtype=bool)
        free[list(self._taken)] = False
        if len(rows) < self.init:
            picks = []
            for s in np.array_split(self._order, self.init):
                s = s[free[s]]
                if len(s):
                    picks.append(int(rng.choice(s)))
            return picks
        rows = np.array(rows)
        acc = np.array(accuracies, dtype=float)
        floor = float(np.quantile(acc, self.quantile))
        y = warp(acc, floor)
        self._model.fit(self._feature_row[rows], y)
        mu_u, sd_u = self._model.predict()
        mu, sd = mu_u[self._feature_row], sd_u[self._feature_row]
        mu[rows] = y
        front = staircase(self._cost[rows], y, self._cost)
        n = self.batch
        picks: list[int] = []
        chosen = np.zeros(len(self._pool), dtype=bool)

        def take(score: np.ndarray, k: int, within: np.ndarray | None = None) -> None:
            """Add the ``k`` best-scoring free candidates (of ``within``) to the picks."""
            index = np.arange(len(score)) if within is None else within
            score = np.where(free[index] & ~chosen[index], score[index], -np.inf)
            k = min(k, len(score))
            if k <= 0:
                return
            best = np.argpartition(-score, k - 1)[:k]
            for j in best[np.argsort(-score[best], kind="stable")]:
                if np.isfinite(score[j]):
                    picks.append(int(index[j]))
                    chosen[index[j]] = True

        n_focus = int(round(self.focus * n))
        if n_focus:
            within = self._within[rows]
            target = y[within].max() if within.any() else y.max()
            take(log_expected_improvement(mu, sd, target), n_focus)
        n_ehvi = int(round(self.ehvi * n)) if len(rows) < self.ehvi_horizon else 0
        if n_ehvi:  # candidates with no real chance of beating the front add nothing
            hopeful = free & ~chosen & (log_ndtr((mu - front) / sd) > math.log(1e-6))
            self._take_ehvi(rows, y, mu, sd, hopeful, n_ehvi, picks, chosen)
        n_spread = int(round(self.spread * n))
        if n_spread:
            pnd = log_ndtr((mu - front) / sd)
            for s in np.array_split(self._order, n_spread):
                take(pnd, 1, within=s)
        rest = n - len(picks)
        take(log_prob_front(self._cost, mu, sd, free & ~chosen, front, self.grid), rest)
        if len(picks) < n:  # the front is settled: the most probably non-dominated ones
            take(log_ndtr((mu - front) / sd), n - len(picks))
        return picks

    def _take_ehvi(self, rows, y, mu, sd, free, k, picks, chosen) -> None:
        """Add ``k`` candidates by greedy expected hypervolume improvement, each next one
        against the front as if the previous picks had their predicted accuracy (the Kriging
        believer of Ginsbourger et al., 2010). Costs are scaled to [0, 1] over the pool, the
        reference point is 10% beyond the costliest candidate and below the front."""
        lo, hi = float(self._cost.min()), float(self._cost.max())
        x = (self._cost - lo) / max(hi - lo, 1e-12)
        qx, qy = list(x[rows]), list(y)
        cand = np.flatnonzero(free)
        for _ in range(k):
            if len(cand) == 0:
                return
            order = np.lexsort((-np.asarray(qy), np.asarray(qx)))
            fx, fy, best = [], [], -np.inf
            for j in order:
                if qy[j] > best:
                    fx.append(qx[j])
                    fy.append(qy[j])
                    best = qy[j]
            span = max(fy[-1] - fy[0], float(np.std(qy)), 1e-6)
            gain = expected_hv_improvement(
                x[cand], mu[cand], sd[cand], np.array(fx), np.array(fy), 1.1, fy[0] - 0.1 * span
            )
            j = int(np.argmax(gain))
            row = int(cand[j])
            picks.append(row)
            chosen[row] = True
            qx.append(float(x[row]))
            qy.append(float(mu[row]))
            cand = np.delete(cand, j)
