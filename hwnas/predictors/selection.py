"""Which architectures to measure on a new device: the few-shot predictors' samplers.

A selector picks ``n`` architectures of a space's table (indices) to measure on a device the
predictor has never seen; the predictor then adapts on their values. Selectors live in
:data:`SELECTORS`:

- ``reference``: the space's reference set (``reference_sets.json``, the 10 architectures HELP
  measures on a new device, Lee et al., NeurIPS 2021): its first ``n`` for ``n <= 10``, then
  random others. The default: a device measured once serves every later prediction.
- ``random``: uniformly at random.
- ``nasflat``: NASFLAT's sampler (Akhauri & Abdelfattah, MLSys 2024; ``get_distinct_index``
  with ``sampling_method="kmeancosine"`` in its ``correlation_trainer/main_trf.py``): half the
  samples are one random member of each of ``n // 2`` k-means clusters of the architectures'
  encodings, the other half one random member of each of ``n - n // 2`` equal buckets of the
  architectures sorted by their mean cosine similarity to all others. NASFLAT clusters its
  CATE / arch2vec / zero-cost-proxy embeddings, which are not shipped; hwnas clusters the
  standardised space features its predictors read (one-hot encoding, structural counts,
  log graph features).
- ``active``: hwnas's active selection for the meta-learned predictor (needs one): greedy
  D-optimal design on the predictor's adaptation features (the meta-trained encoder's outputs
  and the additive costs), so that the measured architectures pin down the device's head
  where the candidates disagree most.

Every selector returns distinct indices among ``candidates`` (the architectures that can be
measured; by default every one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cache

import numpy as np

from hwnas.errors import HwnasError, UnknownNameError

Selector = Callable[..., list[int]]


@cache
def space_features(space: str) -> np.ndarray:
    """Standardised features (N, p) of every architecture of the space's table: one-hot
    encoding, structural counts and log graph features, each column centred and scaled."""
    from hwnas.predictors.featurize import get_featurizer

    fz = get_featurizer(space)
    archs = fz.space.all_archs()
    x = np.concatenate(
        [fz.encoding(archs), fz.structural(archs), np.log1p(fz.graph(archs))], 1
    ).astype(np.float64)
    sd = x.std(0)
    keep = sd > 1e-12
    return (x[:, keep] - x[:, keep].mean(0)) / sd[keep]


def _check(n: int, candidates: np.ndarray) -> None:
    if n < 1:
        raise HwnasError(f"the number of architectures to measure must be positive, got {n}")
    if n > len(candidates):
        raise HwnasError(f"cannot pick {n} architectures among {len(candidates)} candidates")


def select_reference(space: str, n: int, candidates: np.ndarray, rng, **_) -> list[int]:
    """The reference set's first ``n`` candidates, then random other candidates."""
    from hwnas.predictors.data import reference_indices

    _check(n, candidates)
    allowed = set(int(i) for i in candidates)
    picks = [i for i in reference_indices(space) if i in allowed][:n]
    rest = np.setdiff1d(candidates, picks)
    picks += [int(i) for i in rng.permutation(rest)[: n - len(picks)]]
    return picks


def select_random(space: str, n: int, candidates: np.ndarray, rng, **_) -> list[int]:
    """``n`` candidates uniformly at random, without repetition."""
    _check(n, candidates)
    return [int(i) for i in rng.choice(candidates, n, replace=False)]


def select_nasflat(space: str, n: int, candidates: np.ndarray, rng, **_) -> list[int]:
    """NASFLAT's "kmeancosine" sampler on the standardised space features (see the module)."""
    from sklearn.cluster import KMeans
    from threadpoolctl import threadpool_limits

    _check(n, candidates)
    x = space_features(space)[candidates]
    picks: list[int] = []
    k = n // 2
    if k > 0:
        with threadpool_limits(1):
            labels = KMeans(n_clusters=k, n_init=10, random_state=int(rng.integers(2**31))).fit(
                x
            ).labels_
        for c in range(k):
            picks.append(int(rng.choice(np.nonzero(labels == c)[0])))
    unit = x / np.linalg.norm(x, axis=1, keepdims=True).clip(min=1e-12)
    mean_sim = unit @ unit.mean(0)  # mean cosine similarity to every candidate
    for bucket in np.array_split(np.argsort(mean_sim, kind="stable"), n - k):
        free = [int(j) for j in bucket if int(j) not in picks]
        picks.append(int(rng.choice(free)))  # one random member per bucket (distinct)
    return [int(candidates[j]) for j in picks]


def select_active(
    space: str, n: int, candidates: np.ndarray, rng, predictor=None, pool: int = 3000, **_
) -> list[int]:
    """Greedy D-optimal design on the meta-learned predictor's adaptation features.

    The head of :class:`hwnas.predictors.meta.MetaPredictor` is a Bayesian linear regression on
    the encoder outputs and cost proxies (log, standardised) and the additive cost features
    (standardised over the space's table). Each pick is the candidate whose prediction is the
    most uncertain under a unit prior given the picks so far (``x' S x`` largest, then ``S``
    updated as after measuring it with unit noise): for a linear model, the picks that shrink
    the posterior's volume fastest (Fedorov, "Theory of Optimal Experiments", 1972).
    Candidates are a random subset of ``pool`` when there are more.

    Raises:
        HwnasError: no meta-learned predictor given.
    """
    from hwnas.predictors.meta import MetaPredictor

    _check(n, candidates)
    if not isinstance(predictor, MetaPredictor):
        raise HwnasError("the active selector needs a meta-learned predictor (an artifact)")
    cand = candidates if len(candidates) <= pool else np.sort(rng.choice(candidates, pool, False))
    archs = predictor.featurizer.space.all_archs()
    phi, f = predictor.space_basis([archs[i] for i in cand])
    x = np.concatenate([np.log(phi), f[:, 1:]], 1)
    sd = x.std(0)
    x = (x[:, sd > 1e-12] - x[:, sd > 1e-12].mean(0)) / sd[sd > 1e-12]
    x = np.concatenate([np.ones((len(x), 1)), x], 1) / np.sqrt(x.shape[1] + 1)
    cov = np.eye(x.shape[1])
    picks: list[int] = []
    for _ in range(n):
        var = np.einsum("ij,jk,ik->i", x, cov, x)
        var[picks] = -np.inf
        j = int(np.argmax(var))
        picks.append(j)
        v = cov @ x[j]
        cov -= np.outer(v, v) / (1.0 + x[j] @ v)
    return [int(cand[j]) for j in picks]


SELECTORS: dict[str, Selector] = {
    "reference": select_reference,
    "random": select_random,
    "nasflat": select_nasflat,
    "active": select_active,
}
"""Selectors by name (see the module docstring)."""


def select(
    name: str,
    space: str,
    n: int,
    candidates: Sequence[int] | None = None,
    rng: np.random.Generator | int | None = None,
    **kwargs,
) -> list[int]:
    """Indices of ``n`` architectures of ``space``'s table to measure on a new device.

    Args:
        name: a selector of :data:`SELECTORS`.
        space: search-space name.
        n: how many.
        candidates: table indices that may be picked (default: every architecture).
        rng: random generator or seed.
        **kwargs: selector options (``predictor`` for ``active``).

    Raises:
        UnknownNameError: unknown selector.
        HwnasError: n out of range.
    """
    if name not in SELECTORS:
        raise UnknownNameError("sample selector", name, list(SELECTORS))
    if candidates is None:
        from hwnas.spaces import get_space

        candidates = np.arange(len(get_space(space).all_archs()))
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    return SELECTORS[name](space, n, np.asarray(candidates, dtype=np.int64), rng, **kwargs)
