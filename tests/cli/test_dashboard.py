"""`hwnas dashboard` serves optuna-dashboard for the study on 127.0.0.1."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from helpers import hwnas_main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_dashboard_serves_the_search_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    r = hwnas_main(  # the study the dashboard serves, searched in this process
        "search",
        "--device",
        "fpga",
        "--budget",
        "5",
        "--storage",
        storage,
        "--study",
        "dash",
        "--out",
        str(tmp_path / "run"),
        "--no-zoo",
    )
    assert r.returncode == 0, r.stderr
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "hwnas", "dashboard", "--storage", storage, "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(os.environ),
    )
    try:
        deadline, body = time.time() + 60, None
        while time.time() < deadline and body is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies", timeout=2) as f:
                    body = json.load(f)
            except OSError:
                time.sleep(0.3)
        assert body is not None, "dashboard did not answer"
        names = [s["study_name"] for s in body["study_summaries"]]
        assert names == ["dash"]
        # the run's files are the study's artifacts, served for download; its note says where
        # the run folder is
        study_id = body["study_summaries"][0]["study_id"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/studies/{study_id}") as f:
            detail = json.load(f)
        by_name = {a["filename"]: a["artifact_id"] for a in detail["artifacts"]}
        assert set(by_name) == {"pareto.png", "pareto.csv", "summary.json"}
        url = f"http://127.0.0.1:{port}/artifacts/{study_id}/{by_name['pareto.png']}"
        with urllib.request.urlopen(url) as f:
            assert f.read() == (tmp_path / "run" / "pareto.png").read_bytes()
        assert str((tmp_path / "run").resolve()) in detail["note"]["body"]
        # a web page whose host name points at 127.0.0.1 (DNS rebinding) is refused
        forged = urllib.request.Request(f"http://127.0.0.1:{port}/api/studies",
                                        headers={"Host": f"evil.example:{port}"})  # fmt: skip
        try:
            urllib.request.urlopen(forged, timeout=5)
            raise AssertionError("served a request for another host name")
        except urllib.error.HTTPError as exc:
            assert exc.code == 403
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=20)
    assert f"http://127.0.0.1:{port}/dashboard/" in out
    # started again at once on the same port (its connections in TIME_WAIT): it was refused
    # as "in use by another program" for a minute
    again = subprocess.Popen(
        [sys.executable, "-m", "hwnas", "dashboard", "--storage", storage, "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=dict(os.environ),
    )  # fmt: skip
    try:
        deadline, answered = time.time() + 60, False
        while time.time() < deadline and not answered and again.poll() is None:
            try:
                with urllib.request.urlopen(f"http://localhost:{port}/api/studies", timeout=2):
                    answered = True
            except OSError:
                time.sleep(0.3)
    finally:
        again.terminate()
        out, _ = again.communicate(timeout=20)
    assert answered, out


def _served(monkeypatch, path: str = "/api/studies") -> list:
    """Have `hwnas dashboard` answer one GET of ``path`` instead of serving: the answers (status,
    body) land in the list returned."""
    import hwnas.cli.dashboard as dashboard

    answers: list = []

    def serve(app, port):
        environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": "",
                   "HTTP_HOST": f"127.0.0.1:{port}", "SERVER_NAME": "127.0.0.1",
                   "SERVER_PORT": str(port), "wsgi.input": io.BytesIO(),
                   "wsgi.url_scheme": "http", "wsgi.errors": sys.stderr}  # fmt: skip
        status = []
        body = b"".join(app(environ, lambda s, headers, exc_info=None: status.append(s)))
        answers.append((status[0], body))

    monkeypatch.setattr(dashboard, "serve", serve)
    return answers


def test_a_study_database_that_cannot_be_written_is_served_without_notes(tmp_path, monkeypatch):
    """A study database the user may read but not write (chattr +i, a read-only mount):
    `hwnas dashboard` wrote the notes first and ended in three tracebacks ("attempt to write a
    readonly database"), exit 1. It serves the studies now, with one warning line. SQLite's
    ``query_only`` refuses writes as a read-only file does, for root too."""
    import optuna

    import hwnas.engine.loop as loop

    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    r = hwnas_main("search", "--device", "pixel3", "--budget", "3", "--storage", storage,
                   "--study", "ro", "--out", str(tmp_path / "run"), "--no-zoo")  # fmt: skip
    assert r.returncode == 0, r.stderr
    opened = loop.open_storage

    def read_only(url):
        import sqlalchemy

        rdb = opened(url)

        def query_only(dbapi_connection, _record):
            dbapi_connection.execute("PRAGMA query_only = ON")

        sqlalchemy.event.listen(rdb.engine, "connect", query_only)
        rdb.engine.dispose()
        return rdb

    monkeypatch.setattr(loop, "open_storage", read_only)
    answers = _served(monkeypatch)
    r = hwnas_main("dashboard", "--storage", storage, "--port", str(_free_port()))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        "warning: the storage refused to write the note of study 'ro': attempt to write a "
        "readonly database; serving the studies without their notes"
    ]
    ((status, body),) = answers
    assert status.startswith("200") and json.loads(body)["study_summaries"][0]["study_name"] == "ro"
    assert "note_for" not in optuna.load_study(study_name="ro", storage=storage).user_attrs


def test_the_dashboard_hints_name_the_artifact_folder_and_the_dashboard_says_when_it_differs(
    tmp_path, monkeypatch
):
    """A search with `--artifact-dir DIR` printed `hwnas dashboard --storage URL`, whose
    dashboard served the default store: every download of the study's files was HTTP 500. The
    hints (the search's last line, `hwnas runs show`) name `--artifact-dir DIR` now, and a
    dashboard serving another store says so in one line."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    arts = tmp_path / "arts"
    base = ["search", "--device", "pixel3", "--budget", "3", "--storage", storage, "--no-zoo"]
    r = hwnas_main(*base, "--study", "a", "--artifact-dir", arts, "--out", tmp_path / "a")
    assert r.returncode == 0, r.stderr
    hint = f"hwnas dashboard --storage {storage} --artifact-dir {arts}"
    assert r.stdout.splitlines()[-1] == f"study 'a' in {storage}: {hint}"
    shown = hwnas_main("runs", "show", "a", "--storage", storage).stdout
    assert f"artifacts  3 files in {arts} ({hint})" in shown, shown
    r = hwnas_main(*base, "--study", "b", "--out", tmp_path / "b")  # the default store
    assert (
        r.stdout.splitlines()[-1] == f"study 'b' in {storage}: hwnas dashboard --storage {storage}"
    )
    answers = _served(monkeypatch)
    r = hwnas_main("dashboard", "--storage", storage, "--port", str(_free_port()))
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"warning: study 'a' records its artifacts in {arts}, not in "
        f"{os.environ['HWNAS_HOME']}/artifacts, which this dashboard serves: its downloads fail "
        f"here; serve it with --artifact-dir {arts}"
    ]
    r = hwnas_main(*hint.split()[1:], "--port", str(_free_port()))
    assert r.returncode == 0 and "warning: study 'b' records its artifacts in" in r.stderr
    assert "study 'a'" not in r.stderr and len(answers) == 2


def test_an_artifact_folder_that_cannot_be_made_is_refused_before_the_notes(tmp_path, monkeypatch):
    """`hwnas dashboard --artifact-dir FILE/sub` (or /proc/x) ended in a NotADirectoryError
    (FileNotFoundError) traceback, exit 1, after writing the runs' notes: one line now, exit 2,
    as `hwnas search` says it, before anything is written."""
    import optuna

    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    r = hwnas_main("search", "--device", "pixel3", "--budget", "3", "--storage", storage,
                   "--study", "s", "--out", str(tmp_path / "run"), "--no-zoo")  # fmt: skip
    assert r.returncode == 0, r.stderr
    (tmp_path / "afile").write_text("x")
    answers = _served(monkeypatch)
    cases = [
        (tmp_path / "afile" / "sub", f"cannot be created: {tmp_path / 'afile'} is a file"),
        (Path("/proc/x"), "is not writable: "),
    ]
    for folder, why in cases:
        r = hwnas_main("dashboard", "--storage", storage, "--artifact-dir", folder,
                       "--port", str(_free_port()))  # fmt: skip
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        (line,) = r.stderr.strip().splitlines()
        assert line.startswith(f"error: --artifact-dir {folder} {why}"), line
    assert answers == []
    assert "note_for" not in optuna.load_study(study_name="s", storage=storage).user_attrs


def test_the_note_prints_costs_with_their_units_as_the_terminal_does(tmp_path, monkeypatch):
    """On a device whose table is of a batch of 32 the terminal said `14.079 ms per batch of
    32` and the study's note `latency_ms 14.08`; every note named its costs by their keys
    (`latency_ms 34`, `energy_mj 18.83`), without units. The note prints the terminal's text."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    searches = {
        "g": ["--device", "1080ti_32"],
        "p": ["--device", "pi5_onnx", "--objective", "energy"],
    }
    printed = {}
    for study, args in searches.items():
        r = hwnas_main("search", *args, "--budget", "5", "--storage", storage, "--study", study,
                       "--out", str(tmp_path / study), "--no-zoo")  # fmt: skip
        assert r.returncode == 0, r.stderr
        (best,) = [line for line in r.stdout.splitlines() if line.startswith("best (")]
        printed[study] = best.rsplit("%", 1)[1].split(")", 1)[1].strip()  # after the source
    assert printed["g"].endswith(" ms per batch of 32"), printed
    assert printed["p"].endswith(" ms)") and " mJ  (latency " in printed["p"], printed
    for number, study in enumerate(searches, 1):
        answers = _served(monkeypatch, f"/api/studies/{number}")
        r = hwnas_main("dashboard", "--storage", storage, "--port", str(_free_port()))
        assert r.returncode == 0, r.stderr
        detail = json.loads(answers[0][1])
        assert detail["name"] == study
        (line,) = [x for x in detail["note"]["body"].splitlines() if x.startswith("**Best**")]
        text = printed[study].replace("  (", " \\(").replace(")", "\\)")  # Markdown's escapes
        assert line.endswith(f"% top-1, {text}"), (line, printed[study])
        assert "latency_ms" not in line and "energy_mj" not in line


def test_a_run_without_a_zoo_is_said_to_have_none(tmp_path, monkeypatch):
    """With --no-zoo the study's note said `zoo: 0 random ONNX models` and `hwnas runs show`
    `zoo        0 random models`, as of a zoo whose models were all left out; both say that the
    run made no zoo now (summary.json's `no_zoo`)."""
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    r = hwnas_main("search", "--device", "pixel3", "--budget", "3", "--storage", storage,
                   "--study", "nz", "--out", str(tmp_path / "run"), "--no-zoo")  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["no_zoo"] is True and summary["zoo_weights"] is None  # was "random"
    shown = hwnas_main("runs", "show", "nz", "--storage", storage).stdout
    assert "\nzoo        none (--no-zoo)\n" in shown, shown
    answers = _served(monkeypatch, "/api/studies/1")
    assert (
        hwnas_main("dashboard", "--storage", storage, "--port", str(_free_port())).returncode == 0
    )
    note = json.loads(answers[0][1])["note"]["body"]
    assert "; zoo: none (--no-zoo); " in note and "ONNX models" not in note, note
