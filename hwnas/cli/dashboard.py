"""``hwnas dashboard``."""

from __future__ import annotations

import click

from hwnas.cli.options import storage_option


@click.command("dashboard")
@storage_option
@click.option("--port", type=int, default=8080, show_default=True, help="Port on 127.0.0.1.")
def dashboard_cmd(storage, port):
    """Serve optuna-dashboard for the studies in STORAGE on 127.0.0.1."""
    from hwnas.errors import HwnasError
    from hwnas.paths import default_storage_url

    url = storage or default_storage_url()
    if url.startswith("sqlite:///"):
        from pathlib import Path

        if not Path(url.removeprefix("sqlite:///")).is_file():
            raise HwnasError(f"no study database at {url}; run `hwnas search` first")
    import optuna_dashboard

    from hwnas.search.engine import open_storage

    rdb = open_storage(url)
    n = len(rdb.get_all_studies())
    click.echo(f"optuna-dashboard for {n} studies in {url}")
    click.echo(f"open http://127.0.0.1:{port}/dashboard/  (Ctrl-C to stop)", nl=True)
    optuna_dashboard.run_server(rdb, host="127.0.0.1", port=port)
