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
    """The parsed YAML file at ``path``: :func:`hwnas.yamlfile.read_yaml` (plain values only,
    aliases bounded, libyaml's C parser).

    Raises:
        OSError: the file cannot be read.
        yaml.YAMLError: it is not valid YAML, or beyond hwnas's limits (an alias bomb, a
            self-referencing alias, nesting too deep).
    """
    from hwnas.yamlfile import read_yaml as read

    return read(path)
