"""The search loop: an Optuna multi-objective study (accuracy up, cost down) over a space.

Every completed trial is one accuracy query of a distinct architecture; a proposal that repeats
an architecture already in the study is recorded as a pruned trial (``duplicate_of``) and does
not use budget. The study is the state: re-running the same search loads it and runs only the
trials still missing, and the measurement store keeps every latency taken, so nothing is
measured twice.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwnas.errors import CandidateError, HwnasError
from hwnas.measure import NoisyMeasurementError
from hwnas.search.costs import CostContext
from hwnas.search.evaluate import OBJECTIVES, Evaluation
from hwnas.search.pareto import pareto_mask
from hwnas.search.strategies import STRATEGIES
from hwnas.spaces.base import Arch, SearchSpace


@dataclass
class SearchSettings:
    """What to search for.

    Attributes:
        space: search-space name.
        device: device name.
        dataset: dataset whose accuracy is maximised.
        objective: "latency" (ms) or "energy" (mJ), minimised.
        budget: number of distinct architectures whose accuracy is queried (completed trials).
        strategy: strategy name ("nsga2", "random").
        seed: sampler seed.
        max_latency: latency limit in ms, or None.
        study: Optuna study name.
        runtime: runtime replacing the device profile's ("ort", "tvm"), or None.
    """

    space: str
    device: str
    dataset: str = "cifar100"
    objective: str = "latency"
    budget: int = 300
    strategy: str = "nsga2"
    seed: int = 0
    max_latency: float | None = None
    study: str = ""
    runtime: str | None = None

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise HwnasError(
                f"unknown objective '{self.objective}'; known: {', '.join(OBJECTIVES)}"
            )
        if self.budget < 1:
            raise HwnasError(f"--budget must be at least 1, got {self.budget}")
        if self.max_latency is not None and not self.max_latency > 0:
            raise HwnasError(
                f"--max-latency must be a positive number of ms, got {self.max_latency}"
            )
        STRATEGIES.get(self.strategy)  # unknown strategy -> UnknownNameError
        if not self.study:
            self.study = default_study_name(self)

    @property
    def metric(self) -> str:
        """The device metric minimised ("latency_ms" or "energy_mj")."""
        return OBJECTIVES[self.objective]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def default_study_name(s: SearchSettings) -> str:
    """A study name that is the same for the same search, so re-running it resumes."""
    limit = f"-max{s.max_latency:g}ms" if s.max_latency is not None else ""
    device = f"{s.device}-{s.runtime}" if s.runtime else s.device
    return f"{s.space}-{s.dataset}-{device}-{s.objective}{limit}-{s.strategy}-seed{s.seed}"


@dataclass
class TrialRecord:
    """One completed trial: the architecture, its scores and their sources."""

    number: int
    arch: str
    accuracy: float
    costs: dict[str, float]
    attrs: dict[str, Any] = field(default_factory=dict)


MAX_NOISY_IN_A_ROW = 5
"""A search stops (exit 2) after this many consecutive candidates could not be measured (too
noisy, or the runtime failed on them): the machine is too busy for timing to mean anything, or
the runtime is broken for every model."""


@dataclass
class SearchResult:
    """What a search produced.

    Attributes:
        settings: the search settings.
        records: every completed trial (distinct architectures), in trial order.
        pareto: the Pareto-optimal records (feasible ones only under a latency limit), by cost.
        best: the most accurate feasible record (None if no trial meets the limit).
        trials_total: all trials in the study (completed, duplicates, failed).
        new_trials: trials completed by this run (0 when resuming a finished study).
        noisy_skipped: candidates this run skipped because their measurement stayed too noisy
            (stored flagged; a later run measures them again).
        failed_skipped: candidates this run skipped because measuring them failed (the
            runtime rejected the model or crashed on it); their trials are FAIL with the reason
            in the ``failed`` attribute.
    """

    settings: SearchSettings
    records: list[TrialRecord]
    pareto: list[TrialRecord]
    best: TrialRecord | None
    trials_total: int
    new_trials: int
    noisy_skipped: int = 0
    failed_skipped: int = 0


def open_storage(url: str):
    """An Optuna RDB storage for ``url``; SQLite files get WAL and relaxed fsync.

    With WAL and ``synchronous=NORMAL`` a committed trial survives a killed process (only a
    power cut can lose the last commits), and a 300-trial study writes about 3x faster.

    Raises:
        HwnasError: the URL is not a reachable Optuna RDB storage.
    """
    import optuna
    import sqlalchemy

    try:
        storage = optuna.storages.RDBStorage(url)
    except Exception as exc:  # sqlalchemy errors, bad URLs, missing drivers
        raise HwnasError(f"cannot open study storage {url}: {str(exc).splitlines()[0]}") from None
    if url.startswith("sqlite:"):

        def pragmas(dbapi_connection, _record) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        sqlalchemy.event.listen(storage.engine, "connect", pragmas)
        storage.engine.dispose()  # reconnect with the pragmas
    return storage


def load_study(settings: SearchSettings, storage: Any, directions_metric: str):
    """Create or load the study (``load_if_exists``), checking it belongs to this search.

    Raises:
        HwnasError: the storage is unreachable, or the study name is used by another search.
    """
    import optuna

    if isinstance(storage, str):
        storage = open_storage(storage)
    try:
        study = optuna.create_study(
            study_name=settings.study,
            storage=storage,
            directions=["maximize", "minimize"],
            load_if_exists=True,
        )
    except Exception as exc:  # sqlalchemy / optuna storage errors
        raise HwnasError(f"cannot open study storage: {str(exc).splitlines()[0]}") from None
    saved = study.user_attrs.get("settings")
    mine = {k: v for k, v in settings.as_dict().items() if k != "budget"}
    if saved is None:
        study.set_user_attr("settings", mine)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # set_metric_names is experimental
            study.set_metric_names(["accuracy_pct", directions_metric])
    elif {k: v for k, v in saved.items() if k != "budget"} != mine:
        raise HwnasError(
            f"study '{settings.study}' in this storage was made by a different search "
            f"({saved}); pick another --study name"
        )
    return study


def _fail_orphans(study) -> None:
    """Mark RUNNING trials left by a killed process of this host as FAIL."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        worker = t.user_attrs.get("worker", "")
        h, _, pid = worker.partition(":")
        if h == host and pid.isdigit() and not _alive(int(pid)):
            study._storage.set_trial_state_values(t._trial_id, TrialState.FAIL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def completed_records(study) -> list[TrialRecord]:
    """Completed trials of a study as records (in trial-number order)."""
    from optuna.trial import TrialState

    out = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        costs = {m: t.user_attrs[m] for m in OBJECTIVES.values() if m in t.user_attrs}
        out.append(
            TrialRecord(t.number, t.user_attrs["arch"], t.values[0], costs, dict(t.user_attrs))
        )
    return out


def run_search(
    settings: SearchSettings,
    space: SearchSpace,
    evaluate: Callable[[Arch], Evaluation],
    storage: Any = None,
    on_trial: Callable[[int, TrialRecord | None], None] | None = None,
    sampler_options: dict[str, Any] | None = None,
    costs: CostContext | None = None,
) -> SearchResult:
    """Run (or resume) a search until ``settings.budget`` distinct architectures are scored.

    Args:
        settings: what to search.
        space: the search space.
        evaluate: scores an architecture; must return ``costs[settings.metric]`` and, under a
            latency limit, ``costs["latency_ms"]``.
        storage: Optuna storage URL or object; None keeps the study in memory.
        on_trial: called after each trial with (completed count, record or None for a
            duplicate).
        sampler_options: extra keyword arguments for the strategy.
        costs: what is known of candidates' costs before measuring (for cost-aware strategies);
            default: nothing.

    Returns:
        The :class:`SearchResult` over every completed trial of the study.

    Raises:
        HwnasError: storage problems, or a study name already used by another search.
        KeyboardInterrupt: propagated after the study is left consistent (resumable).
    """
    import optuna
    from optuna.trial import TrialState

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = load_study(settings, storage, settings.metric)
    _fail_orphans(study)
    limit = settings.max_latency
    if costs is None:
        costs = CostContext(space, max_latency=limit, budget=settings.budget)
    study.sampler = STRATEGIES.get(settings.strategy)(
        settings.seed, costs, **(sampler_options or {})
    )
    seen = {r.arch: r.number for r in completed_records(study)}
    done = len(seen)
    dims = space.choices()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    new = 0
    asked = 0
    max_asks = 20 * settings.budget  # bound on duplicate proposals
    skipped = {"noisy": 0, "failed": 0}
    in_a_row = 0
    failed_archs: set[str] = set()  # not proposed again by this run

    while done < settings.budget and asked < max_asks:
        trial = study.ask()
        asked += 1
        trial.set_user_attr("worker", worker)
        arch = space.from_choices(
            {d: trial.suggest_categorical(d, list(o)) for d, o in dims.items()}
        )
        if arch.text in failed_archs:
            trial.set_user_attr("arch", arch.text)
            trial.set_user_attr("failed_before", True)
            study.tell(trial, state=TrialState.PRUNED)
            continue
        if arch.text in seen:
            trial.set_user_attr("duplicate_of", seen[arch.text])
            study.tell(trial, state=TrialState.PRUNED)
            if on_trial:
                on_trial(done, None)
            continue
        try:
            ev = evaluate(arch)
            for key, value in ev.attrs().items():
                trial.set_user_attr(key, value)
            values = [ev.accuracy, ev.costs[settings.metric]]
            if limit is not None:  # feasible when <= 0 (constrained domination)
                trial.set_constraint("latency_over_limit_ms", ev.costs["latency_ms"] - limit)
        except CandidateError as exc:
            # one candidate that cannot be measured (too noisy, rejected or crashed the
            # runtime) must not end a long search: record why, skip it and go on
            reason = "noisy" if isinstance(exc, NoisyMeasurementError) else "failed"
            trial.set_user_attr("arch", arch.text)
            trial.set_user_attr(reason, str(exc))
            study.tell(trial, state=TrialState.FAIL)
            skipped[reason] += 1
            in_a_row += 1
            if reason == "failed":
                failed_archs.add(arch.text)
            if in_a_row >= MAX_NOISY_IN_A_ROW:
                raise HwnasError(
                    f"{in_a_row} candidates in a row could not be measured; last: {exc}"
                ) from None
            continue
        except BaseException:
            study.tell(trial, state=TrialState.FAIL)
            raise
        study.tell(trial, values)
        in_a_row = 0
        seen[arch.text] = trial.number
        done += 1
        new += 1
        if on_trial:
            on_trial(done, TrialRecord(trial.number, arch.text, ev.accuracy, ev.costs, ev.attrs()))

    records = completed_records(study)
    result = summarise(settings, records, len(study.get_trials(deepcopy=False)), new)
    return dataclasses.replace(
        result, noisy_skipped=skipped["noisy"], failed_skipped=skipped["failed"]
    )


def summarise(
    settings: SearchSettings, records: list[TrialRecord], trials_total: int, new_trials: int
) -> SearchResult:
    """Pareto set and best architecture of the completed trials."""
    limit = settings.max_latency
    feasible = [r for r in records if limit is None or r.costs["latency_ms"] <= limit]
    acc = np.array([r.accuracy for r in feasible])
    cost = np.array([r.costs[settings.metric] for r in feasible])
    mask = pareto_mask(acc, cost)
    front = sorted((r for r, m in zip(feasible, mask) if m), key=lambda r: r.costs[settings.metric])
    best = max(feasible, key=lambda r: (r.accuracy, -r.costs[settings.metric]), default=None)
    return SearchResult(settings, records, front, best, trials_total, new_trials)
