"""Several workers of one supernet search train the supernet once.

Workers of a supernet search (the same ``hwnas search --strategy ...`` command on the same
``--study`` and ``--storage``) share the study as table workers do: the engine hands each
candidate to one worker (:mod:`hwnas.engine.workers`). Training the supernet is the long part,
and its result, the checkpoint, is the same for every worker (same settings, same seed), so
one worker trains it and the others wait:

- Training (with the cost model it needs) is done under the study's *training lock*
  (:func:`hwnas.engine.workers.study_lock` on the name ``<study>:supernet``: a file lock beside
  a SQLite database, a PostgreSQL advisory lock otherwise). The first worker to take it trains,
  writing ``supernet.pt`` in its run folder after every epoch, and when done records the final
  checkpoint in the study (user attribute ``supernet_checkpoint``: path, host, sha256).
- A worker that takes the lock after it finds that record; when the file is readable here (the
  same machine, or a run folder on a shared file system) and its sha256 matches, it copies it
  into its own run folder and resumes from it at the last epoch: it trains nothing. It then
  derives the candidates from the same weights and scores its share of them.
- A trainer that dies releases the lock (the system drops a dead process's file lock; the
  server a dead connection's advisory lock), and the next worker resumes from the last epoch
  checkpoint it can read, or trains.

Where the checkpoint cannot be read (workers on machines without a shared run folder) each
machine trains once, one after another; ``docs/robustness.md`` says so.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwnas.paths import sha256_file

WAIT_NOTE_S = 2.0
"""Seconds of waiting for the training lock before a worker says what it waits for."""

RECORD = "supernet_checkpoint"
"""The study's user attribute naming the final checkpoint: one per set of training settings
(``supernet_checkpoint:<fingerprint digest>``), so that workers with their own seeds each find
the supernet of theirs (one attribute for all made a seed-0 worker train again after a seed-1
one had recorded its own). A study made before keeps its record under the bare name."""


class TrainingTurn:
    """This worker's turn at training the supernet of a study (see the module docstring).

    Take it with :meth:`take` before reading the checkpoint, end it with :meth:`done` once the
    last epoch's checkpoint is written; a turn not ended (an error, Ctrl-C) is given back when
    the object goes away or the process exits.

    Args:
        study: the Optuna study (in the shared storage).
        lock: the entered training lock (an exit stack holding it).
        fingerprint: the settings the checkpoint must match.
    """

    def __init__(self, study: Any, lock: contextlib.ExitStack | None, fingerprint: str):
        self.study = study
        self._lock = lock
        self.fingerprint = hashlib.sha256(fingerprint.encode()).hexdigest()

    @classmethod
    def take(
        cls,
        study: Any,
        ckpt: Path,
        fingerprint: str,
        epochs: int,
        log: Callable[[str], None],
        main: bool = True,
    ) -> TrainingTurn:
        """Wait for the training lock; copy in a final checkpoint another worker recorded.

        Args:
            study: the Optuna study of the search (created if new).
            ckpt: this worker's checkpoint path (``<run folder>/supernet.pt``).
            fingerprint: the settings a checkpoint is trained for (its ``fingerprint``).
            epochs: the epochs a final checkpoint has.
            log: progress lines.
            main: whether this process writes (rank 0 under torchrun; the others take no
                lock and get rank 0's checkpoint from it).
        """
        if not main:
            return cls(study, None, fingerprint)
        from hwnas.engine.ledger import storage_of
        from hwnas.engine.workers import study_lock

        stack = contextlib.ExitStack()
        note = threading.Timer(
            WAIT_NOTE_S,
            lambda: log(
                f"another worker is training the supernet of study '{study.study_name}'; "
                "waiting for its checkpoint"
            ),
        )
        note.daemon = True
        note.start()
        try:
            stack.enter_context(
                study_lock(storage_of(study), f"{study.study_name}:supernet", long=True)
            )
        finally:
            note.cancel()
        turn = cls(study, stack, fingerprint)
        try:
            turn._reuse(ckpt, epochs, log)
        except BaseException:
            turn.release()
            raise
        return turn

    def _reuse(self, ckpt: Path, epochs: int, log: Callable[[str], None]) -> None:
        """Copy the recorded final checkpoint of another worker into ``ckpt`` when it is for
        these settings, readable here and intact."""
        from hwnas.paths import temporary

        attrs = self.study.user_attrs
        record = attrs.get(self.record_key) or attrs.get(RECORD) or {}
        if record.get("fingerprint") != self.fingerprint or record.get("epochs") != epochs:
            return
        theirs = Path(str(record.get("path", "")))
        if theirs == ckpt.resolve():
            return  # this run folder's own checkpoint: resumed as usual
        where = f"{record.get('host', '?')}:{theirs}"
        if not theirs.is_file() or sha256_file(theirs) != record.get("sha256"):
            log(f"the supernet trained by another worker ({where}) is not readable here: training")
            return
        tmp = temporary(ckpt)
        try:
            shutil.copyfile(theirs, tmp)
            tmp.replace(ckpt)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        log(f"using the supernet another worker trained ({where})")

    def done(self, ckpt: Path, epochs: int) -> None:
        """Record ``ckpt`` (written after the last of ``epochs``) in the study and give the
        lock back: waiting workers read it instead of training."""
        if self._lock is None:
            return
        try:
            if ckpt.is_file():
                self.study.set_user_attr(
                    self.record_key,
                    {
                        "path": str(ckpt.resolve()),
                        "host": socket.gethostname(),
                        "sha256": sha256_file(ckpt),
                        "fingerprint": self.fingerprint,
                        "epochs": epochs,
                    },
                )
        finally:
            self.release()

    @property
    def record_key(self) -> str:
        """The study attribute recording the final checkpoint of these settings."""
        return f"{RECORD}:{self.fingerprint[:16]}"

    def release(self) -> None:
        """Give the training lock back (idempotent)."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.close()

    def __del__(self) -> None:
        self.release()
