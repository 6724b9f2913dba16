"""Errors that describe a user's mistake or an unreachable resource.

The CLI prints a :class:`HwnasError` as one line and exits with :data:`EXIT_USAGE` (2); any
other exception is a bug in hwnas and keeps its traceback.
"""

EXIT_USAGE = 2


class HwnasError(Exception):
    """A problem the user can fix (bad input, missing data, unreachable device).

    The message is one line that names the problem and, where possible, what to do.
    """


class UnknownNameError(HwnasError, KeyError):
    """A name that is not in a registry (device, space, strategy, dataset...); the message
    offers the closest known names (``difflib``) and lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str]):
        import difflib

        shown = ", ".join(sorted(known)[:40])
        more = "" if len(known) <= 40 else f", ... ({len(known)} in all)"
        close = difflib.get_close_matches(str(name), [str(k) for k in known], n=3, cutoff=0.6)
        hint = f" did you mean {' or '.join(close)}?" if close else ""
        super().__init__(f"unknown {kind} '{name}';{hint} known: {shown}{more}")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class DeviceUnavailableError(HwnasError):
    """A device exists but cannot take measurements now (not connected, no toolchain...)."""


class CandidateError(HwnasError):
    """One candidate architecture cannot be measured (too noisy, rejected or crashed the
    compiler); a search records it as a failed trial and goes on with the next one."""


class NativeCrashError(CandidateError):
    """A native library crashed (a signal such as SIGSEGV) or hung in an isolated step
    (:func:`hwnas.isolate.run_isolated`); the message names the library versions."""
