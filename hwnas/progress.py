"""Progress of a job's long steps, reported without knowing where it is shown.

A job (a search, a cost model, a zoo export, supernet training) takes a :class:`Reporter` and
opens one :class:`Step` per stage that can last more than a couple of seconds; the command line
shows them (:mod:`hwnas.cli.progress`: a live bar on a terminal, plain log lines in a file or a
pipe), a library caller may pass its own reporter, and the default :data:`SILENT` drops them.
"""

from __future__ import annotations

import math
import time
from typing import Any


class Step:
    """One stage of a job: ``done`` of ``total`` units (``total`` None when unknown), with a
    free-form status (the best accuracy so far, the candidate being measured...). Use as a
    context manager; :meth:`advance` / :meth:`update` as work is done."""

    def __init__(self, reporter: Reporter, name: str, total: int | None, unit: str):
        self.reporter = reporter
        self.name = name
        self.total = total
        self.unit = unit
        self.done = 0
        self.status = ""
        self.started = time.monotonic()
        self.closed = False
        self.stopped = False  # left by an exception: not done
        self._history: list[tuple[int, float]] = []  # (units done, seconds elapsed) per change

    def advance(self, n: int = 1, status: str | None = None) -> None:
        """``n`` more units done."""
        self.update(self.done + n, status)

    def update(self, done: int | None = None, status: str | None = None) -> None:
        """Set the units done and/or the status."""
        if done is not None:
            if done != self.done:
                self._history.append((done, self.elapsed))
                if len(self._history) > 4096:  # a long step: every other sample is enough
                    self._history = self._history[::2]
            self.done = done
        if status is not None:
            self.status = status
        self.reporter.changed(self)

    def close(self) -> None:
        """The stage is over (called on leaving the ``with`` block)."""
        if not self.closed:
            self.closed = True
            self.reporter.closed(self)

    @property
    def elapsed(self) -> float:
        """Seconds since the step started."""
        return time.monotonic() - self.started

    def eta(self) -> float | None:
        """Seconds left (None until a unit is done or without a total).

        A step whose units grow dearer as it goes (a surrogate-driven search refits its model on
        every result so far: the 1,500th trial costs many times the 100th) would be promised far
        too soon at its mean rate so far: the elapsed time is taken to grow as ``done ** p``,
        ``p`` measured between half the units done and now and kept within [1, 3] (a step whose
        units grow cheaper is given its mean rate)."""
        if not self.total or self.done <= 0:
            return None
        elapsed, done = self.elapsed, self.done
        power = 1.0
        half = [(d, e) for d, e in self._history if 2 <= d <= done / 2 and e > 0]
        if done >= 8 and half and elapsed > half[-1][1]:
            d0, e0 = half[-1]
            power = min(3.0, max(1.0, math.log(elapsed / e0) / math.log(done / d0)))
        return elapsed * (max(self.total, done) / done) ** power - elapsed

    def __enter__(self) -> Step:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.stopped = exc_type is not None
        self.close()


class Reporter:
    """Where a job's steps and notes go; this base class shows nothing."""

    def step(self, name: str, total: int | None = None, unit: str = "") -> Step:
        """Open a step called ``name`` of ``total`` ``unit``s (e.g. 300 "trials")."""
        step = Step(self, name, total, unit)
        self.opened(step)
        return step

    def note(self, message: str) -> None:
        """A one-off line (what was decided, where files went)."""

    def opened(self, step: Step) -> None:
        """``step`` started."""

    def changed(self, step: Step) -> None:
        """``step`` advanced or its status changed."""

    def closed(self, step: Step) -> None:
        """``step`` ended."""


SILENT = Reporter()
"""The reporter that shows nothing (the default of every job)."""
