"""Every user mistake gives one line on stderr and exit status 2, never a traceback."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from helpers import hwnas_cli, hwnas_main

SMALL = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"
BAD_ARCH = "|nor_conv_3x3~0|+|conv_5x5~0|none~1|+|none~0|none~1|none~2|"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["search", "--device", "pixel99"], "unknown device 'pixel99'"),
        (["search", "--device", "pixel3", "--space", "darts"], "unknown search space 'darts'"),
        (["search", "--device", "pixel3", "--dataset", "mnist"], "unknown dataset 'mnist'"),
        (["search", "--device", "pixel8"], "device 'pixel8' cannot measure"),
        (["search", "--device", "pixel3", "--strategy", "annealing"], "unknown strategy"),
        # a name typed in other case gets its closest names too (it got none)
        (["search", "--device", "pixel3", "--strategy", "NSGA2"],
         "unknown strategy 'NSGA2'; did you mean nsga2 or nsga3?"),
        (["search", "--device", "pixel3", "--dataset", "CIFAR100"],
         "unknown dataset 'CIFAR100'; did you mean cifar100 or cifar10?"),
        (["search", "--device", "pixel3", "--strategy", "singlepath"],  # its space, not named
         "no recorded measurements for space 'ofa' (it has: nasbench201, fbnet); strategy "
         "'singlepath' searches the ofa space only"),
        (["search", "--device", "pixel3", "--strategy", "pcdarts"],  # the field's name for it
         "pcdarts is darts with --set partial_channels=K (PC-DARTS"),
        (["search", "--device", "pixel3", "--objective", "energy"], "no energy_mj"),
        (["search", "--device", "v100_1"], "no recorded measurements for space 'nasbench201'"),
        (
            ["search", "--device", "pixel3", "--storage", "nosuchdb://x"],
            "unknown database scheme 'nosuchdb' in nosuchdb://x (a study storage",
        ),
        (  # a misspelt scheme named the psycopg2 driver as not installed
            ["search", "--device", "pixel3", "--storage", "postgresq://nas@127.0.0.1/db"],
            "unknown database scheme 'postgresq' in postgresq://nas@127.0.0.1/db (did you mean "
            "postgresql?",
        ),
        (
            ["measure", "--device", "cpu", "--arch", "5", "--store", "postgresq://nas@h/db"],
            "unknown database scheme 'postgresq' in postgresq://nas@h/db (did you mean "
            "postgresql?",
        ),
        (["search", "--device", "cpu", "--store", "{bad_store}"], "is not an SQLite database"),
        (["devices", "--store", "{bad_store}"], "is not an SQLite database"),
        # a mistyped folder: main made it and started an empty store there, silently
        (["search", "--device", "cpu", "--store", "{tmp}/typo/m.db", "--budget", "2"],
         "folder {tmp}/typo does not exist"),
        (["measure", "--device", "cpu", "--arch", "5", "--store", "{tmp}/typo/m.db"],
         "folder {tmp}/typo does not exist"),
        (["arch", BAD_ARCH], "unknown operation 'conv_5x5'"),
        (["arch", "99999"], "out of range"),
        # a number that is not an index was read as a malformed arch string ("expected 3 node
        # groups"); a predictor's weights file named instead of its folder, as not found
        (["arch", "3.0"], "'3.0' is not an index of nasbench201: an index is a whole number"),
        (["arch", "--", "-1"], "'-1' is not an index of nasbench201"),
        (["predict", "--device", "pixel3", "--arch", "5", "--predictor", "{tmp}/afile"],
         "is a file: a predictor artifact is a folder (card.json + weights.npz); name its folder"),
        (["predictor", "train", "--space", "nasbench201", "--devices", "pixel3,fpga,pixel3",
          "--name", "t"], "--devices names pixel3 more than once"),
        (["predictor", "eval", "nasbench201", "--devices", "fpga,fpga"],
         "--devices names fpga more than once"),
        (["dashboard", "--storage", "sqlite:///{tmp}/none.db"], "no study database"),
        (["search", "--device", "pixel3", "--strategy", "gdas", "--epochs", "0"],
         "--epochs must be at least 1"),
        (["search", "--device", "pixel3", "--strategy", "gdas", "--finetune-epochs", "-1"],
         "--finetune-epochs must be >= 0"),
        (["search", "--device", "pixel3", "--strategy", "gdas", "--batch-size", "0"],
         "--batch-size must be at least 2"),
        (["search", "--device", "pixel3", "--strategy", "gdas", "--latency-target", "0"],
         "--latency-target must be positive"),
        (["search", "--device", "pixel3", "--strategy", "gdas", "--latency-weight", "-1"],
         "--latency-weight must be >= 0"),
        # a supernet trained for a limit or target no subnet meets (the table search's check)
        (["search", "--device", "pixel3", "--strategy", "gdas", "--max-latency", "0.001"],
         "meets --max-latency 0.001 ms on device 'pixel3': the fastest of its 15,625"),
        (["search", "--device", "pixel3", "--strategy", "darts", "--latency-target", "0.001"],
         "meets --latency-target 0.001 ms on device 'pixel3'"),
        # a table of whole batches: the limit and the fastest value in its unit
        (["search", "--device", "1080ti_32", "--max-latency", "0.001"],
         "meets --max-latency 0.001 ms per batch of 32 on device '1080ti_32': the fastest of "
         "its 15,625 recorded latencies is 3.538 ms per batch of 32"),
        # and one above every recorded latency (trained, derived and exited 0 with a warning)
        (["search", "--device", "pixel3", "--strategy", "gdas", "--latency-target", "1e9"],
         "reaches --latency-target 1e+09 ms on device 'pixel3': the slowest of its 15,625 "
         "recorded latencies is 36.7665 ms"),
        (["search", "--device", "pixel3", "--strategy", "gdas", "--set", "tau_min=20"],
         "--set tau_min=20 is above tau_max=10"),
        (["search", "--device", "pixel3", "--strategy", "gdas", "--set", "cost=flops",
          "--latency-target", "5"],  # refused after the study and run folder were made
         "--latency-target needs a latency cost model, not FLOPs (cost=flops)"),
        (["search", "--device", "pixel3", "--strategy", "darts", "--set", "lr_min=1e30"],
         "--set lr_min=1e+30 is above lr=0.025"),  # trained to a NaN loss, exit 0
        (["measure", "--device", "cpu-fast", "--arch", SMALL, "--batch-size", "0"],
         "--batch-size must be at least 1, got 0"),
        (["measure", "--device", "cpu-fast", "--arch", SMALL, "--batch-size", "-2"],
         "--batch-size must be at least 1, got -2"),
        (["search", "--device", "pixel3", "--out", "{tmp}/afile/run"],
         "--out {tmp}/afile/run cannot be created: {tmp}/afile is a file"),
        (["search", "--device", "pixel3", "--strategy", "gdas", "--out", "{tmp}/afile/run"],
         "--out {tmp}/afile/run cannot be created: {tmp}/afile is a file"),
        (["search", "--device", "pixel3", "--budget", "-5"], "--budget must be at least 1"),
        (["search", "--device", "pixel3", "--store", "{tmp}/afile"],  # read by nothing: said
         "--store: device 'pixel3' is a recorded table"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--budget", "50"],
         "--budget applies to table search, not to supernet strategy 'gdas'"),
        (["search", "-d", "pixel3", "--strategy", "oneshot", "--budget", "50"],
         "--budget applies to table search, not to supernet strategy 'oneshot'; the subnets its "
         "evolution scores: --set evolution_trials=N"),
        (["search", "-d", "cpu", "--strategy", "gdas", "--runtime", "tvm"],
         "--runtime applies to table search, not to supernet strategy 'gdas'"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--predictor", "nasbench201"],
         "--predictor applies to table search, not to supernet strategy 'gdas'; for a supernet "
         "cost model from a predictor use --set cost=predicted --set predictor=NAME"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "batch_size=7"],
         "--set batch_size=... is the option --batch-size; use that"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "finetune_epochs=9"],
         "--set finetune_epochs=... is the option --finetune-epochs; use that"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "lr=abc"],
         "--set lr=abc: lr must be a number"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "lr=-1"],
         "--set lr=-1: lr must be > 0"),
        (["search", "-d", "pixel3", "--strategy", "darts", "--set", "order=3"],
         "--set order=3: order must be one of 1, 2"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "order=2"],
         "--set order: no such setting for strategy 'gdas' on space 'nasbench201' (order is "
         "read by strategy darts); valid: "),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "width=0.5"],
         "(width is read by the fbnet supernet, the ofa supernet, the supernet of declared "
         "spaces)"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "cost=guess"],
         "--set cost=guess: cost must be one of auto, table, measured, flops, predicted"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "channels=2.5"],
         "--set channels=2.5: channels must be an integer"),
        (["search", "-d", "pixel3", "--train-zoo", "--no-zoo"],
         "--train-zoo trains the zoo's models; it cannot go with --no-zoo"),
        (["train", BAD_ARCH, "--data", "digits"], "unknown operation 'conv_5x5'"),
        (["train", SMALL, "--data", "{tmp}/nodata"],
         "--data '{tmp}/nodata' is neither 'digits' nor an existing folder"),
        (["train", SMALL, "--data", "digits", "--out", "{tmp}"],
         "{tmp} exists and is not a zoo entry; give --out a new folder"),
    ],
)  # fmt: skip
def test_one_line_error_and_exit_2(args, expected, tmp_path, monkeypatch, capsys):
    """Through the CLI's entry point in this process (the command line as typed; a bug would
    raise out of ``main`` instead of printing one line). Every ``hwnas`` subprocess costs
    0.5 s of imports; the subprocess tests below and across the suite run the script itself."""
    from hwnas.cli import main

    bad_store = tmp_path / "bad.db"
    bad_store.write_text("not a database " * 50)
    (tmp_path / "afile").write_text("a file where a folder should be")
    args = [a.format(bad_store=bad_store, tmp=tmp_path) for a in args]
    expected = expected.format(tmp=tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(args)
    out = capsys.readouterr()
    assert code == 2, (out.out, out.err)
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], out.err
    assert "Traceback" not in out.err + out.out
    assert not (tmp_path / "runs").exists()  # nothing written for a bad command


def test_an_error_quoting_a_huge_value_is_one_bounded_line():
    """`hwnas arch` of a 100,000-character string (or a resumed study holding one) printed it
    whole in the error line; the line now keeps its first 1,500 and last 500 characters."""
    r = hwnas_main("arch", "|nor_conv_3x3~0|+|" + "x" * 100_000)
    (line,) = r.stderr.splitlines()
    assert r.returncode == 2 and len(line) < 2100, len(line)
    assert line.startswith("error: malformed NAS-Bench-201 arch string '|nor_conv_3x3~0|+|xxx")
    assert "characters left out) ... " in line and line.endswith("joined by '+', found 2")


def test_usage_errors_exit_2():
    r = hwnas_cli("search")
    assert r.returncode == 2 and "Missing option '--device'" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["search", "--device"], "hwnas search"),
        (["predictor", "train", "--devices"], "hwnas predictor train"),
        (["measure", "import", "--device"], "hwnas measure import"),
        (["search", "--bogus"], "hwnas search"),
        (["--bogus"], "hwnas"),
    ],
)
def test_a_usage_error_points_to_the_help_of_the_command_typed(args, command, capsys):
    """An option given without its value is found before click makes the command's context:
    the hint said ``(hwnas --help)`` for every command."""
    from hwnas.cli import main

    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert err.endswith(f"({command} --help)"), err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["predict", "-d", "cpu", "--onnx", "a.onnx", "b.onnx"],
         "extra argument (b.onnx): --onnx takes one value; repeat it for each (--onnx a.onnx "
         "--onnx b.onnx ...) (hwnas predict --help)"),
        (["measure", "-d", "cpu", "--onnx=a.onnx", "b.onnx", "c.onnx"],  # under a group
         "No such command 'b.onnx': --onnx takes one value; repeat it for each (--onnx a.onnx "
         "--onnx b.onnx ...) (hwnas measure --help)"),
        (["search", "-d", "pixel3", "--strategy", "gdas", "--set", "lr=0.1", "epochs=1"],
         "--set takes one value; repeat it for each (--set lr=0.1 --set epochs=1 ...)"),
        (["predict", "-d", "pixel3", "stray"], "Got unexpected extra argument (stray) (hwnas"),
        (["measure", "-d", "cpu", "nosuch"], "No such command 'nosuch' (hwnas measure --help)"),
    ],
)  # fmt: skip
def test_values_of_a_repeatable_option_after_one_flag_say_to_repeat_it(args, expected, capsys):
    """``--onnx *.onnx`` (a shell glob) gave "No such command 'b.onnx'" under ``hwnas
    measure``, and "unexpected extra argument" elsewhere, without a word of what to type."""
    from hwnas.cli import main

    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and expected in err, err


def assert_error_line(r, expected: str) -> None:
    """Assert that ``r`` exited 2 with one line, "error: ..." holding ``expected``, and no
    traceback."""
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_onnx_models_hwnas_cannot_feed_are_refused_before_measuring(tmp_path):
    """Token ids and masks are fed (tests/test_onnx_inputs.py); a string input, or a sequence
    axis left dynamic, cannot be, and each says so in one line."""
    import onnx
    from onnx import TensorProto, helper

    def model(inputs, path):
        out = helper.make_tensor_value_info("y", inputs[0].type.tensor_type.elem_type, [1, 4])
        nodes = [helper.make_node("Identity", [inputs[0].name], ["y"])]
        graph = helper.make_graph(nodes, "g", inputs, [out])
        onnx.save(helper.make_model(graph), path)
        return str(path)

    text = model([helper.make_tensor_value_info("s", TensorProto.STRING, [1, 4])], tmp_path / "a")
    seq = model([helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", "seq"])],
                tmp_path / "b")  # fmt: skip
    r = hwnas_main("measure", "--device", "cpu-fast", "--onnx", text, cwd=tmp_path)
    assert_error_line(r, "input 's' is string; hwnas feeds inputs of type float, float16")
    r = hwnas_main("measure", "--device", "cpu-fast", "--onnx", seq, cwd=tmp_path)
    assert_error_line(r, "input 'ids' axis 1 is dynamic ('seq'); only the batch axis may be, as")


def test_a_home_that_cannot_be_written_is_found_before_any_work(tmp_path):
    (tmp_path / "file").write_text("not a folder")
    home = str(tmp_path / "file" / "home")
    for args in (["search", "--device", "pixel3"], ["measure", "-d", "cpu", "--arch", SMALL]):
        r = hwnas_main(*args, cwd=tmp_path, env={"HWNAS_HOME": home})
        assert_error_line(r, f"HWNAS_HOME {home} cannot be created: {tmp_path / 'file'} is a file")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", [["search"], ["measure", "--arch", "5"], ["refset", "measure"]])
def test_a_wrong_device_is_refused_before_a_space_file_is_imported(command, tmp_path):
    """A space written in Python is the user's code, and may train at import: a misspelt
    --device typed after --space used to import it first (click ran --space's callback in the
    order typed)."""
    marker = tmp_path / "imported"
    (tmp_path / "net.py").write_text(
        f"from pathlib import Path\nPath({str(marker)!r}).write_text('ran')\nspace = None\n"
    )
    r = hwnas_main(*command, "--space", f"{tmp_path / 'net.py'}:space", "--device", "typo",
                  cwd=tmp_path)  # fmt: skip
    assert_error_line(r, "unknown device 'typo'; known")
    assert not marker.exists()


def test_one_malformed_user_profile_is_skipped_and_named(tmp_path):
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "myboard.yaml").write_text("name: myboard\nkind: [unclosed\n")
    env = {"HWNAS_DEVICES_PATH": str(folder)}
    r = hwnas_cli("search", "--device", "pixel3", "--budget", "5", "--no-zoo", cwd=tmp_path,
                  env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr  # every other device still works
    assert f"warning: skipped device profile {folder / 'myboard.yaml'}" in r.stderr
    r = hwnas_cli("search", "--device", "myboard", cwd=tmp_path, env=env)
    assert r.returncode == 2 and f"device profile {folder / 'myboard.yaml'} is broken" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr  # main: a warning, then the error
    r = hwnas_cli("devices", cwd=tmp_path, env={**env, "COLUMNS": "200"})
    assert r.returncode == 0 and "broken profile" in r.stdout and "myboard.yaml" in r.stdout
    assert "warning: skipped" not in r.stderr  # listed once, not warned of as well


def test_a_zoo_export_that_fails_part_way_leaves_no_partial_zoo(tmp_path, monkeypatch):
    import hwnas.export
    from hwnas.devices import get_device
    from hwnas.engine.evaluate import TableEvaluator
    from hwnas.engine.loop import SearchSettings, run_search
    from hwnas.export_cache import cache_root
    from hwnas.measure import Profiler
    from hwnas.spaces import get_space
    from hwnas.zoo import write_zoo

    space = get_space("nasbench201")
    ev = TableEvaluator(space, "cifar100", Profiler(get_device("pixel3"), None), ["latency_ms"])
    settings = SearchSettings(
        space="nasbench201", device="pixel3", budget=40, seed=3, strategy="nsga2"
    )
    result = run_search(settings, space, ev.evaluate)
    assert len(result.pareto) >= 3
    real = hwnas.export.export_onnx
    calls = []

    def failing(model, shape):
        calls.append(shape)
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return real(model, shape)

    monkeypatch.setattr(hwnas.export, "export_onnx", failing)
    with pytest.raises(OSError):
        write_zoo(tmp_path / "zoo", result, space, {})
    assert list(tmp_path.iterdir()) == []  # no zoo, no temporary folder
    monkeypatch.setattr(hwnas.export, "export_onnx", real)
    cards = write_zoo(tmp_path / "zoo", result, space, {})
    before = sorted(p.name for p in (tmp_path / "zoo").iterdir())
    exported = [r for r in result.pareto if r.accuracy > 1.5]  # chance-level cells are not
    assert len(cards) == len(exported) == len(before) >= 3
    shutil.rmtree(cache_root())  # exports are cached by model hash: export again
    calls.clear()
    monkeypatch.setattr(hwnas.export, "export_onnx", failing)
    with pytest.raises(OSError):
        write_zoo(tmp_path / "zoo", result, space, {})
    assert sorted(p.name for p in (tmp_path / "zoo").iterdir()) == before  # the old zoo stays
    assert [p.name for p in tmp_path.iterdir()] == ["zoo"]


TINY_SPACE = """\
name: tiny
datasets:
  digits: {classes: 10, input_shape: [3, 16, 16]}
stem:
  - {block: conv, out: 8, kernel: 3}
stages:
  - name: a
    out: {choices: [8, 16]}
    stride: 2
    depth: {choices: [1, 2]}
    layer: {block: mbconv, kernel: {choices: [3, 5]}, expand: {choices: [2, 4]}, se: 0.25}
head:
  - {block: pool}
"""

PROFILE = """\
name: NAME
kind: local
class: cpu
description: a test profile
runtime: ort
timing: {warmup: 3, rounds: 3, calls_per_round: 5, threads: 1, max_cv: none}
"""

SPACES = {  # file -> (what replaces what in TINY_SPACE)
    "width": ("out: {choices: [8, 16]}", "out: {choices: [8, 1000000000]}"),
    "expand_inf": ("expand: {choices: [2, 4]}", "expand: .inf"),
    "depth": ("depth: {choices: [1, 2]}", "depth: {min: 1, max: 1000000, step: 1}"),
    "even_kernel": ("kernel: {choices: [3, 5]}", "kernel: {choices: [3, 4]}"),
    # a range of step 1 passed its even kernels: the feature maps grew and residuals dropped
    "even_range": ("kernel: {choices: [3, 5]}", "kernel: {min: 3, max: 7, step: 1}"),
    "input": ("[3, 16, 16]", "[3, 100000, 100000]"),
    # a fixed width of 12 that groups of 8 do not divide; a 16x16 patch after a stride of 2
    # on 16x16 images: both passed the checker and ended in PyTorch's traceback
    "groups_width": ("  - {block: pool}", "  - {block: mbconv, out: 12, kernel: 3, expand: 2}\n"
                     "  - {block: mbconv, out: 16, kernel: 3, expand: 2, groups: 8}\n"
                     "  - {block: pool}"),
    "patch": ("  - {block: pool}", "  - {block: patch_embed, out: 16, patch: 16}\n"
                                   "  - {block: token_pool}"),
    # the same patch on 64x64 images: the supernet's 16x16 proxy images are too small for it
    "patch64": (("  - {block: pool}", "  - {block: patch_embed, out: 16, patch: 16}\n"
                                      "  - {block: token_pool}"),
                ("[3, 16, 16]", "[3, 64, 64]")),
}
PROFILES = {
    "energy_none": ("description: a test profile", "description: x\nenergy: [none]"),
    "warmup_many": ("warmup: 3", "warmup: many"),
    "max_cv_nan": ("max_cv: none", "max_cv: .nan"),
}
TABLE = ["search", "-d", "pixel3", "--budget", "5", "--no-zoo"]
GDAS = ["search", "-d", "pixel3", "--strategy", "gdas", "--no-zoo"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ([*TABLE, "--seed", "-1"], "Invalid value for '--seed': -1 is not in the range"),
        ([*TABLE, "--max-latency", "inf"], "--max-latency must be a positive number of ms"),
        ([*TABLE, "--study", " "], "--study is empty; leave it out for the default"),
        ([*TABLE, "--max-latency", "0.001"], "no architecture of nasbench201 meets --max-latency "
         "0.001 ms on device 'pixel3': the fastest of its 15,625 recorded latencies is 0.003277"),
        ([*TABLE, "--strategy", "tpe", "--max-latency", "0.001"], "the fastest of its 15,625"),
        (["search", "-d", "pixel3", "--budget", "1000000000"],
         "--budget 1000000000 is more than the 15625 architectures of space 'nasbench201'"),
        ([*TABLE, "--epochs", "0"], "--epochs applies to supernet strategies, not to table"),
        ([*TABLE, "--set", "lr=0.1"], "--set applies to supernet strategies"),
        ([*TABLE, "--storage", "sqlite:///{tmp}/nowhere/deeper/s.db"],
         "the folder {tmp}/nowhere/deeper does not exist"),
        ([*TABLE, "--storage", "sqlite://"], "names no file (an in-memory database is gone"),
        ([*TABLE, "--storage", "sqlite:///{tmp}"], "{tmp} is a folder, not an SQLite database"),
        ([*GDAS, "--set", "lr=nan"], "--set lr=nan: lr must be a finite number"),
        ([*GDAS, "--set", "torch_device=cuda:99"], "--set torch_device=cuda:99: this "),
        ([*TABLE, "--space", "{tmp}/factory.py:raising"],
         "factory.py:raising() (called with no argument to make the space) failed: "
         "RuntimeError: bug"),
        ([*TABLE, "--space", "{tmp}/factory.py:needs_arg"], "failed: TypeError: needs_arg()"),
        ([*GDAS, "--set", "lr=1e308"], "lr must be <= 100"),
        ([*GDAS, "--set", "channels=100000"], "channels must be <= 1024"),
        ([*GDAS, "--latency-weight", "inf"], "--latency-weight must be a finite number"),
        ([*GDAS, "--epochs", "1000000000"], "--epochs must be at most 10000"),
        (["search", "-d", "pixel3", "--strategy", "fbnet", "--set", "width=1e9"],
         "width must be <= 8"),
        (["arch", "--space", "{tmp}/width.yaml", "0"], "must be <= 16384, got 1000000000"),
        (["arch", "--space", "{tmp}/expand_inf.yaml", "0"], "must be a finite number, got inf"),
        (
            ["arch", "--space", "{tmp}/depth.yaml", "0"],
            "stages[0].depth.max: must be <= 256, got 1000000",
        ),
        (["arch", "--space", "{tmp}/even_kernel.yaml", "0"], "must be an odd kernel size"),
        (["arch", "--space", "{tmp}/even_range.yaml", "0"],
         "kernel.min + 1 * step: must be an odd kernel size (same padding keeps the size), "
         "got 4"),
        (["arch", "--space", "{tmp}/input.yaml", "0"], "at most 16384 channels and 16384 pixels"),
        (["arch", "--space", "{tmp}/groups_width.yaml", "0"],
         "groups_width.yaml:14: head[1].groups: 8 groups must divide head[0]'s width (12)"),
        (["arch", "--space", "{tmp}/patch.yaml", "0"],
         "patch.yaml:13: head[0].patch: a 16x16 patch is larger than the 8x8 feature map it "
         "gets from digits's 16x16 input (strides before it: x2); it needs an input side of "
         "at least 31"),
        (["search", "-d", "cpu-fast", "--space", "{tmp}/patch64.yaml", "--strategy", "oneshot",
          "--set", "image_size=20"],
         "--set image_size=20 is too small for tiny: its patch embedding needs images of at "
         "least 31x31 pixels"),
        (["measure", "-d", "energy_none", "--arch", SMALL], "energy must be auto, none, or"),
        (["measure", "-d", "warmup_many", "--arch", SMALL],
         "timing.warmup must be an integer, got 'many'"),
        (["measure", "-d", "max_cv_nan", "--arch", SMALL],
         "timing.max_cv must be a finite number"),
        (["measure", "-d", "cpu-fast", "--onnx", "{tmp}/huge.onnx"],
         "input shape 1x3x100000x100000 has 3e+10 elements"),
        (["predict", "-d", "cpu-fast", "--onnx", "{tmp}/huge.onnx"],
         "huge.onnx: input 'x': input shape 1x3x100000x100000 has 3e+10 elements"),
        (["measure", "-d", "cpu-fast", "--arch", SMALL, "--batch-size", "1000000000"],
         "elements, more than the"),
        (["predict", "--calibration", "{tmp}/cal_1e308.csv", "--arch", SMALL],
         "latency_ms 1e308 is implausible for one inference"),
        (["predict", "--calibration", "{tmp}/cal_1e-12.csv", "--arch", SMALL],
         "latency_ms 1e-12 is implausible for one inference (at least 1e-06"),
        (["measure", "import", "--device", "tiny", "--table", "{tmp}/cal_1e-12.csv"],
         "latency_ms 1e-12 is implausible for one inference (at least 1e-06"),
        (["predict", "-d", "pixel3", "--predictor", "{tmp}/missing_key", "--arch", SMALL],
         "lack the array"),
        (["predict", "-d", "pixel3", "--predictor", "{tmp}/wrong_shape", "--arch", SMALL],
         "encoder has"),
        (["dashboard", "--port", "70000"], "Invalid value for '--port': 70000 is not in the"),
        (["dashboard", "--port", "{port}"], "is in use by another program"),
    ],
)  # fmt: skip
def test_refused_in_one_line_before_any_work(args, expected, tmp_path, monkeypatch, capsys):
    """The cases of issue 18's battery (experiments/bad_input_battery.py runs them all, and
    more, through subprocesses), in-process through the CLI's entry point."""
    import socket

    import numpy as np

    from hwnas.cli import main
    from hwnas.devices import reload_profiles

    for name, pairs in SPACES.items():
        text = TINY_SPACE
        for old, new in pairs if isinstance(pairs[0], tuple) else [pairs]:
            text = text.replace(old, new)
        (tmp_path / f"{name}.yaml").write_text(text)
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for name, (old, new) in PROFILES.items():
        text = PROFILE.replace("NAME", name).replace(old, new)
        (profiles / f"{name}.yaml").write_text(text)
    monkeypatch.setenv("HWNAS_DEVICES_PATH", str(profiles))
    reload_profiles()
    _identity_onnx(tmp_path / "huge.onnx", [1, 3, 100000, 100000])
    (tmp_path / "factory.py").write_text(
        "def raising():\n    raise RuntimeError('bug')\n\ndef needs_arg(x):\n    return x\n"
    )
    cal = ["arch,latency_ms"] + [f"{i},{1 + 0.1 * i}" for i in range(10)]
    cal[1] = "0,1e308"
    (tmp_path / "cal_1e308.csv").write_text("\n".join(cal) + "\n")
    cal[1] = "0,1e-12"  # a unit slip: the predictors' fit was singular (LinAlgError)
    (tmp_path / "cal_1e-12.csv").write_text("\n".join(cal) + "\n")
    src = Path(__file__).resolve().parents[2] / "latency_predictors" / "nasbench201"
    with np.load(src / "weights.npz") as z:
        arrays = {k: z[k] for k in z.files}
    for name, changed in (
        ("missing_key", {k: v for k, v in arrays.items() if k != "space_out_w"}),
        ("wrong_shape", {**arrays, "space_out_w": np.zeros((3, 1), dtype=np.float32)}),
    ):
        shutil.copytree(src, tmp_path / name)
        np.savez(tmp_path / name / "weights.npz", **changed)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = [a.format(tmp=tmp_path, port=port) for a in args]
        monkeypatch.chdir(tmp_path)
        code = main(args)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert expected.format(tmp=tmp_path) in lines[0], err
    assert not (tmp_path / "runs").exists() and not (tmp_path / "nowhere").exists()
    assert not (Path(os.environ["HWNAS_HOME"]) / "studies.db").exists()  # no study opened
    assert not list(tmp_path.parent.glob("*.hwnas-lock"))  # no lock beside a refused storage
    reload_profiles()


def test_a_model_too_large_to_run_is_still_predicted_from_its_graph(tmp_path, capsys):
    """A recorded device predicts an ONNX model from its graph, which ONNX infers without
    running it: an input hwnas could not allocate (an 8K satellite image, here 100000 pixels
    square) is predicted there, and refused only where the model is run (the kernel-level
    predictor of a live device, above)."""
    from hwnas.cli import main

    _identity_onnx(tmp_path / "huge.onnx", [1, 3, 100000, 100000])
    code = main(["predict", "-d", "pixel3", "--onnx", str(tmp_path / "huge.onnx")])
    out = capsys.readouterr().out
    assert code == 0
    assert re.search(r"huge\.onnx: [\d.e+]+ ms", out), out


def _identity_onnx(path: Path, shape: list[int]) -> None:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(helper.make_model(graph), path)


def test_a_table_search_stops_when_its_strategy_has_nothing_left_and_says_so(
    tmp_path, capsys, hwnas_home
):
    """Under a latency limit the frontier's candidates run out before the budget: the search
    stops there, exits 0 and says why (it never loops on duplicates), and a rerun adds no
    trial (each rerun added a pruned one, asked only to find nothing left)."""
    from hwnas.cli import main

    args = ["search", "-d", "pixel3", "--max-latency", "0.8", "--budget", "400", "--no-zoo"]
    for _ in range(3):
        assert main([*args, "--out", str(tmp_path / "run")]) == 0
        out = capsys.readouterr().out
        assert "stopped at 280 of the budget's 400 scored architectures" in out
        assert "is exhausted" in out
        trials = json.loads((tmp_path / "run" / "summary.json").read_text())["trials"]
        assert trials["completed"] == trials["in_study"] == 280, trials


def test_ctrl_c_while_the_cli_is_still_imported_is_one_line(monkeypatch, capsys):
    """Ctrl-C in the first fraction of a second (while `hwnas` imports its command line
    interface) printed a 23-line KeyboardInterrupt traceback, exit -2."""
    import builtins
    import sys

    from hwnas.entry import main

    real = builtins.__import__

    def interrupted(name, *args, **kwargs):
        if name == "hwnas.cli":
            raise KeyboardInterrupt
        return real(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "hwnas.cli", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    assert main() == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "Traceback" not in err


def test_the_fastest_latency_an_unmet_limit_names_is_a_limit_that_is_met(tmp_path, hwnas_home):
    """The error of a limit below every recorded latency names the fastest; typed back as the
    limit, it is met (0.812746 ms was named as 0.8127 ms, a limit no architecture meets)."""
    args = ["search", "--device", "pi5_onnx", "--budget", "3", "--no-zoo"]
    r = hwnas_main(*args, "--max-latency", "0.8")
    assert r.returncode == 2
    fastest = re.search(r"the fastest of its 6,466 recorded latencies is (\S+) ms$", r.stderr)
    assert fastest is not None and fastest[1] == "0.81275", r.stderr
    r = hwnas_main(*args, "--max-latency", fastest[1], "--out", str(tmp_path / "run"))
    assert r.returncode == 0, r.stderr
