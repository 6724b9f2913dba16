"""``hwnas zoo``: the model zoo of a run (``verify``; ``list`` and ``show`` read entries through
:func:`hwnas.zoo.read_entry`, so listing costs no torch or ONNX import)."""

from __future__ import annotations

import shlex
from pathlib import Path

import click

from hwnas.cost_record import cost_digits as num


@click.group("zoo")
def zoo_group() -> None:
    """Model zoos: folders of ONNX models with cards, written by `hwnas search` and
    `hwnas train`."""


def zoo_path(ref: str, storage: str | None = None, entry: bool = False) -> Path:
    """The folder that ``ref`` names: a path as it is (an existing one, or one that is
    absolute, starts with ``.`` or ``~`` or lies in an existing folder); else a run (``latest``, a
    study name, a unique prefix, a word naming one run: :func:`hwnas.cli.runs.find_run`) whose
    zoo it is, or with ``entry``, ``RUN/PREFIX`` or ``PREFIX`` (the latest run's zoo) for
    the entry whose folder name starts with PREFIX (``latest/01``, ``03``).

    Raises:
        HwnasError: nothing, or more than one entry, matches.
    """
    from hwnas.cli.runs import _storage, find_run, run_rows
    from hwnas.errors import HwnasError

    path = Path(ref).expanduser()
    first = Path(ref.split("/", 1)[0]).expanduser()
    if (
        path.exists()
        or path.is_absolute()
        or ref.startswith((".", "~"))
        or ("/" in ref and first.is_dir())
    ):  # a path (a missing one is refused as such by the command)
        return path
    url, rdb = _storage(storage)
    rows = run_rows(rdb)
    run_ref, _, prefix = ref.rpartition("/") if entry else (ref, "", "")
    if entry and not run_ref:
        run_ref = "latest"
    try:
        row = find_run(run_ref, rows, url)
    except HwnasError:
        if entry and "/" not in ref:  # a single word: maybe a run's zoo after all
            row, prefix = find_run(ref, rows, url), ""
        else:
            raise
    if not row["folder_exists"]:
        raise HwnasError(f"the run folder of study '{row['study']}' is missing: {row['folder']}")
    zoo = Path(row["folder"]) / "zoo"
    if not zoo.is_dir():
        raise HwnasError(
            f"the run of study '{row['study']}' has no zoo ({zoo}): it ran with --no-zoo"
        )
    if row.get("zoo_models") == 0 and not any(p.is_dir() for p in zoo.iterdir()):
        raise HwnasError(  # said by the run too: "zoo/ with 0 ... models"
            f"the run of study '{row['study']}' put no model in its zoo ({zoo}): every "
            "architecture of its front is at chance level (pareto.csv's chance_level column), "
            "or it ran with --no-zoo"
        )
    if not prefix:
        return zoo
    found = sorted(p for p in zoo.iterdir() if p.is_dir() and p.name.startswith(prefix))
    if len(found) != 1:
        names = ", ".join(sorted(p.name for p in zoo.iterdir() if p.is_dir())) or "none"
        what = "no entry of {} starts" if not found else f"{len(found)} entries of {{}} start"
        raise HwnasError(f"{what.format(zoo)} with '{prefix}'; entries: {names}")
    return found[0]


@zoo_group.command("verify")
@click.argument("ref", metavar="[DIR|RUN]", default="latest")
@click.option(
    "--storage",
    default=None,
    metavar="URL",
    help="Optuna storage of RUN and of the studies whose records are checked (default: "
    "studies.db in the hwnas home).",
)
def verify_cmd(ref: str, storage: str | None) -> None:
    """Check every entry of the zoo folder DIR (or the one entry DIR; or the zoo of RUN:
    `latest`, the default, a study name or a unique part of one) as a deployment would:
    each file's sha256 against card.json, the card's keys in the ONNX metadata, and ONNX
    Runtime's output on test_data_set_0/input_0.pb against output_0.pb (within 1e-3 relative /
    1e-4 absolute, or the card's tolerance where tighter). Then against records the entry does
    not hold: the run's summary.json and the study that published the run. Each line says
    which records matched, or that the entry's provenance is not proven. Exit status 1 if any
    entry fails, 2 on bad input."""
    from hwnas.cli.render import visible
    from hwnas.zoo.verify import verify

    verdicts = verify(zoo_path(ref, storage), storage)  # HwnasError (not a zoo): one line, exit 2
    for v in verdicts:
        click.echo(visible(v.line()))
    failed = sum(not v.ok for v in verdicts)
    proven = sum(v.ok and v.proven for v in verdicts)
    click.echo(
        f"{len(verdicts) - failed} of {len(verdicts)} entries verified"
        + (f", {proven} of them proven by their study's record" if len(verdicts) > failed else "")
    )
    if failed:
        raise click.exceptions.Exit(1)


def _zoo_folders(ref: str | None, storage: str | None) -> list[Path]:
    """The zoo that REF names (a folder or a run, :func:`zoo_path`), or with none, the zoo of
    every finished run in STORAGE."""
    if ref is not None:
        return [zoo_path(ref, storage)]
    from hwnas.cli.runs import _storage, run_rows

    _, rdb = _storage(storage)
    folders = []
    for r in run_rows(rdb):
        zoo = Path(r["folder"]) / "zoo" if r["folder_exists"] else None
        if zoo is not None and zoo.is_dir() and any(zoo.iterdir()):
            folders.append(zoo)
    return folders


def entry_row(e: dict) -> dict:
    """What `hwnas zoo list` shows of one entry (:func:`hwnas.zoo.read_entry`)."""
    from hwnas.zoo.card import device_unit

    devices = e.get("devices") if isinstance(e.get("devices"), dict) else {}
    own = devices.get(e["device"]) if isinstance(devices.get(e["device"]), dict) else {}
    return {
        "entry": e["folder"],
        "name": e.get("name"),
        "space": e.get("space"),
        "arch": e["arch"],
        "dataset": e.get("dataset"),
        "accuracy": e["accuracy_value"],
        "accuracy_source": e["accuracy_source"],
        "chance_level": bool((e.get("chance_level") or {}).get("value")),
        "device": e["device"],
        "latency_ms": e["latency_ms"],
        "latency_source": e["latency_source"],
        "energy_mj": e.get("energy_mj"),
        "energy_source": e.get("energy_source", ""),
        # "ms per batch of 32" where the device's table is of a batch (zoo.card.device_unit)
        "units": {m: device_unit(m, c) for m, c in own.items() if isinstance(c, dict)},
        "weights": e["weights_kind"],
    }


@zoo_group.command("list")
@click.argument("path", metavar="[DIR|RUN]", required=False)
@click.option(
    "--storage",
    default=None,
    metavar="URL",
    help="Without DIR: list the zoos of the runs in this Optuna storage (default: studies.db "
    "in the hwnas home).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the entries as JSON on stdout.")
def list_cmd(path, storage, as_json):
    """List the entries of the zoo folder DIR or of RUN's zoo (`latest`, a study name or a unique
    part of one; without either, of every run's zoo, each entry named RUN/ENTRY): the
    architecture, accuracy and its source, latency (and energy, where the device has a meter)
    and its source, and whether the weights are trained or random. Arch strings are printed
    whole."""
    from hwnas.cli.render import Console, print_json, print_table, text_line
    from hwnas.zoo import entry_folders, read_entry
    from hwnas.zoo.read import zoo_contents

    zoos = _zoo_folders(path, storage)
    entries = []
    for zoo in zoos:
        cards = [read_entry(f) for f in entry_folders(zoo)]
        rows = [entry_row(c) for c in cards]
        # entries of the zoo whose model.onnx has the same graph: the same network
        for row, card in zip(rows, cards):
            sig = card.get("graph_signature")
            row["same_network"] = [
                Path(c["folder"]).name
                for c in cards
                if sig and c.get("graph_signature") == sig and c["folder"] != card["folder"]
            ]
        entries += rows
    # sub-folders that are no entry (a card deleted): said, not skipped unseen
    others = [(str(f), why) for zoo in zoos for f, why in zoo_contents(zoo).others]
    if as_json:
        print_json({"zoos": [str(z) for z in zoos], "entries": entries,
                    "not_entries": [{"folder": f, "why": why} for f, why in others]})  # fmt: skip
        return
    console = Console(emoji=False)
    rows = []
    many = len(zoos) > 1  # entry folders repeat across runs: name them by run too
    metered = any(e["energy_mj"] is not None for e in entries)  # an energy column then
    for e in entries:
        acc = "" if e["accuracy"] is None else f"{e['accuracy']:.2f}"
        per = {  # a table of a batch: "per batch of 32" beside the header's unit
            m: f" ({u.split(' ', 1)[1]})" if " " in u else "" for m, u in e["units"].items()
        }
        lat = "" if e["latency_ms"] is None else (
            f"{num(e['latency_ms'])}{per.get('latency_ms', '')} {e['device']}"
        )  # fmt: skip
        mj = "" if e["energy_mj"] is None else (
            f"{num(e['energy_mj'])}{per.get('energy_mj', '')} {e['device']}"
        )  # fmt: skip
        entry = Path(e["entry"])
        rows.append(
            (
                f"{entry.parent.parent.name}/{entry.name}" if many else entry.name,
                e["arch"],
                f"{acc}{' chance' if e['chance_level'] else ''} ({e['accuracy_source']})",
                f"{lat} ({e['latency_source']})" if lat else "",
                *([f"{mj} ({e['energy_source']})" if mj else ""] if metered else []),
                e["weights"],
            )
        )
    columns = ("entry", "arch", "accuracy % (source)", "latency ms (device, source)",
               *(["energy mJ (device, source)"] if metered else []), "weights")  # fmt: skip
    print_table(console, "zoo: " + ", ".join(map(str, zoos)), columns, rows,
                keys=("entry", "arch"))  # fmt: skip
    said = set()
    for e in entries:
        group = tuple(sorted([Path(e["entry"]).name, *e["same_network"]]))
        if e["same_network"] and (Path(e["entry"]).parent, group) not in said:
            said.add((Path(e["entry"]).parent, group))
            text_line(
                console,
                f"same network: {' = '.join(group)} (identical model.onnx graphs: ship one; "
                "their table latencies differ by operations whose results are discarded)",
            )
    for folder, why in others:
        text_line(console, f"! {folder}: {why} (hwnas zoo verify fails it)")
    if not entries:
        text_line(console, "no zoo entries: run `hwnas search` (without --no-zoo)")
    else:
        text_line(console, "details: hwnas zoo show ENTRY; check: hwnas zoo verify DIR")


@zoo_group.command("show")
@click.argument("ref", metavar="ENTRY")
@click.option("--storage", default=None, metavar="URL", help="Study storage for RUN/PREFIX.")
@click.option("--json", "as_json", is_flag=True, help="Print the card as JSON on stdout.")
def show_cmd(ref, storage, as_json):
    """Show one zoo entry: architecture, accuracy and latencies with their sources, weights,
    preprocessing, input and output, and its files. ENTRY is the entry's folder, or RUN/PREFIX
    (`latest/01`, a study name or a unique part of one, then the start of the entry's folder
    name), or PREFIX alone for the latest run's zoo."""
    from hwnas.cli.render import Console, print_json, text_line
    from hwnas.errors import HwnasError
    from hwnas.zoo import is_entry, read_entry
    from hwnas.zoo.card import device_unit

    path = zoo_path(ref, storage, entry=True)
    if not is_entry(path):
        raise HwnasError(f"{path} is not a zoo entry (no card.json); list them: hwnas zoo list")
    e = read_entry(path)
    if as_json:
        print_json(e)
        return
    console = Console(emoji=False)
    line = lambda *p: text_line(console, *p)  # noqa: E731
    row = entry_row(e)
    line(f"entry     {e['folder']}")
    line(f"arch      {e['arch']}  ({e.get('space')})")
    chance = "  CHANCE LEVEL: not usable" if row["chance_level"] else ""
    acc = e.get("accuracy") or {}
    value = "none" if row["accuracy"] is None else f"{row['accuracy']:.2f}%"
    line(f"accuracy  {value} on {e.get('dataset')} {acc.get('split', '')}"
         f"  [{row['accuracy_source']}]{chance}")  # fmt: skip
    bench = e.get("table_accuracy")
    if bench:
        what = "search's function" if bench.get("kind") == "function" else "benchmark table"
        line(f"          {what}: {bench['value']:.2f}%  [{bench.get('source', '')}]")
    w = e.get("weights") or {}
    line(f"weights   {row['weights']}" + (f": {w.get('note')}" if w.get("note") else ""))
    for device, metrics in (e.get("devices") or {}).items():
        for metric, m in metrics.items():
            unit = device_unit(metric, m)
            line(f"{metric:<9} {m.get('value')} {unit} on {device}  [{m.get('source', '')}]")
    pre = e.get("preprocessing") or {}
    if pre:
        stats = (
            f"mean {pre['mean']} std {pre['std']}"
            if pre.get("mean") is not None
            else "no normalisation recorded"
        )
        line("input     " + " -> ".join(pre.get("steps", [])) + f"; {stats}")
    line(f"shape     {e['input']['name']} {e['input']['shape']} -> {e['output']['name']} "
         f"{e['output']['shape']}")  # fmt: skip
    line(f"params    {e.get('params')}  MACs {e.get('flops')}")
    same = e.get("same_network") if isinstance(e.get("same_network"), dict) else {}
    if same.get("entries"):
        line(f"same      network as {', '.join(map(str, same['entries']))}: {same.get('note', '')}")
    line(f"files     {', '.join(sorted(e.get('files') or {}))}")
    line(f"check     hwnas zoo verify {shlex.quote(str(e['folder']))}")
