"""The supernet checkpoint of a run folder (``supernet.pt``): written after every epoch, read
when the same search runs again with the same ``--out`` (it resumes after the last epoch).

A run folder may come from someone else (a downloaded run used as ``--out``), so the file is
read with ``torch.load(weights_only=True)``: PyTorch's restricted unpickler, which builds
tensors, state dicts and plain Python values and refuses any other object (unpickling one could
run code). What hwnas writes fits that: the supernet's and the strategy's state dicts (tensors,
numbers, the numpy generator's state as a dict of ints), the search's fingerprint (a string)
and the epoch history as a JSON string. The fingerprint is checked before anything else in the
file is used; a checkpoint of another search, or of another format, is ignored (training
starts over and replaces it, after a warning line naming the settings that differ). The
fingerprint holds only the settings training reads: one that differs in the fine-tuning alone
is the same supernet.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwnas.errors import HwnasError

FORMAT = 2
"""Layout of ``supernet.pt`` (1: any pickled Python objects; refused now, as any file that
only an unrestricted unpickler reads)."""


def save_checkpoint(
    path: Path,
    fingerprint: str,
    epoch: int,
    supernet: dict,
    strategy: dict,
    history: list,
    cost: dict | None = None,
) -> None:
    """Write the checkpoint atomically (a temporary file renamed over ``path``).

    Args:
        path: ``supernet.pt`` in the run folder.
        fingerprint: the search's settings (:func:`hwnas.jobs.supernet._fingerprint`).
        epoch: epochs done.
        supernet: the supernet's ``state_dict()``.
        strategy: the strategy's ``state_dict()`` (tensors, numbers, strings, dicts, lists).
        history: one dict of numbers per epoch (stored as JSON).
        cost: the lookup table the hardware term trained with
            (:func:`hwnas.supernet.cost.frozen_lut`; JSON-able), so that a resumed training
            steers with the same one, whatever the measurement store holds by then.
    """
    import torch

    from hwnas.paths import temporary

    tmp = temporary(path)  # named by host and process: workers never share one
    torch.save(
        {
            "format": FORMAT,
            "fingerprint": fingerprint,
            "epoch": int(epoch),
            "supernet": supernet,
            "strategy": _plain(strategy),
            "history": json.dumps(history, default=float),
            "cost": json.dumps(cost, default=float) if cost is not None else "",
        },
        tmp,
    )
    tmp.replace(path)


def _plain(value: Any) -> Any:
    """``value`` with numpy scalars (a learning rate a schedule computed with numpy) turned
    into Python numbers, which ``weights_only`` loading accepts; tensors and the rest as is."""
    import numpy as np

    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def _settings(fingerprint: Any) -> dict[str, Any] | None:
    """A fingerprint's settings (a JSON object), or None where it is none."""
    try:
        out = json.loads(fingerprint)
    except (TypeError, ValueError):
        return None
    return out if isinstance(out, dict) else None


def _refuse_another_seed(what: str, a: dict[str, Any] | None, b: dict[str, Any] | None) -> None:
    """Refuse a checkpoint of the same search with another ``--seed``: workers of one study
    may each have their own seed, and two of them on one ``--out`` trained each over the
    other's supernet.pt, and the last zoo export removed the other's models.

    Raises:
        HwnasError: the two fingerprints' settings differ in the seed alone.
    """
    if a is None or b is None:
        return
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    if differ == {"seed"}:
        raise HwnasError(
            f"{what} is the supernet of the same search with seed {a['seed']} (this one: seed "
            f"{b['seed']}): give each seed its own --out, or the workers train over each "
            "other's supernet"
        )


def differences(theirs: dict[str, Any], ours: dict[str, Any], most: int = 3) -> str:
    """The settings two fingerprints differ in, as the command line names them
    (``--epochs 4 there, 2 here``; ``--set lr=0.1 there, not set here``), the first ``most``
    and how many more."""

    def text(v: Any) -> str:
        return "not set" if v is None else f"{v:g}" if isinstance(v, float) else str(v)

    out = []
    for key in sorted(theirs.keys() | ours.keys()):
        a, b = theirs.get(key), ours.get(key)
        if a == b:
            continue
        if isinstance(a, dict) or isinstance(b, dict):
            a, b = a if isinstance(a, dict) else {}, b if isinstance(b, dict) else {}
            for k in sorted(a.keys() | b.keys()):
                if a.get(k) != b.get(k):
                    out.append(f"--set {k}={text(a.get(k))} there, {text(b.get(k))} here"
                               if k in a and k in b else
                               f"--set {k}={text(a[k])} there, not set here" if k in a else
                               f"--set {k}={text(b[k])} here, not set there")  # fmt: skip
        elif key == "space_fingerprint":
            out.append("the space's file or model differs")
        else:
            out.append(f"--{key.replace('_', '-')} {text(a)} there, {text(b)} here")
    more = f" and {len(out) - most} more" if len(out) > most else ""
    return "; ".join(out[:most]) + more


def read_checkpoint(
    path: Path,
    fingerprint: str,
    log: Callable[[str], None] | None = None,
    training: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if it belongs to the search with ``fingerprint``.

    Args:
        path: ``supernet.pt`` in the run folder.
        fingerprint: the settings the supernet's training reads
            (:func:`hwnas.jobs.supernet._fingerprint`).
        log: gets one ``warning:`` line when a checkpoint there is not used (it was trained
            under other settings, named; or it is of an older format): training starts over
            and replaces it.
        training: the settings of a fingerprint that training reads (applied to the file's
            fingerprint, so that one written when it held more, such as the fine-tuning
            epochs, still matches).

    Returns:
        ``{"epoch": int, "supernet": state dict, "strategy": state dict, "history": [dict],
        "cost": the frozen lookup table or None}``, or None: no file, or the checkpoint of
        another search or format (start over).

    Raises:
        HwnasError: a file that is not a checkpoint hwnas can read safely (it holds objects
            other than tensors and plain values, or is truncated): one line; the file is left
            alone. The checkpoint of this search with another seed (:func:`_refuse_another_seed`).
    """
    import pickle

    import torch

    if not path.is_file():
        return None
    what = f"--out {path.parent}: {path.name}"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        raise HwnasError(
            f"{what} holds objects other than tensors and plain values (refused: loading it "
            "could run code); delete it to start over, or use another --out"
        ) from None
    except Exception as exc:  # truncated, not a torch file
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise HwnasError(
            f"{what} is not a readable checkpoint ({first}); delete it to start over"
        ) from None
    say = log or (lambda _m: None)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        say(f"warning: {what} is a checkpoint of an older hwnas: training starts over and "
            "replaces it")  # fmt: skip
        return None
    theirs, ours = _settings(state.get("fingerprint")), _settings(fingerprint)
    if theirs is not None and training is not None:
        theirs = training(theirs)
    if state.get("fingerprint") != fingerprint and (theirs is None or theirs != ours):
        _refuse_another_seed(what, theirs, ours)
        why = differences(theirs, ours) if theirs is not None and ours is not None else ""
        say(  # another search's: trained again (settings that differ name another study)
            f"warning: {what} was trained under other settings ({why or 'not readable'}): "
            "training starts over and replaces it"
        )
        return None
    try:
        history = json.loads(state["history"])
        cost = json.loads(state["cost"]) if state.get("cost") else None
        if cost is not None and not isinstance(cost, dict):
            raise TypeError("a lookup table expected")
        epoch = int(state["epoch"])
        if not (isinstance(state["supernet"], dict) and isinstance(state["strategy"], dict)):
            raise TypeError("state dicts expected")
        if not isinstance(history, list) or epoch < 0:
            raise ValueError("epoch history expected")
    except (KeyError, TypeError, ValueError) as exc:
        why = f"{what} is a damaged checkpoint ({exc}); delete it to start over"
        raise HwnasError(why) from None
    return {
        "epoch": epoch,
        "supernet": state["supernet"],
        "strategy": state["strategy"],
        "history": history,
        "cost": cost,
    }
