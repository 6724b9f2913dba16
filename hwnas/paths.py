"""Where hwnas keeps user state: the measurement store, default studies and user profiles.

The home folder is ``HWNAS_HOME`` if set, else the platform's user data folder
(``~/.local/share/hwnas`` on Linux).
"""

from __future__ import annotations

import os
from pathlib import Path


def hwnas_home() -> Path:
    """The hwnas home folder (not created here)."""
    env = os.environ.get("HWNAS_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("hwnas", appauthor=False))


def default_store_path() -> Path:
    """Default SQLite file of the measurement store."""
    return hwnas_home() / "measurements.db"


def default_storage_url() -> str:
    """Default Optuna storage URL: one SQLite file holding every study."""
    return f"sqlite:///{(hwnas_home() / 'studies.db').resolve()}"
