"""Fixtures of the device tests."""

from __future__ import annotations

import pytest

from hwnas.cli import main
from hwnas.devices import reload_profiles


@pytest.fixture
def cli(capsys, monkeypatch, tmp_path):
    """``cli(*args, profiles=None)``: run the hwnas entry point in this process (as the
    ``hwnas`` script does) from ``tmp_path``, with ``HWNAS_DEVICES_PATH`` set to ``profiles``;
    returns (exit status, stdout, stderr)."""
    monkeypatch.chdir(tmp_path)

    def run(*args, profiles=None):
        if profiles is not None:
            monkeypatch.setenv("HWNAS_DEVICES_PATH", str(profiles))
        reload_profiles()
        capsys.readouterr()
        status = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return status, out, err

    return run
