"""What the cost-aware table strategies (``frontier``, ``surrogate``) share: an Optuna sampler
that proposes architectures from a pool of candidates whose costs are known before their
accuracy is queried."""

from __future__ import annotations

from typing import Any

import numpy as np
import optuna

from hwnas.cost_record import bound_text
from hwnas.engine.costs import CostContext
from hwnas.engine.seeding import INDEPENDENT, PLAN, POOL, generator
from hwnas.errors import HwnasError
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
        (every architecture of an enumerable space; for a space too large to enumerate, the
        architectures a recorded table prices (``known_archs`` of the cost model: FBNet's and
        OFA's recorded samples), else up to ``max_pool`` distinct samples; their predicted
        costs in the cost model's unit (ms or mJ), shape (n,); a mask, shape (n,), of the
        candidates whose cost is finite and positive).
    """
    tabulated = ability(context.space, TabulatedSpace)
    if tabulated is not None:
        pool = tabulated.all_archs()
    elif (recorded := context.cost.known_archs()) is not None:  # samples would not be in it
        pool = recorded
    else:
        pool = list(dict.fromkeys(context.space.sample(rng, max_pool)))
    cost = np.asarray(context.cost.predict(pool)[0], dtype=float)
    return pool, cost, np.isfinite(cost) & (cost > 0)


def no_candidate(limit: float | None, latency: np.ndarray | None) -> HwnasError:
    """The error of a pool with no candidate to search: none has a known cost or, under a
    latency ``limit`` (ms), none meets it; ``latency`` holds the pool's predicted latencies
    (ms, shape (n,)) and names the fastest."""
    if limit is None or latency is None or not np.isfinite(latency).any():
        return HwnasError("no candidate architecture has a known cost to search on")
    return HwnasError(
        f"no candidate architecture meets --max-latency {limit:g} ms: the fastest of the "
        f"{np.isfinite(latency).sum():,} candidates is predicted at "
        f"{bound_text(float(np.nanmin(latency)))} ms"
    )


class PoolSampler(optuna.samplers.BaseSampler):
    """Base of samplers that propose whole architectures (``sample_relative``) over the space's
    choices from a planned queue of candidate rows.

    The queue is a function of the seed and the sampler's study, re-derived on resume: the
    sampler takes in the study's trials in number order as *slots* (each trial took the slot
    of one proposal). At a slot where the queue, less the candidates already taken, is empty,
    a new round is planned (:meth:`_plan`) from the trials completed before it, with a
    generator seeded from (seed, round) (:mod:`hwnas.engine.seeding`); the trial in the slot
    then takes its candidate off the queue. A fresh sampler on a study of ``n`` trials so ends
    in the state the sampler that proposed them was in, and proposes the same trial ``n``.

    A parameter Optuna asks for outside the choices is drawn from a generator seeded from
    (seed, trial number, parameter).

    Subclasses set ``context`` (and may call :meth:`_start` for the rest), implement
    :meth:`_setup` (sets ``_pool``, the candidate architectures, and ``_row``, arch string ->
    pool row) and :meth:`_plan`.
    """

    context: CostContext
    seed: int | None

    def _start(self, context: CostContext, seed: int | None) -> None:
        self.context = context
        self.seed = seed
        self.shuffle: np.random.Generator | None = None  # see reseed_rng
        self._pool: list[Arch] | None = None
        self._row: dict[str, int] = {}
        self._queue: list[int] = []  # planned pool rows, in order
        self._round = 0  # rounds planned
        self._slots = 0  # trials of the sampler's study taken in
        self._taken: set[int] = set()  # pool rows held by a trial (scored, claimed, failed)
        self._rows: list[int] = []  # pool rows of the completed trials, in trial order
        self._acc: list[float] = []  # their accuracies (%)
        self.exhausted = False  # every candidate of the pool is taken (the engine stops)

    def reseed_rng(self) -> None:
        """Another worker runs with the same seed: take each planned round in random order."""
        self.shuffle = np.random.default_rng()

    def pool_generator(self) -> np.random.Generator:
        """The generator that draws the candidate pool of a space that cannot be enumerated."""
        return generator(self.seed, POOL)

    def _setup(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _plan(
        self, rows: list[int], accuracies: list[float], rng: np.random.Generator
    ) -> list[int]:
        """The next round of pool rows to propose (free rows only: not in ``self._taken``).

        Args:
            rows: pool rows of the completed trials, in trial order.
            accuracies: their accuracies (%).
            rng: this round's generator.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def infer_relative_search_space(self, study, trial) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution

        return {
            d: CategoricalDistribution(list(opts))
            for d, opts in self.context.space.choices().items()
        }

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        if not search_space:
            return {}
        self._catch_up(study, trial.number)
        if not self._queue:  # every candidate is taken: propose a taken one (a duplicate,
            self.exhausted = True  # never an unplanned architecture) and say so
            return (
                self.context.space.to_choices(self._pool[min(self._taken)]) if self._taken else {}
            )
        pick = int(self.shuffle.integers(len(self._queue))) if self.shuffle is not None else 0
        return self.context.space.to_choices(self._pool[self._queue[pick]])

    def has_candidates(self, study: Any) -> bool:
        """Whether the next trial of ``study`` would get a candidate not yet taken: the
        study's trials taken in and the round planned as :meth:`sample_relative` would, so
        the engine stops an exhausted search before asking a trial it could only prune (a
        rerun of a search that had run out added one such trial each time)."""
        self._catch_up(study)
        return bool(self._queue)

    def _catch_up(self, study: Any, upto: int | None = None) -> None:
        """Take in the study's trials before number ``upto`` (all of them: None) not taken in
        yet, then plan the next round if the queue is empty (the pool is drawn first)."""
        if self._pool is None:
            self._setup()
        for t in study.get_trials(deepcopy=False)[self._slots : upto]:
            self._take(t)
        self._fill()

    def _fill(self) -> None:
        """Drop the taken rows from the queue; plan the next round when it is empty."""
        self._queue = [r for r in self._queue if r not in self._taken]
        if not self._queue:
            from threadpoolctl import threadpool_limits

            rng = generator(self.seed, PLAN, self._round)
            # one BLAS thread: a round's model is small matrices, where a thread per core
            # costs more than it computes (a 100-query pixel3 search took 9-11 s, 5 s on one
            # thread, on 2 cores), and the sums are then the same on any machine
            with threadpool_limits(1, user_api="blas"):
                planned = self._plan(self._rows, self._acc, rng)
            self._queue = [r for r in planned if r not in self._taken]
            self._round += bool(self._queue)  # an empty plan (nothing free) is not a round

    def _take(self, trial: Any) -> None:
        """Take in the trial of the next slot (see the class docstring)."""
        from optuna.trial import TrialState

        self._fill()  # the queue this slot's proposal was taken from
        row = self._row.get(self._arch_text(trial))
        if row is not None:
            if row in self._queue:
                self._queue.remove(row)
            self._taken.add(row)
            if trial.state == TrialState.COMPLETE and trial.values:
                self._rows.append(row)
                self._acc.append(float(trial.values[0]))
        self._slots = trial.number + 1

    def _arch_text(self, trial: Any) -> str | None:
        arch = trial.user_attrs.get("arch")
        if arch is not None:
            return arch
        try:  # a trial recorded without one (a duplicate): its choices name it
            return self.context.space.from_choices(trial.params).text
        except Exception:
            return None

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        choices = param_distribution.choices
        rng = generator(self.seed, INDEPENDENT, trial.number, param_name)
        return choices[int(rng.integers(len(choices)))]
