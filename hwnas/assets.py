"""Where the declarative assets are: in the wheel or beside the package in a source checkout.

The repository keeps ``search_spaces/``, ``devices/`` and ``latency_predictors/`` at its top
level (see the design card); the wheel carries the same folders under ``hwnas/_assets/``.
"""

from __future__ import annotations

from pathlib import Path

ASSET_FOLDERS = ("search_spaces", "devices", "latency_predictors")

_PACKAGE = Path(__file__).resolve().parent


def asset_path(folder: str, *parts: str) -> Path:
    """Path of a shipped asset.

    Args:
        folder: one of ``search_spaces``, ``devices``, ``latency_predictors``.
        *parts: path inside that folder.

    Raises:
        ValueError: for a folder that is not an asset folder.
    """
    if folder not in ASSET_FOLDERS:
        raise ValueError(f"not an asset folder: {folder}")
    installed = _PACKAGE / "_assets" / folder
    base = installed if installed.is_dir() else _PACKAGE.parent / folder
    return base.joinpath(*parts)


def read_yaml(path: Path) -> object:
    """The parsed YAML file at ``path``, read safely with libyaml's C parser where PyYAML has
    it (about 10x faster than the pure-Python one; 45 device profiles are read at every start).

    Raises:
        OSError: the file cannot be read.
        yaml.YAMLError: it is not valid YAML.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(path.read_text(), Loader=loader)  # noqa: S506 - a safe loader
