"""A space written in PyTorch code (``hwnas.nn.space``) and a user's model made elastic
(``hwnas.elastic``), searched with the user's own files and functions: what the zoo ships,
what the cards and summaries claim, how the user's files are imported."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import hwnas_main
from torch import nn

import hwnas
import hwnas.nn as hn


class Tiny(nn.Module):
    """Stem of elastic width, a classifier: 2 architectures."""

    def __init__(self, width=None):
        super().__init__()
        width = width if width is not None else hn.ValueChoice([4, 8], label="w")
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.fc = nn.Linear(width, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.stem(x)).mean((2, 3)))


def test_a_space_written_in_pytorch_has_no_inherited_weights(tmp_path):
    """Every module space has ``subnet``, so ``ability(space, InheritedSpace)`` held for a
    ``hwnas.nn.space`` space too: its accuracy function scored the module's random starting
    weights "on inherited weights", summary.json said ``zoo_weights: inherited`` and the cards
    ``license: other`` ("derive from the model made elastic"). Only ``hwnas.elastic``'s
    spaces have inherited weights."""
    from hwnas.spaces import InheritedSpace, ability
    from hwnas.zoo.card import license_of

    space = hn.space(Tiny(), torch.zeros(1, 3, 8, 8), name="tinyinh", dataset="digits")
    model = hwnas.elastic(Tiny(8), torch.zeros(1, 3, 8, 8), name="tinyel", dataset="digits")
    assert space.describe()["inherited_weights"] is False
    assert ability(space, InheritedSpace) is None and ability(model, InheritedSpace) is model
    assert license_of(space, False)[0] == "mit" and license_of(model, False)[0] == "other"
    run = hwnas.search(
        device="cpu-fast", space=space, accuracy=lambda net, arch: 50.0, budget=2,
        out=tmp_path / "run", storage=f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    assert all("on a fresh network" in r.attrs["accuracy_source"] for r in run.result.records)
    assert run.summary["zoo_weights"] == "random"
    for entry in run.zoo:
        card = json.loads((entry / "card.json").read_text())
        assert card["license"] == "mit" and "made elastic" not in card["license_note"]


@pytest.mark.parametrize(
    "code, said",
    [
        ("import sys\nsys.exit(3)\n", "called sys.exit(3): "),
        ("import sys\nsys.exit()\n", "called sys.exit(): "),
        (
            "import argparse\np = argparse.ArgumentParser()\n"
            "p.add_argument('--lr', required=True)\nargs = p.parse_args()\n",
            "called sys.exit(2) in argparse's parse_args",
        ),
        ("raise KeyboardInterrupt\n", "raised KeyboardInterrupt itself (no Ctrl-C was pressed)"),
    ],
    ids=["exit3", "exit", "argparse", "kbint"],
)
def test_a_file_that_exits_when_imported_is_one_error_line(tmp_path, code, said):
    """A user file that called sys.exit at import ended hwnas with no output and status 0 (or
    3, silently), a module-level argparse printed a usage line naming hwnas, and a file raising
    KeyboardInterrupt made `hwnas spaces show` say "interrupted: the study ... saved". Now
    each is one `error: importing FILE ...` line, status 2, and HwnasError from Python; the
    file runs with sys.argv [FILE], so its argparse reads none of hwnas's options."""
    file = tmp_path / "exits.py"
    file.write_text(code)
    for args in (["spaces", "show", f"{file}:space"],
                 ["search", "--space", f"{file}:space", "--strategy", "oneshot", "--device",
                  "cpu-fast", "--data", "digits"]):  # fmt: skip
        r = hwnas_main(*args)
        last = r.stderr.strip().splitlines()[-1]
        assert r.returncode == 2 and last.startswith(f"error: importing {file} {said}"), r.stderr
        assert "interrupted" not in r.stderr and "usage: hwnas" not in r.stderr
    with pytest.raises(hwnas.HwnasError, match="^importing .*exits.py"):
        hwnas.search(space=f"{file}:space", device="cpu-fast", strategy="oneshot", data="digits")


def test_a_files_argparse_reads_its_own_defaults_and_ctrl_c_while_importing_stays_ctrl_c(tmp_path):
    """sys.argv is the file's own while it is imported (as `python FILE` would run it), and a
    real SIGINT during the import is still KeyboardInterrupt (Ctrl-C), not the file's error."""
    from hwnas.usercode import code_object

    file = tmp_path / "parses.py"
    file.write_text(
        "import argparse, sys\np = argparse.ArgumentParser()\n"
        "p.add_argument('--lr', type=float, default=0.1)\nlr = p.parse_args().lr\n"
        "argv = list(sys.argv)\n"
    )
    assert code_object(f"{file}:lr") == 0.1 and code_object(f"{file}:argv") == [str(file)]
    slow = tmp_path / "slow.py"
    slow.write_text("import os, signal, time\nos.kill(os.getpid(), signal.SIGINT)\ntime.sleep(5)\n")
    with pytest.raises(KeyboardInterrupt):
        code_object(f"{slow}:space")


SPACE_FILE = """
import torch
from torch import nn
import hwnas.nn as hn


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        w = hn.ValueChoice([4, 8], label="w")
        self.stem = nn.Conv2d(3, w, 3, padding=1)
        self.fc = nn.Linear(w, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.stem(x)).mean((2, 3)))


space = hn.space(Tiny(), torch.zeros(1, 3, 8, 8), name="tinyfile", dataset="digits")


def accuracy(net, arch):
    return 50.0
"""


def test_a_space_named_by_its_file_from_python_is_the_same_study_in_every_process(tmp_path):
    """A study knows a module space by its weights: `hwnas.search(space="file.py:space")`
    imports the file with the global generators seeded, as the CLI does, so the file imported
    again (a new process) with torch's generator elsewhere builds the same weights, and the
    same call is the same study, resumed (a space object built in the user's own script is
    the user's to seed: docs/api.md)."""
    import sys

    from hwnas.spaces import reload_spaces

    file = tmp_path / "tinyfile.py"
    file.write_text(SPACE_FILE)
    options = dict(
        space=f"{file}:space", accuracy=f"{file}:accuracy", device="cpu-fast", zoo=False,
        storage=f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    first = hwnas.search(budget=1, out=tmp_path / "a", **options)
    for name in [n for n, m in sys.modules.items() if getattr(m, "__file__", "") == str(file)]:
        del sys.modules[name]  # as in a new process
    reload_spaces()
    torch.manual_seed(12345)
    torch.rand(7)
    again = hwnas.search(budget=2, out=tmp_path / "b", **options)
    assert again.study_name == first.study_name
    assert again.summary["trials"]["completed"] == 2 and len(again.result.records) == 2


def test_a_space_named_by_its_file_is_taken_by_get_space_and_zoo_load(tmp_path):
    """`hwnas.get_space("file.py:space")` and `hwnas.zoo.load(entry, torch=True,
    space="file.py:space")` refused the form their own messages recommended ("hwnas imports
    a space's code only when you give it yourself (--space FILE.py:ATTR, ...)"), though the
    caller gave it; a zoo card's own space name still never imports code."""
    file = tmp_path / "tinyfile.py"
    file.write_text(SPACE_FILE)
    run = hwnas.search(space=f"{file}:space", accuracy=f"{file}:accuracy", device="cpu-fast",
                       budget=1, out=tmp_path / "run")  # fmt: skip
    space = hwnas.get_space(f"{file}:space")
    assert space.name == "tinyfile"
    net = hwnas.zoo.load(run.zoo[0], torch=True, space=f"{file}:space")
    assert net(torch.zeros(1, 3, 8, 8)).shape == (1, 10)
    with pytest.raises(hwnas.HwnasError, match="names Python code"):
        hwnas.spaces.get_space(f"{file}:space")  # as a name read from a file is looked up


@pytest.mark.parametrize(
    "bad, said",
    [
        (["--data", "/nonexistent/folder"], "is neither 'digits' nor an existing folder"),
        (["--data", "digts"], "(did you mean digits?)"),
        (["--epochs", "0"], "--epochs must be at least 1, got 0"),
        (["--batch-size", "1"], "--batch-size must be at least 2, got 1"),
        (["--measurement-budget", "5"], "--measurement-budget applies to table search"),
        (["--study", "a/b"], "contains a path separator"),
        (["--accuracy", "nosuch.py:acc"], "Python file not found: nosuch.py"),
        (["--store", "/no/such/x.db"], "folder /no/such does not exist"),
        (["--artifact-dir", "/proc/no/such"], "--artifact-dir /proc/no/such is not writable"),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_what_needs_no_space_is_refused_before_the_space_file_runs(tmp_path, bad, said):
    """`--data /nonexistent/folder` (and the store's folder, the training numbers, the
    options of the other kind of search, ...) were refused only after the user's space file
    was imported: its code ran (a model trained) first. Typed after --space or before it."""
    marker = tmp_path / "imported"
    file = tmp_path / "mynet.py"
    file.write_text(f"open({str(marker)!r}, 'w').write('yes')\n")
    for args in (["--space", f"{file}:space", *bad], [*bad, "--space", f"{file}:space"]):
        r = hwnas_main("search", "--device", "cpu-fast", "--strategy", "oneshot", *args)
        assert r.returncode == 2 and said in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert not marker.exists()
    with pytest.raises(hwnas.HwnasError, match="is neither 'digits' nor an existing folder"):
        hwnas.search(
            device="cpu-fast", space=f"{file}:space", strategy="oneshot", data="/no/such/folder"
        )
    assert not marker.exists()


def test_a_run_folder_of_another_search_is_not_offered_to_go_on_with(tmp_path):
    """After the space file was edited, the same command into the same --out said "give
    another --out, or go on with that one: --study OLD", and that --study was then refused
    as "made by a different search (space_fingerprint ...)". The offer is made only where
    the folder's run is this search's."""
    import sys

    from hwnas.spaces import reload_spaces

    file = tmp_path / "tinyfile.py"
    file.write_text(SPACE_FILE)
    args = ["search", "--space", f"{file}:space", "--accuracy", f"{file}:accuracy",
            "--device", "cpu-fast", "--budget", "1", "--no-zoo",
            "--out", tmp_path / "run"]  # fmt: skip
    first = hwnas_main(*args)
    assert first.returncode == 0, first.stderr
    named = hwnas_main(*args, "--study", "mine")  # another name, the same search: offered
    assert named.returncode == 2, named.stderr
    assert "go on with that one: --study tinyfile-" in named.stderr
    file.write_text(SPACE_FILE.replace("[4, 8]", "[4, 12]"))
    for name in [n for n, m in sys.modules.items() if getattr(m, "__file__", "") == str(file)]:
        del sys.modules[name]  # as in a new process
    reload_spaces()
    edited = hwnas_main(*args)
    assert edited.returncode == 2 and "another search (space_fingerprint differ)" in edited.stderr
    assert "--study" not in edited.stderr, edited.stderr


def test_importing_another_spaces_calibration_says_to_name_the_space(tmp_path):
    """`hwnas refset export --space mycnn.py:space` writes calibration.csv; `hwnas measure
    import --device myboard calibration.csv` read it as NAS-Bench-201's (the default) and
    said only "unknown or malformed nasbench201 arch"."""
    csv = tmp_path / "calibration.csv"
    csv.write_text("arch,latency_ms\n" + "".join(f"w={w},{w}.5\n" for w in (4, 8, 12)))
    r = hwnas_main("measure", "import", "--device", "myboard", csv)
    assert r.returncode == 2 and "unknown or malformed nasbench201 arch" in r.stderr
    assert "another space? name it as `hwnas refset export` was given it: --space" in r.stderr
    assert r.stderr.count("\n") == 1


def test_spaces_show_says_an_accuracy_function_scores_a_space_without_a_table(tmp_path):
    """`hwnas spaces show mycnn.py:space` said "accuracy none: supernet search on your data",
    though `hwnas search --accuracy FILE.py:FUNCTION` searches it with the user's function."""
    file = tmp_path / "tinyfile.py"
    file.write_text(SPACE_FILE)
    r = hwnas_main("spaces", "show", f"{file}:space")
    assert r.returncode == 0, r.stderr
    said = next(x for x in r.stdout.splitlines() if x.startswith("accuracy"))
    assert "a supernet search on your data" in said and "--accuracy FILE.py:FUNCTION" in said
    table = next(
        x for x in hwnas_main("spaces", "show", "nasbench201").stdout.splitlines()
        if x.startswith("accuracy")
    )  # fmt: skip
    assert "a benchmark table" in table and "--accuracy" in table


@pytest.mark.parametrize(
    "values, said",
    [([2, 4], "its kernel sizes 2, 4 are even"), ([3, 4], "its kernel size 4 is even")],
)
def test_an_even_kernel_choice_is_called_even(values, said):
    """A square kernel of even size was refused as "(4, 4) is not square and odd"."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            k = hn.ValueChoice(values, label="k")
            self.c = nn.Conv2d(3, 16, k, padding=k // 2)
            self.h = nn.Linear(16, 10)

        def forward(self, x):
            return self.h(self.c(x).mean((2, 3)))

    with pytest.raises(hwnas.HwnasError, match=f"cannot be searched: {said} \\(only an odd"):
        hn.space(Net(), torch.zeros(1, 3, 16, 16), name="evenk", dataset="digits")


class _Scored:
    """What the test's accuracy function saw (known to a study by its type alone)."""

    def __init__(self):
        self.nets: dict = {}
        self.calls = 0


def _training_accuracy(seen: _Scored):
    """An accuracy function that changes the weights it scores (as one that trains does),
    differently at each call, and keeps a copy of the network it scored."""
    import copy

    def accuracy(net, arch):
        seen.calls += 1
        with torch.no_grad():
            net.fc.bias.add_(float(seen.calls))
        seen.nets[arch.text] = copy.deepcopy(net).eval()
        return 50.0 + seen.calls

    return accuracy


def _zoo_is_what_was_scored(run, seen: _Scored, space) -> list[dict]:
    """Each zoo entry's ONNX model (and its PyTorch module) computes what the network the
    function scored computes; returns the cards."""
    import numpy as np

    from hwnas.zoo import load

    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    cards = []
    assert run.zoo
    for entry in run.zoo:
        card = json.loads((entry / "card.json").read_text())
        with torch.no_grad():
            want = seen.nets[card["arch"]](torch.from_numpy(x)).numpy()
            module = load(entry, torch=True, space=space)(torch.from_numpy(x)).numpy()
        assert np.abs(load(entry).run(None, {"input": x})[0] - want).max() < 1e-5
        assert np.abs(module - want).max() < 1e-5
        assert card["weights"]["kind"] == "trained"
        assert card["weights"]["note"].startswith("as your accuracy function left it")
        cards.append(card)
    return cards


def test_the_zoo_ships_the_network_the_accuracy_function_trained(tmp_path):
    """docs/api.md: the function "may train the model before scoring it" and "the zoo ships
    the networks your function scored"; the zoo cut the subnet again, so it shipped the
    untrained network with the trained one's accuracy on a card saying "trained" (9.47% for a
    reported 27.02%). Now it ships the network as the function left it; resumed into the same
    run folder, the entries written stay; resumed elsewhere by another process (a new
    evaluator), each front network is scored again, and a score that differs from the
    search's is the card's, saying so."""
    seen = _Scored()
    space = hwnas.elastic(Tiny(8), torch.zeros(1, 3, 8, 8), name="tinytrain", dataset="digits")
    options = dict(
        device="cpu-fast", space=space, accuracy=_training_accuracy(seen), budget=2,
        out=tmp_path / "run", storage=f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    run = hwnas.search(**options)
    for card in _zoo_is_what_was_scored(run, seen, space):
        assert card["accuracy"]["value"] == run.front.set_index("arch").accuracy[card["arch"]]
    assert run.summary["zoo_weights"] == "function-trained"
    calls = seen.calls
    again = hwnas.search(**options)  # resumed: its zoo's entries kept, none scored again
    assert again.summary["trials"]["completed"] == 2 and seen.calls == calls
    assert again.summary["zoo_weights"] == "function-trained"
    _zoo_is_what_was_scored(again, seen, space)
    elsewhere = hwnas.search(**{**options, "out": tmp_path / "elsewhere"})
    assert seen.calls == calls + len(elsewhere.zoo) and elsewhere.zoo
    for card in _zoo_is_what_was_scored(elsewhere, seen, space):
        assert card["accuracy"]["value"] > calls + 50  # the new score, not the search's
        assert "scored again as the zoo was written" in card["accuracy"]["source"]


def test_the_zoo_ships_a_fresh_network_the_accuracy_function_trained(tmp_path):
    """A space written in PyTorch code: the function gets a freshly built network; one it
    trains ships as it left it (the zoo exported the space's network with random weights)."""
    seen = _Scored()
    space = hn.space(Tiny(), torch.zeros(1, 3, 8, 8), name="tinyfresh", dataset="digits")
    run = hwnas.search(
        device="cpu-fast", space=space, accuracy=_training_accuracy(seen), budget=2,
        out=tmp_path / "run", storage=f"sqlite:///{tmp_path / 's.db'}",
    )  # fmt: skip
    _zoo_is_what_was_scored(run, seen, space)
    assert run.summary["zoo_weights"] == "function-trained"
