"""The supernet checkpoint of a run folder (``supernet.pt``): written after every epoch, read
when the same search runs again with the same ``--out`` (it resumes after the last epoch).

A run folder may come from someone else (a downloaded run used as ``--out``), so the file is
read with ``torch.load(weights_only=True)``: PyTorch's restricted unpickler, which builds
tensors, state dicts and plain Python values and refuses any other object (unpickling one could
run code). What hwnas writes fits that: the supernet's and the strategy's state dicts (tensors,
numbers, the numpy generator's state as a dict of ints), the search's fingerprint (a string)
and the epoch history as a JSON string. The fingerprint is checked before anything else in the
file is used; a checkpoint of another search, or of another format, is ignored (training
starts over and replaces it).
"""

from __future__ import annotations

import json
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


def _refuse_another_seed(what: str, theirs: Any, ours: str) -> None:
    """Refuse a checkpoint of the same search with another ``--seed``: workers of one study
    may each have their own seed, and two of them on one ``--out`` trained each over the
    other's supernet.pt, and the last zoo export removed the other's models.

    Raises:
        HwnasError: the two fingerprints differ in the seed alone.
    """
    try:
        a, b = json.loads(theirs), json.loads(ours)
    except (TypeError, ValueError):
        return
    if not (isinstance(a, dict) and isinstance(b, dict)):
        return
    differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
    if differ == {"seed"}:
        raise HwnasError(
            f"{what} is the supernet of the same search with seed {a['seed']} (this one: seed "
            f"{b['seed']}): give each seed its own --out, or the workers train over each "
            "other's supernet"
        )


def read_checkpoint(path: Path, fingerprint: str) -> dict[str, Any] | None:
    """The checkpoint at ``path`` if it belongs to the search with ``fingerprint``.

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
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        return None
    if state.get("fingerprint") != fingerprint:
        _refuse_another_seed(what, state.get("fingerprint"), fingerprint)
        return None  # another search's: trained again (settings that differ name another study)
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
