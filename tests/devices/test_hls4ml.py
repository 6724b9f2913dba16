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
from hwnas.errors import DeviceUnavailableError, HwnasError
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
