"""Files from others run no code and cannot hang hwnas or write outside its folders: a pickle
as a run folder's supernet checkpoint, a pickle as a CIFAR batch, YAML alias bombs and
self-referencing aliases in a space file and a device profile, a device named ``../../..``.

Each test is an attacker's proof of issue 18, which hwnas on main failed."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from helpers_security import CodeRunner, alias_bomb, bounded_cli

from hwnas.errors import HwnasError

SUPERNET = ["search", "--strategy", "darts", "--device", "pixel3", "--data", "digits",
            "--epochs", "1", "--finetune-epochs", "0", "--batch-size", "32",
            "--set", "limit=100", "--set", "channels=4", "--no-zoo"]  # fmt: skip


def test_a_pickle_as_supernet_checkpoint_of_out_runs_no_code(tmp_path, capsys):
    """A downloaded run folder used as --out: its supernet.pt is a pickle that runs code when
    loaded with weights_only=False (main: the code ran and the search exited 0)."""
    from hwnas.cli import main

    out, marker = tmp_path / "downloaded-run", tmp_path / "code-ran"
    out.mkdir()
    torch.save(CodeRunner(marker), out / "supernet.pt")
    status = main([*SUPERNET, "--out", str(out)])
    err = capsys.readouterr().err
    assert not marker.exists(), "unpickling the checkpoint ran code"
    assert status == 2
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    assert "supernet.pt" in line and "delete it" in line
    # the user's file is left alone
    assert (out / "supernet.pt").is_file()


def test_a_supernet_checkpoint_of_hwnas_loads_with_weights_only(tmp_path):
    """What hwnas writes is what weights_only=True reads: state dicts, an optimiser state whose
    learning rate a numpy schedule computed, the numpy generator's state (128-bit ints)."""
    from hwnas.supernet.checkpoint import read_checkpoint, save_checkpoint

    path = tmp_path / "supernet.pt"
    rng = np.random.default_rng(0)
    strategy = {
        "w_opt": {"state": {}, "param_groups": [{"lr": np.float64(0.01), "betas": (0.9, 0.99)}]},
        "rng": rng.bit_generator.state,
        "generator": torch.Generator().get_state(),
    }
    save_checkpoint(path, "fp", 3, {"w": torch.ones(2)}, strategy, [{"loss": np.float32(0.5)}])
    torch.load(path, weights_only=True)  # no UnpicklingError
    state = read_checkpoint(path, "fp")
    assert state["epoch"] == 3 and state["history"] == [{"loss": 0.5}]
    assert state["strategy"]["w_opt"]["param_groups"][0]["lr"] == 0.01
    assert state["strategy"]["rng"] == rng.bit_generator.state
    assert read_checkpoint(path, "another search") is None


def _cifar_batch(n: int, rng) -> dict:
    return {"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
            "labels": [int(v) for v in rng.integers(0, 10, n)]}  # fmt: skip


def _python2_pickle(obj) -> bytes:
    """``obj`` pickled as the CIFAR files were (Python 2, protocol 2): the numpy 1 module
    names, bytes as latin-1 strings."""
    blob = pickle.dumps(obj, protocol=2)
    return blob.replace(b"numpy._core.multiarray", b"numpy.core.multiarray")


def test_a_pickle_as_cifar_batch_runs_no_code(tmp_path):
    """A --data folder in the CIFAR layout whose data_batch_1 runs code when unpickled (main:
    pickle.load ran it). Real CIFAR pickles (numpy arrays, lists, strings) still load."""
    from hwnas.datasets import load_data

    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(_python2_pickle(_cifar_batch(30, rng)))
    (folder / "test_batch").write_bytes(pickle.dumps(_cifar_batch(10, rng), protocol=5))
    meta = {"label_names": [f"c{i}" for i in range(10)], "num_vis": 3072}
    (folder / "batches.meta").write_bytes(_python2_pickle(meta))
    d = load_data(str(tmp_path), seed=0)
    assert d.name == "cifar10" and d.classes[9] == "c9" and len(d.test) == 10

    marker = tmp_path / "code-ran"
    (folder / "data_batch_2").write_bytes(pickle.dumps(CodeRunner(marker, value="{'data': []}")))
    with pytest.raises(HwnasError) as caught:
        load_data(str(tmp_path), seed=0)
    assert not marker.exists(), "unpickling the batch ran code"
    message = str(caught.value)
    assert "\n" not in message and "data_batch_2" in message and "builtins.eval" in message
    # an array of Python objects is refused too: its items would be unpickled as objects
    objects = {"data": np.array([CodeRunner(marker)], dtype=object), "labels": [0]}
    (folder / "data_batch_2").write_bytes(pickle.dumps(objects))
    with pytest.raises(HwnasError, match="data_batch_2"):
        load_data(str(tmp_path), seed=0)
    assert not marker.exists()


def _python2_arrays(obj) -> bytes:
    """``obj`` pickled as Python 2 and numpy 1 wrote the CIFAR files: protocol 2, each array
    an empty one of ``numpy.core.multiarray._reconstruct`` given its data by ``__setstate__``
    as a byte string (a latin-1 str when read by Python 3)."""
    import io

    class Python2(pickle.Pickler):
        def reducer_override(self, o):
            if type(o) is not np.ndarray:
                return NotImplemented
            rebuild, (cls, shape, _code), (version, dims, dtype, fortran, raw) = o.__reduce__()
            return rebuild, (cls, shape, "b"), (version, dims, dtype, fortran, raw.decode("latin1"))

    blob = io.BytesIO()
    Python2(blob, protocol=2).dump(obj)
    return blob.getvalue().replace(b"numpy._core.multiarray", b"numpy.core.multiarray")


def test_a_cifar_batch_allocates_no_more_than_the_data_it_holds(tmp_path):
    """A 48-byte data_batch_1, `numpy.ndarray((N,), dtype('u1'))`, made `load_data` allocate N
    bytes (7 GB in the audit): the unpickler let numpy.ndarray be called. A 9-byte one storing
    in memo slot 2**24 took 256 MB (the C unpickler sizes its memo by the index). Arrays are
    now rebuilt only as numpy pickles them, their bytes at most the file's, and the memo is a
    dict; the batches of the real dataset still load."""
    import tracemalloc

    from hwnas.datasets import load_data

    rng = np.random.default_rng(0)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    (folder / "data_batch_1").write_bytes(_python2_arrays(_cifar_batch(30, rng)))
    (folder / "test_batch").write_bytes(_python2_arrays(_cifar_batch(10, rng)))
    meta = {"label_names": [f"c{i}" for i in range(10)], "num_vis": 3072}
    (folder / "batches.meta").write_bytes(_python2_arrays(meta))
    d = load_data(str(tmp_path), seed=0)
    assert d.name == "cifar10" and d.classes[9] == "c9" and len(d.test) == 10
    assert len(d.train) + len(d.val) == 30

    n = 3 * 2**28 + 1  # 768 MiB, not a whole number of images (main failed after allocating)
    four = _python2_arrays(np.zeros(4, np.uint8))
    size = b"J" + n.to_bytes(4, "little")
    u1 = b"cnumpy\ndtype\nX\x02\x00\x00\x00u1\x85R"  # numpy.dtype('u1')
    forged = {
        "a call of numpy.ndarray": b"\x80\x02cnumpy\nndarray\n" + size + b"\x85" + u1 + b"\x86R.",
        "without its 805306369 bytes": four.replace(b"K\x04\x85", size + b"\x85"),
        "not a dict": b"\x80\x02Nr" + (2**24).to_bytes(4, "little") + b".",
    }  # fmt: skip
    for said, blob in forged.items():
        (folder / "data_batch_1").write_bytes(blob)
        tracemalloc.start()
        try:
            with pytest.raises(HwnasError) as caught:
                load_data(str(tmp_path), seed=0)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 2**25, (said, peak)
        message = str(caught.value)
        assert "data_batch_1" in message and said in message and "\n" not in message, message


TINY_SPACE = """\
name: tiny
datasets:
  digits: {classes: 10, input_shape: [3, 16, 16]}
stem:
  - {block: conv, out: 8, kernel: 3}
stages:
  - {name: a, out: 8, stride: 2, depth: 1, layer: {block: mbconv, kernel: 3, expand: 2}}
head:
  - {block: pool}
"""


def test_a_yaml_alias_bomb_in_a_space_file_is_refused_at_once(tmp_path):
    """A 1 KB space file whose aliases expand to 387 million strings (main: hwnas hung for
    over 120 s; here the child is bounded to 3 GiB and 60 s)."""
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb() + TINY_SPACE.replace("name: tiny", "name: tiny\ndescription: *l8"))
    assert path.stat().st_size < 1024
    r = bounded_cli("arch", "0", "--space", str(path))
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"error: {path}:")
    assert "alias" in r.stderr and "Traceback" not in r.stderr


def test_a_yaml_alias_bomb_in_a_device_profile_is_refused_at_once(hwnas_home, tmp_path):
    """The same bomb as a user device profile's description (main: `hwnas devices` hung)."""
    profile = "name: bomb\nkind: local\nclass: cpu\nruntime: ort\ndescription: *l8\n"
    (hwnas_home / "devices" / "bomb.yaml").write_text(alias_bomb() + profile)
    r = bounded_cli("search", "--device", "bomb", "--out", str(tmp_path / "run"))
    assert r.returncode == 2, r.stderr[-2000:]
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert "bomb.yaml" in line and "alias" in line and "Traceback" not in r.stderr
    assert not (tmp_path / "run").exists()


def test_a_self_referencing_alias_is_refused_in_space_files_and_profiles(hwnas_home, tmp_path):
    """``&a [*a]``: a space file gave a RecursionError traceback on main, a profile was
    accepted with a list that contains itself."""
    from hwnas.devices import broken_profiles, get_device, reload_profiles
    from hwnas.spaces import get_space

    path = tmp_path / "loop.yaml"
    path.write_text(TINY_SPACE.replace("name: tiny", "name: loop\nnotes: &n [*n]"))
    with pytest.raises(HwnasError, match=r"loop\.yaml:2: .*alias \*n") as caught:
        get_space(str(path))
    assert "\n" not in str(caught.value)
    profile = hwnas_home / "devices" / "loop.yaml"
    profile.write_text("name: loop\nkind: local\nclass: cpu\nruntime: ort\nnotes: &n [1, *n]\n")
    reload_profiles()
    with pytest.raises(HwnasError, match=r"device profile .*loop\.yaml is broken: .*alias"):
        get_device("loop")
    assert "alias" in broken_profiles()[profile]
    # aliases that expand to a modest size stay usable: the shipped spaces use them
    assert get_space("fbnet_declared").name == "fbnet_declared"


def test_yaml_nested_deeper_than_libyaml_can_compose_is_refused(tmp_path):
    """50,000 nested lists (100 KB): libyaml's composer overflowed the C stack (main: the
    process died of a segmentation fault)."""
    from hwnas.spaces import get_space

    path = tmp_path / "deep.yaml"
    path.write_text(
        TINY_SPACE.replace("name: tiny", "name: deep\nnotes: " + "[" * 50_000 + "]" * 50_000)
    )
    with pytest.raises(HwnasError, match=r"deep\.yaml:2: .*nested more than 100 levels"):
        get_space(str(path))


def test_a_date_or_a_huge_integer_in_yaml_breaks_only_its_own_file(hwnas_home, tmp_path):
    """`description: 2026-13-45` (a date PyYAML could not build) or a 5000-digit integer in
    one profile broke every device command with a ValueError traceback (`hwnas devices`), a
    4000-digit `timing.warmup` with an OverflowError; a space file likewise. Dates are read as
    text now, and an integer beyond a float's range is one line naming its line."""
    import json

    from helpers import hwnas_main

    profiles = hwnas_home / "devices"
    (profiles / "t8.yaml").write_text("name: t8\nkind: local\ndescription: 2026-13-45\n")
    (profiles / "t9.yaml").write_text("name: t9\nkind: local\ndescription: " + "1" * 5000)
    (profiles / "t7.yaml").write_text("name: t7\nkind: local\ntiming: {warmup: 1%s}" % ("0" * 4000))
    r = hwnas_main("devices", "--json")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    listed = json.loads(r.stdout)
    described = {d["device"]: d["description"] for d in listed["devices"]}
    assert described["t8"] == "2026-13-45" and "pixel3" in described
    broken = {k.rsplit("/", 1)[-1]: v for k, v in listed["broken_profiles"].items()}
    assert broken["t9.yaml"] == "line 3: an integer that cannot be read (too many digits)"
    assert broken["t7.yaml"].startswith("line 3: an integer beyond any number hwnas reads")
    r = hwnas_main("predict", "--device", "pixel3", "--arch", "0")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    for name in ("t9", "t7"):
        r = hwnas_main("predict", "--device", name, "--arch", "0")
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "line 3: an integer" in r.stderr
    space = tmp_path / "sp.yaml"
    text = TINY_SPACE.replace("kernel: 3, expand", "kernel: {choices: [3, 5]}, expand")
    space.write_text(text.replace("name: tiny", "name: tiny\ndescription: 2026-13-45"))
    r = hwnas_main("spaces", "show", space)
    assert r.returncode == 0 and "tiny" in r.stdout, r.stderr
    space = tmp_path / "sp2.yaml"  # another file: a space file is read once a process
    space.write_text(text.replace("name: tiny", "name: tiny2\ndescription: " + "7" * 5000))
    r = hwnas_main("spaces", "show", space)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "sp2.yaml:2: " in r.stderr and "an integer that cannot be read" in r.stderr


def test_a_device_named_dot_dot_writes_nothing_outside_the_hwnas_home(tmp_path, monkeypatch):
    """A profile ``name: ../../../escaped`` (main: a search on it created files outside the
    hwnas home, through the measurement store's device lock, hls4ml's and TVM's folders)."""
    from hwnas.cli import main
    from hwnas.devices import reload_profiles

    home = tmp_path / "a" / "b" / "home"
    (home / "devices").mkdir(parents=True)
    monkeypatch.setenv("HWNAS_HOME", str(home))
    profile = (
        "name: ../../../escaped\nkind: local\nclass: cpu\nruntime: ort\n"
        "timing: {warmup: 1, rounds: 2, calls_per_round: 2, threads: 1, max_cv: none}\n"
    )
    (home / "devices" / "evil.yaml").write_text(profile)
    reload_profiles()
    out = tmp_path / "run"
    status = main(["search", "--device", "../../../escaped", "--budget", "1", "--out", str(out)])
    outside = [p for p in tmp_path.rglob("*") if home not in p.parents and p != home]
    assert not [p for p in outside if "escaped" in p.name], outside
    assert status == 2 and not out.exists()


@pytest.mark.parametrize(
    "name", ["", ".", "..", "../x", "a/b", "a\\b", "/abs", "x\x00y", "tab\there", "x" * 300]
)
def test_a_name_that_is_not_one_path_component_is_refused(tmp_path, name):
    from hwnas.paths import confined, safe_name

    with pytest.raises(HwnasError) as caught:
        safe_name(name, "device name")
    assert "\n" not in str(caught.value) and str(caught.value).startswith("device name ")
    with pytest.raises(HwnasError):
        confined(tmp_path, "ok", name, what="device name")
    good = confined(tmp_path, "ok", "pixel3-ort", what="device name")
    assert good == tmp_path / "ok" / "pixel3-ort"
    assert safe_name("MobileNet v4 (ours)", "study") == "MobileNet v4 (ours)"


def _payload(tmp_path):
    """A Python file whose import creates a marker, and its ``file.py:attr`` name."""
    marker = tmp_path / "code-ran"
    payload = tmp_path / "payload.py"
    payload.write_text(f"import pathlib\npathlib.Path({str(marker)!r}).touch()\nspace = None\n")
    return marker, f"{payload}:space"


def test_a_space_name_in_a_device_profile_imports_no_code(hwnas_home, tmp_path):
    """A shared profile whose ``tables:`` key is ``payload.py:space``: on main, merely listing
    the devices imported the payload (the key went to get_space, which runs user code)."""
    marker, name = _payload(tmp_path)
    profiles = hwnas_home / "devices"
    (profiles / "tables").mkdir(parents=True)
    (profiles / "tables" / "x.csv").write_text("index,latency_ms\n0,1.0\n")
    (profiles / "evilboard.yaml").write_text(
        f"name: evilboard\nkind: recorded\ntables:\n  '{name}':\n"
        "    latency_ms: {file: tables/x.csv}\n"
    )
    proc = bounded_cli("devices")
    assert not marker.exists(), "listing the devices imported the profile's Python file"
    assert proc.returncode == 0 and "evilboard.yaml" in proc.stdout
    assert "names Python code" in proc.stdout
    proc = bounded_cli("search", "--device", "evilboard", "--budget", "5", "--no-zoo")
    assert not marker.exists() and proc.returncode == 2


def test_a_space_name_in_a_zoo_card_imports_no_code(tmp_path, monkeypatch):
    """A downloaded zoo entry whose card names ``payload.py:space``: on main ``hwnas train
    ENTRY`` and ``hwnas.zoo.load(entry, torch=True)`` imported the payload before saying the
    entry was not a space's."""
    import json

    import hwnas

    monkeypatch.setenv("HWNAS_HOME", str(tmp_path / "home"))
    marker, name = _payload(tmp_path)
    entry = tmp_path / "entry"
    entry.mkdir()
    card = {"format_version": 1, "arch": "x", "space": name, "dataset": "digits",
            "build": {"kind": "network", "space": name}, "files": {}}  # fmt: skip
    (entry / "card.json").write_text(json.dumps(card))
    proc = bounded_cli("train", str(entry), "--data", "digits", "--epochs", "1")
    assert not marker.exists(), "hwnas train imported the card's Python file"
    assert proc.returncode == 2 and "names Python code" in proc.stderr
    with pytest.raises(HwnasError):
        hwnas.zoo.load(entry, torch=True)
    assert not marker.exists(), "hwnas.zoo.load imported the card's Python file"


@pytest.mark.slow
def test_no_child_process_imports_code_from_the_working_folder(hwnas_home, tmp_path):
    """hwnas imports a Python file only when the user names it. Its children were started
    with ``python -m``, which puts the working folder first on their path: a
    ``matplotlib.py`` in the folder a user ran ``hwnas search`` from ran in the plot process
    (silently: the parent then drew the plot itself), and in every rank of ``--nproc 2``
    (checked with the 2-process training of tests/supernet/test_distributed.py)."""
    import subprocess
    import sys
    from pathlib import Path

    marker = tmp_path / "ran"
    folder = tmp_path / "downloads"
    folder.mkdir()
    payload = f"open({str(marker)!r}, 'a').write('ran\\n')\nraise ImportError('planted')\n"
    for name in ("matplotlib.py", "numpy.py", "optuna.py"):
        (folder / name).write_text(payload)
    hwnas = Path(sys.executable).with_name("hwnas")  # the console script, as a user types it
    command = [str(hwnas), "search", "--device", "pixel3", "--no-zoo", "--budget", "10"]
    command += ["--out", "run"]
    r = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (folder / "run" / "pareto.png").is_file()  # drawn in its own process
    assert not marker.exists(), marker.read_text()


@pytest.mark.parametrize(
    ("tvm", "message"),
    [("cc: /tmp/their/evil.sh", "tvm.cc '/tmp/their/evil.sh': must be the name of a C/C++ "
      "compiler on PATH"),
     ("cache_dir: /tmp/their/cache", "tvm.cache_dir '/tmp/their/cache': must lie in the hwnas "
      "home"),
     ("trails_per_task: 0", "tvm.trails_per_task: unknown key; did you mean trials_per_task?")],
    ids=["cc", "cache_dir", "misspelt"],
)
def test_a_profile_cannot_name_a_program_to_run_or_a_cache_to_load(hwnas_home, tvm, message):
    """A device profile's `tvm.cc` is the linker TVM runs on every build: a handed profile
    naming its own script ran it (`hwnas devices check` printed "ok"); its `tvm.cache_dir`
    put compiled models, loaded as native code, in a folder of the sender's choosing. Such a
    profile is listed as broken; a compiler's name (`aarch64-linux-gnu-g++`) is still fine."""
    import json

    from helpers import hwnas_main

    folder = hwnas_home / "devices"
    (folder / "evil.yaml").write_text(
        f"name: evil\nkind: local\nclass: cpu\nruntime: tvm\ntarget: host\ntvm: {{{tvm}}}\n"
    )
    (folder / "cross.yaml").write_text(
        "name: cross\nkind: local\nclass: cpu\nruntime: tvm\ntarget: host\n"
        "tvm: {cc: aarch64-linux-gnu-g++}\n"
    )
    r = hwnas_main("devices", "--json")
    listed = json.loads(r.stdout)
    assert any(message in why for why in listed["broken_profiles"].values()), listed
    assert "cross" in {d["device"] for d in listed["devices"]}
    r = hwnas_main("devices", "check", "evil")
    assert r.returncode == 2 and message in r.stderr


def test_an_hls4ml_profile_cannot_put_a_command_in_its_tcl(hwnas_home):
    """An hls4ml profile's `part` is written into the project's TCL (`set part "..."`), where
    `[...]` runs a command when Vitis HLS reads it: a handed profile could run any program at
    synthesis. Part, backend and precision must be plain names and types."""
    from helpers import hwnas_main

    (hwnas_home / "devices" / "fpga-evil.yaml").write_text(
        "name: fpga-evil\nkind: hls4ml\nclass: fpga\n"
        "part: '[exec sh -c \"touch /tmp/pwned\"]'\n"
    )
    r = hwnas_main("devices", "check", "fpga-evil")
    assert r.returncode == 2 and "part '[exec sh" in r.stderr and "must be a name" in r.stderr


def test_bidirectional_overrides_are_shown_escaped():
    """A name holding U+202E (right-to-left override) showed the rest of its line reversed."""
    from hwnas.cli.render import one_line, visible

    assert visible("run\u202egpj.onnx") == "run\\u202egpj.onnx"
    assert one_line("a\u2066b\nc") == "a\\u2066b\\x0ac"


def test_a_profiles_key_or_file_name_reaches_the_terminal_escaped(hwnas_home):
    """A handed profile with the key `tvm: {"\\e]0;pwned\\a\\e[2J": 1}` (retitle the window,
    clear the screen): every command that reads the profiles printed it raw in its `skipped
    device profile` warning; a profile file's name likewise."""
    from helpers import hwnas_main

    folder = hwnas_home / "devices"
    (folder / "esc.yaml").write_text('name: esc\nkind: local\ntvm: {"\\e]0;pwned\\a\\e[2J": 1}\n')
    (folder / "bad\x1b[31m.yaml").write_text("name: [unclosed\n")
    r = hwnas_main("predict", "--device", "pixel3", "--arch", "0")
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stderr and "\x07" not in r.stderr, repr(r.stderr)
    warnings = [x for x in r.stderr.splitlines() if x.startswith("warning: skipped")]
    assert len(warnings) == 2, r.stderr
    assert "tvm.\\x1b]0;pwned\\x07\\x1b[2J: unknown key" in r.stderr
    assert "bad\\x1b[31m.yaml" in r.stderr


def test_a_space_name_ending_in_a_newline_is_refused(tmp_path):
    """`name: "tiny\\n"` passed the space language's name rule (`re.match` with `$`, which
    matches before a final newline) and became a space whose name split every line that
    printed it."""
    from helpers import hwnas_main

    text = TINY_SPACE.replace("kernel: 3, expand", "kernel: {choices: [3, 5]}, expand")
    space = tmp_path / "nl.yaml"
    space.write_text(text.replace("name: tiny", 'name: "tiny\\n"'))
    r = hwnas_main("spaces", "show", space)
    assert r.returncode == 2 and r.stderr.startswith(f"error: {space}:1: name"), r.stdout
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


def test_a_profiles_tvm_target_cannot_pass_llvm_options_that_load_or_write(hwnas_home):
    """A TVM target's `cl-opt` is a list of LLVM command-line options, given to LLVM on every
    build: unlike `tvm.cc` it was not checked, so a handed profile could pass `-load=...`,
    `-info-output-file=...` or `-print-after-all`. Only plain options are taken now, and a
    `host` target's are checked too. The words of an option's name count, not parts of one:
    `-enable-load-pre=false` (load), `-profile-summary-cutoff-hot` (file) and
    `-x86-indirect-branch-tracking` (dir) were refused."""
    import json

    from helpers import hwnas_main

    folder = hwnas_home / "devices"
    bad = {"load": '{kind: llvm, cl-opt: ["-load=/tmp/their/evil.so"]}',
           "outfile": '{kind: llvm, cl-opt: ["-info-output-file=stats.txt"]}',
           "nested": '{kind: cuda, host: {kind: llvm, cl-opt: "--print-after-all"}}',
           "spaced": '{kind: llvm, cl-opt: ["-O3 -load x"]}',
           "remarks": '{kind: llvm, cl-opt: ["-pass-remarks-output=r.yaml"]}',
           "timetrace": '{kind: llvm, cl-opt: ["-time-trace-file=t.json"]}',
           "debug": '{kind: llvm, cl-opt: ["-debug-only=isel"]}',
           "plugin": '{kind: llvm, cl-opt: ["-load-pass-plugin=x.so"]}',
           "dot": '{kind: llvm, cl-opt: ["-dot-cfg-filename-prefix=cfg"]}'}  # fmt: skip
    plain = ["-unroll-threshold=200", "-enable-load-pre=false",  # words: load, file, dir, trace
             "-profile-summary-cutoff-hot=990000", "-x86-indirect-branch-tracking"]  # fmt: skip
    for name, target in bad.items():
        (folder / f"{name}.yaml").write_text(
            f"name: {name}\nkind: local\nclass: cpu\nruntime: tvm\ntarget: {target}\n"
        )
    (folder / "tuned.yaml").write_text(
        "name: tuned\nkind: local\nclass: cpu\nruntime: tvm\n"
        f"target: {{kind: llvm, mcpu: cortex-a76, cl-opt: {json.dumps(plain)}}}\n"
    )
    listed = json.loads(hwnas_main("devices", "--json").stdout)
    broken = {k.rsplit("/", 1)[-1]: v for k, v in listed["broken_profiles"].items()}
    assert "tuned" in {d["device"] for d in listed["devices"]}, broken.get("tuned.yaml")
    assert set(broken) == {f"{name}.yaml" for name in bad}, broken
    assert broken["load.yaml"].startswith("target.cl-opt '-load=/tmp/their/evil.so': must be")
    assert broken["nested.yaml"].startswith("target.host.cl-opt '--print-after-all'")
    r = hwnas_main("devices", "check", "load")
    assert r.returncode == 2 and "must be a plain LLVM option" in r.stderr, r.stderr


def test_the_device_layer_escapes_a_profiles_text_without_the_cli():
    """The device layer's errors escaped a profile's text with hwnas.cli.render.one_line,
    importing the CLI (and rich) into the layer under it; the escape is hwnas.text's now."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom hwnas.devices import check_cl_opt\nfrom hwnas.errors import HwnasError\n"
        "try:\n    check_cl_opt({'host\\n': {'cl-opt': ['-load=x']}})\n"
        "except HwnasError as e:\n    print(e)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('hwnas.cli', 'rich'))))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    said, modules = r.stdout.splitlines()
    assert said.startswith("target.host\\x0a.cl-opt '-load=x': must be"), said
    assert modules == "[]", modules
