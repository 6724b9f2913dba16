"""Commands on a PostgreSQL study storage (a real server, tests/conftest.py): the same
database written another way is the same storage, and messages name what a user can type."""

from __future__ import annotations

import shlex

SECRET = "s3cret-Pa55"


def test_a_run_folder_is_the_same_storage_s_whichever_way_its_url_is_written(
    tmp_path, postgres_url
):
    """A summary.json records its storage redacted (``postgres:***@``), and check_run_folder
    compared that text: the same database given without the password (PGPASSWORD), as
    ``postgres://``, at ``localhost`` or with the ``+psycopg`` driver was "another storage",
    and the error told the user to give ``--storage postgresql://postgres:***@...``."""
    from helpers import hwnas_main

    run = tmp_path / "run"
    args = ["search", "--device", "pixel3", "--budget", "3", "--study", "same", "--no-zoo",
            "--out", str(run)]  # fmt: skip
    typed = postgres_url.replace("postgres@", f"postgres:{SECRET}@", 1)
    assert hwnas_main(*args, "--storage", typed).returncode == 0
    port = postgres_url.split(":")[-1].split("/")[0]
    for same in (
        postgres_url,  # the password from PGPASSWORD or ~/.pgpass
        typed.replace("postgresql://", "postgres://"),
        typed.replace("127.0.0.1", "localhost"),
        typed.replace("postgresql://", "postgresql+psycopg://") + "?connect_timeout=5",
    ):
        r = hwnas_main(*args, "--storage", same)
        assert r.returncode == 0, (same, r.stderr)
    other = postgres_url.replace(f":{port}/", f":{port}/postgres_other_db_", 1)
    r = hwnas_main(*args, "--storage", other)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "in another storage" in r.stderr and SECRET not in r.stderr
    hint = r.stderr.split("go on with that one: ")[1]
    assert "***" not in hint and "%2A" not in hint, hint
    # shell-quoted: pasted, its '?' or '&' is no glob or background job
    flag, url = shlex.split(hint.partition(" with its password")[0])
    assert flag == "--storage" and url.startswith("postgres")
    assert f"//postgres@127.0.0.1:{port}/" in url
    assert "with its password" in hint


def test_hwnas_train_records_a_retrained_entry_in_a_postgresql_study_with_storage(
    tmp_path, postgres_url
):
    """`hwnas train RUN/zoo/ENTRY` on a PostgreSQL study said "re-run publishing with the
    storage's password", which no command does, and had no --storage: `hwnas zoo verify
    --storage URL` then failed the entry and a rerun of the search wrote random weights over
    it. `hwnas train --storage URL` records it in the study now; without it, the line names the
    command to run."""
    from helpers import hwnas_main

    run = tmp_path / "run"
    typed = postgres_url.replace("postgres@", f"postgres:{SECRET}@", 1)
    search = ["search", "--device", "pixel3", "--budget", "3", "--study", "tr", "--out", str(run),
              "--storage", typed]  # fmt: skip
    assert hwnas_main(*search).returncode == 0
    entry = sorted((run / "zoo").iterdir())[-1]
    train = ["train", str(entry), "--data", "digits", "--epochs", "1", "--limit", "100"]
    r = hwnas_main(*train)
    assert r.returncode == 0, r.stderr
    bare = postgres_url  # the URL as recorded, less its password
    assert (
        f"where that is your study's storage, record it with hwnas train {entry} --data digits "
        f"--epochs 1 --limit 100 --storage {bare} (with its password)" in r.stderr
    ), r.stderr
    assert "re-run publishing" not in r.stderr and SECRET not in r.stderr
    r = hwnas_main("zoo", "verify", str(run / "zoo"), "--storage", typed)
    assert r.returncode == 1 and f"FAIL {entry.name}" in r.stdout, r.stdout
    other = postgres_url.rsplit("/", 1)[0] + "/postgres"
    r = hwnas_main(*train, "--storage", other)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "another storage" in r.stderr
    assert "training 1/1" not in r.stderr
    r = hwnas_main(*train, "--storage", bare)
    assert r.returncode == 0, r.stderr
    assert "the retrained entries recorded in summary.json and the run's study" in r.stderr
    r = hwnas_main("zoo", "verify", str(run / "zoo"), "--storage", typed)
    assert r.returncode == 0 and f"ok   {entry.name}" in r.stdout, r.stdout
    assert "provenance: card and model match the run's summary.json and study 'tr'" in r.stdout
    r = hwnas_main(*search)
    assert r.returncode == 0 and "zoo: kept 1 trained entry" in r.stderr + r.stdout, r.stderr


def test_a_database_server_lost_mid_search_is_one_line_and_the_rerun_resumes(
    tmp_path, postgres_url
):
    """The server going away while a search ran printed a 130-line traceback and exit 1 (a
    bug's): SQLAlchemy's OperationalError from the ledger. One line now, naming the server and
    what to do, exit 1 (a run stopped part-way through no fault of its input: 2 said its input
    was wrong); the study resumes once the server is back."""
    import subprocess
    import sys
    import time

    import psycopg

    server, name = postgres_url.rsplit("/", 1)
    port = server.rsplit(":", 1)[1]
    typed = postgres_url.replace("postgres@", f"postgres:{SECRET}@", 1)
    args = ["search", "--device", "cpu-fast", "--budget", "500", "--strategy", "random",
            "--study", "lost", "--no-zoo", "--out", str(tmp_path / "run"), "--storage", typed,
            "--store", str(tmp_path / "m.db")]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-m", "hwnas", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip

    def completed() -> int:
        try:
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                sql = "SELECT count(*) FROM trials WHERE state='COMPLETE'"
                return conn.execute(sql).fetchone()[0]
        except psycopg.Error:  # the tables are not made yet
            return 0

    admin = f"{server}/postgres"
    try:
        deadline = time.monotonic() + 180
        while completed() < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        with psycopg.connect(admin, autocommit=True) as conn:  # the server gone, for this db
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = %s", (name,))  # fmt: skip
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
    assert proc.returncode == 1, err[-3000:]
    last = err.strip().splitlines()[-1]
    lost = f"error: lost the connection to the database server at 127.0.0.1:{port} ("
    assert last.startswith(lost) and last.endswith("run the same command again to resume"), last
    assert "Traceback" not in err and SECRET not in err
    from helpers import hwnas_main

    budget = completed() + 2  # the study goes on where it stopped
    r = hwnas_main(*[str(budget) if a == "500" else a for a in args])
    assert r.returncode == 0, r.stderr
    assert completed() == budget


def test_a_connect_timeout_of_the_url_is_the_one_said(tmp_path):
    """A server that never answers, with ``?connect_timeout=1`` in the URL: the connection gave
    up after 1 s and the error said "did not answer in 10 s" (hwnas's default)."""
    import socket

    from helpers import hwnas_main

    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        url = f"postgresql://nas:{SECRET}@127.0.0.1:{port}/db?connect_timeout=1"
        for args in (["runs", "list", "--storage", url], ["devices", "--store", url]):
            r = hwnas_main(*args)
            assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
            assert f"the database server at 127.0.0.1:{port} did not answer in 1 s" in r.stderr


def test_an_unknown_database_host_is_named_as_typed(tmp_path):
    """An unknown host's error showed hwnas's internal URL (``postgresql+psycopg://...``), not
    the one typed: it names the host now."""
    from helpers import hwnas_main

    url = f"postgresql://nas:{SECRET}@no-such-host.invalid:5432/db"
    for args in (["runs", "list", "--storage", url], ["devices", "--store", url]):
        r = hwnas_main(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert "unknown database host 'no-such-host.invalid'" in r.stderr
        assert "+psycopg" not in r.stderr and SECRET not in r.stderr
