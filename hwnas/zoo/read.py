"""Reading zoo entries back (for ``hwnas zoo list|show|verify`` and ``hwnas train ZOO_DIR``).

Only ``json`` is imported: listing a zoo costs no torch or ONNX import.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwnas.errors import HwnasError
from hwnas.paths import plain_dir, plain_file, read_bounded_text, sha256_file
from hwnas.zoo.card import CARD_FILE, CARD_VERSION


def is_entry(path: str | Path) -> bool:
    """Whether ``path`` is a zoo entry folder (it holds a ``card.json``)."""
    return (Path(path) / CARD_FILE).is_file()


OS_METADATA = frozenset({".DS_Store", "Thumbs.db", "desktop.ini", ".ipynb_checkpoints"})
"""Files a file browser or notebook puts in any folder it opens: not the user's data."""

TEMPORARY = re.compile(r"^\..+\.[^.]+\.\d+\.(?:tmp|old)(?:\.\w+)?\Z")
"""The names of hwnas's own temporaries (:func:`hwnas.paths.temporary`): what a killed
``hwnas train`` left in a zoo, swept by the next writer."""


@dataclass
class ZooContents:
    """What a zoo folder holds (:func:`zoo_contents`).

    Attributes:
        zoo: the zoo folder; None where the path given is one entry.
        entries: its entry folders (each holds a ``card.json``), sorted by name.
        others: ``(folder, why)`` for each of its sub-folders that is no entry (no
            ``card.json``) or is a symbolic link (to an entry elsewhere, which the zoo's
            checks would follow out of it): not read as an entry, and a listing says so.
            Hidden temporaries of hwnas and a file browser's folders are left out.
    """

    zoo: Path | None
    entries: list[Path]
    others: list[tuple[Path, str]] = field(default_factory=list)


def zoo_contents(path: str | Path) -> ZooContents:
    """The entries of a zoo folder (or of a run folder's ``zoo/``), or ``path`` itself when it
    is one entry, with the sub-folders that are no entry.

    Raises:
        HwnasError: ``path`` is missing or not a folder.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise HwnasError(f"zoo folder not found: {path}")
    if not path.is_dir():
        raise HwnasError(f"{path} is not a folder (give a zoo folder or one of its entries)")
    if is_entry(path):
        return ZooContents(None, [path])
    entries, others = _children(path)
    if not entries and (path / "zoo").is_dir():  # a run folder: its zoo
        return ZooContents(path / "zoo", *_children(path / "zoo"))
    return ZooContents(path, entries, others)


def _children(zoo: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """(entries, other sub-folders and why) of the folder ``zoo``."""
    entries, others = [], []
    for p in sorted(zoo.iterdir()):
        if p.name in OS_METADATA or TEMPORARY.match(p.name) or not p.is_dir():
            continue
        if p.is_symlink():  # verify would check, and train write, a folder elsewhere
            why = f"a symbolic link (to {p.resolve()}), not an entry folder of this zoo"
            others.append((p, why + ": copy the entry in"))
        elif is_entry(p):
            entries.append(p)
        else:
            others.append((p, f"not a zoo entry: no {CARD_FILE}"))
    return entries, others


def entry_folders(path: str | Path) -> list[Path]:
    """The entry folders of a zoo folder (or of a run folder's ``zoo/``), or ``[path]`` when it
    is one entry; sorted by name (:attr:`ZooContents.entries`: a link is none).

    Raises:
        HwnasError: ``path`` is missing, not a folder, or holds no entry.
    """
    path = Path(path).expanduser()
    contents = zoo_contents(path)  # refuses a missing path, or one that is no folder
    if contents.zoo is None:  # one entry
        return contents.entries
    found = contents.entries  # a link to an entry elsewhere is none (zoo_contents)
    run = path if path.name != "zoo" else path.parent
    if not found and (run / "summary.json").is_file():  # a run folder, or its zoo: empty
        raise HwnasError(
            f"the run in {run} put no model in its zoo: its front is empty (a latency limit "
            "no architecture met) or at chance level (pareto.csv's chance_level column), or "
            "it ran with --no-zoo"
        )
    if not found:
        raise HwnasError(
            f"{path} is neither a zoo entry (no {CARD_FILE}) nor a zoo folder (no sub-folder "
            f"with a {CARD_FILE})"
        )
    return found


def zoo_weights(entries: list[Path]) -> str | None:
    """``summary.json``'s ``zoo_weights`` for a zoo of ``entries``: their weights' kind
    (``trained``, ``random``; for the networks a user's accuracy function scored, by their
    weights note, ``inherited``: a model made elastic, scored on its inherited weights, or
    ``function-trained``: as the function left them, having changed their weights), or
    ``mixed`` where they differ (a rerun kept the entries ``hwnas train`` trained and
    exported the rest with random weights); None for no entry.

    Raises:
        HwnasError: an entry whose card cannot be read.
    """
    kinds = {_weights_kind(read_entry(e)) for e in entries}
    if not kinds:
        return None
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _weights_kind(card: dict[str, Any]) -> str:
    """The kind of weights of a card :func:`read_entry` read, a trained network the user's
    accuracy function scored told apart by its weights note
    (:meth:`hwnas.engine.evaluate.FunctionEvaluator.zoo_models`)."""
    from hwnas.engine.evaluate import FUNCTION_NOTE, INHERITED_NOTE

    kind = card["weights_kind"]
    weights = card.get("weights")
    note = str(weights.get("note", "")) if isinstance(weights, dict) else ""
    if kind == "trained" and note.startswith(INHERITED_NOTE):
        return "inherited"
    if kind == "trained" and note.startswith(FUNCTION_NOTE):
        return "function-trained"
    return kind


def read_entry(path: str | Path) -> dict[str, Any]:
    """The card of one zoo entry, with what a listing shows in plain keys.

    Args:
        path: the entry folder (holding ``card.json``).

    Returns:
        The ``card.json`` dict plus ``folder`` (str, the entry's path), ``weights_kind``
        (``trained`` | ``random``), ``accuracy_value`` (%), ``accuracy_source``,
        ``latency_ms`` (on the search device, or None), ``latency_source``, ``energy_mj``
        (mJ, or None where the device has no meter), ``energy_source`` and ``device`` (the
        first device of the card: the search's).

    Raises:
        HwnasError: no ``card.json``, unreadable JSON, or a card of a newer layout.
    """
    folder = Path(path).expanduser()
    file = folder / CARD_FILE
    try:
        card = json.loads(read_bounded_text(file))
    except FileNotFoundError:
        raise HwnasError(f"{folder} is not a zoo entry: no {CARD_FILE}") from None
    except (OSError, ValueError) as exc:
        raise HwnasError(f"cannot read {file}: {exc}") from None
    if not isinstance(card, dict) or "arch" not in card:
        raise HwnasError(f"{file} is not a zoo card (no 'arch')")
    version = card.get("format_version", 0)
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise HwnasError(f"{file}: 'format_version' must be a whole number; not a card hwnas wrote")
    if version > CARD_VERSION:
        raise HwnasError(
            f"{file} has card format {version}; this hwnas reads up to {CARD_VERSION} "
            "(upgrade hwnas)"
        )
    check_card_fields(card, file)
    weights = card.get("weights")
    kind = weights.get("kind") if isinstance(weights, dict) else (
        "trained" if str(weights).startswith("trained") else "random"
    )  # fmt: skip
    accuracy = card.get("accuracy") or {}
    devices = card.get("devices") or {}
    device = next(iter(devices), None)
    costs = (devices.get(device) or {}) if device else {}
    latency, energy = costs.get("latency_ms"), costs.get("energy_mj")
    return {
        **card,
        "folder": str(folder),
        "weights_kind": kind,
        "accuracy_value": accuracy.get("value"),
        "accuracy_source": accuracy.get("source", ""),
        "device": device,
        "latency_ms": latency.get("value") if latency else None,
        "latency_source": latency.get("source", "") if latency else "",
        "energy_mj": energy.get("value") if energy else None,
        "energy_source": energy.get("source", "") if energy else "",
    }


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _cost(v: Any) -> bool:
    return isinstance(v, dict) and (v.get("value") is None or _number(v["value"]))


CARD_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "name": ("a string", lambda v: isinstance(v, str)),
    "arch": ("a string", lambda v: isinstance(v, str)),
    "space": ("a string", lambda v: isinstance(v, str)),
    "dataset": ("a string", lambda v: isinstance(v, str)),
    "accuracy": ("an object whose value is a number (%)", _cost),
    "table_accuracy": ("an object whose value is a number (%)", lambda v: v is None or (
        _cost(v) and _number(v.get("value")))),
    "chance_level": ("an object", lambda v: isinstance(v, dict)),
    "weights": ("an object", lambda v: isinstance(v, (dict, str))),
    "devices": ("an object of devices, each an object of metrics whose values are numbers",
                lambda v: isinstance(v, dict) and all(
                    isinstance(d, dict) and all(_cost(m) for m in d.values())
                    for d in v.values())),
    "preprocessing": ("an object whose steps are a list of strings", lambda v: isinstance(
        v, dict) and isinstance(v.get("steps", []), list)
        and all(isinstance(x, str) for x in v.get("steps", []))),
    "input": ("an object with a name and a shape", lambda v: isinstance(v, dict)
              and "name" in v and "shape" in v),
    "output": ("an object with a name and a shape", lambda v: isinstance(v, dict)
               and "name" in v and "shape" in v),
    "files": ("an object of file names", lambda v: isinstance(v, dict)),
}  # fmt: skip
"""What each field of a card that `hwnas zoo list` and `show` read must hold."""


def check_card_fields(card: dict[str, Any], file: Path) -> None:
    """Refuse a card whose listed fields do not hold what hwnas writes there
    (:data:`CARD_FIELDS`; a field left out is fine).

    Raises:
        HwnasError: one line naming the file and the first field that is wrong.
    """
    for key, (what, ok) in CARD_FIELDS.items():
        if key in card and not ok(card[key]):
            raise HwnasError(f"{file}: '{key}' must be {what}; not a card hwnas wrote")


MANIFEST_FILES = ("card.json", "model.onnx")
"""Files of each entry whose sha256 a run's ``summary.json`` records (``zoo_files``): the
card pins every other file of its entry by its own checksums."""


def zoo_manifest(run_folder: str | Path) -> dict[str, str]:
    """``{"zoo/<entry>/card.json": sha256, "zoo/<entry>/model.onnx": sha256, ...}`` for every
    entry of the run folder's zoo (empty without one): the run's record of what it wrote,
    which ``hwnas zoo verify`` checks entries against."""
    zoo = Path(run_folder) / "zoo"
    for _attempt in range(5):  # another worker may swap its (identical) zoo in meanwhile
        out: dict[str, str] = {}
        try:
            if not zoo.is_dir() or zoo.is_symlink():
                return out
            for entry in sorted(p for p in zoo.iterdir() if plain_dir(p) and is_entry(p)):
                for name in MANIFEST_FILES:
                    if plain_file(entry / name):  # a link could name any file of the machine
                        digest = sha256_file(entry / name)
                        out[f"zoo/{entry.name}/{name}"] = digest
            return out
        except OSError:
            continue
    return {}
