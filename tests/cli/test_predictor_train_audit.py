"""`hwnas predictor train` / `eval` as a user types them (an audit): a custom artifact of an
existing name was replaced without a word (another device set, new weights), an artifact name
that is a file ended in a traceback after training, `eval --devices ,` in a StopIteration
traceback, and empty or table-less arguments got messages naming the wrong thing."""

from __future__ import annotations

import json

import pytest
from helpers import hwnas_main

TRAIN = ("predictor", "train", "--space", "nasbench201", "--steps", "20")


def test_an_existing_artifact_is_replaced_only_when_asked(tmp_path, hwnas_home):
    root = tmp_path / "arts"
    r = hwnas_main(*TRAIN, "--devices", "pixel3,raspi4", "--name", "mine", "--root", str(root))
    assert r.returncode == 0, r.stderr
    card = (root / "mine" / "card.json").read_text()
    r = hwnas_main(*TRAIN, "--devices", "pixel3,fpga", "--name", "mine", "--root", str(root))
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"error: {root / 'mine'} already holds an artifact: choose another --name, or "
        "--overwrite to replace it"
    )
    assert (root / "mine" / "card.json").read_text() == card
    r = hwnas_main(*TRAIN, "--devices", "pixel3,fpga", "--name", "mine", "--root", str(root),
                   "--overwrite")  # fmt: skip
    assert r.returncode == 0, r.stderr
    card = json.loads((root / "mine" / "card.json").read_text())
    assert card["training_devices"] == ["pixel3", "fpga"]
    # the folder's artifacts are listed with --root (they are not in the home's list)
    listed = json.loads(hwnas_main("predictor", "list", "--root", str(root), "--json").stdout)
    assert [(p["name"], p["path"]) for p in listed["predictors"]] == [("mine", str(root / "mine"))]
    assert "mine" not in hwnas_main("predictor", "list", "--json").stdout
    (root / "notes").mkdir()
    (root / "notes" / "todo.txt").write_text("mine\n")
    r = hwnas_main(*TRAIN, "--devices", "pixel3,fpga", "--name", "notes", "--root", str(root))
    assert r.returncode == 2 and "already holds other files" in r.stderr


@pytest.mark.parametrize(
    "args, expected",
    [
        ([*TRAIN, "--devices", "pixel3,raspi4", "--name", "afile", "--root", "{tmp}"],
         "{tmp}/afile is a file: the artifact is a folder; choose another --name"),
        ([*TRAIN, "--devices", "", "--name", "e", "--root", "{tmp}"],
         "--devices given empty: name what to train on"),
        (["predictor", "train", "--space", "mobilenetv4", "--devices", "a,b", "--name", "e",
          "--root", "{tmp}"],
         "no device has a recorded table of space 'mobilenetv4', so none can train or score a "
         "predictor of it (spaces with tables: fbnet, nasbench201, ofa)"),
        (["predictor", "train", "fbnet-help", "fbnet-help", "--root", "{tmp}"],
         "NAMES names fbnet-help more than once"),
        (["predictor", "eval", "nasbench201", "--devices", ","],
         "--devices ',' names no device column: name some, or leave it out"),
        (["predictor", "eval", "nasbench201", "--devices", ""],
         "--devices '' names no device column: name some, or leave it out"),

    ],
)  # fmt: skip
def test_bad_arguments_are_one_line_before_training(args, expected, tmp_path, hwnas_home):
    (tmp_path / "afile").write_text("y\n")
    r = hwnas_main(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.returncode == 2, r.stdout
    assert r.stderr.strip() == "error: " + expected.replace("{tmp}", str(tmp_path))
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["predictor", "eval", "nasbench201", "--devices", "pixle3"],
         "error: unknown recorded column of nasbench201 'pixle3'; did you mean pixel3"),
        ([*TRAIN, "--devices", "pixel3,raspy4", "--name", "t"],
         "error: unknown recorded column of nasbench201 'raspy4'; did you mean raspi4"),
    ],
)  # fmt: skip
def test_a_device_column_mistyped_is_named_with_the_closest(args, expected, hwnas_home):
    """`--devices pixle3` listed 46 columns and no suggestion, where a search's --device
    offers the closest name."""
    r = hwnas_main(*args)
    assert r.returncode == 2 and r.stderr.startswith(expected), r.stderr
    assert r.stderr.count("\n") == 1


def test_refset_measure_of_two_spaces_in_one_folder_keeps_each_in_its_own(tmp_path, hwnas_home):
    """docs/predictors.md times mobilenetv4's and vit's reference sets one after the other; by
    default both went to refset-<device>/calibration.csv, and the second stopped ("holds
    latency_ms ... measure to another --out")."""
    for space in ("nasbench201", "fbnet"):
        r = hwnas_main("refset", "measure", "--device", "pixel3", "--space", space, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
    assert (tmp_path / "refset-pixel3" / "calibration.csv").is_file()
    fbnet = (tmp_path / "refset-pixel3-fbnet" / "calibration.csv").read_text()
    assert len(fbnet.splitlines()) == 11  # its 10 reference architectures, and the header
