"""The study as one worker knows it: every trial of the storage, read once and then only what
changed, and the writes that record a trial in one transaction.

A search keeps two studies. Its strategy's sampler runs on an in-memory Optuna study (fast asks,
as in a plain Optuna loop); the *ledger* is the durable, shared record in the study storage
(``--storage``) that other workers, a resumed run and the dashboard read. The engine copies
each decided trial into the ledger, and the other workers' finished trials from the ledger
into the sampler's study.

- :class:`StudyLedger` works on any Optuna storage through its public API (in-memory for
  experiments and tests, the journal backend, or an RDB storage where speed does not matter).
- :class:`RdbLedger` is the same for Optuna's RDB storages (SQLite, PostgreSQL), hwnas's
  default: it looks for changes with one small query on the ``trials`` table and writes a
  whole trial (row, parameters, values, attributes) in one transaction through SQLAlchemy
  Core on Optuna's own table definitions (``optuna.storages._rdb.models``), instead of the
  ORM's one transaction per attribute and a re-read of every unfinished trial per call. What
  it writes is what Optuna itself writes: any Optuna client, ``optuna.load_study`` and
  optuna-dashboard read it as usual (``tests/engine/test_ledger.py`` checks this against the
  installed Optuna).

Every worker's writes to one study go through :meth:`StudyLedger.lock`
(:func:`hwnas.engine.workers.study_lock`), so a worker holding the lock and having called
:meth:`StudyLedger.refresh` sees every claim and score of the others.
"""

from __future__ import annotations

import contextlib
import datetime
import json
from collections.abc import Iterator, Sequence
from typing import Any

from hwnas.engine.workers import StudyState, study_lock


def _utc(value: datetime.datetime | None) -> datetime.datetime | None:
    """Naive local time (Optuna's FrozenTrial convention) -> naive UTC (its RDB columns)."""
    if value is None:
        return None
    return value.astimezone(datetime.timezone.utc).replace(tzinfo=None)


def make_trial(
    state: Any,
    values: Sequence[float] | None,
    params: dict[str, Any],
    distributions: dict[str, Any],
    user_attrs: dict[str, Any],
    system_attrs: dict[str, Any] | None = None,
    started: datetime.datetime | None = None,
) -> Any:
    """A :class:`optuna.trial.FrozenTrial` to record (number and id are set when written).

    Args:
        state: its ``TrialState``.
        values: objective values (accuracy %, cost) for a COMPLETE trial, else None.
        params: choice name -> value.
        distributions: choice name -> Optuna distribution.
        user_attrs: attributes shown by the dashboard and read by reports.
        system_attrs: the sampler's attributes (NSGA-II generation, constraints).
        started: start time (naive local); default now.
    """
    from optuna.trial import FrozenTrial

    now = datetime.datetime.now()
    return FrozenTrial(
        number=-1,
        state=state,
        value=None,
        values=list(values) if values is not None else None,
        datetime_start=started or now,
        datetime_complete=now if state.is_finished() else None,
        params=dict(params),
        distributions=dict(distributions),
        user_attrs=dict(user_attrs),
        system_attrs=dict(system_attrs or {}),
        intermediate_values={},
        trial_id=-1,
    )


def edited_study(study_name: str, what: str) -> Exception:
    """The one-line error for a study holding a trial hwnas did not write as it is (a
    database edited, damaged, or handed over with one): ``what`` says which and how."""
    from hwnas.errors import HwnasError

    return HwnasError(
        f"study '{study_name}' holds a trial hwnas cannot read ({what[:300]}): the database was "
        "edited or is damaged; search it as a new study (--study NAME) or delete this one"
    )


class StudyLedger:
    """Every trial of one study in a storage, as this worker last read it.

    Args:
        storage: an Optuna storage (RDB, in-memory, journal).
        study_id: the study's id in that storage.
        study_name: the study's name (names its lock).

    Attributes:
        trials: trial id -> :class:`optuna.trial.FrozenTrial`, every trial read or written.
        state: claims and scores (:class:`hwnas.engine.workers.StudyState`), kept up to date.
    """

    def __init__(self, storage: Any, study_id: int, study_name: str):
        self.storage = storage
        self.study_id = study_id
        self.study_name = study_name
        self.trials: dict[int, Any] = {}
        self.state = StudyState()
        self._mine: set[int] = set()  # trial ids this worker wrote (never fed back to it)

    # -- reading --------------------------------------------------------------------------

    def load(self) -> list[Any]:
        """Read the whole study once; returns its finished trials (for the sampler's study).

        Raises:
            HwnasError: a trial Optuna cannot read back (:func:`edited_study`)."""
        self.trials.clear()
        self.state = StudyState()
        return self._merge(self._read())

    def refresh(self) -> list[Any]:
        """Read what changed since the last read (other workers' claims and scores).

        Returns:
            The trials of other workers (or of earlier runs) that finished since the last
            read, in number order, for the sampler's study.
        """
        return self._merge(self._read())

    def _read(self) -> list[Any]:
        try:
            return self.storage.get_all_trials(self.study_id, deepcopy=False)
        except (KeyError, IndexError, TypeError, ValueError) as exc:  # JSON, distributions
            raise edited_study(self.study_name, f"{type(exc).__name__}: {exc}") from None

    def _merge(self, trials: Sequence[Any]) -> list[Any]:
        finished = []
        for t in trials:
            old = self.trials.get(t._trial_id)
            if old is not None and (
                old is t or (old.state == t.state and old.user_attrs == t.user_attrs)
            ):
                continue
            self._put(t)
            newly = old is None or not old.state.is_finished()
            if t.state.is_finished() and newly and t._trial_id not in self._mine:
                finished.append(t)
        return sorted(finished, key=lambda t: t.number)

    def _put(self, trial: Any) -> None:
        old = self.trials.get(trial._trial_id)
        self.trials[trial._trial_id] = trial
        self.state.update(trial, old)

    def by_number(self) -> list[Any]:
        """Every trial, in number order."""
        return sorted(self.trials.values(), key=lambda t: t.number)

    def completed(self) -> list[Any]:
        """The COMPLETE trials, in number order."""
        from optuna.trial import TrialState

        return [t for t in self.by_number() if t.state == TrialState.COMPLETE]

    # -- writing --------------------------------------------------------------------------

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """The study lock: claims and scores of every worker are decided and written under it;
        deferred writes (:meth:`add`) are written before it is released."""
        with study_lock(self.storage, self.study_name):
            try:
                yield
            finally:
                self.flush()

    def add(self, trial: Any, defer: bool = False) -> Any:
        """Record ``trial`` (from :func:`make_trial`) as a new trial of the study, under
        :meth:`lock` and after :meth:`refresh`.

        Args:
            trial: the trial to record.
            defer: write it with the next :meth:`flush` (at the latest when the lock is
                released), in one transaction with the other deferred trials; it is in
                :attr:`trials` and :attr:`state` at once, with its number.

        Returns:
            The trial as recorded (its ``number`` set; ``_trial_id`` once written).
        """
        trial_id = self.storage.create_new_trial(self.study_id, template_trial=trial)
        return self._written(trial, trial_id, self.storage.get_trial(trial_id).number)

    def flush(self) -> None:
        """Write the deferred trials (nothing to do for storages written at once)."""

    def _written(self, trial: Any, trial_id: int, number: int) -> Any:
        trial.number = number
        trial._trial_id = trial_id
        self._mine.add(trial_id)
        self._put(trial)
        return trial

    def finish(
        self,
        trial_id: int,
        state: Any,
        values: Sequence[float] | None,
        user_attrs: dict[str, Any],
        system_attrs: dict[str, Any] | None = None,
    ) -> Any | None:
        """Finish this worker's RUNNING trial ``trial_id`` (a claim), adding attributes.

        Returns:
            The finished trial, or None when it was no longer RUNNING (another worker failed
            it as stale): the caller records the result as a new trial instead.
        """
        from optuna.exceptions import UpdateFinishedTrialError

        old = self.trials[trial_id]
        try:
            for key, value in (system_attrs or {}).items():
                self.storage.set_trial_system_attr(trial_id, key, value)
            for key, value in user_attrs.items():
                if old.user_attrs.get(key, _MISSING) != value:
                    self.storage.set_trial_user_attr(trial_id, key, value)
            if not self.storage.set_trial_state_values(trial_id, state, values):
                return None
        except UpdateFinishedTrialError:
            return None
        trial = self.storage.get_trial(trial_id)
        self._put(trial)
        return trial

    def fail(self, trial_id: int) -> None:
        """Mark a RUNNING trial FAIL (its worker died)."""
        from optuna.trial import TrialState

        try:
            self.storage.set_trial_state_values(trial_id, TrialState.FAIL)
        except Exception:  # already finished by someone else: the next read shows it
            pass

    def heartbeat(self, trial_id: int) -> None:
        """Record that this worker is still scoring ``trial_id`` (RDB storages)."""
        self.storage.record_heartbeat(trial_id)

    def silent(self) -> list[int]:
        """Ids of the study's RUNNING trials that have never had a heartbeat (a live worker's
        first beat comes a second into its claim; a worker that died before it, or a
        database handed over, leaves such a claim: Optuna's stale check sees only trials that
        have beaten). None here: a storage without heartbeats."""
        return []

    @property
    def beats(self) -> bool:
        """Whether the storage keeps heartbeats (an RDB storage with an interval)."""
        from optuna.storages._heartbeat import BaseHeartbeat, is_heartbeat_enabled

        return isinstance(self.storage, BaseHeartbeat) and is_heartbeat_enabled(self.storage)


_MISSING = object()


class RdbLedger(StudyLedger):
    """:class:`StudyLedger` for an Optuna ``RDBStorage``: one small query to look for changes,
    one transaction per trial written (the schema of the installed Optuna, 5.x)."""

    def __init__(self, storage: Any, study_id: int, study_name: str):
        super().__init__(storage, study_id, study_name)
        from optuna.storages._rdb import models

        self._models = models
        self._last_id = 0  # highest trial id read or written
        self._pending: list[int] = []  # provisional keys of deferred trials, in order

    def load(self) -> list[Any]:
        finished = super().load()
        self._last_id = max(self.trials, default=0)
        return finished

    def refresh(self) -> list[Any]:
        from optuna.trial import TrialState
        from sqlalchemy import or_, select

        t = self._models.TrialModel.__table__
        running = [i for i, tr in self.trials.items() if tr.state == TrialState.RUNNING]
        query = select(t.c.trial_id, t.c.state).where(
            t.c.study_id == self.study_id,
            or_(t.c.trial_id > self._last_id, t.c.state == TrialState.RUNNING),
        )
        with self.storage.engine.connect() as conn:
            rows = conn.execute(query).all()
        seen = {trial_id: state for trial_id, state in rows}
        changed = [i for i, s in seen.items() if i not in self.trials or self.trials[i].state != s]
        changed += [i for i in running if i not in seen]  # no longer RUNNING
        if not changed:
            return []
        fresh = [self.storage.get_trial(i) for i in sorted(set(changed))]
        self._last_id = max(self._last_id, *(tr._trial_id for tr in fresh))
        return self._merge(fresh)

    def silent(self) -> list[int]:
        from optuna.trial import TrialState
        from sqlalchemy import select

        if not self.beats:  # no worker records heartbeats here: silence means nothing
            return []

        t = self._models.TrialModel.__table__
        b = self._models.TrialHeartbeatModel.__table__
        query = (
            select(t.c.trial_id)
            .select_from(t.outerjoin(b, b.c.trial_id == t.c.trial_id))
            .where(
                t.c.study_id == self.study_id,
                t.c.state == TrialState.RUNNING,
                b.c.trial_id.is_(None),
            )
        )
        with self.storage.engine.connect() as conn:
            return [row[0] for row in conn.execute(query).all()]

    def add(self, trial: Any, defer: bool = False) -> Any:
        key = -1 - len(self._pending)  # provisional key until written
        trial.number = len(self.trials)  # every trial of the study is known after refresh()
        trial._trial_id = key
        self._put(trial)
        self._pending.append(key)
        if not defer:
            self.flush()
        return trial

    def flush(self) -> None:
        """Write the deferred trials in one transaction (trial rows, then their parameters,
        values and attributes in one statement each). Their numbers are Optuna's: the count
        of the study's earlier trials."""
        from sqlalchemy import func, select

        if not self._pending:
            return
        m = self._models
        t = m.TrialModel.__table__
        trials = [self.trials[k] for k in self._pending]
        rows: dict[Any, list[dict[str, Any]]] = {}
        with self.storage.engine.begin() as conn:
            if conn.dialect.name != "sqlite":  # Optuna's lock against concurrent numbering
                s = m.StudyModel.__table__
                conn.execute(
                    select(s.c.study_id).where(s.c.study_id == self.study_id).with_for_update()
                )
            ids: list[int] = []
            first = renumber = 0
            for k, trial in enumerate(trials):
                trial_id = conn.execute(
                    t.insert().values(
                        study_id=self.study_id,
                        number=None if k == 0 else first + k,
                        state=trial.state,
                        datetime_start=_utc(trial.datetime_start),
                        datetime_complete=_utc(trial.datetime_complete),
                    )
                ).inserted_primary_key[0]
                if k == 0:  # the count of earlier trials, as Optuna numbers them
                    first = conn.execute(
                        select(func.count())
                        .select_from(t)
                        .where(t.c.study_id == self.study_id, t.c.trial_id < trial_id)
                    ).scalar_one()
                    conn.execute(t.update().where(t.c.trial_id == trial_id).values(number=first))
                    renumber = first != trial.number  # a writer outside hwnas's lock
                ids.append(trial_id)
                self._children(rows, trial_id, trial, trial.user_attrs, trial.system_attrs)
            for model, batch in rows.items():
                if batch:
                    conn.execute(model.__table__.insert(), batch)
        self._pending.clear()
        for k, (trial, trial_id) in enumerate(zip(trials, ids)):
            del self.trials[trial._trial_id]
            trial._trial_id = trial_id
            trial.number = first + k
            self.trials[trial_id] = trial
            self._mine.add(trial_id)
        self._last_id = max(self._last_id, *ids)
        if renumber:
            self.state = StudyState()
            for trial in self.by_number():
                self.state.update(trial)

    def _children(
        self,
        rows: dict[Any, list[dict[str, Any]]],
        trial_id: int,
        trial: Any,
        user_attrs: dict[str, Any],
        system_attrs: dict[str, Any],
        values: Sequence[float] | None = None,
    ) -> None:
        """Add the rows of a trial's parameters, values and attributes to ``rows``."""
        from optuna.distributions import distribution_to_json

        m = self._models
        values = trial.values if values is None else values
        rows.setdefault(m.TrialParamModel, []).extend(
            {
                "trial_id": trial_id,
                "param_name": name,
                "param_value": trial.distributions[name].to_internal_repr(value),
                "distribution_json": distribution_to_json(trial.distributions[name]),
            }
            for name, value in trial.params.items()
        )
        rows.setdefault(m.TrialValueModel, []).extend(_value_rows(m, trial_id, values))
        rows.setdefault(m.TrialUserAttributeModel, []).extend(_attr_rows(trial_id, user_attrs))
        rows.setdefault(m.TrialSystemAttributeModel, []).extend(_attr_rows(trial_id, system_attrs))

    def finish(
        self,
        trial_id: int,
        state: Any,
        values: Sequence[float] | None,
        user_attrs: dict[str, Any],
        system_attrs: dict[str, Any] | None = None,
    ) -> Any | None:
        from optuna.trial import TrialState

        old = self.trials[trial_id]
        t = self._models.TrialModel.__table__
        now = datetime.datetime.now()
        new_user = {k: v for k, v in user_attrs.items() if k not in old.user_attrs}
        changed_user = {
            k: v for k, v in user_attrs.items() if k in old.user_attrs and old.user_attrs[k] != v
        }
        new_system = {k: v for k, v in (system_attrs or {}).items() if k not in old.system_attrs}
        with self.storage.engine.begin() as conn:
            done = conn.execute(
                t.update()
                .where(t.c.trial_id == trial_id, t.c.state == TrialState.RUNNING)
                .values(state=state, datetime_complete=_utc(now))
            ).rowcount
            if done != 1:  # failed as stale by another worker meanwhile
                conn.rollback()
                return None
            shell = make_trial(state, values, {}, {}, {}, started=old.datetime_start)
            rows: dict[Any, list[dict[str, Any]]] = {}
            self._children(rows, trial_id, shell, new_user, new_system, values or [])
            for model, batch in rows.items():
                if batch:
                    conn.execute(model.__table__.insert(), batch)
            u = self._models.TrialUserAttributeModel.__table__
            for key, value in changed_user.items():
                conn.execute(
                    u.update()
                    .where(u.c.trial_id == trial_id, u.c.key == key)
                    .values(value_json=json.dumps(value))
                )
        trial = make_trial(
            state,
            values,
            old.params,
            old.distributions,
            {**old.user_attrs, **user_attrs},
            {**old.system_attrs, **(system_attrs or {})},
            started=old.datetime_start,
        )
        trial.datetime_complete = now
        trial.number, trial._trial_id = old.number, trial_id
        self._put(trial)
        return trial


def _value_rows(m: Any, trial_id: int, values: Sequence[float] | None) -> list[dict[str, Any]]:
    rows = []
    for objective, value in enumerate(values or []):
        stored, kind = m.TrialValueModel.value_to_stored_repr(float(value))
        rows.append(
            {"trial_id": trial_id, "objective": objective, "value": stored, "value_type": kind}
        )
    return rows


def _attr_rows(trial_id: int, attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"trial_id": trial_id, "key": k, "value_json": json.dumps(v)} for k, v in attrs.items()]


def open_ledger(storage: Any, study_id: int, study_name: str) -> StudyLedger:
    """The ledger for ``storage``: :class:`RdbLedger` for an Optuna RDB storage (also behind
    Optuna's cache), :class:`StudyLedger` for any other."""
    import optuna

    if isinstance(storage, optuna.storages._CachedStorage):
        storage = storage._backend
    if isinstance(storage, optuna.storages.RDBStorage):
        return RdbLedger(storage, study_id, study_name)
    return StudyLedger(storage, study_id, study_name)


def study_ledger(study: Any, study_name: str) -> StudyLedger:
    """The ledger of an Optuna study object (:func:`open_ledger` on its storage)."""
    return open_ledger(study._storage, study._study_id, study_name)


def frozen_trial(study: Any, trial: Any) -> Any:
    """The ``FrozenTrial`` of a live ``optuna.Trial`` of ``study`` (params, distributions,
    system attributes as the sampler left them)."""
    return study._storage.get_trial(trial._trial_id)


def trial_id(trial: Any) -> int:
    """The storage id of an Optuna trial (live or frozen): what the ledger's writes take."""
    return trial._trial_id


def storage_of(study: Any) -> Any:
    """The storage object an Optuna study lives in (its locks are taken on it)."""
    return study._storage


def set_study_system_attr(study: Any, key: str, value: Any) -> None:
    """Set a study system attribute (what optuna-dashboard's artifact records are)."""
    study._storage.set_study_system_attr(study._study_id, key, value)


def drop_study_system_attr(study: Any, key: str) -> None:
    """Remove a study system attribute: its row in an RDB storage (Optuna has no call for
    it; a JSON ``null`` there, what optuna-dashboard's delete writes, makes
    ``optuna.artifacts.get_all_artifact_meta`` raise TypeError), else set to ``null``."""
    import optuna

    storage = study._storage
    if isinstance(storage, optuna.storages._CachedStorage):  # attributes are not cached
        storage = storage._backend
    engine = getattr(storage, "engine", None)
    if not isinstance(storage, optuna.storages.RDBStorage) or engine is None:
        storage.set_study_system_attr(study._study_id, key, json.dumps(None))
        return
    from optuna.storages._rdb import models

    t = models.StudySystemAttributeModel.__table__
    with engine.begin() as conn:
        conn.execute(t.delete().where(t.c.study_id == study._study_id, t.c.key == key))


def study_system_attrs(study: Any) -> dict[str, Any]:
    """The study's system attributes (Optuna's artifact records among them; Optuna 5 has no
    public ``Study.system_attrs``)."""
    return study._storage.get_study_system_attrs(study._study_id)


UNREADABLE = (ValueError, RecursionError, TypeError)
"""What reading a study attribute another program wrote can raise (not JSON, nested past
Python's recursion limit, an odd type)."""


def study_briefs(storage: Any) -> list[tuple[str, dict[str, Any] | None, int, int]]:
    """(name, user attributes, number of trials, number of COMPLETE trials) of every study in
    ``storage`` (a URL or an Optuna storage), in the storage's order. Each study's attributes
    are read on their own: one whose attributes cannot be read (another program's JSON that is
    not JSON, or nested 200,000 deep) has None, and the others are still listed.
    (``optuna.get_all_study_summaries`` raised on all of them for one, and reads every trial of
    every study.)"""
    import optuna

    storage = optuna.storages.get_storage(storage)
    backend = storage._backend if isinstance(storage, optuna.storages._CachedStorage) else storage
    engine = getattr(backend, "engine", None)
    if not isinstance(backend, optuna.storages.RDBStorage) or engine is None:
        try:
            summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
            done = optuna.trial.TrialState.COMPLETE
            return [
                (s.study_name, s.user_attrs, s.n_trials,
                 storage.get_n_trials(s._study_id, state=done))
                for s in summaries
            ]  # fmt: skip
        except UNREADABLE:
            return []
    from optuna.storages._rdb import models
    from sqlalchemy import case, func, select

    t = models.StudyModel.__table__
    tr = models.TrialModel.__table__
    complete = case((tr.c.state == optuna.trial.TrialState.COMPLETE, 1), else_=0)
    with engine.connect() as conn:
        studies = conn.execute(t.select().with_only_columns(t.c.study_id, t.c.study_name)
                                .order_by(t.c.study_id)).all()  # fmt: skip
        # one counting query for every study (RDBStorage.get_n_trials reads every trial)
        counts = {
            study_id: (int(n), int(done or 0))
            for study_id, n, done in conn.execute(
                select(tr.c.study_id, func.count(), func.sum(complete)).group_by(tr.c.study_id)
            ).all()
        }
    briefs = []
    for study_id, name in studies:
        try:
            attrs: dict[str, Any] | None = backend.get_study_user_attrs(study_id)
        except UNREADABLE:
            attrs = None
        briefs.append((name, attrs, *counts.get(study_id, (0, 0))))
    return briefs
