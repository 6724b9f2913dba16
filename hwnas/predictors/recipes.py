"""How each shipped predictor artifact is built: its space and training devices.

``<space>`` artifacts are trained on every recorded column of the space (latency and energy);
``<space>-help`` artifacts only on the meta-train and meta-valid devices of the standard split
(HELP, NeurIPS 2021), so that the split's unseen devices stay unseen in every evaluation.
Card scores: unseen devices for ``-help`` artifacts (adapted on the 10 reference values, scored
on every architecture: hwnas's protocol "all", not HELP's own, which
``experiments/help_protocol.py --protocol help`` reproduces), the training devices themselves
otherwise (marked as seen).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwnas.errors import UnknownNameError
from hwnas.predictors.data import SPLITS, Column, recorded_columns


@dataclass(frozen=True)
class Recipe:
    """A shipped artifact: its space and which devices it is meta-trained on.

    Attributes:
        space: search-space name.
        devices: "all" (every recorded column of the space) or "help" (the standard split's
            meta-train and meta-valid devices).
    """

    space: str
    devices: str

    def columns(self) -> tuple[list[Column], list[Column], dict[str, Any]]:
        """(training columns, unseen evaluation columns, split description for the card)."""
        cols = recorded_columns(self.space)
        if self.devices == "all":
            return cols, [], {"meta_train": [c.key for c in cols], "unseen": []}
        split = SPLITS[self.space]
        by_key = {c.key: c for c in cols}
        train = [by_key[k] for k in (*split["meta_train"], *split["meta_valid"])]
        test = [by_key[k] for k in split["meta_test"]]
        return train, test, {k: list(v) for k, v in split.items()}


RECIPES: dict[str, Recipe] = {
    "nasbench201": Recipe("nasbench201", "all"),
    "nasbench201-help": Recipe("nasbench201", "help"),
    "fbnet": Recipe("fbnet", "all"),
    "fbnet-help": Recipe("fbnet", "help"),
    "ofa": Recipe("ofa", "all"),
}


def get_recipe(name: str) -> Recipe:
    """Raises: UnknownNameError for a name that is not a shipped artifact."""
    if name not in RECIPES:
        raise UnknownNameError("predictor recipe", name, list(RECIPES))
    return RECIPES[name]


PROTOCOL_UNSEEN = (
    "unseen devices, hwnas protocol 'all' (not HELP's own protocol, for which see "
    "experiments/help_protocol.py --protocol help): adapt on the 10 reference architectures "
    "(reference_sets.json) measured on each unseen device, predict every architecture of the "
    "space's table, score against the recorded values of the others (rows: how many)"
)
PROTOCOL_SEEN = (
    "seen devices (in the training set): adapt on each device's 10 reference-set values, "
    "predict every architecture, score on the others; not a test of unseen devices"
)


def score_artifact(path: Path, columns: list[Column], protocol: str) -> dict[str, Any]:
    """Card scores of the artifact at ``path`` on ``columns``: on each column's values other
    than the reference values it is adapted on (:func:`hwnas.predictors.evaluate.
    evaluate_columns`; each device's ``rows`` says how many).

    Raises:
        HwnasError: a column with too few such values (meta-training refuses it first).
    """
    from hwnas.predictors.evaluate import evaluate_columns, mean_scores
    from hwnas.predictors.meta import MetaPredictor

    space = MetaPredictor(path).space_name
    started = time.time()
    per = evaluate_columns(lambda: MetaPredictor(path), space, columns)
    return {
        "protocol": protocol,
        "devices": {k: {m: round(v, 4) for m, v in s.items()} for k, s in per.items()},
        "mean": {m: round(v, 4) for m, v in mean_scores(per).items()},
        "seconds": round(time.time() - started, 1),
    }


def build(
    name: str,
    root: Path,
    steps: int = 3000,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    rows: list[int] | None = None,
    rows_source: str = "",
) -> dict[str, Any]:
    """Meta-train the shipped artifact ``name`` into ``root/name`` and score it.

    Args:
        rows: restrict meta-training to these table indices (default: every architecture).
        rows_source: where ``rows`` came from, for the card.

    Returns:
        The card written.

    Raises:
        UnknownNameError: not a recipe name.
    """
    from hwnas.predictors.train import meta_train, write_card

    recipe = get_recipe(name)
    train, unseen, split = recipe.columns()
    out = root / name
    card = meta_train(
        recipe.space, train, out, name, split=split, seed=seed, steps=steps, log=log,
        rows=rows, rows_source=rows_source,
    )  # fmt: skip
    if unseen:
        card["scores"] = score_artifact(out, unseen, PROTOCOL_UNSEEN)
    else:
        card["scores"] = score_artifact(out, train, PROTOCOL_SEEN)
    write_card(out, card)
    return card


def build_custom(
    name: str,
    space: str,
    device_keys: list[str],
    out: Path,
    steps: int = 3000,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
    rows: list[int] | None = None,
    rows_source: str = "",
) -> dict[str, Any]:
    """Meta-train an artifact on the named recorded columns (``device`` or ``device:metric``),
    optionally only on the architectures ``rows`` (table indices).

    Raises:
        HwnasError: an unknown column or fewer than two.
    """
    from hwnas.predictors.train import meta_train, write_card

    cols = {c.key: c for c in recorded_columns(space)}
    missing = [k for k in device_keys if k not in cols]
    if missing:  # a device name mistyped: the closest named
        raise UnknownNameError(f"recorded column of {space}", missing[0], list(cols))
    train = [cols[k] for k in device_keys]
    split = {"meta_train": device_keys, "unseen": []}
    card = meta_train(
        space, train, out, name, split=split, seed=seed, steps=steps, log=log,
        rows=rows, rows_source=rows_source,
    )  # fmt: skip
    card["scores"] = score_artifact(out, train, PROTOCOL_SEEN)
    write_card(out, card)
    return card
