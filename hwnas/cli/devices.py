"""``hwnas devices`` (list) and ``hwnas devices check DEVICE`` (prove it reachable)."""

from __future__ import annotations

import click

from hwnas.cli.options import device_options, store_option


@click.group("devices", invoke_without_command=True)
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
@click.pass_context
def devices_cmd(ctx, store, as_json):
    """List every device: kind, whether it is reachable now, and stored measurements.

    `hwnas devices check DEVICE` runs a tiny model on it to prove it works."""
    if ctx.invoked_subcommand is not None:
        return
    _list(store, as_json)


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
    console.print(f"ok: {escape(dev.name)}: {escape(result.status)}")
    if not result.measurements:
        console.print("  a recorded table: nothing to run")
    for metric, m in result.measurements.items():
        unit = "ms" if metric == "latency_ms" else "mJ"
        extra = f", CV {100 * m.cv:.1f}%" if m.cv else ""
        console.print(
            f"  tiny CNN {metric.split('_')[0]}: {m.value:.4f} {unit}{extra} ({m.runtime})"
        )


def _list(store, as_json: bool = False):
    import numpy as np
    from rich.console import Console
    from rich.markup import escape

    from hwnas.cli.render import print_json, print_table
    from hwnas.devices import broken_profiles, get_device, list_devices
    from hwnas.paths import default_store_path
    from hwnas.store import MeasurementStore

    path = store or default_store_path()
    counts = {}
    if store is not None or path.exists():
        with MeasurementStore(path) as st:
            counts = st.counts()
    rows, listed = [], []
    for name in list_devices():
        dev = get_device(name)
        ok, why = dev.status()
        tables = {}
        if dev.table_spaces:
            for space in dev.table_spaces:
                columns = [dev.table(space, m) for m in dev.metrics]
                # architectures with a value (a table may leave some out: no measurement)
                tables[space] = next(int(np.isfinite(c).sum()) for c in columns if c is not None)
            stored = ", ".join(f"{s} {n}" for s, n in tables.items()) + " (table)"
        else:
            stored = str(counts.get(name, 0))
        kind_class = dev.profile.get("class", "")
        rows.append((name, dev.kind, kind_class, "yes" if ok else "no", stored, dev.description))
        listed.append(
            {
                "device": name,
                "kind": dev.kind,
                "class": kind_class,
                "reachable": bool(ok),
                "why_unreachable": None if ok else why,
                "stored_measurements": counts.get(name, 0),
                "table_rows": tables,
                "description": dev.description,
            }
        )
    broken = {str(p): why for p, why in broken_profiles().items()}
    if as_json:
        print_json({"measurement_store": str(path), "devices": listed, "broken_profiles": broken})
        return
    console = Console()
    print_table(
        console,
        f"devices (measurement store: {path})",
        ("device", "kind", "class", "ready", "stored", "description"),
        rows,
        keys=("device",),
    )
    for d in listed:  # notes hold install hints such as pip install 'hwnas[tvm]': not markup
        if not d["reachable"]:
            console.print(
                f"[bold]unreachable[/bold] {escape(d['device'])}: {escape(d['why_unreachable'])}",
                soft_wrap=True,
            )
    for p, why in broken.items():
        console.print(f"[bold]broken profile[/bold] {escape(p)}: {escape(why)} (skipped)")
