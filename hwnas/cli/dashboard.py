"""``hwnas dashboard``: optuna-dashboard on the studies, with the runs' files as artifacts."""

from __future__ import annotations

import click

from hwnas.cli.options import PORT, artifact_option, port_free, storage_option


@click.command("dashboard")
@storage_option
@artifact_option
@click.option("--port", type=PORT, default=8080, show_default=True, help="Port on 127.0.0.1.")
def dashboard_cmd(storage, artifact_dir, port):
    """Serve optuna-dashboard for the studies in STORAGE on 127.0.0.1, with each run's
    pareto.png, cards and ONNX files downloadable (the study's Artifacts) and its settings,
    run folder and summary in the study's note."""
    from hwnas.db import redact
    from hwnas.engine.publish import default_artifact_dir
    from hwnas.errors import HwnasError
    from hwnas.paths import default_storage_url

    port_free(port)  # before any work, not after the storage and notes
    url = storage or default_storage_url()
    shown = redact(url)  # an unparseable URL is refused here, without echoing it
    from hwnas.engine.workers import missing_sqlite_file

    if missing_sqlite_file(url):
        raise HwnasError(f"no study database at {shown}; run `hwnas search` first")
    artifact_dir = (artifact_dir or default_artifact_dir()).expanduser()
    if artifact_dir.exists() and not artifact_dir.is_dir():
        raise HwnasError(f"--artifact-dir {artifact_dir} is not a folder")
    import optuna_dashboard
    from optuna.artifacts import FileSystemArtifactStore

    from hwnas.engine.loop import open_storage
    from hwnas.engine.publish import write_notes

    rdb = open_storage(url)
    write_notes(rdb)  # each finished run's settings, folder and summary as its study's note
    n = len(rdb.get_all_studies())
    artifact_dir.mkdir(parents=True, exist_ok=True)
    click.echo(f"optuna-dashboard for {n} studies in {shown}; artifacts in {artifact_dir}")
    click.echo(f"open http://127.0.0.1:{port}/dashboard/  (Ctrl-C to stop)", nl=True)
    try:
        optuna_dashboard.run_server(
            rdb,
            host="127.0.0.1",
            port=port,
            artifact_store=FileSystemArtifactStore(str(artifact_dir)),
        )
    except OSError as exc:  # taken by another program since the check
        raise HwnasError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}") from None
