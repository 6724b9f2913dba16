"""``hwnas arch``: everything hwnas knows about one architecture."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.cli.options import SpaceLast, space_with_default_option
from hwnas.cost_record import cost_digits as num


@click.command("arch", cls=SpaceLast)
@click.argument("arch")
@space_with_default_option
@click.option(
    "--dataset",
    default=None,
    help="Dataset of the network (default: cifar100, or the space's first dataset).",
)
@click.option(
    "--onnx",
    "onnx_out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also export the network (random weights) to this ONNX file.",
)
def arch_cmd(arch, space, dataset, onnx_out):
    """Show ARCH (an arch string or an index into the space's recorded architectures):
    canonical form, index, params, FLOPs, table accuracies and recorded latency per device."""
    from hwnas.cli.render import Console
    from hwnas.export import count_params_flops, export_onnx
    from hwnas.export_cache import WEIGHT_SEED
    from hwnas.spaces import IndexedSpace, TabulatedSpace, ability, arch_from_text, get_space
    from hwnas.zoo.write import recorded_latencies

    sp = get_space(space)
    if onnx_out is not None:  # before the network is built
        from hwnas.paths import check_writable

        check_writable(onnx_out.parent, "--onnx's folder")
    if dataset is None:
        dataset = sp.default_dataset()
    spec = sp.dataset(dataset)
    indexed = ability(sp, IndexedSpace)
    a = arch_from_text(sp, arch)
    import torch

    torch.manual_seed(WEIGHT_SEED)
    model = sp.build(a, dataset)
    shape = (1, *sp.input_shape(a, dataset))
    params, flops = count_params_flops(model, shape)
    # arch strings literal
    console = Console(emoji=False, soft_wrap=True, markup=False, highlight=False)
    console.print(f"arch     {a.text}")
    from hwnas.errors import HwnasError

    try:
        if indexed is None:
            raise HwnasError("no index")
        console.print(f"index    {indexed.index(a)}")
    except HwnasError:
        console.print("index    none (not among the architectures with recorded measurements)")
    console.print(
        f"network  {dataset}: input {list(shape)}, {spec.num_classes} classes, "
        f"{params / 1e6:.3f} M params, {flops / 1e6:.2f} M FLOPs (MACs)"
    )
    tabulated = ability(sp, TabulatedSpace)
    if tabulated is not None:
        row = tabulated.index(a)
        accs = ", ".join(f"{d} {tabulated.table_accuracy(d)[row]:.2f}%" for d in sp.datasets())
        console.print(f"accuracy {accs} (200-epoch test, benchmark table)")
    # only indexed spaces have recorded tables
    lat = (
        recorded_latencies(sp.name, [a.text], skip="", dataset=dataset)[a.text]
        if indexed is not None
        else {}
    )
    if lat:
        from hwnas.cli.render import print_table

        # a table of a batch (a GPU's at 256): per batch, as zoo list and the cards say
        per = {d: f" (per batch of {e['batch_size']})" for d, e in lat.items() if "batch_size" in e}
        rows = [(dev, num(e["value"]) + per.get(dev, "")) for dev, e in sorted(lat.items())]
        print_table(
            console, "recorded latency", ("device", "latency ms"), rows, keys=("device",),
            right=("latency ms",),
        )  # fmt: skip
    elif indexed is not None and recorded_latencies(sp.name, [a.text], skip="")[a.text]:
        # the tables hold other networks (CIFAR's 32x32 cells, not ImageNet16's 16x16 ones)
        console.print(
            f"recorded latency: none of {dataset}'s networks; the tables were measured on "
            "another input size (--dataset cifar100 shows them)"
        )
    if onnx_out is not None:
        onnx_out.parent.mkdir(parents=True, exist_ok=True)
        onnx_out.write_bytes(export_onnx(model, shape))
        console.print(f"wrote {onnx_out}")
