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
    if not artifact_dir.is_dir():  # made below (an existing one is only read: it may be a
        # read-only mount); a file on its path is refused before any write, as by `search`
        from hwnas.paths import check_writable

        check_writable(artifact_dir, "--artifact-dir")
    import optuna_dashboard
    from optuna.artifacts import FileSystemArtifactStore

    from hwnas.cli.render import one_line
    from hwnas.engine.ledger import study_briefs
    from hwnas.engine.loop import open_storage
    from hwnas.engine.publish import NotesUnwritten, elsewhere_line, write_notes

    rdb = open_storage(url)
    briefs = study_briefs(rdb)
    unreadable = [name for name, attrs, *_ in briefs if attrs is None]
    if unreadable:  # optuna-dashboard's study list would answer every request with an error
        raise HwnasError(
            f"the dashboard cannot list the studies in {shown}: study "
            f"'{one_line(unreadable[0])}' has attributes that cannot be read (not JSON, or "
            "nested too deep: written by another program); delete it (optuna delete-study "
            "--study-name NAME --storage URL) or serve another --storage"
        )
    try:
        artifact_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # made unwritable since the check
        raise HwnasError(f"--artifact-dir {artifact_dir} cannot be created: {exc}") from None
    try:  # each finished run's settings, folder and summary as its study's note
        write_notes(rdb)
    except NotesUnwritten as exc:  # a database the user may read only: served as it is
        click.echo(f"warning: {exc}; serving the studies without their notes", err=True)
    elsewhere = elsewhere_line(briefs, artifact_dir)  # their downloads would fail: said
    if elsewhere is not None:
        click.echo(one_line(elsewhere), err=True)
    app = optuna_dashboard.wsgi(rdb, artifact_store=FileSystemArtifactStore(str(artifact_dir)))
    n = len(briefs)
    click.echo(f"optuna-dashboard for {n} studies in {shown}; artifacts in {artifact_dir}")
    click.echo(f"open http://127.0.0.1:{port}/dashboard/  (Ctrl-C to stop)", nl=True)
    try:
        serve(local_only(app, port), port)
    except OSError as exc:  # taken by another program since the check
        raise HwnasError(f"cannot serve on 127.0.0.1:{port}: {exc.strerror or exc}") from None


def local_only(app, port: int):
    """``app`` (a WSGI application) answering only requests addressed to this machine's
    loopback by name: ``Host: 127.0.0.1:PORT`` or ``localhost:PORT``. The server listens on
    127.0.0.1 alone, but a web page the user opens can point its own host name at 127.0.0.1
    (DNS rebinding) and then read, and through optuna-dashboard's API delete, studies and
    artifacts; its requests carry its own host name and get 403."""
    allowed = {f"{name}:{port}" for name in ("127.0.0.1", "localhost")}
    if port == 80:
        allowed |= {"127.0.0.1", "localhost"}

    def checked(environ, start_response):
        if str(environ.get("HTTP_HOST", "")).lower() not in allowed:
            start_response("403 Forbidden", [("Content-Type", "text/plain; charset=utf-8")])
            return [f"hwnas dashboard: open http://127.0.0.1:{port}/dashboard/\n".encode()]
        return app(environ, start_response)

    return checked


def serve(app, port: int) -> None:
    """Serve ``app`` on 127.0.0.1:``port`` until Ctrl-C (Python's reference WSGI server, as
    ``optuna_dashboard.run_server`` does). SIGTERM ends it at once, as the operating system
    ends a process (it has nothing to save): the CLI's handler raised KeyboardInterrupt, and
    one that fell while a request was handled was taken by wsgiref for the request's error,
    the server serving on.

    Raises:
        OSError: the port cannot be bound.
    """
    import signal
    import threading
    from wsgiref.simple_server import make_server

    if threading.current_thread() is threading.main_thread():  # the CLI puts its own back
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with make_server("127.0.0.1", port, app) as server:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
