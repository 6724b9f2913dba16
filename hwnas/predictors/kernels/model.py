"""The kernel-level latency predictor: a network's latency from the kernels its runtime runs.

For each model (an ONNX file, or an architecture of a space built at its deployment size) the
predictor reads the kernels ONNX Runtime runs (:mod:`~hwnas.predictors.kernels.read`), takes
each distinct kernel's time alone on the device from the measurement store, from the per-type
regressors (:mod:`~hwnas.predictors.kernels.regress`) where they are certain, or times it
now on a live device where they are not (at most ``budget`` new kernels per call: a kernel is
timed once per device, ever, and shared by every network, search and worker through the
store), and sums them without the runtime's per-call overhead that each kernel paid alone
(nn-Meter, Zhang et al., MobiSys 2021: the latency of a network is the sum of its kernels').

A kernel timed alone finds its weights in the caches, where its previous call left them. Inside
a network whose weights do not all fit there, it reads them from further away: each kernel
takes at least the time to stream the weights it reads at the device's rate for a working set
of the network's weight size (:func:`~hwnas.predictors.kernels.timing.stream_rate`, a
matrix-vector product timed once per device at 0.5-128 MB). It makes a ResNet-50 at 64x64 px
(97 MB of weights, convolutions on 2x2 to 16x16 maps) 13% slower; 224x224 networks 0-6%
(``experiments/kernel_sum_ratio.py``).

A network-level *correction* turns the sum into the network's latency: ``a * sum`` (inside a
network a kernel's neighbours also evict its inputs and code: on the reference CPU whole
networks took 1.16 times their kernel sum), fitted on a few
whole networks measured on the device (:meth:`KernelPredictor.fit`; without any, the prior of
:mod:`hwnas.predictors.kernels.device`). The sum already holds the dispatch of every node,
shape-only ones included (timed once per device, :func:`~hwnas.predictors.kernels.timing.
overheads`).

Uncertainty: each model's relative uncertainty combines the correction's residual spread with
its kernels' (measured kernels: their timing noise; predicted ones: the regressor's standard
deviation, errors of one kernel type counted as correlated); a split-conformal factor fitted on
the calibration networks' leave-one-out errors scales it so that 90% intervals contain 90% of
calibration networks (Vovk et al., *Algorithmic Learning in a Random World*, 2005; normalised
scores as in Papadopoulos et al., 2008). The standard deviation returned is the 90% interval's
half-width over 1.645. A model far from what the predictor knows (kernels of a type timed too
rarely to fit, or outside the fitted range and not timed now, a network outside the
calibration networks' range) gets a one-line warning (:attr:`KernelPredictor.warnings`) and a
wider interval.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hwnas.errors import HwnasError
from hwnas.predictors.base import Model, Predictor, check_calibration
from hwnas.predictors.kernels.features import (
    kernel_type,
    streamed_bytes,
    subgraph_runs,
    work_class,
)
from hwnas.predictors.kernels.read import Kernel, ModelKernels, read_kernels
from hwnas.predictors.kernels.regress import KernelRegressors

Z90 = 1.6448536
"""Standard normal quantile of a two-sided 90% interval."""

PRIOR_REL_STD = 0.10
"""Relative standard deviation (of the log) of the uncorrected sum before any calibration
network is measured on the device (on the reference CPU the raw sum of isolated kernels was
within about 10% of whole networks; see docs/predictors.md)."""

FAMILY_REL_FLOOR = 0.10
"""Least spread (of the log) of the correction for a model of no calibration family. Two
calibration families give two shifts, which can agree by chance (0.01 on a shared EPYC VM,
where 16 networks written from their papers, GhostNet to LeViT, spread 0.105 around the
scale): the spread of whole network over kernel sum across network families measured here
is 0.08 (the shipped ground truth's 11 well-known networks at 224 px, 1.03-1.30) to 0.15
(``experiments/kernel_sum_ratio.py``, 66 well-known networks on a Xeon VM)."""

MEASURED_REL_STD = 0.03
"""Least relative standard deviation of a kernel timed on the device (timing noise)."""

CERTAIN_REL_STD = 0.15
"""A kernel whose predicted time has a larger relative standard deviation (of the log) is
timed on a live device rather than trusted."""

UNSEEN_REL_STD = 1.0
"""Relative standard deviation given to a kernel no regressor covers and nobody timed."""

STREAM_REL_STD = 0.15
"""Relative standard deviation (of the log) of a kernel whose time is the time to stream its
weights: the probe is one access pattern (a matrix-vector product); a convolution's reorder
and a network's other traffic move the rate by about this much."""

EXTRAPOLATION_REL_STD = 0.25
"""Relative standard deviation (of the log) the correction gains per e-fold a network's kernel
sum lies outside the calibration networks' range. On this project's 2-core VM, calibrated on
the vit and mobilenetv4 reference sets (sums 3-70 ms), 9 networks 1.6-11x outside that range
(text encoders at 64 tokens, BERT-base, CNNs at 32-96 px) were off by 0.02-0.69 in the log, all
inside the intervals this gives (``experiments/onnx_beyond_images.py``); widening by the whole
log distance, as before, gave intervals of 0.002-677 ms for a 1.3 ms model."""


@dataclass
class Correction:
    """``latency = scale * sum + bias`` (ms; the bias is 0 when fitted), with its calibration.

    Attributes:
        scale: a.
        bias_ms: b.
        rel_std: residual standard deviation of log(measured / corrected) at calibration.
        q: conformal factor of the normalised 90% score (Z90 before calibration).
        networks: calibration networks it was fitted on (0: the prior).
        log_sum_range: (low, high) of log(sum) over calibration networks, or None.
        families: the families (spaces) of the calibration networks.
        family_rel: how far the scale moves from one family to another: the root mean square,
            over families, of the log error of a family's median network under the scale
            fitted on the others (0 with fewer than two families). A network of none of
            :attr:`families` (a user's ONNX file, a user's space) adds it to its interval:
            the conformal factor holds for networks like the calibration ones only.
    """

    scale: float = 1.0
    bias_ms: float = 0.0
    rel_std: float = PRIOR_REL_STD
    q: float = Z90
    networks: int = 0
    log_sum_range: tuple[float, float] | None = None
    families: tuple[str, ...] = ()
    family_rel: float = 0.0

    def apply(self, total: np.ndarray) -> np.ndarray:
        return np.maximum(self.scale * total + self.bias_ms, 1e-6)


@dataclass
class ModelEstimate:
    """What the predictor knows of one model.

    Attributes:
        total_ms: the sum of its kernels' times less the per-call overhead each paid alone,
            plus the dispatch of every node it runs (kernels and bookkeeping).
        rel_std: relative standard deviation of ``total_ms`` from its kernels.
        kernels: kernels it runs (repeats counted).
        measured: of those, timed on the device.
        predicted: predicted by a regressor inside its fitted range.
        extrapolated: predicted outside the fitted range.
        unseen: of a type no regressor covers and not timed.
        bookkeeping: shape-only nodes.
        unseen_types: the types of the unseen kernels.
        weight_mb: the weights its kernels read in one call (MB;
            :func:`~hwnas.predictors.kernels.features.streamed_bytes`).
        streamed: kernels whose time is the time to stream their weights (longer than alone).
        subnormal: kernels that read subnormal floats in the network
            (:attr:`~hwnas.predictors.kernels.read.ModelKernels.subnormal`).
        while_loops: loops whose body computes its own condition (counted as one iteration).
        steered: ``If``/``Loop`` kernels steered by the input
            (:attr:`~hwnas.predictors.kernels.read.ModelKernels.steered`).
    """

    total_ms: float
    rel_std: float
    kernels: int
    measured: int
    predicted: int
    extrapolated: int
    unseen: int
    bookkeeping: int
    unseen_types: tuple[str, ...] = ()
    weight_mb: float = 0.0
    streamed: int = 0
    subnormal: int = 0
    while_loops: int = 0
    steered: int = 0


@dataclass
class KernelPredictor(Predictor):
    """Latency of any network on one device from its kernels (see the module docstring).

    Args:
        profiler: :class:`hwnas.measure.Profiler` of a live device with a store (kernels are
            read from it and, within ``budget``, timed through it), or None (only
            ``regressors`` predict).
        regressors: fitted per-type regressors; by default fitted on every kernel the store
            holds for the device.
        budget: new kernels the predictor may time per :meth:`predict` call (0: never time).
        threads: intra-op threads of the runtime (the kernels it fuses depend on it).
        correction: the network-level correction (default: the prior).
        on_kernel: called with each kernel timed (progress).
    """

    profiler: Any = None
    regressors: KernelRegressors | None = None
    budget: int = 2000
    threads: int = 1
    correction: Correction = field(default_factory=Correction)
    on_kernel: Callable[[Kernel], None] | None = None
    name: str = "kernel"
    metric: str = "latency_ms"

    def __post_init__(self) -> None:
        self.warnings: list[str] = []
        self.counts = {"measured": 0, "reused": 0, "predicted": 0}
        self._kernels: dict[str, ModelKernels] = {}
        # kernel key -> (time alone in ms, relative std, source: measured | fitted |
        # extrapolated | unseen)
        self._times: dict[str, tuple[float, float, str]] = {}
        self._overhead: tuple[float, float] | None = None
        self._speed_done = False
        self._stream: dict[float, float] = {}  # probe size (MB) -> bytes per ms
        self._reads: dict[str, float] = {}  # kernel key -> weight bytes it reads in one call
        if self.profiler is not None:
            dev = self.profiler.device
            if getattr(dev, "runtime_name", None) != "ort" or not dev.runs_models:
                raise HwnasError(
                    f"the kernel-level predictor reads ONNX Runtime's kernels; device "
                    f"'{dev.name}' runs {dev.runtime or 'no runtime'}"
                )
            self._load_store()

    def __getstate__(self) -> dict[str, Any]:
        """Picklable (a supernet search hands its cost model to every process): without the
        profiler and its store connection, and without the kernels read (their one-node
        models hold weights); the kernel times are kept, so predictions need no device."""
        state = dict(self.__dict__)
        state.update(profiler=None, on_kernel=None, _kernels={})
        return state

    # -- kernel times ---------------------------------------------------------------------

    def _load_store(self) -> None:
        from hwnas.predictors.kernels.timing import stored_kernels

        dev = self.profiler.device
        stored = stored_kernels(self.profiler.store, dev.name, dev.runtime)
        self.add_measured([k for k, _ in stored.values()], [m for _, m in stored.values()])
        if self.regressors is None:
            kernels = [k for k, _ in stored.values()]
            values = [self._times[k.key][0] for k in kernels]
            self.regressors = KernelRegressors().fit(kernels, values, self.overhead_ms)

    def add_measured(self, kernels: Sequence[Kernel], measurements: Sequence[Any]) -> None:
        """Use these kernels' measured times (from a store the profiler does not read), each
        with the per-call overhead timed with it replaced by the device's
        (:func:`~hwnas.predictors.kernels.timing.alone_ms`)."""
        from hwnas.predictors.kernels.timing import alone_ms

        o = self.overhead_ms if measurements else 0.0
        for k, m in zip(kernels, measurements):
            self._times[k.key] = (alone_ms(m, o), max(MEASURED_REL_STD, m.cv), "measured")

    @property
    def overhead_ms(self) -> float:
        """The runtime's per-call overhead on the device (ms), timed once (0 without one)."""
        return self._overheads()[0]

    @property
    def dispatch_ms(self) -> float:
        """The dispatch of one node inside a network (ms), timed once (0 without one)."""
        return self._overheads()[1]

    def _overheads(self) -> tuple[float, float]:
        if self._overhead is None:
            self._overhead = (0.0, 0.0)
            if self.profiler is not None:
                from hwnas.predictors.kernels.timing import overheads

                self._overhead = overheads(self.profiler)
        return self._overhead

    def set_overheads(self, call_ms: float, node_ms: float) -> None:
        """Use these overheads (ms) instead of timing them (a recorded device's)."""
        self._overhead = (float(call_ms), float(node_ms))

    def set_stream_rates(self, rates: dict[float, float]) -> None:
        """Use these weight-streaming rates (probe size in MB -> bytes per ms) instead of timing
        them (a recorded device's)."""
        self._stream = {float(k): float(v) for k, v in rates.items()}

    @property
    def stream_rates(self) -> dict[float, float]:
        """The weight-streaming rates known so far: probe size (MB) -> bytes per ms."""
        return dict(self._stream)

    def stream_rate(self, weight_bytes: float) -> float | None:
        """Bytes per ms at which the device streams the weights of a network of
        ``weight_bytes`` bytes: the rates timed, interpolated in the log of the size (the
        nearest one beyond them); None when none was timed."""
        if not self._stream:
            return None
        sizes = sorted(self._stream)
        log_mb = np.log(max(weight_bytes / 2**20, 1e-6))
        rates = np.log([self._stream[m] for m in sizes])
        return float(np.exp(np.interp(log_mb, np.log(sizes), rates)))

    def _weight_reads(self, mk: ModelKernels) -> tuple[list[float], float]:
        """The weight bytes each kernel of ``mk`` reads in one call
        (:func:`~hwnas.predictors.kernels.features.streamed_bytes`, once per distinct
        kernel), in order, and their sum over the network."""
        for k in mk.kernels:
            if k.key not in self._reads:
                self._reads[k.key] = streamed_bytes(k)
        reads = [self._reads[k.key] for k in mk.kernels]
        return reads, float(sum(reads))

    def _resolve_stream(self, weight_bytes: float) -> None:
        """Time (once per device, through the store) the weight-streaming probes bracketing a
        network of ``weight_bytes`` bytes, on a live device; whatever the budget."""
        if self.profiler is None or not self.profiler.device.can_measure or weight_bytes <= 0:
            return
        from hwnas.predictors.kernels.timing import STREAM_PROBE_MB, stream_rate

        grid = np.array(STREAM_PROBE_MB)
        i = int(np.searchsorted(grid, weight_bytes / 2**20))
        for mb in {float(grid[max(i - 1, 0)]), float(grid[min(i, len(grid) - 1)])}:
            if mb not in self._stream:
                self._stream[mb] = stream_rate(self.profiler, mb, self.overhead_ms)

    def kernels_of(self, model: Model) -> ModelKernels:
        """The kernels ``model`` runs (read once per model).

        Raises:
            HwnasError: a model without an ONNX form, or one ONNX Runtime cannot run.
        """
        key, data, shape = _onnx_of(model)
        if key not in self._kernels:
            self._kernels[key] = read_kernels(data, shape, self.threads)
        return self._kernels[key]

    def _resolve(self, kernels: Sequence[Kernel]) -> None:
        """Give every distinct kernel a time: stored; predicted where the regressor is
        certain; else timed now on a live device (at most ``budget`` per call, the least
        certain first); else predicted anyway (extrapolated) or guessed (unseen type)."""
        todo = [k for k in {k.key: k for k in kernels}.values() if k.key not in self._times]
        if not todo:
            return
        regressors = self.regressors or KernelRegressors()
        pred = regressors.predict(todo)
        unsure = []
        o = self.overhead_ms
        for k, mu, sd, st in zip(todo, pred.log_mean, pred.log_std, pred.status):
            if st == "fitted" and sd <= CERTAIN_REL_STD:
                self._times[k.key] = (o + float(np.exp(mu)), float(sd), st)
                self.counts["predicted"] += 1
            else:
                unsure.append((k, mu, sd, st))
        unsure.sort(key=lambda u: -(10.0 if np.isnan(u[2]) else u[2]))
        if self.profiler is not None and self.profiler.device.can_measure and self.budget > 0:
            from hwnas.predictors.kernels.timing import time_kernels

            chosen = [u[0] for u in unsure[: self.budget]]
            got, counts = time_kernels(self.profiler, chosen, on_kernel=self.on_kernel)
            self.counts["measured"] += counts.measured
            self.counts["reused"] += counts.reused
            timed = [k for k in chosen if k.key in got]
            self.add_measured(timed, [got[k.key] for k in timed])
        if any(st == "unseen" and k.key not in self._times for k, _, _, st in unsure):
            self._use_device_speed(regressors)
        for k, mu, sd, st in unsure:
            if k.key in self._times:
                continue
            if st == "unseen":  # a type nobody timed: a guess from its work
                guess = regressors.guess_ms(k) + self.dispatch_ms * subgraph_runs(k)
                self._times[k.key] = (o + guess, UNSEEN_REL_STD, st)
            else:
                self._times[k.key] = (o + float(np.exp(mu)), float(sd), st)
            self.counts["predicted"] += 1

    def _use_device_speed(self, regressors: KernelRegressors) -> None:
        """Scale the reference CPU's time per unit of work to this device (its speed on two
        probe kernels, timed once per device like the overheads, whatever the budget)."""
        if self._speed_done or self.profiler is None or not self.profiler.device.can_measure:
            return
        from hwnas.predictors.kernels.timing import device_speed

        self._speed_done = True
        regressors.use_speed(device_speed(self.profiler))

    def estimate(self, model: Model) -> ModelEstimate:
        """The kernel sum of one model and where its numbers come from (times kernels the
        regressors are unsure of, within the budget)."""
        mk = self.kernels_of(model)
        self._resolve(mk.kernels)
        self._resolve_stream(self._weight_reads(mk)[1])
        return self.estimate_kernels(mk)

    def estimate_kernels(self, mk: ModelKernels) -> ModelEstimate:
        """:meth:`estimate` of kernels whose times are all known: the per-call overhead once,
        then each kernel's time alone less that overhead, or the time to stream its weights
        where that is longer (at the rate of the device for the network's weight size, when one
        was timed), and each node's dispatch."""
        o, d = self._overheads()
        # the network's own call (each kernel's time alone less that overhead, below), and the
        # dispatch of every node: an empty graph costs the call, not nothing
        total, by_type = o + d * (len(mk.kernels) + mk.bookkeeping), {}
        n = dict.fromkeys(("measured", "fitted", "extrapolated", "unseen"), 0)
        unseen_types = set()
        reads, weights = self._weight_reads(mk)
        rate = self.stream_rate(weights)
        streamed = 0
        for k, read in zip(mk.kernels, reads):
            ms, rel, source = self._times[k.key]
            net = max(ms - o, 0.01 * ms)
            # errors of one type add up; so do those of every kernel guessed at one work
            # class's rate (the rate is the device's, or the reference CPU's scaled by a probe)
            t = kernel_type(k)
            group = f"guessed {work_class(k)}" if source == "unseen" else t
            if rate is not None and read / rate > net:
                net, rel, group = read / rate, STREAM_REL_STD, "weight streaming"
                streamed += 1
            total += net
            by_type[group] = by_type.get(group, 0.0) + net * rel
            n[source] += 1
            if source == "unseen":
                unseen_types.add(t)
        var = sum(v * v for v in by_type.values())
        rel_std = float(np.sqrt(var) / total) if total > 0 else 1.0
        return ModelEstimate(total, rel_std, len(mk.kernels), n["measured"], n["fitted"],
                             n["extrapolated"], n["unseen"], mk.bookkeeping,
                             tuple(sorted(unseen_types)), weights / 2**20,
                             streamed, mk.subnormal, _while_loops(mk.kernels),
                             mk.steered)  # fmt: skip

    # -- Predictor ------------------------------------------------------------------------

    def fit(self, archs: Sequence[Model], values, metric: str = "latency_ms") -> KernelPredictor:
        """Fit the network-level correction on whole networks measured on the device (ms).

        Raises:
            HwnasError: fewer than 3 values, non-positive values, an energy metric, or models
                without an ONNX form.
        """
        if metric != "latency_ms":
            raise HwnasError("the kernel-level predictor predicts latency_ms only")
        y = check_calibration(archs, values)
        est = [self.estimate(m) for m in archs]
        s = np.array([e.total_ms for e in est])
        kr = np.array([e.rel_std for e in est])
        families = [str(getattr(m, "space", "") or "") for m in archs]
        self.correction = fit_correction(s, y, kr, families=families)
        return self

    def predict(self, archs: Sequence[Model]) -> tuple[np.ndarray, np.ndarray]:
        """Latency (ms) and standard deviation of each model; fills :attr:`warnings`."""
        self.warnings = []
        mean, std = np.zeros(len(archs)), np.zeros(len(archs))
        for i, m in enumerate(archs):
            e = self.estimate(m)
            lo, mid, hi, note = self.interval(e, family_of(m))
            mean[i], std[i] = mid, (hi - lo) / (2 * Z90)
            if note:
                self.warnings.append(f"{m}: {note}")
        return mean, std

    def interval(
        self, e: ModelEstimate, family: str | None = None
    ) -> tuple[float, float, float, str]:
        """(low, mean, high, warning) of one estimate: the 90% interval and why it is wide.
        ``family``: the model's (:func:`family_of`); a model of no calibration family gets the
        correction's :attr:`Correction.family_rel` too, at least :data:`FAMILY_REL_FLOOR`
        once the correction is calibrated."""
        c = self.correction
        mid = float(c.apply(np.array([e.total_ms]))[0])
        rel = float(np.sqrt(c.rel_std**2 + e.rel_std**2))
        if family not in c.families:  # calibrated on other families (or the prior's 40%)
            spread = max(c.family_rel, FAMILY_REL_FLOOR) if c.networks else c.family_rel
            rel = float(np.sqrt(rel**2 + spread**2))
        notes = []
        if e.unseen:
            notes.append(
                f"{e.unseen} kernel(s) of type(s) with fewer than "
                f"{(self.regressors or KernelRegressors()).min_samples} kernels timed, "
                f"too few to fit ({', '.join(e.unseen_types)}), guessed from their work"
            )
        if e.extrapolated:
            notes.append(
                f"{e.extrapolated} kernel(s) outside the range the regressors were fitted on"
            )
        if e.while_loops:
            notes.append(
                f"{e.while_loops} loop(s) that run until their body's own condition stops "
                "them, counted as one iteration: a lower bound (`hwnas measure` times the model)"
            )
        if c.log_sum_range is not None:
            lo_r, hi_r = c.log_sum_range
            ls = np.log(max(e.total_ms, 1e-6))
            out = max(lo_r - ls, ls - hi_r, 0.0)
            if out > np.log(1.5):
                rel += EXTRAPOLATION_REL_STD * out  # the correction is extrapolated
                notes.append(
                    f"its kernel sum ({e.total_ms:.3g} ms) is {np.exp(out):.1f}x outside the "
                    "calibration networks'"
                )
        if notes:
            rel = max(rel, 0.5)
        half = c.q * rel
        note = ""
        if notes:
            note = (
                "unlike the networks this predictor knows: "
                + "; ".join(notes)
                + " (interval widened)"
            )
        if e.subnormal:  # what it predicts is not what this file takes here
            note += ("; " if note else "") + (
                f"{e.subnormal} of its {e.kernels} kernels read subnormal floats (activations "
                "that underflow: untrained weights can make them, and so can a Softmax after an "
                "additive mask of -100, as Swin's), which a CPU computes on up to 100x slower: "
                "measured, this file takes longer than predicted; the prediction is the "
                "architecture's latency with normal activations"
            )
        if e.steered:  # right for inputs that take the same path, and said
            note += ("; " if note else "") + (
                f"{e.steered} If/Loop node(s) whose branch or iteration count the model computes "
                "from its input: timed as hwnas's input ran them (another input may take another "
                "path; `hwnas measure` times the model on the same input)"
            )
        return mid * float(np.exp(-half)), mid, mid * float(np.exp(half)), note


def family_of(model: Model) -> str | None:
    """The family of a model for :meth:`KernelPredictor.interval`: an architecture's space, or
    None (an ONNX file: a family no calibration network is of)."""
    return getattr(model, "space", None)


def fit_correction(
    total: np.ndarray,
    y: np.ndarray,
    kernel_rel: np.ndarray,
    alpha: float = 0.1,
    families: Sequence[str] | None = None,
) -> Correction:
    """Fit ``y = a * total`` (least squares on relative errors) and the conformal factor.

    A scale alone, no bias: the correction is fitted on 224x224 networks and must hold for a
    user's network of any size (a bias fitted on networks of 1-40 ms is a large share of a
    0.3 ms one).

    Args:
        total: kernel sums of the calibration networks (ms), shape (n,).
        y: their measured latency (ms), shape (n,).
        kernel_rel: relative standard deviation of each sum from its kernels, shape (n,).
        alpha: 1 - the coverage of the intervals (0.1: 90%).
        families: each network's family (its space), shape (n,): gives
            :attr:`Correction.family_rel` where two families have 3 networks or more.

    Returns:
        The :class:`Correction`; with fewer than 3 networks the prior's spread and factor.
    """
    n = len(y)
    r = np.asarray(total, dtype=np.float64) / np.asarray(y, dtype=np.float64)
    if n == 0:
        return Correction()
    scale = float(np.sum(r) / np.sum(r * r))
    fitted = Correction(scale, 0.0, networks=n)
    if n < 3:
        return fitted
    loo = np.zeros(n)  # leave-one-out errors: the spread and the conformal factor
    for j in range(n):
        keep = np.arange(n) != j
        sj = np.sum(r[keep]) / np.sum(r[keep] ** 2)
        loo[j] = np.log(1.0 / (sj * r[j]))
    rel_std = float(max(np.sqrt(np.mean(loo**2)), 0.01))
    sigma = np.sqrt(rel_std**2 + np.asarray(kernel_rel) ** 2)
    scores = np.sort(np.abs(loo) / sigma)
    k = int(np.ceil((n + 1) * (1 - alpha))) - 1  # split-conformal quantile
    q = float(scores[k]) if k < n else float(scores[-1]) * 1.25
    fitted.rel_std, fitted.q = rel_std, max(q, 1.0)
    ls = np.log(np.maximum(total, 1e-6))
    fitted.log_sum_range = (float(ls.min()), float(ls.max()))
    if families is not None:
        fam = np.asarray(list(families), dtype=object)
        fitted.families = tuple(sorted(set(fam.tolist())))
        shifts = []  # each family's median network under the scale of the others
        for f in fitted.families:
            own = fam == f
            if own.sum() >= 3 and (~own).sum() >= 3:
                s_other = np.sum(r[~own]) / np.sum(r[~own] ** 2)
                shifts.append(float(np.median(np.log(1.0 / (s_other * r[own])))))
        if len(shifts) >= 2:
            fitted.family_rel = float(np.sqrt(np.mean(np.square(shifts))))
    return fitted


def _while_loops(kernels: Sequence[Kernel]) -> int:
    """Kernels that are loops whose iterations only a run tells
    (:func:`hwnas.predictors.subgraphs.computes_its_condition`)."""
    import onnx

    from hwnas.predictors.subgraphs import computes_its_condition

    count = 0
    for k in kernels:
        if k.op.rsplit(":", 1)[-1] == "Loop" and k.model:
            nodes = onnx.load_from_string(k.model).graph.node
            count += any(computes_its_condition(n) for n in nodes)
    return count


def _onnx_of(model: Model) -> tuple[str, bytes, tuple[int, ...]]:
    """(hash, ONNX bytes, input shape) of a model: a GraphModel's file, or an architecture's
    network built for its space's reference dataset (the deployment size of declared
    spaces).

    Raises:
        HwnasError: a GraphModel read without its ONNX bytes.
    """
    from hwnas.predictors.graph import GraphModel

    if isinstance(model, GraphModel):
        data = getattr(model, "onnx", b"")
        if not data:
            raise HwnasError(f"{model}: the kernel-level predictor needs the model's ONNX file")
        from hwnas.export import content_hash

        return content_hash(data), data, None  # type: ignore[return-value]
    from hwnas.measure import arch_workload
    from hwnas.spaces import get_space

    space = get_space(model.space)
    wl = arch_workload(space, model, space.reference_dataset)
    return wl.model_hash, wl.onnx_bytes(), wl.input_shape
