"""The code is clean under the repository's lint rules (``[tool.ruff]`` in pyproject.toml:
pyflakes, pycodestyle, isort, pyupgrade, bugbear; 100-character lines)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing_in_the_code_the_experiments_and_the_tests():
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--no-cache",
         "hwnas", "experiments", "tests"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
