"""Helpers shared by tests (import as ``from helpers import ...``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def hwnas_cli(*args: str, cwd: Path | None = None, timeout: float = 300, env=None):
    """Run the hwnas CLI in a subprocess as a user would; returns CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "hwnas", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def hwnas_main(*args, cwd: Path | None = None, env: dict[str, str] | None = None):
    """Run the hwnas CLI's ``main`` in this process, as ``hwnas ARGS`` would from a shell with
    ``env`` added and ``cwd`` as the working directory; returns what :func:`hwnas_cli` does
    (``returncode``, ``stdout``, ``stderr``). The same code path without a new interpreter's
    imports (1-2 s a call on a 2-core machine): for tests that read what a command prints and
    writes; those about processes (signals, kills, workers, a fresh install) use
    :func:`hwnas_cli`."""
    import contextlib
    import io

    from hwnas.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in args])
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def fake_tool(monkeypatch, folder: Path, name: str, script: str) -> Path:
    """Write ``script`` as the executable ``folder/name`` and put ``folder`` first on PATH (with
    /usr/bin and /bin only): a device's command-line tool (adb, tegrastats) played by a test.
    Returns the executable's path."""
    import stat

    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text(script)
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{folder}:/usr/bin:/bin")
    return tool
