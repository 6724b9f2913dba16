"""The command line's :class:`hwnas.progress.Reporter`: a live progress bar on a terminal, and
plain, complete log lines when output goes to a file or a pipe (a live bar there is cut to the
pipe's width and mangled: ``search cpu ━━ 1… 0:… ETA 0…``).

Plain lines are printed when a step starts, then at every tenth of its total or after
:data:`PLAIN_EVERY_S` seconds without a line, whichever comes first, and when it ends; they
hold only printable ASCII and are never cut.
"""

from __future__ import annotations

import threading
import time

from hwnas.cli.render import Console
from hwnas.progress import Reporter, Step

PLAIN_EVERY_S = 5.0
"""Longest silence (s) of a running step in plain-line mode (half of the 10 s a user should
ever wait without a line, so a tick that comes late on a loaded machine still stays under it)."""


def clock(seconds: float | None) -> str:
    """``h:mm:ss`` (``-:--:--`` when unknown)."""
    if seconds is None:
        return "-:--:--"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


def plain_line(step: Step, final: bool = False) -> str:
    """One log line for ``step``: name, count, share, elapsed, ETA and status."""
    count = f"{step.done}/{step.total}" if step.total else str(step.done)
    unit = f" {step.unit}" if step.unit else ""
    share = f" ({100 * step.done / step.total:.0f}%)" if step.total else ""
    ended = "stopped after" if step.stopped else "done in"
    when = (
        f"{ended} {clock(step.elapsed)}"
        if final
        else (f"elapsed {clock(step.elapsed)} ETA {clock(step.eta())}")
    )
    status = f" | {step.status}" if step.status else ""
    line = f"{step.name}: {count}{unit}{share}, {when}{status}"
    return "".join(c if 32 <= ord(c) < 127 else "?" for c in line)


class TerminalReporter(Reporter):
    """Steps as a rich progress bar on a terminal, as plain lines otherwise.

    Args:
        console: where to show them (usually stderr, so stdout can hold ``--json``).
    """

    def __init__(self, console: Console):
        self.console = console
        self.live = console.is_terminal
        self._bars: dict[int, tuple[object, int]] = {}
        self._progress: object | None = None
        self._last: dict[int, tuple[float, int]] = {}
        self._open: dict[int, Step] = {}
        self._lock = threading.Lock()
        self._ticker: threading.Thread | None = None

    def note(self, message: str) -> None:
        self.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def opened(self, step: Step) -> None:
        if self.live:
            # one live display for every open step (rich allows one at a time): a step opened
            # inside another (few-shot calibration within a search) is a second row of it
            if not self._bars:
                from rich.progress import (
                    BarColumn,
                    MofNCompleteColumn,
                    Progress,
                    TextColumn,
                    TimeElapsedColumn,
                )

                self._progress = Progress(
                    TextColumn("{task.description}", markup=False),
                    BarColumn(),
                    MofNCompleteColumn(),
                    TimeElapsedColumn(),
                    TextColumn("ETA"),
                    TextColumn("{task.fields[eta]}", markup=False),  # Step.eta: dearer units
                    TextColumn("{task.fields[status]}", markup=False),
                    console=self.console,
                    transient=False,
                )
                self._progress.start()
            bar = self._progress
            task = bar.add_task(step.name, total=step.total, status="", eta=clock(None))
            self._bars[id(step)] = (bar, task)
            return
        with self._lock:
            self._open[id(step)] = step
            if self._ticker is None or not self._ticker.is_alive():
                self._ticker = threading.Thread(target=self._tick, daemon=True)
                self._ticker.start()
        self._emit(step)

    def _tick(self) -> None:
        """Plain-line mode: a line for every step silent for :data:`PLAIN_EVERY_S` (a step whose
        one unit takes long, such as measuring a candidate, still shows it is alive)."""
        while True:
            time.sleep(min(1.0, PLAIN_EVERY_S / 2))
            with self._lock:
                steps = list(self._open.values())
                if not steps:
                    self._ticker = None
                    return
            for step in steps:
                if time.monotonic() - self._last.get(id(step), (0.0, -1))[0] >= PLAIN_EVERY_S:
                    self._emit(step)

    def changed(self, step: Step) -> None:
        if self.live:
            bar, task = self._bars[id(step)]
            bar.update(task, completed=step.done, status=step.status,  # type: ignore[attr-defined]
                       eta=clock(step.eta()))  # fmt: skip
            return
        last_t, last_tenth = self._last.get(id(step), (0.0, -1))
        tenth = int(10 * step.done / step.total) if step.total else -1
        if tenth > last_tenth or time.monotonic() - last_t >= PLAIN_EVERY_S:
            self._emit(step)

    def closed(self, step: Step) -> None:
        if self.live:
            bar, task = self._bars.pop(id(step))
            bar.update(task, completed=step.done, status=step.status)  # type: ignore[attr-defined]
            if not self._bars:
                bar.stop()  # type: ignore[attr-defined]
        else:
            with self._lock:
                self._open.pop(id(step), None)
            self.console.print(plain_line(step, final=True), markup=False, highlight=False,
                               soft_wrap=True)  # fmt: skip
            self._last.pop(id(step), None)

    def _emit(self, step: Step) -> None:
        self.console.print(plain_line(step), markup=False, highlight=False, soft_wrap=True)
        tenth = int(10 * step.done / step.total) if step.total else -1
        self._last[id(step)] = (time.monotonic(), tenth)
