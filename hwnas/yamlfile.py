"""The one reader of YAML files from users: space files, device profiles, anything else.

PyYAML's safe loader builds only plain values (no object is constructed from a tag), but an
alias (``*name``) re-uses the collection its anchor (``&name``) names, so a 1 KB file of nested
aliases describes hundreds of millions of values (the "billion laughs"), and ``&a [*a]`` a
list that contains itself: either hangs or crashes whatever walks the data afterwards.
Nesting a few ten thousand levels deep crashes libyaml itself (a C stack overflow).

Before building anything, :func:`load_yaml` reads the file's event stream (libyaml's C parser,
iterative) and refuses, with the line where it happens:

- an alias inside the collection it refers to (a self-reference);
- aliases that expand the document beyond :data:`MAX_VALUES` values;
- nesting deeper than :data:`MAX_DEPTH` levels.

Aliases that stay within these bounds keep working (the shipped space files use them to
repeat a stage's layer choices). The check costs about a third of a load, and is skipped for a
file that plainly cannot break them (no ``*``, few nesting characters).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import yaml

MAX_VALUES = 100_000
"""Most values (scalars and collections, counted after expanding aliases) a YAML file may
describe: the largest shipped space expands to about 2,000."""

MAX_DEPTH = 100
"""Deepest nesting of collections a YAML file may have (shipped files: under 10)."""

_SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's C parser: ~10x faster


class YamlValueError(yaml.MarkedYAMLError):
    """A value PyYAML cannot construct (an integer of more than 4,300 digits, beyond Python's
    limit on converting text to int): a yaml.YAMLError with its line, not the ValueError a
    constructor raises, which broke every device command with a traceback. The value itself
    is not repeated (a file may be anything)."""

    def __init__(self, problem: str, mark: Any):
        super().__init__(problem=problem, problem_mark=mark)

    def __str__(self) -> str:
        line = f"line {self.problem_mark.line + 1}: " if self.problem_mark is not None else ""
        return f"{line}{self.problem}"


class _Loader(_SafeLoader):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader, with dates and times read as the text they are (``2026-13-45``
    made ``datetime.date`` raise ValueError; no hwnas file has a date value, and a string is
    what JSON output and messages can show), and any error of a value's constructor turned
    into a :class:`YamlValueError` naming its line."""

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except yaml.YAMLError:
            raise
        except (ValueError, OverflowError, TypeError, ArithmeticError, RecursionError) as exc:
            self.recursive_objects.pop(node, None)  # left set by the failed constructor
            kind = _KINDS.get(node.tag.rsplit(":", 1)[-1], "a value")
            why = "too many digits" if "digits" in str(exc) else type(exc).__name__
            raise YamlValueError(f"{kind} that cannot be read ({why})", node.start_mark) from None

    def construct_yaml_int(self, node: Any) -> int:
        """An integer, within the range of a float: every number hwnas reads is compared
        or computed as one (a 4,000-digit ``warmup`` raised OverflowError in every device
        command)."""
        value = super().construct_yaml_int(node)
        if abs(value) > MAX_INT:
            raise YamlValueError(
                "an integer beyond any number hwnas reads (more than 308 digits)",
                node.start_mark,
            )
        return value


MAX_INT = 2**1023
"""Largest integer a YAML file may hold (a float's range: every number hwnas reads is one)."""

_KINDS = {"int": "an integer", "float": "a number", "bool": "a boolean", "binary": "binary data"}


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_str)
_Loader.add_constructor("tag:yaml.org,2002:int", _Loader.construct_yaml_int)


class YamlLimitError(yaml.MarkedYAMLError):
    """A YAML file beyond hwnas's limits (a yaml.YAMLError: callers that report invalid YAML
    report it the same way, with its line)."""

    def __init__(self, problem: str, mark: Any):
        super().__init__(problem=problem, problem_mark=mark)

    def __str__(self) -> str:  # one line, like the rest of hwnas's errors
        line = f"line {self.problem_mark.line + 1}: " if self.problem_mark is not None else ""
        return f"{line}{self.problem}"


def check_events(text: str) -> None:
    """Refuse self-referencing aliases, alias expansion beyond :data:`MAX_VALUES` values and
    nesting beyond :data:`MAX_DEPTH` levels (see the module), before anything is built.

    Raises:
        YamlLimitError: one of the above, with the line where it happens.
        yaml.YAMLError: the text is not valid YAML.
    """
    sizes: dict[str, int] = {}  # anchor -> values it expands to (collections once closed)
    frames: list[list[Any]] = [[None, 0]]  # open collections: [anchor, values so far]

    def add(n: int, mark: Any) -> None:
        frames[-1][1] += n
        if frames[-1][1] > MAX_VALUES:
            raise YamlLimitError(
                f"its aliases expand to more than {MAX_VALUES} values (an alias bomb?); "
                "write the repeated part out, or use fewer nested aliases",
                mark,
            )

    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(frames) > MAX_DEPTH:
                raise YamlLimitError(f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
            frames.append([event.anchor, 1])
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, n = frames.pop()
            if anchor is not None:
                sizes[anchor] = n
            add(n, event.start_mark)
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            add(1, event.start_mark)
        elif isinstance(event, yaml.AliasEvent):
            if any(f[0] == event.anchor for f in frames):
                raise YamlLimitError(
                    f"the alias *{event.anchor} is inside the collection &{event.anchor} it "
                    "refers to (a value that contains itself)",
                    event.start_mark,
                )
            add(sizes.get(event.anchor, 1), event.start_mark)  # unknown: the composer says so


class DuplicateKeyError(yaml.MarkedYAMLError):
    """A mapping that gives one key twice (YAML forbids it; PyYAML keeps the last silently)."""

    def __init__(self, problem: str, mark: Any):
        super().__init__(problem=problem, problem_mark=mark)

    def __str__(self) -> str:
        line = f"line {self.problem_mark.line + 1}: " if self.problem_mark is not None else ""
        return f"{line}{self.problem}"


def check_duplicate_keys(root: Any, loader: Any = None) -> None:
    """Refuse a mapping that repeats a key (``channel_divisor: 8`` then ``channel_divisor:
    16`` read as 16, silently). Keys are compared as the values they are read as, given a
    ``loader`` (``1``, ``01`` and ``0x1``; ``true`` and ``yes``; each pair one key), else by
    their text. Merge keys (``<<``) are not keys of the mapping.

    Raises:
        DuplicateKeyError: at the second occurrence, naming the first's line.
    """

    def value_of(key: Any) -> Any:
        if loader is not None:
            try:
                value = loader.construct_object(key)
                hash(value)
                return ("value", value)
            except (yaml.YAMLError, TypeError, ValueError):
                pass
        return ("text", key.value)

    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # an alias: the same node, checked once
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, Any] = {}
            for key, value in node.value:
                stack.append(value)
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    stack.append(key)
                    continue
                read = value_of(key)
                if read in first:
                    earlier = first[read]
                    same = "" if earlier.value == key.value else f" (as '{earlier.value}')"
                    raise DuplicateKeyError(
                        f"key '{key.value}' is given twice{same} (first on line "
                        f"{earlier.start_mark.line + 1})",
                        key.start_mark,
                    )
                first[read] = key
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def _plainly_bounded(text: str) -> bool:
    """Whether ``text`` is within the limits without reading its events: no alias (no ``*``
    at all), and too few characters that open a level (``[ { - : ?``: every level of nesting
    needs one) to nest beyond :data:`MAX_DEPTH`. Most device profiles are (the check then
    costs nothing)."""
    if "*" in text:
        return False
    openers = sum(text.count(c) for c in "[{-:?")
    return openers <= MAX_DEPTH


def load_yaml(text: str, nodes: bool = False, name: str | None = None) -> Any:
    """The data of one YAML document, read safely (plain values only) and within bounds.

    Args:
        text: the document.
        nodes: also return the composed node tree (its marks give each value's line).
        name: the file it was read from, for the marks of errors (else ``<unicode string>``).

    Returns:
        The data (None for an empty document), or (data, root node or None) with ``nodes``.

    Raises:
        YamlLimitError: a self-referencing alias, an alias bomb, or too deep nesting.
        YamlValueError: a value that cannot be constructed (an integer beyond
            :data:`MAX_INT`); dates are read as text.
        yaml.YAMLError: invalid YAML (:class:`DuplicateKeyError`: a key given twice).
    """
    if not _plainly_bounded(text):
        check_events(text)
    stream: Any = text
    if name is not None:  # errors say 'in "<file>", line 3', not 'in "<unicode string>"'
        stream = io.StringIO(text)
        stream.name = name
    loader = _Loader(stream)
    try:
        node = loader.get_single_node()
        if node is not None:
            check_duplicate_keys(node, loader)
        data = loader.construct_document(node) if node is not None else None
    finally:
        loader.dispose()
    return (data, node) if nodes else data


def read_yaml(path: str | Path) -> Any:
    """The YAML file at ``path``, read with :func:`load_yaml`.

    Raises:
        OSError: the file cannot be read, is not a regular file or is too large
            (:func:`hwnas.paths.read_bounded`).
        UnicodeDecodeError: it is not UTF-8 text.
        yaml.YAMLError: invalid YAML, beyond the limits (:class:`YamlLimitError`), or a value
            that cannot be constructed (:class:`YamlValueError`).
    """
    from hwnas.paths import read_bounded_text

    return load_yaml(read_bounded_text(path), name=str(path))
