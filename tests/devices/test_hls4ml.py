"""FPGA through hls4ml: the synthesis-report parser on a real Vivado HLS report (hls4ml's
repository), ONNX -> hls4ml conversion of a small CNN (checked against ONNX Runtime with
hls4ml's bit-accurate C++ emulation), and the device's flow and messages."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import numpy as np
import pytest

from hwnas.devices import get_device
from hwnas.devices.hls_report import find_report, parse_csynth_rpt, parse_csynth_xml
from hwnas.errors import CandidateError, DeviceUnavailableError, HwnasError
from hwnas.measure import onnx_workload

REPORTS = Path(__file__).parent / "data" / "hls4ml_galapagos"


def test_xml_and_text_reports_of_a_real_synthesis_agree():
    xml = parse_csynth_xml(REPORTS / "myproject_csynth.xml")
    rpt = parse_csynth_rpt(REPORTS / "myproject_csynth.rpt")
    assert xml == rpt
    assert xml.top == "myproject" and xml.part == "xcku115-flva1517-2-e" and xml.tool == "2018.2"
    assert xml.clock_ns == 5.0 and xml.estimated_clock_ns == 4.168
    assert xml.latency_cycles == (14, 14) and xml.interval_cycles == (1, 1)
    assert xml.latency_ms == pytest.approx(14 * 5e-6)  # 14 cycles x 5 ns = 70 ns
    assert xml.resources == {"BRAM_18K": 18, "DSP": 792, "FF": 43219, "LUT": 21809}
    assert xml.available["LUT"] == 663360
    assert xml.utilisation()["DSP"] == pytest.approx(100 * 792 / 5520)


def test_report_errors_are_one_line(tmp_path):
    with pytest.raises(HwnasError, match="cannot read synthesis report"):
        parse_csynth_xml(tmp_path / "missing.xml")
    (tmp_path / "other.xml").write_text("<profile><x/></profile>")
    with pytest.raises(HwnasError, match="not a Vivado/Vitis HLS C-synthesis report"):
        parse_csynth_xml(tmp_path / "other.xml")
    text = (REPORTS / "myproject_csynth.xml").read_text()
    (tmp_path / "undef.xml").write_text(
        text.replace("<Worst-caseLatency>14", "<Worst-caseLatency>undef")
    )
    with pytest.raises(HwnasError, match="worst-case latency is 'undef', not a number"):
        parse_csynth_xml(tmp_path / "undef.xml")
    with pytest.raises(HwnasError, match="synthesis did not finish"):
        find_report(tmp_path, "hwnas_model")


def _small_cnn(tmp_path) -> Path:
    import torch
    from torch import nn

    from hwnas.export import export_onnx

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64, 10)
    )
    path = tmp_path / "small_cnn.onnx"
    path.write_bytes(export_onnx(model, (1, 3, 8, 8)))
    return path


def test_without_the_hls_toolchain_the_device_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    device = get_device("vu9p_hls4ml")
    ok, why = device.status()
    assert not ok and "\n" not in why
    assert "no vitis_hls or vivado_hls on PATH" in why or "pip install 'hwnas[fpga]'" in why
    assert device.runtime.startswith("hls4ml:vitis-")
    with pytest.raises(DeviceUnavailableError, match="vu9p_hls4ml"):
        device.measure(onnx_workload(_small_cnn(tmp_path)))
    assert get_device("fpga").status()[0]  # the recorded FPGA stays usable


FAKE_VITIS = """#!/bin/sh
# stands in for vitis_hls: "synthesis" leaves a real report where vitis_hls writes it
test "$1" = "-f" && test "$2" = "build_prj.tcl" || exit 3
mkdir -p hwnas_model_prj/solution1/syn/report
cp {report} hwnas_model_prj/solution1/syn/report/hwnas_model_csynth.xml
"""


def test_conversion_then_synthesis_gives_latency_and_resources(tmp_path, monkeypatch):
    pytest.importorskip("hls4ml")
    pytest.importorskip("qonnx")
    tools = tmp_path / "bin"
    tools.mkdir()
    vitis = tools / "vitis_hls"
    vitis.write_text(FAKE_VITIS.format(report=REPORTS / "myproject_csynth.xml"))
    vitis.chmod(vitis.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    device = get_device("vu9p_hls4ml")
    assert device.status() == (True, "vitis_hls for xcvu9p-flga2104-2-e at 5 ns (Vitis backend)")
    workload = onnx_workload(_small_cnn(tmp_path))
    m = device.measure(workload)
    project = device.project_dir(workload)
    tcl = (project / "project.tcl").read_text()
    assert 'set part "xcvu9p-flga2104-2-e"' in tcl and "set clock_period 5" in tcl
    assert (project / "firmware" / "hwnas_model.cpp").exists()
    assert m.value == pytest.approx(14 * 5e-6) and m.runtime == device.runtime
    assert m.extra["resources"] == {"BRAM_18K": 18, "DSP": 792, "FF": 43219, "LUT": 21809}
    assert m.extra["latency_cycles"] == [14, 14] and m.versions["hls4ml"]


@pytest.mark.slow
def test_converted_small_cnn_matches_onnx_runtime_in_cpp_emulation(tmp_path):
    pytest.importorskip("hls4ml")
    pytest.importorskip("qonnx")
    if shutil.which("g++") is None:
        pytest.skip("hls4ml's C++ emulation needs g++")
    import onnxruntime as ort

    path = _small_cnn(tmp_path)
    graph = get_device("vu9p_hls4ml").convert(path.read_bytes(), tmp_path / "prj")
    graph.compile()
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    expected = ort.InferenceSession(str(path)).run(None, {"input": x})[0]
    got = np.asarray(graph.predict(np.ascontiguousarray(x.reshape(1, -1)))).reshape(1, 10)
    np.testing.assert_allclose(got, expected, atol=0.05)  # fixed<16,6> arithmetic


def _fake_vitis(tmp_path, monkeypatch) -> None:
    tools = tmp_path / "bin"
    tools.mkdir(exist_ok=True)
    vitis = tools / "vitis_hls"
    vitis.write_text(FAKE_VITIS.format(report=REPORTS / "myproject_csynth.xml"))
    vitis.chmod(vitis.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")


def test_a_nasbench201_search_on_hls4ml_stops_before_converting_any_network(
    tmp_path, monkeypatch, hwnas_home
):
    """`hwnas search --device vu9p_hls4ml` (NAS-Bench-201, the default space): every network
    has AveragePool nodes, which qonnx cannot make channels-last and hls4ml takes only so;
    each trial spent 125-155 s in qonnx and failed with hls4ml's "Please convert the model to
    channels-last format". The search stops in one line before any trial."""
    pytest.importorskip("hls4ml")
    pytest.importorskip("qonnx")
    from helpers import hwnas_main

    _fake_vitis(tmp_path, monkeypatch)
    out = tmp_path / "run"
    r = hwnas_main("search", "--device", "vu9p_hls4ml", "--budget", "3", "--out", str(out))
    assert r.returncode == 2, r.stdout
    assert r.stderr.count("\n") <= 1
    assert "device 'vu9p_hls4ml' cannot take nasbench201's networks: it has " in r.stderr
    assert "AveragePool node(s)" in r.stderr and "qonnx" in r.stderr
    assert not out.exists()
    assert not (hwnas_home / "hls4ml").exists()  # no project written


def test_without_its_toolchain_hls4ml_suggests_no_reference_set_it_cannot_build(
    tmp_path, monkeypatch, hwnas_home
):
    """`hwnas search --device vu9p_hls4ml` without Vitis said to time NAS-Bench-201's reference
    set on the device, whose every network hls4ml refuses (their average pooling)."""
    pytest.importorskip("hls4ml")
    pytest.importorskip("qonnx")
    from helpers import hwnas_main

    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no vitis_hls: the device cannot measure
    r = hwnas_main("search", "--device", "vu9p_hls4ml", "--budget", "3", "--no-zoo")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "cannot measure" in r.stderr and "hwnas search --device fpga" in r.stderr
    assert "refset" not in r.stderr and "its networks cannot run on vu9p_hls4ml" in r.stderr
    r = hwnas_main("predict", "--device", "vu9p_hls4ml", "--arch", "5")
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "refset" not in r.stderr and "none can be measured there (device" in r.stderr


def test_a_padded_pool_is_refused_under_io_stream_and_converted_under_io_parallel(tmp_path):
    """hls4ml's streaming pools assert no padding (nnet_pooling_stream.h): refused at once,
    naming io_parallel, which converts the same model."""
    pytest.importorskip("hls4ml")
    pytest.importorskip("qonnx")
    import torch
    from torch import nn

    from hwnas.export import export_onnx

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, stride=1, padding=1),
        nn.Flatten(), nn.Linear(256, 10),
    )  # fmt: skip
    data = export_onnx(model, (1, 3, 8, 8))
    with pytest.raises(HwnasError) as info:
        get_device("vu9p_hls4ml").convert(data, tmp_path / "stream")
    assert str(info.value) == (
        "hls4ml cannot convert the model: it has 1 padded MaxPool node(s), and hls4ml's "
        "streaming pools take no padding (io_type: io_parallel in the profile has padded pools)"
    )
    assert not (tmp_path / "stream").exists()
    parallel = get_device("vu9p_hls4ml", overrides={"io_type": "io_parallel"})
    parallel.convert(data, tmp_path / "parallel")
    assert (tmp_path / "parallel" / "firmware" / "hwnas_model.cpp").exists()


def test_a_grouped_convolution_that_is_not_depthwise_is_refused_at_once(tmp_path):
    """FBNet's g2 blocks: hls4ml read them as depthwise and failed ("Depth multiplier must be
    an integer") after 469 s of qonnx on one FBNet network; a depthwise one is not refused."""
    pytest.importorskip("hls4ml")
    pytest.importorskip("qonnx")
    import torch
    from torch import nn

    from hwnas.devices.hls4ml import unconvertible
    from hwnas.export import export_onnx

    torch.manual_seed(0)
    grouped = nn.Sequential(nn.Conv2d(4, 8, 1, groups=2), nn.Flatten(), nn.Linear(512, 10))
    with pytest.raises(HwnasError) as info:
        get_device("vu9p_hls4ml").convert(export_onnx(grouped, (1, 4, 8, 8)), tmp_path / "g")
    assert str(info.value) == (
        "hls4ml cannot convert the model: it has 1 grouped Conv node(s) that are not depthwise, "
        "which hls4ml's ONNX front end cannot convert (it takes a group count of 1 or the input "
        "channels)"
    )
    depthwise = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1, groups=4), nn.Conv2d(4, 8, 1),
                              nn.Flatten(), nn.Linear(512, 10))  # fmt: skip
    assert unconvertible(export_onnx(depthwise, (1, 4, 8, 8)), "io_stream") == ""


def test_an_operation_hls4ml_has_no_handler_for_is_refused_at_once(tmp_path):
    """OFA's HardSwish, a transformer's LayerNormalization: hls4ml said "Unsupported operation
    type" only after qonnx had spent minutes on the model. Shape arithmetic (folded to
    constants by qonnx) is not counted: a Flatten written as view(x.size(0), -1) converts."""
    pytest.importorskip("hls4ml")
    pytest.importorskip("qonnx")
    import torch
    from torch import nn

    from hwnas.devices.hls4ml import unconvertible
    from hwnas.export import export_onnx

    class Head(nn.Module):
        def __init__(self, act):
            super().__init__()
            self.conv, self.act, self.fc = nn.Conv2d(3, 4, 3, padding=1), act, nn.Linear(256, 10)

        def forward(self, x):
            return self.fc(self.act(self.conv(x)).view(x.size(0), -1))

    torch.manual_seed(0)
    data = export_onnx(Head(nn.Hardswish()), (1, 3, 8, 8))
    with pytest.raises(CandidateError) as info:  # one network: a failed trial, the search goes on
        get_device("vu9p_hls4ml").convert(data, tmp_path / "hs")
    assert str(info.value) == (
        "hls4ml cannot convert the model: it computes with 1 HardSwish node(s), operations "
        "hls4ml's ONNX front end does not have"
    )
    assert unconvertible(export_onnx(Head(nn.ReLU()), (1, 3, 8, 8)), "io_stream") == ""


def test_a_space_is_refused_only_when_none_of_its_sampled_networks_converts(monkeypatch):
    """The check read one sampled network and refused the whole space on it: a space where some
    networks convert (an activation choice, one of them HardSwish) was refused, or, with a
    convertible first network, searched until a HardSwish one stopped the search with a
    HwnasError. Now it is refused when none of the first 4 sampled networks converts; a network
    that does not is a failed trial (CandidateError)."""
    import numpy as np

    import hwnas.devices.hls4ml as hls
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    picks = space.sample(np.random.default_rng(0), hls.CHECKED_NETWORKS)
    device = get_device("vu9p_hls4ml")
    for bad in (set(), {picks[0].text}, {a.text for a in picks[:-1]}):  # some convert
        monkeypatch.setattr(hls, "unconvertible", lambda data, io, bad=bad: "HardSwish" * (
            data.decode() in bad))  # fmt: skip
        monkeypatch.setattr("hwnas.measure.arch_workload", lambda sp, a, ds: type(
            "W", (), {"onnx_bytes": lambda self, t=a.text: t.encode()})())  # fmt: skip
        device.check_networks(space, "cifar100")
    bad = {a.text for a in picks}  # none converts
    monkeypatch.setattr(hls, "unconvertible", lambda data, io: "HardSwish" * (data.decode() in bad))
    with pytest.raises(HwnasError, match="cannot take nasbench201's networks: HardSwish"):
        device.check_networks(space, "cifar100")
