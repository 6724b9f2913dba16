"""Commands on a PostgreSQL study storage (a real server, tests/conftest.py): the same
database written another way is the same storage, and messages name what a user can type."""

from __future__ import annotations

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
    assert hint.startswith("--storage postgres") and f"//postgres@127.0.0.1:{port}/" in hint
    assert "with its password" in hint
