"""Loading a zoo entry to run it: an ONNX Runtime session, or the PyTorch module with its weights
(timm's ``create_model`` for hwnas entries). Importing this module imports neither torch nor
onnxruntime."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from hwnas.errors import HwnasError, keyword_terms
from hwnas.paths import sha256_file
from hwnas.zoo.card import CARD_FILE, MODEL_FILE, WEIGHTS_FILE, build_fingerprint
from hwnas.zoo.read import read_entry


def entry_folder(entry: str | Path) -> Path:
    """The entry folder of ``entry``: the folder, its ``card.json`` or its ``model.onnx``.

    Raises:
        HwnasError: not a path, no such path, or a path that is not a zoo entry.
    """
    from hwnas.paths import path_arg

    if entry is None:  # path_arg lets None through (an optional path): Path(None) fails
        raise HwnasError(
            "entry must be a zoo entry's folder (a string or a pathlib.Path), got None"
        )
    path = Path(path_arg("entry", entry)).expanduser()
    if path.is_file() and path.name in (CARD_FILE, MODEL_FILE, WEIGHTS_FILE):
        path = path.parent
    if not path.exists():
        raise HwnasError(f"zoo entry not found: {path}")
    if not (path / CARD_FILE).is_file():
        raise HwnasError(f"{path} is not a zoo entry (no {CARD_FILE}; give an entry's folder)")
    return path


def _checked(folder: Path, card: dict[str, Any], name: Any) -> Path:
    """``folder/name``, a file of the entry (not a path leading out of it) whose sha256 the
    card lists and matches: a card handed over with ``weights.file: ../../x.pt`` or an
    unlisted file is refused before the file is opened.

    Raises:
        HwnasError: a name leading out of the entry, a missing file, a file the card lists no
            checksum of, or one whose checksum differs.
    """
    from hwnas.paths import confined

    if not isinstance(name, str):
        raise HwnasError(f"{folder}: card.json names a file {name!r} that is not a file name")
    try:
        path = confined(folder, *name.split("/"), what="card.json file")
    except HwnasError:
        shown = repr(name[:80])
        raise HwnasError(f"{folder}: card.json names {shown}, not a file of the entry") from None
    if not path.is_file():
        raise HwnasError(f"{folder}: {name} is missing")
    files = card.get("files")
    want = files.get(name) if isinstance(files, dict) else None
    if want is None:
        raise HwnasError(
            f"{folder}: card.json lists no sha256 of {name}, so it cannot be checked (an "
            "entry written by an older hwnas, or edited); open the file yourself if you trust it"
        )
    if sha256_file(path) != want:
        raise HwnasError(
            f"{path} has changed since the entry was written (sha256 differs from card.json); "
            "`hwnas zoo verify` checks the entry"
        )
    return path


@keyword_terms(public="hwnas.zoo.load")
def load(
    entry: str | Path,
    torch: bool = False,
    space: Any = None,
    providers: list[str] | None = None,
):
    """A zoo entry, ready to run.

    Args:
        entry: the entry's folder (``runs/<run>/zoo/00-<hash>``), or its ``card.json`` or
            ``model.onnx``.
        torch: return the PyTorch module (``torch.nn.Module``, eval mode, CPU) instead of an
            ONNX Runtime session: the entry's network rebuilt from the card's ``build``
            section (its space and arch; a supernet search's subnet extracted from that
            supernet at the search's size) with the weights of ``weights.pt`` (loaded with
            ``weights_only=True``: tensors only, no code), or, for a random-weight entry, the
            same seeded random weights as ``model.onnx``.
        space: the search space to rebuild the module with: the object (a space made in
            Python, :func:`hwnas.elastic` / :func:`hwnas.nn.space`, is not saved with the
            entry), a name, a space file's path, or ``path/to/file.py:attr`` (imported: it is
            your own code, as ``hwnas.search(space=...)`` imports it); default the card's
            space by name (never code).
        providers: ONNX Runtime execution providers (default ``["CPUExecutionProvider"]``).

    Returns:
        ``onnxruntime.InferenceSession`` (input ``input``: float32 (N, C, H, W); output
        ``logits``: (N, classes)), or the ``torch.nn.Module`` taking the same input.

    Raises:
        HwnasError: not an entry, a file changed since it was written (sha256), an entry
            without a ``build`` section (written by an older hwnas: load its ONNX model), a
            space of another name than the card's, a space not known in this process, or a
            space changed since the entry was written (another fingerprint than the one its
            card's ``build`` records: a space file edited under the same name; entries written
            before cards recorded one load as they did).
    """
    folder = entry_folder(entry)
    card = read_entry(folder)
    if not torch:
        import onnxruntime as ort

        model = _checked(folder, card, MODEL_FILE)
        try:
            return ort.InferenceSession(str(model), providers=providers or ["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's own exception types
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise HwnasError(f"ONNX Runtime cannot load {model}: {first}") from None
    return _module(folder, card, space)


def _check_fingerprint(folder: Path, build: dict[str, Any], space: Any, weights: bool) -> None:
    """Refuse to rebuild the entry's network from ``space`` when it is not the space the entry
    was built from (its card's ``build.fingerprint``; none in a card written before: not
    checked): the weights of an edited space file of the same shapes still load, and the
    module would silently compute another function than ``model.onnx``.

    Raises:
        HwnasError: another fingerprint, or one that is not a string.
    """
    if "fingerprint" not in build:
        return
    recorded = build["fingerprint"]
    if not isinstance(recorded, str):
        raise HwnasError(f"{folder}: card.json's build fingerprint is not a string")
    now = build_fingerprint(space, weights)
    if recorded != now:
        shown = "".join(c if c.isprintable() else "?" for c in recorded[:100])
        raise HwnasError(
            f"space '{space.name}' changed since this entry was written (fingerprint {shown}, "
            f"now {now}): the rebuilt module would differ from its {MODEL_FILE}; restore the "
            f"space, or run the ONNX model (hwnas.zoo.load(entry)) ({folder})"
        )


def _whole(v: Any, low: int, high: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def _check_build(folder: Path, build: dict[str, Any]) -> None:
    """Refuse a card ``build`` section whose fields are not what hwnas writes, before anything
    is built from it: a class count of 10**9 made torch allocate 256 GB for the classifier, a
    seed of 2**80 or a word was a raw ValueError.

    Raises:
        HwnasError: one line naming the field.
    """
    from hwnas.limits import MAX_CLASSES, MAX_INPUT_SIDE, MAX_SEED

    supernet = build.get("kind") == "supernet"
    checks = {
        "kind": ("space or supernet", build.get("kind", "space") in ("space", "supernet")),
        "space": ("a string", isinstance(build.get("space", ""), str)),
        "arch": ("a string", isinstance(build.get("arch"), str)),
        "num_classes": (f"a whole number 1..{MAX_CLASSES}",
                        _whole(build.get("num_classes"), 1, MAX_CLASSES)),
        "seed": (f"a whole number 0..{MAX_SEED}", _whole(build.get("seed", 0), 0, MAX_SEED)),
    }  # fmt: skip
    if supernet:
        shape = build.get("image_shape")
        checks["image_shape"] = (
            f"three whole numbers, each 1..{MAX_INPUT_SIDE}",
            isinstance(shape, list)
            and len(shape) == 3
            and all(_whole(v, 1, MAX_INPUT_SIDE) for v in shape),
        )
        checks["config"] = ("an object", isinstance(build.get("config"), dict))
    else:
        checks["dataset"] = ("a string", isinstance(build.get("dataset"), str))
    for key, (what, ok) in checks.items():
        if not ok:
            raise HwnasError(
                f"{folder}: card.json's build.{key} must be {what}; not a card hwnas wrote"
            )


def _supernet_config(folder: Path, config: dict[str, Any], space: Any) -> dict[str, Any]:
    """A card's supernet ``build.config``, checked as the ``--set`` size settings of the
    space's supernet are (:data:`hwnas.supernet.settings.SUPERNET_SETTINGS`): only its keys,
    each of its type within its range (a card's ``{"channels": 4096, "cells": 4}`` made
    ``hwnas.zoo.load(entry, torch=True)`` allocate beyond the memory), and fitting together
    and the space (a declared space's ``profile`` one of its datasets).

    Returns:
        The typed settings.

    Raises:
        HwnasError: one line naming the setting.
    """
    from hwnas.supernet import SUPERNETS
    from hwnas.supernet.settings import SUPERNET_SETTINGS, _check_together

    settings = {s.key: s for s in SUPERNET_SETTINGS.get(space.supernet_name, ())}
    out = {}
    for key, value in config.items():
        setting = settings.get(key)
        if setting is None:
            shown = "".join(c if c.isprintable() else "?" for c in str(key)[:40])
            known = ", ".join(settings) or "none"
            raise HwnasError(
                f"{folder}: card.json's build.config has '{shown}', no size setting of the "
                f"{space.supernet_name} supernet (its settings: {known}); not a card hwnas wrote"
            )
        try:
            out[key] = setting.parse(value)
        except HwnasError as exc:  # "--set k=v: k must be ...": the setting's rule
            rule = str(exc).split(": ", 1)[-1]
            raise HwnasError(
                f"{folder}: card.json's build.config {rule}; not a card hwnas wrote"
            ) from None
    try:
        _check_together(out, space.supernet_name)
        SUPERNETS.get(space.supernet_name).check_config(space, out)
    except HwnasError as exc:
        shown = str(exc).removeprefix("--set ")
        raise HwnasError(f"{folder}: card.json's build.config {shown}") from None
    return out


def _check_size(folder: Path, build) -> None:
    """Refuse a network that ``build()`` would make of more than
    :data:`hwnas.limits.MAX_PARAMETERS` parameters and buffers, counted on PyTorch's meta
    device (shapes only, no memory): every setting within its range still combines into
    85e9 parameters (the nasbench201 supernet at 1024 channels and 64 cells), and a million
    classes into a classifier of 2e9. A network the meta device cannot build is left to the
    build itself.

    Raises:
        HwnasError: one line with the count.
    """
    import torch

    from hwnas.limits import MAX_PARAMETERS

    try:
        with torch.device("meta"):
            module = build()
        count = sum(t.numel() for t in (*module.parameters(), *module.buffers()))
    except Exception:  # noqa: BLE001 - not buildable on the meta device: not counted
        return
    if count > MAX_PARAMETERS:
        raise HwnasError(
            f"{folder}: card.json's build section makes a network of {count:.3g} parameters "
            f"({4 * count / 2**30:.3g} GiB of float32), more than the {MAX_PARAMETERS:.3g} hwnas "
            "builds from a card; refused (run its ONNX model: hwnas.zoo.load(entry))"
        )


def _module(folder: Path, card: dict[str, Any], given: Any):
    import torch

    from hwnas.spaces import SearchSpace, get_space

    build = card.get("build")
    if not isinstance(build, dict):
        raise HwnasError(
            f"{folder}: the card has no 'build' section (written by an older hwnas): load its "
            "ONNX model (hwnas.zoo.load(entry))"
        )
    _check_build(folder, build)
    name = build.get("space", card.get("space"))
    if isinstance(given, SearchSpace):
        space = given
    elif given:  # the caller's own: a FILE.py:ATTR is imported, as hwnas.search(space=) does
        space = get_space(given, code=True)
    else:
        try:  # the card's name, read from a file: never code
            space = get_space(name)
        except HwnasError as exc:
            raise HwnasError(
                f"{exc}; the space is not saved with the entry: pass it, "
                "hwnas.zoo.load(entry, torch=True, space=...) with the space made in Python, "
                "its file.py:attr, or its file's path (space='path/to/space.yaml')"
            ) from None
    if space.name != name:
        raise HwnasError(f"{folder} is a model of space '{name}', not '{space.name}'")
    weights_card = card.get("weights") if isinstance(card.get("weights"), dict) else {}
    weights = weights_card.get("file")
    _check_fingerprint(folder, build, space, bool(weights))
    state = None
    if weights:
        path = _checked(folder, card, weights)
        try:  # tensors only: PyTorch's restricted unpickler refuses code
            with warnings.catch_warnings():  # its pickle-protocol warning, on refused files
                warnings.simplefilter("ignore", UserWarning)
                state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # pickle.UnpicklingError, RuntimeError (not a torch file)
            raise HwnasError(  # torch's own text advises weights_only=False: not shown
                f"{path} holds more than tensors, or is not a PyTorch file "
                f"({type(exc).__name__}); refused: loading anything else could run code"
            ) from None
    with torch.random.fork_rng(devices=[]):  # building draws random weights: not the user's
        if build.get("kind") == "supernet":
            from hwnas.limits import input_size
            from hwnas.supernet import SUPERNETS

            cls = SUPERNETS.get(space.supernet_name)
            shape = tuple(int(v) for v in build["image_shape"])
            input_size(f"{folder}: card.json's build.image_shape", (1, *shape))
            config = _supernet_config(folder, build["config"], space)
            arch = space.parse(build["arch"])
            _check_size(folder, lambda: cls(space, int(build["num_classes"]), shape, config))
            supernet = cls(space, int(build["num_classes"]), shape, config)
            module = supernet.extract(arch)
        else:
            spec = space.dataset(build["dataset"])
            classes = int(build["num_classes"])
            arch = space.parse(build["arch"])

            def make():
                return space.build(
                    arch,
                    build["dataset"],
                    num_classes=None if classes == spec.num_classes else classes,
                )

            _check_size(folder, make)
            if "seed" in build:
                torch.manual_seed(int(build["seed"]))
            module = make()
    if state is not None:
        try:
            module.load_state_dict(state, strict=True)
        except RuntimeError as exc:
            first = (str(exc).strip().splitlines() or [""])[0]
            raise HwnasError(
                f"{folder}: {WEIGHTS_FILE} does not fit the network of space '{space.name}' "
                f"rebuilt for this entry (was the space changed?): {first}"
            ) from None
    elif card.get("weights_kind") == "trained":  # read_entry's: an object's kind, or a word
        raise HwnasError(f"{folder}: trained weights, but no {WEIGHTS_FILE} named in the card")
    for attr in ("hwnas_build",):
        module.__dict__.pop(attr, None)
    return module.cpu().eval()
