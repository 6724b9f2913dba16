"""`hwnas zoo verify` of a run's zoo checks the zoo against what the run recorded, not only the
entries it finds: an entry deleted, or kept without its card, fails."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from helpers import hwnas_main

SEARCH = ["search", "--device", "pixel3", "--budget", "3", "--seed", "2"]  # 2 front points


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A table search's run folder (2 zoo entries) and the storage of its study."""
    home = tmp_path_factory.mktemp("home")
    out = tmp_path_factory.mktemp("runs") / "run"
    r = hwnas_main(*SEARCH, "--out", out, env={"HWNAS_HOME": str(home)})
    assert r.returncode == 0, r.stderr
    return out, f"sqlite:///{home / 'studies.db'}"


def _copy(run, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(run[0], out)
    entries = sorted(p.name for p in (out / "zoo").iterdir())
    assert len(entries) == 2
    return out, entries


def test_an_entry_whose_card_was_deleted_fails(run, tmp_path):
    """main: "1 of 1 entries verified", exit 0: a sub-folder without card.json was skipped."""
    out, (first, second) = _copy(run, tmp_path)
    (out / "zoo" / first / "card.json").unlink()
    r = hwnas_main("zoo", "verify", out, "--storage", run[1])
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        f"FAIL {first}: not a zoo entry: no card.json (the run's summary.json and pareto.csv's "
        "zoo column list it)"
    ) in r.stdout
    assert f"ok   {second}:" in r.stdout and "1 of 2 entries verified" in r.stdout
    # the listing says so too, rather than leave it out unseen
    r = hwnas_main("zoo", "list", out / "zoo")
    assert r.returncode == 0 and f"{first}: not a zoo entry: no card.json" in r.stdout
    r = hwnas_main("zoo", "list", out / "zoo", "--json")
    assert json.loads(r.stdout)["not_entries"][0]["folder"].endswith(first)


def test_an_entry_deleted_whole_fails(run, tmp_path):
    """main: "1 of 1 entries verified", exit 0, while summary.json and pareto.csv list 2."""
    out, (first, second) = _copy(run, tmp_path)
    shutil.rmtree(out / "zoo" / second)
    r = hwnas_main("zoo", "verify", out / "zoo", "--storage", run[1])
    assert r.returncode == 1, r.stdout + r.stderr
    assert (
        f"FAIL {second}: missing: the run's summary.json and pareto.csv's zoo column list this "
        "entry, and the zoo has no folder of that name"
    ) in r.stdout
    assert "1 of 2 entries verified" in r.stdout
    # every entry gone: still the run's records against an empty zoo, not "no model"
    shutil.rmtree(out / "zoo" / first)
    r = hwnas_main("zoo", "verify", out)
    assert r.returncode == 1 and "0 of 2 entries verified" in r.stdout
    # a zoo outside a run folder has no records to miss an entry of
    r = hwnas_main("zoo", "verify", run[0] / "zoo" / first)
    assert r.returncode == 0


def test_an_entry_deleted_from_the_run_folders_records_too_fails_on_the_study(tmp_path):
    """The entry's folder, its summary.json lines and its pareto.csv cell all removed: the
    study that published the run still lists it."""
    out = tmp_path / "run"
    assert hwnas_main(*SEARCH, "--out", out).returncode == 0
    gone = sorted(p.name for p in (out / "zoo").iterdir())[-1]
    shutil.rmtree(out / "zoo" / gone)
    summary = json.loads((out / "summary.json").read_text())
    summary["zoo_files"] = {k: v for k, v in summary["zoo_files"].items() if gone not in k}
    (out / "summary.json").write_text(json.dumps(summary))
    rows = list(csv.DictReader(open(out / "pareto.csv")))
    with open(out / "pareto.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["zoo"] != gone)
    r = hwnas_main("zoo", "verify", out)
    assert r.returncode == 1, r.stdout
    assert f"FAIL {gone}: missing: study '{summary['settings']['study']}' (" in r.stdout


def _claim(entry, change) -> None:
    """Rewrite ``entry``'s card by ``change`` (card -> None) and make the entry consistent with
    it again (ONNX metadata, checksums), as a tamperer who knows the format would."""
    from hwnas.paths import sha256_file
    from hwnas.zoo.card import metadata_props
    from hwnas.zoo.entry import with_metadata

    card = json.loads((entry / "card.json").read_text())
    change(card)
    model = entry / "model.onnx"
    model.write_bytes(with_metadata(model.read_bytes(), metadata_props(card), "x"))
    card["files"] = {name: sha256_file(entry / name) for name in card["files"]}
    (entry / "card.json").write_text(json.dumps(card))


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda c: c["input"].update(name="pixel_values"),
         "card.json's input 'pixel_values' is not model.onnx's (its inputs: 'input')"),
        (lambda c: c["input"].update(dtype="float16"),
         "card.json's input dtype 'float16' is not model.onnx's (float32)"),
        (lambda c: c["input"].update(shape=[1, 3, 224, 224]),
         "card.json's input shape [1, 3, 224, 224] is not model.onnx's (batch, 3, 32, 32)"),
        (lambda c: c["output"].update(shape=[1, 1000]),
         "card.json's output shape [1, 1000] is not model.onnx's (batch, 100)"),
        (lambda c: c.update(num_classes=1000),
         "card.json's num_classes 1000 is not model.onnx's output size (100)"),
        (lambda c: c.update(opset=13), "card.json's opset 13 is not model.onnx's (17)"),
    ],
)  # fmt: skip
def test_a_card_whose_structure_the_graph_contradicts_fails(run, tmp_path, change, said):
    """A card rewritten (with its ONNX metadata and checksums) to claim input `pixel_values`
    float16 (1, 3, 224, 224), 1000 classes, opset 13 verified "ok" on main, and `zoo show`
    printed it; the graph takes `input` float32 (batch, 3, 32, 32) to 100 logits, opset 17."""
    entry = tmp_path / "entry"
    shutil.copytree(sorted((run[0] / "zoo").iterdir())[0], entry)
    r = hwnas_main("zoo", "verify", entry)
    assert r.returncode == 0 and "classes, params, graph, opset as in the graph" in r.stdout
    _claim(entry, change)
    r = hwnas_main("zoo", "verify", entry)
    assert r.returncode == 1, r.stdout
    assert r.stdout.startswith(f"FAIL entry: {said}"), r.stdout


def test_a_renamed_copy_is_said_and_a_linked_entry_folder_fails(run, tmp_path):
    """An entry copied as `01-fastest` verified "ok ... provenance: card and model match
    study" without a word of its card naming another folder; a zoo's entry folder that was a
    link to an entry outside the zoo was followed and reported proven."""
    entry = sorted((run[0] / "zoo").iterdir())[0]
    shutil.copytree(entry, tmp_path / "01-fastest")
    r = hwnas_main("zoo", "verify", tmp_path / "01-fastest", "--storage", run[1])
    assert r.returncode == 0, r.stdout
    assert f"its folder is not named as its card says ('{entry.name}'" in r.stdout
    zoo = tmp_path / "zoo"
    shutil.copytree(entry, zoo / entry.name)
    (zoo / "02-linked").symlink_to(tmp_path / "01-fastest", target_is_directory=True)
    r = hwnas_main("zoo", "verify", zoo, "--storage", run[1])
    assert r.returncode == 1, r.stdout
    assert (
        f"FAIL 02-linked: a symbolic link (to {tmp_path / '01-fastest'}), not an entry folder of "
        "this zoo" in r.stdout
    )
    assert f"ok   {entry.name}:" in r.stdout and "1 of 2 entries verified" in r.stdout
    assert "its folder is not named" not in r.stdout
    r = hwnas_main("zoo", "list", zoo)
    assert r.returncode == 0 and "02-linked: a symbolic link" in r.stdout
    assert r.stdout.count("02-linked") == 1  # not listed as an entry too


def _peak_mib(entry) -> float:
    """The peak resident memory (MiB) of `hwnas zoo verify ENTRY` in a child process."""
    import subprocess
    import sys

    code = (  # VmHWM: the process's own peak (ru_maxrss keeps the forking parent's)
        "import sys; from hwnas.cli import main; rc = main(['zoo', 'verify', sys.argv[1]]); "
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0]); "
        "sys.exit(rc)"
    )
    r = subprocess.run([sys.executable, "-c", code, str(entry)], capture_output=True, text=True,
                       timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr[-2000:]
    return int(r.stdout.splitlines()[-1]) / 1024  # kB on Linux


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="reads Linux's VmHWM")
def test_verify_holds_a_model_about_twice_at_most(run, tmp_path):
    """A 400 MB model.onnx took 2.1 GB to verify: the parsed model, a copy for shape
    inference (serialised, parsed, serialised back and parsed), another serialised for ONNX
    Runtime. Here a 48 MiB one: its file and its parse at once while it loads, nothing more
    (docs/security.md)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    entry = sorted((run[0] / "zoo").iterdir())[0]
    small, big = tmp_path / "small", tmp_path / "big"
    shutil.copytree(entry, small)
    shutil.copytree(entry, big)
    model = onnx.load(str(big / "model.onnx"))
    pad = 48 * 2**20 // 4
    model.graph.initializer.append(numpy_helper.from_array(np.ones(pad, np.float32), "pad"))
    onnx.save(model, str(big / "model.onnx"))
    _claim(big, lambda c: c.update(params=c["params"] + pad))
    base, peak = _peak_mib(small), _peak_mib(big)
    assert peak - base < 2.5 * 48, (base, peak)  # the old code: about 4 times
