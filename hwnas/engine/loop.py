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
import hashlib
import os
import random
import re
import socket
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hwnas.cost_record import CostRecord
from hwnas.datasets import data_identity
from hwnas.engine.costs import CostContext
from hwnas.engine.evaluate import OBJECTIVES, Evaluation, objective_metric
from hwnas.engine.ledger import (
    StudyLedger,
    edited_study,
    frozen_trial,
    make_trial,
    study_ledger,
    trial_id,
)
from hwnas.engine.pareto import pareto_order
from hwnas.engine.strategies import DEFAULT, TABLE_STRATEGIES, pipeline_of
from hwnas.errors import (
    EXIT_FAILED,
    CandidateError,
    DeviceLostError,
    DeviceUnavailableError,
    HwnasError,
    UnrecordedError,
    shown,
)
from hwnas.limits import MAX_SEED, bounded, positive_ms
from hwnas.measure import NoisyMeasurementError
from hwnas.paths import process_running, read_bounded
from hwnas.spaces.base import Arch, SearchSpace

DEFAULT_SPACE = "nasbench201"
"""The search space of a table search when none is named (``hwnas search --space``)."""


@dataclass
class SearchSettings:
    """What to search for. The field defaults are the defaults of ``hwnas search`` (its options
    take them from here, and ``tests/test_defaults.py`` checks README, the docs and ``--help``
    against them).

    Attributes:
        space: search-space name (the CLI's default: :data:`DEFAULT_SPACE`).
        device: device name.
        dataset: dataset whose accuracy is maximised.
        objective: "latency" (ms) or "energy" (mJ), minimised.
        budget: number of distinct architectures whose accuracy is queried (completed trials);
            where the user names none, :func:`hwnas.jobs.settings.space_budget` (300, or every
            architecture of a smaller space).
        strategy: strategy name; default :data:`hwnas.engine.strategies.DEFAULT` (``frontier``),
            which needs every candidate's cost before its accuracy is queried (a recorded
            table, a few-shot predictor, or a live device's reference set measured first).
            Where no cost can be known up front the CLI runs
            :data:`~hwnas.engine.strategies.FALLBACK` (``nsga3``) instead
            (:func:`hwnas.engine.strategies.default_strategy`), and :func:`hwnas.jobs.table.
            prepare` refuses ``frontier`` in one line naming it.
        seed: sampler seed.
        max_latency: latency limit in ms, or None.
        study: Optuna study name.
        runtime: runtime replacing the device profile's ("ort", "tvm"), or None.
        accuracy: accuracy from the user's function instead of the space's table: its label
            (``path/to/file.py:function``, or the qualified name of one registered by
            :func:`hwnas.engine.evaluate.register_accuracy`), or None.
        data: the data handed to the accuracy function and used to recalibrate batch norm
            ("digits" or a folder; :func:`hwnas.datasets.load_data`), or None.
    """

    space: str
    device: str
    dataset: str = "cifar100"
    objective: str = "latency"
    budget: int = 300
    strategy: str = DEFAULT
    seed: int = 0
    max_latency: float | None = None
    study: str = ""
    runtime: str | None = None
    accuracy: str | None = None
    data: str | None = None

    pipeline: ClassVar[str] = "table"
    """The kind of search these settings are for (:data:`hwnas.jobs.PIPELINES`)."""

    def __post_init__(self) -> None:
        self._check_shared()
        self.budget = bounded("--budget", self.budget, 1, integer=True)
        if pipeline_of(self.strategy) != "table":  # unknown strategy -> UnknownNameError
            raise HwnasError(
                f"strategy '{self.strategy}' trains a supernet: it runs as a supernet search "
                "(hwnas search --strategy NAME, or hwnas.jobs)"
            )
        if not self.study:
            self.study = study_name(self)

    def _check_shared(self) -> None:
        """The values every search's settings hold (table and supernet alike): the objective,
        the seed (the CLI's range, also from Python) and the latency limit (a positive number
        of ms, not a string).

        Raises:
            HwnasError: one line naming the option and the value (also ``--data`` that is
                not a string or a path).
        """
        objective_metric(self.objective)
        self.seed = bounded("--seed", self.seed, 0, MAX_SEED, integer=True)
        if self.max_latency is not None:
            self.max_latency = positive_ms("--max-latency", self.max_latency)
        if not isinstance(self.study, str):  # a list's repr ran to 4,918 characters
            raise HwnasError(f"--study must be a string, got {shown(self.study)}")
        if self.data is not None:  # a pathlib.Path from Python is a path too
            if not isinstance(self.data, (str, os.PathLike)):
                # loaded data is named by its type (its repr printed every array: 811 lines)
                loaded = getattr(self.data, "source", None)
                if getattr(self.data, "name", None) == "digits":
                    loaded = "digits"
                hint = f": pass what it was loaded from, {shown(loaded, 300)}" if loaded else ""
                raise HwnasError(
                    f"--data must be 'digits' or a folder's path, got {shown(self.data)}{hint}"
                )
            self.data = os.fspath(self.data)

    @property
    def metric(self) -> str:
        """The device metric minimised ("latency_ms" or "energy_mj")."""
        return objective_metric(self.objective)

    def as_dict(self) -> dict[str, Any]:
        """The settings as a dict (summary.json, the study's identity); ``accuracy`` and
        ``data`` only where set, so studies made before they existed still resume; and
        ``space_fingerprint`` where the space is more than its name (a space file, a user's
        model: :attr:`hwnas.spaces.SearchSpace.fingerprint`), so that a search of an edited
        file or a retrained model is another study."""
        out = dict(self.__dict__)
        for key in ("accuracy", "data"):
            if out.get(key) is None:
                out.pop(key, None)
        fingerprint = self.space_fingerprint()
        if fingerprint is not None:
            out["space_fingerprint"] = fingerprint
        return out

    def study_settings(self) -> dict[str, Any]:
        """The settings a study records (its ``settings`` user attribute) and a search joining
        it is compared on (:func:`load_study`): :meth:`as_dict` without the budget, and the
        identity of the data's content (:func:`hwnas.datasets.data_identity`), so that a
        folder of other images under the same name is another search, while the same files at
        another path (another worker's mount) are the same."""
        out = {k: v for k, v in self.as_dict().items() if k != "budget"}
        if self.data is not None:
            out["data_identity"] = data_identity(self.data)
        return out

    def space_fingerprint(self) -> str | None:
        """The space's fingerprint where it is more than its name (else None): its structure
        (a space file, a user's model), the user's model's weights, and the file of a user's
        accuracy function, or the function's code where it was given from Python (its code
        scores every subnet)."""
        from hwnas.spaces import get_space

        try:
            fingerprint = get_space(self.space).fingerprint
        except HwnasError:  # not known in this process (a study read back): its name
            fingerprint = self.space
        parts = [] if fingerprint == self.space else [fingerprint]
        if self.accuracy and ":" in self.accuracy:
            path = Path(self.accuracy.rsplit(":", 1)[0]).expanduser()
            if path.suffix == ".py" and path.is_file():
                digest = hashlib.sha256(read_bounded(path)).hexdigest()[:16]
                parts.append(f"{path.name}:{digest}")
        elif self.accuracy:  # a function given from Python: its code
            from hwnas.engine.evaluate import accuracy_code_digest

            code = accuracy_code_digest(self.accuracy)
            parts += [f"{self.accuracy}:{code}"] if code else []
        return " ".join(parts) or None

    def name_parts(self) -> list[str]:
        """What tells this search's study apart, in the order of its default name (see
        :func:`study_name`): space, dataset, device (and runtime), objective (and latency
        limit), strategy, seed."""
        # every digit the limit has (8 -> max8ms, 8.00000001 -> max8.00000001ms): two limits
        # never share a study name
        limit = f"-max{self.max_latency:.15g}ms" if self.max_latency is not None else ""
        device = f"{self.device}-{self.runtime}" if self.runtime else self.device
        return [
            self.space, self.dataset, device, f"{self.objective}{limit}", self.strategy,
            f"seed{self.seed}", *self.accuracy_parts(),
            *([f"on-{data_identity(self.data)}"] if self.accuracy and self.data else []),
            *self.fingerprint_parts(),
        ]  # fmt: skip

    def fingerprint_parts(self) -> list[str]:
        """The study-name part of :meth:`space_fingerprint` (none for a shipped space)."""
        fingerprint = self.space_fingerprint()
        if fingerprint is None:
            return []
        return [f"m{hashlib.sha256(fingerprint.encode()).hexdigest()[:8]}"]

    def accuracy_parts(self) -> list[str]:
        """The study-name part of a user's accuracy function (none for the space's own)."""
        if not self.accuracy:
            return []
        name = self.accuracy.rsplit(":", 1)[-1].rsplit(".", 1)[-1]  # f.<locals>.g -> g
        name = re.sub(r"\W+", "", name) or "function"  # <lambda> -> lambda
        return [f"acc-{name}"]


def study_name(s: SearchSettings, *qualifiers: str) -> str:
    """The default study name: the same for the same search, so re-running it resumes.

    The one place a study's name is built, for every kind of search: the settings'
    :meth:`~SearchSettings.name_parts` (a supernet search's add its data, hardware term and
    epochs), then ``qualifiers`` (a few-shot search: its predictor and measurement budget),
    joined by ``-``.
    """
    return "-".join([*s.name_parts(), *qualifiers])


@dataclass
class TrialRecord:
    """One completed trial: the architecture, its accuracy (%), its costs (metric -> its
    :class:`~hwnas.cost_record.CostRecord`) and the trial's user attributes."""

    number: int
    arch: str
    accuracy: float
    costs: dict[str, CostRecord]
    attrs: dict[str, Any] = field(default_factory=dict)


MAX_NOISY_IN_A_ROW = 5
"""A search stops (exit 1) after this many consecutive candidates could not be measured (too
noisy, or the runtime failed on them): the machine is too busy for timing to mean anything, or
the runtime is broken for every model. Candidates a recorded table has no value for
(:class:`hwnas.errors.UnrecordedError`) are skipped without counting: the tables of the
Eagle devices lack the 341 cells whose output ignores the input, the cheapest of the space,
where a sampler drawn to low latency proposed 5 in a row and stopped a search."""


def skip_reason(exc: CandidateError) -> str:
    """Why a candidate was skipped: ``noisy`` (its timing stayed too noisy), ``unrecorded``
    (a recorded table has no value for it) or ``failed`` (the runtime rejected or crashed on
    it)."""
    if isinstance(exc, NoisyMeasurementError):
        return "noisy"
    return "unrecorded" if isinstance(exc, UnrecordedError) else "failed"


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
        unrecorded_skipped: candidates this run skipped because the device's table has no
            value for them (FAIL trials too, the reason in ``failed``); not among
            ``failed_skipped``.
        stopped: why the search stopped before the budget (the strategy has no architecture
            left to propose: the space, or the part of it within the latency limit, is
            exhausted), or None.
    """

    settings: SearchSettings
    records: list[TrialRecord]
    pareto: list[TrialRecord]
    best: TrialRecord | None
    trials_total: int
    new_trials: int
    noisy_skipped: int = 0
    failed_skipped: int = 0
    unrecorded_skipped: int = 0
    stopped: str | None = None


REPEATS_IN_A_ROW = 2000
"""A search stops when its strategy proposes this many architectures in a row that the study
already holds (or that failed): the strategy finds nothing new, the space (or the part of it it
searches) is exhausted. A sampler that knows it has nothing left says so at once
(``exhausted``)."""


def check_storage_url(url: str) -> None:
    """Refuse a storage URL for what can be told without connecting: one that does not parse,
    names a driver that is not installed, an in-memory SQLite database, or an SQLite file in
    a folder that does not exist or that is a folder. ``--storage``'s check as the command
    line is parsed, before a ``--space FILE.py`` is imported.

    Raises:
        HwnasError: one line, without the URL's password.
    """
    _checked_url(url)


def _checked_url(url: str):
    """(the URL as it may be shown, the normalised URL, its SQLite file or None); see
    :func:`check_storage_url`."""
    from hwnas.db import check_driver, normalize_url, redact
    from hwnas.engine.workers import sqlite_file

    shown = redact(url)  # an unparseable URL is refused here, without echoing it
    url = normalize_url(url)
    check_driver(url)
    db_file = sqlite_file(url)
    if db_file is None and url.startswith("sqlite"):
        raise HwnasError(
            f"study storage {shown} names no file (an in-memory database is gone when the "
            "search ends): give sqlite:///PATH"
        )
    if db_file is not None and db_file.is_dir():  # refused before a lock file is made beside
        raise HwnasError(f"study storage {db_file} is a folder, not an SQLite database")
    if db_file is not None and not db_file.parent.is_dir():  # a typo must not create folders
        raise HwnasError(
            f"cannot open study storage {shown}: the folder {db_file.parent} does not exist"
        )
    return shown, url, db_file


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

    from hwnas.db import (
        check_sqlite_file,
        connect_args,
        connect_error,
        create_wal_database,
        scrub,
    )
    from hwnas.engine.workers import creation_lock

    shown, url, db_file = _checked_url(url)
    existed = db_file is None or db_file.exists()
    for attempt in range(CREATE_ATTEMPTS):
        try:
            with creation_lock(url), warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                if db_file is not None:  # an empty or truncated file is not a new study
                    check_sqlite_file(db_file, "study storage")  # (not while one is created)
                    if not db_file.exists():
                        create_wal_database(db_file)
                storage = optuna.storages.RDBStorage(
                    url,
                    engine_kwargs=(
                        {"pool_pre_ping": True, "connect_args": connect_args(url)}
                        if "postgres" in url
                        else None
                    ),  # fmt: skip
                    heartbeat_interval=HEARTBEAT_S,
                    grace_period=GRACE_S,
                )
            break
        except HwnasError:
            raise
        except Exception as exc:  # sqlalchemy errors, bad URLs, missing drivers
            # several workers creating Optuna's tables in a fresh server database at once: the
            # losers see "already exists" / unique violations; the tables are there next time
            if attempt + 1 < CREATE_ATTEMPTS and _lost_creation_race(exc):
                time.sleep(0.2 * (attempt + 1) + random.random() * 0.3)
                continue
            if not existed:  # a full disk must not leave an empty database behind
                for suffix in ("", "-wal", "-shm"):
                    with contextlib.suppress(OSError):
                        Path(f"{db_file}{suffix}").unlink()
            why = connect_error(url, exc) if "postgres" in url else str(exc).splitlines()[0]
            raise HwnasError(f"cannot open study storage {shown}: {scrub(why)}") from None
    if url.startswith("sqlite:"):

        def pragmas(dbapi_connection, _record) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        sqlalchemy.event.listen(storage.engine, "connect", pragmas)
        storage.engine.dispose()  # reconnect with the pragmas
    return storage


HOLD_S = 0.2
"""Seconds a worker whose candidates are scored by table lookups keeps the study lock across
trials, writing them in one transaction when it lets go: other workers wait at most this long,
and a killed process loses at most these lookups (re-done by the rerun), never a measurement."""

HEARTBEAT_S = 30
"""Seconds between the heartbeats a worker records for the trial it is scoring."""

FIRST_BEAT_S = 1.0
"""Seconds of scoring before a trial's first heartbeat (quick evaluations record none)."""

GRACE_S = 180
"""A RUNNING trial whose last heartbeat is older than this (by the database's clock), or that
a waiting worker has seen without any heartbeat for this long (by its own clock: its worker
died before :data:`FIRST_BEAT_S`), is failed by that worker (its worker died, on any
machine), so its architecture can be claimed again."""

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
        HwnasError: the storage is unreachable, or the study name is used by another search
            (settings other than :data:`NOT_IDENTITY` differ), or by a study whose directions
            are not an hwnas search's (:func:`check_directions`; nothing is written to it).
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # "Using an existing study": ours
    if isinstance(storage, str):
        storage = open_storage(storage)
    try:
        study = optuna.create_study(
            study_name=settings.study,
            storage=storage,
            directions=list(DIRECTIONS),
            load_if_exists=True,
        )
    except Exception as exc:  # sqlalchemy / optuna storage errors
        from hwnas.db import scrub

        raise HwnasError(f"cannot open study storage: {scrub(str(exc).splitlines()[0])}") from None
    check_directions(study, settings.study, directions_metric)
    saved = study.user_attrs.get("settings")
    mine = settings.study_settings()
    if saved is None:
        study.set_user_attr("settings", mine)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # set_metric_names is experimental
            study.set_metric_names(["accuracy_pct", directions_metric])
    else:
        _refuse_another_search(settings, saved, mine)
    return study


DIRECTIONS = ("maximize", "minimize")
"""The directions of every hwnas study: accuracy maximised, the device cost minimised."""


def check_directions(study: Any, name: str, metric: str) -> None:
    """Refuse a study whose objectives are not an hwnas search's (:data:`DIRECTIONS`): another
    program's study with another number of objectives, or with the directions the other way
    round, where the search minimised accuracy (its front disjoint from the dashboard's), or
    broke on the study's metric names after writing its settings into it.

    Raises:
        HwnasError: one line naming the directions the study has and those a search needs.
    """
    have = tuple(d.name.lower() for d in study.directions)
    if have == DIRECTIONS:
        return
    raise HwnasError(
        f"study '{name}' in this storage has the direction{'s' * (len(have) != 1)} "
        f"{', '.join(have)}; an hwnas search needs {', '.join(DIRECTIONS)} (accuracy_pct, "
        f"{metric}): it is another program's study, pick another --study name"
    )


def _refuse_another_search(settings: SearchSettings, saved: Any, mine: dict[str, Any]) -> None:
    """Refuse a study whose recorded settings (``saved``) are another search's.

    Raises:
        HwnasError: one line naming every setting that differs.
    """
    theirs, ours = _identity(saved if isinstance(saved, dict) else {}), _identity(mine)
    for key in ("space_fingerprint", "data_identity"):
        if isinstance(saved, dict) and key not in saved:
            ours.pop(key, None)  # a study made before hwnas recorded one
    if "data_identity" in theirs and "data_identity" in ours:
        theirs.pop("data", None)  # the data's content decides, not the path it is mounted at
        ours.pop("data", None)
    if theirs == ours:
        return
    differ = ", ".join(
        f"{k} {theirs.get(k)!r} there, {ours.get(k)!r} here"
        for k in sorted(set(theirs) | set(ours))
        if theirs.get(k) != ours.get(k)
    )
    raise HwnasError(
        f"study '{settings.study}' in this storage was made by a different search "
        f"({differ}); pick another --study name"
    )


NOT_IDENTITY = ("budget", "seed")
"""Settings that are not part of a study's identity: a rerun may extend the budget, and each
worker of a named study (``--study``) may have its own ``--seed``, as Optuna's practice is (its
proposals stay a function of its seed and the study's trials, :mod:`hwnas.engine.seeding`).
A default study name holds the seed, so there another seed is another study."""


def _identity(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings that make a study the same search (all but :data:`NOT_IDENTITY`); a user's
    accuracy file and data folder by their names, not the path they were typed as (the same
    command from another folder, ``../net.py:acc`` there and ``net.py:acc`` here, is the same
    search: the file's content is in ``space_fingerprint``, the names in the study's name; the
    data folder's content in ``data_identity``, which :func:`_refuse_another_search` compares
    instead of the folder's name where both studies record it); a supernet study's
    ``table_dataset`` as ``dataset``, the setting it is."""
    out = {k: v for k, v in settings.items() if k not in NOT_IDENTITY}
    # a supernet study's record: dataset is its data's name (as in summary.json; the data is
    # compared as data and data_identity), table_dataset the setting, which a study recorded
    # before held as dataset
    if "table_dataset" in out:
        out["dataset"] = out.pop("table_dataset")
    accuracy = out.get("accuracy")
    if isinstance(accuracy, str) and ":" in accuracy:
        file, _, attr = accuracy.rpartition(":")
        if file.endswith(".py"):
            out["accuracy"] = f"{Path(file).name}:{attr}"
    if isinstance(out.get("data"), str):
        out["data"] = Path(out["data"]).name or out["data"]
    return out


def _fail_orphans(ledger: StudyLedger) -> None:
    """Mark RUNNING trials left by a killed process of this host as FAIL."""
    from optuna.trial import TrialState

    host = socket.gethostname()
    for t in list(ledger.trials.values()):
        if t.state != TrialState.RUNNING:
            continue
        h, _, pid = str(t.user_attrs.get("worker", "")).partition(":")
        if h == host and pid.isdigit() and not process_running(int(pid)):
            ledger.fail(trial_id(t))


def completed_records(ledger: StudyLedger) -> list[TrialRecord]:
    """Completed trials of a study as records (in trial-number order).

    Raises:
        HwnasError: a trial without an architecture or a value, a cost that is no number, a
            cost's source with a control character (:func:`hwnas.engine.ledger.edited_study`).
    """
    out = []
    for t in ledger.completed():
        try:
            costs = {
                m: CostRecord.from_attrs(t.user_attrs, m)
                for m in OBJECTIVES.values()
                if m in t.user_attrs
            }
            arch, value = t.user_attrs["arch"], float(t.values[0])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise edited_study(
                ledger.study_name, f"trial {t.number}: {type(exc).__name__}: {exc}"
            ) from None
        for c in costs.values():  # copied into pareto.csv and printed: text, not escapes
            if not c.source.isprintable():
                raise edited_study(
                    ledger.study_name, f"trial {t.number}: a {c.metric} source that is no text"
                )
        out.append(TrialRecord(t.number, arch, value, costs, dict(t.user_attrs)))
    return out


POLL_S = 1.0
"""Seconds a worker waits between looks at the study while other workers finish the budget."""


def check_budget(ledger: StudyLedger, settings: SearchSettings) -> None:
    """Refuse a budget below what the study already holds (a rerun may extend a study, never
    silently report more trials than it was asked for).

    Raises:
        HwnasError: the study has more completed trials than ``settings.budget``.
    """
    done = len(ledger.state.completed)
    if done > settings.budget:
        raise HwnasError(
            f"study '{settings.study}' already holds {done} scored architectures, more than "
            f"--budget {settings.budget}: rerun with --budget {done} or more to extend it, or "
            "give another --study"
        )


def check_stored_study(settings: SearchSettings, storage: Any) -> Any:
    """Check that the study as stored, if there is one, is this search's, before the search
    starts (a search refused is refused before its progress is shown, and before its run
    folder is made, in one line); reads only.

    Returns:
        The stored study, or None where there is none yet.

    Raises:
        HwnasError: a study another search made, or another program's
            (:func:`check_directions`).
    """
    import optuna

    try:
        study = optuna.load_study(study_name=settings.study, storage=storage)
    except KeyError:  # a new study
        return None
    check_directions(study, settings.study, settings.metric)
    saved = study.user_attrs.get("settings")
    if saved is not None:  # another search's study: refused before progress is shown too
        _refuse_another_search(settings, saved, settings.study_settings())
    return study


def check_stored_budget(settings: SearchSettings, storage: Any) -> None:
    """:func:`check_budget` on the study as stored, and that it is this search's
    (:func:`check_stored_study`), before the search starts (a search refused for either is
    refused before its progress is shown, in one line).

    Raises:
        HwnasError: as :func:`check_budget`; a study another search made, or another
            program's (:func:`check_directions`).
    """
    study = check_stored_study(settings, storage)
    if study is None:
        return
    ledger = study_ledger(study, settings.study)
    ledger.load()
    check_budget(ledger, settings)


def run_search(
    settings: SearchSettings,
    space: SearchSpace,
    evaluate: Callable[[Arch], Evaluation],
    storage: Any = None,
    on_trial: Callable[[int, TrialRecord | None], None] | None = None,
    sampler_options: dict[str, Any] | None = None,
    costs: CostContext | None = None,
    proposals: Sequence[Arch] | None = None,
    instant: bool = False,
    check: Callable[[list[TrialRecord]], None] | None = None,
) -> SearchResult:
    """Run (or resume, or join) a search until ``settings.budget`` distinct architectures are
    scored in the study (how workers share it: :class:`_Loop`).

    Args:
        settings: what to search.
        space: the search space.
        evaluate: scores an architecture; must return ``costs[settings.metric]`` and, under a
            latency limit, ``costs["latency_ms"]``. A :class:`~hwnas.errors.CandidateError`
            skips the candidate (a FAIL trial with the reason).
        storage: Optuna storage URL or object; None keeps the study in memory.
        on_trial: called after each trial with (completed count, record or None for a
            duplicate); on a study that already holds trials, first once with their count
            and the most accurate of them.
        sampler_options: extra keyword arguments for the strategy.
        costs: what is known of candidates' costs before measuring (for cost-aware strategies);
            default: nothing.
        proposals: architectures to score, in order, instead of the strategy's proposals
            (a supernet strategy's candidates); the budget is then the study's scored
            architectures plus the proposals it does not hold yet.
        instant: ``evaluate`` is a table lookup (milliseconds, no side effects): a candidate
            is scored first and recorded complete in one write, under the study lock, instead
            of being claimed (one write), scored with heartbeats, then finished (another).
        check: called with the study's completed trials before any is added (a resumed
            study scored with values the device no longer gives raises there).

    Returns:
        The :class:`SearchResult` over every completed trial of the study.

    Raises:
        HwnasError: storage problems, a study name already used by another search, a budget
            below what the study holds; :class:`SearchHalted` (with the result so far): 5
            candidates in a row that could not be measured, or (:class:`DeviceLost`) the
            device became unavailable.
        KeyboardInterrupt: propagated after the running trial is told (COMPLETE if it was
            scored, FAIL otherwise), so the study is consistent and resumable.
    """
    loop = _Loop.open(settings, space, evaluate, storage, sampler_options, costs, proposals)
    done = completed_records(loop.ledger)
    if check is not None:
        check(done)
    if on_trial is not None and done:  # a resumed study: its count and its best so far
        on_trial(len(done), max(done, key=lambda r: r.accuracy))
    loop.on_trial, loop.instant = on_trial, instant
    # table lookups keep the lock across trials and write them together (see HOLD_S)
    loop.hold = _Hold(loop.ledger, loop.study, HOLD_S if instant else 0.0)
    try:
        try:
            while loop.asks < loop.max_asks:
                go = loop.claim_next()
                if go is None:
                    break
                if go:
                    loop.step()
            else:
                if len(loop.ledger.state.completed) < loop.settings.budget:  # max_asks made
                    loop.stopped = _asks_used(loop)
        finally:
            loop.hold.release()  # writes what it decided, even when interrupted
    except KeyboardInterrupt:
        _fail_own_claims(loop.ledger, loop.worker)
        raise
    except SearchHalted as exc:
        scored = len(loop.ledger.state.completed)
        loop.stopped = (
            f"stopped at {scored} of the budget's {settings.budget} scored architectures: {exc}"
        )
        exc.result = loop.result()
        raise
    except DeviceUnavailableError as exc:  # gone mid-search: a phone unplugged, a board frozen
        scored = len(loop.ledger.state.completed)
        loop.stopped = (
            f"stopped at {scored} of the budget's {settings.budget} scored architectures: {exc}"
        )
        lost = DeviceLost(str(exc))
        lost.result = loop.result()
        raise lost from None
    return loop.result()


class SearchHalted(HwnasError):
    """The device could not measure :data:`MAX_NOISY_IN_A_ROW` candidates in a row: the
    search stops. ``result`` is the :class:`SearchResult` over what the study completed
    before (its ``stopped`` says why), so that a caller can still write the run folder. Exit
    status :data:`~hwnas.errors.EXIT_FAILED` (1): the run stopped part-way through no fault of
    its input, and the same command resumes it."""

    exit_status = EXIT_FAILED
    result: SearchResult | None = None
    evaluator: Any = None
    """The evaluator that scored ``result`` where it is not the caller's own (a few-shot
    search's predicted-cost one: its accuracy queries go into summary.json), else None."""


class DeviceLost(SearchHalted, DeviceLostError):
    """The device stopped being usable mid-search (a phone unplugged, an RPC board that
    stopped answering): the search stops at once, its ``result`` holding what the study
    completed before, as for :class:`SearchHalted` (the trial being measured is failed and
    measured again by the rerun)."""


def _fail_own_claims(ledger: StudyLedger, worker: str) -> None:
    """After Ctrl-C: mark FAIL every trial this worker left RUNNING in the storage. The step
    tells the claim it holds (:func:`_tell_interrupted`), but an interrupt that falls while the
    claim is being written (committed, its id not yet returned) left it RUNNING until a rerun
    on this host failed it as an orphan: seen once in a full test-suite run."""
    from optuna.trial import TrialState

    try:
        running = ledger.storage.get_all_trials(
            ledger.study_id, deepcopy=False, states=(TrialState.RUNNING,)
        )
        for t in running:
            if t.user_attrs.get("worker") == worker:
                ledger.fail(trial_id(t))
    except Exception:  # the storage is gone: the rerun fails it as an orphan
        pass


@dataclass
class _Loop:
    """The search loop of one worker: claim a proposal, score it, record it.

    The strategy's sampler runs on an in-memory Optuna study (``study``); the study in the
    storage is the durable record every worker shares (``ledger``, :mod:`hwnas.engine.ledger`):
    each trial is written there once decided, and the other workers' finished trials are
    copied into the sampler's study as they appear.

    Any number of workers (processes running :func:`run_search` on the same study, on one
    machine or many) share the budget exactly: an architecture is *claimed* before it is
    scored (:mod:`hwnas.engine.workers`), so none is scored twice and the study never holds
    more than ``budget`` scored architectures. A worker whose share is done waits for the
    others' running trials, so every worker returns the same, complete result. A rerun with a
    larger budget extends the study; a smaller one than the study holds is refused.
    """

    settings: SearchSettings
    space: SearchSpace
    evaluate: Callable[[Arch], Evaluation]
    shared: Any
    ledger: StudyLedger
    sampler: Any
    study: Any
    dims: dict[str, Any]
    on_trial: Callable[[int, TrialRecord | None], None] | None = None
    instant: bool = False
    hold: Any = None
    worker: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    joined: datetime.datetime = field(default_factory=datetime.datetime.now)
    new: int = 0
    repeats: int = 0
    stopped: str | None = None
    skipped: dict[str, int] = field(
        default_factory=lambda: {"noisy": 0, "failed": 0, "unrecorded": 0}
    )
    in_a_row: int = 0
    # failed in this run (a runtime's rejection or crash, perhaps passing: a later run tries
    # again); a table's gaps are the study's (StudyState.unrecorded), for every run and worker
    failed_archs: set[str] = field(default_factory=set)
    reseeded: bool = False
    # RUNNING claims seen without a heartbeat -> when this worker first saw them so (its own
    # monotonic clock: no other machine's clock is compared)
    silent_since: dict[int, float] = field(default_factory=dict)

    @property
    def max_asks(self) -> int:
        """Bound on the study's proposals (every trial: duplicates, gaps and failures
        included), shared by its workers and its runs: a resumed run or a worker that joins
        goes on from the trials the study holds (:attr:`asks`), not from a fresh allowance."""
        return 20 * self.settings.budget

    @property
    def asks(self) -> int:
        """The study's trials as this worker last read them (its own at once)."""
        return len(self.ledger.trials)

    def resume_counts(self, trials: list[Any]) -> None:
        """Take the proposals the study holds at its end in a row (duplicates, failed
        before) as this run's repeats: a search killed and resumed stops where the
        uninterrupted one stops (main: a resumed run started at 0 and went further)."""
        from optuna.trial import TrialState

        self.repeats = 0
        for t in reversed(trials):
            if t.state == TrialState.PRUNED and t.user_attrs.get("budget_reached"):
                continue  # neither a repeat nor a new architecture
            attrs = t.user_attrs
            if t.state != TrialState.PRUNED or not (
                "duplicate_of" in attrs or "failed_before" in attrs
            ):
                break
            self.repeats += 1

    @classmethod
    def open(cls, settings, space, evaluate, storage, sampler_options, costs, proposals) -> _Loop:
        """Load the shared study, fail this host's orphans, make the sampler and its study.

        Raises:
            HwnasError: storage problems, another search's study, a budget below the study's.
        """
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if isinstance(storage, str):
            storage = open_storage(storage)
        shared = load_study(settings, storage, settings.metric)
        ledger = study_ledger(shared, settings.study)
        history = ledger.load()
        _fail_orphans(ledger)
        history = sorted(history + ledger.refresh(), key=lambda t: t.number)
        if proposals is not None:
            held = set(ledger.state.completed)
            wanted = list(dict.fromkeys(a.text for a in proposals))
            settings = dataclasses.replace(settings, budget=len(held | set(wanted)))
            sampler: Any = ProposalSampler(space, [a for a in proposals if a.text in wanted])
        else:
            check_budget(ledger, settings)
            if costs is None:
                costs = CostContext(
                    space,
                    max_latency=settings.max_latency,
                    budget=settings.budget,
                    dataset=settings.dataset,
                )
            sampler = TABLE_STRATEGIES.get(settings.strategy)(
                settings.seed, costs, **(sampler_options or {})
            )
        if isinstance(sampler, ProposalSampler):  # skip what any worker scored or claimed
            sampler.taken = lambda: set(ledger.state.completed) | set(ledger.state.claimed)
        study = optuna.create_study(directions=["maximize", "minimize"], sampler=sampler)
        _feed(study, history, ledger.study_name)
        loop = cls(settings, space, evaluate, shared, ledger, sampler, study, space.choices())
        loop.resume_counts(ledger.by_number())
        return loop

    def own_attrs(self) -> dict[str, Any]:
        """What every trial this worker writes (decided, or a claim) keeps of it: the worker,
        and the seed of its run (a study resumed with another --seed holds both)."""
        return {"worker": self.worker, "seed": self.settings.seed}

    def record(self, trial, state, values=None, attrs=None, defer=False):
        """Write a decided trial to the study (under the lock) and tell the sampler's study."""
        frozen = frozen_trial(self.study, trial)
        attrs = {**self.own_attrs(), **(attrs or {})}
        written = self.ledger.add(
            make_trial(
                state,
                values,
                frozen.params,
                frozen.distributions,
                attrs,
                frozen.system_attrs,
                started=frozen.datetime_start,
            ),
            defer=defer,
        )
        _tell(self.study, trial, state, values, attrs)
        return written

    def claim_next(self) -> bool | None:
        """Whether this worker may propose now: None when the search is over (budget met,
        proposals or strategy exhausted), False after waiting for other workers, True to go."""
        state = self.ledger.state
        if len(state.completed) >= self.settings.budget:
            return None
        if state.taken >= self.settings.budget:  # the rest is being scored by other workers
            self.hold.release()
            time.sleep(POLL_S)
            _fail_orphans(self.ledger)
            _fail_stale(self.shared)  # a worker that died on another machine
            self._fail_silent()  # ... before its first heartbeat
            _feed(self.study, self.ledger.refresh(), self.ledger.study_name)
            return False
        if isinstance(self.sampler, ProposalSampler) and not _proposals_left(self.sampler, state):
            return None  # every proposal is scored, being scored, or failed
        told = getattr(self.sampler, "exhausted", False)
        has_candidates = getattr(self.sampler, "has_candidates", None)
        if not told and has_candidates is not None and not has_candidates(self.study):
            told = True  # every candidate is taken: no trial asked only to be pruned
        if told or self.repeats >= REPEATS_IN_A_ROW:
            scored = len(state.completed)
            repeats = 0 if told else self.repeats
            self.stopped = _exhausted(self.space, self.settings, scored, repeats)
            return None
        return True

    def _fail_silent(self) -> None:
        """Fail the RUNNING claims this worker has seen without a heartbeat for
        :data:`GRACE_S` of its own time (a live worker's first beat comes after
        :data:`FIRST_BEAT_S`): their worker died before it, on any machine, or the study was
        handed over with them. Timed by this worker alone, so a claiming machine's clock set
        behind cannot get a live claim failed."""
        now = time.monotonic()
        seen = self.ledger.silent()
        self.silent_since = {i: self.silent_since.get(i, now) for i in seen}
        for i, since in list(self.silent_since.items()):
            if now - since >= GRACE_S:
                self.ledger.fail(i)
                del self.silent_since[i]

    def step(self) -> None:
        """Ask the sampler for one architecture, then claim, score and record it (or record
        why not: a duplicate, the budget reached, a candidate that cannot be measured)."""
        trial = self.study.ask()
        arch = self.space.from_choices(
            {d: trial.suggest_categorical(d, list(o)) for d, o in self.dims.items()}
        )
        limit = self.settings.max_latency
        got: dict[str, Any] = {"ev": None, "claim": None, "done": None}
        try:
            decision, state, holder = self._decide(trial, arch, got)
            if decision == "duplicate":
                self._duplicate(state, holder)
                return
            if decision in ("full", "failed_before"):
                return
            self.repeats = 0
            claim = got["claim"]
            if claim is not None:
                with _heartbeat(self.ledger, trial_id(claim)):
                    got["ev"] = ev = self.evaluate(arch)
                if limit is not None:
                    over = ev.costs["latency_ms"].value - limit
                    trial.set_constraint("latency_over_limit_ms", over)
                got["done"] = _finish(
                    self.ledger, self.study, trial, claim, ev, self.settings, self.record
                )
                got["claim"] = None
        except CandidateError as exc:
            self._skip(trial, arch, got, exc)
            return
        finally:
            if got["claim"] is not None:  # interrupted (Ctrl-C) or a bug: never left RUNNING
                _tell_interrupted(
                    self.ledger, got["claim"], got["ev"], self.settings, self.study, trial
                )
        self.in_a_row = 0
        done, ev = got["done"], got["ev"]
        if done is None:  # recorded as a duplicate after all (see _finish)
            return
        self.new += 1
        if self.on_trial:
            record = TrialRecord(done.number, arch.text, ev.accuracy, ev.costs, ev.attrs())
            self.on_trial(len(self.ledger.state.completed), record)

    def _decide(self, trial, arch: Arch, got: dict[str, Any]) -> tuple[str, Any, Any]:
        """Under the study lock, with the study as every worker left it: record ``arch`` as
        pruned (failed before, a duplicate, the budget reached), or score and record it at
        once (``instant``), or claim it (a RUNNING trial: ``got["claim"]``)."""
        from optuna.trial import TrialState

        limit, instant = self.settings.max_latency, self.instant
        with self.hold.held():  # the study as every worker left it, and only this one writes
            state = self.ledger.state
            holder = state.holder(arch.text)
            full = holder is None and state.taken >= self.settings.budget
            if arch.text in self.failed_archs or arch.text in state.unrecorded:
                self.record(trial, TrialState.PRUNED, None, {"failed_before": arch.text}, instant)
                self.repeats += 1
                return "failed_before", state, holder
            if holder is not None:
                self.record(trial, TrialState.PRUNED, None, {"duplicate_of": holder}, instant)
                return "duplicate", state, holder
            if full:
                self.record(trial, TrialState.PRUNED, None, {"budget_reached": True}, instant)
                return "full", state, holder
            if instant:  # scored at once and recorded complete: no claim needed
                got["ev"] = ev = self.evaluate(arch)
                if limit is not None:  # feasible when <= 0 (constrained domination)
                    over = ev.costs["latency_ms"].value - limit
                    trial.set_constraint("latency_over_limit_ms", over)
                values = _values(ev, self.settings)
                got["done"] = self.record(trial, TrialState.COMPLETE, values, ev.attrs(), True)
                return "scored", state, holder
            frozen = frozen_trial(self.study, trial)  # the claim
            got["claim"] = self.ledger.add(
                make_trial(
                    TrialState.RUNNING,
                    None,
                    frozen.params,
                    frozen.distributions,
                    {**self.own_attrs(), "arch": arch.text},
                    frozen.system_attrs,
                    started=frozen.datetime_start,
                )
            )
            return "claimed", state, holder

    def _duplicate(self, state, holder: str) -> None:
        """After a proposal another trial holds: count it, and reseed once when another
        worker started with the same seed (draw from another sequence)."""
        self.repeats += 1
        if not self.reseeded and state.by_another_since(holder, self.worker, self.joined):
            self.sampler.reseed_rng()
            self.reseeded = True
        if self.on_trial:
            self.on_trial(len(self.ledger.state.completed), None)

    def _skip(self, trial, arch: Arch, got: dict[str, Any], exc: CandidateError) -> None:
        """One candidate that cannot be measured (too noisy, rejected or crashed the runtime)
        must not end a long search: record why, skip it and go on.

        Raises:
            HwnasError: :data:`MAX_NOISY_IN_A_ROW` candidates in a row could not be measured.
        """
        from optuna.trial import TrialState

        kind = skip_reason(exc)
        reason = "noisy" if kind == "noisy" else "failed"  # the trial's attribute
        attrs = {"arch": arch.text, reason: str(exc)}
        if kind == "unrecorded":  # a table's gap stays one: never looked up again, by any run
            attrs["unrecorded"] = True
        claim = got["claim"]
        if claim is not None:
            self.ledger.finish(trial_id(claim), TrialState.FAIL, None, attrs)
            _tell(self.study, trial, TrialState.FAIL, None, attrs)
            got["claim"] = None
        else:
            with self.hold.held():
                self.record(trial, TrialState.FAIL, None, attrs, self.instant)
        if reason == "failed":
            self.failed_archs.add(arch.text)
        self.repeats = 0  # an architecture the study did not hold: not a repeat
        self.skipped[kind] += 1
        if kind == "unrecorded":
            return  # a table's gap: nothing failed (the proposals stay bounded by max_asks)
        self.in_a_row += 1
        if self.in_a_row >= MAX_NOISY_IN_A_ROW:
            raise SearchHalted(
                f"{self.in_a_row} candidates in a row could not be measured; last: {exc}"
            ) from None

    def result(self) -> SearchResult:
        """The :class:`SearchResult` over every completed trial of the study."""
        self.ledger.refresh()
        records = completed_records(self.ledger)
        result = summarise(self.settings, records, len(self.ledger.trials), self.new)
        return dataclasses.replace(
            result,
            noisy_skipped=self.skipped["noisy"],
            failed_skipped=self.skipped["failed"],
            unrecorded_skipped=self.skipped["unrecorded"],
            stopped=self.stopped,
        )


def _exhausted(space: SearchSpace, settings: SearchSettings, scored: int, repeats: int) -> str:
    """Why a search stopped short of its budget: its strategy has nothing new to propose."""
    # in words a CLI user and a Python caller both read (summary.json's "stopped")
    within = " within the latency limit" if settings.max_latency is not None else ""
    if repeats:  # it may be the strategy that is stuck, not the space that is used up
        how = (
            f"proposed {repeats} architectures in a row that the study already holds; it "
            f"found nothing new in the space '{space.name}'{within} (a strategy that stalls, "
            "or a space it has exhausted)"
        )
    else:
        how = f"has no architecture left to propose; the space '{space.name}'{within} is "
        how += "exhausted for it"
    return (
        f"stopped at {scored} of the budget's {settings.budget} scored architectures: strategy "
        f"'{settings.strategy}' {how}"
    )


def _asks_used(loop: _Loop) -> str:
    """Why a search stopped when its study's proposals reached :attr:`_Loop.max_asks`: how
    many were architectures it could not score or held already (a table with many gaps, a
    strategy that repeats itself), not an exhausted space."""
    from optuna.trial import TrialState

    trials = list(loop.ledger.trials.values())
    gaps = sum(t.state == TrialState.FAIL and bool(t.user_attrs.get("unrecorded")) for t in trials)
    failed = sum(t.state == TrialState.FAIL for t in trials) - gaps
    repeats = sum(
        t.state == TrialState.PRUNED
        and ("duplicate_of" in t.user_attrs or "failed_before" in t.user_attrs)
        for t in trials
    )
    s = loop.settings
    return (
        f"stopped at {len(loop.ledger.state.completed)} of the budget's {s.budget} scored "
        f"architectures: the study holds {len(trials)} proposals of strategy '{s.strategy}', "
        f"the bound of a search (20 x --budget); {gaps} of them had no value in the device's "
        f"table, {failed} could not be measured and {repeats} were architectures the study "
        "held already"
    )


def _values(ev: Evaluation, settings: SearchSettings) -> list[float]:
    return [ev.accuracy, ev.costs[settings.metric].value]


def _tell(study, trial, state, values, attrs) -> None:
    """Tell the sampler's in-memory study what was recorded for ``trial``."""
    from optuna.trial import TrialState

    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    if state == TrialState.COMPLETE:
        study.tell(trial, values)
    else:
        study.tell(trial, state=state)


def _feed(study, trials, name: str) -> None:
    """Copy finished trials of the shared study (earlier runs, other workers) into the
    sampler's in-memory study, leaving out the interrupted ones (:func:`_decided`).

    On resume the sampler's study so holds the decisions of the earlier runs in their order,
    as the uninterrupted run's sampler held them: a sampler whose proposal is a function of
    (seed, its study's trials) (:mod:`hwnas.engine.seeding`) goes on as if never stopped."""
    trials = [t for t in trials if _decided(t)]
    if trials:
        try:
            study.add_trials(trials)
        except ValueError as exc:  # Optuna's check of a finished trial (no values, ...)
            raise edited_study(name, f"{exc}".rstrip(".")) from None


def _decided(trial) -> bool:
    """Whether a finished trial is a decision of a sampler: not a FAIL without a reason (a
    claim whose worker was killed or interrupted, failed by :func:`_fail_orphans`, a stale
    heartbeat or Ctrl-C). Its architecture is proposed again, as the run would have gone on."""
    from optuna.trial import TrialState

    if trial.state != TrialState.FAIL:
        return True
    return any(k in trial.user_attrs for k in ("noisy", "failed"))


def _finish(ledger, study, trial, claim, ev, settings, record):
    """Record the score of a claimed trial; returns the COMPLETE trial, or None when the
    architecture was scored by another worker meanwhile (recorded as a duplicate)."""
    from optuna.trial import TrialState

    values = _values(ev, settings)
    system = frozen_trial(study, trial).system_attrs
    done = ledger.finish(trial_id(claim), TrialState.COMPLETE, values, ev.attrs(), system)
    if done is not None:
        _tell(study, trial, TrialState.COMPLETE, values, ev.attrs())
        return done
    # another worker failed the claim as stale (its heartbeats stopped reaching the storage)
    # while it was scored: record the score as a new trial if the architecture is still free
    with ledger.lock():
        _feed(study, ledger.refresh(), ledger.study_name)
        holder = ledger.state.holder(ev.arch.text)
        if holder is None:
            return record(trial, TrialState.COMPLETE, values, ev.attrs())
        record(trial, TrialState.PRUNED, attrs={"duplicate_of": holder})
        return None


class _Hold:
    """The study lock, kept across consecutive trials for up to ``hold_s`` seconds (0: one
    trial). Taking it reads what the other workers changed meanwhile into the ledger and the
    sampler's study; letting go writes the deferred trials."""

    def __init__(self, ledger: StudyLedger, study: Any, hold_s: float):
        self.ledger, self.study, self.hold_s = ledger, study, hold_s
        self._stack: contextlib.ExitStack | None = None
        self._since = 0.0

    @contextlib.contextmanager
    def held(self):
        if self._stack is None:
            stack = contextlib.ExitStack()
            stack.enter_context(self.ledger.lock())
            self._stack, self._since = stack, time.monotonic()
            try:
                _feed(self.study, self.ledger.refresh(), self.ledger.study_name)
            except BaseException:
                self.release()
                raise
        try:
            yield
        except BaseException:
            self.release()
            raise
        if time.monotonic() - self._since >= self.hold_s:
            self.release()

    def release(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            stack.close()


@contextlib.contextmanager
def _heartbeat(ledger: StudyLedger, trial_id: int):
    """Record the trial's heartbeat every :data:`HEARTBEAT_S` seconds while it is scored (RDB
    storages; nothing for an in-memory study). The first beat waits :data:`FIRST_BEAT_S`, so a
    table lookup (milliseconds) writes nothing; a measurement or a training run is covered."""
    if not ledger.beats:
        yield
        return
    stop = threading.Event()

    def beat() -> None:
        if stop.wait(FIRST_BEAT_S):
            return
        while not stop.is_set():
            try:
                ledger.heartbeat(trial_id)
            except Exception:  # the storage is briefly unreachable: the next beat retries
                pass
            stop.wait(ledger.storage.get_heartbeat_interval())

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
    themselves (supernets).

    Args:
        space: the search space.
        archs: the architectures to propose, in order.
        taken: returns the architecture strings scored or claimed in the shared study
            (default: those in the sampler's own study).
    """

    def __init__(
        self,
        space: SearchSpace,
        archs: Sequence[Arch],
        taken: Callable[[], set[str]] | None = None,
    ):
        import optuna

        self._base = optuna.samplers.RandomSampler(seed=0)  # never decides: every value is fixed
        self.space = space
        self.queue = list(archs)
        self._last = self.queue[0] if self.queue else None
        self.taken = taken

    def infer_relative_search_space(self, study, trial) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution

        return {d: CategoricalDistribution(list(o)) for d, o in self.space.choices().items()}

    def sample_relative(self, study, trial, search_space) -> dict[str, Any]:
        if self.taken is not None:
            taken = self.taken()
        else:
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


def _tell_interrupted(
    ledger: StudyLedger,
    claim: Any,
    ev: Evaluation | None,
    settings: SearchSettings,
    study: Any = None,
    trial: Any = None,
) -> None:
    """Finish a claimed trial whose loop iteration was interrupted: COMPLETE when it was
    scored (the evaluation is not lost), with the sampler's system attributes and, under a
    latency limit, its constraint, as :func:`_finish` records them (without the constraint,
    a trial over the limit read as feasible to NSGA-II and the resumed search went
    elsewhere); FAIL otherwise."""
    from optuna.trial import TrialState

    try:
        if ev is not None and settings.metric in ev.costs:
            system = None
            try:  # never in the way of finishing the claim
                if study is not None and trial is not None:
                    limit = settings.max_latency
                    if limit is not None and "latency_ms" in ev.costs:
                        over = ev.costs["latency_ms"].value - limit
                        trial.set_constraint("latency_over_limit_ms", over)
                    system = frozen_trial(study, trial).system_attrs
            except Exception:  # noqa: BLE001 (the in-memory sampler study, not the storage)
                system = None
            ledger.finish(
                trial_id(claim), TrialState.COMPLETE, _values(ev, settings), ev.attrs(), system
            )
        else:
            ledger.finish(trial_id(claim), TrialState.FAIL, None, {})
    except Exception:  # the storage is gone: the rerun fails it as an orphan
        pass


def summarise(
    settings: SearchSettings, records: list[TrialRecord], trials_total: int, new_trials: int
) -> SearchResult:
    """Pareto set and best architecture of the completed trials."""
    limit = settings.max_latency
    # a lookup table's guess is within the limit only by its interval's upper end (the
    # derivation's rule: the table less its error margin), a measured or recorded value by itself
    feasible = [r for r in records if limit is None or r.costs["latency_ms"].within(limit)]
    acc = np.array([r.accuracy for r in feasible])
    cost = np.array([r.costs[settings.metric].value for r in feasible])
    front = [feasible[i] for i in pareto_order(acc, cost)]
    best = max(feasible, key=lambda r: (r.accuracy, -r.costs[settings.metric].value), default=None)
    return SearchResult(settings, records, front, best, trials_total, new_trials)
