"""A user's live, android, rpc and hls4ml profiles: every top-level key is one its kind
declares, and a bad value is named by its file and key when the profile is read (an audit of
users' own profiles: `timeing:` was ignored and the device timed with the default protocol,
`batch_size: 8` labelled batch-1 timings "ms per batch of 8", `big_cores: all` said
`ValueError("invalid literal ...")`)."""

from __future__ import annotations

import json

import pytest

SMALL = "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|"
LOCAL = "name: bad\nkind: local\nclass: cpu\nruntime: ort\n"
PHONE = "name: bad\nkind: android\nclass: phone\nrpc: {tracker: '127.0.0.1:9190', key: k}\n"
BOARD = "name: bad\nkind: rpc\nclass: board\n"
FPGA = "name: bad\nkind: hls4ml\nclass: fpga\n"
GPU = "name: bad\nkind: cuda\nclass: gpu\n"


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (LOCAL + "timeing: {threads: 2}\n", "unknown key 'timeing' (did you mean timing?)"),
        (LOCAL + "runtme: tvm\n", "unknown key 'runtme' (did you mean runtime?)"),
        (LOCAL + "threads: 4\n", "unknown key 'threads'"),
        (LOCAL + "command: touch x\n", "unknown key 'command'"),
        (LOCAL + "batch_size: 8\n", "unknown key 'batch_size' (a recorded table's key"),
        (PHONE + "adb_timout_s: 5\n", "unknown key 'adb_timout_s' (did you mean adb_timeout_s?)"),
        (
            PHONE + "big_cores: all\n",
            "big_cores must be a list of core numbers (CPU ids such as [4, 5, 6, 7]), got 'all'",
        ),
        (PHONE + "thermal_zones: '(cpu'\n", "thermal_zones must be a regular expression"),
        (
            BOARD + "rpc: {tracker: 'localhost:99999', key: k}\n",
            "rpc.tracker must be HOST:PORT with a port from 1 to 65535",
        ),
        (BOARD + "pre_measure: reboot\n", "unknown key 'pre_measure'"),
        (FPGA + "clock_mhz: -200\n", "unknown key 'clock_mhz'"),
        (FPGA + "foo: bar\n", "unknown key 'foo'"),
        (
            LOCAL + "ort: {provider: dnnl}\n",
            "ort.provider 'dnnl' is no ONNX Runtime execution provider; did you mean "
            "DnnlExecutionProvider?",
        ),
        (LOCAL + "timing: {max_cv: 0}\n", "timing.max_cv must be above 0 and at most 1, got 0"),
        (
            LOCAL + "timing: {max_cv: 15}\n",
            "timing.max_cv must be at most 1, got 15; max_cv is a fraction of the median (0.15 "
            "for 15%)",
        ),
        (
            LOCAL + "timing: {max_cv: 1e300}\n",
            "timing.max_cv must be a number, got '1e300' (YAML reads a number with an exponent "
            "but no '.' as text: write 1.0e300)",
        ),
        (
            GPU + "ort: {provider: cpu}\n",  # timed the CPU, stored as the GPU's latency
            "a cuda device runs models on its GPU: ort.provider must be cuda or "
            "TensorrtExecutionProvider, got 'cpu'",
        ),
        (
            GPU + "runtime: tvm\ntarget: host\n",
            "a cuda device runs models on its GPU: its TVM target must be of kind cuda (target: "
            'cuda), got {"kind": "llvm"}',
        ),
    ],
    ids=[
        "timeing",
        "runtme",
        "threads",
        "command",
        "batch_size",
        "adb_timout_s",
        "big_cores",
        "thermal_zones",
        "tracker_port",
        "pre_measure",
        "clock_mhz",
        "foo",
        "provider",
        "max_cv_0",
        "max_cv_15",
        "max_cv_1e300",
        "cuda_on_cpu",
        "cuda_tvm_host",
    ],
)
def test_a_bad_key_or_value_of_a_live_profile_breaks_it_in_one_line(tmp_path, cli, text, why):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "bad.yaml").write_text(text)
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0, err
    listing = json.loads(out)
    broken = {p.split("/")[-1]: w for p, w in listing["broken_profiles"].items()}
    assert set(broken) == {"bad.yaml"} and why in broken["bad.yaml"], broken
    assert "Error(" not in broken["bad.yaml"]  # a message, not a Python exception's repr
    assert {"cpu-fast", "pixel3"} <= {d["device"] for d in listing["devices"]}
    status, _, err = cli("measure", "-d", "bad", "--arch", SMALL, profiles=profiles)
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert status == 2 and "Traceback" not in err, err
    assert len(error) == 1 and "bad.yaml" in error[0] and why in error[0], err
    assert "stored" not in err and not (tmp_path / "measurements.db").exists()


def test_a_tracker_given_on_the_command_line_is_named_as_the_option(cli):
    status, _, err = cli("devices", "check", "rpc", "--tracker", "localhost:99999", "--key", "k")
    assert status == 2 and "--tracker must be HOST:PORT" in err and "rpc.tracker" not in err


def test_a_cuda_device_refuses_a_cpu_target_given_on_the_command_line(cli):
    status, _, err = cli("measure", "-d", "cuda", "--runtime", "tvm", "--target", "host",
                         "--arch", SMALL)  # fmt: skip
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert 'its TVM target must be of kind cuda (--target cuda), got {"kind": "llvm"}' in err


def test_no_cv_limit_and_a_fraction_are_read(tmp_path, cli):
    from hwnas.devices import get_device

    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "a.yaml").write_text(LOCAL.replace("bad", "a") + "timing: {max_cv: none}\n")
    (profiles / "b.yaml").write_text(LOCAL.replace("bad", "b") + "timing: {max_cv: 1.0e-1}\n")
    status, out, err = cli("devices", "--json", profiles=profiles)
    assert status == 0 and not json.loads(out)["broken_profiles"], out
    assert get_device("a").max_cv is None and get_device("b").max_cv == pytest.approx(0.1)


def test_a_live_device_values_are_of_batch_one_a_tables_of_its_batch():
    from hwnas.devices import get_device

    assert get_device("cpu-fast").value_batch_size == 1
    assert get_device("1080ti_32").value_batch_size == 32


def test_a_target_tvm_rejects_names_the_profile_and_its_key(tmp_path, cli):
    pytest.importorskip("tvm")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "tg.yaml").write_text(
        "name: tg\nkind: local\nclass: cpu\nruntime: tvm\ntarget: {kind: llvmm}\n"
        "tvm: {trials_per_task: 0}\ntiming: {warmup: 1, rounds: 1, calls_per_round: 1}\n"
    )
    status, _, err = cli("measure", "-d", "tg", "--arch", SMALL, profiles=profiles)
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert status == 2 and len(error) == 1, err
    assert 'TVM rejects target {"kind": "llvmm"} (target: in ' in error[0], err
    assert "tg.yaml" in error[0], err
    # a search is refused before its first measurement (it measured the reference set's first
    # architectures for 5 s, then stopped on the first compile)
    status, _, err = cli("search", "-d", "tg", "--budget", "5", "--no-zoo", "--out",
                         str(tmp_path / "run"), profiles=profiles)  # fmt: skip
    error = [line for line in err.splitlines() if line.startswith("error:")]
    assert status == 2 and len(error) == 1, err
    assert 'TVM rejects target {"kind": "llvmm"} (target: in ' in error[0], err
    assert "search tg" not in err and not (tmp_path / "run").exists(), err
