"""The wheel carries the assets, so an installed hwnas works outside the repository."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_ships_assets_and_works_outside_the_repo(tmp_path):
    pytest.importorskip("hatchling")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("hwnas-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for asset in (
        "hwnas/_assets/devices/pixel3.yaml",
        "hwnas/_assets/devices/recorded/nasbench201_latency_ms.csv.gz",
        "hwnas/_assets/search_spaces/nasbench201/space.yaml",
        "hwnas/_assets/search_spaces/nasbench201/accuracy.csv.gz",
        "hwnas/_assets/search_spaces/reference_sets.json",
        "hwnas/_assets/latency_predictors/nasbench201-help/card.json",
        "hwnas/_assets/latency_predictors/nasbench201-help/weights.npz",
        "hwnas/_assets/latency_predictors/fbnet/weights.npz",
        "hwnas/_assets/devices/data/cpu_ground_truth/card.json",
        "hwnas/_assets/devices/data/cpu_ground_truth/networks.csv",
    ):
        assert asset in names
    assert any(n.endswith("NOTICE") for n in names)
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    code = (
        "import hwnas, hwnas.devices as d, hwnas.spaces as s;"
        f"assert str(hwnas.__file__).startswith({str(target)!r});"
        "print(d.get_device('pixel3').column('nasbench201','latency_ms')[1],"
        " s.get_space('nasbench201').table_accuracy('cifar100')[1]);"
        "from hwnas.predictors import list_artifacts;"
        f"assert str(list_artifacts()['nasbench201-help']).startswith({str(target)!r})"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["17.2381", "70.2933"]
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "hwnas = hwnas.entry:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    # README command 1's search, small, from the unpacked wheel and outside the repository
    main_cmd = _readme_main_command()
    search = main_cmd.split("&& hwnas ", 1)[1].split() + ["--budget", "20"]
    r = subprocess.run(
        [sys.executable, "-c", "import sys; from hwnas.cli import main; sys.exit(main())", *search],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin", "HWNAS_HOME": str(tmp_path / "h")},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.glob("runs/*/pareto.csv")) and list(tmp_path.glob("runs/*/zoo/*/*.onnx"))


def _readme_main_command() -> str:
    import re

    text = (REPO / "README.md").read_text()
    section = text.split("## Get going", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section)[0]
