"""The measurement store: every measurement hwnas takes, in one SQLite file (WAL mode) or, for
workers on several machines, in a PostgreSQL database (``--store postgresql://...``).

A measurement is identified by (device, runtime, metric, model hash, batch size, input shape);
the store keeps the first one taken for that key, unless that one is *flagged* (too noisy to
use, see :mod:`hwnas.runtimes.timing`): a flagged row is replaced by the next measurement of its
key. The runtime part of the key names what was measured: "ort", "ort:cuda", or
"tvm:<target kind>-<hash of target and tuning budget>". Many processes may share a store: SQLite's
write-ahead log lets readers run beside one writer, and :meth:`MeasurementStore.device_lock`
serialises the measuring itself per device, so two workers never time the same model twice nor
disturb each other's timings on the same CPU.

A store is read as data someone may have handed over (workers share one; a copy travels): a
row whose value is not a finite number of ms or mJ in (0, :data:`MAX_VALUE`], or that does not
parse (:func:`valid_measurement`), is not a measurement. Reading treats it as absent: it is
not returned, so it is measured again, and :meth:`MeasurementStore.append` replaces it as it
replaces a flagged row.

On PostgreSQL the same table is kept on the server (through psycopg 3, ``pip install
'hwnas[postgres]'``; SQL is the same but for placeholders and column types), and
:meth:`MeasurementStore.device_lock` is a PostgreSQL advisory lock, held by a dedicated
connection and released by the server if its holder dies: workers on any machine measure each
model of a shared device (a board) once; a machine's own CPU or GPU has a lock per machine.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

from hwnas.db import check_not_url, check_sqlite_file, connect_args, create_wal_database
from hwnas.devices.base import Measurement
from hwnas.errors import HwnasError
from hwnas.paths import confined, file_lock, hwnas_home

SCHEMA = """
CREATE TABLE IF NOT EXISTS measurements (
    id INTEGER PRIMARY KEY,
    device TEXT NOT NULL,
    runtime TEXT NOT NULL,
    metric TEXT NOT NULL,
    model_hash TEXT NOT NULL,
    label TEXT NOT NULL,
    batch_size INTEGER NOT NULL,
    input_shape TEXT NOT NULL,
    value REAL NOT NULL,
    samples TEXT NOT NULL,
    cv REAL NOT NULL,
    iqr REAL NOT NULL,
    versions TEXT NOT NULL,
    measured_at REAL NOT NULL,
    source TEXT NOT NULL,
    flagged INTEGER NOT NULL DEFAULT 0,
    extra TEXT NOT NULL DEFAULT '{}',
    UNIQUE (device, runtime, metric, model_hash, batch_size, input_shape)
);
CREATE INDEX IF NOT EXISTS by_device ON measurements (device, metric);
"""

_COLUMNS = (
    "device, runtime, metric, model_hash, label, batch_size, input_shape, value, samples, cv, "
    "iqr, versions, measured_at, source, flagged, extra"
)

ADDED_COLUMNS = {
    "flagged": "INTEGER NOT NULL DEFAULT 0",
    "extra": "TEXT NOT NULL DEFAULT '{}'",
}
"""Columns added after the first store format, with their definitions (for migration)."""


MAX_VALUE = 1e9
"""The largest value (ms or mJ per inference) a stored row may hold: 11.6 days, or 1 MJ. A
larger one (``1e308``) is no measurement, and its sums over a network's kernels overflow to
``inf``."""

_VALID_SQL = f"COALESCE(measurements.value > 0 AND measurements.value <= {MAX_VALUE:.0f}, FALSE)"
"""SQL true for a row whose value is a number in (0, MAX_VALUE] (both back ends: SQLite ranks
text above every number, PostgreSQL's NaN above every other float, a NULL is not true)."""


def batch_of(input_shape) -> int:
    """The batch size of a first input of shape ``input_shape``: its first axis, or 1 for a
    scalar (a model whose first input is a scalar has no batch axis)."""
    return int(input_shape[0]) if len(input_shape) else 1


def _shape_key(shape: tuple[int, ...]) -> str:
    return "x".join(str(int(d)) for d in shape)


PG_SCHEMA = (
    SCHEMA.replace("id INTEGER PRIMARY KEY", "id BIGSERIAL PRIMARY KEY")
    .replace(" REAL ", " DOUBLE PRECISION ")
    .replace(" REAL,", " DOUBLE PRECISION,")
)


def check_store_folder(path: str | Path) -> None:
    """Refuse a SQLite measurement store (a path, or an ``sqlite:///`` URL) in a folder that
    is not there: a mistyped path, not a new empty store to start silently (the hwnas home is
    made on first use). A PostgreSQL URL passes.

    Raises:
        HwnasError: one line naming the folder.
    """
    from hwnas.db import is_url

    text = str(path)
    if is_url(text) and not text.startswith("sqlite"):
        return
    file = Path(text.removeprefix("sqlite:///").split("?", 1)[0]).expanduser()
    if not file.parent.is_dir() and file.parent.resolve() != hwnas_home().resolve():
        raise HwnasError(
            f"measurement store {file}: folder {file.parent} does not exist "
            "(create it, or check the path)"
        )


class MeasurementStore:
    """Measurements in a SQLite file or a PostgreSQL database.

    Args:
        path: the database file (its folder is created if missing), or a ``postgresql://``
            URL (a bare URL uses psycopg 3; the password is never shown).

    Attributes:
        path: the SQLite file, or the URL without its password.

    Raises:
        HwnasError: the file cannot be created or is not a readable hwnas store; a path that
            is a mistyped database URL (``postgresql:/...``); the PostgreSQL driver is missing
            or the server cannot be reached (one line).
    """

    def __init__(self, path: str | Path):
        from hwnas.db import is_url

        self._pg = is_url(str(path)) and not str(path).startswith("sqlite")
        if self._pg:
            self._open_postgres(str(path))
            return
        check_not_url(str(path), "measurement store")  # its password echoed as a folder
        if str(path).startswith("sqlite:///"):
            path = str(path).removeprefix("sqlite:///")
            if "?" in path:  # a query was kept in the file's name, a password in it printed
                raise HwnasError(
                    "measurement store: an sqlite:/// URL takes no query (?...); give the "
                    "file's path"
                )
        self.path = Path(path).expanduser()
        existed = self.path.exists()
        check_store_folder(self.path)
        if self.path.is_dir():  # refused before its lock file is made beside it
            check_sqlite_file(self.path, "measurement store")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with file_lock(self.path.with_name(self.path.name + ".hwnas-lock")):
                # an empty or truncated file is not a new store (checked while no other
                # process is creating one)
                check_sqlite_file(self.path, "measurement store")
                existed = self.path.exists()
                if not existed:  # whole or not at all: a kill leaves no empty file behind
                    create_wal_database(self.path)
                # absolute: SQLite reads a relative "file:/x.db" as a URI naming /x.db
                self._db = sqlite3.connect(self.path.absolute(), timeout=60.0, isolation_level=None)
                self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=60000")
            self._db.executescript(SCHEMA)
            self._migrate()
        except (OSError, sqlite3.Error) as exc:
            if not existed:  # a full disk must not leave an empty database behind
                for suffix in ("", "-wal", "-shm"):
                    with contextlib.suppress(OSError):
                        Path(f"{self.path}{suffix}").unlink()
            raise HwnasError(f"measurement store {self.path} is not usable: {exc}") from None

    def _open_postgres(self, url: str) -> None:
        from hwnas.db import check_driver, connect_error, normalize_url, redact

        typed, url = url, normalize_url(url)
        redact(url)  # refuses an unparseable URL; its secrets are known to scrub()
        self.path = redact(typed)  # type: ignore[assignment]  # shown as the user typed it
        check_driver(url)
        self._conninfo = "postgresql://" + url.partition("://")[2]
        import psycopg

        try:
            self._db = psycopg.connect(self._conninfo, autocommit=True, **connect_args(url))
            with self._advisory("hwnas-store-schema"):  # concurrent CREATE IF NOT EXISTS races
                for statement in filter(str.strip, PG_SCHEMA.split(";")):
                    self._db.execute(statement)
        except psycopg.Error as exc:
            why = connect_error(url, exc)
            raise HwnasError(f"measurement store {self.path} is not usable: {why}") from None

    @contextlib.contextmanager
    def _advisory(self, name: str, conn=None) -> Iterator[None]:
        from hwnas.db import lock_key

        conn = conn or self._db
        key = lock_key(name)
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _execute(self, sql: str, args=()):
        """Run ``sql`` (written with ``?`` placeholders) on either back end.

        Raises:
            HwnasError: the database refused it (a table another program changed: a ``value``
                column of text; a lock held for a minute), in one line.
            LostConnectionError: the connection to its server was lost
                (:func:`hwnas.db.lost_connection`), in one line (exit status 1).
        """
        if self._pg:
            import psycopg

            try:
                return self._db.execute(sql.replace("?", "%s"), args)
            except psycopg.Error as exc:
                self._refused(exc)
        try:
            return self._db.execute(sql, args)
        except sqlite3.Error as exc:
            self._refused(exc)

    def _refused(self, exc: BaseException) -> NoReturn:
        from hwnas.db import lost_connection, scrub
        from hwnas.errors import LostConnectionError

        lost = lost_connection(exc)
        if lost is not None:  # the server went away: not a table to blame
            raise LostConnectionError(f"measurement store {self.path}: {lost}") from None
        first = (scrub(str(exc)).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise HwnasError(
            f"measurement store {self.path} is not usable: {first} (a table hwnas did not "
            "make or another program changed? give another --store)"
        ) from None

    def _migrate(self) -> None:
        """Add the columns that stores written by older hwnas versions lack (in place)."""
        have = {row[1] for row in self._db.execute("PRAGMA table_info(measurements)")}
        for column, definition in ADDED_COLUMNS.items():
            if column in have:
                continue
            try:
                self._db.execute(f"ALTER TABLE measurements ADD COLUMN {column} {definition}")
            except sqlite3.OperationalError as exc:  # another process migrated meanwhile
                if "duplicate column" not in str(exc):
                    raise

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> MeasurementStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the two operations ---------------------------------------------------------------

    def append(self, m: Measurement) -> bool:
        """Store ``m`` unless an unflagged measurement with its key is already there.

        Returns:
            True if stored (new, or replacing a flagged one or a row that is no measurement,
            :func:`valid_measurement`), False if the key was already taken by an unflagged
            measurement (which is kept).
        """
        row = (
            m.device,
            m.runtime,
            m.metric,
            m.model_hash,
            m.label,
            m.batch_size,
            _shape_key(m.input_shape),
            float(m.value),
            json.dumps([round(s, 6) for s in m.samples]),
            float(m.cv),
            float(m.iqr),
            json.dumps(m.versions, sort_keys=True),
            float(m.measured_at),
            m.source,
            int(bool(m.flagged)),
            json.dumps(m.extra, sort_keys=True, default=str),
        )
        replace = ", ".join(f"{c}=excluded.{c}" for c in _COLUMNS.split(", "))
        insert = (
            f"INSERT INTO measurements ({_COLUMNS}) VALUES ({','.join('?' * len(row))}) "
            "ON CONFLICT (device, runtime, metric, model_hash, batch_size, input_shape) "
            f"DO UPDATE SET {replace} WHERE measurements.flagged <> 0 OR NOT {_VALID_SQL}"
        )
        if self._execute(insert, row).rowcount == 1:
            return True
        # the key is taken: by a measurement (kept), or by a row that does not parse
        # (_to_measurement), which is replaced as one whose value is no measurement is
        cur = self._execute(
            f"SELECT id, {_COLUMNS} FROM measurements WHERE device=? AND runtime=? AND metric=? "
            "AND model_hash=? AND batch_size=? AND input_shape=?",
            (row[0], row[1], row[2], row[3], row[5], row[6]),
        )
        old = cur.fetchone()
        if old is None or _to_measurement(tuple(old[1:])) is not None:
            return False
        self._execute("DELETE FROM measurements WHERE id=?", (old[0],))
        return self._execute(insert, row).rowcount == 1

    def lookup(
        self,
        device: str,
        runtime: str,
        metric: str,
        model_hash: str,
        input_shape: tuple[int, ...],
    ) -> Measurement | None:
        """The stored measurement for this key (possibly flagged: check ``.flagged``), or None:
        none stored, or a row that is no measurement (:func:`valid_measurement`), which is
        measured again."""
        cur = self._execute(
            f"SELECT {_COLUMNS} FROM measurements WHERE device=? AND runtime=? AND metric=? "
            "AND model_hash=? AND batch_size=? AND input_shape=?",
            (device, runtime, metric, model_hash, batch_of(input_shape), _shape_key(input_shape)),
        )
        row = cur.fetchone()
        return None if row is None else _to_measurement(row)

    # -- queries ----------------------------------------------------------------------------

    def measurements(
        self, device: str | None = None, metric: str | None = None
    ) -> list[Measurement]:
        """Stored measurements, oldest first, optionally of one device and metric; rows that are
        no measurement (:func:`valid_measurement`) left out."""
        sql, args = f"SELECT {_COLUMNS} FROM measurements WHERE 1=1", []
        if device is not None:
            sql, args = sql + " AND device=?", [*args, device]
        if metric is not None:
            sql, args = sql + " AND metric=?", [*args, metric]
        rows = (_to_measurement(r) for r in self._execute(sql + " ORDER BY id", args))
        return [m for m in rows if m is not None]

    def counts(self) -> dict[str, int]:
        """Number of stored measurements per device (rows whose value is no measurement left
        out; a row with a bad ``cv`` or unreadable fields, which :meth:`measurements` also
        leaves out, is still counted)."""
        cur = self._execute(
            f"SELECT device, COUNT(*) FROM measurements WHERE {_VALID_SQL} GROUP BY device"
        )
        return {device: int(n) for device, n in cur.fetchall()}

    # -- concurrency ------------------------------------------------------------------------

    @contextlib.contextmanager
    def device_lock(self, device: str, this_machine: bool = False) -> Iterator[None]:
        """Exclusive, cross-process lock for measuring on ``device`` (blocks until free).

        The lock is an ``flock`` on a file beside the database, or a PostgreSQL advisory lock on
        its own connection, so it is released when the holder exits, even if killed.

        Args:
            device: the device's name.
            this_machine: the device is this machine's own (a local CPU or GPU,
                :attr:`hwnas.devices.base.Device.on_this_machine`): on a server the lock names
                this machine too (:func:`machine_name`: ``HWNAS_MACHINE``, else its host
                name), so every machine measuring its own ``cpu`` does not wait for all the
                others. Otherwise (a board the team shares) one lock for every machine.
        """
        if self._pg:
            import psycopg

            name = f"hwnas-device:{device}"
            if this_machine:
                name += f"@{machine_name()}"
            with psycopg.connect(
                self._conninfo, autocommit=True, **connect_args(self._conninfo)
            ) as conn:
                with self._advisory(name, conn):
                    yield
            return
        locks = self.path.parent / (self.path.name + ".locks")
        with file_lock(confined(locks, f"{device}.lock", what="device name")):
            yield


def machine_name() -> str:
    """The physical machine this process measures on, which names its own devices' lock on a
    PostgreSQL store (:meth:`MeasurementStore.device_lock`): ``HWNAS_MACHINE`` where it is set
    (containers or pods on one machine have host names of their own, and then measured its
    CPU at once), else the host name."""
    import socket

    return os.environ.get("HWNAS_MACHINE", "").strip() or socket.gethostname()


def valid_measurement(value, cv, iqr) -> bool:
    """Whether a stored row's numbers are a measurement's: ``value`` a finite number of ms or
    mJ in (0, :data:`MAX_VALUE`], ``cv`` (a ratio) and ``iqr`` (ms or mJ) finite and not
    negative. A store edited by hand or handed over may hold anything (``1e308``, ``inf``,
    ``nan``, ``-1``, text): the kernel-level predictor's regressors refuse infinities, and a
    network's sum overflows."""

    def number(x) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    return number(value) and 0 < value <= MAX_VALUE and all(number(x) and x >= 0 for x in (cv, iqr))


def _to_measurement(row: tuple) -> Measurement | None:
    """The measurement of a stored row, or None: a row that is no measurement (its numbers,
    :func:`valid_measurement`, or a field that does not parse)."""
    (device, runtime, metric, model_hash, label, batch, shape, value, samples, cv, iqr,
     versions, measured_at, source, flagged, extra) = row  # fmt: skip
    if not valid_measurement(value, cv, iqr):
        return None
    try:
        m = _parse_row(row)
    except (ValueError, TypeError, AttributeError):  # json's errors are ValueErrors
        return None
    ok = isinstance(m.versions, dict) and isinstance(m.extra, dict)
    return m if ok else None


def _parse_row(row: tuple) -> Measurement:
    (device, runtime, metric, model_hash, label, batch, shape, value, samples, cv, iqr,
     versions, measured_at, source, flagged, extra) = row  # fmt: skip
    return Measurement(
        device=device,
        runtime=runtime,
        metric=metric,
        model_hash=model_hash,
        label=label,
        batch_size=int(batch),
        input_shape=tuple(int(d) for d in shape.split("x")),
        value=float(value),
        samples=tuple(json.loads(samples)),
        cv=float(cv),
        iqr=float(iqr),
        versions=json.loads(versions),
        measured_at=float(measured_at),
        source=source,
        flagged=bool(flagged),
        extra=json.loads(extra),
    )
