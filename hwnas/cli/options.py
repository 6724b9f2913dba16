"""Options shared by several commands, declared once."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.limits import MAX_SEED


class Registered(click.ParamType):
    """A name registered in a registry (:class:`hwnas.registry.Registry`), checked when the
    command line is parsed: the choices (and the ``[a|b]`` in ``--help``) are whatever is
    registered then, so a runtime or strategy added by registration is accepted everywhere
    without editing a list here.

    Args:
        registry: ``"module:attribute"`` of the registry (imported when first needed).
    """

    def __init__(self, registry: str):
        self.registry = registry
        self.name = registry.rsplit(":", 1)[-1].lower()

    def _names(self) -> list[str]:
        from hwnas.registry import load

        return load(self.registry).names()

    def get_metavar(self, param, ctx=None) -> str:  # noqa: D102 (click's)
        return "[" + "|".join(self._names()) + "]"

    def convert(self, value, param, ctx):  # noqa: D102 (click's)
        from hwnas.registry import load

        registry = load(self.registry)
        if value in registry:
            return value
        from hwnas.errors import UnknownNameError

        self.fail(str(UnknownNameError(registry.kind, value, registry.names())), param, ctx)


class LiveHelp(click.Option):
    """An option whose help text is computed when ``--help`` shows it (from a registry: what
    is registered then), by ``help_from``, a ``"module:function"`` returning the text."""

    def __init__(self, *args, help_from: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.help_from = help_from

    def get_help_record(self, ctx):  # noqa: D102 (click's)
        from hwnas.registry import load

        self.help = load(self.help_from)()
        return super().get_help_record(ctx)


RUNTIME = Registered("hwnas.runtimes:RUNTIMES")
"""``--runtime``: a registered runtime (:data:`hwnas.runtimes.RUNTIMES`)."""


def default_of(settings_type: type, name: str):
    """The default of the field ``name`` of a settings dataclass (:class:`hwnas.engine.loop.
    SearchSettings`, :class:`hwnas.jobs.supernet.SupernetSettings`): the one source of an
    option's default, so ``--help``, a Python caller and the docs (``tests/test_defaults.py``)
    cannot drift apart.

    Raises:
        KeyError: the type has no such field, or it has no plain default.
    """
    import dataclasses

    for f in dataclasses.fields(settings_type):
        if f.name == name and f.default is not dataclasses.MISSING:
            return f.default
    raise KeyError(f"{settings_type.__name__}.{name} has no default")


def _store_value(_ctx, _param, value):
    """A database URL stays a string; anything else is a file path, but for a mistyped URL
    (:func:`hwnas.db.check_not_url`: one line, without its password)."""
    if value is None or "://" in value:
        return value
    from hwnas.db import check_not_url

    check_not_url(value, "measurement store")
    return Path(value)


store_option = click.option(
    "--store",
    default=None,
    metavar="PATH|URL",
    callback=_store_value,
    help="Measurement store: a SQLite file, or postgresql://USER@HOST:PORT/DB shared by "
    "workers on many machines (pip install 'hwnas[postgres]'). Default: measurements.db in "
    "the hwnas home ($HWNAS_HOME or the user data folder).",
)


def _space_value(ctx, param, value):
    """:func:`hwnas.spaces.space_option`, imported when the option is read (startup)."""
    from hwnas.spaces import space_option

    return space_option(ctx, param, value)


space_with_default_option = click.option(
    "--space",
    default="nasbench201",
    show_default=True,
    callback=_space_value,
    help="Search space (a name, or a space file's path).",
)
"""``--space``, NAS-Bench-201 unless given; a space file's path is loaded and checked when the
option is read, and becomes its space's name."""


def _dims_value(_ctx, _param, values) -> dict[str, int]:
    """``--dim NAME=SIZE`` values -> {NAME: SIZE}."""
    dims: dict[str, int] = {}
    for text in values:
        name, eq, size = text.partition("=")
        if not eq or not name.strip() or not size.strip().removeprefix("-").isdigit():
            raise click.BadParameter(f"'{text}' is not NAME=SIZE (sequence_length=128)")
        dims[name.strip()] = int(size)
    return dims


def dim_option(batch: str):
    """The ``--dim NAME=SIZE`` option; ``batch`` says what the command does with the batch
    axis (its help must not name an option the command lacks)."""
    return click.option(
        "--dim",
        "dims",
        multiple=True,
        metavar="NAME=SIZE",
        callback=_dims_value,
        help="Fix an ONNX model's dynamic input axis by its name (repeatable): "
        "--dim sequence_length=128 times a text model exported with a dynamic sequence at 128 "
        f"tokens; an axis without a name by INPUT:AXIS (--dim X:2=224). {batch}",
    )


def storage_url(ctx, param, value: str | None) -> str | None:
    """Click callback of ``--storage``: a URL that cannot be a study storage (see
    :func:`hwnas.engine.loop.check_storage_url`) is a one-line error as the command line is
    parsed, before ``--space`` imports a user's file."""
    if value is not None:
        from hwnas.engine.loop import check_storage_url

        check_storage_url(value)
    return value


storage_option = click.option(
    "--storage",
    default=None,
    callback=storage_url,
    metavar="URL",
    help="Optuna storage URL (any RDB URL, e.g. sqlite:///nas.db or postgresql://...). "
    "Default: studies.db in the hwnas home.",
)


artifact_option = click.option(
    "--artifact-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    metavar="DIR",
    help="Optuna artifact store (a folder) holding each run's pareto.png, cards and ONNX "
    "files, downloadable from the dashboard. Default: artifacts/ in the hwnas home.",
)


def device_name(ctx, param, value: str | None) -> str | None:
    """Click callback of ``--device``: an unknown name (or a broken profile of that name) is a
    one-line error when the command line is parsed. ``--device`` is eager, so this runs before
    ``--space``'s callback, which imports a ``file.py:NAME`` space (the user's code may train
    at import) and must not when the device is wrong."""
    if value is None:
        return None
    from hwnas.devices import get_device, profiles

    if value not in profiles():
        get_device(value)  # raises: unknown name (with the known ones) or broken profile
    return value


DEVICE = dict(is_eager=True, callback=device_name)
"""Keywords of every ``--device`` option naming a known device (:func:`device_name`)."""


def device_options(f):
    """Options that choose how a live device is reached and compiled for (``--runtime``,
    ``--tracker``, ``--key``, ``--target``, ``--trials``)."""
    options = [
        click.option(
            "--runtime",
            type=RUNTIME,
            default=None,
            help="Runtime replacing the device profile's (live devices).",
        ),
        click.option(
            "--tracker",
            default=None,
            metavar="HOST:PORT",
            help="TVM RPC tracker (rpc and android devices).",
        ),
        click.option("--key", default=None, help="TVM RPC device key (rpc and android devices)."),
        click.option(
            "--target",
            default=None,
            metavar="TARGET",
            help="TVM target: host, cuda, or a JSON target (default: the profile's, or host).",
        ),
        click.option(
            "--trials",
            type=click.IntRange(min=0),
            default=None,
            help="TVM MetaSchedule trials per new workload (0 = untuned; default: profile's).",
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


SEED = click.IntRange(0, MAX_SEED)
"""A seed: what NumPy, PyTorch and Optuna all accept (0 to 2**32 - 1)."""

PORT = click.IntRange(1, 65535)
"""A TCP port."""


def port_free(port: int, host: str = "127.0.0.1") -> None:
    """Refuse, before any work, a port another program listens on.

    Raises:
        HwnasError: one line naming the port.
    """
    import errno
    import socket

    from hwnas.errors import HwnasError

    with socket.socket() as s:
        # as the server binds: a port whose last connections wait out TIME_WAIT is free (a
        # dashboard stopped and started again within a minute was refused)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise HwnasError(
                    f"port {port} on {host} is in use by another program; give another --port"
                ) from None
            if exc.errno == errno.EACCES:
                raise HwnasError(
                    f"port {port} on {host} needs privileges this user lacks; give a port "
                    "above 1023"
                ) from None
            raise HwnasError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _imports_code(param: click.Parameter) -> bool:
    """Whether ``param`` is a ``--space`` whose callback may import a user's file."""
    from hwnas.spaces import space_option

    return getattr(param, "callback", None) is space_option


class _SpaceLastParser:
    """Click's parser, with ``--space`` moved after every other parameter the user typed in
    the order click processes them (:class:`SpaceLast`)."""

    def __init__(self, parser):
        self._parser = parser

    def parse_args(self, args):
        opts, rest, order = self._parser.parse_args(args=args)
        order = [p for p in order if not _imports_code(p)] + [p for p in order if _imports_code(p)]
        return opts, rest, order

    def __getattr__(self, name):
        return getattr(self._parser, name)


class _SpaceLastMixin:
    def __init__(self, *args, before_space=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.before_space = before_space

    def make_parser(self, ctx):  # noqa: D102 (click's)
        return _SpaceLastParser(super().make_parser(ctx))  # type: ignore[misc]


class SpaceLast(_SpaceLastMixin, click.Command):
    """A command whose ``--space`` is processed after its other options: a ``FILE.py:ATTR``
    space is imported there (the user's code runs, a model may train), so a bad value of any
    other option is refused first, in one line, with none of that work done (click processes
    options in the order they are typed). ``before_space`` (``click.command(cls=SpaceLast,
    before_space=check)``): ``check(ctx)`` runs just before the space is read, every other
    option typed already in ``ctx.params``, for the checks that combine options or read
    files (:func:`hwnas.spaces.space_option` calls it)."""


class SpaceLastGroup(_SpaceLastMixin, click.Group):
    """:class:`SpaceLast` for a group that takes ``--space`` itself (``hwnas measure``)."""


def checked(check):
    """A click callback running ``check(value)`` (a validator of :mod:`hwnas.limits` that
    raises :class:`~hwnas.errors.HwnasError`) as the command line is parsed, so that a bad
    value stops the command before a ``--space`` file is imported; None passes."""

    def callback(ctx, param, value):
        return value if value is None else check(value)

    return callback
