"""Apache TVM (Relax): import ONNX, tune with MetaSchedule into one database per device and
target, compile once per model, run here or on a remote device over TVM RPC.

Untuned TVM is 16-35x slower than ONNX Runtime on a CPU (TOOLCHAIN.md), so a TVM latency is
only meaningful after tuning. Tuning uses MetaSchedule (Shao et al., "Tensor Program
Optimization with Probabilistic Programs", NeurIPS 2022) with *anchor-block* workload equality:
two fused kernels whose main operator (a convolution of one shape, say) is the same share one
tuning record, whatever elementwise epilogue was fused into them. The architectures of a search
space reuse a handful of convolution shapes, so each is tuned once for the whole search
(``trials_per_task`` trials) and every later candidate only compiles.

Layout under the hwnas home, per device and per runtime key (target + tuning budget)::

    tvm/<device>/<key>/tuning/      MetaSchedule JSON database (+ logs)
    tvm/<device>/<key>/lib/<hash>.so compiled models, by hash of (ONNX bytes, input shape)
    tvm/<device>/<key>/tuning.jsonl  one line per tuning session: workloads, trials, seconds

TVM is imported only inside methods that compile or run, never by ``import hwnas``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import CandidateError, DeviceUnavailableError, HwnasError
from hwnas.export import content_hash
from hwnas.paths import file_lock
from hwnas.runtimes.base import BuildInfo, Runtime
from hwnas.runtimes.executable import Executable

TUNED_OPS = ("conv2d", "matmul", "dense")
"""Fused kernels whose name contains one of these are tuned; the rest (pooling, elementwise)
compile with the default schedule."""

MODULE_EQUALITY = "anchor-block"
RECIPE = 1
"""Version of the import/tune/compile recipe; part of the runtime key, bump when it changes."""

TVM_DISTRIBUTIONS = ("apache-tvm", "apache-tvm-ffi")
"""Distributions whose versions a TVM crash report names."""

BUILD_STEP = "hwnas.runtimes.tvm:_build_isolated"
"""What :meth:`TvmRuntime.build` runs in its child process."""

DEFAULT_TRIALS = 16
"""MetaSchedule trials per new workload when a profile does not say."""

AFFINITY_BIG = 1
"""``runtime.config_threadpool``'s mode (TVM's ``ThreadGroup::AffinityMode``) putting the
threads on the fastest cores."""


def _cpu_name() -> str:
    from hwnas.devices.local import cpu_name

    return cpu_name()


def tvm_installed() -> bool:
    """Whether a ``tvm`` package can be imported (checked without importing it)."""
    import importlib.util

    return importlib.util.find_spec("tvm") is not None


def cuda_enabled() -> bool:
    """Whether the installed TVM can compile and run CUDA (imports TVM)."""
    import tvm

    return bool(tvm.runtime.enabled("cuda"))


def target_spec(target: Any) -> dict[str, Any]:
    """A profile's ``target`` as a JSON-able dict, without importing TVM.

    ``None`` or ``"host"`` is this machine's CPU (LLVM, the host CPU's ``mcpu`` filled in when
    compiling), ``"cuda"`` the local GPU; a dict is a TVM JSON target as is.

    Raises:
        HwnasError: any other string (TVM 0.27 takes JSON targets only).
    """
    if target is None or target == "host":
        return {"kind": "llvm", "host": True}
    if target == "cuda":
        return {"kind": "cuda"}
    if isinstance(target, dict) and "kind" in target:
        return dict(target)
    raise HwnasError(
        f"target {target!r} is not usable: give 'host', 'cuda' or a JSON target such as "
        '{"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a76"}'
    )


_SOCKET_TIMEOUT_LOCK = threading.Lock()
_socket_timeout_users: list[float] = []  # the timeouts of the blocks inside socket_timeout now
_saved_default: list[float | None] = [None]  # the default from before the first of them


@contextlib.contextmanager
def socket_timeout(seconds: float) -> Iterator[None]:
    """Inside, Python sockets made without a timeout get ``seconds`` (TVM's tracker client's;
    its RPC sessions are native and keep their own).

    The default is the process's: blocks in several threads at once (``hwnas devices`` probes
    every tracker together) keep the longest of their timeouts, and the last to leave puts the
    one from before the first back."""
    import socket

    with _SOCKET_TIMEOUT_LOCK:
        if not _socket_timeout_users:
            _saved_default[0] = socket.getdefaulttimeout()
        _socket_timeout_users.append(seconds)
        socket.setdefaulttimeout(max(_socket_timeout_users))
    try:
        yield
    finally:
        with _SOCKET_TIMEOUT_LOCK:
            _socket_timeout_users.remove(seconds)
            left = _socket_timeout_users
            socket.setdefaulttimeout(max(left) if left else _saved_default[0])


@dataclass
class RpcSpec:
    """How to reach a remote device through a TVM RPC tracker.

    Attributes:
        host: tracker host.
        port: tracker port.
        key: the device key the RPC server registered with.
        session_timeout: seconds a session may last (0 = no limit); a call on a session
            is given up on at its start + session_timeout + :data:`RPC_MARGIN_S`.
        cpus: CPU ids to pin the runtime's threads to (big cores), or empty for TVM's
            big-core affinity.
        request_timeout: seconds to wait for the tracker to hand out a free server with the
            key (TVM's own request waits for ever while every such server is busy or gone).
    """

    host: str
    port: int
    key: str
    session_timeout: float = 600.0
    cpus: tuple[int, ...] = ()
    request_timeout: float = 600.0

    def session(self):
        """A new RPC session on the device (the tracker picks a free server with the key).

        Raises:
            DeviceUnavailableError: no server with the key was handed out within
                ``request_timeout`` seconds.
            RuntimeError, OSError: TVM's, when the tracker or the server fails otherwise.
        """
        from tvm import rpc

        deadline = time.monotonic() + self.request_timeout
        last: Exception | None = None
        for _ in range(REQUEST_ATTEMPTS):  # TVM's own retries, bounded by the deadline
            left = deadline - time.monotonic()
            if left <= 0:
                break
            with socket_timeout(left):  # the tracker socket's, made here
                tracker = rpc.connect_tracker(self.host, self.port)
            try:
                return tracker.request(
                    self.key, priority=1, session_timeout=self.session_timeout, max_retry=1
                )
            except (OSError, RuntimeError) as exc:
                last = exc
            finally:
                tracker.close()
        if time.monotonic() < deadline and last is not None:
            raise last
        raise DeviceUnavailableError(
            f"RPC tracker {self.host}:{self.port} handed out no free server with key "
            f"'{self.key}' in {self.request_timeout:g} s (each is busy, or stopped "
            "answering); wait, or set rpc.request_timeout in the device profile"
        )


REQUEST_ATTEMPTS = 3
"""Session requests a measurement makes before it gives up (a dropped tracker connection is
asked again, as TVM's ``request`` does), all within ``RpcSpec.request_timeout``."""


RPC_MARGIN_S = 30.0
"""Seconds past ``rpc.session_timeout`` that hwnas waits for a remote device to answer a call
before it gives up on the board. The RPC server ends a session at its timeout and says so at
once (TVM's ``RPCSessionTimeoutError``), but a board that froze, lost power or its network says
nothing, and TVM's native RPC socket has no deadline of its own: each call on a session runs in
a thread that is waited for until ``session start + session_timeout + RPC_MARGIN_S``
(:class:`RpcCalls`). ``session_timeout: 0`` (no limit) sets no deadline either."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:300]


class RpcCalls:
    """The calls of one RPC session on a remote device, each bounded by the session's deadline
    (:data:`RPC_MARGIN_S`), with TVM's RPC errors turned into one-line
    :class:`~hwnas.errors.DeviceUnavailableError`.

    Args:
        spec: where the board is (its ``session_timeout`` sets the deadline).
        device: the hwnas device name, for messages.
        started: ``time.monotonic()`` when the tracker handed the session out.
    """

    def __init__(self, spec: RpcSpec, device: str, started: float):
        self.spec = spec
        self.device = device
        timeout = float(spec.session_timeout)
        self.deadline = started + timeout + RPC_MARGIN_S if timeout > 0 else None
        self.stuck: str | None = None  # why the session was given up on: no call touches it

    @property
    def board(self) -> str:
        """The device as messages name it."""
        spec = self.spec
        return f"device '{self.device}' (RPC key '{spec.key}' at {spec.host}:{spec.port})"

    def __call__(self, fn, *args):
        """``fn(*args)`` on the session, waited for until the deadline.

        Raises:
            DeviceUnavailableError: the deadline passed (the call is left to its thread, and
                every later call on the session fails at once: the stuck call still holds
                it), the session outlived ``rpc.session_timeout``, or the board or its RPC
                server failed (TVM's ``RPCError``, ``InternalError: ... kShutdown``...).
        """
        if self.stuck is not None:
            raise DeviceUnavailableError(self.stuck)
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["value"] = fn(*args)
            except Exception as exc:  # TVM's RPC errors are RuntimeErrors with long text
                box["error"] = exc

        thread = threading.Thread(target=run, name="hwnas-rpc-call", daemon=True)
        thread.start()
        thread.join(None if self.deadline is None else max(0.0, self.deadline - time.monotonic()))
        if thread.is_alive():
            timeout = float(self.spec.session_timeout)
            self.stuck = (
                f"{self.board} did not answer within rpc.session_timeout ({timeout:g} s) + "
                f"{RPC_MARGIN_S:g} s: the board froze, or lost power or its network; check "
                "it and its RPC server, then rerun (raise rpc.session_timeout if a model "
                "takes longer)"
            )
            raise DeviceUnavailableError(self.stuck)
        if "error" in box:
            raise self.lost(box["error"]) from None
        return box.get("value")

    def lost(self, exc: BaseException) -> DeviceUnavailableError:
        """The one-line error for TVM's error ``exc`` on this session."""
        first = _first_line(exc)
        if type(exc).__name__ == "RPCSessionTimeoutError" or "session has expired" in first:
            return DeviceUnavailableError(
                f"{self.board}: the session outlived rpc.session_timeout "
                f"({float(self.spec.session_timeout):g} s) and the RPC server ended it: raise "
                "rpc.session_timeout in the device's profile"
            )
        if isinstance(exc, OSError) or "kShutdown" in first:  # the server or its session died
            return DeviceUnavailableError(
                f"{self.board} stopped answering (its RPC session ended: {first}); check the "
                "board and its RPC server, then rerun"
            )
        return DeviceUnavailableError(f"{self.board} failed: {first}")


class TvmExecutable(Executable):
    """A compiled Relax VM with its inputs bound (``args``: one device tensor per graph
    input, in graph order), local or remote; times with ``time_evaluator`` on the device (one
    call per repeat). On a remote device (``calls``), every call goes through
    :class:`RpcCalls`: bounded by the session's deadline, TVM's RPC errors one line."""

    def __init__(self, vm, dev, args, session=None, calls: RpcCalls | None = None):
        self.vm = vm
        self.dev = dev
        self.args = list(args)
        self.session = session  # keeps a remote session alive
        self.calls = calls
        self._main = vm["main"]
        self._evaluators: dict[int, Any] = {}

    def _call(self, fn, *args):
        return fn(*args) if self.calls is None else self.calls(fn, *args)

    def _run(self) -> None:
        self._main(*self.args)
        self.dev.sync()

    def __call__(self) -> None:
        """One inference.

        Raises:
            DeviceUnavailableError: a remote device stopped answering (:class:`RpcCalls`).
        """
        self._call(self._run)

    untimed_calls = 1  # time_evaluator's first call of every invocation is not timed

    def samples_ms(self, n: int) -> list[float]:
        """``n`` inferences timed on the device, in ms.

        Raises:
            DeviceUnavailableError: a remote device stopped answering (:class:`RpcCalls`).
        """
        if n not in self._evaluators:
            self._evaluators[n] = self._call(
                lambda: self.vm.time_evaluator(
                    "main", self.dev, number=1, repeat=n, min_repeat_ms=0
                )
            )
        results = self._call(lambda: self._evaluators[n](*self.args).results)
        return [r * 1e3 for r in results]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return self._call(self._predict, x)

    def _predict(self, x: np.ndarray) -> np.ndarray:
        import tvm

        out = self._main(tvm.runtime.tensor(np.asarray(x, np.float32), self.dev))
        if not hasattr(out, "numpy"):
            out = out[0]
        return out.numpy()


def _light_tensor_intrin(target) -> None:
    """Make ``import tvm.s_tir.tensor_intrin`` cheap before MetaSchedule runs.

    ``TuneContext`` imports that package, which registers tensor intrinsics for every backend
    (CUDA tensor cores alone take 100 s of import here). A float32 search needs at most the
    intrinsics of its own CPU family, so the package is replaced by an empty one with the real
    ``__path__`` and only that family's module is imported. Does nothing if the real package
    is already imported.
    """
    import importlib
    import importlib.util
    import sys
    import types

    name = "tvm.s_tir.tensor_intrin"
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    stub = types.ModuleType(name, "tensor intrinsics, imported per CPU family by hwnas")
    stub.__path__ = list(spec.submodule_search_locations or [])
    stub.__spec__ = spec
    sys.modules[name] = stub
    triple = str(target.attrs.get("mtriple", "")) if target.kind.name == "llvm" else ""
    if target.kind.name == "llvm":
        family = "arm_cpu" if triple.startswith(("aarch64", "arm")) else "x86"
        importlib.import_module(f"{name}.{family}")


def _build_without_tensor_intrin(mod, target, _params):
    """MetaSchedule build function that skips ``import tvm.s_tir.tensor_intrin`` (60 s here,
    done by the default builder in every worker; not needed for float32 CPU/GPU kernels)."""
    from tvm.driver import build as tvm_build
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
    return tvm_build(mod, target=target)


def _export_for(fcompile_name: str, cc: str | None):
    """Export function for MetaSchedule's builder: a shared library the runner can load."""

    def export(rt_mod) -> str:
        import tempfile

        path = os.path.join(tempfile.mkdtemp(), "tvm_tmp_mod.so")
        rt_mod.export_library(path, fcompile=_fcompile(fcompile_name, cc))
        return path

    return export


def _fcompile(kind: str, cc: str | None):
    """The linker for ``export_library``: host default, the NDK, or a cross compiler."""
    if kind == "ndk":
        from tvm.support import ndk

        return ndk.create_shared
    if kind == "cross" and cc:
        from tvm.support import cc as tvm_cc

        return tvm_cc.cross_compiler(cc)
    return None


class TvmRuntime(Runtime):
    """Compile ONNX models with TVM Relax for a target, tuned with a shared database.

    Args:
        threads: threads of the TVM runtime (and ``num-cores`` of CPU targets).
        target: "host" (default), "cuda", or a TVM JSON target dict (e.g.
            ``{"kind": "llvm", "mtriple": "aarch64-linux-android", "mcpu": "cortex-x3"}``).
        trials_per_task: MetaSchedule trials for each workload new to the database; 0
            compiles untuned (not a usable latency on CPUs: for tests and quick checks).
        device: device name (the database and cache are per device).
        cache_dir: root of the TVM cache (default ``<hwnas home>/tvm``).
        rpc: remote device to run on; None runs here.
        cc: cross compiler (e.g. "aarch64-linux-gnu-g++") for non-Android remote targets.
        target_origin: where the target was given (``target: in FILE``, ``--target``), named
            when TVM rejects it; None for a default target.
    """

    name = "tvm"

    def __init__(
        self,
        threads: int = 1,
        target: Any = None,
        trials_per_task: int = DEFAULT_TRIALS,
        device: str = "local",
        cache_dir: str | Path | None = None,
        rpc: RpcSpec | None = None,
        cc: str | None = None,
        target_origin: str | None = None,
        **_ignored,
    ):
        super().__init__()
        self.threads = int(threads)
        self.spec = target_spec(target)
        self.trials_per_task = int(trials_per_task)
        if self.trials_per_task < 0:
            raise HwnasError(f"trials_per_task must be >= 0, got {trials_per_task}")
        self.device = device
        self.rpc = rpc
        self.cc = cc
        self.target_origin = target_origin
        if cache_dir is None:
            from hwnas.paths import hwnas_home

            cache_dir = hwnas_home() / "tvm"
        self.cache_root = Path(cache_dir).expanduser()
        self._target = None

    # -- identity -----------------------------------------------------------------------------

    def _key_parts(self) -> dict[str, Any]:
        spec = dict(self.spec)
        if spec.pop("host", False):
            spec["host_cpu"] = _cpu_name()
        if spec["kind"] == "llvm":
            spec.setdefault("num-cores", self.threads)
        return {
            "target": spec,
            "trials_per_task": self.trials_per_task,
            "tuned_ops": TUNED_OPS,
            "equality": MODULE_EQUALITY,
            "recipe": RECIPE,
        }

    @property
    def key(self) -> str:
        """Store key "tvm:<target kind>-<8 hex>", the hash covering the target (the host CPU
        model for host targets), the tuning budget and the recipe: TVM numbers for different
        targets or budgets never mix."""
        digest = content_hash(json.dumps(self._key_parts(), sort_keys=True))[:8]
        return f"tvm:{self.spec['kind']}-{digest}"

    @property
    def folder(self) -> Path:
        """This device's and key's cache folder."""
        from hwnas.paths import confined

        return confined(self.cache_root, self.device, self.key.split(":", 1)[1], what="device name")

    @property
    def is_remote(self) -> bool:
        return self.rpc is not None

    def target(self):
        """The TVM target (imports TVM)."""
        if self._target is None:
            import tvm
            from tvm.target import codegen

            spec = dict(self.spec)
            if spec.pop("host", False):
                spec["mcpu"] = codegen.llvm_get_system_cpu()
            if spec["kind"] == "llvm":
                spec.setdefault("num-cores", self.threads)
            try:
                self._target = tvm.target.Target(spec)
            except Exception as exc:  # TVM raises ValueError/TVMError with long messages
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                given = f" ({self.target_origin})" if self.target_origin else ""
                raise HwnasError(
                    f"TVM rejects target {json.dumps(self.spec)}{given}: {first}"
                ) from None
        return self._target

    def check_settings(self) -> None:
        """Build the target (:meth:`target`): one TVM rejects is refused before any work.

        Raises:
            HwnasError: ``TVM rejects target ...``, naming where it was given.
        """
        self.target()

    def _export_kind(self) -> str:
        if "android" in str(self.spec.get("mtriple", "")):
            return "ndk"
        if self.cc:
            return "cross"
        return "host"

    def status(self) -> tuple[bool, str]:
        """(usable, one line): whether Apache TVM is installed (found without importing it)."""
        if not tvm_installed():
            return False, "Apache TVM is not installed: pip install 'hwnas[tvm]'"
        return True, f"TVM runtime {self.key}"

    def versions(self) -> dict[str, str]:
        import tvm

        return {
            "tvm": tvm.__version__,
            "target": json.dumps({k: v for k, v in self.spec.items() if k != "host"}),
            "host_cpu": _cpu_name() if self.spec.get("host") else "",
            "trials_per_task": str(self.trials_per_task),
        }

    # -- compile ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        with file_lock(self.folder / ".lock"):
            yield

    def artifact(self, onnx_bytes: bytes, input_shape: tuple[int, ...]) -> Path:
        """Path of the compiled model for these bytes and input shape (may not exist yet)."""
        shape = "x".join(str(int(d)) for d in input_shape)
        return self.folder / "lib" / f"{content_hash(onnx_bytes, shape)}.so"

    def build(self, onnx_bytes: bytes, input_shape: tuple[int, ...]) -> Path:
        """Compile (tuning new workloads first) unless the artifact is cached; sets
        :attr:`last_build`.

        Importing, tuning, compiling and linking run in a child process
        (:func:`hwnas.isolate.run_isolated`), which then loads the library and runs it once when
        it was built for this machine: a crash inside TVM becomes an error for this model, not
        the end of the search.

        Returns:
            The shared library of the compiled model.

        Raises:
            NativeCrashError: TVM crashed (SIGSEGV...) while building or first running the
                model; the message names the signal, the TVM versions and the log file.
            HwnasError: the model cannot be imported or compiled for the target.
        """
        from hwnas.isolate import run_isolated

        path = self.artifact(onnx_bytes, input_shape)
        with self._lock():
            if path.exists():
                self.last_build = BuildInfo(cached=True)
                return path
            self.last_build = run_isolated(
                BUILD_STEP,
                self,
                onnx_bytes,
                tuple(input_shape),
                path,
                what=f"TVM build of model {path.stem[:12]} for {self.key}",
                libraries=TVM_DISTRIBUTIONS,
                log=self.folder / "logs" / f"{path.stem}.log",
                hint="the versions hwnas was tested with: pip install 'hwnas[tvm]'",
            )
            if not path.exists():
                raise HwnasError(f"TVM build for {self.key} wrote no library at {path}")
            return path

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_target"] = None  # a TVM object; rebuilt on demand
        return state

    def build_here(self, onnx_bytes: bytes, input_shape: tuple[int, ...], path: Path) -> BuildInfo:
        """Import, tune and compile in this process and write the library to ``path`` (what
        :meth:`build` runs in its child process; call it directly only where a crash may end
        the process).

        Raises:
            HwnasError: the model cannot be imported, compiled or linked for the target.
        """
        info = BuildInfo(cached=False)
        t0 = time.perf_counter()
        mod = self._import(onnx_bytes, input_shape)
        target = self.target()
        if self.trials_per_task > 0:
            self._tune(mod, target, info)
        executable = self._compile(mod, target)
        from hwnas.paths import sweep_temporaries, temporary

        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(path.parent)  # what a killed build left
        tmp = temporary(path, "tmp.so")
        try:
            executable.export_library(str(tmp), fcompile=_fcompile(self._export_kind(), self.cc))
        except Exception as exc:
            tmp.unlink(missing_ok=True)
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise HwnasError(f"cannot link the compiled model for {self.key}: {first}") from None
        tmp.rename(path)
        info.compile_s = time.perf_counter() - t0 - info.tuning_s
        return info

    def _import(self, onnx_bytes: bytes, input_shape: tuple[int, ...]):
        import onnx
        import tvm
        from tvm import relax
        from tvm.relax.frontend.onnx import from_onnx

        from hwnas.onnx_inputs import model_inputs

        model = onnx.load_from_string(onnx_bytes)
        if model.functions:  # TVM's importer knows no local functions (a module exported as one)
            from onnx.inliner import inline_local_functions

            model = inline_local_functions(model)
        try:
            specs = model_inputs(model, first_shape=tuple(input_shape))
        except HwnasError as exc:
            raise CandidateError(str(exc)) from None
        try:
            mod = from_onnx(
                model,
                shape_dict={s.name: list(s.shape) for s in specs},
                dtype_dict={s.name: s.dtype for s in specs},
                keep_params_in_input=False,
            )
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise CandidateError(f"TVM cannot import the ONNX model: {first}") from None
        seq = tvm.transform.Sequential(
            [relax.transform.DecomposeOpsForInference(), relax.transform.CanonicalizeBindings()]
        )
        return seq(mod)

    def _compile(self, mod, target):
        import tvm
        from tvm import relax

        if self.trials_per_task > 0:
            from tvm.s_tir import meta_schedule as ms

            return ms.relax_integration.compile_relax(self.database(), mod, target, None)
        with target:
            return tvm.compile(
                mod, target=target, relax_pipeline=relax.get_default_pipeline(target)
            )

    # -- tuning -------------------------------------------------------------------------------

    def database(self):
        """The device's MetaSchedule JSON database for this key (created if missing)."""
        from tvm.s_tir import meta_schedule as ms

        folder = self.folder / "tuning"
        folder.mkdir(parents=True, exist_ok=True)
        return ms.database.JSONDatabase(work_dir=str(folder), module_equality=MODULE_EQUALITY)

    def tasks(self, mod, target) -> list:
        """MetaSchedule tasks of a Relax module, fused the way :meth:`_compile` fuses it."""
        import tvm
        from tvm import relax
        from tvm.relax import pipeline
        from tvm.s_tir import meta_schedule as ms

        passes = [
            *pipeline.library_dispatch_passes(target),
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
        ]
        with target:
            fused = tvm.transform.Sequential(passes)(mod)
        tasks = ms.relax_integration.extract_tasks(fused, target, module_equality=MODULE_EQUALITY)
        return [t for t in tasks if any(op in t.task_name for op in TUNED_OPS)]

    def _tune(self, mod, target, info: BuildInfo) -> None:
        from tvm.s_tir import meta_schedule as ms

        tasks = self.tasks(mod, target)
        db = self.database()
        todo = [t for t in tasks if not db.has_workload(t.dispatched[0])]
        info.workloads = len(tasks)
        if not todo:
            return
        logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
        _light_tensor_intrin(target)
        work_dir = str(self.folder / "tuning")
        t0 = time.perf_counter()
        contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
            todo,
            work_dir=work_dir,
            strategy=ms.search_strategy.EvolutionarySearch(
                population_size=64, init_min_unmeasured=16
            ),
            num_threads=max(1, self.threads),
            seed=0,
        )
        trials = self.trials_per_task
        os.environ.setdefault("TVM_NUM_THREADS", str(self.threads))
        ms.tune_tasks(
            tasks=contexts,
            task_weights=weights,
            work_dir=work_dir,
            max_trials_global=trials * len(contexts),
            max_trials_per_task=trials,
            num_trials_per_iter=min(trials, 16),
            builder=ms.builder.LocalBuilder(
                f_build=_build_without_tensor_intrin,
                f_export=_export_for(self._export_kind(), self.cc),
                timeout_sec=300,
                max_workers=1,
            ),
            runner=self._tuning_runner(),
            database=db,
            module_equality=MODULE_EQUALITY,
        )
        info.tuning_s = time.perf_counter() - t0
        info.tuned_workloads = [t.task_name for t in todo]
        with open(self.folder / "tuning.jsonl", "a") as fh:
            record = {
                "at": time.time(),
                "workloads": info.tuned_workloads,
                "trials_per_task": trials,
                "seconds": round(info.tuning_s, 2),
            }
            fh.write(json.dumps(record) + "\n")

    def _tuning_runner(self):
        from tvm.s_tir import meta_schedule as ms

        config = ms.runner.EvaluatorConfig(number=3, repeat=1, min_repeat_ms=0)
        if self.rpc is None:
            return ms.runner.LocalRunner(evaluator_config=config, timeout_sec=120)
        rpc_config = ms.runner.RPCConfig(
            tracker_host=self.rpc.host,
            tracker_port=self.rpc.port,
            tracker_key=self.rpc.key,
            session_timeout_sec=120,
        )
        return ms.runner.RPCRunner(rpc_config=rpc_config, evaluator_config=config, max_workers=1)

    def tuning_history(self) -> list[dict[str, Any]]:
        """Every tuning session of this device and key, oldest first."""
        path = self.folder / "tuning.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    # -- run ----------------------------------------------------------------------------------

    def compile(self, onnx_bytes: bytes, input_shape: tuple[int, ...]) -> TvmExecutable:
        """Build (or reuse) the compiled model and load it here or on the remote device, with
        fixed inputs bound: the first of ``input_shape``, each fed as :mod:`hwnas.onnx_inputs`
        says.

        Raises:
            HwnasError: import, tuning or compilation failed.
            DeviceUnavailableError: the remote device cannot be reached.
        """
        path = self.build(onnx_bytes, input_shape)
        return self.load(path, _inputs(onnx_bytes, input_shape))

    def load(self, path: Path, inputs) -> TvmExecutable:
        """Load a compiled model (:meth:`build`) and bind fixed values to its ``inputs``
        (:class:`hwnas.onnx_inputs.InputSpec` each, in graph order).

        Raises:
            CandidateError: this process cannot load the library.
            DeviceUnavailableError: the remote device cannot be reached, or failed or stopped
                answering while the model was loaded (:class:`RpcCalls`).
        """
        import tvm
        from tvm import relax

        from hwnas.onnx_inputs import feeds

        fed = feeds(inputs)
        kind = self.spec["kind"]
        if self.rpc is None:
            try:
                lib = tvm.runtime.load_module(str(path))
            except Exception as exc:  # a library built for a loader this process lacks (cuda)
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise CandidateError(
                    f"TVM cannot load the compiled model {path} for {self.key}: {first[:300]}"
                ) from None
            dev = tvm.cuda(0) if kind == "cuda" else tvm.cpu(0)
            if kind != "cuda":
                tvm.get_global_func("runtime.config_threadpool")(0, self.threads)
            session = None
        else:
            try:
                session = self.rpc.session()
            except DeviceUnavailableError:
                raise
            except Exception as exc:  # RPC errors are RuntimeError/TVMError with long text
                raise DeviceUnavailableError(
                    f"RPC device '{self.rpc.key}' at {self.rpc.host}:{self.rpc.port} failed: "
                    f"{_first_line(exc)}"
                ) from None
            calls = RpcCalls(self.rpc, self.device, time.monotonic())
            return calls(self._load_remote, session, calls, path, fed)
        vm = relax.VirtualMachine(lib, dev)
        return TvmExecutable(vm, dev, [tvm.runtime.tensor(x, dev) for x in fed.values()], session)

    def _load_remote(self, session, calls: RpcCalls, path: Path, fed) -> TvmExecutable:
        """Upload and load the compiled model on the remote device of ``session`` (run by
        ``calls``: each step is a call on the board)."""
        import tvm
        from tvm import relax

        session.upload(str(path))
        lib = session.load_module(path.name)
        if self.spec["kind"] == "cuda":
            dev = session.cuda(0)
        else:
            dev = session.cpu(0)
            # the board's fastest cores (TVM's big-core affinity orders them by maximum
            # frequency); big_cores gives how many: TVM RPC cannot carry a list of CPU
            # ids (passing one failed every measurement: "Cannot pass argument 2, type
            # ffi.Array")
            n = min(len(self.rpc.cpus), self.threads) if self.rpc.cpus else self.threads
            session.get_function("runtime.config_threadpool")(AFFINITY_BIG, n)
        vm = relax.VirtualMachine(lib, dev)
        args = [tvm.runtime.tensor(x, dev) for x in fed.values()]
        return TvmExecutable(vm, dev, args, session, calls)


def _inputs(onnx_bytes: bytes, input_shape: tuple[int, ...]):
    """The model's inputs (:func:`hwnas.onnx_inputs.bytes_inputs`); an input hwnas cannot feed
    is the candidate's error."""
    from hwnas.onnx_inputs import bytes_inputs

    try:
        return bytes_inputs(onnx_bytes, tuple(input_shape))
    except HwnasError as exc:
        raise CandidateError(str(exc)) from None


def _build_isolated(
    runtime: TvmRuntime, onnx_bytes: bytes, input_shape: tuple[int, ...], path: Path
) -> BuildInfo:
    """Child-process side of :meth:`TvmRuntime.build`: build, then load the library and run it
    once when it was built for this machine, so that a crash on loading shows here too."""
    info = runtime.build_here(onnx_bytes, input_shape, path)
    if runtime.rpc is None and runtime._export_kind() == "host":
        runtime.load(path, _inputs(onnx_bytes, input_shape))()
    return info
