"""``hwnas.search(...)``: the CLI's search as a function, with the CLI's defaults (issue 22)."""

from __future__ import annotations

import json

import pytest

import hwnas
from hwnas.cli import main


def _trials(study) -> list[tuple]:
    return [(t.number, t.state.name, t.params, t.values) for t in study.trials]


@pytest.mark.parametrize(
    ("options", "args"),
    [
        ({}, []),
        (
            {"objective": "energy", "max_latency": 8.0},
            ["--objective", "energy", "--max-latency", "8"],
        ),
        ({"strategy": "gdas"}, ["--strategy", "gdas"]),
    ],
)
def test_python_and_the_cli_build_the_same_settings(options, args, monkeypatch, capsys):
    """The same options (and defaults: none given) give the same settings, study name included."""
    import hwnas.jobs

    seen = []

    def stop(settings, *rest):
        seen.append(settings)
        raise hwnas.HwnasError("stop before any work")

    monkeypatch.setattr(hwnas.jobs, "prepare", stop)
    with pytest.raises(hwnas.HwnasError, match="stop before any work"):
        hwnas.search(device="pixel3", **options)
    assert main(["search", "--device", "pixel3", *args]) == 2
    assert "stop before any work" in capsys.readouterr().err
    python, cli = seen
    assert type(python) is type(cli) and python.as_dict() == cli.as_dict()
    if not options:
        assert python.strategy == "frontier" and python.budget == 300


def test_search_from_python_gives_the_clis_study_and_front(tmp_path, capsys):
    import optuna

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.DEBUG)  # a caller's own level
    try:
        api = hwnas.search(
            device="pixel3",
            budget=40,
            storage=f"sqlite:///{tmp_path / 'api.db'}",
            out=tmp_path / "api",
            zoo=False,
        )
        assert optuna.logging.get_verbosity() == optuna.logging.DEBUG  # theirs again
    finally:
        optuna.logging.set_verbosity(verbosity)
    cli_storage = f"sqlite:///{tmp_path / 'cli.db'}"
    code = main(
        ["search", "--device", "pixel3", "--budget", "40", "--storage", cli_storage, "--out",
         str(tmp_path / "cli"), "--no-zoo"]
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    cli_summary = json.loads((tmp_path / "cli" / "summary.json").read_text())

    assert api.summary["settings"] == cli_summary["settings"]
    csv = "pareto.csv"
    assert (tmp_path / "api" / csv).read_bytes() == (tmp_path / "cli" / csv).read_bytes()
    cli_study = optuna.load_study(study_name=api.study_name, storage=cli_storage)
    assert len(api.study.trials) == 40 and _trials(api.study) == _trials(cli_study)
    front = api.front
    assert list(front.columns)[:4] == ["arch", "accuracy", "accuracy_source", "latency_ms"]
    assert list(front["arch"]) == [r.arch for r in api.result.pareto]
    assert api.best == cli_summary["best"] and api.best["arch"] in set(front["arch"])
    assert api.zoo == []


def _digits():
    from hwnas.datasets import load_data

    return load_data("digits", image_size=8, limit=60)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"budgte": 3}, "unknown option of hwnas.search 'budgte'; did you mean budget?"),
        # its own parameters are offered too (main: "did you mean strategy?" alone)
        ({"stroage": "x"}, "did you mean storage or strategy or store?"),
        ({"budget": 0}, "budget must be at least 1, got 0"),
        ({"strategy": "gdas", "budget": 5}, "budget applies to table search"),
        ({"space": "nasbench201", "strategy": "nsga9"}, "unknown strategy 'nsga9'"),
        (
            {"accuracy": lambda model: 1.0},
            "must take (model, arch) or (model, arch, data); it takes 1 positional argument",
        ),
        ({"accuracy": 3}, "the accuracy function must be callable, got int"),
        ({"data": "digits"}, "data applies to supernet strategies"),
        # values the CLI's types would refuse: a string, a fraction, a seed out of range
        ({"budget": "10"}, "budget must be an integer, got '10'"),
        ({"budget": 10.5}, "budget must be an integer, got 10.5"),
        ({"max_latency": "5"}, "max_latency must be a positive number of ms, got '5'"),
        ({"seed": -1}, "seed must be at least 0 and at most 4294967295, got -1"),
        ({"strategy": "gdas", "seed": 2**32}, "seed must be at most 4294967295"),
        ({"objective": "Latency"}, "unknown objective 'Latency'; known: latency, energy"),
        # supernet options: the type before the range (main: TypeError from a comparison)
        ({"strategy": "darts", "latency_weight": "x"}, "latency_weight must be a number, got 'x'"),
        ({"strategy": "darts", "epochs": "2"}, "epochs must be an integer, got '2'"),
        ({"strategy": "darts", "batch_size": None}, "batch_size must be an integer, got None"),
        ({"strategy": "darts", "data": 5}, "data must be 'digits' or a folder's path, got 5"),
        ({"study": 5}, "study must be a string, got 5"),
        # types that reached a TypeError deep inside, or were taken for something else
        ({"dataset": 5}, "dataset must be a string, got 5"),
        ({"measurement_budget": "x"}, "measurement_budget must be an integer, got 'x'"),
        ({"measurement_budget": 5.5}, "measurement_budget must be an integer, got 5.5"),
        ({"predictor": 5}, "predictor must be an artifact's name or folder, got 5"),
        ({"zoo": "no"}, "zoo must be True or False, got 'no'"),
        # a long value by its type: the list's repr ran to 4,918 characters, loaded data's to
        # 811 lines (docs/api.md builds a DataSplits with load_data)
        ({"study": list(range(1000))}, "study must be a string, got a list of 1000 items"),
        (
            {"strategy": "darts", "data": _digits()},
            "data must be 'digits' or a folder's path, got a DataSplits: pass what it was "
            "loaded from, 'digits'",
        ),
        (
            {"strategy": "darts", "predictor": "meta"},
            'use settings={"cost": "predicted"} settings={"predictor": "NAME"}',
        ),
    ],
)
def test_bad_options_raise_one_line_errors_in_keyword_terms(options, message, tmp_path):
    with pytest.raises(hwnas.HwnasError) as info:
        hwnas.search(device="pixel3", out=tmp_path / "run", **options)
    assert message in str(info.value) and "\n" not in str(info.value)
    # in hwnas.search's terms, not the CLI's (--train-zoo is the CLI's alone)
    assert "--" not in str(info.value).replace("--train-zoo", "")
    assert not (tmp_path / "run").exists()  # refused before any work


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"out": 5}, "out must be a path (a string or a pathlib.Path), got 5"),
        ({"store": 5.0}, "store must be a path or a URL (a string or a pathlib.Path), got 5.0"),
        ({"artifact_dir": ["a"]}, "artifact_dir must be a path"),
        # main: out="" wrote summary.json, pareto.csv and pareto.png into the current folder;
        # reporter="x" failed with an AttributeError after the whole search
        ({"out": ""}, "out is empty: give a path"),
        ({"reporter": "x"}, "reporter must be a hwnas.progress.Reporter (or left out), got 'x'"),
    ],
)
def test_paths_of_the_wrong_type_are_one_line_errors(where, message, hwnas_home):
    """main: a TypeError from pathlib deep inside the run."""
    with pytest.raises(hwnas.HwnasError) as info:
        hwnas.search(device="pixel3", budget=2, **where)
    assert message in str(info.value) and not (hwnas_home / "studies.db").exists()


def test_a_chance_level_best_is_a_warning_from_python(tmp_path):
    """What the CLI prints under its best line when the best guesses (pixel3 within 0.1 ms:
    only cells whose output ignores their input) is a :class:`hwnas.HwnasWarning` from
    Python, and ``run.best`` says ``chance_level``."""
    said = r"best is chance-level \(1\.00%.*max_latency=0\.1 ms does better"
    with pytest.warns(hwnas.HwnasWarning, match=said):
        run = hwnas.search(device="pixel3", max_latency=0.1, budget=20, zoo=False,
                           out=tmp_path / "run")  # fmt: skip
    assert run.best["chance_level"] is True and run.best["accuracy"] == pytest.approx(1.0)


def test_a_users_accuracy_function_is_checked_before_any_work(tmp_path):
    """--accuracy FILE.py:NAME: a misspelt name stops in one line with a did-you-mean; a space
    without an accuracy table and no function says what to give."""
    from pathlib import Path

    from helpers import hwnas_main

    # my_space.py builds its space at import in a second; my_model.py trains 30 steps first
    file = Path(__file__).parents[1] / "spaces" / "my_space.py"
    out = tmp_path / "run"
    bad = hwnas_main(
        "search", "--space", f"{file}:space", "--accuracy", f"{file}:holdout_acuracy",
        "--device", "cpu-fast", "--out", str(out),
    )  # fmt: skip
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "did you mean holdout_accuracy" in bad.stderr and not out.exists()
    none = hwnas_main("search", "--space", f"{file}:space", "--device", "cpu-fast")
    assert none.returncode == 2
    assert "has no accuracy table to search over: give an accuracy function" in none.stderr


def test_an_accuracy_function_that_takes_data_without_data_stops_before_any_work(tmp_path):
    """`--accuracy FILE:accuracy` (model, arch, data) without --data: main handed it None
    and the search failed on its first candidate, after starting ('NoneType' object has no
    attribute 'val'), although --help showed '[default: digits]'; now one line, before any
    measurement."""
    from helpers import hwnas_main

    (tmp_path / "acc.py").write_text(
        "def accuracy(net, arch, data):\n    return 100.0 * float(data.val.y.mean() > -1)\n"
    )
    store = tmp_path / "m.db"
    result = hwnas_main(
        "search", "--accuracy", f"{tmp_path / 'acc.py'}:accuracy", "--device", "cpu-fast",
        "--budget", "2", "--store", str(store), "--out", str(tmp_path / "run"),
    )  # fmt: skip
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.returncode == 2 and len(errors) == 1, result.stderr
    assert "accuracy takes (model, arch, data): give the data" in errors[0]
    assert not store.exists() and not (tmp_path / "run").exists()


def test_a_device_or_storage_given_as_a_path_is_named_as_such(tmp_path):
    """`device=Path("pixel3")` said "unknown device 'pixel3'; did you mean pixel3 ...";
    `storage=Path(...)` said the URL could not be parsed."""
    from pathlib import Path

    with pytest.raises(hwnas.HwnasError, match="device must be a device's name"):
        hwnas.search(device=Path("pixel3"), budget=3)
    # measure and predict said "unknown device 'pixel3'; did you mean pixel3"
    for call, device in ((hwnas.measure, Path("pixel3")), (hwnas.predict, Path("pixel3")),
                         (hwnas.measure, None)):  # fmt: skip
        with pytest.raises(hwnas.HwnasError, match="device must be a device's name"):
            call("5", device=device)
    with pytest.raises(hwnas.HwnasError, match=r"a SQLite file is sqlite:///"):
        hwnas.search(device="pixel3", budget=3, storage=tmp_path / "s.db")


def test_an_edited_accuracy_function_is_another_study_the_same_code_resumes():
    """From a notebook: a cell defining ``accuracy`` edited and run again (or another lambda)
    resumed the old function's study and returned its scores ([50.0, 50.0] where the new code
    gives 90): the study name held only the function's name. Its code is now part of the
    study's identity (as a file's digest is for ``--accuracy file.py:fn``); the same code
    defined again resumes, and a lambda's name has no ``<>`` for the run folder."""
    from hwnas.jobs.settings import build_settings

    def study(fn):
        return build_settings({"device": "pixel3", "accuracy": fn}, given={"accuracy"}).study

    def accuracy(net, arch):
        return 50.0

    first = study(accuracy)

    def accuracy(net, arch):  # noqa: F811 (the cell run again, edited)
        return 90.0

    edited = study(accuracy)

    def accuracy(net, arch):  # noqa: F811 (the same code again)
        return 90.0

    assert first != edited == study(accuracy)
    assert "-acc-accuracy-m" in first
    ten, seventy = study(lambda n, a: 10.0), study(lambda n, a: 70.0)
    assert ten != seventy and "-acc-lambda-m" in ten and "<" not in ten


SCALE = 40.0


def test_an_accuracy_function_over_other_values_is_another_study_the_same_values_resume():
    """The digest read only the function's code: the same code over another value (a closure's
    threshold, a global SCALE changed between calls, ``partial(f, scale=2)``, ``Acc(20.0)``
    after ``Acc(10.0)``) resumed the first study and returned its scores, with no word
    (helper-57). The values it works with are part of its identity now; the same values
    resume, and a value that is no plain data (a loader, a model) counts by its type alone."""
    import functools

    import numpy as np
    import torch

    from hwnas.jobs.settings import build_settings

    global SCALE

    def study(fn):
        return build_settings({"device": "pixel3", "accuracy": fn}, given={"accuracy"}).study

    def make(v):
        def acc(net, arch):
            return v

        return acc

    assert study(make(50.0)) != study(make(60.0)) and study(make(60.0)) == study(make(60.0))

    def scaled(net, arch):
        return SCALE

    before = study(scaled)
    SCALE = 80.0
    try:
        assert study(scaled) != before
    finally:
        SCALE = 40.0
    assert study(scaled) == before

    def times(net, arch, scale=1.0):
        return 30.0 * scale

    assert study(functools.partial(times, scale=2)) != study(functools.partial(times, scale=1))

    class Acc:
        def __init__(self, v, loader=None):
            self.v, self.loader = v, loader

        def __call__(self, net, arch):
            return self.v

    assert study(Acc(10.0)) != study(Acc(20.0)) == study(Acc(20.0))
    # data by content; an object of no plain value (a data loader) by its type, so a rerun in
    # another process, where it is another object, resumes
    assert study(Acc(np.zeros(3))) != study(Acc(np.ones(3))) == study(Acc(np.ones(3)))
    assert study(Acc(torch.ones(2))) == study(Acc(torch.ones(2)))
    assert study(Acc(1.0, loader=object())) == study(Acc(1.0, loader=object()))


def test_a_search_run_keeps_its_own_front_and_reports_its_trials(tmp_path):
    """A ``SearchRun`` read ``pareto.csv`` from disk at each ``run.front``: after a longer
    search into the same folder, the old object showed the new front (9 rows became 19) while
    its ``result.pareto`` kept 9. Each keeps the front it wrote; a reporter sees the trials as
    one step (it saw the zoo export alone), and the repr is one line, not the records."""
    from hwnas.progress import Reporter

    class Seen(Reporter):
        def __init__(self):
            self.steps = {}

        def changed(self, step):
            self.steps[step.name] = (step.done, step.total, step.unit)

    seen = Seen()
    out = tmp_path / "shared"
    first = hwnas.search(device="pixel3", budget=20, zoo=False, out=out, reporter=seen)
    assert seen.steps["search pixel3"] == (20, 20, "trials")
    rows = len(first.front)
    later = hwnas.search(device="pixel3", budget=60, zoo=False, out=out)
    assert len(later.front) > rows == len(first.front) == len(first.result.pareto)
    assert "\n" not in repr(first) and repr(first).startswith("SearchRun(study_name=")


def test_a_long_argument_is_shown_short_and_a_long_path_whole():
    """`shown` (a wrong argument's repr ran to hundreds of lines) named a long path by its
    type, "a str of 82 items", where the hint exists to show it; and "a dict of 1 items"."""
    from hwnas.errors import shown

    path = "/data/" + "x" * 100 + "/imgs"
    text = shown(path)
    assert len(text) <= 82 and text.startswith("'/data/x") and text.endswith("/imgs'")
    assert shown({"a": "b" * 100}) == "a dict of 1 item"
    assert shown(list(range(1000))) == "a list of 1000 items" and shown(5) == "5"
    assert shown(path, 300) == repr(path)


def test_python_errors_read_as_python_and_quoted_commands_as_typed(tmp_path, monkeypatch):
    """helper-78: keyword_terms dropped the -- of a CLI option before a lowercase value and
    kept the value bare ("strategy oneshot", "study cwdtest"), also inside a quoted shell
    command (`hwnas refset measure device cpu-fast`, which cannot be typed); --dim x=0 stayed
    a CLI option; settings=5 and data=None were TypeErrors, settings="lr=0.1" read 'l'; a
    max_latency of 1e300 ms overflowed to "no candidate meets"; run.out was relative, so
    run.zoo was [] after an os.chdir."""
    monkeypatch.chdir(tmp_path)
    arch = "|avg_pool_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|nor_conv_1x1~0|skip_connect~1|"
    arch += "skip_connect~2|"
    cases = [
        (lambda: hwnas.search(device="pixel3", space="fbnet", budget=15),
         'supernet strategy (strategy="gdas")'),
        (lambda: hwnas.predict(arch, device="cpu-fast"),
         "run `hwnas refset measure --device cpu-fast`"),
        (lambda: hwnas.measure(arch, device="cpu-fast", dims={"x": 0}),
         'dims={"x": 0}: the size must be at least 1'),
        (lambda: hwnas.search(device="pixel3", strategy="oneshot", settings=5),
         "got 5"),
        (lambda: hwnas.search(device="pixel3", strategy="oneshot", settings="lr=0.1"),
         "got 'lr=0.1'"),
        (lambda: hwnas.search(device="pixel3", strategy="oneshot",  # an AttributeError
                              settings=[("evolution_trials", 4)]),
         "got ('evolution_trials', 4) among them"),
    ]  # fmt: skip
    for call, said in cases:
        with pytest.raises(hwnas.HwnasError) as info:
            call()
        assert said in str(info.value), str(info.value)
    from hwnas.jobs.settings import build_settings

    settings = build_settings({"device": "pixel3", "strategy": "oneshot", "data": None}, {"data"})
    assert settings.data == "digits"
    run = hwnas.search(device="pixel3", budget=6, max_latency=1e300, out="run")
    assert run.out.is_absolute() and run.best is not None
    zoo = run.zoo
    monkeypatch.chdir("/")
    assert run.zoo == zoo and zoo
    with pytest.raises(hwnas.HwnasError) as info:
        hwnas.search(
            device="pixel3", budget=6, max_latency=1e300, study="other", out=tmp_path / "run"
        )  # the same search under another name: that study is offered, as Python spells it
    assert str(info.value).endswith(f'go on with that one: study="{run.study_name}"')


def _twin(seed: int):
    """A tiny module space called "twin", its weights drawn from ``seed``."""
    import torch
    from torch import nn

    import hwnas.nn as hn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, hn.ValueChoice([4, 8], label="w"), 3, padding=1)
            self.head = nn.Linear(self.stem.out_channels, 10)

        def forward(self, x):
            return self.head(self.stem(x).mean((2, 3)))

    torch.manual_seed(seed)
    return hn.space(Net(), torch.zeros(1, 3, 8, 8), name="twin", dataset="digits")


def test_a_search_runs_on_its_own_space_object_whatever_registers_the_name_meanwhile(
    tmp_path, monkeypatch
):
    """Two hwnas.search calls in threads, each with a space object called "twin": the second
    call's registration of its object under the name, between the first's and its lookups by
    name, made the first search the second's space (its study, front and fingerprint) with
    no word. Here the other thread's registration is made at that moment (in build_settings)."""
    import hwnas.jobs.settings as settings_module

    mine, other = _twin(1), _twin(2)
    assert mine.fingerprint != other.fingerprint
    build = settings_module.build_settings

    def another_thread_registers(*args, **kwargs):  # hwnas.search(space=other) in a thread
        hwnas.register_space(other)
        return build(*args, **kwargs)

    monkeypatch.setattr(settings_module, "build_settings", another_thread_registers)
    run = hwnas.search(device="cpu-fast", space=mine, accuracy=lambda m, a: 50.0, budget=2,
                       zoo=False, out=tmp_path / "run")  # fmt: skip
    assert run.summary["settings"]["space_fingerprint"].split()[0] == mine.fingerprint


def test_supernet_searches_in_threads_find_what_each_finds_alone(tmp_path):
    """Two gdas searches in threads drew from torch's one generator (each seeds it and then
    draws from it while the other does) and each reset the other's threads at its end: their
    fronts differed from the same searches run alone or from the CLI, stored under the same
    seeded study names. Now a supernet search runs alone in its process: two of the same
    settings (two studies) find the same front, as one after the other would."""
    import threading
    import warnings

    runs: dict[str, object] = {}

    def search(study):
        with warnings.catch_warnings():  # a chance-level best after so short a training
            warnings.simplefilter("ignore", hwnas.HwnasWarning)
            runs[study] = hwnas.search(
                device="pixel3", strategy="gdas", data="digits", epochs=1, batch_size=32,
                finetune_epochs=0, zoo=False, settings={"limit": 160, "channels": 4,
                "cost": "flops"}, study=study, out=tmp_path / study,
            )  # fmt: skip

    threads = [threading.Thread(target=search, args=(s,)) for s in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    one, two = ([(r.arch, r.accuracy) for r in runs[s].result.pareto] for s in ("one", "two"))
    assert one and one == two


def test_a_run_whose_zoo_is_empty_has_no_entries_instead_of_an_error(tmp_path, monkeypatch):
    """Every architecture within 0.01 ms on the Pixel 3 is at chance level, so the zoo holds
    none: ``run.zoo`` raised "the run ... put no model in its zoo ... or it ran with --no-zoo"
    where its docstring promises the entry folders."""
    monkeypatch.chdir(tmp_path)
    run = hwnas.search(device="pixel3", max_latency=0.01, budget=10, study="empty-zoo")
    assert run.best["chance_level"] and (run.out / "zoo").is_dir()
    assert run.zoo == []
