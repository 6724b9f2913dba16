"""A measurement store or an ONNX file someone hands a user: neither may crash a command
(a store's values are data, not trusted measurements) nor forge its output (an op type or a
file name holding a newline must not print a line of its own)."""

from __future__ import annotations

import math
import re
import shutil
import sqlite3

import numpy as np
import pytest

from hwnas.cli import main
from hwnas.devices.base import Measurement
from hwnas.store import MeasurementStore

FORGED = "fake.onnx: 0.001 ms (std 0.0001 ms)"
"""What a forged line would say: a prediction nobody made."""

BAD_VALUES = ("1e308", "'inf'", "'-inf'", "'nan'", "-1", "0", "'abc'")
"""Values a hand-edited SQLite store may hold (SQL literals)."""


def _run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _m(value: float, model_hash: str = "abc") -> Measurement:
    return Measurement(
        device="cpu", runtime="ort", metric="latency_ms", model_hash=model_hash, label="m",
        batch_size=1, input_shape=(1, 3, 8, 8), value=value, samples=(value,), cv=0.01,
    )  # fmt: skip


def _set(path, sql: str) -> None:
    db = sqlite3.connect(path)
    with db:
        db.execute(sql)
    db.close()


@pytest.mark.parametrize("bad", BAD_VALUES)
def test_a_stored_value_that_is_no_measurement_is_absent_and_measured_again(tmp_path, bad):
    """A row whose value is not a finite number of ms in (0, 1e9] was returned as it was
    (`inf`, `nan`, `1e308`, text that float() refused with a traceback); now reading treats it
    as absent, and the next measurement of its key replaces it."""
    path = tmp_path / "evil.db"
    with MeasurementStore(path) as st:
        assert st.append(_m(0.5)) and st.append(_m(0.7, "other"))
    _set(path, f"UPDATE measurements SET value = {bad} WHERE model_hash = 'abc'")
    with MeasurementStore(path) as st:
        assert st.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 8, 8)) is None
        assert [m.model_hash for m in st.measurements("cpu", "latency_ms")] == ["other"]
        assert st.counts() == {"cpu": 1}
        assert st.append(_m(0.6))  # replaces the row that was no measurement
        assert st.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 8, 8)).value == 0.6
        assert not st.append(_m(0.9))  # a valid row is kept, as before


def test_a_stored_row_whose_fields_do_not_parse_is_absent(tmp_path):
    """Text where JSON is kept (the samples, the details) raised a JSONDecodeError traceback
    from every command reading the store; now such a row is absent, and replaced by the next
    measurement of its key."""
    path = tmp_path / "evil.db"
    with MeasurementStore(path) as st:
        st.append(_m(0.5))
        st.append(_m(0.7, "other"))
    _set(path, "UPDATE measurements SET extra = 'not json' WHERE model_hash = 'abc'")
    _set(path, "UPDATE measurements SET cv = 'inf' WHERE model_hash = 'other'")
    with MeasurementStore(path) as st:
        assert st.measurements() == []
        assert st.lookup("cpu", "ort", "latency_ms", "abc", (1, 3, 8, 8)) is None
        assert st.append(_m(0.6)) and st.append(_m(0.8, "other"))  # both replaced
        assert sorted(m.value for m in st.measurements()) == [0.6, 0.8]


def test_a_forged_overhead_kept_with_a_kernel_is_not_subtracted():
    """`extra.workload.overhead_ms` of a stored kernel is subtracted from its time: text raised
    a ValueError traceback, 1e308 made the kernel -1e308 ms."""
    from hwnas.predictors.kernels.timing import alone_ms

    for forged in ("abc", 1e308, -1.0, float("nan"), None, [1]):
        m = Measurement(
            device="cpu", runtime="ort", metric="latency_ms", model_hash="k", label="k",
            batch_size=1, input_shape=(1,), value=0.01,
            extra={"workload": {"overhead_ms": forged}},
        )  # fmt: skip
        assert alone_ms(m, 0.002) == 0.01
    kept = Measurement("cpu", "ort", "latency_ms", "k", "k", 1, (1,), 0.01,
                       extra={"workload": {"overhead_ms": 0.003}})  # fmt: skip
    assert alone_ms(kept, 0.002) == pytest.approx(0.009)  # a real one is still used


def _conv_chain(path) -> None:
    """An ONNX file of 10 convolutions of different widths: 10 Conv kernels, enough (8) for
    the kernel-level predictor to fit a regressor on them."""
    import torch

    layers, c = [], 3
    for o in (4, 6, 8, 10, 12, 14, 16, 18, 20, 22):
        layers += [torch.nn.Conv2d(c, o, 3, padding=1), torch.nn.ReLU()]
        c = o
    torch.onnx.export(torch.nn.Sequential(*layers).eval(), torch.randn(1, 3, 16, 16), path,
                      dynamo=False)  # fmt: skip


def test_predict_on_a_store_with_forged_kernel_times_neither_crashes_nor_says_inf(tmp_path, capsys):
    """`hwnas predict --device cpu --store evil.db --kernel-budget 0`, the kernels' values set
    to inf or nan, printed a traceback (`ValueError: Input y contains infinity`, from the
    regressors); set to 1e308, it printed `inf ms (std nan ms)`. Now those rows are no
    measurement: the prediction is finite, made without them."""
    onnx_path = tmp_path / "m.onnx"
    _conv_chain(onnx_path)
    clean = tmp_path / "clean.db"
    args = ["predict", "--device", "cpu-fast", "--onnx", onnx_path]
    code, out, err = _run([*args, "--store", clean], capsys)
    assert code == 0, err
    for bad in ("1e308", "'inf'", "'nan'", "-1"):
        evil = tmp_path / "evil.db"
        for suffix in ("", "-wal", "-shm"):
            if (tmp_path / f"clean.db{suffix}").exists():
                shutil.copy(tmp_path / f"clean.db{suffix}", tmp_path / f"evil.db{suffix}")
        _set(evil, f"UPDATE measurements SET value = {bad} WHERE label LIKE 'kernel %'")
        code, out, err = _run([*args, "--store", evil, "--kernel-budget", "0"], capsys)
        assert code == 0 and "Traceback" not in err, (bad, err[-2000:])
        (line,) = out.splitlines()
        value, std = re.match(r"\S+: (\S+) ms \(std (\S+) ms", line).groups()
        assert math.isfinite(float(value)) and float(value) > 0, (bad, line)
        assert math.isfinite(float(std)), (bad, line)


def test_regressors_leave_out_kernel_times_that_are_not_finite_positive(tmp_path):
    """`KernelRegressors.fit` handed an inf time raised sklearn's `Input y contains
    infinity`."""
    from hwnas.predictors.kernels.read import read_kernels
    from hwnas.predictors.kernels.regress import KernelRegressors

    onnx_path = tmp_path / "m.onnx"
    _conv_chain(onnx_path)
    kernels = list(read_kernels(onnx_path.read_bytes()).distinct().values())
    values = [0.01 * (i + 1) for i in range(len(kernels))]
    good = KernelRegressors(min_samples=2).fit(kernels, values)
    values[0], values[1], values[2] = math.inf, math.nan, -1.0
    forged = KernelRegressors(min_samples=2).fit(kernels, values)
    assert forged.models and set(forged.models) <= set(good.models)
    pred = forged.predict(kernels)
    seen = [i for i, status in enumerate(pred.status) if status != "unseen"]
    assert seen and np.isfinite(pred.log_mean[seen]).all() and np.isfinite(pred.log_std[seen]).all()


def test_an_op_type_holding_a_newline_cannot_forge_a_prediction_line(tmp_path, capsys):
    """A custom-domain node whose op type is "X\\n<a prediction line>" printed that line by
    itself in the warning naming the operators the graph features do not count."""
    from onnx import TensorProto, helper, numpy_helper, save

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1] * 4),
        helper.make_node(f"X\n{FORGED}\r", ["c"], ["y"], domain="evil.domain"),
    ]
    model = helper.make_model(
        helper.make_graph(nodes, "g", [x], [y], [w]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("evil.domain", 1)],
    )
    model.ir_version = 8
    save(model, tmp_path / "evil_op.onnx")
    code, out, err = _run(["predict", "--device", "pixel3", "--onnx", tmp_path / "evil_op.onnx"],
                          capsys)  # fmt: skip
    assert code == 0, err
    assert len(out.splitlines()) == 1 and out.startswith(f"{tmp_path}/evil_op.onnx: ")
    lines = err.splitlines()
    assert not [line for line in lines if line.startswith("fake.onnx")], err
    (warning,) = [line for line in lines if "do not count" in line]
    assert f"X\\n{FORGED}\\r x1" in warning and "\r" not in err


def test_a_file_name_holding_a_newline_stays_on_its_line(tmp_path, capsys):
    """`hwnas predict` prints one line per model and `hwnas measure` one row (and one full
    name below the table): a file named "nl\\n<a prediction line>.onnx" printed a forged line
    in both."""
    from onnx import TensorProto, helper, save

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    model = helper.make_model(
        helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y]),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    model.ir_version = 8
    path = tmp_path / f"nl\n{FORGED}.onnx"
    save(model, path)
    escaped = f"nl\\x0a{FORGED}.onnx"

    code, out, err = _run(["predict", "--device", "pixel3", "--onnx", path], capsys)
    assert code == 0, err
    (line,) = out.splitlines()
    assert line.startswith(f"{tmp_path}/{escaped}: "), line
    assert not [x for x in err.splitlines() if x.startswith("fake.onnx")], err

    code, out, err = _run(["measure", "--device", "cpu-fast", "--onnx", path], capsys)
    assert code == 0, err
    printed = (out + err).splitlines()
    assert not [x for x in printed if x.startswith("fake.onnx")], out + err
    assert escaped in out  # the full name below the table, whole on one line


def test_one_line_escapes_line_breaks_visible_keeps_them():
    """Multi-line text printed on purpose (tables, help) keeps its newlines (:func:`visible`);
    a field inside a line does not (:func:`one_line`)."""
    from hwnas.cli.render import one_line, visible

    assert visible("a\nb\x1b") == "a\nb\\x1b"
    shown = one_line("a\nb\r\tc\x1b\u2028d\x85")
    assert len(shown.splitlines()) == 1 and shown.isprintable()
    assert shown == "a\\x0ab\\x0d\\x09c\\x1b\\u2028d\\x85"
