"""Files and studies hwnas did not write, read where hwnas reads its own: another program's
Optuna studies in a shared ``--storage`` (`hwnas runs`, `hwnas dashboard`'s notes), a run
folder's summary.json edited by hand (`hwnas zoo verify`), and what `hwnas train` takes for a
zoo folder or an arch string (arch strings with '/', zoos of a space made in Python)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import optuna
import pytest
from helpers import hwnas_main

from hwnas.errors import HwnasError

SETTINGS = {"space": "nasbench201", "device": "pixel3", "dataset": "cifar100",
            "objective": "latency", "strategy": "random", "seed": 0}  # fmt: skip
ARCH = "|nor_conv_1x1~0|+|avg_pool_3x3~0|none~1|+|nor_conv_1x1~0|none~1|skip_connect~2|"
# each: a plain Optuna study of another program, with one attribute hwnas also writes
FOREIGN = {
    "notes-str": {"summary": "my notes"},
    "notes-list": {"summary": [1, 2]},
    "words-best": {"summary": {"best": {"accuracy": "high", "latency_ms": "fast"},
                               "finished_at": "2024"}, "run_folder": "/tmp"},  # fmt: skip
    "folder-int": {"run_folder": 12},
    "settings-str": {"settings": "pixel3", "summary": {"finished_at": "2024"},
                     "run_folder": "/tmp"},  # fmt: skip
    "artifacts-int": {"artifacts": 5},
}


def _storage(tmp_path: Path) -> str:
    """A storage holding two hwnas runs (one with a cost that is not a number) and the studies
    of :data:`FOREIGN`."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    run = tmp_path / "run"
    run.mkdir()
    best = {"arch": ARCH, "accuracy": 63.05, "latency_ms": 4.925, "trial": 1}
    summary = {"best": best, "trials": 4, "pareto_size": 2, "zoo_models": 0,
               "finished_at": "2024-05-01T10:00:00", "settings": SETTINGS}  # fmt: skip
    odd = {**summary, "best": {**best, "latency_ms": "fast"}, "finished_at": "2024-05-02"}
    attrs = {"hwnas-run": {"settings": SETTINGS, "summary": summary, "run_folder": str(run)},
             "hwnas-odd": {"settings": SETTINGS, "summary": odd, "run_folder": str(run)},
             **FOREIGN}  # fmt: skip
    for name, values in attrs.items():
        study = optuna.create_study(study_name=name, storage=url)
        for key, value in values.items():
            study.set_user_attr(key, value)
    return url


def _ok(*args):
    r = hwnas_main(*args, env={"COLUMNS": "200"})
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    return r.stdout


def test_other_programs_studies_are_listed_as_not_hwnas_runs_and_break_no_command(tmp_path):
    """A plain Optuna study whose ``summary`` was 'my notes' broke `hwnas runs list` on the
    whole storage (AttributeError: 'str' object has no attribute 'get'); a best accuracy
    'high' broke it with "Unknown format code 'f'", ``run_folder`` 12 with a TypeError."""
    url = _storage(tmp_path)
    listed = _ok("runs", "list", "--storage", url)
    for name in FOREIGN:
        line = next(x for x in listed.splitlines() if f" {name} " in x)
        assert "(not an hwnas run)" in line and "pixel3" not in line, line
    assert "63.05% 4.925 ms" in next(x for x in listed.splitlines() if " hwnas-run " in x)
    odd = next(x for x in listed.splitlines() if " hwnas-odd " in x)
    assert "│ 63.05%  " in odd and " ms " not in odd  # 'fast' is no cost
    runs = {r["study"]: r for r in json.loads(_ok("runs", "list", "--json", "--storage",
                                                  url))["runs"]}  # fmt: skip
    assert set(runs) == {"hwnas-run", "hwnas-odd", *FOREIGN}
    for name in FOREIGN:
        row = runs[name]
        assert not row["hwnas_run"] and row["folder"] is None and row["best"] is None, row
        assert row["trials"] == 0 and row["device"] is None
    assert runs["hwnas-run"]["hwnas_run"] and runs["hwnas-run"]["device"] == "pixel3"
    for name in FOREIGN:
        shown = _ok("runs", "show", name, "--storage", url)
        assert f"study      {name} " in shown and "not an hwnas run" in shown, shown
        assert "none yet" not in shown  # not an hwnas search that has not finished
        _ok("runs", "show", name, "--storage", url, "--json")
    shown = _ok("runs", "show", "hwnas-odd", "--storage", url)
    assert f"best       {ARCH}" in shown and "63.05%  (trial 1)" in shown
    assert "device       pixel3" in shown
    # `runs show latest` picks the most recent hwnas run, whatever the others' finished_at
    assert "study      hwnas-odd " in _ok("runs", "show", "latest", "--storage", url)


def test_dashboard_notes_skip_other_programs_studies(tmp_path):
    """`hwnas dashboard` writes each finished run's note before serving: a foreign study's
    ``summary`` 'my notes' stopped it with a traceback, ``settings`` 'pixel3' with "'str'
    object has no attribute 'items'", a best cost 'fast' with "Unknown format code 'g'"."""
    from hwnas.engine.loop import open_storage
    from hwnas.engine.publish import note_markdown, run_settings, write_notes

    url = _storage(tmp_path)
    assert write_notes(open_storage(url)) == 2  # the two hwnas runs; no other study touched
    attrs = {s.study_name: s.user_attrs for s in optuna.get_all_study_summaries(url)}
    assert attrs["hwnas-odd"]["note_for"] == "2024-05-02"
    assert all("note_for" not in attrs[name] for name in FOREIGN)
    assert write_notes(open_storage(url)) == 0  # written once per finished run
    assert run_settings({"settings": "pixel3", "summary": {"settings": [1]}}) == {}
    assert run_settings({"summary": "x", "settings": SETTINGS}) == SETTINGS
    brief = {"best": {"arch": ARCH, "accuracy": "high", "latency_ms": "fast"}, "trials": 4}
    note = note_markdown("other", "/tmp", brief, "pixel3")  # type: ignore[arg-type]
    assert "## hwnas run `other`" in note and "**Best**" not in note
    brief["best"] = {"arch": ARCH, "accuracy": 63.05, "latency_ms": "fast"}
    assert f"`{ARCH}`, 63.05% top-1, \n" in note_markdown("x", "/tmp", brief, SETTINGS)


def test_a_study_whose_attributes_are_not_json_breaks_no_listing(tmp_path):
    """Another program's study whose attribute rows are not JSON (or JSON nested 200,000
    deep): `hwnas runs list/show`, `zoo` lookups and the dashboard's notes ended in a
    JSONDecodeError or RecursionError traceback for the whole storage. Now that study is
    listed as not an hwnas run; `hwnas dashboard`, whose study list optuna-dashboard could
    not serve, refuses in one line naming it."""
    import sqlite3

    from hwnas.engine.loop import open_storage
    from hwnas.engine.publish import write_notes

    url = _storage(tmp_path)
    ids = {s._study_id: s.study_name for s in optuna.get_all_study_summaries(url)}
    broken = {v: k for k, v in ids.items()}["notes-str"]
    with sqlite3.connect(tmp_path / "shared.db") as db:
        db.execute("insert into study_user_attributes(study_id, key, value_json) values "
                   "(?, 'broken', '{not json')", (broken,))  # fmt: skip
        db.execute("insert into study_user_attributes(study_id, key, value_json) values "
                   "(?, 'deep', ?)", (broken, "[" * 200_000 + "]" * 200_000))  # fmt: skip
    listed = _ok("runs", "list", "--storage", url)
    assert "(not an hwnas run)" in next(x for x in listed.splitlines() if " notes-str " in x)
    assert "63.05% 4.925 ms" in next(x for x in listed.splitlines() if " hwnas-run " in x)
    assert "study      hwnas-odd " in _ok("runs", "show", "latest", "--storage", url)
    assert write_notes(open_storage(url)) == 2
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    r = hwnas_main("dashboard", "--storage", url, "--port", str(port))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "study 'notes-str' has attributes that cannot be read" in lines[0]


def test_zoo_verify_reports_an_edited_summary_json_as_not_proven(tmp_path):
    """A run folder whose summary.json holds ``"settings": "x"``: `hwnas zoo verify ENTRY`
    stopped with AttributeError: 'str' object has no attribute 'get'; so did a study in the
    storage whose ``artifacts`` was a list."""
    from hwnas.zoo.verify import verify

    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    run = tmp_path / "run"
    _ok("search", "--device", "pixel3", "--budget", "4", "--out", str(run), "--storage", storage)
    copy = tmp_path / "evil" / "r1"
    shutil.copytree(run, copy)
    entry = sorted((copy / "zoo").iterdir())[0]
    summary = json.loads((copy / "summary.json").read_text())
    (copy / "summary.json").write_text(json.dumps({**summary, "settings": "x"}))
    out = _ok("zoo", "verify", str(entry))
    assert out.startswith(f"ok   {entry.name}: ") and "not proven by a study" in out
    assert "the run's summary.json has settings that are not a mapping" in out
    (copy / "summary.json").write_text(json.dumps({**summary, "zoo_files": "x", "settings": [1]}))
    (v,) = verify(entry)
    assert v.ok and not v.proven and v.provenance.startswith("provenance not proven")
    assert "has a zoo_files that is not a mapping" in v.provenance
    (copy / "summary.json").write_text("[1]")
    (v,) = verify(entry)
    assert v.ok and not v.proven and "summary.json is not a JSON object" in v.provenance
    # another program's study claiming the copy's run folder with artifacts of another shape
    other = optuna.create_study(study_name="other", storage=storage)
    other.set_user_attr("run_folder", str(copy.resolve()))
    other.set_user_attr("artifacts", ["zoo"])
    (v,) = verify(entry, storage)  # skipped: the card's study proves the unchanged files
    assert v.ok and v.proven and "'other'" not in v.provenance, v.provenance
    # the run itself is still proven by its study
    assert all(v.ok and v.proven for v in verify(run / "zoo", storage))


MOBILENETV4 = (  # `hwnas spaces show mobilenetv4`'s example
    "s2.d=6 s2.0=3/5/3 s2.1=0/0/2 s2.2=0/0/6 s2.3=3/5/4 s2.4=3/5/4 s2.5=3/3/4 s3.d=6 "
    "s3.0=0/5/4 s3.1=0/3/6 s3.2=3/0/6 s3.3=5/5/2 s3.4=0/5/2 s3.5=3/0/3"
)


def _error(*args) -> str:
    r = hwnas_main(*args)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


def test_train_takes_arch_strings_with_slashes_and_refuses_missing_folders(tmp_path):
    """`hwnas train ARCH --space mobilenetv4` refused every arch string holding '/' ("zoo
    folder not found: s2.d=6 ..."): a path that does not exist is an arch string where it
    parses as one; one that parses as none is a zoo folder not found."""
    from hwnas.zoo.jobs import plan_training
    from hwnas.zoo.train import TrainSettings

    settings = TrainSettings(data="digits", epochs=1, limit=100)
    plan = plan_training(MOBILENETV4, settings, "mobilenetv4", out=tmp_path / "entry")
    (task,) = plan.tasks
    assert task.arch.space == "mobilenetv4" and task.arch.text == MOBILENETV4
    assert task.folder == tmp_path / "entry"
    missing = tmp_path / "nowhere"
    assert _error("train", str(missing), "--data", "digits") == (
        f"error: zoo folder not found: {missing} (an arch string of another space than "
        "nasbench201 needs --space)"
    )
    line = _error("train", "a/b", "--space", "mobilenetv4", "--data", "digits")
    assert line.startswith("error: zoo folder not found: a/b; nor is it an arch string of "
                           "space 'mobilenetv4': ")  # fmt: skip
    # without --space, an arch string of another space reads as a missing folder, and says so
    line = _error("train", MOBILENETV4, "--data", "digits")
    assert line.endswith("needs --space)")


def test_a_zoo_of_a_python_space_is_retrained_with_its_file(tmp_path):
    """`hwnas train ZOO` of a space made in Python said "unknown search space 'tinytorch';
    did you mean ...", and `--space FILE.py:ATTR` was refused ("applies to an arch string"):
    the message now says to give the file, and that retrains the zoo."""
    from hwnas.spaces import reload_spaces

    file = Path(__file__).parents[1] / "spaces" / "my_space.py"
    entry = tmp_path / "zoo" / "00-tiny"
    train = ("--data", "digits", "--epochs", "1", "--batch-size", "50", "--limit", "100")
    _ok("train", "width=8 op=skip depth=1 kernel=3", "--space", f"{file}:space", *train,
        "--out", str(entry))  # fmt: skip
    reload_spaces()  # a new process: the space is known only by its file
    try:
        line = _error("train", str(tmp_path / "zoo"), *train)
        assert line == (
            f"error: {entry}: unknown search space 'tinytorch': a space made in Python (or read "
            "from a file given by its path) is not saved with its entries: give its file, "
            "--space FILE.py:ATTR (or --space PATH.yaml)"
        )
        line = _error("train", str(tmp_path / "zoo"), "--space", "nasbench201", *train)
        assert f"{entry} is a model of space 'tinytorch', not 'nasbench201'" in line
        out = _ok("train", str(tmp_path / "zoo"), "--space", f"{file}:space", *train)
        assert f"{entry}: " in out and "test accuracy on digits" in out
    finally:
        reload_spaces()
    with pytest.raises(HwnasError, match="applies to an arch string"):
        from hwnas.zoo.jobs import plan_training
        from hwnas.zoo.train import TrainSettings

        plan_training(str(entry), TrainSettings(data="digits"), dataset="digits")


def test_json_output_is_strict_json_whatever_the_study_holds(tmp_path):
    """A study summary with a NaN accuracy and an infinite latency: `hwnas runs list --json`
    printed `NaN` and `Infinity`, which JavaScript's JSON.parse and jq refuse. They are
    null now."""
    url = _storage(tmp_path)
    study = optuna.load_study(study_name="hwnas-run", storage=url)
    summary = dict(study.user_attrs["summary"])
    summary["best"] = {**summary["best"], "accuracy": float("nan"), "latency_ms": float("inf")}
    study.set_user_attr("summary", summary)

    def strict(text: str):
        def refuse(name):
            raise AssertionError(f"{name} is not JSON")

        return json.loads(text, parse_constant=refuse)

    runs = {r["study"]: r for r in strict(_ok("runs", "list", "--json", "--storage", url))["runs"]}
    assert runs["hwnas-run"]["hwnas_run"]
    strict(_ok("runs", "show", "hwnas-run", "--json", "--storage", url))


def test_a_study_note_renders_attribute_values_as_text_never_as_html():
    """A setting holding a backtick closed the note's code span and the rest rendered as
    Markdown, HTML included (optuna-dashboard's renderer takes raw HTML); the best rule and
    the counts went in bare. Rendered with HTML allowed, the note now holds no tag or link
    the values brought."""
    from markdown_it import MarkdownIt

    from hwnas.engine.publish import note_markdown

    evil = "`</code><img src=x onerror=alert(1)>`"
    brief = {"best": {"arch": "a``b" + evil, "accuracy": 60.0, "latency_ms": 2.0},
             "best_rule": "<script>x</script>[link](http://evil)", "trials": "<b>4</b>",
             "finished_at": "![i](http://evil/i.png)"}  # fmt: skip
    settings = {"space": evil, "<i>key</i>": "a|b\nc"}
    note = note_markdown("st`udy<img>", "/tmp/`run`", brief, settings)
    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(note)
    for tag in ("<img", "<script", "<b>", "<i>", "<a ", "<code><img"):
        assert tag not in rendered, (tag, rendered)
    assert "alert(1)" in rendered and "| value |" not in rendered  # shown, as text
    assert rendered.count("<tr>") == 3  # the header and two settings: no cell split by a |


def test_zoo_verify_of_a_run_with_an_empty_zoo_says_why(tmp_path):
    """A supernet search whose front is all at chance level writes "zoo/ with 0 trained ONNX
    models"; `hwnas zoo verify` then said the folder "is neither a zoo entry nor a zoo
    folder" (exit 2)."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    run = tmp_path / "run"
    args = ["--storage", url]
    assert hwnas_main("search", "--device", "pixel3", "--budget", "3", "--no-zoo",
                      "--out", str(run), *args).returncode == 0  # fmt: skip
    (run / "zoo").mkdir()
    r = hwnas_main("zoo", "verify", *args)
    assert r.returncode == 2 and "put no model in its zoo" in r.stderr, r.stderr
    for path in (run, run / "zoo"):  # by its folder too ("neither a zoo entry nor ...")
        r = hwnas_main("zoo", "verify", str(path), *args)
        assert r.returncode == 2 and f"the run in {run} put no model in its zoo" in r.stderr


def test_a_relative_sqlite_storage_is_recorded_absolute_and_guards_its_run(tmp_path):
    """`--storage sqlite:///rel.db` was recorded in summary.json as typed: the same command
    from another folder (another rel.db) compared equal and wrote its 14-trial run over the
    first study's folder (helper-80). The run records the file's absolute path, and the
    search from elsewhere is refused before any work."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    out = tmp_path / "run"
    base = ["search", "--device", "samsung_s7", "--storage", "sqlite:///rel.db", "--no-zoo",
            "--out", str(out)]  # fmt: skip
    r = hwnas_main(*base, "--budget", "6", cwd=tmp_path / "a")
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["storage"] == f"sqlite:///{tmp_path / 'a' / 'rel.db'}"
    r = hwnas_main(*base, "--budget", "9", cwd=tmp_path / "b")
    assert r.returncode == 2 and "in another storage" in r.stderr, r.stderr
    assert json.loads((out / "summary.json").read_text()) == summary
    assert not (tmp_path / "b" / "rel.db").exists()


@pytest.mark.parametrize(
    "directions",
    [["minimize", "maximize"], ["minimize"], ["maximize", "minimize", "minimize"]],
    ids=["reversed", "single", "three"],
)
def test_a_search_refuses_another_programs_study_of_other_directions(tmp_path, directions):
    """`--study prebuilt` naming another program's study of directions minimize, maximize was
    adopted: the search minimised accuracy (exit 0, its front disjoint from the dashboard's);
    a single-objective study ended in optuna's traceback "The number of objectives must match
    the length of the metric names" after its ``settings`` were written into it. Now one line
    naming both directions, exit 2, and nothing written to the study or the run folder."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    url = f"sqlite:///{tmp_path / 'fs.db'}"
    optuna.create_study(study_name="prebuilt", storage=url, directions=directions)
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "pixel3", "--budget", "5", "--no-zoo",
                   "--storage", url, "--study", "prebuilt", "--out", str(out))  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"error: study 'prebuilt' in this storage has the direction{'s' * (len(directions) > 1)} "
        f"{', '.join(directions)}; an hwnas search needs maximize, minimize (accuracy_pct, "
        "latency_ms): it is another program's study, pick another --study name"
    ]
    study = optuna.load_study(study_name="prebuilt", storage=url)
    assert study.user_attrs == {} and study.trials == [] and study.metric_names is None
    assert not out.exists()
