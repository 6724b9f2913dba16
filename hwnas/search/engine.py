"""The search loop: an Optuna multi-objective study (accuracy up, cost down) over a space.

Every completed trial is one accuracy query of a distinct architecture; a proposal that repeats
an architecture already in the study is recorded as a pruned trial (``duplicate_of``) and does
not use budget. The study is the state: re-running the same search loads it and runs only the
trials still missing, and the measurement store keeps every latency taken, so nothing is
measured twice.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import os
import random
import socket
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import CandidateError, HwnasError
from hwnas.measure import NoisyMeasurementError
from hwnas.search.costs import CostContext
from hwnas.search.evaluate import OBJECTIVES, Evaluation
from hwnas.search.pareto import pareto_order
from hwnas.search.strategies import TABLE_STRATEGIES, pipeline_of
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
        if pipeline_of(self.strategy) != "table":  # unknown strategy -> UnknownNameError
            raise HwnasError(
                f"strategy '{self.strategy}' trains a supernet: it runs as a supernet search "
                "(hwnas search --strategy NAME, or hwnas.supernet.run)"
            )
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
    power cut can lose the last commits), and a 300-trial study writes about 3x faster. A bare
    ``postgresql://`` URL uses psycopg 3 (:func:`hwnas.db.normalize_url`). Several workers may
    open a fresh storage at once: table creation is serialised (SQLite) or retried.

    Raises:
        HwnasError: a missing driver (naming ``pip install 'hwnas[postgres]'``), an unreachable
            server or missing database (one line, no password), or a URL that is not an Optuna
            RDB storage.
    """
    import optuna
    import sqlalchemy

    from hwnas.db import check_driver, connect_error, normalize_url, redact
    from hwnas.search.workers import creation_lock, sqlite_file

    shown = redact(url)
    url = normalize_url(url)
    check_driver(url)
    db_file = sqlite_file(url)
    existed = db_file is None or db_file.exists()
    for attempt in range(CREATE_ATTEMPTS):
        try:
            with creation_lock(url), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                storage = optuna.storages.RDBStorage(
                    url,
                    engine_kwargs={"pool_pre_ping": True} if "postgres" in url else None,
                    heartbeat_interval=HEARTBEAT_S,
                    grace_period=GRACE_S,
                )
            break
        except Exception as exc:  # sqlalchemy errors, bad URLs, missing drivers
            # several workers creating Optuna's tables in a fresh server database at once: the
            # losers see "already exists" / unique violations; the tables are there next time
            if attempt + 1 < CREATE_ATTEMPTS and _lost_creation_race(exc):
                time.sleep(0.2 * (attempt + 1) + random.random() * 0.3)
                continue
            if not existed:  # a full disk must not leave an empty database behind
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db_file}{suffix}").unlink(missing_ok=True)
            why = connect_error(url, exc) if "postgres" in url else str(exc).splitlines()[0]
            raise HwnasError(f"cannot open study storage {shown}: {why}") from None
    if url.startswith("sqlite:"):

        def pragmas(dbapi_connection, _record) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        sqlalchemy.event.listen(storage.engine, "connect", pragmas)
        storage.engine.dispose()  # reconnect with the pragmas
    return storage


HEARTBEAT_S = 30
"""Seconds between the heartbeats a worker records for the trial it is scoring."""

FIRST_BEAT_S = 1.0
"""Seconds of scoring before a trial's first heartbeat (quick evaluations record none)."""

GRACE_S = 180
"""A RUNNING trial whose last heartbeat is older than this is failed by any worker (its
worker died, on any machine), so its architecture can be claimed again."""

CREATE_ATTEMPTS = 6
"""Tries at opening a storage whose tables another worker is creating at the same moment."""


def _lost_creation_race(exc: Exception) -> bool:
    text = str(exc).lower()
    return any(
        needle in text
        for needle in ("already exists", "unique", "duplicate key", "alembic_version", "locked")
    )


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


POLL_S = 1.0
"""Seconds a worker waits between looks at the study while other workers finish the budget."""


def check_budget(study, settings: SearchSettings) -> None:
    """Refuse a budget below what the study already holds (a rerun may extend a study, never
    silently report more trials than it was asked for).

    Raises:
        HwnasError: the study has more completed trials than ``settings.budget``.
    """
    from hwnas.search.workers import read_state

    done = len(read_state(study).completed)
    if done > settings.budget:
        raise HwnasError(
            f"study '{settings.study}' already holds {done} scored architectures, more than "
            f"--budget {settings.budget}: rerun with --budget {done} or more to extend it, or "
            "give another --study"
        )


def run_search(
    settings: SearchSettings,
    space: SearchSpace,
    evaluate: Callable[[Arch], Evaluation],
    storage: Any = None,
    on_trial: Callable[[int, TrialRecord | None], None] | None = None,
    sampler_options: dict[str, Any] | None = None,
    costs: CostContext | None = None,
    proposals: Sequence[Arch] | None = None,
) -> SearchResult:
    """Run (or resume, or join) a search until ``settings.budget`` distinct architectures are
    scored in the study.

    With ``proposals`` (the candidates a supernet strategy derived), those architectures are
    scored in order instead of asking the strategy's sampler, and the budget is the study's
    scored architectures plus the proposals it does not hold yet.

    Any number of workers (processes running this function on the same study, on one machine
    or many) share the budget exactly: an architecture is *claimed* before it is scored
    (:mod:`hwnas.search.workers`), so none is scored twice and the study never holds more than
    ``budget`` scored architectures. A worker whose share is done waits for the others' running
    trials, so every worker returns the same, complete result. A rerun with a larger budget
    extends the study; a smaller one than the study holds is refused.

    Args:
        settings: what to search.
        space: the search space.
        evaluate: scores an architecture; must return ``costs[settings.metric]`` and, under a
            latency limit, ``costs["latency_ms"]``. A :class:`~hwnas.errors.CandidateError`
            skips the candidate (a FAIL trial with the reason).
        storage: Optuna storage URL or object; None keeps the study in memory.
        on_trial: called after each trial with (completed count, record or None for a
            duplicate).
        sampler_options: extra keyword arguments for the strategy.
        costs: what is known of candidates' costs before measuring (for cost-aware strategies);
            default: nothing.
        proposals: architectures to score, in order, instead of the strategy's proposals.

    Returns:
        The :class:`SearchResult` over every completed trial of the study.

    Raises:
        HwnasError: storage problems, a study name already used by another search, a budget
            below what the study holds, or 5 candidates in a row that could not be measured.
        KeyboardInterrupt: propagated after the running trial is told (COMPLETE if it was
            scored, FAIL otherwise), so the study is consistent and resumable.
    """
    import optuna
    from optuna.trial import TrialState

    from hwnas.search.workers import read_state, study_lock

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    if isinstance(storage, str):
        storage = open_storage(storage)
    study = load_study(settings, storage, settings.metric)
    _fail_orphans(study)
    limit = settings.max_latency
    if proposals is not None:
        held = set(read_state(study).completed)
        wanted = list(dict.fromkeys(a.text for a in proposals))
        settings = dataclasses.replace(settings, budget=len(held | set(wanted)))
        study.sampler = ProposalSampler(space, [a for a in proposals if a.text in wanted])
    else:
        check_budget(study, settings)
        if costs is None:
            costs = CostContext(space, max_latency=limit, budget=settings.budget)
        study.sampler = TABLE_STRATEGIES.get(settings.strategy)(
            settings.seed, costs, **(sampler_options or {})
        )
    lock_storage = storage if storage is not None else study._storage
    dims = space.choices()
    worker = f"{socket.gethostname()}:{os.getpid()}"
    joined = datetime.datetime.now()
    new = asked = 0
    max_asks = 20 * settings.budget  # bound on duplicate proposals
    skipped = {"noisy": 0, "failed": 0}
    in_a_row = 0
    failed_archs: set[str] = set()  # not proposed again by this run
    reseeded = False
    state = None  # the study as last read; the claim re-reads it under the lock

    while asked < max_asks:
        if state is None:
            state = read_state(study)
        if len(state.completed) >= settings.budget:
            break
        if state.taken >= settings.budget:  # the rest is being scored by other workers
            time.sleep(POLL_S)
            _fail_orphans(study)
            _fail_stale(study)  # a worker that died on another machine
            state = None
            continue
        if proposals is not None and not _proposals_left(study.sampler, state):
            break  # every proposal is scored, being scored, or failed
        with warnings.catch_warnings():  # hwnas records heartbeats itself (_heartbeat)
            warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed")
            trial = study.ask()
        asked += 1
        told = False
        ev: Evaluation | None = None
        try:
            trial.set_user_attr("worker", worker)
            arch = space.from_choices(
                {d: trial.suggest_categorical(d, list(o)) for d, o in dims.items()}
            )
            if arch.text in failed_archs:
                trial.set_user_attr("failed_before", arch.text)
                study.tell(trial, state=TrialState.PRUNED)
                told = True
                continue
            with study_lock(lock_storage, settings.study):
                state = read_state(study, exclude=trial.number)
                holder = state.holder(arch.text)
                full = holder is None and state.taken >= settings.budget
                if holder is None and not full:
                    trial.set_user_attr("arch", arch.text)  # the claim
            if holder is not None:
                trial.set_user_attr("duplicate_of", holder)
                study.tell(trial, state=TrialState.PRUNED)
                told = True
                if not reseeded and state.by_another_since(holder, worker, joined):
                    # another worker started with the same seed: draw from another sequence
                    study.sampler.reseed_rng()
                    reseeded = True
                if on_trial:
                    on_trial(len(state.completed), None)
                continue
            if full:
                trial.set_user_attr("budget_reached", True)
                study.tell(trial, state=TrialState.PRUNED)
                told = True
                continue
            with _heartbeat(study, trial):
                ev = evaluate(arch)
            for key, value in ev.attrs().items():
                trial.set_user_attr(key, value)
            values = [ev.accuracy, ev.costs[settings.metric]]
            if limit is not None:  # feasible when <= 0 (constrained domination)
                trial.set_constraint("latency_over_limit_ms", ev.costs["latency_ms"] - limit)
            study.tell(trial, values)
            told = True
        except CandidateError as exc:
            # one candidate that cannot be measured (too noisy, rejected or crashed the
            # runtime) must not end a long search: record why, skip it and go on
            reason = "noisy" if isinstance(exc, NoisyMeasurementError) else "failed"
            trial.set_user_attr(reason, str(exc))
            study.tell(trial, state=TrialState.FAIL)
            told = True
            skipped[reason] += 1
            in_a_row += 1
            if reason == "failed":
                failed_archs.add(arch.text)
            if in_a_row >= MAX_NOISY_IN_A_ROW:
                raise HwnasError(
                    f"{in_a_row} candidates in a row could not be measured; last: {exc}"
                ) from None
            continue
        finally:
            if not told:  # interrupted (Ctrl-C) or a bug: never leave the trial RUNNING
                _tell_interrupted(study, trial, ev, settings)
        state.completed[arch.text] = trial.number  # this worker's own progress, without a read
        in_a_row = 0
        new += 1
        if on_trial:
            on_trial(
                len(state.completed),
                TrialRecord(trial.number, arch.text, ev.accuracy, ev.costs, ev.attrs()),
            )

    records = completed_records(study)
    result = summarise(settings, records, len(study.get_trials(deepcopy=False)), new)
    return dataclasses.replace(
        result, noisy_skipped=skipped["noisy"], failed_skipped=skipped["failed"]
    )


@contextlib.contextmanager
def _heartbeat(study, trial):
    """Record the trial's heartbeat every :data:`HEARTBEAT_S` seconds while it is scored (RDB
    storages; nothing for an in-memory study). The first beat waits :data:`FIRST_BEAT_S`, so a
    table lookup (milliseconds) writes nothing; a measurement or a training run is covered."""
    from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled

    storage = study._storage
    if not isinstance(storage, BaseHeartbeat) or not is_heartbeat_enabled(storage):
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        if stop.wait(FIRST_BEAT_S):
            return
        while not stop.is_set():
            try:
                storage.record_heartbeat(trial._trial_id)
            except Exception:  # the storage is briefly unreachable: the next beat retries
                pass
            stop.wait(storage.get_heartbeat_interval())

    thread = threading.Thread(target=beat, name="hwnas-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def _fail_stale(study) -> None:
    """Fail RUNNING trials whose heartbeat stopped (their worker died, on any machine)."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # fail_stale_trials is experimental
        optuna.storages.fail_stale_trials(study)


class ProposalSampler:
    """An Optuna sampler that proposes given architectures in order (each once, skipping those
    the study holds or another worker claimed), for strategies that derive their candidates
    themselves (supernets)."""

    def __init__(self, space: SearchSpace, archs: Sequence[Arch]):
        import optuna

        self._base = optuna.samplers.RandomSampler(seed=0)  # never decides: every value is fixed
        self.space = space
        self.queue = list(archs)
        self._last = self.queue[0] if self.queue else None

    def infer_relative_search_space(self, study, trial) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution

        return {d: CategoricalDistribution(list(o)) for d, o in self.space.choices().items()}

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        taken = {t.user_attrs.get("arch") for t in study.get_trials(deepcopy=False)}
        while self.queue:
            self._last = self.queue.pop(0)
            if self._last.text not in taken:
                break
        # with nothing new left (another worker took it meanwhile) the last proposal is asked
        # again: the engine records it as a duplicate and stops
        return self.space.to_choices(self._last) if self._last is not None else {}

    def sample_independent(self, study, trial, param_name, param_distribution) -> Any:
        return self._base.sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial) -> None:
        return None

    def after_trial(self, study, trial, state, values) -> None:
        return None

    def reseed_rng(self) -> None:
        return None


def _proposals_left(sampler: ProposalSampler, state: Any) -> bool:
    taken = set(state.completed) | set(state.claimed)
    return any(a.text not in taken for a in sampler.queue)


def _tell_interrupted(study, trial, ev: Evaluation | None, settings: SearchSettings) -> None:
    """Tell a trial whose loop iteration was interrupted: COMPLETE when it was scored (the
    evaluation is not lost), FAIL otherwise."""
    from optuna.trial import TrialState

    try:
        if ev is not None and settings.metric in ev.costs:
            for key, value in ev.attrs().items():
                trial.set_user_attr(key, value)
            study.tell(trial, [ev.accuracy, ev.costs[settings.metric]])
        else:
            study.tell(trial, state=TrialState.FAIL)
    except Exception:  # already told, or the storage is gone: the rerun fails it as an orphan
        pass


def summarise(
    settings: SearchSettings, records: list[TrialRecord], trials_total: int, new_trials: int
) -> SearchResult:
    """Pareto set and best architecture of the completed trials."""
    limit = settings.max_latency
    feasible = [r for r in records if limit is None or r.costs["latency_ms"] <= limit]
    acc = np.array([r.accuracy for r in feasible])
    cost = np.array([r.costs[settings.metric] for r in feasible])
    front = [feasible[i] for i in pareto_order(acc, cost)]
    best = max(feasible, key=lambda r: (r.accuracy, -r.costs[settings.metric]), default=None)
    return SearchResult(settings, records, front, best, trials_total, new_trials)
