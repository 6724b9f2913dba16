"""``hwnas measure``: the command group for measurements (subcommands add themselves)."""

from __future__ import annotations

import click


@click.group("measure", invoke_without_command=True)
@click.pass_context
def measure_group(ctx):
    """Measurements in the store: import values timed elsewhere."""
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())
