"""Errors that describe a user's mistake or an unreachable resource.

The CLI prints a :class:`HwnasError` as one line and exits with its ``exit_status``
(:data:`EXIT_USAGE`, 2, for a mistake; :data:`EXIT_FAILED`, 1, for a run that stopped part-way
through no fault of its input); any other exception is a bug in hwnas and keeps its traceback.
"""

EXIT_USAGE = 2

EXIT_FAILED = 1
"""Exit status of a run that stopped part-way for a reason other than its input (a training
process lost, the connection to a database server lost); the same command resumes it."""


class HwnasError(Exception):
    """A problem the user can fix (bad input, missing data, unreachable device).

    The message is one line that names the problem and, where possible, what to do.
    """

    exit_status = EXIT_USAGE
    """The CLI's exit status after printing the message."""


class ProcessError(HwnasError):
    """An error of one process of a job that trains across processes, which that process says
    itself (under torchrun only rank 0 speaks otherwise): rank 0 never heard of it, or runs on
    another machine. The message starts with the process ("process 1 of 2: ...")."""


class LostProcessError(ProcessError):
    """A process of a training job stopped or never arrived: the job cannot go on (exit
    status :data:`EXIT_FAILED`); the same command resumes from the last checkpoint."""

    exit_status = EXIT_FAILED


class LostConnectionError(HwnasError):
    """The connection to a database server (a study storage or measurement store on PostgreSQL)
    was lost part-way through a command (:func:`hwnas.db.lost_connection`): exit status
    :data:`EXIT_FAILED`, no fault of the input; the same command resumes once the server is
    back. A server that cannot be reached before any work is a plain :class:`HwnasError`."""

    exit_status = EXIT_FAILED


class HwnasWarning(UserWarning):
    """A result that holds but needs a word: the CLI prints it (``warning:`` and ``!`` lines),
    the Python API issues it with :func:`warnings.warn`: :func:`hwnas.predict` for a model
    unlike the calibration networks, operators the graph features do not count, a batch other
    than the device values', a calibration value taken for a gross error;
    :func:`hwnas.search` for a chance-level best."""


def warn_caller(message: str) -> None:
    """Issue ``message`` as a :class:`HwnasWarning` attributed to the first frame outside
    hwnas: the user's line that called :func:`hwnas.measure` or :func:`hwnas.predict`, however
    many hwnas frames lie between (a fixed ``stacklevel`` pointed into hwnas's own code when
    the call went through the callable module)."""
    import os
    import sys
    import warnings

    root = os.path.dirname(os.path.abspath(__file__)) + os.sep
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_code.co_filename.startswith(root):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, HwnasWarning, stacklevel=level)


FIELD_NAMES: dict[str, dict[str, str]] = {
    "strategy": {
        "pcdarts": "darts with --set partial_channels=K (PC-DARTS, Xu et al. 2020)",
        "pc-darts": "darts with --set partial_channels=K (PC-DARTS, Xu et al. 2020)",
        "spos": "oneshot (single-path one-shot, Guo et al. 2020)",
        "single-path-nas": "singlepath (Stamoulis et al. 2019)",
        "single-path": "singlepath (Stamoulis et al. 2019)",
        "evolution": "aging (aging evolution, Real et al. 2019)",
        "regularized-evolution": "aging (aging evolution, Real et al. 2019)",
        "nsga-ii": "nsga2", "nsgaii": "nsga2", "nsga-iii": "nsga3",
    },
}  # fmt: skip
"""Names the field uses for what hwnas names otherwise, by kind: an unknown name among them
is answered with hwnas's own (``--strategy pcdarts``: darts with ``--set partial_channels``)."""


class UnknownNameError(HwnasError, KeyError):
    """A name that is not in a registry (device, space, strategy, dataset...); the message
    offers the closest known names (``difflib``) and lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str]):
        import difflib

        shown = ", ".join(sorted(known)[:40])
        more = "" if len(known) <= 40 else f", ... ({len(known)} in all)"
        alias = FIELD_NAMES.get(kind, {}).get(str(name).lower().replace("_", "-"))
        # compared without case: NSGA2 and CIFAR100 are nsga2 and cifar100 mistyped
        lower = {str(k).lower(): str(k) for k in known}
        close = [lower[c] for c in difflib.get_close_matches(str(name).lower(), list(lower), n=3,
                                                             cutoff=0.6)]  # fmt: skip
        if alias is not None and alias.split()[0] in known:
            hint = f" {name} is {alias} here;"
        else:
            hint = f" did you mean {' or '.join(close)}?" if close else ""
        super().__init__(f"unknown {kind} '{name}';{hint} known: {shown}{more}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DeviceUnavailableError(HwnasError):
    """A device exists but cannot take measurements now (not connected, no toolchain...)."""


class DeviceLostError(DeviceUnavailableError):
    """The device stopped measuring part-way through a command, its checks passed (a phone
    unplugged, an RPC board that stopped answering, a runtime that lost its device): exit
    status :data:`EXIT_FAILED`, no fault of the input; what was measured before is stored, so
    the same command resumes. :class:`hwnas.measure.Profiler` raises it for any
    :class:`DeviceUnavailableError` of a measurement."""

    exit_status = EXIT_FAILED


class CandidateError(HwnasError):
    """One candidate architecture cannot be measured (too noisy, rejected or crashed the
    compiler); a search records it as a failed trial and goes on with the next one."""


class UnrecordedError(CandidateError):
    """A recorded table has no value for this candidate: known without any device, so unlike
    other candidate errors it says nothing about a device's or runtime's health (a search does
    not count it towards stopping)."""


class NativeCrashError(CandidateError):
    """A native library crashed (a signal such as SIGSEGV) or hung in an isolated step
    (:func:`hwnas.isolate.run_isolated`); the message names the library versions."""


class MeterReadingError(DeviceUnavailableError):
    """An energy meter counted no energy (zero, negative or not a number) over a measured
    window: a counter that does not move (a virtual machine's frozen RAPL), runs backwards, or
    wrapped without its range. Not the candidate's fault, so never a skipped candidate:
    :class:`hwnas.measure.Profiler` stores what was measured beside it (``kept``: metric ->
    measurement, the latency) and, where energy is not what was asked for, drops the energy
    with a warning said once; where it is, the command stops with this error.

    Args:
        message: one line.
        kept: what the same run measured and can be stored.
        reading: the meter's own line (what the message starts from).
    """

    def __init__(self, message: str, kept: dict | None = None, reading: str | None = None):
        super().__init__(message)
        self.kept = dict(kept or {})
        self.reading = reading or message


NO_SPACE_ERRNOS = (28, 122, 27)
"""ENOSPC (no space left on device), EDQUOT (disk quota exceeded), EFBIG (file too large)."""


def shown(value: object, limit: int = 80) -> str:
    """``value`` as a one-line error shows what was given: its ``repr`` where that is one short
    line, else its type ("a DataSplits", "a list of 1000 items"): a wrong argument's repr (a
    loaded dataset's arrays, a long list) ran to hundreds of lines."""
    text = repr(value)
    if len(text) <= limit and "\n" not in text:
        return text
    if isinstance(value, str):  # a long path is still what it is: its ends
        half = (limit - 5) // 2
        return repr(value[:half] + "..." + value[-half:])
    try:
        n = len(value)  # type: ignore[arg-type]
        items = f" of {n} item{'' if n == 1 else 's'}"
    except TypeError:
        items = ""
    return f"a {type(value).__name__}{items}"


def out_of_space(exc: BaseException) -> str | None:
    """The one-line message for ``exc`` if it, or an exception it was raised from, says the
    disk (or the user's quota) is full; None otherwise.

    Recognises an ``OSError`` with ENOSPC, EDQUOT or EFBIG, SQLite's "database or disk is full"
    (also wrapped by SQLAlchemy), and PyTorch's failed checkpoint writes on a full disk.
    """
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, OSError) and exc.errno in NO_SPACE_ERRNOS:
            where = f" writing {exc.filename}" if exc.filename else ""
            return f"no space left on the device{where} ({exc.strerror or exc})"
        text = str(exc).lower()
        if "database or disk is full" in text or "no space left on device" in text:
            return "no space left on the device (" + str(exc).strip().splitlines()[0][:200] + ")"
        exc = exc.__cause__ or exc.__context__ or getattr(exc, "orig", None)
    return None


def out_of_memory(exc: BaseException) -> str | None:
    """The one-line message for ``exc`` if it, or an exception it was raised from, says memory
    ran out (Python's MemoryError, PyTorch's and ONNX Runtime's failed allocations); None
    otherwise. The limits of :mod:`hwnas.limits` refuse what is plainly too large before any
    work; this names what still did not fit on this machine."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc).lower()
        if isinstance(exc, MemoryError) or any(
            needle in text
            for needle in ("can't allocate memory", "failed to allocate memory", "out of memory")
        ):
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else ""
            return "not enough memory" + (f" ({first})" if first else "")
        exc = exc.__cause__ or exc.__context__
    return None


def keyword_terms(*names: str, public: str | None = None):
    """Decorator for a Python API function: a :class:`HwnasError` it raises names each CLI
    option the function takes as a keyword argument by that argument's name.

    The checks shared with the CLI word their one-line messages in its terms (``--max-latency
    must be a positive number of ms``); from Python that reads ``max_latency must be a
    positive number of ms``. ``--flag VALUE`` with a placeholder or a number (``--device D``,
    ``--max-latency 8``) becomes ``flag=VALUE``, a word ending a clause (``--strategy oneshot)``)
    ``flag="word"``, ``--set K=V`` becomes ``settings={"K": "V"}`` and ``--dim h=32``
    ``dims={"h": 32}``. Options the function does not take (``--help``), and a shell command
    quoted in backticks, are left as they are.

    Args:
        names: keyword names the function takes beyond its own parameters (its ``**options``).
        public: the function's name in the messages (default ``hwnas.NAME``: ``hwnas.zoo.load``
            is not ``hwnas.load``).
    """
    import functools
    import inspect
    import re

    def wrap(func):
        who = public or f"hwnas.{func.__name__}"
        signature = inspect.signature(func)
        keywords = {*signature.parameters, *names}
        own = sorted(
            p.name for p in signature.parameters.values()
            if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
        )  # fmt: skip
        open_ended = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
        flag = re.compile(
            r"--([a-z][a-z0-9-]*)"
            r"(?: ([A-Z0-9][\w.]*\b|[\w.]+=[\w.]+|[a-z][\w.:/+-]*\w(?=[),;]|$)))?"
        )

        def spell(match: re.Match) -> str:
            name, value = match.group(1).replace("-", "_"), match.group(2)
            if name == "set" and "settings" in keywords:
                if value and "=" in value:
                    key, _, v = value.partition("=")
                    return f'settings={{"{key}": "{v}"}}'
                return "settings" + (f" {value}" if value else "")
            if name == "dim" and "dims" in keywords:  # --dim h=32: dims={"h": 32}
                if value and "=" in value:
                    key, _, v = value.partition("=")
                    return f'dims={{"{key}": {v}}}'
                return "dims" + (f" {value}" if value else "")
            if name not in keywords:
                return match.group(0)
            if value and value[0].islower() and "=" not in value:  # a literal: a string
                return f'{name}="{value}"'
            return f"{name}={value}" if value else name

        def python_terms(text: str) -> str:
            # a shell command quoted in the message (`hwnas refset measure --device cpu`) is
            # to be typed as it is: only the words around it are rewritten
            parts = text.split("`")
            parts[::2] = [flag.sub(spell, p) for p in parts[::2]]
            return "`".join(parts)

        @functools.wraps(func)
        def call(*args, **kwargs):
            # a misspelt or missing argument: one line (with the closest names), not the
            # TypeError of the call; a function taking **options checks its own
            for key in kwargs if not open_ended else ():
                if key not in signature.parameters:
                    raise UnknownNameError(f"option of {who}", key, own)
            try:
                signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise HwnasError(f"{who}: {exc}") from None
            try:
                return func(*args, **kwargs)
            except HwnasError as exc:
                if exc.args and isinstance(exc.args[0], str) and "--" in exc.args[0]:
                    exc.args = (python_terms(exc.args[0]), *exc.args[1:])
                raise

        return call

    return wrap
