"""``hwnas devices``."""

from __future__ import annotations

import click

from hwnas.cli.options import store_option


@click.command("devices")
@store_option
def devices_cmd(store):
    """List every device: kind, whether it is reachable now, and stored measurements."""
    from rich.console import Console
    from rich.table import Table

    from hwnas.devices import get_device, list_devices
    from hwnas.devices.recorded import RecordedDevice
    from hwnas.paths import default_store_path
    from hwnas.store import MeasurementStore

    path = store or default_store_path()
    counts = {}
    if path.exists() or store is not None:
        with MeasurementStore(path) as st:
            counts = st.counts()
    table = Table(title=f"devices (measurement store: {path})")
    for col in ("device", "kind", "class", "reachable", "measurements", "description"):
        table.add_column(col)
    notes = []
    for name in list_devices():
        dev = get_device(name)
        ok, why = dev.status()
        if isinstance(dev, RecordedDevice):
            stored = (
                ", ".join(
                    f"{space} {len(dev.column(space, next(iter(ms))))}"
                    for space, ms in dev.tables.items()
                )
                + " (table)"
            )
        else:
            stored = str(counts.get(name, 0))
        table.add_row(
            name,
            dev.kind,
            dev.profile.get("class", ""),
            "yes" if ok else "no",
            stored,
            dev.description,
        )
        if not ok:
            notes.append(f"{name}: {why}")
    console = Console()
    console.print(table)
    for note in notes:
        console.print(f"[bold]unreachable[/bold] {note}")
