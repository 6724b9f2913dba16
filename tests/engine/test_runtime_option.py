"""`hwnas search --runtime`: the device measures through the chosen runtime, and the study is
a different one (ORT and TVM latencies never share a study)."""

from __future__ import annotations

from helpers import hwnas_main

from hwnas.engine.loop import SearchSettings
from hwnas.jobs.table import prepare


def test_runtime_option_reaches_the_device_and_names_the_study(tmp_path):
    tvm = SearchSettings(space="nasbench201", device="cpu-fast", budget=2, runtime="tvm")
    job = prepare(tvm, f"sqlite:///{tmp_path}/studies.db", tmp_path / "m.db")
    assert job.device.runtime.startswith("tvm:llvm-") and job.profiler.device is job.device
    ort = SearchSettings(space="nasbench201", device="cpu-fast", budget=2)
    assert "cpu-fast-tvm" in tvm.study and tvm.study != ort.study
    # the default strategy is the CLI's (frontier), so the default name is the CLI's
    assert ort.study == "nasbench201-cifar100-cpu-fast-latency-frontier-seed0"
    job.profiler.store.close()


def test_runtime_option_on_a_recorded_device_is_a_one_line_error(tmp_path):
    r = hwnas_main("search", "--device", "pixel3", "--runtime", "ort", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: device 'pixel3' (recorded) has no runtime choice")
