"""Every user mistake gives one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import pytest
from helpers import hwnas_cli

BAD_ARCH = "|nor_conv_3x3~0|+|conv_5x5~0|none~1|+|none~0|none~1|none~2|"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["search", "--device", "pixel99"], "unknown device 'pixel99'"),
        (["search", "--device", "pixel3", "--space", "darts"], "unknown search space 'darts'"),
        (["search", "--device", "pixel3", "--dataset", "mnist"], "unknown dataset 'mnist'"),
        (["search", "--device", "pixel8"], "device 'pixel8' cannot measure"),
        (["search", "--device", "pixel3", "--strategy", "annealing"], "unknown strategy"),
        (["search", "--device", "cpu", "--strategy", "surrogate"], "needs every candidate's"),
        (["search", "--device", "pixel3", "--objective", "energy"], "no energy_mj"),
        (["search", "--device", "v100_1"], "no recorded measurements for space 'nasbench201'"),
        (
            ["search", "--device", "pixel3", "--storage", "nosuchdb://x"],
            "cannot open study storage",
        ),
        (["search", "--device", "cpu", "--store", "{bad_store}"], "is not usable"),
        (["devices", "--store", "{bad_store}"], "is not usable"),
        (["arch", BAD_ARCH], "unknown operation 'conv_5x5'"),
        (["arch", "99999"], "out of range"),
        (["dashboard", "--storage", "sqlite:///{tmp}/none.db"], "no study database"),
    ],
)
def test_one_line_error_and_exit_2(args, expected, tmp_path):
    bad_store = tmp_path / "bad.db"
    bad_store.write_text("not a database " * 50)
    args = [a.format(bad_store=bad_store, tmp=tmp_path) for a in args]
    r = hwnas_cli(*args, cwd=tmp_path)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    assert not (tmp_path / "runs").exists()  # nothing written for a bad command


def test_usage_errors_exit_2():
    r = hwnas_cli("search")
    assert r.returncode == 2 and "Missing option '--device'" in r.stderr
    assert "Traceback" not in r.stderr
