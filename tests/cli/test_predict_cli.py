"""`hwnas predict`, `hwnas refset export`, `hwnas measure import`, `hwnas predictor`: a new
device from files, and one-line errors for bad input."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import hwnas_cli, hwnas_main

from hwnas.cli import main
from hwnas.predictors.data import get_column, measured_reference, reference_indices
from hwnas.predictors.metrics import scores
from hwnas.spaces import get_space

SPACE = get_space("nasbench201")
REF = list(reference_indices("nasbench201"))


def write_csv(path, header, rows):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)
    return path


def calibration(path, device="fpga", n=10, metric="latency_ms"):
    y = get_column("nasbench201", device).values
    rows = [(SPACE.arch_at(i).text, y[i]) for i in measured_reference("nasbench201", y)[:n]]
    return write_csv(path, ["arch", metric], rows)


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_predict_from_calibration_file(tmp_path, capsys):
    cal = calibration(tmp_path / "cal.csv")
    idx = list(range(0, 15625, 313))
    archs = write_csv(tmp_path / "archs.csv", ["arch"], [[i] for i in idx])
    out = tmp_path / "pred.csv"
    code, _o, err = run(
        ["predict", "--calibration", cal, "--archs", archs, "--out", out,
         "--predictor", "nasbench201-help"], capsys,
    )  # fmt: skip
    assert code == 0, err
    assert "nasbench201-help" in err
    rows = list(csv.DictReader(open(out)))
    assert list(rows[0]) == ["arch", "latency_ms", "std", "low90", "high90", "predictor"]
    assert len(rows) == len(idx) and rows[0]["arch"] == SPACE.arch_at(0).text
    pred = np.array([float(r["latency_ms"]) for r in rows])
    assert all(float(r["std"]) > 0 for r in rows)
    for r in rows:  # the 90% interval: mean +- 1.645 std, from 0 (a latency is positive)
        mean, std = float(r["latency_ms"]), float(r["std"])
        assert float(r["low90"]) == pytest.approx(max(mean - 1.645 * std, 0.0), rel=1e-3, abs=1e-6)
        assert float(r["high90"]) == pytest.approx(mean + 1.645 * std, rel=1e-3)
    truth = get_column("nasbench201", "fpga").values[idx]
    assert scores(pred, truth)["spearman_rho"] >= 0.95


def test_a_prediction_on_a_recorded_device_names_the_value_its_table_records(tmp_path, capsys):
    """`hwnas predict --arch 5 --device pixel3` printed the adapted predictor's 10.82 ms alone
    while pixel3's table records 8.398 ms for that cell: the recorded value is now on the line
    (and in Python, ``Prediction.recorded``); a calibration file has no table to name."""
    code, out, err = run(["predict", "--arch", "5", "--device", "pixel3"], capsys)
    assert code == 0, err
    value = get_column("nasbench201", "pixel3").values[5]
    assert out.strip().endswith(f"; pixel3's table records {value:.4g} ms"), out
    code, out, err = run(["predict", "--arch", "5", "--device", "pi5_onnx", "--metric",
                          "energy_mj"], capsys)  # fmt: skip
    assert code == 0 and re.search(r"pi5_onnx's table records [0-9.]+ mJ$", out.strip()), out
    cal = calibration(tmp_path / "cal.csv")
    code, out, err = run(["predict", "--arch", "5", "--calibration", cal], capsys)
    assert code == 0 and "records" not in out, (out, err)
    # a table of a batch of 256 adapts the predictor to whole batches: so its prediction is
    code, out, err = run(["predict", "--arch", "5", "--device", "titanx_256"], capsys)
    assert code == 0 and re.search(r": [0-9.]+ ms per batch of 256 \(std ", out), out


def test_an_outlier_of_a_recorded_table_is_not_to_be_measured_again(capsys):
    """The reference value 2080ti_64's OFA table holds for ks=7,3,7,... (24.42 ms) is taken for
    a gross error; the warning said "measure it again" of a published table's value."""
    code, out, err = run(["predict", "--arch", "0", "--device", "2080ti_64", "--space", "ofa"],
                         capsys)  # fmt: skip
    assert code == 0, err
    warning = next(line for line in err.splitlines() if "gross error" in line)
    assert "the recorded latency_ms of" in warning and "outlier of the published table" in warning
    assert "measure it again" not in warning


def test_a_bad_calibration_value_is_named_and_discounted(tmp_path, capsys):
    """One of the ten reference values measured 3x too fast: `hwnas predict` names it, and its
    predictions rank the space as the clean values' do."""
    y = get_column("nasbench201", "gold_6226").values
    rows = [(SPACE.arch_at(i).text, y[i] * (0.3 if k == 7 else 1.0)) for k, i in enumerate(REF)]
    cal = write_csv(tmp_path / "cal.csv", ["arch", "latency_ms"], rows)
    idx = list(range(0, 15625, 97))
    archs = write_csv(tmp_path / "archs.csv", ["arch"], [[i] for i in idx])
    out = tmp_path / "pred.csv"
    code, _o, err = run(["predict", "--calibration", cal, "--archs", archs, "--out", out], capsys)
    assert code == 0, err
    warned = [line for line in err.splitlines() if "gross error" in line]
    assert len(warned) == 1 and SPACE.arch_at(REF[7]).text in warned[0], err
    pred = np.array([float(r["latency_ms"]) for r in csv.DictReader(open(out))])
    assert scores(pred, y[idx])["spearman_rho"] >= 0.95


def test_energy_calibration_writes_energy_column(tmp_path, capsys):
    cal = calibration(tmp_path / "cal.csv", "pi5_onnx:energy_mj", metric="energy_mj")
    archs = write_csv(tmp_path / "archs.csv", ["arch"], [[i] for i in (5, 6, 7)])
    out = tmp_path / "pred.csv"
    code, _o, err = run(["predict", "--calibration", cal, "--archs", archs, "--out", out], capsys)
    assert code == 0, err
    header = ["arch", "energy_mj", "std", "low90", "high90", "predictor"]
    assert next(csv.reader(open(out))) == header


def test_a_spreadsheets_semicolon_csv_with_decimal_commas_reads_as_the_comma_csv(
    tmp_path, capsys
):
    """A calibration file saved by a spreadsheet in a decimal-comma locale (BOM, ';' between
    cells, '3,5', CRLF) predicts exactly as the plain file (main: "no 'arch' column (columns:
    arch;latency_ms)"); an OFA arch string, which holds ',' and ';' itself, still reads from a
    comma CSV."""
    from hwnas.predictors.calibration import read_calibration
    from hwnas.spaces import get_space

    plain = calibration(tmp_path / "plain.csv")
    rows = list(csv.reader(open(plain)))
    text = "\r\n".join(f"{a};{v}".replace(".", ",") if i else f"{a};{v}"
                        for i, (a, v) in enumerate(rows))  # fmt: skip
    (tmp_path / "excel.csv").write_text(text + "\r\n", encoding="utf-8-sig", newline="")
    printed = []
    for cal in (plain, tmp_path / "excel.csv"):
        code, out, err = run(["predict", "--calibration", cal, "--arch", "5"], capsys)
        assert code == 0, err
        printed.append(out)
    assert printed[0] == printed[1]
    ofa = get_space("ofa")
    archs = [a.text for a in ofa.sample(np.random.default_rng(0), 3)]
    assert all("," in a and ";" in a for a in archs)
    write_csv(tmp_path / "ofa.csv", ["arch", "latency_ms"], [[a, 1.5 + i] for i, a in
                                                              enumerate(archs)])  # fmt: skip
    read = read_calibration(tmp_path / "ofa.csv", ofa)
    assert [str(m) for m in read.models] == archs and list(read.values) == [1.5, 2.5, 3.5]


def test_an_onnx_models_energy_on_a_recorded_board_is_in_mj(tmp_path, capsys):
    """`hwnas predict --device pi5_onnx --metric energy_mj --onnx m.onnx` (the meta-learned
    fallback, adapted on the board's energy values) prints and writes mJ (main: "ms", and a
    latency_ms column, for a prediction of energy)."""
    model = _far_model(tmp_path / "m.onnx", side=32, channels=8)
    out = tmp_path / "pred.csv"
    code, printed, err = run(["predict", "--device", "pi5_onnx", "--metric", "energy_mj",
                              "--onnx", model, "--out", out], capsys)  # fmt: skip
    assert code == 0, err
    assert "adapted on 10 energy_mj values" in err
    num = r"[\d.e+-]+"
    assert re.search(rf"m\.onnx: {num} mJ \(std {num} mJ; 90% interval {num}-{num} mJ\)", printed)
    assert " ms" not in printed
    header = ["arch", "energy_mj", "std", "low90", "high90", "predictor"]
    assert next(csv.reader(open(out))) == header


@pytest.mark.slow
def test_refset_export_import_and_search_on_the_imported_device(tmp_path, hwnas_home):
    ref_dir = tmp_path / "refset"
    r = hwnas_main("refset", "export", "--space", "nasbench201", "--out", str(ref_dir))
    assert r.returncode == 0, r.stderr
    onnx_files = sorted(ref_dir.glob("*.onnx"))
    assert len(onnx_files) == 10
    rows = list(csv.DictReader(open(ref_dir / "calibration.csv")))
    assert [r["arch"] for r in rows] == [SPACE.arch_at(i).text for i in REF]
    # "time" the files on the device: here the fpga's recorded values stand in for a tool
    y = get_column("nasbench201", "fpga").values
    for row, i in zip(rows, REF):
        row["latency_ms"] = y[i]
    write_csv(ref_dir / "calibration.csv", list(rows[0]), [list(r.values()) for r in rows])
    filled = (ref_dir / "calibration.csv").read_text()
    # exporting again into the folder must not blank the values typed in (main did)
    r = hwnas_main("refset", "export", "--space", "nasbench201", "--out", str(ref_dir))
    assert r.returncode == 2 and "holds 10 measured value(s)" in r.stderr, r.stderr
    assert (ref_dir / "calibration.csv").read_text() == filled
    # an ONNX file is a valid arch cell for prediction
    archs = write_csv(tmp_path / "archs.csv", ["arch"], [[0], [f"refset/{onnx_files[0].name}"]])
    r = hwnas_main("predict", "--calibration", str(ref_dir / "calibration.csv"),
                  "--archs", str(archs), "--out", str(tmp_path / "p.csv"))  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert len(list(csv.DictReader(open(tmp_path / "p.csv")))) == 2

    r = hwnas_main("measure", "import", "--device", "myboard", str(ref_dir / "calibration.csv"))
    assert r.returncode == 0, r.stderr
    assert "10 measurements imported" in r.stderr
    profile = (hwnas_home / "devices" / "myboard.yaml").read_text()
    assert "kind: imported" in profile
    r = hwnas_main("measure", "import", "--device", "myboard", str(ref_dir / "calibration.csv"))
    assert "0 measurements imported, 10 already stored" in r.stderr

    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "myboard", "--budget", "25", "--max-latency", "4",
                  "--no-zoo", "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["device_measurements"] == 10 and summary["predictor"]["name"] == "nasbench201"
    assert summary["best"] is not None and summary["best_verified"] is False
    line = next(s for s in r.stdout.splitlines() if s.startswith("costs predicted by "))
    hint = "time the best on the device, then hwnas measure import --device myboard FILE.csv"
    assert line.endswith(f"best NOT verified (myboard cannot measure: {hint})")
    # doing so: the best's one value is imported (a new device needs 3) and verifies it
    best = summary["best"]["arch"]
    timed = write_csv(tmp_path / "best.csv", ["arch", "latency_ms"], [[best, y[SPACE.index(
        SPACE.parse(best))]]])  # fmt: skip
    r = hwnas_main("measure", "import", "--device", "newboard", str(timed))
    assert r.returncode == 2 and "1 calibration rows; at least 3" in r.stderr, r.stderr
    r = hwnas_main("measure", "import", "--device", "myboard", str(timed))
    assert r.returncode == 0 and "1 measurements imported" in r.stderr, r.stderr
    r = hwnas_main("search", "--device", "myboard", "--budget", "25", "--max-latency", "4",
                  "--no-zoo", "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["best_verified"] is True and summary["best"]["arch"] == best
    assert summary["best"]["latency_ms"] == pytest.approx(y[SPACE.index(SPACE.parse(best))])
    # `hwnas predict` of that architecture printed the predictor's guess alone, while the
    # store holds the value the user measured (and the search uses): it ends the line now
    r = hwnas_main("predict", "--device", "myboard", "--arch", best, "--arch", "0")
    assert r.returncode == 0, r.stderr
    mine, other = r.stdout.strip().splitlines()
    value = y[SPACE.index(SPACE.parse(best))]
    assert mine.endswith(f"; measured {value:.4g} ms on myboard (the measurement store)"), mine
    assert "measured" not in other and "records" not in other, other
    # a search on predicted costs reads the table's accuracy: the user's function would be
    # ignored (it was, silently), so it is refused before any work
    function = Path(__file__).parents[1] / "spaces" / "my_model.py"
    r = hwnas_main(
        "search", "--device", "myboard", "--accuracy", f"{function}:val_accuracy",
        "--data", "digits", "--budget", "5", "--out", tmp_path / "run2",
    )  # fmt: skip
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "cannot measure, so its costs would be predicted" in r.stderr
    assert not (tmp_path / "run2").exists()


def test_measure_without_subcommand_prints_help(capsys):
    code, out, _err = run(["measure"], capsys)
    assert code == 0 and "import" in out


def test_predictor_eval_and_list(capsys):
    code, out, err = run(["predictor", "eval", "fbnet-help", "--devices", "eyeriss"], capsys)
    assert code == 0, err
    assert "eyeriss" in out and "unseen" in out
    assert "┃ device  ┃ split  ┃ rows ┃ Spearman rho ┃" in out  # every column named (one had none)
    code, out, _ = run(["predictor", "list"], capsys)
    assert code == 0 and "nasbench201-help" in out and "ofa" in out


BAD_ARCH = "|nor_conv_3x3~0|+|conv_5x5~0|none~1|+|none~0|none~1|none~2|"


def _old_artifact(tmp_path, **model):
    """A copy of nasbench201-help whose card says format version 0, or (with ``model``) whose
    card's model section has those settings."""
    from hwnas.predictors import list_artifacts

    old = tmp_path / "old-artifact"
    shutil.copytree(list_artifacts()["nasbench201-help"], old)
    card = json.loads((old / "card.json").read_text())
    if model:
        card["model"].update(model)
    else:
        card["format_version"] = 0
    (old / "card.json").write_text(json.dumps(card))
    return old


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("malformed", "unknown operation 'conv_5x5'"),
        ("out_of_range", "out of range"),
        ("duplicate", "duplicate arch"),
        ("non_positive", "must be positive"),
        ("not_a_number", "is not a number"),
        ("too_few", "at least 3 are needed"),
        ("no_value_column", "needs exactly one value column"),
        ("other_space", "is for space 'fbnet', not 'nasbench201'"),
        ("other_version", "format version 0"),
        ("bad_outlier", "model.outlier must be a probability in [0, 0.5), got 2"),
        ("bad_select", "model.select must be one of evidence, loo, family-loo, hybrid, got 'bma'"),
        ("missing_file", "file not found"),
        ("archs_without_arch_column", "no 'arch' column"),
        ("unknown_predictor", "unknown predictor 'nope'"),
    ],
)
def test_bad_calibration_and_predictor_one_line_exit_2(case, expected, tmp_path, capsys):
    cal = calibration(tmp_path / "cal.csv")
    archs = write_csv(tmp_path / "archs.csv", ["arch"], [[1], [2]])
    lines = open(cal).read().splitlines()
    predictor = "nasbench201-help"
    if case == "malformed":
        lines[3] = f"{BAD_ARCH},3.0"
    elif case == "out_of_range":
        lines[3] = "99999,3.0"
    elif case == "duplicate":
        lines[3] = lines[1]
    elif case == "non_positive":
        lines[3] = lines[3].rsplit(",", 1)[0] + ",-1"
    elif case == "not_a_number":
        lines[3] = lines[3].rsplit(",", 1)[0] + ",fast"
    elif case == "too_few":
        lines = lines[:3]
    elif case == "no_value_column":
        lines[0] = "arch,time"
    elif case == "other_space":
        predictor = "fbnet-help"
    elif case == "other_version":
        predictor = str(_old_artifact(tmp_path))
    elif case == "bad_outlier":  # a card someone sent: a setting that would make every fit NaN
        predictor = str(_old_artifact(tmp_path, outlier=2))
    elif case == "bad_select":  # a weighting this version does not know: refused on load
        predictor = str(_old_artifact(tmp_path, select="bma"))
    elif case == "missing_file":
        cal = tmp_path / "none.csv"
    elif case == "archs_without_arch_column":
        archs = write_csv(tmp_path / "archs.csv", ["name"], [[1]])
    elif case == "unknown_predictor":
        predictor = "nope"
    if case != "missing_file":
        cal.write_text("\n".join(lines) + "\n")
    code, _out, err = run(
        ["predict", "--calibration", cal, "--archs", archs, "--out", tmp_path / "p.csv",
         "--predictor", predictor], capsys,
    )  # fmt: skip
    assert code == 2, err
    err_lines = [line for line in err.splitlines() if line.strip()]
    assert len(err_lines) == 1 and err_lines[0].startswith("error: "), err
    assert expected in err_lines[0], err
    assert not (tmp_path / "p.csv").exists()


def test_bad_input_through_the_real_cli(tmp_path):
    cal = calibration(tmp_path / "cal.csv", n=2)
    r = hwnas_cli("measure", "import", "--device", "newdev", str(cal))
    assert r.returncode == 2 and r.stderr.startswith("error: ") and "at least 3" in r.stderr
    assert "Traceback" not in r.stderr
    r = hwnas_main("measure", "import", "--device", "pixel3", str(calibration(tmp_path / "c.csv")))
    assert r.returncode == 2 and "is a recorded device" in r.stderr
    r = hwnas_main("search", "--device", "fpga", "--measurement-budget", "2")
    assert r.returncode == 2 and "at least 4" in r.stderr
    r = hwnas_main("search", "--device", "fpga", "--predictor", "fbnet-help")
    assert r.returncode == 2 and "is for space 'fbnet'" in r.stderr


def test_predictor_train_on_the_architectures_of_a_file(tmp_path, capsys):
    archs = [[i] for i in range(0, 900, 20)] + [[SPACE.arch_at(i).text] for i in (901, 1500)]
    f = write_csv(tmp_path / "measured.csv", ["arch", "latency_ms"], [[*a, 1.0] for a in archs])
    code, out, err = run(
        ["predictor", "train", "--space", "nasbench201", "--devices", "pixel3,1080ti_1",
         "--name", "mine", "--archs", f, "--steps", "5", "--root", tmp_path / "arts"], capsys,
    )  # fmt: skip
    assert code == 0, err
    card = json.loads((tmp_path / "arts" / "mine" / "card.json").read_text())
    assert card["training_archs"]["count"] == 47 and card["training_archs"]["of"] == 15625
    assert card["training_archs"]["source"] == "measured.csv"
    assert "mine" in out and "47" in out


@pytest.mark.parametrize(
    ("rows", "args", "expected"),
    [
        (None, [], "file not found"),
        ([["name"], [1]], [], "no 'arch' column"),
        ([["arch"], [BAD_ARCH]], [], "unknown operation 'conv_5x5'"),
        ([["arch"], [99999]], [], "out of range"),
        ([["arch"], *[[i] for i in range(30)], [3]], [], "duplicate arch"),
        ([["arch"], *[[i] for i in range(5)]], [], "needs at least 20"),
        ([["arch"], ["model.onnx"]], [], "is an ONNX file"),
        ([["arch"], *[[i] for i in range(30)]], ["nasbench201-help", "fbnet-help"], "one space"),
        ([["arch"], [" ".join(["skip"] * 22)]], ["fbnet-help"], "not among the 5000"),
        ([["arch"], *[[i] for i in range(30)]], ["nope"], "unknown predictor recipe 'nope'"),
    ],
)
def test_predictor_train_bad_archs_file_one_line_exit_2(rows, args, expected, tmp_path, capsys):
    args = args or ["nasbench201-help"]
    f = tmp_path / "archs.csv"
    if rows is not None:
        write_csv(f, rows[0], rows[1:])
    code, _out, err = run(
        ["predictor", "train", *args, "--archs", f, "--root", tmp_path / "arts"], capsys
    )
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
    assert not (tmp_path / "arts").exists()


def _printed_ms(out: str, label: str) -> float:
    line = next(line for line in out.splitlines() if line.startswith(f"{label}: "))
    line = re.sub(r"; \S+'s table records [0-9.e+-]+ ms$", "", line)  # a recorded cell's value
    assert line.endswith(" ms)") and "(std " in line, line
    return float(line.split(": ", 1)[1].split()[0])


def test_refset_measure_on_a_live_device_then_predict_one_onnx_model(tmp_path, capsys):
    from hwnas.measure import arch_workload

    ref = tmp_path / "ref"
    code, out, err = run(["refset", "measure", "--device", "cpu-fast", "--out", ref], capsys)
    assert code == 0, err
    assert "10 measured, 0 from the store" in out
    rows = list(csv.DictReader(open(ref / "calibration.csv")))
    assert [r["arch"] for r in rows] == [SPACE.arch_at(i).text for i in REF]
    assert all(float(r["latency_ms"]) > 0 for r in rows)
    code, out, err = run(["refset", "measure", "--device", "cpu-fast", "--out", ref], capsys)
    assert code == 0 and "0 measured, 10 from the store" in out, err  # each measured once

    model = tmp_path / "m.onnx"
    model.write_bytes(arch_workload(SPACE, SPACE.arch_at(5), "cifar100").onnx_bytes())
    code, out, err = run(["predict", "--calibration", ref / "calibration.csv", "--onnx", model],
                         capsys)  # fmt: skip
    assert code == 0, err
    from_file = _printed_ms(out, str(model))
    assert "adapted on 10 latency_ms values" in err
    code, out, err = run(["predict", "--device", "cpu-fast", "--predictor", "nasbench201",
                          "--onnx", model], capsys)  # fmt: skip
    assert code == 0, err
    assert _printed_ms(out, str(model)) == from_file > 0  # the same 10 values, from the store
    assert "from the store" in err

    # a recorded device needs no measurement: its table gives the reference values
    code, out, err = run(["predict", "--device", "pixel3", "--onnx", model, "--arch", "5"], capsys)
    assert code == 0, err
    truth = get_column("nasbench201", "pixel3").values[5]
    for label in (str(model), SPACE.arch_at(5).text):
        assert abs(_printed_ms(out, label) / truth - 1) < 0.3
    assert f"pixel3's table records {truth:.4g} ms" in out  # the arch's line, not the file's
    assert out.count("table records") == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--onnx", "m.onnx"], "--calibration CAL.csv or --device D"),
        (["--device", "pixel3", "--calibration", "cal.csv", "--onnx", "m.onnx"],
         "one way: --calibration CAL.csv or --device D, not both"),
        (["--device", "pixel3"], "nothing to predict"),
        (["--device", "pixel3", "--archs", "archs.csv"], "add --out PRED.csv"),
        (["--device", "pixel3", "--arch", "5", "--out", "cal.csv/p.csv"],  # was a traceback
         "--out's folder cal.csv cannot be created: cal.csv is a file"),  # after the work
        (["--calibration", "cal.csv", "--metric", "energy_mj", "--arch", "5"], "go with --device"),
        (["--device", "cpu-fast", "--arch", "5"], "run `hwnas refset measure --device cpu-fast`"),
        (["--device", "nodev", "--arch", "5"], "unknown device 'nodev'"),
        (["--device", "pixel3", "--metric", "energy_mj", "--arch", "5"], "has no energy_mj"),
        (["--device", "pixel3", "--onnx", "missing.onnx"], "not found"),
        (["--device", "pixel3", "--arch", BAD_ARCH], "unknown operation 'conv_5x5'"),
        (["--device", "cpu-fast", "--onnx", "dyn.onnx"], "input 'x' axis 2 is dynamic ('h'); "
         "only the batch axis may be, as latency depends on the size: give their sizes with "
         "--dim h=N --dim w=N or export the model at that size"),
    ],
)
def test_predict_one_model_bad_input_one_line_exit_2(args, expected, tmp_path, capsys,
                                                     monkeypatch):  # fmt: skip
    import onnx

    monkeypatch.chdir(tmp_path)
    calibration(tmp_path / "cal.csv")
    write_csv(tmp_path / "archs.csv", ["arch"], [[1]])
    dyn = onnx.load(_far_model(tmp_path / "dyn.onnx", side=16, channels=4))
    dims = dyn.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "h", "w"  # a model exported with dynamic H and W
    onnx.save(dyn, tmp_path / "dyn.onnx")
    code, _out, err = run(["predict", *args], capsys)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--device", "nodev"], "unknown device 'nodev'"),
        (["--device", "pixel3", "--metric", "energy_mj"], "has no energy_mj"),
        (["--device", "pixel3", "--space", "nospace"], "unknown search space 'nospace'"),
    ],
)
def test_refset_measure_bad_input_one_line_exit_2(args, expected, tmp_path, capsys):
    code, _out, err = run(["refset", "measure", *args, "--out", tmp_path / "r"], capsys)
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
    assert not (tmp_path / "r" / "calibration.csv").exists()


def test_a_device_measured_on_actively_selected_architectures_is_predicted(tmp_path, capsys):
    """`hwnas refset measure --select active` picks the 10 architectures that pin down the
    predictor's calibration (not the reference set), measures them (here: reads a recorded
    device), and `hwnas predict --calibration` adapts on them; the same command picks the same
    ones again, and a space without a table refuses it in one line before any work."""
    args = ["refset", "measure", "--device", "fpga", "--space", "nasbench201", "--select",
            "active", "--predictor", "nasbench201-help"]  # fmt: skip
    code, out, err = run([*args, "--out", tmp_path / "a"], capsys)
    assert code == 0, err
    rows = list(csv.DictReader(open(tmp_path / "a" / "calibration.csv")))
    picked = [SPACE.index(SPACE.parse(r["arch"])) for r in rows]
    assert len(set(picked)) == 10 and set(picked) != set(REF)
    table = get_column("nasbench201", "fpga").values
    assert [float(r["latency_ms"]) for r in rows] == pytest.approx(table[picked], rel=1e-5)
    assert run([*args, "--out", tmp_path / "b"], capsys)[0] == 0
    again = list(csv.DictReader(open(tmp_path / "b" / "calibration.csv")))
    assert [r["arch"] for r in again] == [r["arch"] for r in rows]

    idx = list(range(0, 15625, 97))
    archs = write_csv(tmp_path / "archs.csv", ["arch"], [[i] for i in idx])
    pred = tmp_path / "pred.csv"
    code, _o, err = run(["predict", "--calibration", tmp_path / "a" / "calibration.csv",
                         "--archs", archs, "--out", pred, "--predictor", "nasbench201-help"],
                        capsys)  # fmt: skip
    assert code == 0, err
    mean = np.array([float(r["latency_ms"]) for r in csv.DictReader(open(pred))])
    assert scores(mean, table[idx])["spearman_rho"] >= 0.9

    code, _o, err = run(["refset", "export", "--space", "mobilenetv4", "--select", "active",
                         "--out", tmp_path / "c"], capsys)  # fmt: skip
    assert code == 2 and "cannot list them" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "c").exists()


def _far_model(path, side=224, channels=64, batch: int | str = 1):
    """An image network unlike NAS-Bench-201's (224x224 input, one wide convolution), exported
    at ``batch`` (a name: a dynamic batch axis)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(
        rng.standard_normal((channels, 3, 3, 3)).astype(np.float32), "W"
    )
    fc = numpy_helper.from_array(rng.standard_normal((10, channels)).astype(np.float32), "F")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, side, side])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 10])
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "F"], ["y"], transB=1),
    ]
    m = helper.make_model(helper.make_graph(nodes, "far", [x], [y], [w, fc]),
                          opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())
    return path


def test_a_model_exported_at_another_batch_than_the_devices_values_is_named(tmp_path, capsys):
    """Graph features describe one sample, so a predictor adapted on batch-1 values (a Pixel
    3's table) predicts a model exported at batch 8 at batch 1 (main printed the same number
    for both, silently); a GPU table at batch 256 predicts at 256. The batch is said beside the
    prediction; a dynamic batch axis, or the device's own batch, gets no word."""
    cases = [(1, "pixel3", None), (8, "pixel3", 1), ("n", "pixel3", None),
             (256, "1080ti_256", None), (1, "1080ti_256", 256), ("n", "1080ti_256", None)]
    for batch, device, said in cases:  # fmt: skip
        model = _far_model(tmp_path / f"b{batch}.onnx", side=32, batch=batch)
        code, out, err = run(["predict", "--device", device, "--onnx", model], capsys)
        assert code == 0 and f"{model}: " in out, err
        warned = [line for line in err.splitlines() if "exported at batch" in line]
        named = f"values of device {device} (batch 256) from its recorded table" in out + err
        assert named == (device == "1080ti_256"), (out, err)  # the values' batch, where not 1
        if said is None:
            assert not warned, (batch, device, err)
        else:
            assert warned == [
                f"warning: {model}: exported at batch {batch}, but the predictor is adapted on "
                f"{device}'s values at batch {said}: this is its latency at batch {said}. Export "
                f"it at batch {said}, or time it at batch {batch} on a live ONNX Runtime device "
                "(hwnas predict --device cpu, hwnas measure)"
            ], err


def _two_inputs(path, side: int | str = 8):
    from onnx import TensorProto, helper

    a, b = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, side, 8]) for n in "ab")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 8, 8])
    m = helper.make_model(helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])],
                                            "two", [a, b], [y]),
                          opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())
    return path


def test_an_onnx_model_is_predicted_alike_however_it_is_given(tmp_path, capsys, monkeypatch):
    """An ONNX file unlike the space's networks, given by --onnx or as a row of --archs, on a
    recorded device or with a calibration file: the same route and the same warning (main:
    an --archs row and a --calibration run skipped the check and printed a tight std)."""
    monkeypatch.chdir(tmp_path)
    far = _far_model(tmp_path / "far.onnx")
    code, out, err = run(["predict", "--device", "pixel3", "--onnx", far], capsys)
    assert code == 0, err
    assert f"warning: {far}: unlike every network" in err
    by_onnx = _printed_ms(out, str(far))
    write_csv(tmp_path / "archs.csv", ["arch"], [["far.onnx"], [5]])
    code, out, err = run(["predict", "--device", "pixel3", "--archs", "archs.csv", "--out",
                          "pred.csv"], capsys)  # fmt: skip
    assert code == 0, err
    assert "warning: far.onnx: unlike every network" in err
    rows = list(csv.DictReader(open(tmp_path / "pred.csv")))
    assert [r["arch"] for r in rows] == ["far.onnx", SPACE.arch_at(5).text]
    assert float(rows[0]["latency_ms"]) == pytest.approx(by_onnx, rel=1e-3)
    cal = calibration(tmp_path / "cal.csv", device="pixel3")
    code, out, err = run(["predict", "--calibration", cal, "--onnx", far], capsys)
    assert code == 0, err
    assert f"warning: {far}: unlike every network" in err and "calibration network" in err
    line = next(x for x in out.splitlines() if x.startswith(str(far)))
    value, std = (float(v) for v in re.findall(r"([\d.e+-]+) ms", line)[:2])
    assert std >= 0.5 * value  # widened
    # two inputs are fed and predicted; a model hwnas could not time is not predicted either
    two = _two_inputs(tmp_path / "two.onnx")
    code, out, err = run(["predict", "--device", "pixel3", "--onnx", two], capsys)
    assert code == 0 and f"{two}: " in out, err
    tall = _two_inputs(tmp_path / "tall.onnx", side="height")
    code, _out, err = run(["predict", "--device", "pixel3", "--onnx", tall], capsys)
    assert code == 2 and "input 'a' axis 2 is dynamic ('height')" in err


def test_a_meta_learned_prediction_at_its_floor_is_predicted_by_flops_instead(tmp_path, capsys):
    """A plain two-convolution CNN at 32x32 on a recorded phone: the meta-learned artifact
    adapted on the phone's NAS-Bench-201 reference values extrapolates below zero for it
    (main printed its floor, 0.001 ms, a factor of about 1000 below any network of the table).
    By default it is now predicted by FLOPs scaled on the same 10 values, with a standard
    deviation of at least the mean, and a warning says so; the artifact named with
    --predictor keeps its floor and its floor warning."""
    import torch
    from torch import nn

    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))  # fmt: skip
    model = tmp_path / "cnn.onnx"
    torch.onnx.export(net.eval(), torch.randn(1, 3, 32, 32), str(model), dynamo=False)
    line = re.compile(r"cnn\.onnx: (?P<ms>[\d.e+-]+) ms \(std (?P<std>[\d.e+-]+) ms; 90% interval ")

    code, out, err = run(["predict", "--device", "pixel3", "--onnx", model], capsys)
    assert code == 0, err
    got = line.search(out)
    assert "predicted instead by FLOPs scaled on the same 10 values" in err, err
    code, out, err = run(["predict", "--device", "pixel3", "--onnx", model, "--predictor",
                          "flops"], capsys)  # fmt: skip
    assert code == 0, err
    flops = line.search(out)
    assert float(got["ms"]) == pytest.approx(float(flops["ms"]), rel=1e-3)
    assert float(got["std"]) >= float(got["ms"]) * 0.99
    refs = get_column("nasbench201", "pixel3").values[REF]  # the 10 values it was adapted on
    assert float(got["ms"]) > 0.01 * refs.min()  # the floor is 0.001 times the least

    code, out, err = run(["predict", "--device", "pixel3", "--onnx", model, "--predictor",
                          "nasbench201"], capsys)  # fmt: skip
    assert code == 0 and "its mean is a floor, not a prediction" in err, err
    assert float(line.search(out)["ms"]) < 0.01 * float(got["ms"])

    # beside a model the artifact predicts, each line and --out's row say which predicted it
    # (the two were printed alike: a FLOPs stand-in and a meta-learned prediction compared)
    from hwnas.measure import network_workload

    other = tmp_path / "r18.onnx"
    other.write_bytes(network_workload("resnet18", side=32, width=0.25).onnx_bytes())
    table = tmp_path / "pred.csv"
    code, out, err = run(["predict", "--device", "pixel3", "--onnx", model, "--onnx", other,
                          "--out", table], capsys)  # fmt: skip
    assert code == 0, err
    assert "; predicted by flops scaled (nasbench201 at its floor))" in out.splitlines()[0]
    assert out.splitlines()[1].endswith("; predicted by nasbench201)"), out
    rows = list(csv.DictReader(open(table)))
    assert [r["predictor"] for r in rows] == ["flops scaled (nasbench201 at its floor)",
                                              "nasbench201"]  # fmt: skip


def test_an_architecture_of_the_space_at_the_floor_keeps_it_with_its_warning():
    """An arch string at the floor keeps it, named by the floor warning, as a search's cost
    model prices it: the only such cells of the recorded tables (the Pixel 3's 284) are at
    chance level, which the phone's runtime folds to near zero, and FLOPs put them a factor of
    125 off against the floor's 35 (`python experiments/far_model_interval.py`). (Before, `hwnas
    predict` gave 1.95 ms by FLOPs where a search on the same values priced 0.001 ms.)"""
    from hwnas.predictors.predict import refit_floored

    values = get_column("nasbench201", "pixel3").values
    refs = [SPACE.arch_at(i) for i in REF]
    models = [SPACE.arch_at(7), SPACE.arch_at(8)]
    notes = []
    mean, std, refit = refit_floored(models, np.array([1e-9, 5.0]), np.array([0.1, 0.2]),
                                     (refs, values[REF], "latency_ms"), None, "calibration",
                                     notes.append)  # fmt: skip
    assert list(mean) == [1e-9, 5.0] and list(std) == [0.1, 0.2] and not refit
    assert len(notes) == 1 and "its mean is a floor, not a prediction" in notes[0]
    assert SPACE.arch_at(7).text in notes[0]


def test_a_cell_whose_convolutions_cannot_reach_its_output_is_not_predicted_near_zero(capsys):
    """NAS-Bench-201 cell 13047 computes three 3x3 convolutions that cannot reach the cell
    output (its output node reads only a skip from the input); the Pixel 3 records 1.47 ms,
    its skeleton's cost. Adapted on the phone's 10 reference values, the meta-learned head's
    mean was 0.018 ms with a std of 2 ms, and a few-shot search put it on its front as the
    cheapest 58% network; the prediction is now the head's normal conditioned on a positive
    latency (hwnas.predictors.meta.positive_part)."""
    code, out, err = run(["predict", "--device", "pixel3", "--arch", "13047"], capsys)
    assert code == 0, err
    ms = float(re.search(r": ([\d.e+-]+) ms \(std", out).group(1))
    recorded = float(get_column("nasbench201", "pixel3").values[13047])
    assert recorded == pytest.approx(1.473, abs=1e-3)
    assert 0.5 * recorded < ms < 2 * recorded, out


def test_predict_on_a_recorded_device_names_the_reference_cells_stood_in_for(capsys):
    """The Raspberry Pi 5 table measured one cell per isomorphism class: 5 of the 10 reference
    cells are adapted on through the measured cell of their class, and `hwnas predict` says
    which; a table with every cell (raspi4) adapts on the reference cells themselves."""
    code, out, err = run(["predict", "--device", "pi5_onnx", "--arch", "5"], capsys)
    assert code == 0, err
    used = measured_reference("nasbench201", get_column("nasbench201", "pi5_onnx").values)
    stood_in = [SPACE.arch_at(s).text for r, s in zip(REF, used) if r != s]
    assert len(stood_in) == 5
    assert "5 of them isomorphic cells standing in" in err
    assert all(text in err for text in stood_in)
    code, out, err = run(["predict", "--device", "raspi4", "--arch", "5"], capsys)
    assert code == 0, err
    assert "standing in" not in err and "from its recorded table;" in err


def test_refset_measure_on_a_table_of_one_cell_per_class_reads_the_measured_cells(
    tmp_path, capsys
):
    """`hwnas refset measure --device pi5_onnx` wrote nothing ("no recorded latency_ms for"
    the first reference cell); it now reads the measured cell of each reference cell's class,
    marked as a stand-in, and its calibration file predicts as `--device pi5_onnx` does."""
    out = tmp_path / "ref"
    code, text, err = run(["refset", "measure", "--device", "pi5_onnx", "--out", out], capsys)
    assert code == 0, err
    assert text.count("isomorphic") == 5 and "10 read from a table" in text
    y = get_column("nasbench201", "pi5_onnx").values
    rows = list(csv.DictReader(open(out / "calibration.csv")))
    used = measured_reference("nasbench201", y)
    assert [r["arch"] for r in rows] == [SPACE.arch_at(i).text for i in used]
    assert [float(r["latency_ms"]) for r in rows] == pytest.approx(list(y[used]), rel=1e-5)
    code, from_file, err = run(["predict", "--calibration", out / "calibration.csv", "--arch",
                                "5"], capsys)  # fmt: skip
    assert code == 0, err
    code, from_device, err = run(["predict", "--device", "pi5_onnx", "--arch", "5"], capsys)
    recorded = f"; pi5_onnx's table records {y[5]:.4g} ms\n"  # the device's line names it
    assert from_device.endswith(recorded) and from_file == from_device.replace(recorded, "\n")


def test_predict_refuses_a_device_without_its_values_before_timing_kernels(tmp_path, hwnas_home):
    """`hwnas predict --device cpu --onnx m.onnx --arch 5` timed the ONNX file's kernels, then
    failed: the architecture needs the CPU's reference set, which was not measured. Now the
    missing values are named first, with the command that measures them as this one would
    (with its --runtime: the hint dropped it, so following it measured another runtime)."""
    import torch

    path = tmp_path / "mlp.onnx"
    net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    torch.onnx.export(net, (torch.randn(1, 8),), str(path), dynamo=False)
    r = hwnas_main("predict", "--device", "cpu", "--onnx", str(path), "--arch", "5")
    assert r.returncode == 2 and "kernel" not in r.stdout + r.stderr, r.stdout + r.stderr
    assert "run `hwnas refset measure --device cpu`" in r.stderr
    r = hwnas_main("predict", "--device", "cpu", "--runtime", "tvm", "--arch", "5")
    assert r.returncode == 2
    assert "run `hwnas refset measure --device cpu --runtime tvm`" in r.stderr


def test_predict_refuses_a_calibration_row_of_another_input_size(tmp_path, capsys):
    """`hwnas measure import` refused a row whose input_shape is another dataset's network;
    `hwnas predict --calibration` adapted on the same file and printed a latency (helper-52)."""
    y = get_column("nasbench201", "fpga").values
    refs = measured_reference("nasbench201", y)[:10]
    rows = [(SPACE.arch_at(i).text, "1x3x32x32", y[i]) for i in refs]
    rows[2] = (rows[2][0], "1x3x16x16", rows[2][2])
    write_csv(tmp_path / "cal.csv", ["arch", "input_shape", "latency_ms"], rows)
    code, _, err = run(["predict", "--calibration", tmp_path / "cal.csv", "--arch", "5"], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "cal.csv:4: input_shape 1x3x16x16, but hwnas predict reads values of cifar100's" in err
    rows[2] = (rows[2][0], "1x3x32x32", rows[2][2])
    write_csv(tmp_path / "cal.csv", ["arch", "input_shape", "latency_ms"], rows)
    code, out, err = run(["predict", "--calibration", tmp_path / "cal.csv", "--arch", "5"], capsys)
    assert code == 0 and " ms (std " in out, err


def test_energy_values_on_a_latency_only_artifact_are_said(tmp_path, capsys):
    """`--predictor nasbench201-help` (meta-trained on latency only) adapted on energy values
    printed mJ without a word (helper-52); the default artifact, trained on both, says
    nothing."""
    calibration(tmp_path / "e.csv", metric="energy_mj")
    args = ["predict", "--calibration", tmp_path / "e.csv", "--arch", "5"]
    code, out, err = run([*args, "--predictor", "nasbench201-help"], capsys)
    assert code == 0 and " mJ (std " in out, err
    assert "predictor nasbench201-help was meta-trained on latency_ms only" in err
    code, out, err = run(args, capsys)
    assert code == 0 and "meta-trained" not in err, err


def test_an_artifact_named_for_an_onnx_model_brings_its_own_space(tmp_path, capsys):
    """`hwnas predict --device pixel3 --predictor fbnet --onnx m.onnx` was refused ("predictor
    artifact 'fbnet' ... is for space 'fbnet', not 'nasbench201'"), though an ONNX model needs
    no --space and the default picks fbnet for such a model itself."""
    import torch
    from torch import nn

    net = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(16, 10))  # fmt: skip
    model = tmp_path / "m.onnx"
    torch.onnx.export(net.eval(), torch.randn(1, 3, 32, 32), str(model), dynamo=False)
    code, out, err = run(["predict", "--device", "pixel3", "--predictor", "fbnet", "--onnx",
                          model], capsys)  # fmt: skip
    assert code == 0, err
    assert "predictor fbnet (" in err and "m.onnx: " in out
    code, _, err = run(["predict", "--device", "pixel3", "--predictor", "fbnet", "--space",
                        "nasbench201", "--onnx", model], capsys)  # a --space given is kept
    assert code == 2 and "is for space 'fbnet', not 'nasbench201'" in err, err
