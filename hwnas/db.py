"""Database URLs of study storages and measurement stores: drivers and connection errors.

Users write ``postgresql://user@host:5432/db``; SQLAlchemy would pick the psycopg2 driver for
that, which hwnas does not install. :func:`normalize_url` names psycopg 3 (``pip install
'hwnas[postgres]'``) for bare PostgreSQL URLs and leaves explicit drivers alone
(``postgresql+psycopg2://`` keeps working where psycopg2 is installed). :func:`connect_error`
turns a driver's connection error into one line that says what failed, without the password.
:func:`redact` is the one way a URL is shown or written: without its password and secret
parameters; a URL it cannot parse is refused, never echoed.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import re
import threading
import time
from pathlib import Path

from hwnas.errors import HwnasError

POSTGRES_DRIVER = "psycopg"
"""SQLAlchemy dialect driver used for bare ``postgresql://`` URLs (psycopg 3)."""

INSTALL_HINT = "pip install 'hwnas[postgres]'"


def is_url(text: str) -> bool:
    """Whether ``text`` is a database URL (``scheme://...``) rather than a file path."""
    return "://" in str(text)


MISTYPED_URL = re.compile(
    r"^(postgres|postgresql|sqlite|mysql|mariadb|oracle|mssql)(\+[A-Za-z0-9_]+)?"
    r"(:/|:[^/@]*@|//)"  # postgresql:/host, postgres:user:pw@host, postgresql//user@host
    r"|^[A-Za-z][A-Za-z0-9+.-]*(:/*|//)[^/@:]*:[^/@]*@",  # pgsql:/user:pw@host: a password
    re.IGNORECASE,
)
"""A path that is a database URL mistyped (``postgresql:/user:pw@host/db``,
``postgresql//user:pw@host/db``, ``postgres:user:pw@host/db``): read as a file path, it
named a folder that does not exist and the error echoed the password. A known database scheme
followed by ``:/``, ``:USER@`` or ``//``, or any scheme-like word followed by
``USER:PASSWORD@``; a path that merely starts with such a word is a path (``sqlite/m.db``, a
folder named sqlite; ``file:/tmp/x.db``)."""


def hide_userinfo(text: str) -> str:
    """``text`` with the password of every ``user:password@`` in it replaced by ``***`` (for
    text that is no URL :func:`redact` can parse); each password hidden is remembered for
    :func:`scrub`."""
    from urllib.parse import unquote

    def hide(found: re.Match) -> str:
        _SECRETS.update({found.group(2), unquote(found.group(2))} - {""})
        return f"{found.group(1)}:***@"

    return re.sub(r"([^/:@]*):([^/@]*)@", hide, str(text))


def check_not_url(path: str, what: str) -> None:
    """Refuse a file path that is a mistyped database URL (:data:`MISTYPED_URL`): taken for a
    file, it was reported as a missing folder, password included. A URL (``://``) passes.

    Args:
        path: the path as typed.
        what: how the user knows it ("measurement store").

    Raises:
        HwnasError: one line, the path shown without its password.
    """
    if not is_url(str(path)) and MISTYPED_URL.match(str(path)):
        raise HwnasError(
            f"{what} {hide_userinfo(str(path))} looks like a database URL without '://': "
            "write postgresql://USER@HOST:PORT/DB, or give a file path"
        )


def normalize_url(url: str) -> str:
    """``url`` with the psycopg 3 driver named when a PostgreSQL URL names none
    (``postgresql://`` and ``postgres://``); other URLs unchanged."""
    scheme, sep, rest = str(url).partition("://")
    if sep and scheme in ("postgresql", "postgres"):
        return f"postgresql+{POSTGRES_DRIVER}://{rest}"
    return str(url)


def absolute_url(url: str) -> str:
    """``url`` with a relative SQLite file made absolute (``sqlite:///rel.db`` run from
    /home/me: ``sqlite:////home/me/rel.db``), for what hwnas records of a storage: a relative
    one in a run's summary.json named another database from another folder, and a search there
    wrote over that run; other URLs (and ``sqlite://`` in memory) unchanged."""
    prefix = "sqlite:///"
    if not str(url).startswith(prefix):
        return str(url)
    path, query = str(url)[len(prefix) :].partition("?")[::2]
    if not path or path.startswith("/") or path == ":memory:":
        return str(url)
    return prefix + str(Path(path).expanduser().absolute()) + (f"?{query}" if query else "")


SECRET_PARAMETERS = ("password", "passwd", "pwd", "secret", "token")
"""Query parameters whose values are secrets (libpq's ``?password=``, ``sslpassword``...): any
parameter whose name contains one of these."""

_SECRETS: set[str] = set()
"""Every secret :func:`redact` has seen in this process (what :func:`scrub` removes)."""


def redact(url: str) -> str:
    """``url`` without its secrets, for anything hwnas writes or shows (files, the study, logs,
    the terminal, messages): the password and any secret query parameter become ``***``.
    The secrets are remembered, so that :func:`scrub` removes them from any other text (a
    driver's error message).

    Raises:
        HwnasError: a URL that SQLAlchemy cannot parse: refused without echoing it (it may
            hold a password in a place hwnas cannot tell), or one whose host holds an "@" (a
            password's unencoded "@": SQLAlchemy would read the rest of it as the host).
    """
    from urllib.parse import quote

    from sqlalchemy.engine import make_url

    try:
        u = make_url(str(url))
    except Exception:
        raise HwnasError(
            "cannot parse the database URL given (not shown: it may hold a password); write it "
            "as dialect[+driver]://user:password@host:port/database"
        ) from None
    if "@" in (u.host or ""):  # an unencoded "@" in the password: the rest of it is the host
        raise HwnasError(
            "the database URL given has an '@' after the one before the host (not shown: it may "
            "hold a password); write an '@' in a user name or password as %40"
        )
    found = [u.password] if u.password else []
    hidden = {}
    for key, value in u.query.items():
        if any(word in key.lower() for word in SECRET_PARAMETERS):
            found += [value] if isinstance(value, str) else list(value)
            hidden[key] = "***"
    if not found:  # nothing to hide: the URL as given (rendering would re-quote a file name)
        return str(url)
    for secret in found:
        if secret:
            _SECRETS.update({str(secret), quote(str(secret), safe=""), quote(str(secret))})
    if hidden:
        u = u.update_query_dict(hidden)
    return u.render_as_string(hide_password=True).replace("%2A%2A%2A", "***")


def typeable_url(shown: str) -> str | None:
    """The URL a user can give for a storage recorded as ``shown`` (redacted, :func:`redact`):
    ``shown`` itself, or, where a secret was recorded as ``***`` (no password to type), the
    URL without the password and without the secret query parameters, to be given with the
    password (in the URL, ``PGPASSWORD`` or ``~/.pgpass``). None: ``shown`` does not parse."""
    if "***" not in shown:
        return shown
    from sqlalchemy.engine import URL, make_url

    try:
        u = make_url(shown)
        return URL.create(
            u.drivername, u.username, None, u.host, u.port, u.database,
            {k: v for k, v in u.query.items() if v != "***"},
        ).render_as_string(hide_password=False)  # fmt: skip
    except Exception:  # noqa: BLE001 - not a URL
        return None


LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "[::1]")
"""Host names of this machine's database server over TCP, one server whichever is written. No
host (``postgresql:///db``) is not one of them: libpq connects to a Unix socket then, which may
be another server than the one listening on localhost's port."""

DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306}

IDENTITY_PARAMETERS = ("host", "hostaddr", "port", "service", "dbname", "user", "options")
"""Query parameters that choose the database a URL connects to (libpq's): part of
:func:`storage_identity`. Any other (``connect_timeout``, ``sslmode``...) does not."""


def storage_identity(url: str) -> str | tuple:
    """A study storage's URL as the database it names, to tell whether two URLs are one
    storage: an SQLite file by its resolved path (a relative one from the current folder); a
    server's database by its dialect without the driver, host (``localhost`` = ``127.0.0.1`` =
    ``::1``; no host, a Unix socket, is none of them; a socket folder stays as written), host
    address, port (its default where none is given), service, database, user and server
    options, a query parameter of :data:`IDENTITY_PARAMETERS` overriding what the URL says
    before it (``?host=/run/pg1``, ``?port=5433``); whatever its password, other query
    parameters, driver or ``postgres://`` spelling (a summary records the URL redacted, so the
    same database given with ``PGPASSWORD`` or through another driver was "another storage").
    A URL that does not parse is compared as written. Raises nothing."""
    if url.startswith("sqlite:///"):
        try:
            return "sqlite:///" + str(Path(url.removeprefix("sqlite:///")).resolve())
        except (OSError, RuntimeError, ValueError):
            return url
    from sqlalchemy.engine import make_url

    try:
        u = make_url(url)
    except Exception:  # noqa: BLE001 - compared as written
        return url
    dialect = u.drivername.partition("+")[0].lower()
    dialect = "postgresql" if dialect == "postgres" else dialect
    query = {
        key: value if isinstance(value, str) else ",".join(value)
        for key, value in u.query.items()
        if key in IDENTITY_PARAMETERS
    }
    host = query.pop("host", u.host or "")
    host = host if host.startswith("/") else host.lower()  # a socket folder: a path
    host = "localhost" if host in LOCAL_HOSTS else host
    port = query.pop("port", u.port)
    if isinstance(port, str) and port.strip().isdigit():
        port = int(port)
    database = query.pop("dbname", u.database)
    user = query.pop("user", u.username)
    rest = tuple(query.get(key) for key in ("hostaddr", "service", "options"))
    return (dialect, host, port or DEFAULT_PORTS.get(dialect), database, user, *rest)


def storage_hint(shown: str) -> str:
    """``--storage URL`` for the storage a summary records as ``shown`` (redacted): a URL
    whose password was recorded as ``***`` is named without it (``***`` is no password to
    type) and the user is told to give theirs (:func:`typeable_url`): what a message
    suggests typing, never ``***``."""
    bare = typeable_url(shown)
    if bare is None:
        return "--storage with the URL of that storage and its password"
    import shlex  # a command to paste: a path with a space or ';' stays one argument

    if bare == shown:
        return f"--storage {shlex.quote(shown)}"
    return (
        f"--storage {shlex.quote(bare)} with its password (in the URL as USER:PASSWORD@, or in "
        "PGPASSWORD or ~/.pgpass)"
    )


def secrets_seen() -> bool:
    """Whether :func:`redact` has seen a secret in this process."""
    return bool(_SECRETS)


def scrub(text: str) -> str:
    """``text`` with every secret :func:`redact` has seen replaced by ``***`` (a backstop for
    messages hwnas does not write itself: a driver's error that quotes its connection
    string)."""
    import re

    for secret in sorted(_SECRETS, key=len, reverse=True):
        if len(secret) >= 3:  # a whole token: the password "postgres" left "postgresql" alone
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])", "***", text)
    return text


CONNECT_TIMEOUT_S = 10
"""Seconds a PostgreSQL connection may take (libpq's ``connect_timeout``) unless the URL gives
its own: a server that accepts the connection and never answers hung every command."""


def connect_args(url: str) -> dict[str, int]:
    """The driver's keyword arguments for a connection to ``url``: the connect timeout
    (:data:`CONNECT_TIMEOUT_S`) where ``url`` has none of its own. The server's ``HOST:PORT``
    is remembered for :func:`lost_connection`."""
    with contextlib.suppress(Exception):  # an unparseable URL: its connection says so
        from sqlalchemy.engine import make_url

        u = make_url(str(url))
        server = f"{u.host or 'localhost'}:{u.port or 5432}"
        if server not in _SERVERS:
            _SERVERS.append(server)
    return {} if "connect_timeout" in str(url) else {"connect_timeout": CONNECT_TIMEOUT_S}


def driver_installed(module: str) -> bool:
    """Whether the database driver module ``module`` can be imported (without importing it)."""
    return importlib.util.find_spec(module) is not None


def check_driver(url: str) -> None:
    """Raise a one-line error when the driver ``url`` needs is not installed.

    Raises:
        HwnasError: a PostgreSQL URL without psycopg (names :data:`INSTALL_HINT`), or another
            driver module that cannot be imported.
    """
    scheme = str(url).partition("://")[0]
    if scheme.partition("+")[0].lower() not in ("postgres", "postgresql"):
        _check_other_driver(url, scheme)
        return
    driver = scheme.partition("+")[2] or "psycopg2"
    if not driver_installed(driver):
        raise HwnasError(
            f"PostgreSQL URL {redact(url)} needs the {driver} driver: {INSTALL_HINT}"
            if driver == POSTGRES_DRIVER
            else f"PostgreSQL URL {redact(url)} names the {driver} driver, which is not installed"
        )


def _check_other_driver(url: str, scheme: str) -> None:
    """:func:`check_driver` for a URL that is not PostgreSQL's: SQLAlchemy must know its
    dialect and the dialect's driver module must import (``mysql://`` without MySQLdb)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        dialect = make_url(url).get_dialect()
    except NoSuchModuleError:
        import difflib

        name = scheme.partition("+")[0]
        known = ["postgresql", "sqlite", "mysql", "mariadb", "oracle", "mssql"]
        close = difflib.get_close_matches(name.lower(), known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        raise HwnasError(
            f"unknown database scheme '{name}' in {redact(url)} ({hint}a study storage or "
            "store is sqlite:///PATH or postgresql://USER@HOST/DB)"
        ) from None
    except ArgumentError:
        return  # not parsed as a URL: redact() says so
    try:
        dialect.import_dbapi()
    except ImportError as exc:
        raise HwnasError(
            f"storage URL {redact(url)} needs the {exc.name or 'database'} driver, which is "
            "not installed"
        ) from None


def connect_error(url: str, exc: BaseException) -> str:
    """One line saying why connecting to ``url`` failed: unreachable server, refused
    connection, authentication, missing database; else the driver's first line."""
    from sqlalchemy.engine import make_url

    redact(url)  # its secrets are known to scrub()
    text = scrub(str(getattr(exc, "orig", None) or exc).strip())
    low = text.lower()
    timeout = CONNECT_TIMEOUT_S
    try:
        u = make_url(url)
        where = f"{u.host or 'localhost'}:{u.port or 5432}"
        database = u.database or ""
        given = u.query.get("connect_timeout")  # the URL's own wins (connect_args)
        if isinstance(given, str) and given.strip().lstrip("-").isdigit():
            timeout = int(given)
    except Exception:  # not reached: redact() above refused it
        where, database = "the server", ""
    if "timeout expired" in low or "timed out" in low:
        why = f"the database server at {where} did not answer in {timeout} s"
    elif "connection refused" in low or "could not connect" in low or "timeout" in low:
        why = f"cannot connect to the database server at {where} (connection refused)"
    elif "password authentication failed" in low or "authentication" in low:
        why = f"the database server at {where} refused the user name or password"
    elif "does not exist" in low and "database" in low:
        why = f"database '{database}' does not exist on the server at {where}"
    elif "name or service not known" in low or "could not translate host" in low:
        host = where.rpartition(":")[0] or where
        why = f"unknown database host '{host}' (no such name in DNS or /etc/hosts)"
    else:
        why = text.splitlines()[0] if text else type(exc).__name__
    return why


def lock_key(name: str) -> int:
    """A signed 64-bit integer for ``name`` (PostgreSQL advisory lock keys are bigint)."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)


SQLITE_HEADER = b"SQLite format 3\x00"


def create_wal_database(path: str | Path) -> None:
    """Create an empty SQLite database in WAL mode (persistent in the file) at ``path``, whole
    or not at all: it is made under a temporary name beside ``path`` and renamed into place, so
    a process killed while creating it leaves no empty file, which :func:`check_sqlite_file`
    would refuse on every later run. WAL mode lets Optuna create its tables with one sync per
    transaction instead of a rollback journal's several.

    The caller holds the lock under which this file is created (so the temporary files of an
    earlier creator are those of a process that died, and are removed).

    Raises:
        OSError, sqlite3.Error: the folder cannot be written (a full disk).
    """
    import sqlite3

    path = Path(path)
    for stale in path.parent.glob(f".{path.name}.creating-*"):
        with contextlib.suppress(OSError):
            stale.unlink()
    tmp = path.with_name(f".{path.name}.creating-{os.getpid()}")
    try:
        conn = sqlite3.connect(tmp.absolute())  # a relative "file:..." is read as a URI
        try:
            conn.execute("PRAGMA journal_mode=WAL")
        finally:
            conn.close()
        os.replace(tmp, path)
    finally:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                Path(f"{tmp}{suffix}").unlink()


def check_sqlite_file(path: str | Path, what: str) -> None:
    """Refuse an existing file that is not a whole SQLite database, before SQLite would take an
    empty file for a new database (and a search would start afresh beside a lost study).

    Checks the 100-byte header (https://www.sqlite.org/fileformat.html): its magic string, a
    file size that is a whole number of pages, and at least the pages the header declares
    (a truncated copy). A missing file is fine (it is created).

    Args:
        path: the database file.
        what: how the user knows it ("study storage", "measurement store").

    Raises:
        HwnasError: one line naming the file and what is wrong with it.
    """
    path = Path(path)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    except OSError as exc:
        raise HwnasError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
    fix = "restore it from a backup, or move it away to start afresh"
    if path.is_dir():
        raise HwnasError(f"{what} {path} is a folder, not an SQLite database")
    if size == 0:
        raise HwnasError(f"{what} {path} is empty (0 bytes), not an SQLite database: {fix}")
    # another process may be committing to it: SQLite writes page 1 (the header, with the new
    # page count) before the pages that extend the file, so a reader can see a header ahead of
    # the file for a moment. A truncated file stays truncated: look again a few times.
    for attempt in range(TRUNCATION_LOOKS):
        if attempt:
            time.sleep(0.1 * attempt)
        try:
            head = _read_head(path)
            size = path.stat().st_size
        except OSError as exc:
            raise HwnasError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None
        if not head.startswith(SQLITE_HEADER):
            raise HwnasError(f"{what} {path} is not an SQLite database: {fix}")
        page = int.from_bytes(head[16:18], "big")
        page = 65536 if page == 1 else page
        pages = int.from_bytes(head[28:32], "big")
        declared_valid = pages > 0 and head[24:28] == head[92:96]
        if not (len(head) < 100 or size % page or (declared_valid and size < pages * page)):
            return
    expected = f" of the {pages * page} its header declares" if declared_valid else ""
    raise HwnasError(f"{what} {path} is truncated ({size} bytes{expected}): {fix}")


_HEAD_FDS: dict[tuple[int, int], int] = {}
_HEAD_FDS_LOCK = threading.Lock()


def _read_head(path: Path) -> bytes:
    """The first 100 bytes of ``path``, read through a descriptor this process keeps open
    for its lifetime (one per database file).

    Closing any descriptor of a file releases every POSIX lock the process holds on it,
    SQLite's included (https://www.sqlite.org/howtocorrupt.html, section 2.2). A header read
    with ``open()`` while a connection of this process (an earlier study storage or store
    of the same file, as ``hwnas.search`` then ``hwnas.zoo.verify`` from Python have) held
    its WAL-mode shared lock let another worker, closing its own connection, find the file
    unused: it checkpointed and deleted the write-ahead log, and this process's connection
    then read a stale database (a study written by the other worker was missing) or failed
    with "database disk image is malformed".

    Raises:
        OSError: the file cannot be opened or read.
    """
    st = os.stat(path)
    with _HEAD_FDS_LOCK:
        fd = _HEAD_FDS.get((st.st_dev, st.st_ino))
        if fd is None:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            opened = os.fstat(fd)  # the file now at ``path`` (it may have been replaced)
            # a second descriptor of a file already held stays open too (closing it would
            # release the locks just the same)
            fd = _HEAD_FDS.setdefault((opened.st_dev, opened.st_ino), fd)
    return os.pread(fd, 100, 0)


TRUNCATION_LOOKS = 5
"""Times :func:`check_sqlite_file` reads a file that looks truncated before saying so (0.1, 0.2,
0.3 and 0.4 s apart: a commit by another worker settles well within that)."""


def damaged_database(exc: BaseException) -> str | None:
    """One line for an SQLite error saying a database file is damaged (a file that is not a
    database, or a malformed one found while reading), or None for any other exception."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc).lower()
        if "database disk image is malformed" in text or "file is not a database" in text:
            first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0][:200]
            return (
                f"a database file is damaged ({first}): restore it from a backup, or move "
                "it away to start afresh"
            )
        exc = exc.__cause__ or exc.__context__ or getattr(exc, "orig", None)
    return None


_SERVERS: list[str] = []
"""``HOST:PORT`` of every database server this process connected to (:func:`connect_args`),
for a lost connection's message where the driver's error does not name it."""


LOST_SQLSTATES = ("57P01", "57P02", "57P03")
"""SQLSTATEs of a server going away besides class 08 (connection exceptions): admin shutdown
(the server stopped, or the session was terminated), crash shutdown, cannot connect now (the
server is starting or stopping)."""

LOST_MESSAGES = (
    "server closed the connection", "connection refused", "the connection is lost",
    "terminating connection", "connection failed", "could not connect", "connection is bad",
    "timeout expired", "connection timed out", "connection reset", "could not receive data",
    "could not send data", "no route to host", "network is unreachable",
)  # fmt: skip
"""What a driver's error without an SQLSTATE (libpq's own, not the server's) says when the
connection went away or could not be made again."""


def lost_connection(exc: BaseException) -> str | None:
    """One line for an error saying the connection to a PostgreSQL server was lost or could not
    be made again (the server stopped or restarted mid-search, the network went down), or None
    for any other exception. The message names the server and says to run the command again,
    which resumes (studies and measurements are written in transactions).

    Looks through the exception's causes for psycopg's (or psycopg2's) error, raised directly
    or wrapped by SQLAlchemy (``sqlalchemy.exc.OperationalError``), that is a lost connection:
    SQLSTATE class 08 or one of :data:`LOST_SQLSTATES`, or an error without an SQLSTATE whose
    connection is broken or whose message is one of :data:`LOST_MESSAGES`. Any other database
    error is not one (a deadlock, a full disk, a cancelled query, a lock not available, a
    closed cursor: a bug or a fault to report as it is); an SQLite error never is."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        orig = getattr(exc, "orig", None) or exc
        if type(orig).__module__.split(".")[0] in ("psycopg", "psycopg2") and _lost(orig):
            return _lost_line(scrub(str(orig)).strip())
        exc = exc.__cause__ or exc.__context__
    return None


def _lost(exc: BaseException) -> bool:
    """Whether the driver's error ``exc`` says its connection went away
    (:func:`lost_connection`)."""
    state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    if state:
        return str(state).startswith("08") or str(state) in LOST_SQLSTATES
    kinds = ("OperationalError", "InterfaceError")
    if not any(base.__name__ in kinds for base in type(exc).__mro__):
        return False
    pgconn = getattr(exc, "pgconn", None)
    with contextlib.suppress(Exception):  # psycopg 3's libpq connection: BAD is broken
        from psycopg.pq import ConnStatus

        if pgconn is not None and pgconn.status == ConnStatus.BAD:
            return True
    low = str(exc).lower()
    return any(text in low for text in LOST_MESSAGES)


def _lost_line(text: str) -> str:
    """:func:`lost_connection`'s line for the driver's message ``text``."""
    found = re.search(r'server at "([^"]+)"(?: \([^)]*\))?, port (\d+)', text)
    if found:
        where = f"{found.group(1)}:{found.group(2)}"
    else:
        where = _SERVERS[-1] if _SERVERS else "the server"
    low = text.lower()
    if "connection refused" in low:
        why = "connection refused: is the server running?"
    elif "closed the connection" in low or "terminating connection" in low:
        why = "the server closed the connection"
    elif "timeout" in low or "timed out" in low:
        why = "the server did not answer"
    else:
        first = (text.splitlines() or ["no message"])[0]
        why = first if len(first) <= 200 else first[:200] + "..."
    return (
        f"lost the connection to the database server at {where} ({why}); run the same "
        "command again to resume"
    )


OPTUNA_TABLES = (
    "studies", "study_directions", "study_user_attributes", "study_system_attributes",
    "trials", "trial_params", "trial_values", "trial_intermediate_values",
    "trial_user_attributes", "trial_system_attributes", "trial_heartbeats", "version_info",
    "alembic_version",
)  # fmt: skip
"""The tables of an Optuna RDB storage (Optuna 4-5). Opening a storage creates those missing
and writes ``version_info``'s and ``alembic_version``'s row where they are empty."""


def handed_sqlite_storage(url: str) -> str:
    """The URL to open for a study storage named by a file someone may have handed over (a run
    folder's ``summary.json``), checked without creating or changing anything.

    Opening a storage writes to it: Optuna creates its tables in any SQLite database, and
    SQLite takes a missing or empty file for a new database. A storage named by a file is
    therefore opened only where it already is Optuna's: an SQLite URL (a file never chooses a
    database server to connect to) of an existing regular file that begins with SQLite's
    header and holds every Optuna table, its version rows written. The file is read with a
    read-only connection (``mode=ro``; ``immutable=1`` for a WAL database whose ``-wal`` and
    ``-shm`` files are absent, where ``mode=ro`` would create them).

    Args:
        url: the storage URL as the file gives it.

    Returns:
        ``sqlite:///PATH`` of the file checked (any query parameters left out: what is opened
        is the file that was checked).

    Raises:
        HwnasError: one line saying why the storage is not opened.
    """
    import sqlite3

    url = str(url)
    if not url.startswith("sqlite:///"):
        raise HwnasError(
            "its storage is not an SQLite file; a run folder's summary.json does not choose "
            "a database server to connect to"
        )
    path = Path(url[len("sqlite:///") :].split("?", 1)[0])
    shown = str(path) if len(str(path)) <= 200 else str(path)[:200] + "..."
    try:
        if not path.is_file():
            raise HwnasError(f"its storage {shown} is not an existing SQLite file")
        with open(path, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        raise HwnasError(f"its storage {shown} cannot be read: {exc.strerror or exc}") from None
    if len(head) < 100 or not head.startswith(SQLITE_HEADER):
        raise HwnasError(f"its storage {shown} is not an SQLite database")
    wal = head[18] == 2  # file format read/write versions: 2 is WAL
    uri = path.resolve().as_uri()
    if wal and not all(Path(f"{path}{s}").exists() for s in ("-wal", "-shm")):
        uri += "?immutable=1"  # no connection has it open: nothing in a WAL to miss
    else:
        uri += "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=10)
        try:
            tables = {
                row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            missing = [t for t in OPTUNA_TABLES if t not in tables]
            empty = [
                t for t in ("version_info", "alembic_version")
                if t in tables and conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is None
            ]  # fmt: skip
        finally:
            conn.close()
    except sqlite3.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise HwnasError(f"its storage {shown} cannot be read ({first})") from None
    if missing or empty:
        raise HwnasError(
            f"its storage {shown} is no Optuna study storage (table {(missing or empty)[0]} "
            f"{'missing' if missing else 'empty'}); it is left as it is"
        )
    return f"sqlite:///{path}"
