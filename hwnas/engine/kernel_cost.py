"""``cost=kernel``: the kernel-level predictor as a search's cost model, at deployment size.

A supernet is trained small (a CIFAR-sized skeleton, a fraction of the width) but the network
a search deploys is the space's full network at its deployment size (a declared space's
``reference_dataset``: 224x224 ImageNet networks for ``mobilenetv4`` and ``vit``). This cost
model predicts *that* network's latency on a live ONNX Runtime device whatever size the
supernet is trained at: the kernel-level predictor (:mod:`hwnas.predictors.kernels.model`)
times each distinct kernel of the deployed networks once (through the store), its
network-level correction is calibrated on the space's reference set measured at deployment
size (10 whole networks, taken once per device), and for a supernet a lookup table
(:func:`hwnas.supernet.cost.fit_lut`, the space's own terms) is fitted on the predictions of
sampled architectures, so the hardware term's expectation stays exact and differentiable.
The fit is reported two ways: the table against the kernel-level predictions of held-out
architectures (``r2``), and against the measured reference networks (``truth_r2``,
leave-one-out for the correction).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hwnas.engine.costs import CostModel, CostRequest
from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch, SearchSpace

SAMPLES = 160
"""Architectures whose kernel-level predictions a supernet's lookup table is fitted on."""


class KernelCostModel(CostModel):
    """Latency (ms) of a space's deployed networks on a live device, from their kernels.

    Args:
        predictor: the calibrated :class:`~hwnas.predictors.kernels.model.KernelPredictor`.
        space: the search space.
        note: how the correction was calibrated (one line).
    """

    metric = "latency_ms"
    lut_samples = SAMPLES

    def __init__(self, predictor: Any, space: SearchSpace, note: str):
        self.predictor, self.space, self.note = predictor, space, note
        dev = predictor.profiler.device.name
        self.deployment = _deployment(space)
        self.source = f"kernel:{dev}:{self.deployment}"
        self.fit: dict[str, Any] = {"deployment": self.deployment, "correction": note}

    def predict(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        return self.predictor.predict(list(archs))

    def interval(self, arch: Arch) -> tuple[float, float, float, str]:
        """(low, mean, high, warning) of the deployed network's latency: its 90% interval."""
        return self.predictor.interval(self.predictor.estimate(arch), arch.space)


class WholeSpaceCostModel(CostModel):
    """Latency (ms) of every network of a space too small to calibrate the kernel-level
    predictor on (fewer architectures than :data:`hwnas.predictors.base.MIN_CALIBRATION`),
    each measured at deployment size on a live device: exact values, no predictor.

    Args:
        space: the search space.
        archs: every architecture of the space.
        values: their measured latencies (ms), in the same order.
        device: the device's name (for :attr:`source`).
    """

    metric = "latency_ms"

    def __init__(self, space: SearchSpace, archs: Sequence[Arch], values: np.ndarray, device: str):
        self.values = {a.text: float(v) for a, v in zip(archs, values)}
        self.deployment = _deployment(space)
        self.source = f"measured:{device}:{self.deployment}"
        self.fit = {
            "deployment": self.deployment,
            "networks": len(self.values),
            "calibration": f"every network of the space measured on {device} (too few to "
            "calibrate a predictor on)",
        }
        self.reference = (list(archs), np.asarray(values, dtype=np.float64))

    def predict(self, archs: Sequence[Arch]) -> tuple[np.ndarray, np.ndarray]:
        mean = np.array([self.values.get(a.text, np.nan) for a in archs], dtype=np.float64)
        return mean, np.zeros(len(mean))

    def interval(self, arch: Arch) -> tuple[float, float, float, str]:
        """(low, mean, high, warning): the measured value three times (exact)."""
        v = self.values.get(arch.text, float("nan"))
        return v, v, v, ""


def _deployment(space: SearchSpace) -> str:
    ds = space.reference_dataset
    return f"{ds} {'x'.join(map(str, space.dataset(ds).input_shape))}"


def _r2(pred: np.ndarray, true: np.ndarray) -> float:
    return float(1 - ((pred - true) ** 2).sum() / max(((true - true.mean()) ** 2).sum(), 1e-12))


def check_kernel_cost(device: Any, metric: str) -> None:
    """Refuse ``cost=kernel`` where it cannot work, before any work.

    Raises:
        HwnasError: not latency, or a device that does not run ONNX Runtime models.
    """
    if metric != "latency_ms":
        raise HwnasError("cost=kernel predicts latency_ms, not " + metric)
    if getattr(device, "runtime_name", None) != "ort" or not device.runs_models:
        raise HwnasError(
            f"cost=kernel times ONNX Runtime kernels; device '{device.name}' runs "
            f"{device.runtime or 'no runtime'} (use cost=table, predicted or flops)"
        )


def kernel_model(request: CostRequest) -> CostModel:
    """``kernel``: the kernel-level predictor of a live ONNX Runtime device, calibrated on the
    space's reference set at deployment size (measured once through the profiler), which it
    keeps as its :attr:`~hwnas.engine.costs.CostModel.reference`; a supernet fits its lookup
    table on its predictions of those and :data:`SAMPLES` more architectures
    (:func:`hwnas.supernet.cost.lut_of`).

    A space of fewer architectures than :data:`hwnas.predictors.base.MIN_CALIBRATION` (its
    reference set is all of them) calibrates no predictor: its networks are measured and
    their values are the cost (:class:`WholeSpaceCostModel`).

    Raises:
        HwnasError: not latency, a device that does not run ONNX Runtime models, a space
            without a reference set, or one whose reference set is too small to calibrate on
            and is not the whole space (before any measurement).
    """
    from hwnas.measure import arch_workload
    from hwnas.predictors.base import MIN_CALIBRATION
    from hwnas.predictors.kernels.device import calibration_networks, kernel_predictor

    space, device, profiler = request.space, request.device, request.profiler
    check_kernel_cost(device, request.metric)
    log = request.extra.get("log") or (lambda _m: None)
    refs = space.reference_archs()
    whole = len(refs) < MIN_CALIBRATION
    if whole and len(refs) < space.num_architectures():
        raise HwnasError(
            f"space '{space.name}' has {len(refs)} reference networks, fewer than the "
            f"{MIN_CALIBRATION} the kernel-level cost model is calibrated on: use --set "
            "cost=flops (or cost=measured)"
        )
    if whole:
        log(f"kernel-level cost: space {space.name} has {len(refs)} networks, too few to "
            f"calibrate a predictor on: each is measured at deployment size "
            f"({_deployment(space)}) and its value is the cost")  # fmt: skip
    else:
        log(f"kernel-level cost: the {len(refs)} reference networks of {space.name} at "
            f"deployment size ({_deployment(space)}), measured once and kept in the "
            "store")  # fmt: skip
    on_measured = request.extra.get("on_measured")
    ref_values = np.zeros(len(refs))
    for i, a in enumerate(refs):
        ref_values[i] = profiler.measure(arch_workload(space, a, space.reference_dataset),
                                         "latency_ms", allow_flagged=True).value  # fmt: skip
        if on_measured:
            on_measured(f"reference network {i + 1}/{len(refs)}")
    if whole:
        return WholeSpaceCostModel(space, refs, ref_values, device.name)
    kp, note = kernel_predictor(
        profiler, on_kernel=on_measured and (lambda k: on_measured(f"kernel {k.label}"))
    )
    archs, values = calibration_networks(device, profiler.store)
    known = {a.text for a in archs if a.space == space.name}
    extra = [(a, v) for a, v in zip(refs, ref_values) if a.text not in known]
    if extra:  # flagged reference values are not in calibration_networks: use them anyway
        archs = [*archs, *(a for a, _ in extra)]
        values = np.concatenate([values, [v for _, v in extra]])
    kp.fit(archs, values)
    c = kp.correction
    note = (
        f"correction calibrated on {len(values)} reference networks measured on {device.name} "
        f"(x{c.scale:.3f} {c.bias_ms:+.3f} ms, residual {100 * c.rel_std:.1f}%)"
    )
    model = KernelCostModel(kp, space, note)
    ref_pred = kp.predict(refs)[0]
    model.fit.update(
        truth_networks=len(refs),
        truth_r2=_r2(ref_pred, ref_values),
        kernels_timed=kp.counts["measured"],
    )
    model.reference = (list(refs), ref_values)
    return model


def deployment_of(cost: Any) -> str | None:
    """The deployment a cost model predicts at (``"imagenet 3x224x224"``): a kernel-level
    model's, also under a fitted lookup table (its ``truth``); None for a model of the trained
    subnets (a measured block table, FLOPs) or of a recorded table."""
    model = getattr(cost, "truth", None) or cost
    if getattr(model, "interval", None) is None:
        return None
    return getattr(model, "deployment", None)


def deployed_report(cost: CostModel, space: SearchSpace, profiler: Any, arch: Arch) -> dict | None:
    """The deployed network of ``arch`` under a kernel-level cost model: its predicted latency
    with the 90% interval and, on a live device, its measured latency (the stored measurement
    the search's front then reads too; one that stays too noisy is shown with
    ``measured_flagged``); None for any other cost model."""
    from hwnas.measure import arch_workload

    if deployment_of(cost) is None:
        return None
    model = getattr(cost, "truth", None) or cost
    lo, mid, hi, warn = model.interval(arch)
    out: dict[str, Any] = {
        "deployment": model.deployment,
        "predicted_ms": mid,
        "interval_90_ms": [lo, hi],
        "source": model.source,
    }
    if warn:
        out["warning"] = warn
    from hwnas.measure import NoisyMeasurementError

    workload = arch_workload(space, arch, space.reference_dataset)
    try:  # the measurement the front then reads from the store: one value for one network
        m = profiler.measure(workload, "latency_ms")
    except NoisyMeasurementError as exc:  # too noisy to use: shown as such (the error holds
        m = exc.measurement  # the last attempt); the front measures again
        out["measured_flagged"] = True
    out.update(measured_ms=m.value, inside=bool(lo <= m.value <= hi), measured_source=m.source)
    return out
