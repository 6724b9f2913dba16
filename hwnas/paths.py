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


# -- files written whole or not at all ------------------------------------------------------------
# Every file and folder hwnas writes for others to read (run folder, zoo, caches, artifacts) is
# written under a hidden temporary name in the same folder and renamed into place, so a reader,
# a worker writing the same folder, a full disk or a kill never sees or leaves a half-written one.
# A kill (SIGKILL, power cut) still leaves the temporary: its name carries the host and the
# process id, and the next writer of that folder removes those of processes gone from this host.


def temporary(path: str | Path, suffix: str = "tmp") -> Path:
    """A hidden sibling of ``path`` to write first and rename over it:
    ``.<name>.<host>.<pid>.<suffix>`` (``suffix``: ``tmp`` or ``old``, optionally with an
    extension a writer needs, ``tmp.so``; see :func:`sweep_temporaries`)."""
    import socket

    path = Path(path)
    host = socket.gethostname().split(".")[0].replace(".", "-") or "host"
    return path.with_name(f".{path.name}.{host}.{os.getpid()}.{suffix}")


def sweep_temporaries(folder: str | Path) -> list[Path]:
    """Remove the temporaries (:func:`temporary`) that processes of this host which no longer
    run left in ``folder`` (killed while writing). Those of live processes, and of other hosts
    sharing the folder, are left alone.

    Returns:
        What was removed.
    """
    import re
    import shutil
    import socket

    host = socket.gethostname().split(".")[0].replace(".", "-") or "host"
    pattern = re.compile(rf"^\..+\.{re.escape(host)}\.(\d+)\.(?:tmp|old)(?:\.\w+)?$")
    removed = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None or _running(int(m.group(1))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
        removed.append(entry)
    return removed


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (a temporary renamed into place; removed
    if the write fails, e.g. on a full disk).

    Raises:
        OSError: the file could not be written (``path`` is then unchanged).
    """
    path = Path(path)
    tmp = temporary(path)
    try:
        if isinstance(data, str):
            tmp.write_text(data)
        else:
            tmp.write_bytes(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
