"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path

import click

store_option = click.option(
    "--store",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Measurement store (SQLite). Default: measurements.db in the hwnas home "
    "($HWNAS_HOME or the user data folder).",
)

storage_option = click.option(
    "--storage",
    default=None,
    metavar="URL",
    help="Optuna storage URL (any RDB URL, e.g. sqlite:///nas.db or postgresql://...). "
    "Default: studies.db in the hwnas home.",
)
