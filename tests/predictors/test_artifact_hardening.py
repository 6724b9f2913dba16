"""Predictor artifacts, cards and calibration files handed over are read without trusting them:
a pipe, a zip bomb, a malformed or oversized card, an oversized or ambiguous CSV each give one
line (an HwnasError; ``error: ...`` and exit 2 at the CLI), never a hang, a memory blow-up or a
traceback; and artifacts trained from user tables say what they were trained on."""

from __future__ import annotations

import json
import os
import shutil
import zipfile

import numpy as np
import pytest
from helpers import hwnas_main

from hwnas.errors import HwnasError
from hwnas.predictors import list_artifacts, load_predictor
from hwnas.predictors.data import reference_indices
from hwnas.predictors.meta import MetaPredictor, read_card
from hwnas.spaces import get_space

SPACE = get_space("nasbench201")


def one_error_line(r) -> str:
    """The single ``error: ...`` line of a CLI run that exited 2."""
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


def artifact_copy(tmp_path, name="copy", **card_changes):
    """A copy of the shipped nasbench201-help artifact, its card changed (None: removed)."""
    art = tmp_path / name
    shutil.copytree(list_artifacts()["nasbench201-help"], art)
    card = json.loads((art / "card.json").read_text())
    card["name"] = name
    for key, value in card_changes.items():
        if value is None:
            card.pop(key)
        else:
            card[key] = value
    (art / "card.json").write_text(json.dumps(card))
    return art


def with_model(art, **model):
    card = json.loads((art / "card.json").read_text())
    card["model"].update(model)
    (art / "card.json").write_text(json.dumps(card))
    return art


# -- weights.npz -----------------------------------------------------------------------------


def test_a_pipe_for_weights_is_refused_not_waited_on(tmp_path):
    art = artifact_copy(tmp_path)
    (art / "weights.npz").unlink()
    os.mkfifo(art / "weights.npz")  # np.load waited forever on it
    with pytest.raises(HwnasError, match="weights.npz: not a regular file"):
        MetaPredictor(art)


def test_a_zip_bomb_for_weights_is_refused_before_unpacking(tmp_path):
    art = artifact_copy(tmp_path)
    arrays = dict(np.load(art / "weights.npz"))
    with zipfile.ZipFile(art / "weights.npz", "w", zipfile.ZIP_DEFLATED) as zf:
        for key, value in arrays.items():
            with zf.open(f"{key}.npy", "w") as fh:
                np.lib.format.write_array(fh, value)
        with zf.open("pad.npy", "w", force_zip64=True) as fh:  # 65 MiB of zeros, 65 KB packed
            np.lib.format.write_array(fh, np.zeros(2**23 + 2**17))
    assert (art / "weights.npz").stat().st_size < 2_000_000
    with pytest.raises(HwnasError, match=r"unpack to \d+ MiB, more than the 64 MiB"):
        MetaPredictor(art)


def test_an_array_header_larger_than_its_bytes_is_refused(tmp_path):
    art = artifact_copy(tmp_path)
    arrays = dict(np.load(art / "weights.npz"))
    small = np.zeros(4, dtype=np.float32).tobytes()
    header = {"descr": "<f4", "fortran_order": False, "shape": (2**40,)}
    with zipfile.ZipFile(art / "weights.npz", "w") as zf:
        for key, value in arrays.items():
            with zf.open(f"{key}.npy", "w") as fh:
                np.lib.format.write_array(fh, value)
        with zf.open("huge.npy", "w") as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            fh.write(small)
    with pytest.raises(HwnasError, match=r"'huge.npy' declares shape \(1099511627776,\)"):
        MetaPredictor(art)


def test_weights_that_disagree_with_the_card_are_refused(tmp_path):
    art = artifact_copy(tmp_path)
    card = json.loads((art / "card.json").read_text())
    card["training_devices"] = card["training_devices"][:-1]
    (art / "card.json").write_text(json.dumps(card))
    with pytest.raises(HwnasError, match="encoder has 13 outputs, the card names 12 training"):
        MetaPredictor(art)


@pytest.mark.parametrize(
    ("card_grid", "weights"),
    [({"sigma_noise": [1e308]}, None), (None, ("space_h0_w", 1e38)), (None, ("space_scale", 0.0))],
    ids=["noise 1e308", "weights 1e38", "scale 0"],
)
def test_an_artifact_no_adaptation_can_use_is_one_line_at_predict(card_grid, weights, tmp_path):
    """Numbers the card checks let through but no training writes (a noise of 1e308, a weight
    of 1e38, a feature scale of 0) left every setting of the grid without a finite fit:
    `hwnas predict --predictor DIR` ended in 'need at least one array to stack'."""
    art = artifact_copy(tmp_path)
    if card_grid:
        card = json.loads((art / "card.json").read_text())
        card["model"]["grid"].update(card_grid)
        (art / "card.json").write_text(json.dumps(card))
    if weights:
        with np.load(art / "weights.npz") as z:
            arrays = {k: z[k] for k in z.files}
        arrays[weights[0]][...] = weights[1]
        np.savez(art / "weights.npz", **arrays)
    r = hwnas_main("predict", "--predictor", str(art), "--device", "fpga", "--arch", "1")
    line = one_error_line(r)
    assert "cannot be adapted on these values" in line and "weights.npz hold numbers" in line


# -- card.json -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"training_devices": None}, "has no 'training_devices'"),
        ({"training_devices": "pixel3"}, "training_devices must be a list of names"),
        ({"metrics": []}, r"metrics must list latency_ms and/or energy_mj, got \[\]"),
        ({"metrics": ["latency_s"]}, "metrics must list latency_ms and/or energy_mj"),
        ({"model": "x"}, "model must be an object, got 'x'"),
        ({"name": "\x1b[31mred"}, r"name must be a printable name, got '\\x1b\[31mred'"),
        ({"kind": "flops"}, "kind must be 'meta'"),
        ({"grid": {"alpha": ["x", None]}}, r"model.grid.alpha must hold finite numbers"),
        ({"grid": {"sigma_beta": []}}, r"model.grid.sigma_beta must be a list of 1 to 16"),
        ({"grid": {"alpha": [0.5] * 300}}, "model.grid.alpha has 300 values, more than 16"),
        ({"grid": {"tau": [-1.0]}}, "model.grid.tau values must be positive"),
        ({"grid": {"alpha": [2.0]}}, r"model.grid.alpha values must be in \[0, 1\]"),
        ({"grid": {"alpha": [0.0] * 16, "tau": [0.1] * 16}}, "11520 settings, more than"),
        ({"additive_features": "graph"}, "model.additive_features must be a list of"),
        ({"additive_features": []}, "model.additive_features must be a list of"),
        ({"proxies": ["flops"]}, "model.proxies must be a list of macs"),
        ({"encoder": {"hidden": [10**9]}}, "model.encoder.hidden must be at most"),
    ],
)
def test_malformed_card_fields_are_one_line_errors(change, expected, tmp_path):
    keys = ("training_devices", "model", "name", "kind", "metrics")
    top = {k: v for k, v in change.items() if k in keys}
    art = artifact_copy(tmp_path, **top)
    rest = {k: v for k, v in change.items() if k not in top}
    if rest:
        with_model(art, **rest)
    with pytest.raises(HwnasError, match=expected) as err:
        read_card(art)
    assert "\n" not in str(err.value)
    with pytest.raises(HwnasError, match=expected):
        load_predictor(str(art))


def test_predictor_list_shows_a_broken_user_artifact_and_the_others(hwnas_home, tmp_path):
    user = hwnas_home / "latency_predictors"
    user.mkdir()
    artifact_copy(user, "nodev", training_devices=None)
    artifact_copy(user, "mine")
    damaged = artifact_copy(user, "damaged")  # its weights' bytes flipped: listed as healthy
    raw = bytearray((damaged / "weights.npz").read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (damaged / "weights.npz").write_bytes(bytes(raw))
    r = hwnas_main("predictor", "list")
    assert r.returncode == 0, r.stderr
    assert "nasbench201-help" in r.stdout and "mine" in r.stdout
    broken = sorted(ln for ln in r.stdout.splitlines() if ln.startswith("broken"))
    assert len(broken) == 2 and "broken predictor artifact nodev:" in broken[1]
    assert "has no 'training_devices' (skipped)" in broken[1]
    assert broken[0].startswith("broken predictor artifact damaged: cannot read predictor "
                                "weights")  # fmt: skip
    listed = json.loads(hwnas_main("predictor", "list", "--json").stdout)
    assert "mine" in [p["name"] for p in listed["predictors"]]
    assert sorted(listed["broken"]) == ["damaged", "nodev"]


def test_meta_is_a_kind_not_an_artifact_name():
    with pytest.raises(HwnasError) as err:
        load_predictor("meta", "nasbench201")
    text = str(err.value)
    assert "'meta' is the kind of the meta-learned artifacts" in text
    assert "did you mean meta" not in text and "nasbench201-help" in text
    with pytest.raises(HwnasError) as err:
        load_predictor("mata")
    assert "meta" not in str(err.value).split("known:")[1].split(", ")


# -- calibration CSV -------------------------------------------------------------------------


def calibration_csv(path, header="arch,latency_ms", extra=""):
    rows = [f"{SPACE.arch_at(i).text},{1.0 + i / 10000}{extra}" for i in range(0, 1000, 100)]
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_an_oversized_calibration_file_is_refused_unread(tmp_path):
    cal = calibration_csv(tmp_path / "sparse.csv")
    os.truncate(cal, 2**30)  # sparse: 1 GiB, mostly NUL bytes; read in full it took 3 GB
    r = hwnas_main("predict", "--calibration", str(cal), "--arch", "5")
    assert "1024 MiB, more than the 64 MiB such a file may have" in one_error_line(r)


def test_a_pipe_for_calibration_is_refused(tmp_path):
    os.mkfifo(tmp_path / "fifo.csv")
    r = hwnas_main("predict", "--calibration", str(tmp_path / "fifo.csv"), "--arch", "5")
    assert "not a regular file" in one_error_line(r)


def test_a_repeated_value_column_is_refused(tmp_path):
    cal = calibration_csv(tmp_path / "dup.csv", "arch,latency_ms,latency_ms", extra=",9")
    r = hwnas_main("predict", "--calibration", str(cal), "--arch", "5")
    line = one_error_line(r)
    assert f"{cal}: column 'latency_ms' appears more than once" in line
    r = hwnas_main("measure", "import", "--device", "newdev", str(cal))
    assert "column 'latency_ms' appears more than once" in one_error_line(r)
    # trailing empty columns a spreadsheet writes are not names repeated
    calibration_csv(tmp_path / "ok.csv", "arch,latency_ms,,", extra=",,")
    r = hwnas_main("predict", "--calibration", str(tmp_path / "ok.csv"), "--arch", "5")
    assert r.returncode == 0, r.stderr


# -- training --------------------------------------------------------------------------------


def recorded_device(hwnas_home, name: str, rows: list[int]) -> None:
    """A user recorded device with a nasbench201 table of ``rows`` (pixel3's values)."""
    from hwnas.devices import reload_profiles
    from hwnas.predictors.data import get_column

    y = get_column("nasbench201", "pixel3").values
    tables = hwnas_home / "devices" / "tables"
    tables.mkdir(exist_ok=True)
    lines = ["index,latency_ms", *(f"{i},{0.5 * y[i]:.4f}" for i in rows)]
    (tables / f"{name}.csv").write_text("\n".join(lines) + "\n")
    (hwnas_home / "devices" / f"{name}.yaml").write_text(
        f"name: {name}\nkind: recorded\nclass: board\ndescription: test\nsource: test\n"
        f"batch_size: 1\ntables:\n  nasbench201:\n    latency_ms: {{file: tables/{name}.csv}}\n"
    )
    reload_profiles()


def test_a_device_with_too_few_values_is_refused_before_training(hwnas_home):
    recorded_device(hwnas_home, "tiny", [1, 37, 100, 200])
    r = hwnas_main("predictor", "train", "--space", "nasbench201", "--devices", "pixel3,tiny",
                   "--name", "t2", "--steps", "5")  # fmt: skip
    line = one_error_line(r)
    assert "device column 'tiny' has 4 values among the 15625 training architectures" in line
    assert "needs at least 20 per device" in line
    assert not (hwnas_home / "latency_predictors" / "t2").exists()  # nothing trained


def test_partial_tables_are_reported_by_the_architectures_they_have(hwnas_home):
    """Two user tables of about 400 and 200 rows: the artifact says it was trained on the
    architectures they have, not the space's 15,625."""
    ref = list(reference_indices("nasbench201"))
    a, b = set(range(3, 12000, 30)) | set(ref), set(range(3, 12000, 60)) | set(ref)
    recorded_device(hwnas_home, "parta", sorted(a))
    recorded_device(hwnas_home, "partb", sorted(b))
    r = hwnas_main("predictor", "train", "--space", "nasbench201", "--devices", "parta,partb",
                   "--name", "p", "--steps", "5", env={"COLUMNS": "200"})  # fmt: skip
    assert r.returncode == 0, r.stderr
    card = json.loads((hwnas_home / "latency_predictors" / "p" / "card.json").read_text())
    assert card["training_archs"]["count"] == len(a | b) and card["training_archs"]["of"] == 15625
    assert card["training_archs"]["per_device"] == {"parta": len(a), "partb": len(b)}
    assert f"{len(a | b)} (partb: {len(b)})" in r.stdout
    assert f"2 columns x {len(a | b)} architectures with values" in r.stderr


def rows_without_reference() -> list[int]:
    """400-odd table indices, none of them a reference cell nor computing the function of one
    (no isomorphic stand-in)."""
    from hwnas.predictors.data import _isomorphism_classes

    classes = _isomorphism_classes("nasbench201")
    ref = set(classes[list(reference_indices("nasbench201"))])
    return [i for i in range(3, 12000, 30) if classes[i] not in ref]


def test_a_table_without_the_reference_set_is_refused_before_training(hwnas_home):
    """A custom artifact is scored by adapting on each device's reference values: a table
    without them was trained for nothing, then failed."""
    recorded_device(hwnas_home, "noref", rows_without_reference())
    r = hwnas_main("predictor", "train", "--space", "nasbench201", "--devices", "pixel3,noref",
                   "--name", "p", "--steps", "5")  # fmt: skip
    line = one_error_line(r)
    assert "'noref' has values for 0 of the 10 reference architectures" in line
    assert not (hwnas_home / "latency_predictors" / "p").exists()


def test_a_column_without_reference_values_is_scaled_by_its_own_rows(tmp_path):
    """Meta-training scales a column by its mean on the reference set, or on the training
    rows when that is not there: a column without any reference value got a NaN scale, so
    none of its values was used, and the cost prior's fit hit a singular matrix."""
    from hwnas.predictors.data import Column, get_column
    from hwnas.predictors.train import meta_train

    pixel3 = get_column("nasbench201", "pixel3")
    values = np.full_like(pixel3.values, np.nan)
    rows = rows_without_reference()
    values[rows] = 0.5 * pixel3.values[rows]
    part = Column("part", "latency_ms", values, "test")
    card = meta_train("nasbench201", [pixel3, part], tmp_path / "a", "a", steps=5)
    pred = MetaPredictor(tmp_path / "a")
    assert np.isfinite(pred.prior_space.cov).all() and np.isfinite(pred.prior_space.mean).all()
    assert card["training_archs"]["per_device"] == {"pixel3": 15625, "part": len(rows)}


def test_a_custom_artifact_cannot_take_a_shipped_or_kind_name(hwnas_home):
    for name, expected in (
        ("nasbench201", "--name nasbench201 is the name of a shipped predictor artifact"),
        ("flops", "--name flops is a predictor kind"),
    ):
        r = hwnas_main("predictor", "train", "--space", "fbnet", "--devices", "pixel3,raspi4",
                       "--name", name, "--steps", "5")  # fmt: skip
        assert expected in one_error_line(r)
    assert not (hwnas_home / "latency_predictors").exists()


def test_kernels_seed_is_range_checked():
    r = hwnas_main("predictor", "kernels", "--device", "cpu-fast", "--seed", "-1")
    assert "--seed" in one_error_line(r) and "0<=x<=" in r.stderr
    r = hwnas_main("predictor", "kernels", "--help")
    assert "about" in r.stdout and "small budget times" in " ".join(r.stdout.split())
