"""``hwnas spaces`` (list) and ``hwnas spaces show SPACE``: the search spaces hwnas finds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hwnas.spaces import space_option


def space_row(name_or_path: str) -> dict[str, Any]:
    """What ``hwnas spaces`` shows of one space: name, where its file is (shipped / yours),
    whether it is declared in the space language or hand-written, its decisions and size,
    datasets, accuracy table, supernet and the strategies that reach it.

    Raises:
        HwnasError: an unknown name or an invalid space file.
    """
    from hwnas.assets import asset_path, read_yaml
    from hwnas.spaces import IndexedSpace, TabulatedSpace, ability, get_space, space_files

    space = get_space(name_or_path)
    # a space file given by path: its own path (the name alone reads as a file in the cwd)
    path = space_files().get(space.name) or getattr(space, "path", None) or Path(name_or_path)
    path = Path(path)
    shipped = path.resolve().is_relative_to(asset_path("search_spaces").resolve())
    # a shipped file naming an `implementation` is a hand-written space (hwnas.spaces._load)
    written = shipped and "implementation" in (read_yaml(path) or {})
    choices = space.choices()
    indexed = ability(space, IndexedSpace)
    return {
        "space": space.name,
        "origin": "shipped" if shipped else "yours",
        "file": str(path),
        "language": getattr(space, "language", "") or ("hand-written" if written else "declared"),
        "decisions": len(choices),
        "size": space.num_architectures() if choices else 0,
        "tabulated": len(indexed) if indexed is not None else None,
        "datasets": space.datasets(),
        "accuracy_table": ability(space, TabulatedSpace) is not None,
        "supernet": space.supernet_name,
        "description": getattr(space, "description", "") or "",
    }


def supernet_strategies(space: str) -> list[str]:
    """The supernet strategies that can search ``space`` (imports the strategy classes)."""
    from hwnas.supernet.strategies import SUPERNET_STRATEGIES

    return [
        n
        for n in SUPERNET_STRATEGIES.names()
        if SUPERNET_STRATEGIES.get(n).spaces is None or space in SUPERNET_STRATEGIES.get(n).spaces
    ]


def _size(n: int) -> str:
    """``n`` architectures as shown: whole below 10 million, else 1.2e+34 (an integer too large
    for a float, 10^308 and more, by its digits: its float overflowed and the listing of every
    space ended in a traceback)."""
    if n < 10**7:
        return f"{n:,}"
    try:
        return f"{n:.1e}"
    except OverflowError:
        digits = str(n)
        return f"{digits[0]}.{digits[1]}e+{len(digits) - 1:02d}"


@click.group("spaces", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
@click.pass_context
def spaces_cmd(ctx, as_json):
    """List the search spaces: shipped ones, yours ($HWNAS_HOME/spaces/), declared in the
    space language or hand-written, with their size and what can search them.

    `hwnas spaces show SPACE` shows one (a name or a space file)."""
    if ctx.invoked_subcommand is not None:
        return
    from hwnas.cli.render import Console, print_json, print_table, text_line
    from hwnas.errors import HwnasError
    from hwnas.spaces import list_spaces, unused_space_files

    rows, broken = [], {}
    unused = {str(p): why for p, why in unused_space_files().items()}
    for name in list_spaces():
        try:
            rows.append(space_row(name))
        except HwnasError as exc:  # one broken user file does not hide the others
            broken[name] = str(exc)
    if as_json:
        print_json({"spaces": rows, "broken": broken, "unused": unused})
        return
    console = Console(emoji=False)
    print_table(
        console,
        "search spaces (hwnas search --space NAME|FILE)",
        ("space", "origin", "kind", "architectures", "indexed", "accuracy"),
        [
            (
                r["space"],
                r["origin"],
                r["language"],
                _size(r["size"]),
                "" if r["tabulated"] is None else _size(r["tabulated"]),
                "table" if r["accuracy_table"] else "supernet",
            )
            for r in rows
        ],
        keys=("space",),
        right=("architectures", "indexed"),
    )
    for name, why in broken.items():
        text_line(console, f"broken space {name}: {why} (skipped)")
    for path, why in unused.items():
        text_line(console, f"unused space file {path}: {why}")
    text_line(console, "details: hwnas spaces show SPACE; your own: docs/spaces.md")


@spaces_cmd.command("show")
@click.argument("space", callback=space_option)
@click.option("--json", "as_json", is_flag=True, help="Print the space as JSON on stdout.")
def show_cmd(space, as_json):
    """Show SPACE (a name or a space file): its file, decisions and their choices, size,
    datasets, accuracy table, supernet and the strategies that search it, and an example
    arch string."""
    import numpy as np

    from hwnas.cli.render import Console, print_json, text_line
    from hwnas.spaces import get_space

    row = space_row(space)
    typed = click.get_current_context().meta.get("typed", {}).get("space")
    if typed is not None and ".py:" in typed:
        row["file"] = typed  # a space written in Python: its FILE.py:ATTR
    sp = get_space(space)
    row["choices"] = {k: list(v) for k, v in sp.choices().items()}
    row["supernet_strategies"] = supernet_strategies(sp.name)
    row["example"] = sp.sample(np.random.default_rng(0), 1)[0].text
    if as_json:
        print_json(row)
        return
    console = Console(emoji=False)
    line = lambda *p: text_line(console, *p)  # noqa: E731
    line(f"space       {row['space']}  ({row['origin']}, {row['language']})")
    line(f"file        {row['file']}")
    if row["description"]:
        line(f"about       {row['description']}")
    tab = "" if row["tabulated"] in (None, row["size"]) else f" ({row['tabulated']:,} tabulated)"
    line(f"size        {_size(row['size'])} architectures{tab}, {row['decisions']} decisions")
    line(f"datasets    {', '.join(row['datasets'])}")
    accuracy = (  # --accuracy scores any space's networks with the user's function
        "a benchmark table (table search), or your function (--accuracy FILE.py:FUNCTION)"
        if row["accuracy_table"]
        else "no table: a supernet search on your data (--strategy oneshot, ...), or your "
        "function (--accuracy FILE.py:FUNCTION)"
    )
    line(f"accuracy    {accuracy}")
    line(f"supernet    {row['supernet']}: {', '.join(row['supernet_strategies']) or 'none'}")
    shown = list(row["choices"].items())
    for key, values in shown[:12]:
        line(f"  {key:<24} {' | '.join(map(str, values))}")
    if len(shown) > 12:
        line(f"  ... {len(shown) - 12} more decisions (--json lists all)")
    line(f"example     {row['example']}")
