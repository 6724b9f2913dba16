"""Every `hwnas ...` command the README and docs/ show names commands and options that exist:
what a user copies from the documentation is what `--help` lists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click

from hwnas.cli import app

REPO = Path(__file__).resolve().parents[1]


def _commands(text: str) -> list[str]:
    """The `hwnas ...` commands of a Markdown text: in code blocks (continuation lines
    joined, one command per part of `&&`, `|` and `;`) and in inline code."""
    blocks = re.findall(r"```[a-z]*\n(.+?)```", text, flags=re.S)
    found = []
    for snippet in blocks + re.findall(r"`([^`\n]+)`", text):
        for line in snippet.replace("\\\n", " ").splitlines():
            for part in re.split(r"&&|\||;", line):
                part = part.strip().removeprefix("$").strip()
                if part.startswith("hwnas "):
                    found.append(part)
    return found


def _problems(command: str) -> list[str]:
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:  # an unclosed quote in prose: not a command
        return []
    cmd, path, i = app, ["hwnas"], 1
    while i < len(tokens) and isinstance(cmd, click.Group) and tokens[i] in cmd.commands:
        cmd, i = cmd.commands[tokens[i]], i + 1
        path.append(tokens[i - 1])
    if isinstance(cmd, click.Group) and i < len(tokens) and not tokens[i].startswith("-"):
        placeholder = tokens[i] in ("...", "…") or tokens[i].isupper()
        return [] if placeholder else [f"{' '.join(path)} has no command {tokens[i]}"]
    options = {"--help", "-h"}
    for param in cmd.params:
        options.update(param.opts + param.secondary_opts)
    return [
        f"{' '.join(path)} has no option {t.split('=')[0]}"
        for t in tokens[i:]
        if t.startswith("-") and t not in ("-", "--") and not re.match(r"-\d", t)
        and t.split("=")[0] not in options
    ]  # fmt: skip


def test_every_documented_command_uses_existing_commands_and_options():
    files = [REPO / "README.md", *sorted((REPO / "docs").glob("**/*.md"))]
    commands = [(f, c) for f in files for c in _commands(f.read_text())]
    assert len(commands) > 100  # the reader found them
    wrong = [f"{f.relative_to(REPO)}: {c}: {p}" for f, c in commands for p in _problems(c)]
    assert not wrong, "\n".join(wrong)


def test_the_reader_finds_a_misspelt_option_and_command():
    text = "run `hwnas search --devize pixel3`\n```bash\nhwnas zooo list && hwnas runs list\n```"
    problems = [p for c in _commands(text) for p in _problems(c)]
    assert problems == ["hwnas has no command zooo", "hwnas search has no option --devize"]
