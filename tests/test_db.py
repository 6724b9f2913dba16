"""Database URLs and database errors (:mod:`hwnas.db`), without a server."""

from __future__ import annotations

import pytest

psycopg = pytest.importorskip("psycopg")


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.DeadlockDetected("deadlock detected"),
        psycopg.errors.DiskFull("could not extend file: No space left on device"),
        psycopg.errors.SerializationFailure("could not serialize access"),
        psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        psycopg.errors.LockNotAvailable("could not obtain lock on row"),
        psycopg.InterfaceError("the cursor is closed"),
        psycopg.OperationalError("sqlite-like nonsense with no connection word"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_a_database_error_that_is_no_lost_connection_is_not_called_one(error):
    """Every psycopg OperationalError or InterfaceError was "lost the connection ... run the
    same command again", exit 2 and no traceback: a deadlock or a closed cursor (a bug), a full
    disk, the store's lock held a minute. Only a connection gone away is one now."""
    import sqlalchemy.exc

    from hwnas.db import lost_connection

    assert lost_connection(error) is None
    wrapped = sqlalchemy.exc.OperationalError("SELECT 1", {}, error)
    assert lost_connection(wrapped) is None


@pytest.mark.parametrize(
    "error",
    [
        psycopg.errors.AdminShutdown("terminating connection due to administrator command"),
        psycopg.errors.CrashShutdown("terminating connection due to crash of another process"),
        psycopg.errors.CannotConnectNow("the database system is shutting down"),
        psycopg.errors.ConnectionFailure("connection failure"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
        psycopg.OperationalError(
            'connection failed: connection to server at "10.0.0.5", port 5433 failed: '
            "Connection refused"
        ),
        psycopg.OperationalError("the connection is lost"),
    ],
    ids=lambda e: f"{type(e).__name__}-{str(e)[:20]}",
)
def test_a_connection_gone_away_is_one_line_naming_the_server(error):
    import sqlalchemy.exc

    from hwnas.db import lost_connection

    for exc in (error, sqlalchemy.exc.OperationalError("SELECT 1", {}, error)):
        line = lost_connection(exc)
        assert line is not None and line.startswith("lost the connection to the database server")
        assert line.endswith("run the same command again to resume")
    if "10.0.0.5" in str(error):
        assert "at 10.0.0.5:5433 (connection refused" in lost_connection(error)


DIFFERENT_STORAGES = [
    ("postgresql://u@/db?host=/run/pg1", "postgresql://u@/db?host=/run/pg2"),
    ("postgresql://u@localhost/db?port=5433", "postgresql://u@localhost/db"),
    ("postgresql://u@localhost:5432/db?port=5433", "postgresql://u@localhost:5432/db"),
    ("postgresql:///db?service=a", "postgresql:///db?service=b"),
    (
        "postgresql://u@h/db?options=-csearch_path%3Da",
        "postgresql://u@h/db?options=-csearch_path%3Db",
    ),
    ("postgresql://u@/db", "postgresql://u@127.0.0.1/db"),  # a Unix socket is not TCP
    ("postgresql://u@h1/db?host=h2", "postgresql://u@h1/db"),
    ("postgresql://u@h/db?hostaddr=10.0.0.1", "postgresql://u@h/db?hostaddr=10.0.0.2"),
    ("postgresql://u@h/db?dbname=other", "postgresql://u@h/db"),
]

SAME_STORAGES = [
    ("postgresql://u@localhost/db", "postgresql://u@127.0.0.1:5432/db"),
    ("postgresql://u@[::1]/db", "postgres://u:pw@localhost/db?connect_timeout=5"),
    ("postgresql://u@h/db?port=5432", "postgresql+psycopg://u@h:5432/db"),
    ("postgresql://u@x/db?host=/run/pg1", "postgresql://u@/db?host=/run/pg1&sslmode=disable"),
    ("postgresql://u@/db", "postgresql://u@/db?connect_timeout=3"),
]


@pytest.mark.parametrize(("a", "b"), DIFFERENT_STORAGES)
def test_query_parameters_that_choose_the_database_make_another_storage(a, b, tmp_path):
    """The storage's identity left the query out: ``?host=/run/pg1`` and ``?host=/run/pg2``,
    ``?port=5433`` and the default, two services, two search paths, and a Unix socket and
    127.0.0.1 were one storage, and a run folder let the other database's study replace its
    run."""
    import json

    from hwnas.db import storage_identity
    from hwnas.errors import HwnasError
    from hwnas.jobs.output import check_run_folder

    assert storage_identity(a) != storage_identity(b)
    (tmp_path / "summary.json").write_text(json.dumps({"settings": {"study": "s"}, "storage": a}))
    with pytest.raises(HwnasError, match="in another storage"):
        check_run_folder(tmp_path, "s", storage_url=b)


@pytest.mark.parametrize(("a", "b"), SAME_STORAGES)
def test_the_same_database_written_another_way_is_the_same_storage(a, b, tmp_path):
    import json

    from hwnas.db import storage_identity
    from hwnas.jobs.output import check_run_folder

    assert storage_identity(a) == storage_identity(b)
    (tmp_path / "summary.json").write_text(json.dumps({"settings": {"study": "s"}, "storage": a}))
    check_run_folder(tmp_path, "s", storage_url=b)
