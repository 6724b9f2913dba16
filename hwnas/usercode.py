"""The user's Python files: ``--space file.py:space`` and ``--accuracy file.py:fn``.

A name of the form ``path/to/file.py:attribute`` names an object in the user's own Python file.
The file is imported (once per process, under a module name derived from its resolved path), so
it runs with the user's rights: hwnas imports only files the user names on the command line or
in a Python call, never a file named by a run folder, a card, a study or a data folder
(``docs/security.md``).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from hwnas.errors import HwnasError, UnknownNameError

CODE = re.compile(r"^(?P<file>.+\.py):(?P<attr>[A-Za-z_][A-Za-z0-9_]*)\Z")
"""``path/to/file.py:attribute``: an object of the user's Python file."""


def import_file(file: str | Path) -> ModuleType:
    """The user's Python file ``file`` as a module, imported once per process, with the
    global random generators seeded (0) while it runs.

    The file runs as ``python FILE`` would run it, ``sys.argv`` being ``[FILE]`` while it
    does (a module-level argparse ``parse_args()`` reads none of hwnas's options).

    Raises:
        HwnasError: no such file, or importing it failed (one line: the exception's type and
            first line), or it called ``sys.exit`` (or argparse did, on its own command line)
            or raised KeyboardInterrupt itself.
        KeyboardInterrupt: Ctrl-C while it was imported.
    """
    import hashlib
    import importlib.util

    path = Path(file).expanduser()
    if not path.is_file():
        raise HwnasError(f"Python file not found: {path}")
    module_name = f"hwnas_user_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}"
    module = sys.modules.get(module_name)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise HwnasError(f"{path}: not a Python file hwnas can import")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    folder = str(path.resolve().parent)
    if folder not in sys.path:  # as `python file.py` does: it may import files beside it
        sys.path.append(folder)
    try:
        # imported with torch's, NumPy's and Python's generators seeded: a model the file
        # builds without a seed of its own has the same weights in every process, so that a
        # study that knows the model by its weights resumes (hwnas.spaces.SearchSpace.
        # fingerprint); the generators are as they were afterwards
        from hwnas.engine.seeding import seeded_globals

        with seeded_globals(0), _as_script(path):
            spec.loader.exec_module(module)
    except HwnasError as exc:
        del sys.modules[module_name]
        raise HwnasError(f"{path}: {exc}") from None
    except _Exited as exc:
        del sys.modules[module_name]
        raise HwnasError(f"importing {path} {exc}") from None
    except Exception as exc:  # the user's code: any error, in one line
        del sys.modules[module_name]
        first = (str(exc).strip().splitlines() or [""])[0]
        raise HwnasError(f"{path}: importing it failed: {type(exc).__name__}: {first}") from None
    return module


class _Exited(Exception):
    """The user's code called ``sys.exit`` (or argparse did for it), or raised
    KeyboardInterrupt itself: what it did ("called sys.exit(3): ..."), for the one-line
    error."""


_NOT_ON_IMPORT = (
    "hwnas imports the file (or calls the function) for the object it names, so code that "
    "parses a command line or exits must not run then: put it under "
    '`if __name__ == "__main__":`'
)


@contextmanager
def _as_script(path: Path | None) -> Iterator[None]:
    """Within: the user's code runs as ``python FILE`` would run it (``sys.argv`` is
    ``[FILE]``, not hwnas's command line, so a module-level argparse ``parse_args()`` reads no
    hwnas option); its ``sys.exit`` (or argparse's, its usage message printed) and a
    KeyboardInterrupt it raises itself become :class:`_Exited`, never ending hwnas silently
    nor passing for Ctrl-C. A real Ctrl-C (SIGINT while it runs) stays KeyboardInterrupt.

    Raises:
        _Exited: as above.
    """
    import signal

    interrupted = False

    def on_sigint(signum, frame):
        nonlocal interrupted
        interrupted = True
        previous(signum, frame)  # Python's (KeyboardInterrupt), or whoever's handler it was

    argv = sys.argv
    if path is not None:
        sys.argv = [str(path)]
    previous = signal.getsignal(signal.SIGINT)
    watching = callable(previous)  # SIG_IGN, SIG_DFL: no Ctrl-C raises KeyboardInterrupt
    if watching:
        try:
            signal.signal(signal.SIGINT, on_sigint)
        except ValueError:  # not the main thread: every KeyboardInterrupt is taken for Ctrl-C
            interrupted, watching = True, False
    try:
        yield
    except SystemExit as exc:
        code = "" if exc.code is None else repr(exc.code)
        if _from_argparse(exc):
            raise _Exited(
                f"called sys.exit({code}) in argparse's parse_args (its message above): "
                f"{_NOT_ON_IMPORT}"
            ) from None
        raise _Exited(f"called sys.exit({code}): {_NOT_ON_IMPORT}") from None
    except KeyboardInterrupt:
        if interrupted:
            raise
        raise _Exited(
            "raised KeyboardInterrupt itself (no Ctrl-C was pressed): hwnas takes it for "
            "Ctrl-C, so the code it runs must not raise it"
        ) from None
    finally:
        if path is not None:
            sys.argv = argv
        if watching and signal.getsignal(signal.SIGINT) is on_sigint:
            signal.signal(signal.SIGINT, previous)


def _from_argparse(exc: BaseException) -> bool:
    """Whether ``exc`` was raised inside the argparse module."""
    import argparse

    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == argparse.__file__:
            return True
        tb = tb.tb_next
    return False


def call_user(fn: Any, what: str, *args: Any) -> Any:
    """``fn(*args)``, the user's code, with any error in one line naming ``what``.

    Raises:
        HwnasError: ``fn`` raised (its type and first line), called ``sys.exit`` or raised
            KeyboardInterrupt itself.
        KeyboardInterrupt: Ctrl-C while it ran.
    """
    try:
        with _as_script(None):
            return fn(*args)
    except HwnasError:
        raise
    except _Exited as exc:
        raise HwnasError(f"{what} {exc}") from None
    except Exception as exc:  # the user's code: any error, in one line
        first = (str(exc).strip().splitlines() or [""])[0]
        raise HwnasError(f"{what} failed: {type(exc).__name__}: {first}") from None


def code_object(text: str) -> Any:
    """The object ``text`` (``path/to/file.py:attribute``) names.

    Raises:
        HwnasError: ``text`` is not of that form, or the file cannot be imported.
        UnknownNameError: the file has no such attribute (with a did-you-mean).
    """
    match = CODE.match(text)
    if match is None:
        raise HwnasError(f"'{text}' is not of the form path/to/file.py:name")
    module = import_file(match["file"])
    attr = match["attr"]
    if not hasattr(module, attr):
        names = [n for n in vars(module) if not n.startswith("_")]
        raise UnknownNameError(f"attribute of {Path(match['file']).expanduser()}", attr, names)
    return getattr(module, attr)
