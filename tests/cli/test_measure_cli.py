"""`hwnas measure` and `hwnas devices check` as a user types them."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner
from helpers import hwnas_main

from hwnas.store import MeasurementStore

SMALL = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"
OTHER = "|avg_pool_3x3~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"


def test_measure_archs_and_onnx_files_stores_them_once(tmp_path):
    from torch import nn

    from hwnas.export import export_onnx

    onnx_file = tmp_path / "conv.onnx"
    onnx_file.write_bytes(export_onnx(nn.Conv2d(3, 8, 3), (1, 3, 16, 16)))
    archs = tmp_path / "archs.txt"
    archs.write_text(f"# two architectures\n{OTHER}  # a comment\n\n")
    store = tmp_path / "m.db"
    args = ["measure", "-d", "cpu-fast", "--arch", SMALL, "--archs", str(archs),
            "--onnx", str(onnx_file), "--dataset", "cifar10", "--store", str(store)]  # fmt: skip
    r = hwnas_main(*args)
    assert r.returncode == 0, r.stderr
    assert "3 measured, 0 from the store" in r.stdout and "conv.onnx" in r.stdout
    r = hwnas_main(*args)
    assert r.returncode == 0 and "0 measured, 3 from the store" in r.stdout
    with MeasurementStore(store) as st:
        ms = st.measurements()
    assert [m.label for m in ms] == [SMALL, OTHER, "conv.onnx"]
    assert all(m.runtime == "ort" and m.device == "cpu-fast" and m.value > 0 for m in ms)
    assert ms[2].input_shape == (1, 3, 16, 16) and ms[0].input_shape == (1, 3, 32, 32)


def test_an_arch_is_named_by_its_index_as_in_hwnas_arch_and_predict():
    """``--arch 5`` in NAS-Bench-201 is the architecture ``hwnas arch 5`` shows (measure read
    it as a malformed arch string while predict and arch took the index)."""
    from hwnas.spaces import get_space

    text = get_space("nasbench201").arch_at(5).text
    by_index = hwnas_main("measure", "-d", "pixel3", "--arch", "5")
    by_text = hwnas_main("measure", "-d", "pixel3", "--arch", text)
    assert by_index.returncode == by_text.returncode == 0, by_index.stderr
    assert text in by_index.stdout and by_index.stdout == by_text.stdout
    assert text in hwnas_main("arch", "5").stdout


def test_hwnas_arch_says_which_recorded_latencies_are_of_a_batch():
    """`hwnas arch 5` listed 1080ti_256's latency of a batch of 256 (22.811) beside 1080ti_1's
    of one input (13.163) under one `latency ms` header: read as slower per image. A table of
    a batch is now said per row, as `hwnas zoo list` and the cards say it."""
    rows = {
        line.split()[1]: line
        for line in hwnas_main("arch", "5").stdout.splitlines()
        if line.startswith("│") and len(line.split()) > 3
    }
    assert "(per batch of 256)" in rows["1080ti_256"] and "per batch" not in rows["1080ti_1"]
    assert "(per batch of 32)" in rows["titan_rtx_32"]


def test_hwnas_arch_says_why_another_input_sizes_network_has_no_recorded_latency():
    """`hwnas arch 5 --dataset imagenet16` left the recorded-latency table out without a word
    (the tables hold the 32x32 CIFAR networks)."""
    out = hwnas_main("arch", "5", "--dataset", "imagenet16").stdout
    assert "recorded latency: none of imagenet16's networks" in out and "1080ti_1" not in out
    out = hwnas_main("arch", "5", "--dataset", "cifar10").stdout  # the same input size
    assert "1080ti_1" in out and "none of" not in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["measure", "-d", "cpu-fast"], "nothing to measure: give --arch"),
        (["measure", "-d", "cpu-fast", "--archs", "{tmp}/none.txt"], "cannot read --archs file"),
        (["measure", "-d", "cpu-fast", "--archs", "{tmp}/empty.txt"], "lists no architecture"),
        (["measure", "-d", "cpu-fast", "--onnx", "{tmp}/bad.onnx"], "corrupt or invalid ONNX"),
        (["measure", "-d", "pixel3", "--runtime", "tvm", "--arch", "0"], "has no runtime choice"),
        (["measure", "-d", "cpu-fast", "--arch", "|bad|"], "arch"),
        (["devices", "check", "pixel8"], "device 'pixel8' is not reachable: adb is not installed"),
        (["devices", "check", "vu9p_hls4ml"], "is not reachable"),
        (["measure", "-d", "cpu-fast", "--trials", "3", "--arch", "0"], "add --runtime tvm"),
        (["measure", "-d", "pixel3", "--arch", "15625"], "index 15625 out of range 0..15624"),
        # the Pi 5 table measured one cell per isomorphism class: index 69 is not one, 42 is
        # its class's (main: a table of the other, measured cells, then "no recorded
        # latency_ms" after them)
        (["measure", "-d", "pi5_onnx", "--arch", "0", "--arch", "69"],
         "no recorded value for '|none~0|+|nor_conv_3x3~0|none~1|+|skip_connect~0|none~1|"
         "nor_conv_3x3~2|' (index 69): the table measured one cell per isomorphism class, and "
         "'|none~0|+|nor_conv_3x3~0|nor_conv_1x1~1|+|skip_connect~0|none~1|nor_conv_3x3~2|' "
         "(index 42) computes the same function; or predict it: hwnas predict --device "
         "pi5_onnx --arch"),
        (["measure", "-d", "embedded_tpu_edge_tpu_int8", "--arch", "1651"],  # no input path
         "no recorded value for '|none~0|+|none~0|none~1|+|none~0|none~1|none~2|' (index "
         "1651): predict it"),
    ],
)
def test_one_line_errors(args, expected, tmp_path):
    (tmp_path / "empty.txt").write_text("# nothing\n")
    (tmp_path / "bad.onnx").write_bytes(b"\x00junk")
    r = hwnas_main(*[a.format(tmp=tmp_path) for a in args], env={"PATH": "/usr/bin:/bin"})
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], r.stderr


def test_missing_device_is_a_usage_error():
    r = hwnas_main("measure", "--arch", SMALL)
    assert r.returncode == 2 and "Missing option '--device'" in r.stderr


def test_devices_check_runs_a_tiny_model_on_this_cpu():
    r = hwnas_main("devices", "check", "cpu-fast")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("ok: cpu-fast: this machine:") and "tiny CNN latency:" in r.stdout
    r = hwnas_main("devices", "check", "pixel3")
    assert r.returncode == 0 and "a recorded table: nothing to run" in r.stdout


def test_measure_group_leaves_subcommands_alone(monkeypatch):
    """Another command can join the group (`hwnas measure import ...`) without measuring."""
    from hwnas.cli import app
    from hwnas.cli.measure import measure_group

    seen = []

    @click.command("probe-sub")
    @click.option("--device")
    def sub(device):
        seen.append(device)

    measure_group.add_command(sub)
    try:
        result = CliRunner().invoke(app, ["measure", "probe-sub", "--device", "cpu"])
    finally:
        measure_group.commands.pop("probe-sub")
    assert result.exit_code == 0, result.output
    assert seen == ["cpu"]
    listing = CliRunner().invoke(app, ["devices"])
    assert listing.exit_code == 0 and "cpu-fast" in listing.output


@pytest.mark.parametrize(
    "args",
    [
        ["measure", "--device", "cpu", "--runtime", "tvm", "--arch", SMALL],
        ["search", "--device", "cpu", "--runtime", "tvm", "--budget", "2"],
    ],
)
def test_tvm_commands_without_the_tvm_extra_name_the_extra(args, tmp_path):
    import subprocess
    import sys

    code = (
        "import hwnas.runtimes.tvm as t; t.tvm_installed = lambda: False;"
        "import sys; from hwnas.cli import main; sys.exit(main())"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=tmp_path,
        timeout=120,
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install 'hwnas[tvm]'" in lines[0], r.stderr
    assert not (tmp_path / "runs").exists()


def test_devices_list_shows_the_install_hint_with_its_extra():
    import subprocess
    import sys

    code = (
        "import hwnas.runtimes.tvm as t; t.tvm_installed = lambda: False;"
        "import sys; from hwnas.cli import main; sys.exit(main())"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, "devices", "--all"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("unreachable rpc:"))
    assert line.endswith("Apache TVM is not installed: pip install 'hwnas[tvm]'"), line


def test_an_onnx_file_whose_activations_underflow_is_measured_with_a_warning(tmp_path):
    """A file whose untrained weights make its activations subnormal floats measures far
    slower than the same network trained (a random-init MobileViT: 351 ms against 19 ms):
    `hwnas measure` says so in one warning line naming the file, and `hwnas.measure` issues it
    as a HwnasWarning; a file with normal activations gets none. (Before: the value was shown
    with no word.)"""
    import torch

    import hwnas
    from hwnas.export import export_onnx

    net = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64),
                              torch.nn.ReLU(), torch.nn.Linear(64, 64))  # fmt: skip
    normal = tmp_path / "normal.onnx"
    normal.write_bytes(export_onnx(net, (1, 64)))
    with torch.no_grad():  # activations of about 1e-40 after two layers: subnormal float32
        for layer in net[:2]:
            layer.weight.mul_(1e-20)
            layer.bias.zero_()
    tiny = tmp_path / "tiny.onnx"
    tiny.write_bytes(export_onnx(net, (1, 64)))
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", str(normal), "--onnx", str(tiny))
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("warning: tiny.onnx: 1 of its 3 nodes read "
                                                   "subnormal floats"), r.stderr  # fmt: skip
    with pytest.warns(hwnas.HwnasWarning, match="tiny.onnx: .* subnormal floats"):
        hwnas.measure([tiny], device="cpu-fast")


def test_an_output_without_a_shape_is_read_and_a_nodes_defect_is_named(tmp_path):
    """ONNX's checker refuses a graph output with a type but no shape before it looks at the
    nodes: a model ONNX Runtime runs was refused as corrupt, and a Conv without its weight was
    refused for the missing shape instead of its own defect."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    def save(nodes, name):
        g = h.make_graph(nodes, "g", [h.make_tensor_value_info("X", T.FLOAT, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("Y", T.FLOAT, None)])  # fmt: skip
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.save(m, tmp_path / name)
        return str(tmp_path / name)

    ok = hwnas_main("measure", "-d", "cpu-fast", "--onnx", save([h.make_node("Relu", ["X"], ["Y"])],
                                                                  "relu.onnx"))  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    bad = hwnas_main("measure", "-d", "cpu-fast", "--onnx",
                     save([h.make_node("Conv", ["X"], ["Y"])], "conv.onnx"))  # fmt: skip
    assert bad.returncode == 2 and "Conv" in bad.stderr and "input size 1" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_a_tables_device_refuses_a_batch_it_was_not_measured_at_and_names_its_own():
    """`hwnas measure --device pixel3 --batch-size 64` (and `hwnas.measure(..., batch_size=64)`)
    printed the batch-1 value as if it were the batch of 64 (helper-57); and titan_rtx_256's
    values, a batch of 256's, were shown as plain ms."""
    import hwnas

    r = hwnas_main("measure", "--device", "pixel3", "--arch", "5", "--batch-size", "64")
    assert r.returncode == 2 and r.stdout == "", r.stdout
    assert r.stderr.strip().splitlines() == [
        "error: 'pixel3' gives the values of a table, measured at batch 1: batch size 64 "
        "cannot be read from it; measure a live device at that batch"
    ]
    with pytest.raises(hwnas.HwnasError, match="measured at batch 1: batch size 64"):
        hwnas.measure("5", device="pixel3", batch_size=64)
    for batch in ("1", "256"):  # the default, and the table's own
        r = hwnas_main("measure", "--device", "titan_rtx_256", "--arch", "5", "--batch-size", batch)
        assert r.returncode == 0, r.stderr
        assert "ms and mJ are per batch of 256, not per input" in r.stdout
    r = hwnas_main("measure", "--device", "pixel3", "--arch", "5")
    assert r.returncode == 0 and "per batch" not in r.stdout
    # a table's value has no spread: its CV is "-", as its CI and rounds (it read "0.00")
    row = next(line for line in r.stdout.splitlines() if "recorded" in line and "│" in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[2:5] == ["-", "-", "-"] and cells[-1] == "recorded", cells


def test_a_recorded_device_without_the_spaces_table_is_refused_before_any_progress():
    """`hwnas measure --device 1080ti_64 --arch 0` (a device with an FBNet table only) drew a
    progress bar, "0/1 models ... stopped", then refused without naming the space it has."""
    r = hwnas_main("measure", "--device", "1080ti_64", "--arch", "0")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == [
        "error: device '1080ti_64' has no recorded table for space 'nasbench201' (it has: "
        "fbnet): give --space fbnet"
    ]
