"""``hwnas measure import``: values measured with any tool become ordinary measurements."""

from __future__ import annotations

import re
from pathlib import Path

import click

from hwnas.cli.measure import measure_group
from hwnas.cli.options import SpaceLast, store_option
from hwnas.spaces import space_option


@measure_group.command("import", cls=SpaceLast)
@click.option(
    "--device", "-d", required=True, help="Device name (new, or an imported one of yours)."
)
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--space", default="nasbench201", show_default=True, callback=space_option, help="Search space."
)
@click.option(
    "--table",
    "as_table",
    is_flag=True,
    help="FILES are the device's table: make it a recorded device searched on these values "
    "(the default when they cover every architecture of the space).",
)
@click.option(
    "--dataset",
    default=None,
    help="Dataset the timed networks were built for (default: as hwnas refset export).",
)
@store_option
def import_cmd(device, files, space, as_table, dataset, store):
    """Import FILES (CSV: arch and latency_ms or energy_mj, as for hwnas predict
    --calibration) as measurements of DEVICE, creating its profile in the hwnas home if it has
    none, so that `hwnas search --device DEVICE` can use them.

    A few values (kind imported) calibrate a predictor of the others. Values of every
    architecture of the space, or any FILES with --table, make DEVICE a recorded device whose
    table (copied to <hwnas home>/devices/tables/) is searched on its own values.

    A value already stored for DEVICE is kept when FILES give the same one; a different one
    (or two FILES that disagree) is refused before anything is imported: the store keeps one
    value per architecture, so import corrected values into another device name."""
    import time

    import yaml

    from hwnas.cli.render import Console
    from hwnas.devices import broken_profile_of, get_device, profiles, reload_profiles
    from hwnas.devices.base import Measurement
    from hwnas.devices.imported import ImportedDevice
    from hwnas.errors import HwnasError
    from hwnas.measure import arch_workload
    from hwnas.paths import confined, default_store_path, hwnas_home
    from hwnas.predictors.calibration import MIN_CALIBRATION, read_calibration
    from hwnas.predictors.featurize import get_featurizer
    from hwnas.spaces import Arch, get_space
    from hwnas.store import MeasurementStore

    sp = get_space(space)
    dataset_given = dataset is not None
    dataset = dataset or get_featurizer(space).dataset
    sp.dataset(dataset)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", device):  # '-x' reads as an option
        raise HwnasError(
            f"device name '{device}': a letter or digit first, then letters, digits, '-', '_', '.'"
        )
    existing = profiles().get(device)
    broken = broken_profile_of(device) if existing is None else None
    if broken is not None:  # a file of the user's gives the name: never written over
        raise HwnasError(
            f"device '{device}' is given by the profile {broken[0]}, which is broken "
            f"({broken[1]}); correct or remove it, or import into a new device name"
        )
    imported = existing is not None and get_device(device).kind == ImportedDevice.kind
    adding = imported and not as_table
    # validate every file before storing; an imported device takes values one at a time (the
    # best of a search, to verify it), a new one needs enough to calibrate on
    try:
        cals = [read_calibration(f, sp, 1 if adding else MIN_CALIBRATION) for f in files]
    except HwnasError as exc:
        ctx = click.get_current_context(silent=True)
        typed = ctx is not None and ctx.get_parameter_source("space") in (
            click.core.ParameterSource.COMMANDLINE,
            click.core.ParameterSource.ENVIRONMENT,
        )
        if typed or f"unknown or malformed {sp.name} arch" not in str(exc):
            raise
        raise HwnasError(  # `hwnas refset export --space mycnn.py:space` wrote the file
            f"{exc} (architectures of another space? name it as `hwnas refset export` was "
            "given it: --space NAME, or --space FILE.py:ATTR)"
        ) from None
    for cal in cals:
        for m in cal.models:
            if not isinstance(m, Arch):
                raise HwnasError(
                    f"{cal.path}: '{m}' is an ONNX file; the store keeps architectures of a "
                    "space: name them by arch string"
                )
    from hwnas.predictors.calibration import check_input_shapes, check_onnx_names

    check_input_shapes(cals, sp, dataset, dataset_given=dataset_given)
    check_onnx_names(cals, sp, dataset)  # an arch column sorted alone: values misplaced
    if as_table or _covers_space(cals, sp):
        _import_table(device, sp, cals, existing, dataset)
        return
    if existing is not None and not imported:
        raise HwnasError(
            f"device '{device}' is a {existing['kind']} device ({existing['_path']}); import "
            "into a new device name"
        )
    new = kept = 0
    with MeasurementStore(store or default_store_path()) as st:
        given = [
            (cal, arch, float(value), arch_workload(sp, arch, dataset))
            for cal in cals
            for arch, value in zip(cal.models, cal.values)
        ]
        _refuse_conflicts(device, given, st)  # before anything is stored
        seen = set()  # the same value in two files is one value (conflicts were refused)
        for cal, arch, value, w in given:
            if (cal.metric, w.model_hash) in seen:
                continue
            seen.add((cal.metric, w.model_hash))
            added = st.append(
                Measurement(
                    device=device,
                    runtime=ImportedDevice.runtime,
                    metric=cal.metric,
                    model_hash=w.model_hash,
                    label=arch.text,
                    batch_size=w.batch_size,
                    input_shape=w.input_shape,
                    value=value,
                    samples=(value,),
                    measured_at=time.time(),
                    source=f"imported:{cal.path.resolve()}",
                )
            )
            new, kept = new + added, kept + (not added)
    profile = dict(existing or {})
    profile.pop("_path", None)
    metrics = sorted({*profile.get("metrics", []), *(c.metric for c in cals)})
    spaces = sorted({*profile.get("spaces", []), space})
    sources = sorted({*profile.get("sources", []), *(str(c.path.resolve()) for c in cals)})
    profile.update(
        name=device,
        kind="imported",
        description=profile.get("description") or f"measurements imported from {files[0]}",
        metrics=metrics,
        spaces=spaces,
        sources=sources,
    )
    folder = hwnas_home() / "devices"
    path = Path(existing["_path"]) if existing else confined(folder, f"{device}.yaml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    reload_profiles()
    flagged = sum(c.flagged for c in cals)
    err = Console(emoji=False, stderr=True)
    err.print(
        f"device '{device}': {new} measurements imported, {kept} already stored "
        f"(kept)"
        + (f", {flagged} flagged rows skipped" if flagged else "")
        + f"; profile {path}; store {st.path}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    _warn_units(err, sp, cals)


def _warn_units(err, space, cals, exclude: str | None = None) -> None:
    """Print :func:`hwnas.devices.recorded.unit_warning`'s line for each metric of ``cals``
    whose values look like another unit (seconds or microseconds for ms)."""
    from hwnas.devices.recorded import unit_warning

    for metric in sorted({c.metric for c in cals}):
        archs = [a for c in cals if c.metric == metric for a in c.models]
        values = [v for c in cals if c.metric == metric for v in c.values]
        names = [f"{c.path.name}:{line}" for c in cals if c.metric == metric
                 for line, _shape in c.shapes]  # fmt: skip
        warning = unit_warning(space, metric, archs, values, exclude=exclude, names=names)
        if warning:
            err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)


UNITS = {"latency_ms": "ms", "energy_mj": "mJ"}

REL_TOLERANCE = 1e-6
"""Two values of an architecture within this relative difference are the same value (a file
written again with another number of digits): the stored one is kept, nothing is said."""


def _refuse_conflicts(device: str, given, store) -> None:
    """Refuse values that disagree with each other or with the store: the store keeps one
    value per (device, architecture, metric) and has no operation that replaces one, so an
    import would otherwise keep the old value and report the new one as "already stored".

    Args:
        device: the imported device's name.
        given: (calibration file, arch, value in ms or mJ, workload) of every value to import.
        store: the open :class:`hwnas.store.MeasurementStore`.

    Raises:
        HwnasError: one line naming the architecture, both values with their unit and where
            each comes from, and how to import the new one.
    """
    import math

    from hwnas.devices.imported import ImportedDevice
    from hwnas.errors import HwnasError

    seen: dict[tuple[str, str], tuple[float, object]] = {}
    for cal, arch, value, w in given:
        unit = UNITS[cal.metric]
        key = (cal.metric, w.model_hash)
        if key in seen:
            first, where = seen[key]
            if not math.isclose(value, first, rel_tol=REL_TOLERANCE):
                raise HwnasError(
                    f"{cal.path}: {arch.text} has {cal.metric} {value:g} {unit}, but {where} "
                    f"gives {first:g} {unit}; nothing imported: give each architecture one value"
                )
            continue
        seen[key] = (value, cal.path)
        old = store.lookup(device, ImportedDevice.runtime, cal.metric, w.model_hash,
                           w.input_shape)  # fmt: skip
        if old is None or old.flagged or math.isclose(value, old.value, rel_tol=REL_TOLERANCE):
            continue  # new, replaced (a flagged one), or the same value: kept
        source = old.source.removeprefix("imported:")
        raise HwnasError(
            f"{cal.path}: {arch.text} has {cal.metric} {value:g} {unit}, but the store "
            f"{store.path} already holds {old.value:g} {unit} for it on device '{device}' "
            f"(from {source or 'a measurement'}); nothing imported: the store keeps one value "
            "per architecture and cannot replace it, so import the corrected values into "
            "another device name (or another --store)"
        )


def _covers_space(cals, space) -> bool:
    """Whether the files give one metric of every architecture of an indexed space."""
    from hwnas.spaces import IndexedSpace, ability

    indexed = ability(space, IndexedSpace)
    if indexed is None:
        return False
    for metric in {c.metric for c in cals}:
        rows = {indexed.index(m) for c in cals if c.metric == metric for m in c.models}
        if len(rows) == len(indexed):
            return True
    return False


def _import_table(device: str, space, cals, existing: dict | None, dataset: str) -> None:
    """Write the files' values as DEVICE's table(s) of ``dataset``'s networks (the table
    entry's ``dataset``: what fixes their input size) and its ``kind: recorded`` profile.

    Raises:
        HwnasError: the space has no architecture index; an architecture is given twice; the
            device name belongs to a profile outside the hwnas home, or to a device that is
            not a recorded one (an imported device's values would be lost); the device's table
            of the metric is of networks of another input size (before anything is written).
    """
    import csv

    import numpy as np
    import yaml

    from hwnas.cli.render import Console
    from hwnas.devices import get_device, reload_profiles
    from hwnas.errors import HwnasError
    from hwnas.paths import hwnas_home
    from hwnas.spaces import IndexedSpace, ability

    indexed = ability(space, IndexedSpace)
    if indexed is None:
        raise HwnasError(
            f"space '{space.name}' has no architecture index: a device table needs one "
            "(import without --table to calibrate a predictor instead)"
        )
    folder = hwnas_home() / "devices"
    if existing is not None and Path(existing["_path"]).parent.resolve() != folder.resolve():
        raise HwnasError(
            f"device '{device}' is defined by {existing['_path']}; import its table into a new "
            "device name"
        )
    if existing is not None and existing.get("kind") != "recorded":  # its values would be lost
        kind = str(existing.get("kind"))
        lost = " and its imported values" if kind == "imported" else ""
        raise HwnasError(
            f"device '{device}' is {'an' if kind[:1] in 'aeiou' else 'a'} {kind} device: a "
            f"--table import would replace its profile{lost} with a recorded table; import "
            "the table into a new device name"
        )
    values: dict[str, np.ndarray] = {}
    for cal in cals:
        column = values.setdefault(cal.metric, np.full(len(indexed), np.nan))
        for arch, value in zip(cal.models, cal.values):
            row = indexed.index(arch)
            if np.isfinite(column[row]):
                raise HwnasError(f"{cal.path}: {arch.text} is also in another imported file")
            column[row] = value
    # the device's table keeps what it holds: the files' values are added to it, and replace
    # those of the same architectures (corrected values), never cut the table down to them
    replaced: dict[str, int] = {}
    for metric, new in values.items():
        try:  # a table that can no longer be read (its file deleted) is what this replaces
            dev = get_device(device) if existing is not None else None
            old = dev.table(space.name, metric) if dev is not None else None
        except HwnasError:
            old = None
        if old is None:
            continue
        try:  # values of 16x16 networks were added to a table of 32x32 ones
            dev.check_table_dataset(space.name, metric, dataset)
        except HwnasError:
            have = dev.table_dataset(space.name, metric)
            raise HwnasError(
                f"device '{device}' has a {metric} table of {space.name}'s {have} networks, "
                f"another input size than these values' {dataset} networks: give --dataset "
                f"{have} if they are of those, else import them into a new device name"
            ) from None
        both = np.isfinite(new) & np.isfinite(old)
        replaced[metric] = int((both & ~np.isclose(new, old, rtol=REL_TOLERANCE, atol=0)).sum())
        values[metric] = np.where(np.isfinite(new), new, old)
    profile = dict(existing or {}) if (existing or {}).get("kind") == "recorded" else {}
    profile.pop("_path", None)
    tables = dict(profile.get("tables") or {})
    per_space = dict(tables.get(space.name) or {})
    (folder / "tables").mkdir(parents=True, exist_ok=True)
    lines = []
    for metric, column in values.items():
        name = f"tables/{device}.{space.name}.{metric}.csv"
        tmp = folder / f"{name}.tmp"
        with open(tmp, "w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["index", "arch", metric])
            for row in np.flatnonzero(np.isfinite(column)):
                arch = indexed.arch_at(int(row)).text
                writer.writerow([int(row), arch, repr(float(column[row]))])
        tmp.replace(folder / name)
        # what the values are of: the networks of --dataset (else the space's default)
        per_space[metric] = {"file": name, "column": metric, "dataset": dataset}
        have = int(np.isfinite(column).sum())
        changed = f" ({replaced[metric]} stored values replaced)" if replaced.get(metric) else ""
        lines.append(f"{metric} of {have} of {len(indexed)} {space.name} architectures{changed}")
    tables[space.name] = per_space
    sources = sorted({*profile.get("sources", []), *(str(c.path.resolve()) for c in cals)})
    profile.update(
        name=device,
        kind="recorded",
        description=profile.get("description") or f"table imported from {cals[0].path.name}",
        source=f"imported with hwnas measure import ({', '.join(sources)})",
        sources=sources,
        tables=tables,
    )
    # the profile's own file where it has one (foo.yaml naming device 'mylab': a second file
    # giving the same name broke the device after the import had written it)
    path = Path(existing["_path"]) if existing is not None else folder / f"{device}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    reload_profiles()
    err = Console(emoji=False, stderr=True)
    err.print(
        f"device '{device}': recorded table, {'; '.join(lines)}; profile {path} (searched on "
        "these values: hwnas search --device " + device + ")",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    from hwnas.devices import get_device
    from hwnas.devices.recorded import power_warning

    warning = power_warning(get_device(device), space.name)  # a unit slipped by 1000x
    if warning:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    _warn_units(err, space, cals, exclude=device)
