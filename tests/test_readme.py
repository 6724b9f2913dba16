"""The README's two set-up commands: CI runs the test one verbatim."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split("## Get going", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)


def test_readme_has_exactly_two_setup_commands_and_ci_runs_the_test_one():
    main_cmd, test_cmd = _commands()
    assert "hwnas search --device" in main_cmd and main_cmd.startswith("pip install torch==2.13.0")
    assert "pytest" in test_cmd and test_cmd.startswith("pip install torch==2.13.0")
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert test_cmd in ci
