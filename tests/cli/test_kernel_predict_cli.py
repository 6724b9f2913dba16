"""`hwnas predict --device cpu --onnx`: the kernel-level predictor against `hwnas measure` on
well-known networks (channel shuffle, grouped convolutions), its warning on a model unlike
any it knows, and ONNX models on a recorded phone whatever --space says."""

from __future__ import annotations

import re

import pytest

from hwnas.cli import main
from hwnas.measure import network_workload

PROFILE = """\
name: cpu-kernels
kind: local
class: cpu
description: this machine's CPU, ONNX Runtime, 1 thread (kernel-level tests)
runtime: ort
timing: {warmup: 5, rounds: 5, calls_per_round: 10, threads: 1, max_cv: none}
"""
"""A short protocol (5 warm-up calls, 5 rounds of 10, median of round medians) that never
flags: these tests compare a prediction with a measurement taken the same way."""

LINE = re.compile(
    r"^(?P<label>\S+): (?P<ms>[\d.e+-]+) ms \(std (?P<std>[\d.e+-]+) ms; 90% interval "
    r"(?P<lo>[\d.e+-]+)-(?P<hi>[\d.e+-]+) ms\)$"
)


def run(args, capsys):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def measured_ms(out: str, label: str) -> float:
    row = next(line for line in out.splitlines() if label in line and "│" in line)
    return float(row.split("│")[2])


@pytest.fixture
def device(hwnas_home):
    from hwnas.devices import reload_profiles

    (hwnas_home / "devices" / "cpu-kernels.yaml").write_text(PROFILE)
    reload_profiles()
    return "cpu-kernels"


@pytest.mark.alone
@pytest.mark.parametrize(
    ("name", "side", "width"),
    [("shufflenet_v2", 96, 0.5), ("resnext50", 32, 0.375)],  # channel shuffle; 32 groups
)
def test_an_uncalibrated_prediction_holds_the_measurement_in_its_interval(
    name, side, width, device, tmp_path, capsys
):
    """The kernel-level prediction before any calibration network is measured (kernels timed
    alone, the correction's prior) against the whole network measured the same way, once
    before and twice after it: the 90% interval holds the measurement, and a second prediction
    times nothing and says the same. How close the prediction comes is a benchmark, not a test
    (``experiments/kernel_latency.py --small``): on the reference CPU 6-10%, on a shared 2-core
    VM whole networks took 0.84-2.48 times their kernel sum (1.48 at the median), which is
    what the prior's interval allows for. The test runs while no other test runs (marker
    ``alone``): load only adds time to a measurement, and more to a whole network than to a
    kernel of microseconds, so the truth is the fastest of the three; a burst of load from
    outside the suite can still fall on all three, so the comparison is taken afresh up to 5
    times (new stores: nothing is reused), after a wait for a quieter moment
    (hwnas.measure.wait_for_quiet, at most 10 s) when one missed: an interval that is too
    narrow, or a prediction that is off, misses in all of them."""
    import time

    from hwnas.measure import wait_for_quiet

    model = tmp_path / f"{name}.onnx"
    model.write_bytes(network_workload(name, side=side, width=width).onnx_bytes())
    attempts = []
    for attempt in range(5):
        if attempt:
            wait_for_quiet(time.monotonic() + 10)
        store = tmp_path / f"kernels{attempt}.db"
        measured = []
        for k in range(3):
            if k == 1:
                code, out, err = run(["predict", "--device", device, "--onnx", model,
                                      "--store", store], capsys)  # fmt: skip
                assert code == 0, err
                m = LINE.match(out.strip().splitlines()[0])
                assert m is not None and m["label"] == str(model), out
                assert "predictor kernel (kernel-level" in err and "kernel(s) timed now" in err
                assert "not calibrated on cpu-kernels" in err, err
                # minutes of timing on a new device are a step (silent before): its lines
                assert f"kernel-level prediction on {device}: 1/1 models (100%), done in" in err
            whole = tmp_path / f"whole{attempt}-{k}.db"
            code, out, err = run(
                ["measure", "--device", device, "--onnx", model, "--store", whole], capsys
            )
            assert code == 0, err
            measured.append(measured_ms(out, model.name))
        y = min(measured)
        pred, lo, hi = float(m["ms"]), float(m["lo"]), float(m["hi"])
        assert lo < pred < hi
        attempts.append((lo, pred, hi, measured))
        if lo <= y <= hi:
            break
    else:
        pytest.fail(f"(low, ms, high, measured ms): the interval missed in every attempt: "
                    f"{attempts}")  # fmt: skip
    # every kernel is in the store now: predicting again times nothing
    code, out, err = run(["predict", "--device", device, "--onnx", model, "--store",
                          store], capsys)  # fmt: skip
    assert code == 0 and "0 kernel(s) timed now" in err, err
    assert float(LINE.match(out.strip())["ms"]) == pytest.approx(pred, rel=1e-9)


@pytest.mark.alone
@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_nothing_timed_yet_the_interval_still_holds_the_measurement(name, device, tmp_path, capsys):
    """A fresh home and ``--kernel-budget 0``: no kernel type was ever timed, so every kernel is
    guessed from its work (multiply-accumulates or elements) at the reference CPU's rates
    scaled by this device's speed on two probe kernels (timed once, like the call overhead).
    The 90% interval is wide but holds the network as measured, and the guess is within 3x
    (convolutions guessed at 1 ns per multiply-accumulate made RegNetX-200MF 58x too slow,
    interval and all; at the reference CPU's rates unscaled, a shared VM 3.5 times slower saw
    mobilenet_v2 measured above the interval)."""
    model = tmp_path / f"{name}.onnx"
    model.write_bytes(network_workload(name, side=64, width=0.5).onnx_bytes())
    store = tmp_path / "kernels.db"
    code, out, err = run(["predict", "--device", device, "--onnx", model, "--kernel-budget", "0",
                          "--store", store], capsys)  # fmt: skip
    assert code == 0 and "0 kernel(s) timed now" in err and "too few to fit" in err, err
    m = LINE.match(out.strip())
    code, out, err = run(["measure", "--device", device, "--onnx", model, "--store",
                          tmp_path / "whole.db"], capsys)  # fmt: skip
    assert code == 0, err
    y = measured_ms(out, model.name)
    assert float(m["lo"]) <= y <= float(m["hi"]), (m.groupdict(), y)
    assert 1 / 3 < float(m["ms"]) / y < 3, (m.groupdict(), y)


def _odd_model(path):
    """A recurrent network (an LSTM of 128 units over 64 steps, about 0.2 ms here): no kernel
    of its kind was ever timed."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    hidden, feats, steps = 128, 64, 64
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((1, 4 * hidden, feats)).astype(np.float32), "W")
    r = numpy_helper.from_array(
        rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32), "R"
    )
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [steps, 1, feats])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [steps, 1, 1, hidden])
    node = helper.make_node("LSTM", ["x", "W", "R"], ["y"], hidden_size=hidden)
    m = helper.make_model(helper.make_graph([node], "lstm", [x], [y], [w, r]),
                          opset_imports=[helper.make_opsetid("", 17)])  # fmt: skip
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())
    return path


def test_warning_on_a_model_unlike_any_seen(device, tmp_path, capsys):
    """With no kernel to time (--kernel-budget 0) a model whose kernels no regressor covers is
    guessed: one warning line and a wide interval that holds the timed value; once its kernel
    is timed, no warning and a narrower interval."""
    odd = _odd_model(tmp_path / "lstm.onnx")
    store = tmp_path / "kernels.db"
    code, out, err = run(["predict", "--device", device, "--onnx", odd, "--kernel-budget", "0",
                          "--store", store], capsys)  # fmt: skip
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and f"{odd}: unlike the networks" in warnings[0], err
    assert "too few to fit (LSTM)" in warnings[0] and "interval widened" in warnings[0]
    m = LINE.match(out.strip())
    assert float(m["std"]) >= 0.3 * float(m["ms"])
    code, out, err = run(["predict", "--device", device, "--onnx", odd, "--store", store], capsys)
    assert code == 0 and "1 kernel(s) timed now" in err and "warning: " not in err, err
    m2 = LINE.match(out.strip())
    # narrower relative to the prediction (the guess may be far off: an absolute std compares
    # a guessed microsecond with a timed one; a 2.5 us LSTM's timing spread on a loaded CI
    # machine once exceeded the guess's absolute std)
    assert float(m2["std"]) / float(m2["ms"]) < float(m["std"]) / float(m["ms"])
    # the guess was honest: its 90% interval holds what the timed kernel gives (an LSTM reads
    # its weights; a guess from its activations alone was 20x too low, interval and all)
    assert float(m["lo"]) <= float(m2["ms"]) <= float(m["hi"]), (m.groupdict(), m2.groupdict())


def test_onnx_on_a_recorded_phone_does_not_depend_on_space(tmp_path, capsys):
    """A recorded phone cannot time kernels: the meta-learned predictor is the fallback (said
    so), chosen by the model, not by --space; a space the phone has no values for gets a
    suggestion that works."""
    model = tmp_path / "shuffle.onnx"
    model.write_bytes(network_workload("shufflenet_v2", side=64, width=0.5).onnx_bytes())
    answers = set()
    for space in ("nasbench201", "fbnet", "ofa"):
        code, out, err = run(["predict", "--device", "pixel3", "--space", space, "--onnx", model],
                             capsys)  # fmt: skip
        assert code == 0, err
        assert "fallback: pixel3 cannot run models" in err
        answers.add(out)
    assert len(answers) == 1
    code, _out, err = run(["predict", "--device", "pixel3", "--space", "ofa", "--arch", "0"],
                          capsys)  # fmt: skip
    assert code == 2 and "use --space nasbench201|fbnet" in err, err
    code, _out, err = run(["predict", "--device", "pixel3", "--space", "fbnet", "--arch", "0"],
                          capsys)  # fmt: skip
    assert code == 0, err


def test_cost_kernel_where_no_kernel_can_be_timed_is_refused_before_any_work(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["search", "--strategy", "oneshot", "--space", "nasbench201", "--device", "pixel3"]
    code, _out, err = run([*args, "--set", "cost=kernel", "--out", out], capsys)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "cost=kernel times ONNX Runtime kernels; device 'pixel3'" in lines[0]
    assert not out.exists()


@pytest.mark.parametrize(
    ("kind", "shape"),
    [("Conv1d", (1, 8, 400)), ("Conv3d", (1, 3, 8, 16, 16))],
)
def test_one_and_three_dimensional_convolutions_are_predicted(kind, shape, device, tmp_path,
                                                              capsys):  # fmt: skip
    """An audio network (Conv1d) and a video network (Conv3d) get a kernel-level prediction
    with an interval, from their own kernels timed alone, and are measured whole. (main:
    "cannot infer the shapes of Conv node", exit 2.) The prediction against the measurement
    is a benchmark; a factor of 3 here catches a convolution read as nothing."""
    import torch
    from torch import nn

    conv = getattr(nn, kind)
    net = nn.Sequential(conv(shape[1], 32, 3), nn.ReLU(), conv(32, 32, 3, padding=1))
    model = tmp_path / f"{kind}.onnx"
    torch.onnx.export(net.eval(), torch.randn(*shape), str(model), dynamo=False)
    code, out, err = run(["predict", "--device", device, "--onnx", model, "--store",
                          tmp_path / "kernels.db"], capsys)  # fmt: skip
    assert code == 0 and "kernel(s) timed now" in err, err
    m = LINE.match(out.strip().splitlines()[0])
    assert m is not None and float(m["lo"]) < float(m["ms"]) < float(m["hi"]), out
    code, out, err = run(["measure", "--device", device, "--onnx", model, "--store",
                          tmp_path / "whole.db"], capsys)  # fmt: skip
    assert code == 0, err
    assert 1 / 3 < float(m["ms"]) / measured_ms(out, model.name) < 3, (m.groupdict(), out)
