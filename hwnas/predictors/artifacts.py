"""Predictor kinds (:data:`PREDICTORS`) and artifacts by name: where they are found and how one
is loaded (:func:`load_predictor`). Re-exported by :mod:`hwnas.predictors`."""

from __future__ import annotations

from pathlib import Path

from hwnas.assets import asset_path
from hwnas.errors import HwnasError, UnknownNameError
from hwnas.paths import hwnas_home
from hwnas.predictors.base import Predictor
from hwnas.registry import Registry

PREDICTORS: Registry = Registry("predictor")
PREDICTORS.register("flops", "hwnas.predictors.proxy:FlopsProxy")
PREDICTORS.register("regressor", "hwnas.predictors.regressor:DeviceRegressor")
PREDICTORS.register("meta", "hwnas.predictors.meta:MetaPredictor")
PREDICTORS.register("kernel", "hwnas.predictors.kernels.model:KernelPredictor")


DECLARED_ARTIFACT = "fbnet"
"""The artifact that predicts declared spaces by default, through its graph path (graph features
of the space's networks, adapted on the device's reference-set values): ``fbnet``, meta-trained
on GPUs, CPUs, phones, boards and accelerators over inverted-residual networks (depthwise and
pointwise convolutions, like MobileNetV4's). ``python experiments/declared_latency.py``
compares the artifacts on live CPU measurements (on this loaded machine they were within
measurement noise of each other)."""


def _declared(space: str) -> bool:
    """Whether ``space`` is a declared space (graph features from its file, no artifact)."""
    from hwnas.spaces import get_space

    return get_space(space).featurizer_name != space


def artifact_folders() -> list[Path]:
    """Where artifacts are looked up by name: the user's folder first, then the shipped one."""
    return [hwnas_home() / "latency_predictors", asset_path("latency_predictors")]


def list_artifacts(root: Path | None = None) -> dict[str, Path]:
    """Artifact name -> folder, for every folder with a ``card.json``: in ``root`` (a folder
    ``hwnas predictor train --root`` wrote) where given, else in the home's and the shipped
    folders (user ones win)."""
    found: dict[str, Path] = {}
    for folder in [Path(root)] if root is not None else reversed(artifact_folders()):
        if folder.is_dir():
            for card in sorted(folder.glob("*/card.json")):
                found[card.parent.name] = card.parent
    return dict(sorted(found.items()))


def resolve_artifact(name_or_path: str) -> Path:
    """The folder of an artifact given by name or path.

    Raises:
        UnknownNameError: neither an existing folder nor a known artifact name.
    """
    path = Path(name_or_path).expanduser()
    if path.is_dir() or "/" in name_or_path or name_or_path.startswith("."):
        if path.is_file():  # its weights.npz or card.json: the artifact is the folder
            raise HwnasError(
                f"{path} is a file: a predictor artifact is a folder (card.json + weights.npz)"
                f"; name its folder {path.parent}"
            )
        if not path.is_dir():
            raise HwnasError(f"predictor artifact folder not found: {path}")
        return path
    known = list_artifacts()
    if name_or_path not in known:
        if name_or_path == "meta":  # the kind of the artifacts, not one of them
            raise HwnasError(
                "predictor 'meta' is the kind of the meta-learned artifacts, not one: name an "
                f"artifact ({', '.join(known)}) or its folder"
            )
        loadable = [n for n in PREDICTORS.names() if n != "meta"]  # "meta" needs an artifact
        raise UnknownNameError("predictor", name_or_path, [*known, *loadable])
    return known[name_or_path]


def shipped_artifact_names() -> list[str]:
    """Names of the artifacts shipped with hwnas (a user artifact of one of these names would
    hide it: ``hwnas predictor train`` refuses them)."""
    folder = asset_path("latency_predictors")
    return sorted(c.parent.name for c in folder.glob("*/card.json")) if folder.is_dir() else []


def load_predictor(name_or_path: str, space: str | None = None) -> Predictor:
    """A fresh (un-adapted) predictor: a kind of :data:`PREDICTORS` or an artifact.

    Args:
        name_or_path: "flops", "regressor", an artifact name ("nasbench201-help") or folder;
            the name of a declared space without an artifact of that name means
            :data:`DECLARED_ARTIFACT`.
        space: if given, the artifact must be for this space (any artifact serves a declared
            space, through its graph path).

    Raises:
        HwnasError: unknown name, unreadable artifact, an artifact of another space or format
            version.
    """
    if name_or_path in PREDICTORS and name_or_path != "meta":
        return PREDICTORS.get(name_or_path)()
    from hwnas.predictors.meta import MetaPredictor

    declared = space is not None and _declared(space)
    if declared and name_or_path == space and name_or_path not in list_artifacts():
        name_or_path = DECLARED_ARTIFACT
    predictor = MetaPredictor(resolve_artifact(name_or_path))
    if space is not None and predictor.space_name != space and not declared:
        raise HwnasError(
            f"predictor artifact '{predictor.name}' ({predictor.path}) is for space "
            f"'{predictor.space_name}', not '{space}'"
        )
    return predictor
