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
