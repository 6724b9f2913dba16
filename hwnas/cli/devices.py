"""``hwnas devices`` (list) and ``hwnas devices check DEVICE`` (prove it reachable)."""

from __future__ import annotations

import click

from hwnas.cli.options import device_options, store_option


@click.group("devices", invoke_without_command=True)
@store_option
@click.pass_context
def devices_cmd(ctx, store):
    """List every device: kind, whether it is reachable now, and stored measurements.

    `hwnas devices check DEVICE` runs a tiny model on it to prove it works."""
    if ctx.invoked_subcommand is not None:
        return
    _list(store)


@devices_cmd.command("check")
@click.argument("device")
@device_options
def check_cmd(device, runtime, tracker, key, target, trials):
    """Prove DEVICE reachable: compile and time a tiny CNN on it (nothing is stored)."""
    from rich.console import Console
    from rich.markup import escape

    from hwnas.cli.measure import _open_device
    from hwnas.devices.check import check_device

    dev = _open_device(device, runtime, tracker, key, target, trials, require_reachable=False)
    result = check_device(dev)
    console = Console()
    console.print(f"ok: {dev.name}: {escape(result.status)}")
    if not result.measurements:
        console.print("  a recorded table: nothing to run")
    for metric, m in result.measurements.items():
        unit = "ms" if metric == "latency_ms" else "mJ"
        extra = f", CV {100 * m.cv:.1f}%" if m.cv else ""
        console.print(
            f"  tiny CNN {metric.split('_')[0]}: {m.value:.4f} {unit}{extra} ({m.runtime})"
        )


def _list(store):
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from hwnas.devices import broken_profiles, get_device, list_devices
    from hwnas.paths import default_store_path
    from hwnas.store import MeasurementStore

    path = store or default_store_path()
    counts = {}
    if store is not None or path.exists():
        with MeasurementStore(path) as st:
            counts = st.counts()
    table = Table(title=f"devices (measurement store: {path})")
    for col in ("device", "kind", "class", "reachable", "measurements", "description"):
        table.add_column(col)
    notes = []
    for name in list_devices():
        dev = get_device(name)
        ok, why = dev.status()
        if dev.table_spaces:
            sizes = []
            for space in dev.table_spaces:
                columns = [dev.table(space, m) for m in dev.metrics]
                sizes.append(f"{space} {next(len(c) for c in columns if c is not None)}")
            stored = ", ".join(sizes) + " (table)"
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
    for note in notes:  # notes hold install hints such as pip install 'hwnas[tvm]': not markup
        console.print(f"[bold]unreachable[/bold] {escape(note)}")
    for path, why in broken_profiles().items():
        console.print(f"[bold]broken profile[/bold] {escape(str(path))}: {escape(why)} (skipped)")
