"""Finding things without knowing their exact names: did-you-mean for every registry name,
`hwnas spaces`, and an unreachable live device offering what can be searched instead."""

from __future__ import annotations

import json

import pytest
from helpers import hwnas_main

from hwnas.cli.runs import find_run
from hwnas.errors import HwnasError


def _one_line_error(r, *parts):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def test_a_misspelt_name_gets_the_closest_known_ones():
    _one_line_error(hwnas_main("search", "--device", "pixle3"), "did you mean pixel3")
    _one_line_error(
        hwnas_main("search", "--device", "pixel3", "--space", "nasbench210"),
        "unknown search space 'nasbench210'; did you mean nasbench201",
    )
    _one_line_error(
        hwnas_main("search", "--device", "pixel3", "--strategy", "fronteir"),
        "did you mean frontier",
    )
    line = _one_line_error(hwnas_main("search", "--device", "zzzz"), "unknown device 'zzzz'; known")
    assert "did you mean" not in line  # nothing close: only the list


def test_spaces_lists_and_shows_every_space(hwnas_home):
    listed = json.loads(hwnas_main("spaces", "--json").stdout)
    rows = {r["space"]: r for r in listed["spaces"]}
    assert {"nasbench201", "fbnet", "ofa", "mobilenetv4", "vit"} <= set(rows)
    assert rows["nasbench201"]["size"] == 15625 and rows["nasbench201"]["accuracy_table"]
    assert rows["mobilenetv4"]["language"] == "declared" and rows["fbnet"]["tabulated"] == 5000
    (hwnas_home / "spaces").mkdir()
    (hwnas_home / "spaces" / "broken.yaml").write_text("name: broken\nstages: [\n")
    r = hwnas_main("spaces", env={"COLUMNS": "80"})
    assert r.returncode == 0 and "mobilenetv4" in r.stdout and "broken space broken" in r.stdout
    shown = hwnas_main("spaces", "show", "nasbench201").stdout
    assert "15,625 architectures, 6 decisions" in shown and "nor_conv_3x3" in shown
    assert "gdas" in shown and "example     |" in shown
    _one_line_error(hwnas_main("spaces", "show", "vitt"), "did you mean vit")


def test_an_unreachable_live_device_offers_the_recorded_and_few_shot_routes(tmp_path):
    # pixel8 is reached over adb: without a phone the one line says what can be done instead
    line = _one_line_error(
        hwnas_main("search", "--device", "pixel8", cwd=tmp_path), "device 'pixel8' cannot measure"
    )
    assert "hwnas search --device pixel3" in line  # the nearest recorded phone
    assert "hwnas refset measure --device pixel8" in line
    assert "hwnas measure import --device pixel8-refset refset/calibration.csv" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("device", ["cuda", "vu9p_hls4ml"])
def test_an_unreachable_devices_energy_routes_name_devices_with_energy(device, capsys):
    """`hwnas search --device cuda --objective energy` without a GPU suggested `hwnas search
    --device titanx_1` (`vu9p_hls4ml`: `--device fpga`), devices without energy: the command
    suggested ran a latency search. Each suggested search keeps `--objective energy` on a
    device with energy; `refset measure` is offered only to a device with a meter."""
    import re

    from hwnas.cli import main
    from hwnas.devices import get_device

    assert main(["search", "--device", device, "--objective", "energy"]) == 2
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
    searches = re.findall(r"hwnas search --device (\S+)( --objective energy)?", line)
    near = searches[0]
    assert near[1] and "energy_mj" in get_device(near[0]).metrics, line
    if device == "vu9p_hls4ml":  # hls4ml cannot build NAS-Bench-201's networks: no refset
        assert len(searches) == 1 and "refset" not in line, line
        assert "its networks cannot run on vu9p_hls4ml" in line
        return
    assert len(searches) == 2, line  # the nearest recorded device, and the imported one
    imported = searches[1]
    assert imported[1] and imported[0] == f"{device}-refset", line
    assert "refset measure --device cuda --metric energy_mj" in line
    assert "(few-shot: predicted energy)" in line


def test_a_run_is_found_by_latest_prefix_or_a_word_that_names_it_alone():
    rows = [
        {"study": "nasbench201-cifar100-pixel3-latency-frontier-seed0",
         "finished_at": "2026-11-24T10"},
        {"study": "nasbench201-cifar100-raspi4-latency-frontier-seed0",
         "finished_at": "2026-11-24T12"},
        {"study": "nasbench201-cifar100-pixel3-latency-frontier-seed1",
         "finished_at": "2026-11-24T11"},
        {"study": "fbnet-cifar100-pixel3-latency-frontier-seed0", "finished_at": None},
    ]
    assert find_run("latest", rows, "db")["study"].startswith("nasbench201-cifar100-raspi4")
    assert find_run("raspi4", rows, "db") is rows[1]
    assert find_run("fbnet", rows, "db") is rows[3]  # a unique prefix
    assert find_run("latest:pixel3", rows, "db") is rows[2]  # unfinished runs are not latest
    assert find_run(rows[0]["study"], rows, "db") is rows[0]  # exact, though a prefix of none
    with pytest.raises(HwnasError, match="'pixel3' matches 3 studies.*latest:pixel3"):
        find_run("pixel3", rows, "db")
    with pytest.raises(HwnasError, match="no study matches 'pixel9'"):
        find_run("pixel9", rows, "db")
    # only an unfinished (killed) run: named, with how to see it and finish it
    with pytest.raises(HwnasError, match="no finished search matches 'latest:fbnet' in db; "
                       "unfinished \\(killed, or still running\\): fbnet-cifar100-pixel3-"
                       "latency-frontier-seed0: `hwnas runs show STUDY` shows one"):
        find_run("latest:fbnet", rows, "db")


def test_a_word_of_a_study_name_is_matched_whole_before_as_a_part():
    """`latest:cifar10` picked the newest cifar100 run, and `cifar10` said "matches 7 studies",
    though cifar10 is a whole word of one study's name alone (helper-80); seed1 is not seed10."""
    rows = [
        {"study": "nasbench201-cifar10-fpga-latency-frontier-seed1", "finished_at": "2026-12-01"},
        {"study": "nasbench201-cifar100-pixel3-latency-tpe-seed10", "finished_at": "2026-12-02"},
        {"study": "nasbench201-cifar100-gold-latency-frontier-seed0", "finished_at": "2026-12-03"},
    ]
    assert find_run("latest:cifar10", rows, "db") is rows[0]
    assert find_run("cifar10", rows, "db") is rows[0]
    assert find_run("seed1", rows, "db") is rows[0]
    assert find_run("latest:cifar", rows, "db") is rows[2]  # no whole word: a part, as before
