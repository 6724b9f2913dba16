"""Files someone else hands a user (a device profile, a zoo entry, a study database): none of
them may exhaust the memory, hang a command, reach outside its folder, delete other files or
write to the user's terminal, whatever they hold."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid

import pytest
import torch

from hwnas.errors import HwnasError
from tests.security.helpers_security import CodeRunner, bounded_cli

SEARCH = ["search", "--device", "pixel3", "--budget", "3", "--seed", "2"]  # 2 front points


def _profile(folder, name: str, table: str) -> None:
    (folder / f"{name}.yaml").write_text(
        f"name: {name}\nkind: recorded\nclass: board\n"
        f"tables:\n  nasbench201:\n    latency_ms: {{file: {table}}}\n"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_a_profile_whose_table_is_a_device_or_a_pipe_is_listed_broken(hwnas_home, tmp_path):
    """`latency_ms: {file: /dev/zero}` read until the memory ran out (24 GB), a pipe hung
    `hwnas devices` for ever; now each is one broken profile and every other device works."""
    profiles = hwnas_home / "devices"
    os.mkfifo(tmp_path / "pipe.csv")
    _profile(profiles, "zeros", "/dev/zero")
    _profile(profiles, "piped", str(tmp_path / "pipe.csv"))
    r = bounded_cli("devices", timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = (r.stdout + r.stderr).splitlines()
    for name in ("zeros", "piped"):
        (line,) = [x for x in lines if x.startswith("broken profile") and f"{name}.yaml" in x]
        assert "not a regular file" in line, line
    assert "pixel3" in r.stdout  # the other devices are listed
    r = bounded_cli("search", "--device", "piped", "--out", str(tmp_path / "run"), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr[-2000:]
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert "pipe.csv" in line and "not a regular file" in line
    assert not (tmp_path / "run").exists()


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_card(entry, card: dict) -> None:
    (entry / "card.json").write_text(json.dumps(card, indent=2) + "\n")


def test_a_zoo_entry_cannot_load_files_outside_it_nor_pickles_nor_print_escapes(
    hwnas_home, tmp_path, capsys
):
    """A card naming ``weights.file: ../../outside.pt`` and leaving it out of its checksums
    was verified "ok" and loaded by ``hwnas.zoo.load(torch=True)``; a pickled weights.pt gave
    torch's own error advising ``weights_only=False``; an ESC in a card's text cleared the
    screen (and could write the clipboard) in ``hwnas zoo show``."""
    import hwnas.zoo
    from hwnas.cli import main

    run = tmp_path / "run"
    assert main([*SEARCH, "--out", str(run)]) == 0
    entry = sorted((run / "zoo").iterdir())[0]
    good = json.loads((entry / "card.json").read_text())
    module = hwnas.zoo.load(entry, torch=True)  # the untouched entry loads
    capsys.readouterr()

    # 1. weights outside the entry, not in the card's checksums
    torch.save(module.state_dict(), run / "outside.pt")
    card = {**good, "weights": {"kind": "trained", "file": "../../outside.pt"}}
    _write_card(entry, card)
    assert main(["zoo", "verify", str(entry)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("FAIL") and "no checksum of ../../outside.pt" in out
    card["files"]["../../outside.pt"] = _sha256(run / "outside.pt")  # listed, still refused
    _write_card(entry, card)
    with pytest.raises(HwnasError, match="not a file of the entry"):
        hwnas.zoo.load(entry, torch=True)

    # 2. a weights.pt that is a pickle running code, with a matching checksum
    marker = tmp_path / "ran"
    torch.save({"w": CodeRunner(marker)}, entry / "weights.pt", _use_new_zipfile_serialization=True)
    card = {**good, "weights": {"kind": "trained", "file": "weights.pt"}}
    card["files"] = {**good["files"], "weights.pt": _sha256(entry / "weights.pt")}
    _write_card(entry, card)
    with pytest.raises(HwnasError, match="refused: loading anything else could run code"):
        hwnas.zoo.load(entry, torch=True)
    assert not marker.exists()

    # 3. terminal escapes in the card's text: shown, not obeyed
    card = json.loads(json.dumps(good))
    card["accuracy"]["source"] = "\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x1b\\ all good \x9b31m"
    _write_card(entry, card)
    assert main(["zoo", "show", str(entry)]) == 0
    out = capsys.readouterr().out
    assert "\\x1b[2J\\x1b]52;c;" in out and "\\x9b31m" in out
    assert not any(c in out for c in ("\x1b", "\x9b", "\x07"))


def test_a_handed_study_database_deletes_no_other_artifact(hwnas_home, tmp_path, capsys):
    """A study's ``artifacts`` attribute maps each run file to the artifact a newer version
    replaces (and deletes). A handed database naming another file of the shared artifact
    folder had it deleted on the next run of the search; an id with ``../`` ended in Optuna's
    traceback. Now only artifacts Optuna made for that study are ever replaced."""
    import optuna

    from hwnas.cli import main

    storage = f"sqlite:///{tmp_path / 'handed.db'}?timeout=30"  # a query: not the file's name
    args = [*SEARCH, "--storage", storage, "--no-zoo", "--out", str(tmp_path / "run")]
    assert main(args) == 0
    artifacts = hwnas_home / "artifacts"
    other = artifacts / str(uuid.uuid4())  # another study's artifact, its id known
    other.write_text("another study's plot")
    (study_name,) = optuna.get_all_study_names(storage)
    study = optuna.load_study(study_name=study_name, storage=storage)
    known = dict(study.user_attrs["artifacts"])
    known["summary.json"] = {"id": other.name, "sha256": "changed"}
    known["pareto.csv"] = {"id": "../../../outside", "sha256": "changed"}
    study.set_user_attr("artifacts", known)
    shutil.copy(tmp_path / "run" / "summary.json", tmp_path / "before.json")
    capsys.readouterr()
    assert main([*args[:4], "6", *args[5:]]) == 0  # the same search, a larger budget
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert other.read_text() == "another study's plot"
    study = optuna.load_study(study_name=study_name, storage=storage)
    ids = {v["id"] for v in study.user_attrs["artifacts"].values()}
    assert other.name not in ids and "../../../outside" not in ids
    assert all((artifacts / i).is_file() for i in ids)  # every file re-uploaded is recorded
    for command in (["runs", "list"], ["runs", "show", "latest"]):  # "no study database"
        assert main([*command, "--storage", storage]) == 0, capsys.readouterr().err


def test_no_zoo_leaves_no_earlier_zoo_and_follows_no_link(hwnas_home, tmp_path, capsys):
    """`--no-zoo` over a run folder with an earlier run's zoo kept it, listed it in
    summary.json (so `hwnas zoo verify` called an earlier front's model proven) and uploaded
    it; a handed-over zoo whose card was a link to a private file had that file hashed and
    copied into the artifact store the dashboard serves. Now the earlier zoo is removed and no
    link is ever followed."""
    import optuna

    from hwnas.cli import main
    from hwnas.engine.publish import run_files
    from hwnas.zoo.read import zoo_manifest

    storage = f"sqlite:///{tmp_path / 's.db'}"
    run = tmp_path / "run"
    args = [*SEARCH, "--storage", storage, "--study", "nz", "--out", str(run)]
    assert main(args) == 0
    assert any((run / "zoo").iterdir())
    assert main([*args[:4], "6", *args[5:], "--no-zoo"]) == 0
    summary = json.loads((run / "summary.json").read_text())
    assert not (run / "zoo").exists() and summary["zoo_files"] == {}
    six = [*args[:4], "6", *args[5:]]  # the study holds 6 now
    # what hwnas did not write is never deleted: a zoo with a note of the user's is left as it
    # is by --no-zoo (and is not the run's: not recorded, not published), refused before a
    # search that would replace it; a file named zoo likewise
    assert main(six) == 0 and main([*six, "--no-zoo"]) == 0  # a zoo, then without
    for mine in ("folder", "file"):
        shutil.rmtree(run / "zoo", ignore_errors=True)
        if mine == "folder":
            assert main(six) == 0
            (run / "zoo" / "notes.txt").write_text("mine")
        else:
            (run / "zoo").write_text("mine")
        assert main([*six, "--no-zoo"]) == 0
        summary = json.loads((run / "summary.json").read_text())
        study = optuna.load_study(study_name="nz", storage=storage)
        assert summary["zoo_files"] == {} and not [
            k for k in study.user_attrs["artifacts"] if k.startswith("zoo/")
        ]
        kept = run / "zoo" / "notes.txt" if mine == "folder" else run / "zoo"
        assert kept.read_text() == "mine"
        capsys.readouterr()
        assert main(six) == 2
        assert "holds what hwnas did not write" in capsys.readouterr().err
        assert kept.read_text() == "mine"
    (run / "zoo").unlink()
    study = optuna.load_study(study_name="nz", storage=storage)
    assert not [k for k in study.user_attrs["artifacts"] if k.startswith("zoo/")]
    # a handed-over run folder whose zoo entry links outside
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-KEY")
    entry = tmp_path / "handed" / "zoo" / "01-abc"
    entry.mkdir(parents=True)
    (entry / "card.json").symlink_to(secret)
    (entry / "README.md").symlink_to(secret)
    (tmp_path / "handed" / "summary.json").symlink_to(secret)
    assert run_files(tmp_path / "handed") == [] and zoo_manifest(tmp_path / "handed") == {}
    capsys.readouterr()
    handed = ["search", "--device", "pixel3", "--budget", "3", "--no-zoo", "--study", "leak",
              "--storage", storage, "--out", str(tmp_path / "handed")]  # fmt: skip
    assert main(handed) == 0, capsys.readouterr().err
    stored = [p for p in (hwnas_home / "artifacts").rglob("*") if p.is_file()]
    assert stored and not [p for p in stored if b"SECRET-KEY" in p.read_bytes()]
    assert secret.read_text() == "SECRET-KEY"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs named pipes")
def test_an_onnx_pipe_or_sparse_external_data_is_refused_before_it_is_read(tmp_path):
    """`--dim` read a pipe given as `--onnx` before it was checked (waited for ever); a
    147-byte model whose external data names 6 GiB of a sparse file was read whole (12.6 GB
    of memory) before the 2 GiB limit was checked."""

    pipe = tmp_path / "pipe.onnx"
    os.mkfifo(pipe)
    for command in ("predict", "measure"):
        device = "pixel3" if command == "predict" else "cpu"
        r = bounded_cli(command, "--device", device, "--onnx", str(pipe), "--dim", "seq=8",
                        timeout=30)  # fmt: skip
        assert r.returncode == 2, r.stderr
        assert f"cannot read ONNX file {pipe}: not a regular file" in r.stderr
    folder = tmp_path / "ext"
    folder.mkdir()
    r = bounded_cli("predict", "--device", "pixel3", "--onnx",
                    _sparse_external(folder, in_constant=False), timeout=30)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert "its external data hold 6.0 GiB of weights" in r.stderr


def _sparse_external(folder, in_constant: bool) -> str:
    """An ONNX file in ``folder`` whose tensor (an initializer, or a Constant node's value)
    names 6 GiB of a 7 GiB sparse file beside it (no disk used); its path."""
    import onnx
    from onnx import TensorProto
    from onnx import helper as h

    with open(folder / "w.bin", "wb") as fh:
        fh.truncate(7 * 2**30)
    t = onnx.TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3 * 2**29])
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", str(6 * 2**30))):
        t.external_data.add(key=key, value=value)
    x = h.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = h.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [h.make_node("Identity", ["x"], ["y"])]
    if in_constant:
        nodes.insert(0, h.make_node("Constant", [], ["w"], value=t))
    graph = h.make_graph(nodes, "g", [x], [y], [] if in_constant else [t])
    onnx.save(h.make_model(graph), str(folder / "m.onnx"), save_as_external_data=False)
    return str(folder / "m.onnx")


def test_a_handed_study_with_an_edited_accuracy_is_refused_on_resume(hwnas_home, tmp_path):
    """A study database whose trial accuracy was raised to 99.9% resumed, and its front, best
    line, zoo card and `zoo verify` all carried the made-up value as the table's (an edited
    latency was already refused)."""
    import sqlite3

    from hwnas.cli import main

    db = tmp_path / "s.db"
    args = [*SEARCH, "--storage", f"sqlite:///{db}", "--study", "t", "--no-zoo",
            "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(args) == 0
    with sqlite3.connect(db) as conn:
        (tid,) = conn.execute("select trial_id from trials where number = 1").fetchone()
        conn.execute("update trial_values set value = 99.9 where trial_id = ? and objective = 0",
                     (tid,))  # fmt: skip
    r = bounded_cli(*args[:4], "6", *args[5:])
    assert r.returncode == 2, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert "trial 1 of this study holds accuracy 99.9% for |" in line, r.stderr


T1 = "(select trial_id from trials where number = 1)"


@pytest.mark.parametrize(
    ("edit", "said"),
    [(f"delete from trial_user_attributes where key = 'arch' and trial_id = {T1}",
      "trial 1: KeyError: 'arch'"),
     (f"update trial_user_attributes set value_json = '\"x\"' where key = 'latency_ms' and "
      f"trial_id = {T1}", "trial 1: ValueError: could not convert string to float: 'x'"),
     (f"update trial_user_attributes set value_json = '\"measured:x\\u001b[2J\"' where "
      f"key = 'latency_ms_source' and trial_id = {T1}",
      "trial 1: a latency_ms source that is no text"),
     (f"delete from trial_values where trial_id = {T1}",
      "values should be set for a complete trial"),
     (f"update trial_user_attributes set value_json = '{{not json' where key = 'accuracy' and "
      f"trial_id = {T1}", "JSONDecodeError"),
     (f"update trial_params set param_value = 99999 where trial_id = {T1}", "IndexError")],
    ids=["no arch", "latency text", "escape in source", "no values", "not json", "param"],
)  # fmt: skip
def test_a_handed_study_that_optuna_or_hwnas_cannot_read_back_is_one_line(
    hwnas_home, tmp_path, edit, said
):
    """A study database edited by hand (or handed over so): each of these ended the resumed
    search in a traceback, and a cost source holding a terminal escape was copied into
    pareto.csv. Now one line names the study and the trial, before any work."""
    import sqlite3

    from hwnas.cli import main

    db = tmp_path / "s.db"
    args = [*SEARCH, "--storage", f"sqlite:///{db}", "--study", "t", "--no-zoo",
            "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(args) == 0
    with sqlite3.connect(db) as conn:
        conn.execute(edit)
    r = bounded_cli(*args[:4], "6", *args[5:])
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert line.startswith("error: study 't' holds a trial hwnas cannot read (") and said in line
    assert line.endswith("search it as a new study (--study NAME) or delete this one"), line
    assert "done in" not in r.stderr  # a search step left by the error is 'stopped after'


def test_a_claim_naming_a_pid_beyond_any_pids_range_is_not_a_running_process():
    """A handed study's claim 'HOST:99999999999999999999' stopped the resumed search in an
    OverflowError from os.kill; no such process runs."""
    from hwnas.paths import process_running

    assert not process_running(10**20) and process_running(os.getpid())


def test_external_data_of_a_constant_node_is_sized_before_it_is_read(tmp_path):
    """The size check counted initializers only: a Constant node's value naming 6 GiB of a
    sparse file was read whole before the 2 GiB limit (review of e982a14)."""
    r = bounded_cli("predict", "--device", "pixel3", "--onnx",
                    _sparse_external(tmp_path, in_constant=True), timeout=30)  # fmt: skip
    assert r.returncode == 2 and "its external data hold 6.0 GiB of weights" in r.stderr


def test_what_a_file_browser_leaves_in_a_zoo_is_not_the_users_data(tmp_path):
    """A `.DS_Store` (Finder), a notebook's checkpoints or a killed `hwnas train`'s temporary in
    a zoo made every later search into that folder stop as if the user's files were there."""
    from hwnas.paths import temporary
    from hwnas.zoo.write import foreign_items

    zoo = tmp_path / "zoo"
    (zoo / "00-a").mkdir(parents=True)
    (zoo / "00-a" / "card.json").write_text("{}")
    (zoo / ".DS_Store").write_text("x")
    (zoo / ".ipynb_checkpoints").mkdir()
    temporary(zoo / "00-a").mkdir()
    assert foreign_items(zoo) == []
    (zoo / "notes.txt").write_text("mine")
    assert foreign_items(zoo) == ["notes.txt"]


def test_training_a_handed_runs_zoo_writes_only_the_run_and_never_another_study(
    hwnas_home, tmp_path
):
    """`hwnas train RUN/zoo/ENTRY` records the retrained entry in the study summary.json
    names. A handed summary.json named the user's own studies.db and the study of one of the
    user's runs: train took that study over (its run folder became the handed one, the user's
    run no longer verified) and deleted the run's 27 artifacts; a study shipped in the handed
    folder named an artifact folder outside it, where train wrote copies of the run's files;
    a URL to a missing SQLite file created it. Now a study is updated only in an existing
    SQLite file, only when it records this very run folder, and its artifacts go to the home's
    artifact store."""
    import optuna
    from helpers import hwnas_main

    own = tmp_path / "own"
    r = hwnas_main(*SEARCH, "--out", str(own))
    assert r.returncode == 0, r.stderr
    summary = json.loads((own / "summary.json").read_text())
    storage, study = summary["storage"], summary["settings"]["study"]
    artifacts = sorted(p.name for p in (hwnas_home / "artifacts").iterdir())
    assert artifacts
    handed = tmp_path / "handed"
    handed.mkdir()
    r = hwnas_main(*SEARCH, "--out", str(handed), "--storage",
                   f"sqlite:///{handed / 'theirs.db'}", "--study", "theirs")  # fmt: skip
    assert r.returncode == 0, r.stderr
    outside = tmp_path / "outside"
    theirs = optuna.load_study(study_name="theirs", storage=f"sqlite:///{handed / 'theirs.db'}")
    theirs.set_user_attr("artifact_dir", str(outside))
    entry = sorted((handed / "zoo").iterdir())[0]
    train = ["train", str(entry), "--data", "digits", "--epochs", "1", "--limit", "64"]
    created = tmp_path / "created.db"
    path = handed / "summary.json"
    handed_summary = json.loads(path.read_text())
    for named, expect in ((storage, "records another run folder"),
                          (f"sqlite:///{created}", "is not an existing SQLite file"),
                          ("postgresql://them@203.0.113.9/db", "never chooses a database server"),
                          (f"sqlite:///{handed / 'theirs.db'}", None)):  # fmt: skip
        settings = {**handed_summary["settings"], "study": study if named == storage else "theirs"}
        path.write_text(json.dumps({**handed_summary, "storage": named, "settings": settings}))
        r = hwnas_main(*train)
        assert r.returncode == 0, r.stderr
        said = r.stdout + r.stderr
        assert expect is None and "was not" not in said or expect and expect in said, said
        closing = "(not in its study: said above)" if expect else "and the run's study"
        assert f"the retrained entries recorded in summary.json {closing}" in said, said
    # the user's own study still records the user's run, whose artifacts are all there
    mine = optuna.load_study(study_name=study, storage=storage)
    assert mine.user_attrs["run_folder"] == str(own.resolve())
    assert set(artifacts) <= {p.name for p in (hwnas_home / "artifacts").iterdir()}
    assert hwnas_main("zoo", "verify", str(own / "zoo")).returncode == 0
    assert not outside.exists() and not created.exists()


def test_training_a_handed_run_writes_no_tables_into_a_database_its_summary_names(
    hwnas_home, tmp_path
):
    """A handed summary.json whose `storage` named any existing SQLite file (the user's
    browser history, an app's database) or an empty file: `hwnas train RUN/zoo/ENTRY` opened
    it as a study storage and Optuna wrote its 13 tables into it. A storage named by a file is
    now opened only where it already is Optuna's; the files are left byte for byte, and no
    journal is created beside them."""
    import sqlite3

    from helpers import hwnas_main

    run = tmp_path / "run"
    r = hwnas_main(*SEARCH, "--out", str(run))
    assert r.returncode == 0, r.stderr
    other = tmp_path / "places.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("PRAGMA journal_mode=WAL")  # as browsers keep theirs
        conn.execute("CREATE TABLE moz_places (id INTEGER PRIMARY KEY, url TEXT)")
        conn.execute("INSERT INTO moz_places (url) VALUES ('https://example.org')")
    conn.close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    before = {p: p.read_bytes() for p in (other, empty)}
    entry = sorted((run / "zoo").iterdir())[0]
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    for named, expect in ((other, "is no Optuna study storage (table studies missing)"),
                          (empty, "is not an SQLite database")):  # fmt: skip
        path.write_text(json.dumps({**summary, "storage": f"sqlite:///{named}"}))
        r = hwnas_main("train", str(entry), "--data", "digits", "--epochs", "1", "--limit", "64")
        assert r.returncode == 0, r.stderr
        said = r.stdout + r.stderr
        (line,) = [x for x in said.splitlines() if "was not:" in x]
        assert f"its storage {named} {expect}" in line, said
    assert {p: p.read_bytes() for p in (other, empty)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db", "places.sqlite", "run"]


def test_a_profile_naming_a_credentials_file_never_prints_a_line_of_it(hwnas_home, tmp_path):
    """`latency_ms: {file: ~/.pgpass}` in a handed profile: `hwnas devices --all`, `search`
    and `predict` printed 'has no column latency_ms (columns: host:5432:db:user:PASSWORD)', the
    file's first line. A table must be a .csv or .csv.gz file, and a header that is no list of
    column names is not repeated."""
    from helpers import hwnas_main

    secret = "localhost:5432:db:user:S3CRETPW"
    (tmp_path / "pgpass").write_text(f"{secret}\nother:5432:db:u:SECRET2\n")
    (tmp_path / "creds.csv").write_text(f"{secret}\nother:5432:db:u:SECRET2\n")
    profiles = hwnas_home / "devices"
    _profile(profiles, "nocsv", str(tmp_path / "pgpass"))
    _profile(profiles, "fakecsv", str(tmp_path / "creds.csv"))
    _profile(profiles, "typo", str(tmp_path / "good.csv"))
    (tmp_path / "good.csv").write_text("index,latency\n0,1.5\n1,2.5\n")
    r = hwnas_main("devices", "--all")
    said = r.stdout + r.stderr
    assert r.returncode == 0 and "S3CRET" not in said and "pixel3" in said, said
    assert "names " in said and "pgpass, which is not a .csv or .csv.gz file" in said, said
    assert "creds.csv has no column 'latency_ms' (its first line is no CSV header)" in said
    assert "good.csv has no column 'latency_ms' (columns: index, latency)" in said  # a typo
    for args in (["search", "--device", "fakecsv", "--out", str(tmp_path / "run")],
                 ["predict", "--device", "nocsv", "--arch", "5"]):  # fmt: skip
        r = hwnas_main(*args)
        assert r.returncode == 2 and "S3CRET" not in r.stdout + r.stderr, r.stderr


def test_runs_show_prints_no_summary_of_another_run_a_study_points_at(hwnas_home, tmp_path):
    """A handed study database whose `run_folder` names another folder made `hwnas runs show
    --json` print that folder's summary.json as the study's; a summary of another study is
    now left out."""
    import optuna
    from helpers import hwnas_main

    db = f"sqlite:///{tmp_path / 's.db'}"
    for name in ("a", "b"):
        r = hwnas_main(*SEARCH, "--no-zoo", "--storage", db, "--study", name,
                       "--out", str(tmp_path / name))  # fmt: skip
        assert r.returncode == 0, r.stderr
    shown = json.loads(hwnas_main("runs", "show", "a", "--json", "--storage", db).stdout)
    assert shown["summary"]["settings"]["study"] == "a"
    optuna.load_study(study_name="a", storage=db).set_user_attr("run_folder", str(tmp_path / "b"))
    shown = json.loads(hwnas_main("runs", "show", "a", "--json", "--storage", db).stdout)
    assert shown["summary"] is None


def test_a_space_name_read_from_a_handed_file_never_prints_the_file_it_names(hwnas_home, tmp_path):
    """A profile's `tables:` key (or a zoo card's `space`) is a space's name or a space
    file's path: `~/.ssh/id_ed25519` there was read as a space file, and YAML reads a key file
    as one string, which 'must be a mapping, got ...' printed whole in `hwnas devices` and in
    every search. A space file's name ends in .yaml now, and no message shows what a file
    holds. A recorded table's text cell is not shown either."""
    from helpers import hwnas_main

    from hwnas.spaces import get_space

    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH\n"
    (tmp_path / "id_ed25519").write_text(key)
    (tmp_path / "id.yaml").write_text(key)
    (tmp_path / "t.csv").write_text("index,latency_ms\n0,1.5\n1,ghp_TOKENabc\n")
    profiles = hwnas_home / "devices"
    for name, space in (("keyfile", tmp_path / "id_ed25519"), ("keyyaml", tmp_path / "id.yaml")):
        (profiles / f"{name}.yaml").write_text(
            f"name: {name}\nkind: recorded\nclass: board\ntables:\n  {space}:\n"
            "    latency_ms: {file: recorded/nasbench201_latency_ms.csv.gz, column: pixel3}\n"
        )
    _profile(profiles, "textcell", str(tmp_path / "t.csv"))
    r = hwnas_main("devices", "--all")
    said = r.stdout + r.stderr
    assert r.returncode == 0 and "pixel3" in said, said
    assert "OPENSSH" not in said and "b3Bl" not in said and "ghp_" not in said, said
    assert "a space file's name ends in .yaml or .yml" in said, said
    assert "must be a mapping, got a string" in said and "holds text, not a number" in said
    r = hwnas_main(*SEARCH, "--no-zoo", "--out", str(tmp_path / "run"))
    assert r.returncode == 0 and "b3Bl" not in r.stdout + r.stderr, r.stderr
    for path in (tmp_path / "id_ed25519", tmp_path / "id.yaml"):  # a zoo card's `space`
        with pytest.raises(HwnasError) as e:
            get_space(str(path))
        assert "b3Bl" not in str(e.value) and str(path) in str(e.value)


def test_a_table_linked_to_a_secret_never_prints_a_line_of_it(hwnas_home, tmp_path):
    """A handed profile's `board.csv`, a link to `~/.env`: `hwnas predict` printed 'row 2 has
    2 cells, the header 1 (SECRET_KEY=...)'. A link out of the profile's folder is refused,
    the file a link leads to must be a .csv file too, and a short row's error shows the
    header only where it reads as column names. A profile and its table kept in another
    folder and both linked into the profiles' folder (dotfiles) are read."""
    from helpers import hwnas_main

    from hwnas.predictors.data import reference_indices

    secret = tmp_path / "home" / ".env"
    secret.parent.mkdir()
    secret.write_text("SECRET_KEY=s3cr3tvalue\nDB=a,b\n")
    handed = hwnas_home / "devices"
    (handed / "board.csv").symlink_to(secret)  # out of the folder
    (handed / "inner.env").write_text(secret.read_text())
    (handed / "inner.csv").symlink_to("inner.env")  # a link inside it, to no .csv file
    (tmp_path / "abs.csv").symlink_to(secret)
    (handed / "plain.csv").write_text(secret.read_text())  # a .csv file holding a secret
    repo = tmp_path / "repo"  # a profile and its table kept elsewhere, both linked (dotfiles)
    repo.mkdir()
    rows = sorted({0, *reference_indices("nasbench201")})
    (repo / "dots.csv").write_text("index,dots\n" + "".join(f"{i},{i + 1}\n" for i in rows))
    (handed / "dots.csv").symlink_to(repo / "dots.csv")
    (handed / "away.csv").symlink_to(secret)  # beside a linked profile, out of both folders
    for name, file in (("board9", "board.csv"), ("inner", "inner.csv"),
                       ("absolute", tmp_path / "abs.csv"), ("plain", "plain.csv"),
                       ("dots", "dots.csv"), ("away", "away.csv")):  # fmt: skip
        (repo if name in ("dots", "away") else handed).joinpath(f"{name}.yaml").write_text(
            f"name: {name}\nkind: recorded\nclass: board\n"
            f"tables: {{nasbench201: {{latency_ms: {{file: {file}, column: {name}}}}}}}\n"
        )
    (handed / "dots.yaml").symlink_to(repo / "dots.yaml")
    (handed / "away.yaml").symlink_to(repo / "away.yaml")
    r = hwnas_main("predict", "--device", "dots", "--arch", "0")
    assert r.returncode == 0 and "dots's table records 1 ms" in r.stdout, r.stdout + r.stderr
    said = {}
    for name in ("board9", "inner", "absolute", "plain", "away"):
        r = hwnas_main("predict", "--device", name, "--arch", "0")
        said[name] = r.stderr
        assert r.returncode == 2 and "s3cr3t" not in r.stdout + r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert "board.csv, a symbolic link out of the profile's folder" in said["board9"]
    assert "away.csv, a symbolic link out of the profile's folder" in said["away"]
    assert "inner.csv, a link to a file that is not a .csv or .csv.gz file" in said["inner"]
    assert "abs.csv, a link to a file that is not a .csv" in said["absolute"]
    assert "row 2 has 2 cells, the header 1 (its first line is no CSV header" in said["plain"]
    r = hwnas_main("devices", "--all")
    assert r.returncode == 0 and "pixel3" in r.stdout and "s3cr3t" not in r.stdout + r.stderr


def test_a_tiny_gzip_table_of_millions_of_rows_is_refused_while_read(hwnas_home, tmp_path):
    """A 16 KB gzip table of 8 million one-cell rows took 1.2 GB once parsed (every row a
    list, before any row count was checked). Cells are counted before parsing and rows while
    reading, in device tables and in calibration and architecture files."""
    import gzip
    import tracemalloc

    from helpers import hwnas_main

    profiles = hwnas_home / "devices"
    (profiles / "bomb.csv.gz").write_bytes(gzip.compress(b"a\n" + b"1\n" * 2**23, 9))
    (profiles / "rows.csv.gz").write_bytes(gzip.compress(b"a\n" + b"1\n" * 150_000, 9))
    assert (profiles / "bomb.csv.gz").stat().st_size < 2**15
    for name in ("bomb", "rows"):
        _profile(profiles, name, f"{name}.csv.gz")
    (tmp_path / "cal.csv").write_text("arch,latency_ms\n" + "0,1\n" * 150_000)
    runs = {"bomb": ["predict", "--device", "bomb", "--arch", "0"],
            "rows": ["predict", "--device", "rows", "--arch", "0"],
            "cal": ["predict", "--calibration", tmp_path / "cal.csv", "--arch", "0"]}  # fmt: skip
    said = {}
    for key, args in runs.items():
        tracemalloc.start()
        try:
            r = hwnas_main(*args)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert peak < 100 * 2**20, (key, peak / 2**20)
        said[key] = r.stderr
    assert "bomb.csv.gz: more than 2,000,000 cells" in said["bomb"]
    assert "rows.csv.gz: more than 100,000 rows" in said["rows"]
    assert "cal.csv: more than 100,000 rows" in said["cal"]
