"""``hwnas measure import``: values measured with any tool become ordinary measurements."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.cli.measure import measure_group
from hwnas.cli.options import store_option


@measure_group.command("import")
@click.option("--device", "-d", required=True, help="Device name (new, or an imported one).")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--space", default="nasbench201", show_default=True, help="Search space.")
@click.option(
    "--dataset",
    default=None,
    help="Dataset the timed networks were built for (default: as hwnas refset export).",
)
@store_option
def import_cmd(device, files, space, dataset, store):
    """Import FILES (CSV: arch and latency_ms or energy_mj, as for hwnas predict
    --calibration) as measurements of DEVICE, creating its profile (kind imported) in the hwnas
    home if it has none, so that `hwnas search --device DEVICE` can use them."""
    import time

    import yaml
    from rich.console import Console

    from hwnas.devices import get_device, profiles, reload_profiles
    from hwnas.devices.base import Measurement
    from hwnas.devices.imported import ImportedDevice
    from hwnas.errors import HwnasError
    from hwnas.measure import arch_workload
    from hwnas.paths import confined, default_store_path, hwnas_home
    from hwnas.predictors.calibration import read_calibration
    from hwnas.predictors.featurize import get_featurizer
    from hwnas.spaces import Arch, get_space
    from hwnas.store import MeasurementStore

    sp = get_space(space)
    dataset = dataset or get_featurizer(space).dataset
    sp.dataset(dataset)
    if not device.replace("-", "").replace("_", "").replace(".", "").isalnum():
        raise HwnasError(f"device name '{device}' may only use letters, digits, '-', '_', '.'")
    existing = profiles().get(device)
    if existing is not None and not isinstance(get_device(device), ImportedDevice):
        raise HwnasError(
            f"device '{device}' is a {existing['kind']} device ({existing['_path']}); import "
            "into a new device name"
        )
    cals = [read_calibration(f, sp) for f in files]  # validate every file before storing
    for cal in cals:
        for m in cal.models:
            if not isinstance(m, Arch):
                raise HwnasError(
                    f"{cal.path}: '{m}' is an ONNX file; the store keeps architectures of a "
                    "space: name them by arch string"
                )
    new = kept = 0
    with MeasurementStore(store or default_store_path()) as st:
        for cal in cals:
            for arch, value in zip(cal.models, cal.values):
                w = arch_workload(sp, arch, dataset)
                added = st.append(
                    Measurement(
                        device=device,
                        runtime=ImportedDevice.runtime,
                        metric=cal.metric,
                        model_hash=w.model_hash,
                        label=arch.text,
                        batch_size=w.batch_size,
                        input_shape=w.input_shape,
                        value=float(value),
                        samples=(float(value),),
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
    Console(stderr=True).print(
        f"device '{device}': {new} measurements imported, {kept} already stored "
        f"(kept); profile {path}; store {st.path}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
