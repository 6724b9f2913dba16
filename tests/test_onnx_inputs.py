"""Models that are not one float image: token ids, masks, several inputs, weights in external
data files. hwnas refused every one ("hwnas times models with one float32 input") and could not
read a model saved by ``torch.onnx.export``'s default exporter with its weights beside it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hwnas
from hwnas.errors import HwnasError
from hwnas.onnx_inputs import feeds, model_inputs
from tests.helpers import hwnas_main

VOCAB, SEQ, WIDTH = 500, 16, 8


def text_model(batch: int | str = "batch", seq: int | str = SEQ) -> onnx.ModelProto:
    """A tiny text classifier as exporters write one: input_ids (int64, cast to int32 before
    the embedding's Gather), an attention mask (int64) weighting the mean, a float output."""
    rng = np.random.default_rng(0)
    emb = numpy_helper.from_array(rng.standard_normal((VOCAB, WIDTH)).astype(np.float32), "emb")
    head = numpy_helper.from_array(rng.standard_normal((WIDTH, 2)).astype(np.float32), "head")
    axes = numpy_helper.from_array(np.array([2], np.int64), "axes")
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids32"], to=TensorProto.INT32),
        helper.make_node("Gather", ["emb", "ids32"], ["x"]),
        helper.make_node("Cast", ["attention_mask"], ["m"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["m", "axes"], ["m3"]),
        helper.make_node("Mul", ["x", "m3"], ["xm"]),
        helper.make_node("ReduceMean", ["xm"], ["pooled"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["pooled", "head"], ["logits"]),
    ]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, [batch, seq])
              for n in ("input_ids", "attention_mask")]  # fmt: skip
    out = helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 2])
    graph = helper.make_graph(nodes, "text", inputs, [out], [emb, head, axes])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_token_ids_spread_over_the_vocabulary_and_a_mask_keeps_every_position():
    specs = model_inputs(text_model(), batch_size=3)
    assert [(s.name, s.shape, s.dtype, s.high) for s in specs] == [
        ("input_ids", (3, SEQ), "int64", VOCAB),  # found through the Cast
        ("attention_mask", (3, SEQ), "int64", None),
    ]
    fed = feeds(specs)
    ids = fed["input_ids"]
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < VOCAB
    assert len(np.unique(ids)) > SEQ  # spread over the table, not one row
    assert (fed["attention_mask"] == 1).all()
    np.testing.assert_array_equal(feeds(specs)["input_ids"], ids)  # the same every time


def test_image_inputs_of_other_types_get_values_of_their_type():
    x8 = helper.make_tensor_value_info("img", TensorProto.UINT8, [1, 3, 4, 4])
    flag = helper.make_tensor_value_info("flag", TensorProto.BOOL, [])
    half = helper.make_tensor_value_info("h", TensorProto.FLOAT16, [2])
    y = helper.make_tensor_value_info("y", TensorProto.UINT8, [1, 3, 4, 4])
    graph = helper.make_graph([helper.make_node("Identity", ["img"], ["y"])], "g",
                              [x8, flag, half], [y])  # fmt: skip
    fed = feeds(model_inputs(helper.make_model(graph)))
    assert fed["img"].dtype == np.uint8 and fed["img"].max() > 100  # the whole range
    assert fed["flag"].shape == () and fed["flag"].dtype == bool and bool(fed["flag"])
    assert fed["h"].dtype == np.float16


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (text_model(seq="sequence"), "input 'input_ids' axis 1 is dynamic ('sequence')"),
        (helper.make_model(helper.make_graph(
            [helper.make_node("Identity", ["s"], ["y"])], "g",
            [helper.make_tensor_value_info("s", TensorProto.STRING, [1])],
            [helper.make_tensor_value_info("y", TensorProto.STRING, [1])])),
         "input 's' is string; hwnas feeds inputs of type float, float16"),
    ],
)  # fmt: skip
def test_inputs_hwnas_cannot_feed_are_named(model, expected):
    with pytest.raises(HwnasError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        model_inputs(model, "m.onnx")


def test_a_text_model_is_measured_and_predicted_through_the_cli(tmp_path):
    """Measured by ONNX Runtime at --batch-size 2 (the mask takes the batch too), and predicted
    kernel by kernel: the embedding's Gather is a kernel fed token ids (it was bookkeeping,
    as the ids are not float)."""
    from hwnas.predictors.kernels.read import read_kernels

    path = tmp_path / "text.onnx"
    onnx.save(text_model(), path)
    r = hwnas_main("measure", "--device", "cpu-fast", "--onnx", str(path), "--batch-size", "2",
                   "--store", str(tmp_path / "m.db"), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "text.onnx" in r.stdout and "1 measured" in r.stdout
    kernels = read_kernels(path.read_bytes(), (1, SEQ)).kernels
    gather = next(k for k in kernels if k.op == "Gather")
    assert [(t.dtype, t.role) for t in gather.inputs] == [("float32", "w"), ("int32", "x")]
    assert gather.outputs == ((1, SEQ, WIDTH),)
    r = hwnas_main("predict", "--device", "cpu-fast", "--onnx", str(path),
                   "--store", str(tmp_path / "m.db"), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"{path}: " in r.stdout and " ms (std " in r.stdout


def test_predict_names_the_file_onnx_runtime_cannot_load_among_several(tmp_path):
    """``hwnas predict --onnx good.onnx --onnx custom.onnx`` said only "ONNX Runtime cannot
    load the model", after timing the good file's kernels; now every file is read before any
    kernel is timed, and the error names the one that failed."""
    good, bad = tmp_path / "text.onnx", tmp_path / "custom.onnx"
    onnx.save(text_model(), good)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    node = helper.make_node("MyOp", ["x"], ["y"], domain="com.example")
    model = helper.make_model(
        helper.make_graph([node], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
    )
    model.ir_version = 8
    onnx.save(model, bad)
    r = hwnas_main("predict", "--device", "cpu-fast", "--onnx", str(good), "--onnx", str(bad),
                   "--store", str(tmp_path / "m.db"), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"error: {bad}: ONNX Runtime cannot load the model"), r.stderr
    assert "Traceback" not in r.stderr


def test_weights_in_an_external_data_file_are_read_with_the_model(tmp_path):
    """``torch.onnx.export`` saves large models as model.onnx plus model.onnx.data: hwnas
    loaded the graph's bytes alone and ONNX Runtime could not find the weights."""
    folder = tmp_path / "export"
    folder.mkdir()
    onnx.save(text_model(), folder / "text.onnx", save_as_external_data=True,
              location="text.onnx.data", size_threshold=0)  # fmt: skip
    assert (folder / "text.onnx.data").stat().st_size > VOCAB * WIDTH * 4
    r = hwnas_main("measure", "--device", "cpu-fast", "--onnx", "export/text.onnx",
                   "--store", str(tmp_path / "m.db"), cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    (folder / "text.onnx.data").rename(tmp_path / "text.onnx.data")
    r = hwnas_main("measure", "--device", "cpu-fast", "--onnx", "export/text.onnx",
                   "--store", str(tmp_path / "m.db"), cwd=tmp_path)  # fmt: skip
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "text.onnx.data" in lines[0], r.stderr
    assert "which is not beside it" in lines[0] and "corrupt" not in lines[0]  # not "invalid"
    # a data file outside the model's folder is not read, whatever the model says
    model = onnx.load(folder / "text.onnx", load_external_data=False)
    for t in model.graph.initializer:
        next(e for e in t.external_data if e.key == "location").value = "../text.onnx.data"
    onnx.save(model, folder / "text.onnx")
    r = hwnas_main("measure", "--device", "cpu-fast", "--onnx", "export/text.onnx",
                   "--store", str(tmp_path / "m.db"), cwd=tmp_path)  # fmt: skip
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "points outside" in lines[0], r.stderr


def test_a_dynamic_sequence_is_fixed_by_its_name(tmp_path):
    """Text models are exported with dynamic batch and sequence axes (``sequence_length``):
    ``--dim sequence_length=N`` fixes the sequence in every input; a name the model does not
    have, or a value that is not NAME=SIZE, is one line before any work."""
    path = tmp_path / "text.onnx"
    onnx.save(text_model(seq="sequence_length"), path)
    store = ["--store", str(tmp_path / "m.db")]
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", path, *store)
    assert r.returncode == 2 and "give its size with --dim sequence_length=N" in r.stderr
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", path, "--dim", "seq=8", *store)
    assert r.returncode == 2, r.stderr
    assert (
        "--dim seq: no input axis of the ONNX model(s) is named 'seq' (their dynamic axes: "
        "batch, sequence_length)" in r.stderr
    )
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", path, "--dim", "seq", *store)
    assert r.returncode == 2 and "'seq' is not NAME=SIZE" in r.stderr
    short, long = (
        hwnas.measure(path, device="cpu-fast", dims={"sequence_length": n},
                      store=tmp_path / "m.db")[0]
        for n in (8, 512)
    )  # fmt: skip
    assert short.latency.model_hash != long.latency.model_hash  # two sizes, two measurements
    assert (short.label, long.label) == ("text.onnx (sequence_length=8)",
                                         "text.onnx (sequence_length=512)")  # fmt: skip
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", path, "--dim", "sequence_length=8",
                   *store)  # fmt: skip
    assert r.returncode == 0 and "0 measured, 1 from the store" in r.stdout, r.stderr
    (p,) = hwnas.predict(path, device="cpu-fast", dims={"sequence_length": 8},
                         store=tmp_path / "m.db")  # fmt: skip
    assert p.low < p.value < p.high
    with pytest.raises(HwnasError, match="not an axis name and an integer size"):
        hwnas.predict(path, device="cpu-fast", dims={"sequence_length": "8"})


def test_a_batch_axis_named_by_dim_is_the_batch_size(tmp_path):
    """``hwnas measure --dim batch=4`` and ``--batch-size 4`` time the same workload, taken
    once (they were two store keys, the model measured twice); both, disagreeing, are one line
    before any work."""
    path = tmp_path / "text.onnx"
    onnx.save(text_model(batch="batch"), path)
    store = ["--store", str(tmp_path / "m.db")]
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", path, "--batch-size", "4", *store)
    assert r.returncode == 0 and "1 measured, 0 from the store" in r.stdout, r.stderr
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", path, "--dim", "batch=4", *store)
    assert r.returncode == 0 and "0 measured, 1 from the store" in r.stdout, r.stderr
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", path, "--dim", "batch=4",
                   "--batch-size", "2", *store)  # fmt: skip
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "--dim batch=4 names the batch axis, which --batch-size 2 sets too" in lines[0]
    (m,) = hwnas.measure(path, device="cpu-fast", dims={"batch": 4}, store=tmp_path / "m.db")
    assert m.how.startswith("from store"), m.how  # the Python API too


def test_an_archs_file_of_text_models_takes_the_dims_too(tmp_path):
    """``hwnas predict --archs`` rows may be ONNX files: ``--dim`` fixes their dynamic axes as
    it does --onnx's (it was refused: "give its size with --dim" with --dim given), and a
    name none of the rows has is one line before any work."""
    onnx.save(text_model(seq="sequence_length"), tmp_path / "text.onnx")
    (tmp_path / "archs.csv").write_text("arch\ntext.onnx\n")
    out = tmp_path / "pred.csv"
    args = ["predict", "-d", "cpu-fast", "--archs", tmp_path / "archs.csv", "--out", out,
            "--store", tmp_path / "m.db"]  # fmt: skip
    r = hwnas_main(*args, "--dim", "seq=8")
    assert r.returncode == 2 and "no input axis of the ONNX model(s) is named 'seq'" in r.stderr
    assert not out.exists()
    r = hwnas_main(*args, "--dim", "sequence_length=8")
    assert r.returncode == 0, r.stderr
    rows = out.read_text().splitlines()
    assert rows[0].startswith("arch,") and rows[1].startswith("text.onnx,") and len(rows) == 2
    assert float(rows[1].split(",")[1]) > 0


def test_a_float16_model_is_read_kernel_by_kernel():
    """ONNX Runtime runs a float16 LayerNormalization natively on the CPU: it is a kernel of
    float16 data (it was counted as a shape-only node: only float32 tensors were data), and
    the Casts ONNX Runtime puts around float32-only operators are kernels too."""
    from hwnas.predictors.kernels.read import read_kernels

    scale = numpy_helper.from_array(np.ones(64, np.float16), "scale")
    nodes = [helper.make_node("LayerNormalization", ["x", "scale"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]  # fmt: skip
    half = [1, 64, 64]
    graph = helper.make_graph(nodes, "half",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, half)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, half)],
                              [scale])  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    mk = read_kernels(model.SerializeToString())
    assert mk.bookkeeping == 0
    norm = next(k for k in mk.kernels if k.op == "LayerNormalization")
    assert norm.inputs[0].dtype == "float16" and norm.inputs[0].role == "x"
    assert [k.op for k in mk.kernels].count("Cast") == 2  # around the float32 Relu


def test_an_unnamed_dynamic_axis_is_given_by_input_and_position(tmp_path):
    """An input [1, 3, ?, ?] whose dynamic axes have no name could not be given a size: the
    error said to export the model again. `--dim X:2=N` names such an axis now; a negative
    size gets the same line as 0."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    g = h.make_graph([h.make_node("Relu", ["X"], ["Y"])], "g",
                     [h.make_tensor_value_info("X", T.FLOAT, [1, 3, None, None])],
                     [h.make_tensor_value_info("Y", T.FLOAT, [1, 3, None, None])])  # fmt: skip
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", str(path))
    assert r.returncode == 2 and "give their sizes with --dim X:2=N --dim X:3=N" in r.stderr
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", str(path), "--dim", "X:2=16",
                   "--dim", "X:3=8")  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", str(path), "--dim", "X:2=-3")
    assert r.returncode == 2 and "--dim X:2=-3: the size must be at least 1" in r.stderr
    from hwnas.onnx_inputs import dynamic_dims, fix_dims, model_inputs

    assert dynamic_dims(m) == ["X:2", "X:3"]
    assert fix_dims(m, {"X:2": 16, "X:3": 8}) == ["X:2=16", "X:3=8"]
    assert model_inputs(m)[0].shape == (1, 3, 16, 8)


def test_a_named_dynamic_axis_is_given_by_input_and_position_too(tmp_path):
    """torch.onnx.export's list form (dynamic_axes={"X": [0, 2, 3]}) names the axes
    X_dynamic_axes_2 and _3: `--dim X:2=64`, the documented form, was refused ("no input axis
    is named 'X:2'"), and the error without --dim named axis 2 alone (helper-79)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    from hwnas.onnx_inputs import check_dims, fix_dims, model_inputs

    x = h.make_tensor_value_info("X", T.FLOAT, ["X_dynamic_axes_1", 3, "X_dynamic_axes_2",
                                                "X_dynamic_axes_3"])  # fmt: skip
    y = h.make_tensor_value_info("Y", T.FLOAT, ["X_dynamic_axes_1", 3, "X_dynamic_axes_2",
                                                "X_dynamic_axes_3"])  # fmt: skip
    g = h.make_graph([h.make_node("Relu", ["X"], ["Y"])], "g", [x], [y])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", str(path))
    assert r.returncode == 2, r.stderr
    assert "--dim X_dynamic_axes_2=N --dim X_dynamic_axes_3=N" in r.stderr, r.stderr
    check_dims([path], {"X:2": 16, "X:3": 8})  # no error: the same axes
    assert fix_dims(m, {"X:2": 16, "X:3": 8}) == ["X_dynamic_axes_2=16", "X_dynamic_axes_3=8"]
    assert model_inputs(m)[0].shape == (1, 3, 16, 8)
    r = hwnas_main("measure", "-d", "cpu-fast", "--onnx", str(path), "--dim", "X:2=16",
                   "--dim", "X:3=8")  # fmt: skip
    assert r.returncode == 0, r.stderr
