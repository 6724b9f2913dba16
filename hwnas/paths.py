"""Where hwnas keeps user state: the measurement store, default studies and user profiles.

The home folder is ``HWNAS_HOME`` if set, else the platform's user data folder
(``~/.local/share/hwnas`` on Linux).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def hwnas_home() -> Path:
    """The hwnas home folder (not created here)."""
    env = os.environ.get("HWNAS_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("hwnas", appauthor=False))


def default_store_path() -> Path:
    """Default SQLite file of the measurement store."""
    return hwnas_home() / "measurements.db"


def default_storage_url() -> str:
    """Default Optuna storage URL: one SQLite file holding every study."""
    return f"sqlite:///{(hwnas_home() / 'studies.db').resolve()}"


MAX_NAME_CHARS = 200
"""Longest name accepted as one path component (file systems allow 255 bytes; a name is
often part of a longer file name: ``<name>.lock``, ``<name>.yaml``)."""


def safe_name(name: object, what: str) -> str:
    """``name`` if it can be used as one path component: a device, study, space, predictor
    or zoo entry name that becomes a folder or file name.

    Refused: an empty name, ``.`` and ``..``, a path separator (``/`` or ``\\``), a control
    character (NUL, tab, newline...), or more than :data:`MAX_NAME_CHARS` characters. Spaces,
    dots and any other printable character are kept.

    Args:
        name: the user's string.
        what: how the user knows it, for the message ("device name", "--study").

    Raises:
        HwnasError: one line naming ``what`` and the reason.
    """
    from hwnas.errors import HwnasError

    text = name if isinstance(name, str) else str(name)
    shown = repr(text[:60] + ("..." if len(text) > 60 else ""))
    if not text.strip():
        why = "is empty"
    elif text in (".", ".."):
        why = "names a folder, not a file"
    elif "/" in text or "\\" in text:
        why = "contains a path separator"
    elif any(ord(c) < 32 or ord(c) == 127 for c in text):
        why = "contains a control character"
    elif len(text) > MAX_NAME_CHARS:
        why = f"is longer than {MAX_NAME_CHARS} characters"
    else:
        return text
    raise HwnasError(f"{what} {shown} {why}: it must be usable as one file or folder name")


def confined(base: str | Path, *names: str, what: str = "name") -> Path:
    """``base / names[0] / names[1] ...``, each name checked by :func:`safe_name`, and the
    result checked to stay inside ``base`` once symbolic links are resolved.

    Raises:
        HwnasError: a name that is not one path component, or a path that leads out of
            ``base`` (through a link).
    """
    from hwnas.errors import HwnasError

    base = Path(base)
    path = base.joinpath(*(safe_name(n, what) for n in names))
    root = base.resolve()
    if not path.resolve().is_relative_to(root):
        raise HwnasError(f"{what} {'/'.join(names)!r} leads out of {base} (a symbolic link)")
    return path


ZOO_MIN_FREE_MB = 50
"""Free space a run folder needs before a search starts: a zoo of 20 NAS-Bench-201 or FBNet
models with cards takes 1-30 MB, a supernet checkpoint a few MB more."""


def check_writable(path: str | Path, what: str, min_free_mb: float = 0.0) -> None:
    """Check, before any work, that the folder ``path`` can be created (if missing) and
    written, with ``min_free_mb`` MiB free on its disk; creates nothing that stays.

    Args:
        path: the folder.
        what: how the user named it, for the message ("--out", "HWNAS_HOME").
        min_free_mb: free space needed, in MiB.

    Raises:
        HwnasError: one line naming the folder and the reason.
    """
    import shutil
    import tempfile

    from hwnas.errors import HwnasError

    folder = Path(path).expanduser()
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise HwnasError(f"{what} {folder} cannot be created: {existing} is a file")
    try:
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".hwnas-write-check-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise HwnasError(f"{what} {folder} is not writable: {exc.strerror or exc}") from None
    free = shutil.disk_usage(existing).free / 2**20
    if free < min_free_mb:
        raise HwnasError(
            f"{what} {folder}: only {free:.0f} MiB free on its disk, {min_free_mb:.0f} MiB needed"
        )


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created with its folder if missing), held for the
    ``with`` block; the system releases it when the holder exits, even if killed. Processes on
    one machine only."""
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
