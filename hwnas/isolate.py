"""Native steps that can take the interpreter down run in a child process.

A segmentation fault inside a compiled library (TVM's FFI, a code generator, a vendor SDK) kills
the process it happens in: no ``except`` clause sees it, and a search would die with a C stack
dump and no word of which candidate or which library did it. :func:`run_isolated` runs one such
step in a fresh Python interpreter (``python -m hwnas.isolate``, without the working folder on
its path: :func:`python_module`): the step's return value or
exception comes back pickled, and a child killed by a signal becomes a
:class:`~hwnas.errors.NativeCrashError` naming the signal, the step and the versions of the
libraries involved. The child's output is kept in a log file named in the error.

The child imports hwnas from where the parent did, so it runs the same code.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Iterable
from importlib import import_module, metadata
from pathlib import Path
from typing import Any

from hwnas.errors import HwnasError, NativeCrashError


class IsolatedStepError(RuntimeError):
    """The isolated step raised an exception that could not be sent back as itself (a bug in
    hwnas or a library); the message holds the child's traceback."""


def distribution_versions(names: Iterable[str]) -> str:
    """ "name version, ..." of the installed distributions among ``names`` ("not installed" for
    the others), for error messages."""
    parts = []
    for name in names:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} not installed")
    return ", ".join(parts)


def _resolve(target: str):
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def python_module(module: str) -> list[str]:
    """The arguments after the interpreter that run ``module`` as ``python -m module`` would,
    but with the working folder off ``sys.path``: ``-m`` puts it first, so a ``matplotlib.py``
    in the folder a user runs hwnas from would be imported by the child (hwnas imports a
    Python file only when the user names it). The folder holding this hwnas package is put
    first where it is not on the path already (a source checkout), so the child runs the
    parent's code. (``-P``/``PYTHONSAFEPATH`` need Python
    3.11; ``-I`` would also drop a ``pip install --user``'s site folder.)"""
    here = str(Path(__file__).resolve().parents[1])
    code = (
        "import sys\n"
        "if sys.path and sys.path[0] == '': del sys.path[0]\n"
        f"if {here!r} not in sys.path: sys.path.insert(0, {here!r})\n"
        "import runpy\n"
        f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)\n"
    )
    return ["-c", code]


PARENT_ENV = "HWNAS_STEP_PARENT"
"""The parent's pid, handed to an isolated step so that it dies with it."""


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env[PARENT_ENV] = str(os.getpid())
    here = str(Path(__file__).resolve().parents[1])  # the folder holding this hwnas package
    paths = [here, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return env


def run_isolated(
    target: str,
    *args: Any,
    what: str,
    libraries: Iterable[str] = (),
    log: str | Path | None = None,
    keep_log: bool = False,
    timeout: float | None = None,
    hint: str = "",
) -> Any:
    """Call ``target(*args)`` in a child Python process and return its result.

    Args:
        target: "package.module:function"; the function, its arguments and its result must
            be picklable.
        what: the step in words, for errors ("TVM build of model 1a2b3c4d").
        libraries: distribution names whose versions an error names ("apache-tvm").
        log: file that receives the child's stdout and stderr (appended); default a
            temporary file. It is kept when the step fails, and removed when it succeeds
            unless ``keep_log``.
        keep_log: keep the log of a successful step too.
        timeout: seconds before the child is killed (None: no limit).
        hint: what the user can do, appended to a crash report.

    Returns:
        What ``target`` returned.

    Raises:
        NativeCrashError: the child died from a signal (SIGSEGV, SIGABRT...) or exited without
            a result; the message names the step, the signal, the library versions and the log.
        HwnasError: raised by ``target`` (re-raised here as it was); any other exception of
            ``target`` (a library's own: TVM's RuntimeError) as a :class:`NativeCrashError`
            naming its type and first line.
    """
    if log is None:
        fd, name = tempfile.mkstemp(prefix="hwnas-step-", suffix=".log")
        os.close(fd)
        log = Path(name)
    log = Path(log)
    log.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="hwnas-step-") as tmp:
        request, reply = Path(tmp, "request.pkl"), Path(tmp, "reply.pkl")
        request.write_bytes(pickle.dumps((target, args)))
        with open(log, "ab") as out:
            try:
                proc = subprocess.run(
                    [sys.executable, *python_module("hwnas.isolate"), str(request), str(reply)],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=_child_env(),
                    timeout=timeout,
                    # its own process group, which the child's guard (_guard_group) empties
                    # when the child ends: the workers a library starts end with it
                    start_new_session=os.name == "posix",
                )
                code = proc.returncode
            except subprocess.TimeoutExpired:
                code = None
        versions = distribution_versions(libraries)
        versions = f" ({versions})" if versions else ""
        hint = f"; {hint}" if hint else ""
        if code is None:
            raise NativeCrashError(
                f"{what} did not finish in {timeout:g} s and was stopped{versions}; "
                f"log: {log}{hint}"
            )
        if code < 0 or not reply.exists():
            try:
                how = f"crashed with {signal.Signals(-code).name}" if code < 0 else ""
            except ValueError:
                how = f"crashed with signal {-code}"
            how = how or f"exited with status {code} and no result"
            raise NativeCrashError(f"{what} {how}{versions}; log: {log}{hint}")
        ok, value = pickle.loads(reply.read_bytes())
    if ok or isinstance(value, HwnasError):
        if not keep_log:
            log.unlink(missing_ok=True)
        if ok:
            return value
        raise value
    # the library's own exception (TVM's RuntimeError, InternalError): one line naming the
    # step, a failed candidate in a search, with the log kept
    text = str(value).strip()
    first = text.splitlines()[0] if text else ""
    raise NativeCrashError(
        f"{what} failed: {type(value).__name__}: {first[:300]}{versions}; log: {log}{hint}"
    )


def die_with_parent(parent: str | None) -> None:
    """Ask Linux to kill this child when its parent (pid ``parent``, as a string) dies
    (``PR_SET_PDEATHSIG``): a search killed during a TVM build left its build running for
    minutes, disturbing the resumed search's timings; an ``hwnas search --nproc`` killed left
    its ranks training. Elsewhere, where ``prctl`` is missing, or without a parent, nothing."""
    if not sys.platform.startswith("linux") or not parent:
        return
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if str(os.getppid()) != parent:  # the parent died before the call (or a launcher
        return  # forked us): nothing to die with


def _die_with_parent() -> None:
    die_with_parent(os.environ.get(PARENT_ENV))


def _guard_group() -> None:
    """Fork a guard that kills this child's whole process group once the child is gone, by
    any means: its own end, the parent's timeout, or ``PR_SET_PDEATHSIG``. The processes a
    library starts in the step (TVM's builder and runner pools) are in the group and end with
    it; they outlived a killed or timed-out step, compiling for minutes. The guard waits on a
    pipe whose only writer is this child (the end is not inherited by the library's
    processes). Only in a group of the step's own (``run_isolated`` starts one); elsewhere,
    nothing."""
    if not hasattr(os, "fork") or os.getpgid(0) != os.getpid():
        return
    read_end, write_end = os.pipe()
    if os.fork() == 0:  # the guard
        try:
            os.close(write_end)
            while os.read(read_end, 1):
                pass
        finally:
            os.killpg(os.getpgid(0), signal.SIGKILL)  # the group, the guard last
            os._exit(0)
    os.close(read_end)


def _main(request: str, reply: str) -> int:
    _die_with_parent()
    _guard_group()
    target, args = pickle.loads(Path(request).read_bytes())
    try:
        result: tuple[bool, Any] = (True, _resolve(target)(*args))
    except BaseException as exc:  # sent back to the parent, which decides
        tb = traceback.format_exc()
        sys.stderr.write(tb)
        if isinstance(exc, HwnasError):
            exc = HwnasError(str(exc)) if not _picklable(exc) else exc
        elif not _picklable(exc) or not isinstance(exc, Exception):
            exc = IsolatedStepError(f"{type(exc).__name__}: {exc}\n{tb}")
        result = (False, exc)
    payload = pickle.dumps(result)
    tmp = Path(reply).with_suffix(".tmp")
    tmp.write_bytes(payload)
    tmp.rename(reply)
    sys.stdout.flush()
    sys.stderr.flush()
    # skip interpreter teardown: native libraries can crash in their destructors, and the
    # step's result is already safe on disk
    os._exit(0)


def _picklable(exc: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return False
    return True


if __name__ == "__main__":
    from hwnas.isolate import _main as main  # classes pickled by their importable module path

    raise SystemExit(main(*sys.argv[1:3]))
