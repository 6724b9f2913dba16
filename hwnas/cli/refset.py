"""``hwnas refset export``: the reference architectures as ONNX files, to time anywhere."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.spaces import space_option


@click.group("refset")
def refset_group():
    """The reference set: the architectures a new device is measured on (its hardware
    embedding and the predictor's calibration)."""


@refset_group.command("export")
@click.option(
    "--space",
    default="nasbench201",
    show_default=True,
    callback=space_option,
    help="Search space (a name, or a space file's path).",
)
@click.option(
    "--dataset",
    default=None,
    help="Dataset the networks are built for (default: the one the predictors were trained "
    "on: cifar100 for nasbench201/fbnet, imagenet for ofa; a declared space's "
    "reference_dataset).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder for the ONNX files and calibration.csv.",
)
def export_cmd(space, dataset, out):
    """Write the space's reference architectures to OUT as ONNX (opset 17, dynamic batch,
    random weights) with calibration.csv: fill its latency_ms column (or rename it energy_mj)
    with the values measured on the device, then `hwnas predict --calibration` or
    `hwnas measure import`."""
    import csv

    from rich.console import Console

    from hwnas.measure import arch_workload
    from hwnas.predictors.featurize import FEATURIZERS, get_featurizer
    from hwnas.spaces import get_space

    sp = get_space(space)
    if dataset is None:  # the predictors' dataset, else the space's own reference dataset
        dataset = get_featurizer(space).dataset if space in FEATURIZERS else sp.reference_dataset
    sp.dataset(dataset)
    archs = sp.reference_archs()
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for n, arch in enumerate(archs):
        w = arch_workload(sp, arch, dataset)
        name = f"ref{n:02d}-{w.model_hash}.onnx"
        (out / name).write_bytes(w.onnx_bytes())
        rows.append(
            {
                "arch": arch.text,
                "onnx": name,
                "input_shape": "x".join(map(str, w.input_shape)),
                "latency_ms": "",
            }
        )
    with open(out / "calibration.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    Console(stderr=True).print(
        f"wrote {len(rows)} reference architectures of {space} ({dataset}) to {out}: time each "
        f"ONNX file on the device (batch 1), fill calibration.csv's latency_ms column"
    )
