"""No password of a storage or store URL is written or printed: a search on
``postgresql://user:secret@...`` (a real PostgreSQL server, tests/conftest.py) leaves it in no
file, study attribute or artifact, and no terminal line of `hwnas search`, `hwnas runs list`
(and ``--json``) or `hwnas dashboard`'s start-up."""

from __future__ import annotations

import pytest

SECRET = "s3cret-Pa55"


def _with_password(url: str) -> str:
    """``postgresql://postgres@host:port/db`` -> ``postgresql://postgres:SECRET@host:port/db``
    (the test server trusts every local connection, so the password is accepted and unused)."""
    return url.replace("postgres@", f"postgres:{SECRET}@", 1)


def _files_with_secret(*folders) -> list[str]:
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and SECRET.encode() in path.read_bytes():
                found.append(str(path))
    return found


def test_a_search_on_a_postgresql_url_with_a_password_never_shows_it(
    tmp_path, hwnas_home, postgres_url, capsys, monkeypatch
):
    import optuna

    from hwnas.cli import dashboard, main
    from hwnas.store import MeasurementStore

    url = _with_password(postgres_url)
    out = tmp_path / "run"
    args = ["--device", "pixel3", "--budget", "3", "--study", "leak", "--out", str(out), "--no-zoo"]
    assert main(["search", *args, "--storage", url]) == 0
    cheap = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"
    measure = ["measure", "--device", "cpu-fast", "--dataset", "cifar10", "--arch", cheap]
    assert main([*measure, "--store", url]) == 0
    printed = capsys.readouterr()
    assert main(["runs", "list", "--storage", url]) == 0
    assert main(["runs", "list", "--storage", url, "--json"]) == 0
    assert main(["runs", "show", "leak", "--storage", url]) == 0
    monkeypatch.setattr(dashboard, "serve", lambda *a, **k: None)
    assert main(["dashboard", "--storage", url, "--port", "8123"]) == 0
    shown = capsys.readouterr()
    terminal = printed.out + printed.err + shown.out + shown.err
    assert "postgres:***@" in terminal  # the URL is shown, without its password
    assert SECRET not in terminal
    # and a command to type names it without ***, which is no password (it said
    # "hwnas dashboard --storage postgresql://postgres:***@...")
    assert "--storage postgresql://postgres:***" not in terminal, terminal
    assert "hwnas dashboard --storage postgresql://postgres@127.0.0.1" in terminal, terminal
    assert _files_with_secret(out, hwnas_home) == []

    storage = optuna.storages.RDBStorage(url.replace("postgresql://", "postgresql+psycopg://"))
    study = optuna.load_study(study_name="leak", storage=storage)
    assert study.user_attrs["artifacts"]  # the run's files were uploaded
    system = storage.get_study_system_attrs(study._study_id)  # notes, artifact records
    assert SECRET not in repr(study.user_attrs) + repr(system)
    for t in study.trials:
        assert SECRET not in repr(t.user_attrs) + repr(t.system_attrs)
    with MeasurementStore(url) as store:  # the measurement stored on the same server
        (m,) = store.measurements("cpu-fast", "latency_ms")
    assert SECRET not in repr(m)


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://postgres:{SECRET}@127.0.0.1:not-a-port/db",  # SQLAlchemy cannot parse it
        f"postgresql://postgres:{SECRET}@127.0.0.1:1/db",  # nothing listens there
        f"postgresql://127.0.0.1:1/db?password={SECRET}",  # libpq's password parameter
    ],
)
def test_a_storage_url_error_never_echoes_the_password(tmp_path, capsys, url):
    from hwnas.cli import main

    status = main(["search", "--device", "pixel3", "--budget", "2", "--storage", url,
                   "--out", str(tmp_path / "run")])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and err.startswith("error: ")
    assert SECRET not in err
    for cmd in (["runs", "list"], ["dashboard"]):
        assert main([*cmd, "--storage", url]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and SECRET not in err


def test_a_password_with_an_unencoded_at_sign_is_refused_without_echoing_it(
    tmp_path, capsys, monkeypatch
):
    """`postgresql://alice:pw@SECRET@host/db`: SQLAlchemy reads the password up to the first
    "@" and the rest as the host, so the redacted URL showed the rest. Such a URL is refused
    now, before any storage is opened. (A process remembers each password it redacted and
    scrubs it from later messages: a fresh memory here, so only the refusal can hide it.)"""
    import hwnas.db
    from hwnas.cli import main

    monkeypatch.setattr(hwnas.db, "_SECRETS", set())
    url = "postgresql://alice:pw@Tr0ub4dor-x9@127.0.0.1:1/db"
    for args in (["search", "--device", "pixel3", "--budget", "2", "--storage", url,
                  "--out", str(tmp_path / "run")],
                 ["measure", "--device", "cpu-fast", "--arch", "5", "--store", url]):  # fmt: skip
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Tr0ub4dor" not in err, err
        assert "write an '@' in a user name or password as %40" in err
    assert not (tmp_path / "run").exists()


def test_a_server_that_never_answers_is_one_line_after_the_connect_timeout(
    tmp_path, capsys, monkeypatch
):
    """A server that accepts the connection and never answers (a wrong port forwarded, a
    firewall holding the packets) hung `hwnas search --storage` and `--store` for ever: libpq
    waits without limit by default. The connection now gives up after
    ``hwnas.db.CONNECT_TIMEOUT_S`` (1 s here), in one line; a common password ("postgres")
    is hidden where it stands, not inside the word "postgresql" of the URL."""
    import socket

    import hwnas.db
    from hwnas.cli import main

    monkeypatch.setattr(hwnas.db, "CONNECT_TIMEOUT_S", 1)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        url = f"postgresql://postgres:postgres@127.0.0.1:{port}/db"
        status = main(["search", "--device", "pixel3", "--budget", "2", "--storage", url,
                       "--out", str(tmp_path / "run")])  # fmt: skip
        err = capsys.readouterr().err
        assert status == 2 and err.count("\n") == 1, err
        assert f"the database server at 127.0.0.1:{port} did not answer in 1 s" in err
        assert "postgresql://" in err and ":postgres@" not in err
        status = main(["measure", "--device", "cpu-fast", "--arch", "5", "--store",
                       url.replace(":postgres@", f":{SECRET}@")])  # fmt: skip
        err = capsys.readouterr().err
        assert status == 2 and "did not answer in 1 s" in err and SECRET not in err


def test_an_sqlite_store_url_with_a_query_is_refused_without_echoing_it(tmp_path, hwnas_home):
    """`--store 'sqlite:///m.db?password=...'` made a file named 'm.db?password=...' and
    printed and recorded that name (summary.json, its artifact): such a URL is one line now,
    before any file is made."""
    from helpers import hwnas_main

    url = f"sqlite:///{tmp_path / 'm.db'}?password={SECRET}"
    for args in (["search", "--device", "cpu-fast", "--budget", "2", "--strategy", "random",
                  "--out", str(tmp_path / "run")],
                 ["measure", "--device", "cpu-fast", "--arch", "5"]):  # fmt: skip
        r = hwnas_main(*args, "--store", url)
        assert r.returncode == 2 and SECRET not in r.stdout + r.stderr, r.stderr
        assert "an sqlite:/// URL takes no query" in r.stderr
    assert list(tmp_path.iterdir()) == [] and not _files_with_secret(hwnas_home)


def test_hwnas_devices_on_a_postgresql_store_never_shows_its_password(postgres_url, capsys):
    """`hwnas devices --store postgresql://user:pw@...` printed the URL as typed in its header
    ("devices (measurement store: ...)") and in ``--json``'s ``measurement_store``."""
    import json

    from hwnas.cli import main

    url = _with_password(postgres_url)
    for extra in ([], ["--all"], ["--json"]):
        assert main(["devices", "--store", url, *extra]) == 0
        shown = capsys.readouterr()
        assert SECRET not in shown.out + shown.err
        assert "postgres:***@127.0.0.1" in shown.out
    assert main(["devices", "--store", url, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["measurement_store"] == url.replace(SECRET, "***")


@pytest.mark.parametrize(
    "store",
    [
        f"postgresql:/nas:{SECRET}@127.0.0.1:5432/meas",  # "://" lost a slash
        f"postgresql//nas:{SECRET}@127.0.0.1:5432/meas",  # ... or its colon
        f"postgres:nas:{SECRET}@127.0.0.1/meas",
    ],
)
def test_a_mistyped_store_url_is_refused_without_echoing_its_password(tmp_path, capsys, store):
    """A `--store` URL without "://" was taken for an SQLite file's path: "error: measurement
    store postgresql:/nas:PASSWORD@...: folder ... does not exist", the password twice."""
    from hwnas.cli import main

    for args in (["devices"], ["devices", "--json"],
                 ["measure", "--device", "cpu-fast", "--arch", "5"],
                 ["search", "--device", "cpu-fast", "--budget", "2", "--strategy", "random",
                  "--out", str(tmp_path / "run")]):  # fmt: skip
        assert main([*args, "--store", store]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("error: measurement store "), err
        assert "looks like a database URL without '://'" in err and SECRET not in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("store", ["sqlite/m.db", "postgres/m.db", "file:/tmp/x.db", "data:/x"])
def test_a_path_that_starts_like_a_database_scheme_is_a_path(tmp_path, capsys, monkeypatch, store):
    """Any path starting with a database's name and "/", or with a word and ":/", was refused
    as a mistyped URL: `--store sqlite/m.db` (a folder named sqlite) could not be given. Only a
    scheme followed by a URL's shape (``:/``, ``:USER@``, ``//``, ``USER:PASSWORD@``) is one."""
    from hwnas.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / store).parent.mkdir(parents=True)
    for args in (["devices"], ["devices", "--json"]):
        assert main([*args, "--store", store]) == 0, capsys.readouterr().err
        assert "looks like a database URL" not in capsys.readouterr().err
    assert (tmp_path / store).is_file()
