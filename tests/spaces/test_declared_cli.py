"""Declared spaces through the CLI as a user types it: a space file of the user's searched by
one-shot NSGA-II and by DARTS with no code of its own, its zoo models in ONNX matching PyTorch,
and a malformed file stopped in one line before any work."""

from __future__ import annotations

import csv
import json
import math

import numpy as np
import onnxruntime as ort
import pytest
import torch
from helpers import hwnas_main

from hwnas.spaces import get_space

COMMON = [
    "--device", "cpu-fast", "--data", "digits", "--epochs", "1", "--finetune-epochs", "0",
    "--batch-size", "50", "--set", "limit=150", "--set", "cost=flops", "--set", "width=1",
]  # fmt: skip


def _zoo_matches_pytorch(out, space) -> float:
    """Largest |ONNX Runtime - PyTorch| over the zoo models (weights.pt in the space's network
    of the model's arch at the supernet's width and profile); the zoo must hold one."""
    from hwnas.spaces.declared.network import DeclaredNetwork

    worst = 0.0
    cards = sorted(out.glob("zoo/*/card.json"))
    assert cards, "no zoo entry to compare"
    for card_path in cards:
        card = json.loads(card_path.read_text())
        arch = space.parse(card["arch"])
        shape = tuple(card["input"]["shape"][1:])
        values = {k: (v,) for k, v in space.values(arch).items()}
        net = DeclaredNetwork(space, "digits", values, 1.0, 10, shape)
        net.load_state_dict(torch.load(card_path.parent / "weights.pt"))
        x = np.random.default_rng(0).standard_normal((3, *shape)).astype(np.float32)
        session = ort.InferenceSession(
            str(card_path.parent / "model.onnx"), providers=["CPUExecutionProvider"]
        )
        got = session.run(None, {"input": x})[0]
        with torch.no_grad():
            want = net.eval()(torch.from_numpy(x)).numpy()
        worst = max(worst, float(np.abs(got - want).max()))
    return worst


@pytest.mark.slow
def test_a_users_space_file_is_searched_by_oneshot_and_by_darts(tiny_space_file, tmp_path):
    """SPOS training + NSGA-II over the subnets on the space found by name in
    $HWNAS_HOME/spaces, and DARTS (soft mixtures over every decision) with a latency penalty on
    the same file given by path (the CLI's main in this process, one after the other)."""
    one, darts = tmp_path / "oneshot", tmp_path / "darts"
    runs = [
        hwnas_main(
            "search", "--space", "tiny", "--strategy", "oneshot", *COMMON, "--set",
            "evolution_trials=6", "--set", "population=4", "--set", "candidates=2",
            "--finetune-epochs", "2", "--out", str(one),  # above chance: the zoo holds entries
        ),
        hwnas_main(
            "search", "--space", str(tiny_space_file), "--strategy", "darts", *COMMON,
            "--latency-weight", "0.2", "--no-zoo", "--out", str(darts),
        ),
    ]  # fmt: skip
    for r in runs:
        assert r.returncode == 0, r.stderr
    space = get_space(str(tiny_space_file))
    summary = json.loads((one / "summary.json").read_text())
    assert space.parse(summary["best"]["arch"]).text == summary["best"]["arch"]
    assert summary["strategy"]["name"] == "oneshot"
    assert summary["supernet"]["space"] == "tiny"
    assert len(summary["candidates"]) >= 2
    assert _zoo_matches_pytorch(one, space) <= 1e-4
    assert summary["settings"]["study"].startswith("tiny-digits-cpu-fast")
    summary = json.loads((darts / "summary.json").read_text())
    assert space.parse(summary["best"]["arch"]).text == summary["best"]["arch"]
    assert summary["strategy"]["name"] == "darts"
    assert summary["hardware_term"]["mode"] == "weight"
    assert summary["settings"]["space"] == "tiny"
    rows = list(csv.DictReader(open(darts / "pareto.csv")))
    assert rows and rows[0]["arch"] == summary["best"]["arch"]


def test_mobilenetv4_reference_set_spreads_from_smallest_to_largest():
    """The set `hwnas refset export --space mobilenetv4` writes (10 ONNX files and
    calibration.csv; the command itself is exercised for the table spaces in tests/cli)."""
    from hwnas.export import count_params_flops

    space = get_space("mobilenetv4")
    archs = space.reference_archs()
    assert len(set(archs)) == 10 and archs == space.reference_archs()  # deterministic
    macs = [count_params_flops(space.build(a, "cifar10"), (1, 3, 32, 32))[1] for a in archs]
    assert macs[0] == min(macs) and macs[-1] == max(macs) and max(macs) > 3 * min(macs)


BAD = [
    (
        "stages:\n  - out: 8\n    layer: {block: mbconv}\n",
        ":1: (top level): missing required key",
        1,
    ),
    (
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: 8\n    layer: {block: mbconv, kernel: [3, 5]}\n",
        ":6: stages[0].layer.kernel: must be an integer, got a list (a search decision is "
        "written {choices: [...]})",
        None,
    ),
    (
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: 8\n    depth: {choices: [1, 2]}\n    layer:\n      block: mbconv\n"
        "      kernal: 3\n",
        ":9: stages[0].layer.kernal: unknown key 'kernal'",
        None,
    ),
    (  # a stage with first: the layer's own mistake is reported at the layer (main: first)
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: 8\n    depth: {choices: [1, 2]}\n    layer:\n      block: mbconv\n"
        "      kernal: 3\n    first: {kernel: 3}\n",
        ":9: stages[0].layer.kernal: unknown key 'kernal'",
        None,
    ),
    (
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - layer: {block: conv2d}\n",
        ":5: stages[0].layer.block: unknown block 'conv2d'; known: conv, fused_ib, mbconv",
        None,
    ),
    (
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - stride: 2\n    depth: {choices: [1, 2]}\n    layer: {block: uib}\n"
        "    first: {mid_kernel: {choices: [0, 3]}}\n",
        ":8: stages[0].first.mid_kernel: a strided uib layer cannot mix",
        None,
    ),
    (  # a width decision on a stage's layer: where it belongs
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - layer: {block: conv, out: {choices: [8, 16]}}\n",
        ":5: stages[0].layer.out: must be a value or {by_dataset: {...}}, got keys ['choices'] "
        "(a stage's layers take its width: a width decision is the stage's out)",
        None,
    ),
    (  # a decision where a parameter is fixed
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: 8\n    stride: {choices: [1, 2]}\n    layer: {block: conv}\n",
        "stages[0].stride: must be a value or {by_dataset: {...}}, got keys ['choices'] (not a "
        "search decision here)",
        None,
    ),
    ("name: x\ndatasets: [\n", ":3: invalid YAML", None),
    (  # grouped 1x1 convs whose groups do not split the widths: PyTorch's traceback at build
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: {choices: [8, 16]}\n    layer: {block: mbconv, groups: 3}\n",
        ":6: stages[0].layer.groups: 3 groups must divide the space's channel_divisor (8)",
        None,
    ),
    (  # ... nor the image's channels, where no stem comes first
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: {choices: [8, 16]}\n    layer: {block: mbconv, groups: 2}\n",
        ":6: stages[0].layer.groups: 2 groups must divide the image's channels (3)",
        None,
    ),
    (  # YAML forbids a repeated key; PyYAML kept the last one without a word
        "name: x\nchannel_divisor: 8\nchannel_divisor: 16\n",
        ":3: invalid YAML: key 'channel_divisor' is given twice (first on line 2)",
        None,
    ),
    (  # no global pooling: `spaces show` passed it, a search ended in PyTorch's shape error
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: {choices: [8, 16]}\n    layer: {block: conv}\n",
        ":4: stages: the network ends in a feature map (or tokens), not one vector per image: "
        "end head: with {block: pool}",
        None,
    ),
    (  # keys are compared as what they read as: 224 and 0xE0 are one key of by_dataset's map
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: {by_dataset: {224: 8, 0xE0: 16}}\n    layer: {block: conv}\n",
        ":5: invalid YAML: key '0xE0' is given twice (as '224') (first on line 5)",
        None,
    ),
    (  # a conv after token_pool: spaces show passed it, a search ended in conv2d's traceback
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: 16\n    layer: {block: conv}\nhead:\n  - {block: patch_embed, out: 32, "
        "patch: 4}\n  - {block: token_pool}\n  - {block: conv, out: 64, kernel: 1}\n",
        ":10: head[2]: no block may follow token_pool: it gives one vector per image",
        None,
    ),
    (  # a list as the reference dataset: a TypeError traceback
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, 8]}\nreference_dataset: "
        "[d]\nstages:\n  - out: 8\n    layer: {block: conv}\nhead:\n  - {block: pool}\n",
        ":4: reference_dataset: must be a dataset's name, got ['d']",
        None,
    ),
    (  # every scaled width rounded up to a million channels, an allocation error at search
        "name: x\nchannel_divisor: 1000000\ndatasets:\n  d: {classes: 10, input_shape: [3, 8, "
        "8]}\nstages:\n  - out: 8\n    layer: {block: conv}\nhead:\n  - {block: pool}\n",
        ":2: channel_divisor",
        None,
    ),
    (  # a categorical choice of a pool before a patch embedding: 1x1 on that path
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 32, 32]}\nstages:\n  - out: "
        "16\n    layer:\n      candidates:\n        conv: {block: conv, kernel: 3}\n        "
        "pool: {block: pool}\nhead:\n  - {block: patch_embed, out: 32, patch: 4}\n  - {block: "
        "token_pool}\n",
        ":11: head[0].patch: a 4x4 patch is larger than the 1x1 feature map it gets from d's "
        "32x32 input; no input is large enough: stages[0].layer.candidates.pool (pool) before "
        "it leaves a 1x1 map of any input",
        None,
    ),
    (  # strided layers past the smallest depth: 16 or 4 tokens, one position embedding
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 32, 32]}\nstages:\n  - out: "
        "16\n    depth: {choices: [1, 2]}\n    layer: {block: conv, stride: 2}\nhead:\n  - "
        "{block: patch_embed, out: 32, patch: 2}\n  - {block: token_pool}\n",
        ":9: head[0]: the feature map patch_embed gets from d's 32x32 input depends on the "
        "choices before it (8x8, 16x16)",
        None,
    ),
    (  # 1.08e8 elements passed; a search stopped at its first trial
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 6000, 6000]}\nstages:\n"
        "  - out: 8\n    stride: 16\n    layer: {block: conv}\nhead:\n  - {block: pool}\n",
        ":3: datasets.d.input_shape: an input of 3x6000x6000 has 1.08e+08 elements, more than "
        "the 6.71e+07 hwnas allocates for one input",
        None,
    ),
    (  # ... and so the largest resolution
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 32, 32]}\nresolution: "
        "{choices: [32, 8192]}\nstages:\n  - out: 8\n    layer: {block: conv}\nhead:\n  - "
        "{block: pool}\n",
        ":4: resolution: an input of 3x8192x8192 has 2.01e+08 elements",
        None,
    ),
    (  # a 16384-wide stage at expansion 64: accepted, then 68 GB to build it
        "name: x\ndatasets:\n  d: {classes: 10, input_shape: [3, 32, 32]}\nstages:\n"
        "  - out: 16384\n    depth: {choices: [1, 2]}\n    layer: {block: mbconv, expand: 64}\n"
        "head:\n  - {block: pool}\n",
        ":7: stages[0].layer: the d network at its largest (every choice at its most) has "
        "3.44e+10 parameters and buffers (128 GiB of float32), more than the 1.07e+09 hwnas "
        "builds from a file; this holds 3.44e+10 of them",
        None,
    ),
    (  # a million classes after 16384 channels: a classifier of 1.6e10
        "name: x\ndatasets:\n  d: {classes: 1000000, input_shape: [3, 8, 8]}\nstages:\n"
        "  - out: {choices: [8, 16384]}\n    layer: {block: conv}\nhead:\n  - {block: pool}\n",
        ":3: datasets.d.classes: the d network at its largest",
        None,
    ),
]


@pytest.mark.parametrize(("text", "message", "_line"), BAD)
def test_a_malformed_space_file_names_the_file_line_and_key(tmp_path, text, message, _line):
    from hwnas.errors import HwnasError

    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(HwnasError) as err:
        get_space(str(path))
    assert str(err.value).startswith(str(path)) and message in str(err.value)
    assert "\n" not in str(err.value)


def test_a_malformed_space_file_stops_the_search_in_one_line(tmp_path, hwnas_home):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD[1][0])
    r = hwnas_main(
        "search", "--space", str(path), "--strategy", "oneshot", "--device", "cpu-fast",
        "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0, r.stderr
    assert f"{path}:6: stages[0].layer.kernel: must be an integer" in r.stderr
    assert not (tmp_path / "run").exists() and not (hwnas_home / "studies.db").exists()


def test_hwnas_spaces_counts_each_network_once_and_names_an_unused_file(
    tiny_space_file, capsys
):
    """A layer past its stage's depth does not change the network: `hwnas spaces` counted its
    choices anyway (a user's ConvNeXt-like space: 34,992 listed, 9,288 distinct); OFA showed
    7.4e22 for the paper's 10^19 per resolution. A user file named like a shipped space was
    ignored without a word."""
    import itertools

    from hwnas.cli import main
    from hwnas.spaces import get_space, reload_spaces

    space = get_space("tiny")
    choices = space.choices()
    distinct = {
        space.from_choices(dict(zip(choices, combo))).text
        for combo in itertools.product(*choices.values())
    }
    assert space.num_architectures() == len(distinct) < math.prod(map(len, choices.values()))
    # OFA: 5 stages of depth 2-4, 3 kernels x 3 expansions a block, 25 resolutions
    assert get_space("ofa").num_architectures() == (9**2 + 9**3 + 9**4) ** 5 * 25
    (tiny_space_file.parent / "nasbench201.yaml").write_text(tiny_space_file.read_text())
    reload_spaces()
    assert main(["spaces"]) == 0
    out = capsys.readouterr().out
    assert f"{len(distinct):,}" in out.split("tiny", 1)[1].splitlines()[0]
    assert "unused space file" in out and "nasbench201.yaml" in out
    assert "'nasbench201' is already the name of a shipped space" in out


def test_measure_takes_a_declared_spaces_own_dataset(tiny_space_file, capsys):
    """`hwnas measure --space tiny --arch ...` of a space without cifar100 stopped at
    "unknown dataset 'cifar100'": measure defaulted to it where arch and predict already took
    the space's own dataset."""
    from hwnas.cli import main

    arch = get_space("tiny").sample(np.random.default_rng(0), 1)[0].text
    assert main(["measure", "--device", "cpu-fast", "--space", "tiny", "--arch", arch]) == 0
    out = capsys.readouterr()
    assert "unknown dataset" not in out.err and "1 measured" in out.out, out.err


def test_spaces_show_of_a_file_given_by_path_names_the_file(tmp_path):
    """`hwnas spaces show some/dir/tiny.yaml` printed `file  tiny`: the space's name, read as
    a file of the working folder."""
    from tests.spaces.conftest import TINY_SPACE

    path = tmp_path / "elsewhere" / "tiny_shown.yaml"
    path.parent.mkdir()
    path.write_text(TINY_SPACE.replace("name: tiny\n", "name: tiny_shown\n"))
    r = hwnas_main("spaces", "show", str(path))
    assert r.returncode == 0, r.stderr
    assert f"file        {path}" in r.stdout, r.stdout
    (tmp_path / "dir.yaml").mkdir()  # said "space file not found" of a folder that is there
    r = hwnas_main("spaces", "show", str(tmp_path / "dir.yaml"))
    assert r.returncode == 2 and "dir.yaml is a folder: give a space file" in r.stderr, r.stderr


def test_a_patch_embed_is_checked_against_each_datasets_own_strides(tmp_path):
    """A stem stride of 4 for 224-pixel ImageNet and of 1 for 32-pixel CIFAR, then 16x16
    patches: each dataset's network fits. The check took the largest stride for every dataset
    (x4 on 32 pixels) and would have refused the file; an 8-pixel CIFAR input is refused."""
    from hwnas.errors import HwnasError
    from hwnas.spaces.declared.schema import read_space_file

    text = """\
name: twosizes
datasets:
  cifar10: {classes: 10, input_shape: [3, 32, 32]}
  imagenet: {classes: 1000, input_shape: [3, 224, 224]}
stem:
  - {block: conv, out: 16, kernel: 3, stride: {by_dataset: {cifar10: 1, imagenet: 4}}}
  - {block: patch_embed, out: 32, patch: 16}
stages:
  - {name: t, out: 32, layer: {block: transformer, heads: 2, mlp_ratio: 2}}
head:
  - {block: token_pool}
"""
    (tmp_path / "ok.yaml").write_text(text)
    read_space_file(tmp_path / "ok.yaml")
    (tmp_path / "small.yaml").write_text(text.replace("[3, 32, 32]", "[3, 8, 8]"))
    with pytest.raises(HwnasError, match="a 16x16 patch is larger than the 8x8 feature map it "
                                         "gets from cifar10's 8x8 input"):  # fmt: skip
        read_space_file(tmp_path / "small.yaml")


def test_a_declared_spaces_filled_refset_export_is_predicted_on(tmp_path):
    """`hwnas refset export --space mobilenetv4` writes its ImageNet networks' input shapes;
    `hwnas predict --calibration` on the filled file must take them (the input_shape check
    must read the dataset the export times, not the space's first one)."""
    r = hwnas_main("refset", "export", "--space", "mobilenetv4", "--out", str(tmp_path / "rx"))
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "rx" / "calibration.csv")))
    assert rows[0]["input_shape"] == "1x3x224x224"

    def predict(rows):  # the export's rows, filled, as CAL.csv
        with open(tmp_path / "cal.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows({**row, "latency_ms": str(5 + i)} for i, row in enumerate(rows))
        return hwnas_main("predict", "--space", "mobilenetv4", "--calibration",
                          str(tmp_path / "cal.csv"), "--arch", rows[0]["arch"])  # fmt: skip

    r = predict(rows)
    assert r.returncode == 0 and " ms (std " in r.stdout, r.stderr
    rows[0]["input_shape"] = "1x3x32x32"  # another dataset's network: refused
    r = predict(rows)
    assert r.returncode == 2 and "input_shape 1x3x32x32, but hwnas predict reads" in r.stderr


def test_a_pool_before_a_patch_embed_stops_arch_in_one_line(tmp_path):
    """The audit's file: `hwnas spaces show` accepted it and `hwnas arch` ended in PyTorch's
    74-line traceback ("Kernel size can't be greater than actual input size"), as a search
    did: the check multiplied the strides before a patch embedding and passed over the pool,
    which leaves a 1x1 map."""
    (tmp_path / "pp.yaml").write_text(
        "name: pp\ndatasets:\n  cifar10: {classes: 10, input_shape: [3, 32, 32]}\nstem:\n"
        "  - {block: conv, out: 16, kernel: 3}\n  - {block: pool}\n"
        "  - {block: patch_embed, out: 32, patch: 4}\nstages:\n"
        "  - depth: {choices: [1, 2]}\n    layer: {block: transformer, heads: 2, head_dim: 16}\n"
        "head:\n  - {block: token_pool}\n"
    )
    for args in (["spaces", "show", "pp.yaml"], ["arch", "--space", "pp.yaml", "s0.d=1"]):
        r = hwnas_main(*args, cwd=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
        assert r.stderr.startswith(
            "error: pp.yaml:7: stem[2].patch: a 4x4 patch is larger than the 1x1 feature map it "
            "gets from cifar10's 32x32 input; no input is large enough: stem[1] (pool) before "
            "it leaves a 1x1 map of any input"
        ), r.stderr


def test_a_declared_network_that_fails_to_run_names_its_space_file(tmp_path):
    """What the file's checks cannot see (here an input smaller than the one the space
    declares) ended in PyTorch's traceback; it is one line naming the space file."""
    from hwnas.errors import HwnasError

    space = get_space("vit")
    net = space.build(space.sample(np.random.default_rng(0), 1)[0], "cifar10")
    with pytest.raises(HwnasError, match=r"search_spaces/vit/space\.yaml: the vit network for "
                                         r"cifar10 failed running on a 1x3x2x2 input \("
                                         r"RuntimeError: "):  # fmt: skip
        net(torch.zeros(1, 3, 2, 2))


def test_choices_that_print_alike_keep_labels_of_their_own(tmp_path):
    """`expand: {choices: [4, 4.0000001, 6]}` was listed `4 | 4 | 6` ("3 architectures"),
    sampling gave 2 distinct strings and `s0.0=4` built 4.0000001: labels were `%g`, 6
    digits. A number is written as it reads back."""
    from hwnas.spaces import reload_spaces

    text = (
        "name: {name}\ndatasets:\n  cifar10: {{classes: 10, input_shape: [3, 32, 32]}}\n"
        "stages:\n  - out: 16\n    stride: 2\n    layer: {{block: mbconv, kernel: 3, expand: "
        "{{choices: {values}}}}}\nhead:\n  - {{block: pool}}\n"
    )
    (tmp_path / "alike.yaml").write_text(text.format(name="alike", values="[4, 4.0000001, 6]"))
    (tmp_path / "alike2.yaml").write_text(
        text.format(name="alike2", values="[2.5, 2.50001, 2.500001, 3.5]")
    )
    try:
        r = hwnas_main("spaces", "show", "alike.yaml", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert "s0.0.expand              4 | 4.0000001 | 6" in r.stdout, r.stdout
        space = get_space(str(tmp_path / "alike.yaml"))
        built = [space.values(space.parse(f"s0.0={v}"))["s0.0.expand"] for v in
                 ("4", "4.0000001", "6")]  # fmt: skip
        assert built == [4.0, 4.0000001, 6.0]
        assert len({a.text for a in space.sample(np.random.default_rng(0), 40)}) == 3
        other = get_space(str(tmp_path / "alike2.yaml"))
        assert other.choices()["s0.0.expand"] == ("2.5", "2.50001", "2.500001", "3.5")
    finally:
        reload_spaces()


def test_an_existing_file_given_as_a_space_gets_the_real_reason(tmp_path, monkeypatch):
    """`hwnas spaces show single.txt`, the file there, said "unknown search space
    'single.txt'; did you mean ...", where `/etc/passwd` said what is wrong."""
    (tmp_path / "single.txt").write_text("name: single\n")
    r = hwnas_main("spaces", "show", "single.txt", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "error: single.txt: a space file's name ends in .yaml or .yml" in r.stderr, r.stderr
    r = hwnas_main("spaces", "show", "nothere.txt", cwd=tmp_path)  # no such file: a name
    assert "unknown search space 'nothere.txt'" in r.stderr, r.stderr
    # a name read from a file (a zoo card, a device profile) stays a name: a project folder
    # called like an elastic model's space must not become that space
    from hwnas.errors import HwnasError, UnknownNameError

    (tmp_path / "mynet").mkdir()
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownNameError):
        get_space("mynet")
    with pytest.raises(HwnasError, match="mynet is a folder"):
        get_space("mynet", code=True)
