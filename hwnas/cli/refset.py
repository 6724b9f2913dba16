"""``hwnas refset export``: the reference architectures as ONNX files, to time anywhere."""

from __future__ import annotations

from pathlib import Path

import click


@click.group("refset")
def refset_group():
    """The reference set: the architectures a new device is measured on (its hardware
    embedding and the predictor's calibration)."""


@refset_group.command("export")
@click.option("--space", default="nasbench201", show_default=True, help="Search space.")
@click.option(
    "--dataset",
    default=None,
    help="Dataset the networks are built for (default: the one the predictors were trained "
    "on: cifar100 for nasbench201/fbnet, imagenet for ofa).",
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
    from hwnas.predictors.data import reference_indices
    from hwnas.predictors.featurize import get_featurizer
    from hwnas.spaces import get_space

    sp = get_space(space)
    dataset = dataset or get_featurizer(space).dataset
    sp.dataset(dataset)
    archs = [sp.arch_at(i) for i in reference_indices(space)]
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
