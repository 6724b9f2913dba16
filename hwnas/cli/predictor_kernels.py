"""``hwnas predictor kernels``: time kernel configurations on a live device (adaptive
sampling) for the kernel-level predictor's per-type regressors."""

from __future__ import annotations

import click

from hwnas.cli.options import SEED, store_option
from hwnas.cli.predictor import predictor_group


@predictor_group.command("kernels")
@click.option("--device", "-d", required=True, help="A live ONNX Runtime device (cpu).")
@click.option(
    "--budget",
    type=click.IntRange(min=1),
    default=500,
    show_default=True,
    help="New kernels to time, about (each once, kept in the store). Kernels come in whole "
    "generated layer patterns of several kernels, 8 patterns at first, so a small budget times "
    "more (--budget 3 times about 20).",
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Sampling seed.")
@store_option
def kernels_cmd(device, budget, seed, store):
    """Time about BUDGET new kernels of generated layer patterns on DEVICE, first at random,
    then where the kernel-level predictor's regressors are least certain (nn-Meter's adaptive
    sampling), so that `hwnas predict --device DEVICE --onnx` times fewer kernels of new
    models."""
    from hwnas.devices import get_device
    from hwnas.measure import Profiler
    from hwnas.paths import check_writable, default_store_path, hwnas_home
    from hwnas.predictors.kernels.features import kernel_type
    from hwnas.predictors.kernels.sampling import sample_device
    from hwnas.predictors.kernels.timing import stored_kernels
    from hwnas.store import MeasurementStore

    dev = get_device(device)
    dev.require_reachable()
    if store is None:
        check_writable(hwnas_home(), "HWNAS_HOME")
    with MeasurementStore(store or default_store_path()) as st:
        profiler = Profiler(dev, st)
        before = len(stored_kernels(st, dev.name, dev.runtime))
        kernels, _ = sample_device(profiler, budget, seed, log=lambda m: click.echo(m, err=True))
        types = len({kernel_type(k) for k in kernels})
        click.echo(  # the profiler's count includes the runtime's call overhead, timed once
            f"{len(kernels) - before} new kernel(s) timed now; {len(kernels)} kernels of "
            f"{types} types on {dev.name} in the store {st.path}"
        )
