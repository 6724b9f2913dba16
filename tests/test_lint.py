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


def test_every_console_prints_emoji_codes_as_written():
    """Rich turns ``:thumbs_up:`` into an emoji by default, even in escaped text: a table
    header or a file's line quoted in an error would be shown altered. Every Console hwnas
    makes sets ``emoji=False``."""
    import re

    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted((ROOT / "hwnas").rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\bConsole\(", line) and "emoji=False" not in line
        and not line.startswith("class ")  # hwnas.cli.render.Console, rich's, subclassed
    ]
    assert not found, found
