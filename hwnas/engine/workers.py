"""Several workers on one study: the study lock and the claims that make them share a budget.

Any number of ``hwnas search`` processes, on one machine or many, may run the same study (same
``--study`` and ``--storage``). They coordinate through the study's storage only:

- **Claims.** A worker that wants to score an architecture first *claims* it: under the study
  lock it reads what changed in the study (:meth:`hwnas.engine.ledger.StudyLedger.refresh`:
  completed trials, and RUNNING trials that carry an ``arch`` attribute, the other workers'
  claims), and records a RUNNING trial with ``arch`` (one write) only if that architecture is
  neither scored nor claimed and the scored + claimed count is below the budget. So no
  architecture is scored twice, and the completed trials never exceed the budget. A table
  lookup needs no claim: it is scored under the lock and recorded complete at once.
- **The study lock** is short (one small read and one write; a worker scoring table lookups
  keeps it up to :data:`hwnas.engine.loop.HOLD_S` and writes those trials together): a file
  lock beside a SQLite database (its workers are on one machine), a PostgreSQL advisory lock
  on the storage's own server (workers anywhere), and a thread lock for an in-memory study
  (one process).
- **Creating a fresh storage** from several workers at once is serialised the same way for
  SQLite; for a server database a worker that loses the race to create Optuna's tables retries.
- **Heartbeats.** A worker records its trial's heartbeat while scoring it; a waiting worker
  fails claims whose heartbeat stopped (a worker that died on another machine), so their
  architectures can be claimed again (:mod:`hwnas.engine.loop`).
"""

from __future__ import annotations

import contextlib
import datetime
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwnas.db import lock_key
from hwnas.paths import file_lock


def sqlite_file(url: str) -> Path | None:
    """The database file of a ``sqlite:///`` URL, or None (in-memory SQLite, other back ends)."""
    if not url.startswith("sqlite"):
        return None
    from sqlalchemy.engine import make_url

    database = make_url(url).database
    if not database or database == ":memory:":
        return None
    return Path(database)


def missing_sqlite_file(url: str) -> bool:
    """Whether ``url`` is a SQLite URL whose database file does not exist (its query,
    ``?timeout=30``, is not part of the file's name): a command that reads studies says so
    instead of creating an empty database."""
    path = sqlite_file(url)
    return path is not None and not path.is_file()


@contextlib.contextmanager
def creation_lock(url: str) -> Iterator[None]:
    """Held while Optuna creates (or checks) its tables in the storage at ``url``: a file lock
    beside a SQLite file; nothing for other back ends (:func:`hwnas.engine.loop.open_storage`
    retries there instead)."""
    path = sqlite_file(url)
    if path is None:
        yield
        return
    with file_lock(path.with_name(path.name + ".hwnas-lock")):
        yield


_LOCAL_LOCKS: dict[str, threading.Lock] = {}

LOCK_BUCKETS = 16
"""Lock files (``<database>.locks/NN.lock``) shared by the studies of one SQLite database."""


@contextlib.contextmanager
def study_lock(storage: Any, study_name: str, long: bool = False) -> Iterator[None]:
    """Exclusive access to ``study_name``'s claims among every worker of the storage.

    Args:
        storage: an Optuna storage (RDB with ``url`` and ``engine``, or in-memory).
        study_name: the study.
        long: the lock is held for long (a supernet's whole training): on SQLite a lock file
            of its own, not one of the :data:`LOCK_BUCKETS` shared ones (unrelated searches
            whose names shared a bucket waited for each other's whole training, told that
            "another worker" trained theirs).

    Raises:
        sqlalchemy.exc.OperationalError: the database server went away while locking.
    """
    storage = getattr(storage, "_backend", storage)  # behind Optuna's cache
    url = str(getattr(storage, "url", ""))
    path = sqlite_file(url)
    if path is not None:
        # a few lock files per database, reused by every study in it (a file per study piled
        # up in the hwnas home): two names sharing a bucket only wait for each other briefly
        key = lock_key(study_name)
        name = f"long-{key & (2**64 - 1):016x}.lock" if long else f"{key % LOCK_BUCKETS:02d}.lock"
        with file_lock(path.with_name(f"{path.name}.locks") / name):
            yield
    elif url.startswith("postgresql"):
        from sqlalchemy import text

        key = lock_key(f"hwnas-study:{study_name}")
        with storage.engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            conn.commit()
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                conn.commit()
    else:  # in-memory (one process) or a back end without advisory locks
        lock = _LOCAL_LOCKS.setdefault(f"{id(storage)}:{study_name}", threading.Lock())
        with lock:
            yield


@dataclass
class StudyState:
    """What every worker of a study has done or is doing, read from the storage.

    Attributes:
        completed: arch string -> trial number of the trial that scored it.
        claimed: arch string -> trial number of a RUNNING trial scoring it now (any worker).
        unrecorded: arch string -> trial number of a FAIL trial that found no value for it
            in the device's table (its ``unrecorded`` attribute): not looked up again, by any
            worker or a resumed run. (A runtime that failed on one is tried again by a later
            run: a crash or a meter's bad reading may pass; a noisy measurement likewise.)
        started: trial number -> (worker id "host:pid", start time) of those trials.
    """

    completed: dict[str, int] = field(default_factory=dict)
    claimed: dict[str, int] = field(default_factory=dict)
    unrecorded: dict[str, int] = field(default_factory=dict)
    started: dict[int, tuple[str, datetime.datetime | None]] = field(default_factory=dict)

    @property
    def taken(self) -> int:
        """Scored plus being scored: what counts against the budget."""
        return len(self.completed) + len(self.claimed)

    def by_another_since(self, number: int, worker: str, moment: datetime.datetime) -> bool:
        """Whether trial ``number`` was started by a worker other than ``worker`` at or after
        ``moment`` (a worker running beside this one, not an earlier run of the study)."""
        who, start = self.started.get(number, ("", None))
        return who != worker and start is not None and start >= moment

    def holder(self, arch: str) -> int | None:
        """The trial that scored or is scoring ``arch``, or None."""
        if arch in self.completed:
            return self.completed[arch]
        return self.claimed.get(arch)

    def update(self, trial: Any, old: Any = None) -> None:
        """Take in ``trial`` (an Optuna FrozenTrial), which was ``old`` when last seen."""
        from optuna.trial import TrialState

        if old is not None:
            arch = old.user_attrs.get("arch")
            if old.state == TrialState.RUNNING and self.claimed.get(arch) == old.number:
                del self.claimed[arch]
        arch = trial.user_attrs.get("arch")
        if (
            arch is not None
            and trial.state == TrialState.FAIL
            and trial.user_attrs.get("unrecorded")
        ):
            self.unrecorded.setdefault(arch, trial.number)
        if arch is None or trial.state not in (TrialState.COMPLETE, TrialState.RUNNING):
            return
        if trial.state == TrialState.COMPLETE:
            self.completed.setdefault(arch, trial.number)
            if self.claimed.get(arch) == trial.number:
                del self.claimed[arch]
        else:
            self.claimed.setdefault(arch, trial.number)
        self.started[trial.number] = (str(trial.user_attrs.get("worker", "")), trial.datetime_start)


def read_state(study, exclude: int | None = None) -> StudyState:
    """The study's :class:`StudyState`, leaving out trial number ``exclude`` (the caller's)."""
    from optuna.trial import TrialState

    state = StudyState()
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
    for t in trials:
        if t.number != exclude:
            state.update(t)
    return state
