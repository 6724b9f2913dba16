"""Terminal output shared by the commands: tables whose long values a user must copy (arch
strings, device and entry names) are never cut, every dynamic string is printed literally (no
rich markup), and ``--json`` output goes to stdout alone.

Rich cuts a word wider than its column with an ellipsis, and reads ``[fpga]`` in
``pip install 'hwnas[fpga]'`` as a markup tag. Here every cell is a :class:`rich.text.Text`
(never parsed as markup), and the *key* columns are kept whole: when the table at its natural
width does not fit the console (80 columns when piped), those columns fold and their full
values are printed below the table, one per line, never wrapped by rich.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import rich.console
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from hwnas import jsonfile
from hwnas.cost_record import cost_digits as num
from hwnas.text import one_line, visible

__all__ = [
    "Console",
    "escape",
    "one_line",
    "print_chance_line",
    "print_json",
    "print_table",
    "text_line",
    "visible",
]


class Console(rich.console.Console):
    """rich's console, printing the control characters of the text it is given visibly
    (:func:`visible`); its own escape sequences (styles, the live progress bar's cursor
    moves) are left as they are. Every console of the CLI is one."""

    def _render_buffer(self, buffer):  # rich >= 13: the one place segments become text
        return super()._render_buffer(
            seg if seg.control else Segment(visible(seg.text), seg.style, seg.control)
            for seg in buffer
        )


def _cell(value: Any) -> Text:
    return value if isinstance(value, Text) else Text("" if value is None else str(value))


def _natural_width(console: Console, table: Table) -> int:
    """The width of ``table`` with no column narrowed (rich clamps measures to the console
    width, so measure on a wide one)."""
    return console.measure(table, options=console.options.update_width(1_000_000)).maximum


def _folded_width(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], keys: Sequence[str], folded: list[str]
) -> int:
    """The narrowest the folded table can be without cutting: whole key columns, folded ones
    8 wide, the others as wide as their longest word (up to 8); plus borders and padding."""
    total = 3 * len(columns) + 1
    for i, c in enumerate(columns):
        cells = [c, *(_cell(row[i]).plain for row in rows)]
        if c in folded:
            total += 8
        elif c in keys:
            total += max(len(v) for v in cells)
        else:  # words longer than 8 fold too
            total += min(8, max(len(w) for v in cells for w in v.split() or [""]))
    return total


def _print_records(
    console: Console, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """A table too wide for the console even folded: one block of ``column: value`` lines per
    row, each value whole."""
    console.print(Text(title), soft_wrap=True)
    for row in rows:
        console.print()
        for c, v in zip(columns, row, strict=True):
            console.print(Text(f"  {c}: {_cell(v).plain}"), soft_wrap=True)


def print_table(
    console: Console,
    title: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    keys: Sequence[str] = (),
    right: Sequence[str] = (),
    label: str | None = None,
) -> None:
    """Print a table whose ``keys`` columns are never cut.

    Args:
        console: where to print.
        title: the table's title (printed literally).
        columns: column headers.
        rows: one sequence of cell values per row (str, numbers, None or rich ``Text``).
        keys: headers of the columns a user copies (arch, device, entry): kept whole in the
            table when it fits the console, else folded in the table and printed in full below.
        right: headers of right-aligned (numeric) columns.
        label: header of the column naming a row in the lines below the table (default: the
            first column).
    """

    widest = [
        max([len(c), *(len(_cell(row[i]).plain) for row in rows)]) for i, c in enumerate(columns)
    ]
    whole = console.width // 3  # a key column up to this wide is kept whole when folding
    folded = [c for i, c in enumerate(columns) if c in keys and widest[i] > whole]

    def build(fold: bool) -> Table:
        table = Table(title=Text(title))
        for c in columns:
            # folded, every column wraps but the key columns that fit a third of the width
            table.add_column(
                Text(c),
                justify="right" if c in right else "left",
                overflow="fold",
                no_wrap=not fold or (c in keys and c not in folded),
            )
        for row in rows:
            table.add_row(*(_cell(v) for v in row))
        return table

    table = build(fold=False)
    if not keys or _natural_width(console, table) <= console.width:
        console.print(table)
        return
    table = build(fold=True)
    if _folded_width(columns, rows, keys, folded) > console.width:
        _print_records(console, title, columns, rows)  # too many columns even folded
        return
    console.print(table)
    label = label or columns[0]
    at = {c: i for i, c in enumerate(columns)}
    for key in folded:
        if key == label:
            console.print(Text(f"{key} (full):"), soft_wrap=True)
            for row in rows:
                console.print(_cell(row[at[key]]), soft_wrap=True)
            continue
        console.print(Text(f"{key} of each row, in full:"), soft_wrap=True)
        for row in rows:
            console.print(
                Text(f"{_cell(row[at[label]]).plain}  {_cell(row[at[key]]).plain}"),
                soft_wrap=True,
            )


def text_line(console: Console, *parts: Any) -> None:
    """Print ``parts`` joined by spaces, literally (no markup, no highlighting, no wrapping)."""
    console.print(Text(" ".join(str(p) for p in parts)), soft_wrap=True, highlight=False)


def print_json(data: Any) -> None:
    """``data`` as indented JSON on stdout (``--json``): nothing else goes to stdout. A number
    that is not finite (a study's NaN accuracy, an infinite latency) is ``null``: JSON has no
    NaN or Infinity, and strict readers (JavaScript's ``JSON.parse``, ``jq``) refuse them."""
    sys.stdout.write(jsonfile.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


UNITS = {"latency_ms": "ms", "energy_mj": "mJ"}
"""The unit of each device metric, as the CLI prints it."""


def cost_text(record: dict, metric: str, units: dict | None = None) -> str:
    """A record's costs with their units, the searched ``metric`` first ("1.234 mJ  (latency
    5.678 ms)"); ``units``: summary.json's, where a table of a batch gives "ms per batch of
    32" (None, or a metric it lacks: :data:`UNITS`)."""
    unit = {**UNITS, **{m: u for m, u in (units or {}).items() if isinstance(u, str)}}
    text = f"{num(record[metric])} {unit[metric]}" if metric in record else f"no {metric}"
    others = [
        f"{m.split('_')[0]} {num(record[m])} {unit[m]}"
        for m in UNITS
        if m != metric and record.get(m) is not None
    ]
    return text + (f"  ({', '.join(others)})" if others else "")


def print_chance_best(
    best: dict | None, max_latency: float | None, console: Any, weight: float | None = None
) -> None:
    """On ``console`` (a rich console), whole on one line (never wrapped): say so when
    ``best`` (summary.json's) is chance-level (its ``chance_level``,
    :func:`hwnas.datasets.is_chance_level`): under a latency limit that only networks whose
    output ignores their input meet, the most accurate one within it guesses; ``weight`` is a
    supernet search's ``--latency-weight`` (None: none, or a table search)."""
    from hwnas.datasets import CHANCE_FACTOR, chance_best_reason

    if best and best.get("chance_level"):
        limit = f"--max-latency {max_latency:g}" if max_latency is not None else None
        given = f"--latency-weight {weight:g}" if weight else None
        text_line(
            console,
            f"! best is chance-level (top-1 at most {CHANCE_FACTOR:g}x chance: no better than "
            f"guessing; chance_level in pareto.csv): {chance_best_reason(limit, given)}",
        )


def missed_precision_line(rows: Sequence[Any], metric: str = "latency_ms") -> str:
    """The line under a front table naming its ``rows`` (numbers or roles) whose live
    measurement missed the device profile's precision target (marked ``!`` in the table)."""
    return (
        f"! {len(rows)} measurement(s) of the front missed the device profile's precision "
        "target (95% interval of the median wider than timing.target_rel_ci): rows "
        f"{', '.join(map(str, rows))}; see {metric}_precision_met in pareto.csv (quiet the "
        "machine and measure again for tighter values)"
    )


def precision_misses(pareto_csv: Path, metric: str) -> dict[str, float | None]:
    """arch -> the 95% interval (%, None if unknown) of each row of ``pareto_csv`` whose live
    ``metric`` missed the device profile's precision target; {} if none or no file."""
    import csv

    try:
        with open(pareto_csv, newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError:
        return {}
    out: dict[str, float | None] = {}
    for row in rows:
        if row.get(f"{metric}_precision_met") == "false":
            try:
                out[row["arch"]] = float(row.get(f"{metric}_ci95_pct") or "")
            except ValueError:
                out[row["arch"]] = None
    return out


def print_chance_line(pareto_csv: Path, console: Any) -> None:
    """On ``console`` (a rich console), whole on one line: say how many front rows of
    ``pareto_csv`` were kept out of the zoo as chance-level
    (:func:`hwnas.datasets.is_chance_level`); nothing when none were."""
    import csv

    from hwnas.datasets import CHANCE_FACTOR

    try:
        with open(pareto_csv, newline="") as fh:
            chance = sum(row.get("chance_level") == "true" for row in csv.DictReader(fh))
    except OSError:
        return
    if chance:
        text_line(
            console,
            f"{chance} chance-level architecture(s) of the front not put in the zoo (top-1 at "
            f"most {CHANCE_FACTOR:g}x chance: no better than guessing; chance_level in "
            "pareto.csv)",
        )
