"""``hwnas zoo``: the model zoo of a run (``verify``; ``list`` and ``show`` read entries through
:func:`hwnas.zoo.read_entry`)."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("zoo")
def zoo_group() -> None:
    """Model zoos: folders of ONNX models with cards, written by `hwnas search` and
    `hwnas train`."""


@zoo_group.command("verify")
@click.argument("path", metavar="DIR", type=click.Path(path_type=Path))
def verify_cmd(path: Path) -> None:
    """Check every entry of the zoo folder DIR (or the one entry DIR) as a deployment would:
    each file's sha256 against card.json, the card's keys in the ONNX metadata, and ONNX
    Runtime's output on test_data_set_0/input_0.pb against output_0.pb within the card's
    tolerance. One line per entry; exit status 1 if any entry fails, 2 on bad input."""
    from hwnas.zoo.verify import verify

    verdicts = verify(path)  # HwnasError (not a zoo) -> one line, exit 2
    for v in verdicts:
        click.echo(v.line())
    failed = sum(not v.ok for v in verdicts)
    click.echo(f"{len(verdicts) - failed} of {len(verdicts)} entries verified")
    if failed:
        raise click.exceptions.Exit(1)
