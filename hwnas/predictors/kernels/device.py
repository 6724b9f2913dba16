"""The kernel-level predictor of one live device, calibrated on what its store holds.

:func:`kernel_predictor` makes the :class:`~hwnas.predictors.kernels.model.KernelPredictor` of
a live ONNX Runtime device: every kernel the store holds for the device (timed by earlier
predictions, searches, ``hwnas predictor kernels``) and its per-type regressors, and the
network-level correction fitted on the *calibration networks* the store holds: the reference
sets of the declared spaces at their deployment size (``hwnas refset measure --device D
--space mobilenetv4``, ``--space vit``: 224x224 networks, what users deploy). With fewer than
3 of them the correction is the prior (:data:`PRIOR`, from the CPUs this project measured)
and the interval is wider; the returned note says which, and the command that calibrates it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hwnas.predictors.kernels.model import Correction, KernelPredictor

KERNEL_BUDGET = 2000
"""New kernels one prediction may time on the device by default (``hwnas predict
--kernel-budget``): a 224x224 network has 50-300 kernels, most shared with others."""

PRIOR = Correction(scale=1.26, bias_ms=0.0, rel_std=0.40, q=1.6448536, networks=0)
"""Correction before any calibration network is measured on the device, from the three CPUs
this project has measured whole networks and their kernels on (ONNX Runtime 1.32, 1 thread),
the kernels bounded below by their weight streaming (:mod:`hwnas.predictors.kernels.model`)
where a rate was timed: the reference CPU took 1.16 times the kernel sum (median over 431
networks at 224x224, 1.03-1.30 across families; ``devices/data/cpu_ground_truth/``; no
streaming rate was timed there, and on the Xeon below the bound moves 224x224 networks by
0-6%), a shared Intel Xeon VM 1.12 (``experiments/kernel_sum_ratio.py``, 66 well-known
networks at 32-224 px, log spread 0.15, 5-95% 0.94-1.52), a shared 2-core AMD EPYC VM 1.55
(the same script before the bound existed, two runs of 44 networks at 32-160 px: median 1.48
and 1.69, 5-95% 0.84-2.48 and 0.94-2.77; the bound would have lowered it). The scale is the
geometric mean of the three medians and the relative standard deviation 0.40 a 90% interval
of 0.65-2.43 times the kernel sum: it holds the reference CPU's whole range, the Xeon's 5-95%
and the EPYC's up to its 95th percentile. Calibrating narrows it."""

CALIBRATION_SPACES = ("mobilenetv4", "vit")
"""Spaces whose reference sets, at their deployment size, calibrate the correction."""


def calibration_networks(device, store, spaces=CALIBRATION_SPACES):
    """(architectures, latency in ms) of the calibration networks the store holds for
    ``device`` (unflagged measurements only; measures nothing)."""
    from hwnas.predictors.calibration import stored_reference_set
    from hwnas.spaces import get_space

    archs, values = [], []
    for name in spaces:
        space = get_space(name)
        for v in stored_reference_set(device, store, space, space.reference_dataset, "latency_ms"):
            if np.isfinite(v.value) and v.value > 0 and not v.flagged:
                archs.append(v.arch)
                values.append(v.value)
    return archs, np.array(values)


def kernel_predictor(
    profiler, budget: int = KERNEL_BUDGET, on_kernel: Callable | None = None
) -> tuple[KernelPredictor, str]:
    """The kernel-level predictor of ``profiler``'s device and one line saying how its
    network-level correction was calibrated.

    Args:
        profiler: :class:`hwnas.measure.Profiler` of a live ONNX Runtime device with a store.
        budget: new kernels each prediction may time.
        on_kernel: called with each kernel timed.

    Raises:
        HwnasError: the device does not run ONNX Runtime models.
    """
    dev = profiler.device
    # the kernels ONNX Runtime fuses depend on its intra-op threads: read them as timed
    threads = int(getattr(getattr(dev, "protocol", None), "threads", 1))
    kp = KernelPredictor(profiler, budget=budget, threads=threads, on_kernel=on_kernel)
    archs, values = calibration_networks(dev, profiler.store)
    if len(values) >= 3:
        kp.fit(archs, values)
        c = kp.correction
        note = (
            f"network-level correction calibrated on {len(values)} reference networks "
            f"measured on {dev.name} (x{c.scale:.3f} {c.bias_ms:+.3f} ms, residual "
            f"{100 * c.rel_std:.1f}%)"
        )
    else:
        kp.correction = Correction(**PRIOR.__dict__)
        spaces = " and ".join(f"`hwnas refset measure --device {dev.name} --space {s}`"
                              for s in CALIBRATION_SPACES)  # fmt: skip
        note = (
            f"network-level correction not calibrated on {dev.name} (prior x{PRIOR.scale:g} "
            f"+-{100 * PRIOR.rel_std:.0f}% from the CPUs measured so far, wide interval); "
            f"calibrate it with {spaces}"
        )
    return kp, note
