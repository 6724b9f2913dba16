"""The ``hwnas`` command line: one module per command group, heavy imports inside commands.

Any :class:`hwnas.errors.HwnasError` becomes one line on stderr and its exit status (2 for a
mistake in the input; 1 for a run stopped part-way through no fault of its input: a lost
training process or database connection).
"""

from __future__ import annotations

import io
import os
import sys
import traceback
from typing import Any

import click

from hwnas import __version__
from hwnas.errors import (
    EXIT_FAILED,
    EXIT_USAGE,
    HwnasError,
    ProcessError,
    out_of_memory,
    out_of_space,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="hwnas")
def app() -> None:
    """Hardware-aware neural architecture search: accuracy/latency Pareto fronts for real
    devices, as Optuna studies, run folders and ONNX model zoos."""


def _register() -> None:
    from hwnas.cli import (
        arch,
        dashboard,
        devices,
        measure,
        measure_import,  # noqa: F401 - adds `import` to the measure group
        predict,
        predictor,
        predictor_kernels,  # noqa: F401 - adds `kernels` to the predictor group
        refset,
        runs,
        search,
        spaces,
        train,
        zoo,
    )

    app.add_command(search.search_cmd)
    app.add_command(measure.measure_group)
    app.add_command(arch.arch_cmd)
    app.add_command(devices.devices_cmd)
    app.add_command(spaces.spaces_cmd)
    app.add_command(dashboard.dashboard_cmd)
    app.add_command(predictor.predictor_group)
    app.add_command(predict.predict_cmd)
    app.add_command(refset.refset_group)
    app.add_command(train.train_cmd)
    app.add_command(zoo.zoo_group)
    app.add_command(runs.runs_group)


_register()


class PipeSafe:
    """Standard output that a reader who stopped reading (``hwnas search ... | head``) cannot
    break: after the first ``BrokenPipeError`` the rest is discarded (the descriptor is
    pointed at ``os.devnull``, so the interpreter's own flush at exit is quiet too), and the
    command goes on to write its run folder, summary and study."""

    def __init__(self, stream: Any):
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        self.reader_gone = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
            pass  # not a file descriptor (a test's capture): nothing is flushed to it at exit

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``hwnas`` script; returns the exit status.

    Every message goes through :func:`hwnas.db.scrub`: no password of a URL given to this
    process is printed, even where a library quotes it; every error line through
    :func:`hwnas.cli.render.one_line`: no control character of a file is printed raw, and a
    name holding a line break cannot split the error line.
    Standard output is :class:`PipeSafe` while the command runs. SIGTERM (``kill``,
    ``timeout``, a batch scheduler's preemption, ``docker stop``) stops a command as Ctrl-C
    does: the running trial told, "interrupted: ..." said, exit 130
    (:func:`hwnas.distributed.interrupt_on_sigterm`; a supernet search under torchrun ignores
    it while it says its error); the SIGTERM handler found is back when it returns."""
    import signal

    from hwnas.distributed import interrupt_on_sigterm

    stdout, sigterm = sys.stdout, signal.getsignal(signal.SIGTERM)
    if not isinstance(stdout, PipeSafe):
        sys.stdout = PipeSafe(stdout)
    try:
        with interrupt_on_sigterm():  # the main thread's only: elsewhere SIGTERM is its owner's
            return _main(argv)
    finally:
        sys.stdout = stdout
        if sigterm is not None and signal.getsignal(signal.SIGTERM) is not sigterm:
            signal.signal(signal.SIGTERM, sigterm)


def _quiet_rank(exc: Exception, argv: list[str] | None) -> bool:
    """Whether this process leaves ``exc`` unsaid: ``hwnas search`` under torchrun, where every
    process of a machine parses the same command line, and only its first (``LOCAL_RANK`` 0)
    says what is wrong with it, once per machine; a :class:`~hwnas.errors.ProcessError` is said
    by the process that has it. Any other command says its errors, whatever the environment (a
    command run by a torchrun worker, or on a SLURM or Kubeflow node, inherits ``WORLD_SIZE``
    and ``LOCAL_RANK``)."""
    if "WORLD_SIZE" not in os.environ or isinstance(exc, ProcessError):
        return False
    if _command_path(argv) != "hwnas search":
        return False
    try:
        return int(os.environ.get("LOCAL_RANK", "0")) > 0
    except ValueError:
        return False


def _command_path(argv: list[str] | None) -> str:
    """The command ``argv`` names ("hwnas predictor train"), for a usage error that click
    raised without its context (an option missing its value is found before the command's
    context exists)."""
    words = ["hwnas"]
    command: Any = app
    for token in sys.argv[1:] if argv is None else argv:
        sub = command.commands.get(token) if isinstance(command, click.Group) else None
        if sub is None:
            if token.startswith("-"):
                continue  # a group's own option (its value, if any, is not a command name)
            break
        words.append(token)
        command = sub
    return " ".join(words)


def _repeat_hint(exc: click.UsageError, argv: list[str] | None) -> str:
    """What to do when values of a repeatable option were given after one flag
    (``--onnx a.onnx b.onnx``, or a shell glob ``--onnx *.onnx``): click reports the second
    value as an extra argument, or, under a group such as ``hwnas measure``, as an unknown
    command. Returns "" when that is not what happened."""
    import re

    found = re.search(r"unexpected extra arguments? \((.+)\)|No such command '(.+)'",
                      exc.format_message())  # fmt: skip
    if found is None or exc.ctx is None:
        return ""
    stray = (found.group(1) or found.group(2)).split()[0]
    tokens = list(sys.argv[1:] if argv is None else argv)
    if stray not in tokens:
        return ""
    i = tokens.index(stray)
    j = i - 1
    while j >= 0 and not tokens[j].startswith("-"):
        j -= 1
    if j < 0:
        return ""
    flag, _, inline = tokens[j].partition("=")
    values = ([inline] if inline else []) + tokens[j + 1 : i + 1]
    if len(values) < 2:  # the option's one value, then at least one stray value
        return ""
    for param in exc.ctx.command.params:
        if isinstance(param, click.Option) and flag in param.opts and param.multiple:
            example = " ".join(f"{flag} {v}" for v in values[:2])
            return f": {flag} takes one value; repeat it for each ({example} ...)"
    return ""


_ARGV: list[str] = []
"""The arguments of the command this process runs (set by :func:`main`)."""


def command_line() -> str:
    """The command this process runs, as a shell would take it (``hwnas train runs/a/zoo
    --data digits``), for a message that says to run it again with an option added; ``hwnas
    ...`` where hwnas was not run from its command line."""
    import shlex

    return shlex.join(["hwnas", *_ARGV]) if _ARGV else "hwnas ..."


INTERRUPTED = {
    "search": "the study and measurements are saved; run the same command again to resume",
    "measure": "the measurements taken are in the store; run the same command again to go on",
    "refset": "the measurements taken are in the store; run the same command again to go on",
    "predict": "the kernels timed are in the store; run the same command again to go on",
    "": "run the same command again",
}
"""What Ctrl-C leaves, by command (``refset measure`` said "the study ... saved": it has
none)."""

MAX_ERROR_CHARS = 2000
"""An error line's most characters: a message quoting a 1 MB arch string or file value is
shown by its first 1,500 and last 500."""


def _main(argv: list[str] | None) -> int:
    from hwnas.cli.render import one_line
    from hwnas.db import scrub as _scrub
    from hwnas.db import secrets_seen

    def scrub(text: str) -> str:  # no password, no control character, one line
        line = one_line(_scrub(text))
        if len(line) > MAX_ERROR_CHARS:  # a value quoted from a file or argv: its ends tell
            cut = len(line) - MAX_ERROR_CHARS
            line = f"{line[:1500]} ... ({cut} characters left out) ... {line[-500:]}"
        return line

    _ARGV[:] = [str(a) for a in (sys.argv[1:] if argv is None else argv)]
    try:
        status = app.main(args=argv, prog_name="hwnas", standalone_mode=False)
    except HwnasError as exc:
        if _quiet_rank(exc, argv):
            return exc.exit_status
        click.echo(scrub(f"error: {exc}"), err=True)
        return exc.exit_status
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        command = next((a for a in _ARGV if not a.startswith("-")), "")
        click.echo(f"interrupted: {INTERRUPTED.get(command, INTERRUPTED[''])}", err=True)
        return 130
    except click.UsageError as exc:  # one line, like every other mistake
        if type(exc).__name__ == "NoArgsIsHelpError":  # `hwnas zoo`: the group's help
            exc.show()
            return exc.exit_code
        if _quiet_rank(exc, argv):
            return exc.exit_code
        command = exc.ctx.command_path if exc.ctx is not None else _command_path(argv)
        message = exc.format_message().rstrip(".") + _repeat_hint(exc, argv)
        click.echo(scrub(f"error: {message} ({command} --help)"), err=True)
        return exc.exit_code
    except click.ClickException as exc:
        shown = io.StringIO()
        exc.show(file=shown)
        sys.stderr.write(_scrub(shown.getvalue()))
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except Exception as exc:
        from hwnas.db import damaged_database, lost_connection

        lost = lost_connection(exc)  # a database server stopped or unreachable mid-command
        if lost is not None:  # no fault of the input: the same command resumes
            click.echo(scrub(f"error: {lost}"), err=True)
            return EXIT_FAILED
        full, damaged, memory = out_of_space(exc), damaged_database(exc), out_of_memory(exc)
        if full is None and damaged is None and memory is None:
            if not secrets_seen():  # a bug: its traceback, but never with a password in it
                raise
            sys.stderr.write(_scrub(traceback.format_exc()))
            return 1
        if memory is not None:
            click.echo(
                scrub(
                    f"error: {memory}: the network, input or batch is too large for this machine"
                ),  # fmt: skip
                err=True,
            )
            return EXIT_USAGE
        if full is not None:
            click.echo(
                scrub(
                    f"error: {full}; free some space and run the same command again (what was "
                    "done is kept: studies and measurements are written in transactions, files "
                    "whole)"
                ),
                err=True,
            )
        else:
            click.echo(scrub(f"error: {damaged}"), err=True)
        return EXIT_USAGE
    # a command's `ctx.exit(N)` (`hwnas zoo verify`: 1 when an entry fails) comes back as N
    return status if isinstance(status, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
