"""Search spaces by name or file.

A space is a folder ``search_spaces/<name>/space.yaml`` shipped with hwnas, a file
``$HWNAS_HOME/spaces/<name>.yaml`` (or ``<name>/space.yaml``) of the user, or any file given by
path (``--space path/to/space.yaml``). A file with an ``implementation`` key (shipped spaces only)
names a hand-written class; every other file is a space of the declarative language
(:mod:`hwnas.spaces.declared`).

A space written in Python (:mod:`hwnas.nn`, :func:`hwnas.elastic`; :mod:`hwnas.spaces.module`) is
named ``path/to/file.py:attribute`` (the file is imported: it is the user's own code) or handed
over as the object and registered (:func:`register_space`); either way it is then found by its
name for the rest of the process.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from hwnas.assets import asset_path, read_yaml
from hwnas.errors import HwnasError, UnknownNameError
from hwnas.registry import load
from hwnas.spaces.base import (
    Arch,
    CostTermsSpace,
    DatasetSpec,
    IndexedSpace,
    InheritedSpace,
    IsomorphicSpace,
    SearchSpace,
    TabulatedSpace,
)
from hwnas.usercode import CODE

T = TypeVar("T")

__all__ = [
    "Arch",
    "command_line_name",
    "CostTermsSpace",
    "DatasetSpec",
    "IndexedSpace",
    "InheritedSpace",
    "IsomorphicSpace",
    "SearchSpace",
    "TabulatedSpace",
    "ability",
    "arch_from_text",
    "get_space",
    "list_spaces",
    "register_space",
    "reload_spaces",
    "space_option",
]

_SPACES: dict[str, SearchSpace] = {}
"""Spaces loaded in this process, by name (one instance per name)."""
_FILES: dict[str, SearchSpace] = {}
"""Spaces loaded from a path, by the resolved path."""


def ability(space: SearchSpace, protocol: type[T]) -> T | None:
    """``space`` typed as ``protocol`` (:class:`IndexedSpace`, :class:`TabulatedSpace`,
    :class:`IsomorphicSpace`, :class:`InheritedSpace`, :class:`CostTermsSpace`) if it has that
    optional ability, else None: the one place where abilities are looked up.

    A space has an ability when it has the protocol's methods and, where it defines
    ``has_ability(protocol)``, that says it does: every :class:`hwnas.spaces.module.
    ModuleSpace` has ``subnet``, but only one made from a trained model (:func:`hwnas.elastic`)
    has inherited weights; one written with :func:`hwnas.nn.space` is no
    :class:`InheritedSpace`."""
    if not isinstance(space, protocol):
        return None
    own = getattr(space, "has_ability", None)
    if callable(own) and not own(protocol):
        return None
    return space  # type: ignore[return-value]


def arch_from_text(space: SearchSpace, text: str) -> Arch:
    """The architecture ``text`` names: an index (``5``) in a space whose architectures are
    numbered (:class:`IndexedSpace`: NAS-Bench-201's 0..15624), else the space's arch string.
    ``hwnas arch``, ``hwnas measure --arch`` and ``hwnas predict --arch`` all read it so.

    Raises:
        HwnasError: an index out of range, a malformed or unknown arch string.
    """
    text = text.strip()
    indexed = ability(space, IndexedSpace)
    if text.isdigit() and indexed is not None:
        return indexed.arch_at(int(text))
    if indexed is not None and _number(text):  # -1, 3.0: meant as an index, not an arch string
        raise HwnasError(
            f"'{text}' is not an index of {space.name}: an index is a whole number from 0 to "
            f"{len(indexed) - 1}"
        )
    return space.parse(text)


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def user_space_folder() -> Path:
    """``$HWNAS_HOME/spaces``: the user's space files."""
    from hwnas.paths import hwnas_home

    return hwnas_home() / "spaces"


def space_files() -> dict[str, Path]:
    """Every space file by name: the shipped ones, then the user's (a user file may not reuse a
    shipped name: :func:`unused_space_files` lists those that do)."""
    return _space_files()[0]


def unused_space_files() -> dict[Path, str]:
    """The user's space files that are not used, each with why: a name a shipped space (or an
    earlier file of the user's: ``x.yaml`` before ``x/space.yaml``) already has."""
    return _space_files()[1]


def _space_files() -> tuple[dict[str, Path], dict[Path, str]]:
    out = {p.parent.name: p for p in sorted(asset_path("search_spaces").glob("*/space.yaml"))}
    shipped = set(out)
    unused = {}
    user = user_space_folder()
    if user.is_dir():
        found = sorted(user.glob("*.yaml")) + sorted(user.glob("*.yml"))
        found += sorted(user.glob("*/space.yaml"))
        for p in found:
            name = p.parent.name if p.name == "space.yaml" else p.stem
            if name in out:
                owner = "a shipped space" if name in shipped else str(out[name])
                unused[p] = f"'{name}' is already the name of {owner}: rename the file"
            else:
                out[name] = p
    return out, unused


def list_spaces() -> list[str]:
    """Names of the spaces hwnas finds: shipped in ``search_spaces/`` and the user's."""
    return sorted(space_files())


def _is_path(text: str) -> bool:
    return "/" in text or text.endswith((".yaml", ".yml"))


def _load(path: Path, expected: str | None) -> SearchSpace:
    # a hand-written class is named only by the files installed with hwnas (resolved: a user
    # path such as search_spaces/../../x.yaml is not one of them), and only within hwnas
    shipped = path.resolve().is_relative_to(asset_path("search_spaces").resolve())
    if shipped:
        config = read_yaml(path)
        impl = config.get("implementation") if isinstance(config, dict) else None
        if impl is not None:
            if not str(impl).startswith("hwnas.spaces."):
                raise HwnasError(f"{path}: implementation '{impl}' is not a space class of hwnas")
            return load(impl)(config, path.parent)
    from hwnas.spaces.declared import load_declared

    space = load_declared(path)
    if expected is not None and space.name != expected:
        raise HwnasError(
            f"{path}:1: name: the space in this file is called '{space.name}', "
            f"but its file is found as '{expected}'"
        )
    return space


_OBJECTS: dict[str, SearchSpace] = {}
"""Spaces registered as objects (:func:`register_space`), by name."""


def register_space(space: SearchSpace) -> SearchSpace:
    """Make ``space`` (an object, such as :func:`hwnas.elastic`'s) findable by its name in this
    process, so every search, supernet and zoo function that takes a space name finds it. A
    space registered earlier under the same name is replaced (a notebook cell run again);
    a name of a space file (shipped or the user's) is refused.

    Returns:
        ``space``.

    Raises:
        HwnasError: not a :class:`SearchSpace`, or a name that a space file uses.
    """
    if not isinstance(space, SearchSpace):
        raise HwnasError(
            f"expected a search space (hwnas.nn.space, hwnas.elastic), got {type(space).__name__}"
        )
    taken = _SPACES.get(space.name)
    if taken is not None and taken is not space and _OBJECTS.get(space.name) is not taken:
        raise HwnasError(f"space name '{space.name}' is taken by a space file; pick another name")
    if space.name in space_files():
        raise HwnasError(
            f"space name '{space.name}' is taken by {space_files()[space.name]}; pick another name"
        )
    _OBJECTS[space.name] = _SPACES[space.name] = space
    return space


_OWN: contextvars.ContextVar[dict[str, SearchSpace] | None] = contextvars.ContextVar(
    "hwnas_own_spaces", default=None
)
"""The spaces of the search running in this thread (:func:`searching`), by name."""


@contextlib.contextmanager
def searching(space: SearchSpace | None) -> Iterator[None]:
    """Inside (one search, in the calling thread), :func:`get_space` of ``space``'s name is
    ``space`` itself, whatever another thread registers under that name meanwhile
    (:func:`register_space` replaces a name for the whole process): two ``hwnas.search`` calls
    in threads, each with its own space object of one name, each search their own. None:
    nothing is bound."""
    if space is None:
        yield
        return
    token = _OWN.set({**(_OWN.get() or {}), space.name: space})
    try:
        yield
    finally:
        _OWN.reset(token)


def _load_code(text: str, file: str, attr: str) -> SearchSpace:
    """The space ``attr`` of the Python file ``file`` (imported once per process,
    :mod:`hwnas.usercode`; a function there is called with no argument)."""
    from hwnas.usercode import call_user, code_object

    path = Path(file).expanduser()
    if not path.is_file():
        raise HwnasError(f"space file not found: {path}")
    key = f"{path.resolve()}:{attr}"
    if key in _FILES:
        return _FILES[key]
    obj = code_object(f"{file}:{attr}")
    if callable(obj) and not isinstance(obj, SearchSpace) and not hasattr(obj, "forward"):
        from hwnas.engine.seeding import seeded_globals

        with seeded_globals(0):  # as the file was imported: the same model in every process
            obj = call_user(obj, f"{text}() (called with no argument to make the space)")
    if not isinstance(obj, SearchSpace):
        raise HwnasError(
            f"{text} is a {type(obj).__name__}, not a search space: make one with "
            "hwnas.nn.space(model, example_input) or hwnas.elastic(model, example_input)"
        )
    register_space(obj)
    _FILES[key] = obj
    _TYPED[obj.name] = text
    return obj


_TYPED: dict[str, str] = {}
"""Space name -> the ``FILE.py:ATTR`` it was loaded from in this process."""


def command_line_name(name: str) -> str:
    """How a command typed by the user names the space ``name``: its ``FILE.py:ATTR`` when
    it was loaded from one (the name alone is unknown to a new process), else the name."""
    return _TYPED.get(name, name)


def user_space(space: Any) -> SearchSpace:
    """The space a user named from Python (``space=`` of :func:`hwnas.search`,
    :func:`hwnas.measure`, :func:`hwnas.predict`): a :class:`SearchSpace` object is registered
    (:func:`register_space`) so that it is found by its name from then on; a name, a path or
    ``file.py:attr`` is :func:`get_space`'s (with ``code``).

    Raises:
        HwnasError: an unknown or invalid space.
    """
    if isinstance(space, SearchSpace):
        try:
            if get_space(space.name) is space:  # hwnas.get_space's own: already findable
                return space
        except HwnasError:
            pass
        return register_space(space)
    return get_space(space, code=True)


def get_space(name: str, code: bool = False) -> SearchSpace:
    """The search space called ``name``, the declared space in the file ``name`` (a path),
    or, with ``code``, the space ``attribute`` of the Python file ``path/to/file.py:attribute``
    (imported: it is the user's code); a space given by path is then known by its own name for
    the rest of the process. One instance per name. With ``code``, a name that no space has
    but a file (or folder) that is there is taken as its path, so that what is wrong with it
    is said.

    ``code`` is for what the user typed (``--space``, ``hwnas.search(space=...)``) and only
    that: a space name read from a file (a device profile's ``tables:``, a zoo card, a
    predictor card) must never import Python, so there a ``file.py:attr`` is an error.

    Raises:
        UnknownNameError: no space of that name (or no such attribute in the Python file).
        HwnasError: a name that is not a string or a path (a model: make it a space first); a
            Python file without ``:ATTR`` (the form, and what the file defines); a space file
            that cannot be read or is invalid (one line: file, line, key; never the file's
            text), a space file whose name does not end in ``.yaml``/``.yml``, a file whose space
            reuses the name of another file's space, a Python file that fails to import or
            whose attribute is not a space, a ``file.py:attr`` without ``code``.
    """
    if isinstance(name, os.PathLike):  # a space file's pathlib.Path
        name = os.fspath(name)
    if not isinstance(name, str):
        raise HwnasError(_not_a_name(name))
    own = (_OWN.get() or {}).get(name)  # this thread's search's own space of that name
    if own is not None:
        return own
    if name in _SPACES:
        return _SPACES[name]
    match = CODE.match(name)
    if match is None and name.endswith(".py"):
        raise HwnasError(_python_file(name))
    head, colon, _ = name.rpartition(":")
    if match is None and colon and head.endswith(".py"):  # FILE.py: or FILE.py:not-a-name
        raise HwnasError(_python_file(head))
    if match is not None:
        if not code:
            raise HwnasError(
                f"'{name}' names Python code: hwnas imports a space's code only when you give "
                "it yourself (--space FILE.py:ATTR, hwnas.search(space=...)), never a name "
                "read from a file"
            )
        return _load_code(name, match["file"], match["attr"])
    named = {} if _is_path(name) else space_files()
    # a file that is there is one, whatever its name (single.txt was "unknown search space"),
    # where the user typed it: a name read from a file stays a name (a project folder called
    # like an elastic model's space must not turn a zoo card's space into that folder)
    there = code and name not in named and Path(name).expanduser().exists()
    if _is_path(name) or there:
        path = Path(name).expanduser()
        if not path.is_file():
            if path.is_dir():
                raise HwnasError(f"{path} is a folder: give a space file (.yaml) in it")
            raise HwnasError(f"space file not found: {path}")
        if path.suffix.lower() not in (".yaml", ".yml"):  # a name read from a file given by
            # someone else may point at any file (~/.ssh/id_ed25519): hwnas reads none but YAML
            raise HwnasError(f"{path}: a space file's name ends in .yaml or .yml")
        key = str(path.resolve())
        if key in _FILES:
            return _FILES[key]
        space = _load(path, None)
        files = space_files()
        other = files.get(space.name)
        if space.name in _SPACES or (other is not None and other.resolve() != path.resolve()):
            where = other if other is not None else "another file"
            raise HwnasError(
                f"{path}:1: name: '{space.name}' is the name of the space in {where}; "
                "give this space another name"
            )
        _FILES[key] = _SPACES[space.name] = space
        return space
    files = named
    if name not in files:
        raise UnknownNameError("search space", name, list(files))
    space = _load(files[name], name)
    _FILES[str(files[name].resolve())] = space
    return _SPACES.setdefault(name, space)


def _not_a_name(obj: Any) -> str:
    """Why ``obj`` names no space, in one line (a model's repr is many)."""
    kind = type(obj).__name__
    if any(
        c.__name__ == "Module" and c.__module__.startswith("torch.nn") for c in type(obj).__mro__
    ):
        return (
            f"space: got a {kind} (an nn.Module): make a space with hwnas.elastic(model, "
            "example_input) (or hwnas.nn.space(model, example_input) for one with choice points)"
        )
    text = repr(obj)
    what = text if len(text) <= 60 and "\n" not in text else f"a {kind}"
    return (
        "a search space is named by a string (a name, a space file's path or FILE.py:ATTR), "
        f"got {what}"
    )


def _python_file(name: str) -> str:
    """What to type for the Python file ``name`` given without ``:ATTR``, in one line, with the
    names its top level assigns or defines (read, not imported: no code of it runs)."""
    import ast

    path = Path(name).expanduser()
    if not path.is_file():
        return f"space file not found: {path} (a space in a Python file is named FILE.py:ATTR)"
    form = f"'{name}' is a Python file: name the space in it as FILE.py:ATTR"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return f"{form} ({name}:space, for its attribute 'space')"
    names: list[str] = []
    spaces: list[str] = []  # assigned what hwnas.elastic or hwnas.nn.space returns
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name)]
            names += targets
            called = node.value.func
            called_name = getattr(called, "attr", getattr(called, "id", ""))
            if called_name in ("elastic", "space", "module_space"):
                spaces += targets
    names = [n for n in dict.fromkeys(names) if not n.startswith("_")]
    if spaces:
        return f"{form}: {', '.join(f'{name}:{s}' for s in dict.fromkeys(spaces))}"
    if not names:
        return f"{form}; it defines nothing at its top level"
    more = ", ..." if len(names) > 8 else ""
    return f"{form} (its top level defines {', '.join(names[:8])}{more})"


def reload_spaces() -> None:
    """Forget the spaces loaded from user files and paths and those registered as objects
    (shipped ones stay): after ``HWNAS_HOME`` changes (tests)."""
    shipped = asset_path("search_spaces").resolve()
    for name in list(_OBJECTS):
        if _SPACES.get(name) is _OBJECTS.pop(name):
            del _SPACES[name]
    for key, space in list(_FILES.items()):
        if not Path(key.rsplit(":", 1)[0] if CODE.match(key) else key).is_relative_to(shipped):
            del _FILES[key]
            if _SPACES.get(space.name) is space:
                del _SPACES[space.name]
    _TYPED.clear()  # every FILE.py:ATTR space was forgotten above


def space_option(ctx, param, value: str | None) -> str | None:
    """Click callback of ``--space``: a space file's path becomes the name of its space (loaded
    and checked now, before any work), so study names and run folders use the name. The value
    as typed is kept in ``ctx.meta["typed"]`` (a command that starts itself again, ``--nproc``,
    passes the path on: the name alone is unknown in a new process). The command's
    ``before_space(ctx)`` (:class:`hwnas.cli.options.SpaceLast`) runs first: what can be
    refused without the space is, before a ``FILE.py:ATTR`` space's code runs."""
    if value is None:
        return None
    check = getattr(getattr(ctx, "command", None), "before_space", None)
    if callable(check):
        check(ctx)
    name = get_space(value, code=True).name
    if ctx is not None and param is not None and name != value:
        ctx.meta.setdefault("typed", {})[param.name] = value
    return name
