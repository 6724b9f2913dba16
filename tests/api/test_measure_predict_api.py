"""``hwnas.measure(...)`` and ``hwnas.predict(...)``: ``hwnas measure`` / ``hwnas predict`` as
functions (issue 22): the same store, the same values, the same one-line errors."""

from __future__ import annotations

import pytest
from helpers import hwnas_main

import hwnas

ARCH = (
    "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|"
    "nor_conv_3x3~2|"
)


def test_measure_from_python_shares_the_clis_store():
    """...and leaves the caller's torch generator as it was: the export's seed reseeded it, so
    every draw after a measurement was the same whatever the caller's own seed."""
    import torch

    torch.manual_seed(1234)
    state = torch.get_rng_state()
    first = hwnas.measure(ARCH, device="cpu-fast")
    assert torch.equal(torch.get_rng_state(), state)
    assert [m.label for m in first] == [ARCH] and first[0].how.startswith("measured")
    assert first[0].latency.value > 0 and first[0].latency.source.startswith("measured:cpu-fast")
    assert hwnas.measure([ARCH], device="cpu-fast")[0].how.startswith("from store")
    cli = hwnas_main("measure", "--device", "cpu-fast", "--arch", ARCH)
    assert cli.returncode == 0, cli.stderr
    assert "0 measured, 1 from the store" in cli.stdout
    assert f"{first[0].latency.value:.4f}" in cli.stdout


def test_predict_from_python_gives_the_clis_prediction():
    (p,) = hwnas.predict([ARCH], device="pixel3")
    assert p.metric == "latency_ms" and p.value > 0 and p.std > 0
    cli = hwnas_main("predict", "--device", "pixel3", "--arch", ARCH)
    assert cli.returncode == 0, cli.stderr
    # the meta-learned prediction's 90% interval: mean +- 1.645 std, in Python and printed
    assert p.low == pytest.approx(max(p.value - 1.645 * p.std, 0), rel=1e-3)
    assert p.high == pytest.approx(p.value + 1.645 * p.std, rel=1e-3)
    interval = f"90% interval {p.low:.4g}-{p.high:.4g} ms"
    assert f"{ARCH}: {p.value:.4g} ms (std {p.std:.2g} ms; {interval})" in cli.stdout


def test_what_the_cli_prints_as_a_warning_python_gets_as_a_warning(tmp_path):
    """A model exported at batch 8 and unlike NAS-Bench-201's networks, on a recorded phone:
    ``hwnas predict`` prints two ``warning:`` lines; ``hwnas.predict`` gave the number alone,
    with no word of either (main). They are now :class:`hwnas.HwnasWarning`, and an arch of
    the space gets none."""
    import warnings

    import torch

    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU()).eval()
    path = tmp_path / "b8.onnx"
    torch.onnx.export(model, (torch.randn(8, 3, 64, 64),), str(path), dynamo=False)
    with pytest.warns(hwnas.HwnasWarning) as caught:
        (p,) = hwnas.predict(str(path), device="pixel3")
    said = [str(w.message) for w in caught if issubclass(w.category, hwnas.HwnasWarning)]
    # each points at this line, the caller's, not into hwnas's own code
    assert {w.filename for w in caught if issubclass(w.category, hwnas.HwnasWarning)} == {
        __file__
    }
    assert p.value > 0
    assert any(m.startswith(f"{path}: exported at batch 8, but the predictor is adapted on "
                            "pixel3's values at batch 1") for m in said), said  # fmt: skip
    assert any(f"{path}: unlike every network the predictor knows" in m for m in said), said
    cli = hwnas_main("predict", "--device", "pixel3", "--onnx", str(path))
    assert sorted(line.removeprefix("warning: ") for line in cli.stderr.splitlines()
                  if line.startswith("warning: ")) == sorted(said)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error", hwnas.HwnasWarning)
        hwnas.predict(ARCH, device="pixel3")  # nothing to say


def test_an_index_names_an_architecture_as_on_the_command_line():
    """``5`` (or ``[5]``, or a NumPy integer) is NAS-Bench-201's architecture 5, as in ``hwnas
    measure --arch 5``: a bare integer raised a TypeError."""
    import numpy as np

    text = hwnas.spaces.get_space("nasbench201").arch_at(5).text
    for models in (5, [5], np.int64(5), "5"):
        assert [m.label for m in hwnas.measure(models, device="pixel3")] == [text]
        assert hwnas.predict(models, device="pixel3")[0].model.text == text


def test_a_mixed_list_comes_back_in_the_order_given(tmp_path):
    """``hwnas.measure(["net.onnx", 5])`` returned the arch first and ``hwnas.predict([5,
    "net.onnx"])`` the ONNX model first: zipping the results with the inputs paired each value
    with another model. Both keep the order given; a space object names the arch's space."""
    import torch

    path = tmp_path / "net.onnx"
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    torch.onnx.export(net, (torch.randn(1, 3, 16, 16),), str(path), dynamo=False)
    five, six = (hwnas.get_space("nasbench201").arch_at(i).text for i in (5, 6))
    measured = hwnas.measure([str(path), 5, str(path)], device="cpu-fast")
    assert [m.label for m in measured] == ["net.onnx", five, "net.onnx"]
    predicted = hwnas.predict([5, str(path), 6], device="pixel3")
    assert [str(getattr(p.model, "text", p.model)) for p in predicted] == [five, str(path), six]
    space = hwnas.get_space("nasbench201")
    assert hwnas.predict(5, device="pixel3", space=space)[0].value == pytest.approx(
        predicted[0].value, rel=1e-6
    )


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: hwnas.predict([ARCH]), "give the device's measurements: calibration="),
        (lambda: hwnas.predict(ARCH, device="pixel3", metric="ms"), "unknown metric 'ms'"),
        (lambda: hwnas.measure("|bogus~0|", device="cpu-fast"), "malformed NAS-Bench-201 arch"),
        (lambda: hwnas.measure([], device="cpu-fast"), "nothing to measure or predict"),
        (lambda: hwnas.measure(ARCH, device="nodevice"), "unknown device 'nodevice'"),
        (lambda: hwnas.measure(None, device="pixel3"), "models must be an arch string, an index"),
        (lambda: hwnas.predict([ARCH, None], device="pixel3"), "a model must be an arch string"),
        (lambda: hwnas.measure(ARCH, device="pixel3", batch_size="2"), "batch_size must be an"),
        (lambda: hwnas.measure(ARCH, device="pixel3", batch_size=2.5), "batch_size must be an"),
        # arguments of the wrong type: one line, not a TypeError from inside (main)
        (lambda: hwnas.measure(ARCH, device="cpu-fast", store=123), "store must be a path or a"),
        (lambda: hwnas.measure(ARCH, device="cpu-fast", space=1), "a search space is named by"),
        (lambda: hwnas.predict(ARCH, device="pixel3", predictor=5), "predictor must be a name"),
        (lambda: hwnas.zoo.load(5), "entry must be a path (a string or a pathlib.Path), got 5"),
        (lambda: hwnas.get_space(None), "a search space is named by a string"),
        # a misspelt or missing argument: a TypeError before (hwnas.search named it)
        (lambda: hwnas.predict(ARCH, devcie="pixel3"), "unknown option of hwnas.predict "
                                                       "'devcie'; did you mean device?"),
        (lambda: hwnas.measure(ARCH), "hwnas.measure: missing a required argument: 'device'"),
        (lambda: hwnas.predict(ARCH, device="pixel3", calibration="c.csv"), "not both"),
    ],
)
def test_bad_input_raises_one_line(call, message):
    with pytest.raises(hwnas.HwnasError) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_notebook_sees_the_public_names_and_measures_arguments():
    """``dir(hwnas)`` listed ``Any``, ``import_module`` and ``annotations`` beside the public
    names; ``inspect.signature(hwnas.measure)`` (a callable module) was ``(*args, **kwargs)``."""
    import inspect

    public = [n for n in dir(hwnas) if not n.startswith("_")]
    assert {"search", "measure", "predict", "SearchRun", "HwnasError"} <= set(public)
    assert not {"Any", "import_module", "annotations"} & set(public)
    assert list(inspect.signature(hwnas.measure).parameters)[:2] == ["models", "device"]


def _twin(widths: list[int]):
    """A tiny module space called "twin" whose stem width is chosen among ``widths``."""
    import torch
    from torch import nn

    import hwnas.nn as hn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, hn.ValueChoice(widths, label="w"), 3, padding=1)
            self.head = nn.Linear(self.stem.out_channels, 10)

        def forward(self, x):
            return self.head(self.stem(x).mean((2, 3)))

    return hn.space(Net(), torch.zeros(1, 3, 8, 8), name="twin", dataset="digits")


def test_measure_and_predict_use_their_own_space_whatever_registers_the_name_meanwhile(
    monkeypatch,
):
    """``hwnas.measure(space=obj)`` and ``hwnas.predict(space=obj)`` registered the object and
    then looked it up by name: another thread's space of that name, registered in between,
    was measured or predicted instead (as for hwnas.search). The other thread's registration
    is made here at that moment."""
    import hwnas.measure as measure_module
    import hwnas.predictors.predict as predict_module
    from hwnas.spaces import get_space

    mine, other = _twin([4, 8]), _twin([64, 96])
    arch = mine.smallest().text  # not an architecture of the other (widths 64 or 96)
    build = measure_module.model_workloads

    def another_thread_registers(*args, **kwargs):
        hwnas.register_space(other)
        return build(*args, **kwargs)

    monkeypatch.setattr(measure_module, "model_workloads", another_thread_registers)
    (m,) = hwnas.measure(arch, device="cpu-fast", space=mine)
    assert m.label == arch and m.latency.value > 0
    assert get_space("twin") is other  # the other thread's, outside the call

    seen = []

    def predicts(onnx, archs, sp, **kwargs):
        hwnas.register_space(other)
        seen.append(get_space("twin"))
        return ["predicted"]

    monkeypatch.setattr(predict_module, "predict_models", predicts)
    assert hwnas.predict(arch, device="pixel3", space=mine) == ["predicted"]
    assert seen == [mine]


def test_a_measurement_warning_points_at_the_callers_line(tmp_path):
    """A network whose activations are subnormal numbers: ``hwnas.measure`` warns, and the
    warning pointed at hwnas/measure.py (a fixed stacklevel, one frame short of the callable
    module's wrapper), not at the line that called it."""
    import warnings

    import torch
    from torch import nn

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.c = nn.Conv2d(3, 16, 3, padding=1)
            self.c2 = nn.Conv2d(16, 16, 3, padding=1)
            self.f = nn.Linear(16, 10)
            with torch.no_grad():
                for conv in (self.c, self.c2):
                    conv.weight.fill_(1e-20)
                    conv.bias.zero_()

        def forward(self, x):
            return self.f(self.c2(self.c(x) * 1e-3).mean((2, 3)))

    path = tmp_path / "sub.onnx"
    torch.onnx.export(Tiny().eval(), (torch.ones(1, 3, 32, 32),), str(path), dynamo=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        hwnas.measure(str(path), device="cpu-fast")
    ours = [w for w in caught if issubclass(w.category, hwnas.HwnasWarning)]
    assert ours and {w.filename for w in ours} == {__file__}, [w.filename for w in ours]
