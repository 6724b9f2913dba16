"""Where hwnas keeps user state: the measurement store, default studies and user profiles.

The home folder is ``HWNAS_HOME`` if set, else the platform's user data folder
(``~/.local/share/hwnas`` on Linux).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hwnas.errors import HwnasError


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


def path_arg(what: str, value: Any, kind: str = "a path") -> Any:
    """``value`` if it is a string, an ``os.PathLike`` (``pathlib.Path``) or None: the Python
    API's path arguments checked where they come in, so that an ``int`` is one line rather
    than a ``TypeError`` from deep inside.

    Args:
        what: the argument as the caller knows it (``store``).
        value: what was given.
        kind: what it names, for the message ("a path or a URL").

    Raises:
        HwnasError: anything else, or an empty string (``out=""`` wrote the run into the
            current folder).
    """
    if isinstance(value, str) and not value.strip():
        raise HwnasError(f"{what} is empty: give {kind}")
    if value is None or isinstance(value, (str, os.PathLike)):
        return value
    raise HwnasError(f"{what} must be {kind} (a string or a pathlib.Path), got {value!r}")


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


_HELD: dict[str, list] = {}
"""Lock files this process holds: path -> [thread lock, depth, open file]."""
_HELD_GUARD = threading.Lock()


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created with its folder if missing), held for the
    ``with`` block; the system releases it when the holder exits, even if killed. Processes on
    one machine only.

    Re-entrant within a process: a thread that holds ``path`` may take it again (nested locks
    that share a file, such as :func:`hwnas.engine.workers.study_lock`'s buckets, never
    deadlock on themselves), and other threads of the process wait as other processes do.
    """
    import fcntl

    key = str(Path(path).absolute())
    with _HELD_GUARD:
        held = _HELD.setdefault(key, [threading.RLock(), 0, None])
    held[0].acquire()
    try:
        if held[1] == 0:
            Path(key).parent.mkdir(parents=True, exist_ok=True)
            fh = open(key, "a")  # noqa: SIM115 - kept open while held
            try:
                fcntl.flock(fh, fcntl.LOCK_EX)
            except BaseException:
                fh.close()
                raise
            held[2] = fh
        held[1] += 1
        try:
            yield
        finally:
            held[1] -= 1
            if held[1] == 0:
                fh, held[2] = held[2], None
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()
    finally:
        held[0].release()


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
    pattern = re.compile(rf"^\..+\.{re.escape(host)}\.(\d+)\.(?:tmp|old)(?:\.\w+)?\Z")
    removed = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None or process_running(int(m.group(1))):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                entry.unlink()
        removed.append(entry)
    return removed


def process_running(pid: int) -> bool:
    """Whether process ``pid`` of this host is still running (this process counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # no such pid (one beyond any pid's range)
        return False
    except PermissionError:
        return True
    return True


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to ``path`` whole or not at all (a temporary renamed into place; removed
    if the write fails, e.g. on a full disk). A link at ``path`` is replaced by the file, never
    written through (a folder handed over may hold ``calibration.csv -> ~/.bashrc``), and so
    is anything at the temporary's name (created anew, never opened as found).

    Raises:
        OSError: the file could not be written (``path`` is then unchanged).
    """
    path = Path(path)
    tmp = temporary(path)
    try:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()  # a link left there is removed, not followed
        # "x": created anew (O_CREAT | O_EXCL), so a link planted at the name is not followed
        with open(tmp, "x" if isinstance(data, str) else "xb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def plain_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file and not a link: what hwnas records or uploads from
    a run folder (a link in a folder handed over could name any file of the machine)."""
    p = Path(path)
    return p.is_file() and not p.is_symlink()


def plain_dir(path: str | Path) -> bool:
    """Whether ``path`` is a folder and not a link to one (see :func:`plain_file`)."""
    p = Path(path)
    return p.is_dir() and not p.is_symlink()


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


MAX_TEXT_FILE_BYTES = 64 * 2**20
"""Largest profile, space file, zoo card, ``summary.json`` or list of architectures read: far
above any real one (a few KB), far below what could exhaust memory."""


class NotReadableFile(OSError):
    """A path that is not a regular file (a device such as ``/dev/zero``, a pipe, a folder) or
    is larger than a file of its kind can be; an ``OSError``, so a reader's own handler names
    the file."""

    def __init__(self, message: str):
        super().__init__(message)
        self.strerror = message

    def __str__(self) -> str:
        return self.strerror


def read_bounded(path: str | Path, max_bytes: int = MAX_TEXT_FILE_BYTES) -> bytes:
    """The bytes of ``path``, a regular file of at most ``max_bytes``: a file handed to hwnas
    (a device profile, a zoo card) naming ``/dev/zero`` or a pipe would otherwise exhaust the
    memory or wait forever. Opened without blocking and checked on the open file, so a path
    swapped for a pipe after a check is refused too.

    Raises:
        NotReadableFile: not a regular file, or larger than ``max_bytes``.
        OSError: it cannot be read (``FileNotFoundError`` when missing).
    """
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # before fdopen, which names a folder by its descriptor
        os.close(fd)
        raise NotReadableFile(
            "a folder, not a file" if stat.S_ISDIR(st.st_mode) else "not a regular file"
        )
    with os.fdopen(fd, "rb") as fh:
        if st.st_size > max_bytes:
            raise NotReadableFile(_too_large(st.st_size, max_bytes))
        # the size it has, not max_bytes: read(n) reserves n bytes (256 MiB for a table)
        data = fh.read(min(st.st_size, max_bytes) + 1)
        if len(data) > st.st_size:  # grew since fstat: the rest, up to the bound
            data += fh.read(max_bytes + 1 - len(data))
    if len(data) > max_bytes:  # grew while read
        raise NotReadableFile(_too_large(len(data), max_bytes))
    return data


def _too_large(size: int, max_bytes: int) -> str:
    return f"{size / 2**20:.0f} MiB, more than the {max_bytes / 2**20:g} MiB such a file may have"


def read_bounded_text(path: str | Path, max_bytes: int = MAX_TEXT_FILE_BYTES) -> str:
    """:func:`read_bounded` decoded as UTF-8.

    Raises:
        NotReadableFile, OSError: as :func:`read_bounded`.
        UnicodeDecodeError: not UTF-8 text.
    """
    return read_bounded(path, max_bytes).decode("utf-8")
