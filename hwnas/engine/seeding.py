"""Randomness a resumed search can re-derive: every draw of a table strategy is a function of
the search's seed and of where it is drawn (a trial number, a planning round), never of how
many draws one process happened to make before.

A search killed at any moment and run again must end with the study and the Pareto front of
the uninterrupted search (``docs/robustness.md``). Its strategy's sampler runs on an in-memory
Optuna study that the engine rebuilds from the stored study on resume
(:func:`hwnas.engine.loop.run_search`), so a sampler whose decision for trial ``n`` depends
only on (seed, the trials before ``n``) decides the same after a restart. Optuna's samplers
keep one random generator for their whole life instead; :class:`TrialSeeded` gives each trial a
fresh sampler seeded from (seed, trial number), and the cost-aware samplers
(:mod:`hwnas.engine.pool`) and aging evolution draw from :func:`generator` the same way.

With several workers on one study each worker's sampler sees the others' trials in the order
they finish, which no seed fixes: there the guarantee is that no architecture is lost or scored
twice (:mod:`hwnas.engine.workers`), not that the result is reproducible.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import optuna

POOL, PLAN, INDEPENDENT, SELECTION, TRIAL, CANDIDATE = range(6)
"""Streams: the candidate pool of a space that cannot be enumerated, a planning round, a choice
drawn outside the relative search space, NSGA-III's selection of survivors, a trial's sampler,
a candidate scored by the user's accuracy function (:func:`seeded_globals`)."""


@contextlib.contextmanager
def seeded_globals(seed: int) -> Iterator[None]:
    """Inside, torch's, NumPy's and Python's global generators are seeded with ``seed``; after,
    they are as they were. A network built and scored there (a fresh network's initial
    weights, a user's accuracy function that trains or samples) draws the same in every
    process, however many networks that process built before: a resumed search or another
    worker scores a candidate as the uninterrupted search did."""
    import random

    import torch

    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        np.random.seed(seed & 0xFFFFFFFF)
        random.seed(seed)
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def derive_seed(seed: int | None, *where: int | str) -> int | None:
    """A 32-bit seed for the draw at ``where`` (ints, or strings hashed with CRC-32) of a
    search seeded ``seed``; None (fresh entropy) when ``seed`` is None."""
    if seed is None:
        return None
    words = [int(seed) & 0xFFFFFFFFFFFFFFFF]
    words += [zlib.crc32(w.encode()) if isinstance(w, str) else int(w) for w in where]
    return int(np.random.SeedSequence(words).generate_state(1)[0])


def generator(seed: int | None, *where: int | str) -> np.random.Generator:
    """A NumPy generator for the draw at ``where`` (see :func:`derive_seed`)."""
    return np.random.default_rng(derive_seed(seed, *where))


class TrialSeeded(optuna.samplers.BaseSampler):
    """An Optuna sampler made afresh for every trial, seeded from (seed, trial number).

    Every sampler of Optuna that hwnas offers by name (NSGA-II, NSGA-III, TPE, GP, random)
    keeps its state in the study (trials, their system attributes, the study's system
    attributes) apart from its random generator and caches that only speed it up; a new
    instance per trial, seeded from the trial's number, makes its proposal for trial ``n`` a
    function of the seed and the study's trials before ``n``, as a resumed search needs.

    Args:
        make: builds the sampler from a seed (an int, or None for fresh entropy).
        seed: the search's seed; None: not reproducible.
    """

    def __init__(self, make: Callable[[int | None], Any], seed: int | None):
        self.make = make
        self.seed = seed
        self._salt: int | None = None
        self._by_trial: dict[int, Any] = {}
        self._template = make(seed)

    def _sampler(self, trial: Any) -> Any:
        sampler = self._by_trial.get(trial.number)
        if sampler is None:
            seed = self.seed if self._salt is None else self._salt
            sampler = self.make(derive_seed(seed, TRIAL, trial.number))
            self._by_trial = {trial.number: sampler}  # earlier trials are told by now
        return sampler

    @property
    def inner(self) -> Any:
        """A sampler of the wrapped kind (for its type and settings)."""
        return self._template

    def reseed_rng(self) -> None:
        """Another worker shares the seed: draw from fresh entropy from now on."""
        self._salt = int(np.random.SeedSequence().generate_state(1)[0])
        self._by_trial.clear()

    def infer_relative_search_space(self, study, trial) -> dict[str, Any]:
        return self._sampler(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        return self._sampler(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        return self._sampler(trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial) -> None:
        self._sampler(trial).before_trial(study, trial)

    def after_trial(self, study, trial, state, values) -> None:
        self._sampler(trial).after_trial(study, trial, state, values)


def reproducible_ga(cls: type) -> type:
    """A subclass of an Optuna genetic sampler class (``NSGAIISampler``, ``NSGAIIISampler``)
    whose parents of a generation do not depend on when they are chosen.

    Optuna chooses a generation's parents at its first trial and caches them in the study it
    runs on; a resumed search chooses them again at another trial. The subclass returns them in
    trial order (the order a read from the cache gives, where the first choice gives them
    ranked) and draws NSGA-III's tie-breaks between niches from a generator seeded with (seed,
    generation), so the computed and the cached parents are the same list.

    The subclass keeps its base's study attribute names (``NSGAIISampler:generation``...), so
    studies written by the plain sampler resume with it and the other way round.

    Args:
        cls: the Optuna sampler class.

    Returns:
        The subclass; its constructor takes the base's arguments.
    """

    class Reproducible(cls):  # type: ignore[misc, valid-type]
        def select_parent(self, study, generation):
            rng = self._rng.rng
            saved = rng.get_state()
            seed = getattr(self, "_selection_seed", None)
            rng.seed(derive_seed(seed, SELECTION, generation))
            try:
                parents = super().select_parent(study, generation)
            finally:
                rng.set_state(saved)
            return sorted(parents, key=lambda t: t.number)

    Reproducible.__name__ = Reproducible.__qualname__ = cls.__name__
    Reproducible._GENERATION_KEY = cls._GENERATION_KEY
    Reproducible._PARENT_CACHE_KEY_PREFIX = cls._PARENT_CACHE_KEY_PREFIX
    return Reproducible


def genetic(cls: type, seed: int | None, trial_seed: int | None, **options: Any) -> Any:
    """An instance of :func:`reproducible_ga` of ``cls`` for one trial: its own draws seeded
    with ``trial_seed``, its choice of parents with the search's ``seed``."""
    sampler = _REPRODUCIBLE.setdefault(cls, reproducible_ga(cls))(seed=trial_seed, **options)
    sampler._selection_seed = seed
    return sampler


_REPRODUCIBLE: dict[type, type] = {}
