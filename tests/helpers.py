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
