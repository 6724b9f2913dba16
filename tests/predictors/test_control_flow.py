"""Models with control flow (ONNX Loop, Scan, If), as TorchScript's scripting and TensorFlow's
converters write them: their subgraphs' work is read, counted once per iteration, and timed as
one kernel that runs alone with the outer-scope values its subgraphs read.

(main, 2026-11-29: a scripted GRU cell stepped over 40 tokens could not be read at all,
"cannot infer the shapes of Gemm node"; a Loop whose body multiplies by a weight it reads
from the graph around it was predicted at 0.0057 ms, 90% interval 0.001-0.029 ms, against 0.71
ms measured, because its one-node model lacked the weight and could not be timed.)"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from hwnas.predictors.graph import COLUMN, load_graph_model
from hwnas.predictors.kernels.features import macs, subgraph_runs, work_class
from hwnas.predictors.kernels.read import read_kernels

RNG = np.random.default_rng(0)
W = nh.from_array(RNG.standard_normal((32, 32)).astype(np.float32) * 0.1, "W")


def _model(nodes, inputs, outputs, inits) -> onnx.ModelProto:
    m = h.make_model(h.make_graph(nodes, "g", inputs, outputs, inits),
                     opset_imports=[h.make_opsetid("", 17)])  # fmt: skip
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _loop_body() -> onnx.GraphProto:
    """y = relu(y @ W) + x: W and x are read from the graph around the loop, by name."""
    return h.make_graph(
        [h.make_node("MatMul", ["y_in", "W"], ["mm"]), h.make_node("Relu", ["mm"], ["r"]),
         h.make_node("Add", ["r", "x"], ["y_out"]), h.make_node("Identity", ["c_in"], ["c_out"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("y_in", T.FLOAT, ["b", "s", "d"])],
        [h.make_tensor_value_info("c_out", T.BOOL, []),
         h.make_tensor_value_info("y_out", T.FLOAT, ["b", "s", "d"])],
    )  # fmt: skip


def _save(model, path) -> str:
    onnx.save(model, str(path))
    return str(path)


@pytest.fixture(scope="module")
def loop_models(tmp_path_factory):
    """A Loop of 6 steps (its trip count a weight), one whose trip count is the input's second
    axis (Shape -> Gather: known from a run), and a while loop whose condition is data."""
    folder = tmp_path_factory.mktemp("control-flow")
    x = h.make_tensor_value_info("x", T.FLOAT, [1, 16, 32])
    y = h.make_tensor_value_info("y", T.FLOAT, [1, 16, 32])
    zeros = nh.from_array(np.zeros((1, 16, 32), np.float32), "h0")
    fixed = _model(
        [h.make_node("Loop", ["six", "", "h0"], ["y"], body=_loop_body())], [x], [y],
        [W, zeros, nh.from_array(np.array(6, np.int64), "six")],
    )  # fmt: skip
    counted = _model(
        [h.make_node("Shape", ["x"], ["s"]), h.make_node("Gather", ["s", "one"], ["n"], axis=0),
         h.make_node("Loop", ["n", "", "h0"], ["y"], body=_loop_body())], [x], [y],
        [W, zeros, nh.from_array(np.array(1, np.int64), "one")],
    )  # fmt: skip
    data_cond = _model(
        [h.make_node("ReduceSum", ["x"], ["t"], keepdims=0),
         h.make_node("Greater", ["t", "zero"], ["go"]),
         h.make_node("Loop", ["", "go", "h0"], ["y"], body=_loop_body())], [x], [y],
        [W, zeros, nh.from_array(np.array(0, np.float32), "zero")],
    )  # fmt: skip
    return {
        "fixed": _save(fixed, folder / "loop6.onnx"),
        "counted": _save(counted, folder / "loop_shape.onnx"),
        "while": _save(data_cond, folder / "while.onnx"),
    }


STEP_MACS = 16 * 32 * 32  # one image's 16 rows times W


def test_a_loops_body_is_counted_once_per_iteration(loop_models):
    fixed = load_graph_model(loop_models["fixed"])
    assert fixed.uncounted == {}
    assert fixed.features[COLUMN["macs_gemm"]] == 6 * STEP_MACS
    assert fixed.features[COLUMN["params"]] == 32 * 32  # the same weights every step
    assert fixed.features[COLUMN["n_act"]] == 6 and fixed.features[COLUMN["n_add"]] == 6
    counted = load_graph_model(loop_models["counted"])  # 16 steps, from one run of the model
    assert counted.features[COLUMN["macs_gemm"]] == 16 * STEP_MACS
    # how often a data-dependent loop runs cannot be read: named, not silently counted once
    data = load_graph_model(loop_models["while"])
    assert data.uncounted == {"Loop": 1}
    assert data.features[COLUMN["macs_gemm"]] == 0


def test_scan_steps_over_its_axis_and_if_counts_its_costlier_branch(tmp_path):
    u = nh.from_array(np.zeros((8, 8), np.float32), "U")
    body = h.make_graph(
        [h.make_node("MatMul", ["h_in", "U"], ["a"]), h.make_node("Add", ["a", "x_t"], ["b"]),
         h.make_node("Tanh", ["b"], ["h_out"]), h.make_node("Identity", ["h_out"], ["y_t"])],
        "step",
        [h.make_tensor_value_info("h_in", T.FLOAT, [1, 8]),
         h.make_tensor_value_info("x_t", T.FLOAT, [1, 8])],
        [h.make_tensor_value_info("h_out", T.FLOAT, [1, 8]),
         h.make_tensor_value_info("y_t", T.FLOAT, [1, 8])],
    )  # fmt: skip
    scan = _model(  # time-first (20, 1, 8): 20 steps, although the batch axis convention is 1
        [h.make_node("Scan", ["h0", "x"], ["hT", "ys"], body=body, num_scan_inputs=1)],
        [h.make_tensor_value_info("x", T.FLOAT, [20, 1, 8])],
        [h.make_tensor_value_info("hT", T.FLOAT, [1, 8]),
         h.make_tensor_value_info("ys", T.FLOAT, [20, 1, 8])],
        [u, nh.from_array(np.zeros((1, 8), np.float32), "h0")],
    )  # fmt: skip
    s = load_graph_model(_save(scan, tmp_path / "scan.onnx"))
    assert s.uncounted == {}
    assert s.features[COLUMN["macs_gemm"]] == 20 * 8 * 8
    assert s.features[COLUMN["n_act"]] == 20

    heavy = h.make_graph([h.make_node("MatMul", ["x", "W"], ["prod"])], "then", [],
                         [h.make_tensor_value_info("prod", T.FLOAT, [1, 32])])  # fmt: skip
    light = h.make_graph([h.make_node("Relu", ["x"], ["e"])], "else", [],
                         [h.make_tensor_value_info("e", T.FLOAT, [1, 32])])  # fmt: skip
    branch = _model(
        [h.make_node("ReduceSum", ["x"], ["t"], keepdims=0),
         h.make_node("Greater", ["t", "zero"], ["c"]),
         h.make_node("If", ["c"], ["y"], then_branch=light, else_branch=heavy)],
        [h.make_tensor_value_info("x", T.FLOAT, [1, 32])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 32])],
        [W, nh.from_array(np.array(0, np.float32), "zero")],
    )  # fmt: skip
    b = load_graph_model(_save(branch, tmp_path / "if.onnx"))
    assert b.uncounted == {}
    assert b.features[COLUMN["macs_gemm"]] == 32 * 32 and b.features[COLUMN["n_act"]] == 0


def test_a_loop_is_one_kernel_that_runs_alone_as_in_the_network(loop_models):
    """The loop's listed inputs are constants (the trip count, a zero state): it reads the
    model's input only inside its body. It is still a kernel, and its one-node model carries
    W and x, so it runs alone and computes what the network computes."""
    data = open(loop_models["fixed"], "rb").read()
    mk = read_kernels(data)
    (loop,) = [k for k in mk.kernels if k.op == "Loop"]
    assert {t.name: t.role for t in loop.inputs if t.name in ("W", "x")} == {"W": "w", "x": "x"}
    x = RNG.standard_normal((1, 16, 32)).astype(np.float32)
    whole = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    alone = ort.InferenceSession(loop.onnx_bytes(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(alone.run(None, {"x": x})[0], whole[0], rtol=1e-5, atol=1e-6)
    # before it is timed, its time follows its body's work, every step, and its dispatches
    assert macs(loop) == 6 * STEP_MACS and work_class(loop) == "compute"
    assert subgraph_runs(loop) == 6 * 4
    other = read_kernels(open(loop_models["counted"], "rb").read())
    assert len({k.key for k in mk.kernels} & {k.key for k in other.kernels}) == 0


@pytest.mark.slow
def test_a_scripted_recurrent_cell_is_read_and_predicted(tmp_path, capsys):
    """A GRU cell written by hand and stepped over 40 tokens with a Python loop, exported by
    TorchScript's scripting (an ONNX Loop whose output shape ONNX cannot infer): read,
    its products counted every step, and predicted on a recorded phone and on this CPU."""
    import torch
    from torch import nn

    class Cell(nn.Module):
        def __init__(self, d=16, hidden=24):
            super().__init__()
            self.x, self.h = nn.Linear(d, 3 * hidden), nn.Linear(hidden, 3 * hidden)
            self.hd, self.out = hidden, nn.Linear(hidden, 5)

        def forward(self, x):  # (batch, tokens, d)
            state = torch.zeros(x.size(0), self.hd)
            for t in range(x.size(1)):
                gx, gh = self.x(x[:, t]), self.h(state)
                r = torch.sigmoid(gx[:, : self.hd] + gh[:, : self.hd])
                z = torch.sigmoid(gx[:, self.hd : 2 * self.hd] + gh[:, self.hd : 2 * self.hd])
                n = torch.tanh(gx[:, 2 * self.hd :] + r * gh[:, 2 * self.hd :])
                state = (1 - z) * n + z * state
            return self.out(state)

    path = tmp_path / "gru_cell.onnx"
    torch.onnx.export(torch.jit.script(Cell().eval()), (torch.randn(1, 40, 16),), str(path),
                      dynamo=False, input_names=["x"])  # fmt: skip
    assert "Loop" in {n.op_type for n in onnx.load(str(path)).graph.node}
    g = load_graph_model(path)
    assert g.uncounted == {}
    assert g.features[COLUMN["macs_gemm"]] == 40 * (16 + 24) * 72 + 24 * 5

    from hwnas.cli import main

    assert main(["predict", "--device", "pixel3", "--onnx", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "gru_cell.onnx:" in out and "do not count" not in err
    # this CPU on the tests' fast timing profile: its constants are timed, no kernel of the model
    args = ["predict", "--device", "cpu-fast", "--kernel-budget", "0", "--onnx", str(path)]
    assert main(args) == 0
    assert "gru_cell.onnx:" in capsys.readouterr().out


def test_nested_loops_multiply_their_iterations(tmp_path):
    """A Loop of 3 whose body runs a Loop of 2 multiplying by the model's W: 6 products in the
    graph features; as one kernel, 18 nodes run inside it (3 x (2 + 2 x 2))."""

    def body(name, inner=None):
        p = name + "_"
        if inner is None:
            step = h.make_node("MatMul", [p + "y", "W"], [p + "out"])
        else:
            step = h.make_node("Loop", ["two", "", p + "y"], [p + "out"], body=inner)
        return h.make_graph(
            [h.make_node("Identity", [p + "c"], [p + "c_out"]), step], name,
            [h.make_tensor_value_info(p + "i", T.INT64, []),
             h.make_tensor_value_info(p + "c", T.BOOL, []),
             h.make_tensor_value_info(p + "y", T.FLOAT, ["a", "b"])],
            [h.make_tensor_value_info(p + "c_out", T.BOOL, []),
             h.make_tensor_value_info(p + "out", T.FLOAT, ["a", "b"])],
        )  # fmt: skip

    nested = _model(
        [h.make_node("Loop", ["three", "", "x"], ["y"], body=body("outer", body("inner")))],
        [h.make_tensor_value_info("x", T.FLOAT, [1, 32])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 32])],
        [W, nh.from_array(np.array(3, np.int64), "three"),
         nh.from_array(np.array(2, np.int64), "two")],
    )  # fmt: skip
    path = _save(nested, tmp_path / "nested.onnx")
    g = load_graph_model(path)
    assert g.uncounted == {} and g.features[COLUMN["macs_gemm"]] == 6 * 32 * 32
    (loop,) = read_kernels(open(path, "rb").read()).kernels
    assert subgraph_runs(loop) == 18 and macs(loop) == 6 * 32 * 32


def _endless(path) -> str:
    """A Loop whose trip count is computed: the input's size times 10^17."""
    body = h.make_graph(
        [h.make_node("Relu", ["y_in"], ["y_out"]), h.make_node("Identity", ["c_in"], ["c_out"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("y_in", T.FLOAT, ["a", "b"])],
        [h.make_tensor_value_info("c_out", T.BOOL, []),
         h.make_tensor_value_info("y_out", T.FLOAT, ["a", "b"])],
    )  # fmt: skip
    endless = _model(
        [h.make_node("Shape", ["x"], ["s"]), h.make_node("ReduceProd", ["s"], ["p"], keepdims=0),
         h.make_node("Mul", ["p", "big"], ["n"]),
         h.make_node("Loop", ["n", "", "x"], ["y"], body=body)],
        [h.make_tensor_value_info("x", T.FLOAT, [1, 8])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 8])],
        [nh.from_array(np.array(10**17, np.int64), "big")],
    )  # fmt: skip
    return _save(endless, path)


def test_a_loop_that_would_run_for_ever_is_stopped_not_waited_for(tmp_path, monkeypatch, capsys):
    """A Loop whose trip count is computed (the input's size times 10^17): reading its trip
    count, or its kernels, runs the model once, and that run is stopped after
    READ_RUN_LIMIT_S (1 s here): on a recorded phone the loop is named as uncounted, on the
    CPU the model is refused in one line. (Before the limit: `hwnas predict --device pixel3`
    ran until killed.)"""
    from hwnas.cli import main
    from hwnas.errors import HwnasError
    from hwnas.predictors.kernels import read

    monkeypatch.setattr(read, "READ_RUN_LIMIT_S", 1.0)
    path = _endless(tmp_path / "endless.onnx")
    assert load_graph_model(path).uncounted == {"Loop": 1}
    with pytest.raises(HwnasError, match="did not end in 1 s"):
        read_kernels(open(path, "rb").read())
    assert main(["predict", "--device", "pixel3", "--onnx", path]) == 0
    assert "(Loop x1)" in capsys.readouterr().err


def test_measuring_a_model_that_never_ends_stops_it_and_names_it(tmp_path, monkeypatch, capsys):
    """`hwnas measure --device cpu` of the same endless loop: its first inference is stopped
    after CALL_LIMIT_S (1 s here) and the error names the model among several; the model
    before it stays in the store. (Before: the command ran until killed.)"""
    import torch

    from hwnas.cli import main
    from hwnas.devices import live
    from hwnas.export import export_onnx

    monkeypatch.setattr(live, "CALL_LIMIT_S", 1.0)
    small = tmp_path / "small.onnx"
    small.write_bytes(export_onnx(torch.nn.Linear(8, 8), (1, 8)))
    endless = _endless(tmp_path / "endless.onnx")
    store = str(tmp_path / "m.db")
    args = ["measure", "-d", "cpu-fast", "--store", store, "--onnx", str(small)]
    assert main([*args, "--onnx", endless]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    steps = [x for x in err if x.startswith("measure on cpu-fast: ")]  # progress, on stderr
    assert steps[-1].startswith("measure on cpu-fast: 1/2 models (50%), stopped after"), err
    (err,) = [x for x in err if x not in steps]  # and one line
    assert "endless.onnx: one inference did not end in 1 s" in err, err
    assert "before it are measured and stored" in err
    assert main(args) == 0
    assert "0 measured, 1 from the store" in capsys.readouterr().out


def test_a_loop_whose_trip_count_is_an_input_is_refused_not_run_once(tmp_path, capsys):
    """A Loop whose trip count is a graph input (an int64 scalar a user passes at run time):
    hwnas cannot know its value, and fed 1 the loop runs once. Refused in one line, naming the
    input, on a recorded phone (graph features) and on this CPU (kernels). (Before: predicted
    as one iteration, silently.)"""
    from hwnas.cli import main

    x = h.make_tensor_value_info("x", T.FLOAT, [1, 16, 32])
    n = h.make_tensor_value_info("steps", T.INT64, [])
    y = h.make_tensor_value_info("y", T.FLOAT, [1, 16, 32])
    model = _model(
        [h.make_node("Cast", ["steps"], ["m"], to=T.INT64),
         h.make_node("Loop", ["m", "", "h0"], ["y"], body=_loop_body())], [x, n], [y],
        [W, nh.from_array(np.zeros((1, 16, 32), np.float32), "h0")],
    )  # fmt: skip
    steps = _save(model, tmp_path / "steps.onnx")
    added = _model(  # through arithmetic too (an Add stopped the check)
        [h.make_node("Add", ["steps", "zero"], ["m"]),
         h.make_node("Loop", ["m", "", "h0"], ["y"], body=_loop_body())], [x, n], [y],
        [W, nh.from_array(np.zeros((1, 16, 32), np.float32), "h0"),
         nh.from_array(np.array(0, np.int64), "zero")],
    )  # fmt: skip
    inner = h.make_node("Loop", ["m", "", "h0"], ["yb"], body=_loop_body())
    yb = h.make_tensor_value_info("yb", T.FLOAT, [1, 16, 32])
    branch = h.make_graph([inner], "branch", [], [yb])
    nested_if = _model(  # a Loop inside an If branch, counted by the outer input (was missed)
        [h.make_node("Add", ["steps", "zero"], ["m"]),
         h.make_node("Constant", [], ["go"], value=nh.from_array(np.array(True), "go")),
         h.make_node("If", ["go"], ["y"], then_branch=branch, else_branch=branch)], [x, n], [y],
        [W, nh.from_array(np.zeros((1, 16, 32), np.float32), "h0"),
         nh.from_array(np.array(0, np.int64), "zero")],
    )  # fmt: skip
    outer_body = h.make_graph(  # an outer Loop of 2 steps whose body runs a Loop of `steps`
        [h.make_node("Loop", ["k", "", "y_in"], ["y_out"], body=_loop_body()),
         h.make_node("Identity", ["c_in"], ["c_out"])], "outer",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("y_in", T.FLOAT, [1, 16, 32])],
        [h.make_tensor_value_info("c_out", T.BOOL, []),
         h.make_tensor_value_info("y_out", T.FLOAT, [1, 16, 32])],
    )  # fmt: skip
    nested_loop = _model(
        [h.make_node("Mul", ["steps", "one"], ["k"]),
         h.make_node("Loop", ["two", "", "h0"], ["y"], body=outer_body)], [x, n], [y],
        [W, nh.from_array(np.zeros((1, 16, 32), np.float32), "h0"),
         nh.from_array(np.array(1, np.int64), "one"), nh.from_array(np.array(2, np.int64), "two")],
    )  # fmt: skip
    for path, device in ((steps, "pixel3"), (steps, "cpu"),
                         (_save(added, tmp_path / "added.onnx"), "cpu"),
                         (_save(nested_if, tmp_path / "nested_if.onnx"), "cpu"),
                         (_save(nested_loop, tmp_path / "loop2.onnx"), "pixel3")):  # fmt: skip
        assert main(["predict", "--device", device, "--onnx", path]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err, err
        assert "input 'steps' sets how many times a Loop runs" in err, err


def test_a_while_loop_on_the_data_is_a_lower_bound_never_its_sentinel_count(tmp_path, capsys):
    """TorchScript exports `while mean(|x|) > 0.01 and i < 50: x = f(x)` as a Loop whose trip
    count is the largest int64 and whose body computes its condition: the kernel-level
    predictor took 2^63 iterations and printed 1.7e16 ms (measured: 17.7 ms). Such a loop is
    now counted once, said so as a lower bound; a recorded phone reads it as uncounted."""
    from hwnas.cli import main
    from hwnas.predictors.subgraphs import computes_its_condition, node_runs

    body = h.make_graph(
        [h.make_node("MatMul", ["y_in", "W"], ["mm"]), h.make_node("Relu", ["mm"], ["y_out"]),
         h.make_node("ReduceMean", ["y_out"], ["m"], keepdims=0),
         h.make_node("Greater", ["m", "thr"], ["c_out"])],
        "body",
        [h.make_tensor_value_info("i", T.INT64, []), h.make_tensor_value_info("c_in", T.BOOL, []),
         h.make_tensor_value_info("y_in", T.FLOAT, [1, 16, 32])],
        [h.make_tensor_value_info("c_out", T.BOOL, []),
         h.make_tensor_value_info("y_out", T.FLOAT, [1, 16, 32])],
    )  # fmt: skip
    loop = h.make_node("Loop", ["big", "go", "x"], ["y"], body=body)
    model = _model(
        [loop], [h.make_tensor_value_info("x", T.FLOAT, [1, 16, 32])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 16, 32])],
        [W, nh.from_array(np.array(2**63 - 1, np.int64), "big"),
         nh.from_array(np.array(True), "go"), nh.from_array(np.array(0.01, np.float32), "thr")],
    )  # fmt: skip
    assert computes_its_condition(loop)
    assert node_runs(model) < 10  # the body once, not 2^63 times
    path = _save(model, tmp_path / "while.onnx")
    # nothing timed (--kernel-budget 0): the loop is counted the same way, in a second, not 25
    # (cpu-fast: the shipped cpu's probes, flagged on a loaded machine, waited up to 60 s for
    # a quieter moment, tests/conftest.py)
    args = ["predict", "--device", "cpu-fast", "--onnx", path, "--kernel-budget", "0"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "1 loop(s) that run until their body's own condition stops them" in err
    assert "e+" not in out.split("ms")[0], out  # no astronomical latency
    assert main(["predict", "--device", "pixel3", "--onnx", path]) == 0
    assert "(Loop x1)" in capsys.readouterr().err
