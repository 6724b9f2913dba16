"""The profiler's measure-once rule with flagged (too noisy) measurements, and ONNX files as
workloads."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import hwnas_main

from hwnas.devices.base import Device, Measurement, Workload
from hwnas.errors import HwnasError
from hwnas.measure import NoisyMeasurementError, Profiler, onnx_workload
from hwnas.store import MeasurementStore

WORKLOAD = Workload("h1", "model", (1, 3, 8, 8))


class Scripted(Device):
    """A device whose successive measurements are given (CVs in order)."""

    kind = "test"
    runtime = "ort"

    def __init__(self, cvs):
        super().__init__({"name": "dev", "kind": "test", "description": "scripted"})
        self.cvs = list(cvs)
        self.calls = 0

    @property
    def metrics(self):
        return ("latency_ms", "energy_mj")

    def status(self):
        return True, "scripted"

    def measure(self, workload, metric="latency_ms"):
        raise AssertionError("the profiler must use measure_all")

    def measure_all(self, workload):
        cv = self.cvs[self.calls]
        self.calls += 1
        base = Measurement("dev", "ort", "latency_ms", workload.model_hash, workload.label, 1,
                           workload.input_shape, 2.0 + self.calls, cv=cv, flagged=cv > 0.05,
                           extra={"tuned_workloads": 2, "tuning_s": 1.5})  # fmt: skip
        return {"latency_ms": base, "energy_mj": replace(base, metric="energy_mj", value=7.0)}


def test_flagged_result_is_retried_and_both_metrics_stored_at_once(tmp_path):
    device = Scripted([0.2, 0.01])
    with MeasurementStore(tmp_path / "m.db") as store:
        profiler = Profiler(device, store, attempts=2)
        m = profiler.measure(WORKLOAD)
        assert m.value == 4.0 and not m.flagged and device.calls == 2
        assert profiler.counts.flagged == 1 and profiler.counts.taken == 1
        assert profiler.counts.tuned_workloads == 4 and profiler.counts.tuning_s == 3.0
        assert profiler.measure(WORKLOAD, "energy_mj").value == 7.0  # stored with the latency
        assert device.calls == 2 and profiler.counts.reused == 1


def test_always_noisy_raises_and_is_measured_again_next_time(tmp_path):
    device = Scripted([0.2, 0.3, 0.01])
    with MeasurementStore(tmp_path / "m.db") as store:
        with pytest.raises(NoisyMeasurementError, match="too noisy to use: CV 30.0%"):
            Profiler(device, store, attempts=2).measure(WORKLOAD)
        stored = store.lookup("dev", "ort", "latency_ms", "h1", (1, 3, 8, 8))
        assert stored.flagged and stored.cv == 0.3  # kept with its samples, marked
        m = Profiler(device, store).measure(WORKLOAD)  # a resumed run measures it again
        assert not m.flagged and device.calls == 3
        assert not store.lookup("dev", "ort", "latency_ms", "h1", (1, 3, 8, 8)).flagged
    limit = NoisyMeasurementError(stored, 2, 0.002)  # a 0.2% limit read "0%"
    assert "CV 30.0% > 0.2% after 2 attempt(s)" in str(limit)


def test_a_flagged_energy_names_its_latencys_cv_not_its_own_unknown_one():
    """A live energy is one meter reading times the latency: its CV is unknown (stored 0), and
    it is flagged when its latency is; a search on energy said "too noisy to use: CV 0.0%"."""
    energy = Measurement("dev", "ort", "energy_mj", "h1", "model", 1, (1, 3, 8, 8), 7.0,
                         samples=(7.0,), flagged=True, extra={"latency_cv": 0.2})  # fmt: skip
    assert np.isnan(energy.known_cv)
    assert "too noisy to use: its latency's CV 20.0% > 15%" in str(
        NoisyMeasurementError(energy, 2, 0.15)
    )


def test_a_meter_that_counts_nothing_keeps_the_latency_and_stops_only_what_needs_energy(
    tmp_path,
):
    """A frozen energy counter: the latency timed around it was thrown away with the energy.
    Asked for latency, the profiler stores it and warns once per run; asked for energy, it
    stores the latency and raises a device error (never a skipped candidate), and an energy
    asked for after the meter failed in this run is not timed again."""
    from hwnas.errors import CandidateError, DeviceUnavailableError, MeterReadingError

    class Frozen(Scripted):
        def measure_all(self, workload):
            latency = super().measure_all(workload)["latency_ms"]
            raise MeterReadingError("energy meter fake read 0 mJ", kept={"latency_ms": latency})

    said = []
    with MeasurementStore(tmp_path / "m.db") as store:
        device = Frozen([0.01] * 4)
        profiler = Profiler(device, store, say=said.append)
        for i in range(2):
            m = profiler.measure(Workload(f"h{i}", "model", (1, 3, 8, 8)))
            assert m.metric == "latency_ms" and store.lookup("dev", "ort", "latency_ms",
                                                             f"h{i}", (1, 3, 8, 8))  # fmt: skip
        assert len(said) == 1 and "fake read 0 mJ; energy is not stored" in said[0]
        with pytest.raises(MeterReadingError, match="stopped counting energy: energy meter fake"):
            profiler.measure(WORKLOAD, "energy_mj")
        assert device.calls == 2  # not timed again: the meter failed in this run
        with pytest.raises(DeviceUnavailableError, match="the latency of model is stored"):
            Profiler(device, store).measure(Workload("h9", "model", (1, 3, 8, 8)), "energy_mj")
        assert device.calls == 3 and store.lookup("dev", "ort", "latency_ms", "h9", (1, 3, 8, 8))
        assert not issubclass(MeterReadingError, CandidateError)


def test_allow_flagged_returns_it(tmp_path):
    with MeasurementStore(tmp_path / "m.db") as store:
        m = Profiler(Scripted([0.2]), store, attempts=1).measure(WORKLOAD, allow_flagged=True)
        assert m.flagged


def test_measure_models_shows_the_latency_stored_with_the_energy(tmp_path):
    """`hwnas measure` on a device with a meter: the first run came back flagged, the energy's
    lookup found that flagged run and measured both metrics again, and the table showed the
    first run's latency (FLAGGED, "stored flagged") beside the second run's energy while the
    store held the second run, not flagged. Both shown now come from the run stored: the
    energy read around the latency's timing is taken with it, not looked up and measured
    again (which also counted one model "1 measured, 1 from the store")."""
    from hwnas.measure import measure_models

    device = Scripted([0.2, 0.2, 0.2, 0.01])  # the latency's 3 attempts flagged, then not
    device.stored_in_profiler = True
    done = measure_models(device, [WORKLOAD], tmp_path / "m.db")
    (model,) = done.models
    assert device.calls == 3 and (done.counts.taken, done.counts.reused) == (1, 0)
    assert model.latency.value == 5.0 and model.latency.flagged and "FLAGGED" in model.how
    assert model.energy.value == 7.0 and model.energy.flagged
    with MeasurementStore(tmp_path / "m.db") as store:
        stored = store.lookup("dev", "ort", "latency_ms", "h1", (1, 3, 8, 8))
        assert stored.value == 5.0 and stored.flagged
        again = measure_models(device, [WORKLOAD], tmp_path / "m.db")  # flagged: again
    (model,) = again.models
    assert device.calls == 4 and (again.counts.taken, again.counts.reused) == (1, 0)
    assert model.latency.value == 6.0 and not model.latency.flagged
    assert model.energy.value == 7.0 and not model.energy.flagged
    done = measure_models(device, [WORKLOAD, WORKLOAD], tmp_path / "m.db")
    assert (done.counts.taken, done.counts.reused, done.counts.read) == (0, 2, 0)


class Shared(Scripted):
    """Every run flagged for the CPU time other processes took (CV 1%, wait share 0.6)."""

    max_cv, max_wait_share = 0.05, 0.1

    def measure_all(self, workload):
        out = super().measure_all(workload)
        return {k: replace(m, flagged=True, extra={"cpu_wait_share": 0.6}) for k, m in out.items()}


def test_a_flagged_rows_how_says_why_it_was_flagged(tmp_path):
    """`hwnas measure`'s how column said "FLAGGED (missed the +-1% target)" of a value flagged
    because other processes held its CPU: the flag and the interval target read as one
    (helper-63). The row names the flag's cause."""
    from hwnas.measure import measure_models

    device = Shared([0.01] * 6)
    device.stored_in_profiler = True
    (done,) = measure_models(device, [WORKLOAD], tmp_path / "m.db").models
    assert done.latency.flagged
    assert "FLAGGED (other processes holding its CPU over 10% of the time)" in done.how
    assert "CV" not in done.how


def test_a_measured_power_no_device_draws_is_a_warning(tmp_path):
    """A phone's battery meter read in microamperes where the phone reports milliamperes gave
    an energy 1000x low (0.0001 mJ for a tiny CNN) without a word; the table imports had a
    power check, live measurements none. A power outside the class's range is a warning."""
    from hwnas.measure import measure_models

    device = Scripted([0.01, 0.01])
    device.stored_in_profiler = True
    device.profile["class"] = "phone"
    (done,) = measure_models(device, [WORKLOAD], tmp_path / "m.db").models
    assert done.warning == ""  # 7 mJ over 3 ms: 2.3 W
    device.measure_all = lambda w: {  # 0.0003 mJ over 3 ms: 1e-4 W
        k: replace(v, value=3e-4) if k == "energy_mj" else v
        for k, v in Scripted.measure_all(device, w).items()
    }  # fmt: skip
    (done,) = measure_models(device, [replace(WORKLOAD, model_hash="h2")], tmp_path / "m.db").models
    assert "W, outside the 0.01-30 W a phone draws: is the energy meter read" in done.warning


def test_onnx_file_workload_takes_the_batch_size_for_the_dynamic_axis(tmp_path):
    from torch import nn

    from hwnas.export import export_onnx

    path = tmp_path / "m.onnx"
    path.write_bytes(export_onnx(nn.Conv2d(3, 4, 3), (1, 3, 16, 16)))
    w = onnx_workload(path, batch_size=4)
    assert w.input_shape == (4, 3, 16, 16) and w.label == "m.onnx"
    assert w.onnx_bytes() == path.read_bytes()
    assert onnx_workload(path).model_hash != w.model_hash
    (tmp_path / "bad.onnx").write_bytes(b"not onnx")
    with pytest.raises(HwnasError, match="corrupt or invalid ONNX"):
        onnx_workload(tmp_path / "bad.onnx")


def test_a_model_that_fails_when_run_is_one_line(tmp_path, hwnas_home):
    """A model fixed by `--dim` to a size its Reshape cannot take (a TransformerEncoder
    exported with a dynamic sequence) failed in ONNX Runtime's traceback from `hwnas measure`;
    `hwnas predict` already said it in one line."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper as nh

    graph = h.make_graph(
        [h.make_node("Reshape", ["x", "shape"], ["y"])], "g",
        [h.make_tensor_value_info("x", T.FLOAT, [1, "n"])],
        [h.make_tensor_value_info("y", T.FLOAT, [1, 4])],
        [nh.from_array(np.array([1, 4], np.int64), "shape")],
    )  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "reshape.onnx"
    onnx.save(model, str(path))
    r = hwnas_main("measure", "--device", "cpu-fast", "--onnx", str(path), "--dim", "n=5")
    assert r.returncode == 2, r.stderr
    said = [ln for ln in r.stderr.splitlines() if not ln.startswith("measure on cpu-fast: ")]
    assert "Traceback" not in r.stderr and len(said) == 1, r.stderr  # progress, then one line
    assert "ONNX Runtime failed on one inference: " in said[0]


def test_a_model_whose_first_input_is_a_scalar_is_measured(tmp_path, hwnas_home):
    """A scalar first input has no batch axis: `hwnas measure` ended in IndexError (the store
    keyed the measurement by the first input's first axis)."""
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h

    graph = h.make_graph(
        [h.make_node("Add", ["X", "s"], ["Y"])], "g",
        [h.make_tensor_value_info("s", T.FLOAT, []),
         h.make_tensor_value_info("X", T.FLOAT, [1, 4])],
        [h.make_tensor_value_info("Y", T.FLOAT, [1, 4])],
    )  # fmt: skip
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "scalar_first.onnx"
    onnx.save(model, str(path))
    r = hwnas_main("measure", "--device", "cpu-fast", "--onnx", str(path))
    assert r.returncode == 0, r.stderr
    assert "1 measured" in r.stdout


def test_measure_reads_the_archs_csv_predict_reads(tmp_path, hwnas_home):
    """`hwnas measure --archs` took one architecture per line only: the CSV with an `arch`
    column that `hwnas predict --archs` reads (and pareto.csv) failed on its header."""
    arch = ("|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|skip_connect~0|nor_conv_3x3~1|"
            "nor_conv_3x3~2|")
    path = tmp_path / "archs.csv"
    path.write_text(f'arch,latency_ms\n"{arch}",1.0\n')
    r = hwnas_main("measure", "--device", "pixel3", "--archs", str(path))
    assert r.returncode == 0, r.stderr
    assert "1 read from a table" in r.stdout


def test_a_profile_with_more_threads_does_not_reuse_one_threads_values(tmp_path, hwnas_home):
    """The ONNX Runtime part of the store key was "ort" whatever the thread count: a profile
    of the CPU with `threads: 2` reported the 1-thread latency measured before as its own."""
    from hwnas.runtimes.onnxruntime import OnnxRuntime

    assert OnnxRuntime(threads=1).key == "ort" and OnnxRuntime(threads=2).key == "ort:t2"
    profile = (hwnas_home / "devices" / "cpu-fast.yaml").read_text()
    arch = "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|none~0|none~1|avg_pool_3x3~2|"
    store = str(tmp_path / "m.db")
    # the store keys by device name too: the same device's profile, re-threaded, is the case
    assert hwnas_main("measure", "-d", "cpu-fast", "--store", store, "--arch", arch).returncode == 0
    (hwnas_home / "devices" / "cpu-fast.yaml").write_text(profile.replace("threads: 1",
                                                                          "threads: 2"))
    from hwnas.devices import reload_profiles

    reload_profiles()
    r = hwnas_main("measure", "-d", "cpu-fast", "--store", store, "--arch", arch)
    assert r.returncode == 0 and "1 measured, 0 from the store" in r.stdout, r.stdout
