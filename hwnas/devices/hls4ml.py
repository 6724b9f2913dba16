"""FPGAs through hls4ml: ONNX -> hls4ml project -> C synthesis -> latency and resources.

hls4ml (Duarte et al., "Fast inference of deep neural networks in FPGAs for particle physics",
JINST 2018; FastML Science) turns a network into an HLS C++ project. hwnas converts the exported
ONNX model (cleaned and made channels-last by qonnx, as hls4ml's ONNX front end expects), writes
the project for the profile's backend, part and clock, runs C synthesis when ``vitis_hls`` (or
``vivado_hls``) is on PATH, and reads the latency (worst-case cycles x clock period) and the
LUT/FF/DSP/BRAM use from the synthesis report. Without the toolchain the device says so in one
line, and the recorded ``fpga`` device (HW-NAS-Bench's ZC706 model) stays usable.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from hwnas.devices.base import Device, Measurement, Workload, profile_number
from hwnas.devices.hls_report import find_report, parse_csynth_xml
from hwnas.errors import CandidateError, HwnasError
from hwnas.export import content_hash

PROJECT = "hwnas_model"
"""Top function and project name of generated hls4ml projects."""

TOOLS = ("vitis_hls", "vivado_hls")

SYNTHESIS_TIMEOUT_S = 6 * 3600.0
"""Default limit on one C synthesis (profile key ``synthesis_timeout_s``): large designs take
hours, a hung tool must not hang the command for ever."""

CHECKED_NETWORKS = 4
"""Networks of a space :meth:`Hls4mlDevice.check_networks` reads before refusing the space: one
that hls4ml can take is enough to search it (the others become failed trials)."""


def hls_tool() -> str | None:
    """The HLS compiler on PATH (``vitis_hls`` preferred), or None."""
    for tool in TOOLS:
        if shutil.which(tool):
            return tool
    return None


def to_hls4ml_onnx(onnx_bytes: bytes):
    """The ONNX model the way hls4ml's ONNX front end wants it: qonnx-cleaned, channels-last,
    Gemm as MatMul + Add.

    qonnx executes single nodes with ONNX Runtime while folding constants, and builds those
    one-node models with onnx's newest IR version, which ONNX Runtime 1.31 rejects; the IR
    version is held at 10 while qonnx runs.

    Returns:
        A ``qonnx.core.modelwrapper.ModelWrapper``.
    """
    import warnings
    from unittest import mock

    import onnx
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.transformation.channels_last import ConvertToChannelsLastAndClean
    from qonnx.transformation.gemm_to_matmul import GemmToMatMul
    from qonnx.util.cleanup import cleanup_model

    with (
        mock.patch.object(onnx, "IR_VERSION", 10),
        contextlib.redirect_stdout(io.StringIO()),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # GemmToMatMul warns about opset 17 Gemm (it works)
        model = cleanup_model(ModelWrapper(onnx.load_from_string(onnx_bytes)))
        model = model.transform(ConvertToChannelsLastAndClean())
        model = model.transform(GemmToMatMul())
        model = cleanup_model(model)
    return model


HLS4ML_CHANNELS_LAST = ("Conv", "AveragePool", "MaxPool", "BatchNormalization")
"""ONNX operations hls4ml's ONNX front end takes on images only in qonnx's channels-last
domain (hls4ml 1.3: ``converters/onnx/convolution.py``, ``pooling.py``, ``core.py``)."""


def unconvertible(onnx_bytes: bytes, io_type: str) -> str:
    """Why hls4ml cannot take an ONNX model, found by reading its graph ("" where nothing is
    known to fail before converting it, which takes minutes for a NAS-Bench-201 network):

    - an operation on the data that hls4ml's ONNX front end has no handler for (OFA's
      ``HardSwish``, a transformer's ``LayerNormalization`` and ``Erf``, ReLU6's ``Clip``):
      hls4ml refuses it after qonnx has spent minutes on the model;
    - an operation hls4ml takes only channels-last that qonnx cannot make channels-last
      (``AveragePool`` with qonnx 1.0: every NAS-Bench-201 network has some, in its reduction
      blocks' shortcuts and its ``avg_pool_3x3`` edges);
    - a grouped convolution that is not depthwise (FBNet's ``g2`` blocks), which hls4ml's
      ONNX converter reads as depthwise and refuses ("Depth multiplier must be an integer");
    - a padded pooling under ``io_stream``, whose streaming pools assert no padding
      (hls4ml's ``nnet_pooling_stream.h``; ``io_parallel`` has padded pools).
    """
    from collections import Counter

    import onnx
    from qonnx.custom_op.registry import get_ops_in_domain

    graph = onnx.load_from_string(onnx_bytes).graph
    unknown = _unsupported_on_data(graph)
    if unknown:
        ops = ", ".join(f"{k} {op}" for op, k in sorted(unknown.items()))
        return f"it computes with {ops} node(s), operations hls4ml's ONNX front end does not have"
    movable = {name for name, _ in get_ops_in_domain("qonnx.custom_op.channels_last")}
    stuck = Counter(
        n.op_type
        for n in graph.node
        if n.op_type in HLS4ML_CHANNELS_LAST and n.op_type not in movable
    )
    if stuck:
        import qonnx

        ops = ", ".join(f"{k} {op}" for op, k in sorted(stuck.items()))
        version = getattr(qonnx, "__version__", "")
        return (
            f"it has {ops} node(s), which hls4ml's ONNX front end takes only channels-last and "
            f"qonnx {version} cannot make channels-last (it can: {', '.join(sorted(movable))})"
        )
    weights = {t.name: tuple(t.dims) for t in graph.initializer}
    grouped = [
        n
        for n in graph.node
        if n.op_type == "Conv"
        and any(a.name == "group" and a.i > 1 for a in n.attribute)
        and len(n.input) > 1
        and weights.get(n.input[1], (0, 1))[1:2] != (1,)  # (out, in / group, k, k)
    ]
    if grouped:  # hls4ml reads group > 1 as depthwise: "Depth multiplier must be an integer"
        return (
            f"it has {len(grouped)} grouped Conv node(s) that are not depthwise, which hls4ml's "
            "ONNX front end cannot convert (it takes a group count of 1 or the input channels)"
        )
    if io_type == "io_stream":
        padded = Counter(
            n.op_type
            for n in graph.node
            if n.op_type in ("AveragePool", "MaxPool")
            and any(a.name == "pads" and any(a.ints) for a in n.attribute)
        )
        if padded:
            ops = ", ".join(f"{k} padded {op}" for op, k in sorted(padded.items()))
            return (
                f"it has {ops} node(s), and hls4ml's streaming pools take no padding (io_type: "
                "io_parallel in the profile has padded pools)"
            )
    return ""


REWRITTEN = ("Gemm",)
"""Operations :func:`to_hls4ml_onnx` rewrites before hls4ml reads the model (Gemm as MatMul +
Add)."""


def _unsupported_on_data(graph) -> dict[str, int]:
    """op -> count of the nodes computing on the model's input data (reached from a graph input,
    not through a ``Shape``: shape arithmetic is folded to constants by qonnx) whose operation
    hls4ml's ONNX front end has no handler for and :func:`to_hls4ml_onnx` does not rewrite."""
    from collections import Counter

    # the module, not the function of the same name hls4ml.converters exports
    onnx_to_hls = importlib.import_module("hls4ml.converters.onnx_to_hls")
    known = set(onnx_to_hls.get_supported_onnx_layers()) | {"Identity", "Dropout", *REWRITTEN}
    constant = {t.name for t in graph.initializer}
    data = {i.name for i in graph.input if i.name not in constant}
    found: Counter = Counter()
    for node in graph.node:  # ONNX graphs are topologically sorted
        if node.op_type == "Shape" or not any(i in data for i in node.input):
            continue
        data.update(node.output)
        if node.op_type not in known:
            found[node.op_type] += 1
    return dict(found)


IO_TYPES = ("io_parallel", "io_stream")
"""The ``io_type`` values hls4ml takes (spelled so: it reads no other)."""

STRATEGIES = ("Latency", "Resource")
"""The ``strategy`` values a profile may name (in any case: hls4ml reads them so)."""


def _one_of(value: Any, key: str, choices: tuple[str, ...], any_case: bool = False) -> str:
    """``value`` when it is one of ``choices`` (in any case with ``any_case``).

    Raises:
        HwnasError: any other value (hls4ml took a misspelt strategy for Latency, and failed
            on every model with a misspelt io_type): one line naming the nearest choice.
    """
    import difflib

    def fold(text: str) -> str:
        return text.lower() if any_case else text

    folded = [fold(c) for c in choices]
    if isinstance(value, str) and fold(value) in folded:
        return value
    near = difflib.get_close_matches(fold(str(value)), folded, 1, cutoff=0.0)
    nearest = choices[folded.index(near[0])] if near else choices[0]
    raise HwnasError(
        f"{key} {repr(value)[:80]} must be {' or '.join(choices)}: did you mean {nearest}?"
    )


class Hls4mlDevice(Device):
    """An FPGA part reached through hls4ml and Vitis HLS.

    Profile keys: ``backend`` (Vitis), ``part``, ``clock_period_ns`` (5), ``io_type``
    (io_parallel or io_stream), ``precision`` (``fixed<16,6>``), ``reuse_factor`` (1),
    ``strategy`` (Latency or Resource), ``synthesis_timeout_s`` (21600: how long C synthesis
    may run before it is stopped). The runtime key names the backend and a hash of these (not
    of the timeout), so results for different parts or clocks never mix.

    Raises:
        HwnasError: a value hls4ml or the TCL project cannot take (a backend or part that is
            no name, a precision that is no hls4ml type, an ``io_type`` or ``strategy`` not
            among :data:`IO_TYPES` and :data:`STRATEGIES`, a number out of range); one line.
    """

    kind = "hls4ml"
    on_this_machine = True  # synthesis runs on this machine's tools and CPUs
    profile_keys = Device.profile_keys + (
        "backend", "part", "clock_period_ns", "io_type", "precision", "reuse_factor",
        "strategy", "synthesis_timeout_s",
    )  # fmt: skip

    def __init__(self, profile: dict[str, Any]):
        super().__init__(profile)
        self.backend = str(profile.get("backend", "Vitis"))
        self.part = str(profile.get("part", "xcvu9p-flga2104-2-e"))
        # written into the project's TCL, where [...] is a command: names and numbers only
        for key, value, pattern in (("backend", self.backend, r"[A-Za-z][A-Za-z0-9_]*"),
                                    ("part", self.part, r"[A-Za-z0-9_.-]+")):  # fmt: skip
            if not re.fullmatch(pattern, value):
                raise HwnasError(f"{key} {value!r}: must be a name ({pattern}) in a profile")
        self.clock_ns = profile_number(profile, "clock_period_ns", 5, above=0, unit="ns")
        self.io_type = _one_of(profile.get("io_type", "io_stream"), "io_type", IO_TYPES)
        self.precision = str(profile.get("precision", "fixed<16,6>"))
        if not re.fullmatch(r"(ap_)?u?(fixed|int)<[0-9, A-Z_]+>", self.precision):
            raise HwnasError(
                f"precision {self.precision!r}: must be an hls4ml type such as fixed<16,6>"
            )
        self.reuse_factor = int(profile_number(profile, "reuse_factor", 1, integer=True, least=1))
        # hls4ml reads the strategy in any case
        self.strategy = _one_of(profile.get("strategy", "Latency"), "strategy", STRATEGIES, True)
        self.synthesis_timeout = profile_number(
            profile, "synthesis_timeout_s", SYNTHESIS_TIMEOUT_S, above=0, unit="seconds"
        )
        settings = [self.backend, self.part, self.clock_ns, self.io_type, self.precision]
        settings += [self.reuse_factor, self.strategy]
        digest = content_hash(json.dumps(settings))[:8]
        self.runtime = f"hls4ml:{self.backend.lower()}-{digest}"

    def status(self) -> tuple[bool, str]:
        missing = [m for m in ("hls4ml", "qonnx") if importlib.util.find_spec(m) is None]
        if missing:
            return False, (
                f"{' and '.join(missing)} not installed: pip install 'hwnas[fpga]' "
                "(or pick the recorded 'fpga' device)"
            )
        tool = hls_tool()
        if tool is None:
            return False, (
                "no vitis_hls or vivado_hls on PATH: install AMD Vitis HLS and source its "
                "settings64.sh to synthesise (the recorded 'fpga' device needs no toolchain)"
            )
        return True, f"{tool} for {self.part} at {self.clock_ns:g} ns ({self.backend} backend)"

    def check_networks(self, space: Any, dataset: str) -> None:
        """Refuse a space none of whose first :data:`CHECKED_NETWORKS` sampled networks hls4ml
        can take (:func:`unconvertible`), before a search spends minutes converting each of
        them to the same error. A space where some can be taken is searched: a network that
        cannot is a failed trial (:meth:`convert` raises a :class:`CandidateError`).

        Raises:
            HwnasError: one line naming the operations and what to do.
        """
        import numpy as np

        from hwnas.measure import arch_workload

        first = None
        for arch in space.sample(np.random.default_rng(0), CHECKED_NETWORKS):
            why = unconvertible(arch_workload(space, arch, dataset).onnx_bytes(), self.io_type)
            if not why:
                return
            first = first or why
        raise HwnasError(
            f"device '{self.name}' cannot take {space.name}'s networks: {first} (the recorded "
            "'fpga' device has NAS-Bench-201's and FBNet's FPGA latencies)"
        )

    def project_dir(self, workload: Workload) -> Path:
        """Folder of the workload's hls4ml project (under the hwnas home)."""
        from hwnas.paths import confined, hwnas_home

        parts = (self.name, self.runtime.split(":")[1], workload.model_hash)
        return confined(hwnas_home() / "hls4ml", *parts, what="hls4ml project name")

    def convert(self, onnx_bytes: bytes, out: Path):
        """Write the hls4ml project of an ONNX model to ``out`` (no HLS toolchain needed).

        Returns:
            The ``hls4ml`` ModelGraph (its ``compile()``/``predict()`` run the bit-accurate C++
            emulation with the host compiler).

        Raises:
            CandidateError: hls4ml cannot convert the model (an unsupported layer): a search
                records a failed trial and goes on with the next network.
        """
        import hls4ml

        why = unconvertible(onnx_bytes, self.io_type)
        if why:
            raise CandidateError(f"hls4ml cannot convert the model: {why}")
        model = to_hls4ml_onnx(onnx_bytes)
        quiet = contextlib.redirect_stdout(io.StringIO())
        try:
            with quiet:
                config = hls4ml.utils.config_from_onnx_model(
                    model, granularity="name", backend=self.backend,
                    default_precision=self.precision, default_reuse_factor=self.reuse_factor,
                )  # fmt: skip
                config["Model"]["Strategy"] = self.strategy
                graph = hls4ml.converters.convert_from_onnx_model(
                    model,
                    output_dir=str(out),
                    project_name=PROJECT,
                    backend=self.backend,
                    part=self.part,
                    clock_period=self.clock_ns,
                    io_type=self.io_type,
                    hls_config=config,
                )
                graph.write()
        except Exception as exc:  # hls4ml raises bare Exception for unsupported layers
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CandidateError(f"hls4ml cannot convert the model: {first}") from None
        return graph

    def synthesise(self, project: Path) -> None:
        """Run C synthesis of a written project with the HLS tool on PATH.

        Raises:
            HwnasError: the tool failed (the last line of its log is in the message), or ran
                longer than ``synthesis_timeout_s``.
        """
        tool = hls_tool()
        if tool is None:
            self.require_reachable()
        # its own process group: vitis_hls is a wrapper script whose children (the HLS
        # compiler, its helpers) hold the output pipes, so stopping the wrapper alone left them
        # running and the command waiting for them
        proc = subprocess.Popen(
            [tool, "-f", "build_prj.tcl", "csim=0 synth=1 cosim=0 validation=0 export=0"],
            cwd=project,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=os.name == "posix",
        )
        try:
            stdout, stderr = proc.communicate(timeout=self.synthesis_timeout)
        except BaseException as exc:  # the timeout, or Ctrl-C: nothing of the tool outlives it
            _kill_group(proc)
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
            raise HwnasError(
                f"{tool} did not finish within synthesis_timeout_s={self.synthesis_timeout:g} s "
                f"in {project}: it was stopped (raise synthesis_timeout_s in the profile if the "
                "design needs longer)"
            ) from None
        if proc.returncode != 0:
            tail = (stdout + stderr).strip().splitlines()[-1:] or ["no output"]
            raise HwnasError(f"{tool} failed in {project}: {tail[0]}")

    def measure(self, workload: Workload, metric: str = "latency_ms") -> Measurement:
        """Latency from C synthesis (cycles x target clock period) with the resources in
        ``extra``.

        Raises:
            DeviceUnavailableError: hls4ml or the HLS toolchain is missing.
            HwnasError: conversion or synthesis failed.
        """
        self.check_metric(metric)
        self.require_reachable()
        project = self.project_dir(workload)
        t0 = time.perf_counter()
        try:
            report = parse_csynth_xml(find_report(project, PROJECT))
        except HwnasError:
            self.convert(workload.onnx_bytes(), project)
            self.synthesise(project)
            report = parse_csynth_xml(find_report(project, PROJECT))
        import hls4ml

        return Measurement(
            device=self.name,
            runtime=self.runtime,
            metric=metric,
            model_hash=workload.model_hash,
            label=workload.label,
            batch_size=workload.batch_size,
            input_shape=tuple(workload.input_shape),
            value=report.latency_ms,
            samples=(report.latency_ms,),
            versions={"hls4ml": hls4ml.__version__, "hls": report.tool, "part": report.part},
            source=f"synthesised:{self.name}:{self.runtime}",
            extra={
                "latency_cycles": list(report.latency_cycles),
                "interval_cycles": list(report.interval_cycles),
                "clock_ns": report.clock_ns,
                "estimated_clock_ns": report.estimated_clock_ns,
                "resources": report.resources,
                "available": report.available,
                "synthesis_s": round(time.perf_counter() - t0, 1),
            },
        )


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill ``proc`` and every process of its group (started with ``start_new_session``), then
    reap it."""
    if os.name == "posix":
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    proc.communicate()
