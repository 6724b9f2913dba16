"""``hwnas devices`` (list) and ``hwnas devices check DEVICE`` (prove it reachable)."""

from __future__ import annotations

import click

from hwnas.cli.options import device_options, store_option


@click.group("devices", invoke_without_command=True)
@store_option
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Every column (class, description) and why each unreachable device cannot measure.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
@click.pass_context
def devices_cmd(ctx, store, show_all, as_json):
    """List every device: kind, whether it is reachable now, and stored measurements.

    `hwnas devices check DEVICE` runs a tiny model on it to prove it works."""
    if ctx.invoked_subcommand is not None:
        return
    _list(store, as_json, show_all)


@devices_cmd.command("check")
@click.argument("device")
@device_options
def check_cmd(device, runtime, tracker, key, target, trials):
    """Prove DEVICE reachable: compile and time a tiny CNN on it (nothing is stored)."""
    from rich.markup import escape

    from hwnas.cli.measure import _open_device
    from hwnas.cli.render import Console
    from hwnas.devices.check import check_device

    dev = _open_device(device, runtime, tracker, key, target, trials, require_reachable=False)
    result = check_device(dev)
    console = Console(emoji=False)
    console.print(f"ok: {escape(dev.name)}: {escape(result.status)}")
    if not result.measurements:
        console.print("  a recorded table: nothing to run")
    for metric, m in result.measurements.items():
        unit = "ms" if metric == "latency_ms" else "mJ"
        extra = f", CV {100 * m.cv:.1f}%" if m.cv else ""
        console.print(
            f"  tiny CNN {metric.split('_')[0]}: {m.value:.4f} {unit}{extra} "
            f"({escape(m.runtime)})"  # tvm:<target kind>-...: the user's --target names it
        )


def _list(store, as_json: bool = False, show_all: bool = False):
    import numpy as np
    from rich.markup import escape

    from hwnas.cli.render import Console, print_json, print_table
    from hwnas.db import is_url, redact
    from hwnas.devices import (
        broken_profiles,
        broken_shown,
        get_device,
        list_devices,
        profiles,
        shadowed,
    )
    from hwnas.errors import HwnasError
    from hwnas.paths import default_store_path
    from hwnas.store import MeasurementStore

    path = store or default_store_path()
    counts = {}
    if store is not None or path.exists():
        with MeasurementStore(path) as st:
            counts = st.counts()
    shown = redact(str(path)) if is_url(str(path)) else str(path)  # never the password
    rows, compact, listed = [], [], []
    broken = {  # the reason without the path, which the key or the line gives
        str(p): why.removeprefix(f"device profile {p}: ") for p, why in broken_profiles().items()
    }
    broken_shown()  # listed below, not warned of as well
    devices, failed = {}, {}
    for name in list_devices():
        try:
            devices[name] = get_device(name)
        except HwnasError as exc:
            failed[name] = exc
    statuses = {**failed, **_probe_all(devices)}
    for name in list_devices():
        try:  # a profile that parses but cannot be used is listed as broken, not fatal
            status = statuses[name]
            if isinstance(status, HwnasError):
                raise status
            dev, (ok, why) = devices[name], status
            tables = {}
            for space in dev.table_spaces:
                columns = [dev.table(space, m) for m in dev.metrics]
                tables[space] = max((int(np.isfinite(c).sum()) for c in columns if c is not None),
                                    default=0)  # fmt: skip
        except HwnasError as exc:
            where = profiles()[name].get("_path", name)
            why = str(exc).removeprefix(f"device profile {where} is broken: ")
            broken[where] = why.removeprefix(f"device profile {where}: ")  # the path once
            continue
        if tables:  # the compact list names the spaces; --all and --json give the row counts
            stored = ", ".join(f"{s} {n}" for s, n in tables.items()) + " (table)"
            short = "table: " + " ".join(tables)
        else:
            stored = str(counts.get(name, 0))
            short = f"{stored} measured"
        kind_class = dev.profile.get("class", "")
        ready = "yes" if ok else "no"
        kind = dev.kind + (" (replaced)" if shadowed(name) else "")  # see below
        rows.append((name, kind, ready, stored, kind_class, dev.description))
        compact.append((name, kind, ready, short))
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
                "profile": dev.profile.get("_path"),
                # a user's profile of a shipped device's name: the shipped file it replaces
                "replaces_shipped": shadowed(name),
            }
        )
    if as_json:
        print_json({"measurement_store": shown, "devices": listed, "broken_profiles": broken})
        return
    console = Console(emoji=False)
    if show_all:
        columns = ("device", "kind", "ready", "stored", "class", "description")
        print_table(console, f"devices (measurement store: {shown})", columns, rows,
                    keys=("device",))  # fmt: skip
    else:  # compact: what a user picks a device by, one whole line per device
        _print_compact(console, f"devices (measurement store: {shown})", compact)
    unreachable = [d for d in listed if not d["reachable"]]
    if unreachable and not show_all:
        console.print(
            f"{len(unreachable)} device(s) cannot measure now: "
            f"{escape(', '.join(d['device'] for d in unreachable))} (why: hwnas devices --all)",
            soft_wrap=True,
            highlight=False,
        )
    for d in unreachable if show_all else ():  # install hints such as pip install 'hwnas[tvm]'
        if not d["reachable"]:
            console.print(
                f"[bold]unreachable[/bold] {escape(d['device'])}: {escape(d['why_unreachable'])}",
                soft_wrap=True,
            )
    for d in listed:  # a user's values under a shipped device's name: never unsaid
        if d["replaces_shipped"]:
            console.print(
                f"[bold]replaced[/bold] {escape(d['device'])}: the user profile "
                f"{escape(d['profile'])} replaces the shipped {escape(d['replaces_shipped'])}",
                soft_wrap=True,
            )
    for p, why in broken.items():
        console.print(  # one whole line: a path is never cut at the terminal's width
            f"[bold]broken profile[/bold] {escape(p)}: {escape(why)} (skipped)", soft_wrap=True
        )


def _probe_all(devices):
    """Each device's ``status()`` probed in threads at once (a board's tracker or a phone's adb
    may wait its whole timeout; six silent trackers took 27 s one after another).

    Returns:
        name -> ``(ok, why)``, or the :class:`HwnasError` its probe raised.
    """
    from concurrent.futures import ThreadPoolExecutor

    from hwnas.errors import HwnasError

    def probe(dev):
        try:
            return dev.status()
        except HwnasError as exc:  # listed as a broken profile, in order
            return exc

    if not devices:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(devices))) as pool:
        return dict(zip(devices, pool.map(probe, devices.values()), strict=True))


def _print_compact(console, title: str, rows) -> None:
    """One line per device, columns aligned, nothing folded or cut (a long device name such as
    ``mobile_gpu_snapdragon_855_adreno_640_int8`` widens its column instead of taking two
    lines); a terminal narrower than a line wraps it as it would any text."""
    from rich.text import Text

    header = ("device", "kind", "ready", "stored")
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(3)]
    console.print(Text(title), soft_wrap=True)
    for r in [header, *rows]:
        cells = [str(v).ljust(w) for v, w in zip(r[:3], widths, strict=True)]
        console.print(Text("  ".join([*cells, str(r[3])])), soft_wrap=True)
