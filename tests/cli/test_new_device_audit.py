"""A new device from about 10 measurements, as a user types it, with the mistakes users make
(an audit of `refset export` -> `measure import` / `predict --calibration` -> `search`): an
extra cell (a decimal comma in a comma-separated file) was dropped and the value changed; an
ImageNet16-120 reference set was imported as CIFAR's networks; values imported for another
dataset were unusable with advice to import them again; values typed in seconds gave
predictions 1000x off without a word; a folder, a device name starting with '-', and a limit
printed without its unit."""

from __future__ import annotations

import csv

from helpers import hwnas_main

from hwnas.predictors.data import get_column, measured_reference
from hwnas.spaces import get_space

SPACE = get_space("nasbench201")


def _calibration(path, scale=1.0, dataset="cifar100", device="raspi4"):
    """The reference set as `hwnas refset export --dataset DATASET` writes it, filled in with a
    recorded device's values (times ``scale``) standing in for the user's timings."""
    y = get_column("nasbench201", device).values
    shape = "x".join(map(str, (1, *SPACE.input_shape(SPACE.arch_at(0), dataset))))
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["arch", "onnx", "input_shape", "latency_ms"])
        for i in measured_reference("nasbench201", y):
            w.writerow([SPACE.arch_at(i).text, "", shape, f"{y[i] * scale:.6g}"])
    return path


def test_a_row_with_a_cell_more_than_the_header_is_refused_naming_its_line(tmp_path, hwnas_home):
    path = _calibration(tmp_path / "cal.csv")
    lines = path.read_text().splitlines()
    arch, onnx, shape, value = lines[3].split(",")
    lines[3] = ",".join([arch, onnx, shape, value.replace(".", ",")])  # 8.07 -> 8,07
    path.write_text("\n".join(lines) + "\n")
    for args in (["predict", "--calibration", str(path), "--arch", "1"],
                 ["measure", "import", "--device", "mine", str(path)],
                 ["measure", "import", "--device", "mine", "--table", str(path)]):  # fmt: skip
        r = hwnas_main(*args)
        assert r.returncode == 2, (args, r.stdout)
        assert r.stderr.strip() == (
            f"error: {path}:4: 5 cells, the header 4 (arch, onnx, input_shape, latency_ms): "
            "does a value hold the separator (a decimal comma in a comma-separated file)?"
        )
    assert not (hwnas_home / "devices" / "mine.yaml").exists()


def test_a_reference_set_of_another_datasets_networks_is_imported_only_as_such(
    tmp_path, hwnas_home
):
    """`refset export --dataset imagenet16` writes 1x3x16x16 in input_shape: imported without
    --dataset, the values were stored as cifar100's 32x32 networks."""
    path = _calibration(tmp_path / "cal16.csv", dataset="imagenet16")
    r = hwnas_main("measure", "import", "--device", "b16", str(path))
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"error: {path}:2: input_shape 1x3x16x16, but cifar100's network (the default "
        "--dataset) takes 1x3x32x32: its value would be stored as another network's; pass "
        "--dataset imagenet16"
    )
    assert not (hwnas_home / "devices" / "b16.yaml").exists()
    batched = tmp_path / "batch8.csv"  # the same networks timed 8 at a time
    batched.write_text(_calibration(tmp_path / "c.csv").read_text().replace(",1x3x", ",8x3x"))
    r = hwnas_main("measure", "import", "--device", "b8", str(batched))
    assert r.returncode == 2
    assert r.stderr.strip() == (
        f"error: {batched}:2: input_shape 8x3x32x32 is batch 8; hwnas measure import takes "
        "values at batch 1 (1x3x32x32), as hwnas refset export's networks are"
    )
    r = hwnas_main("measure", "import", "--device", "b16", "--dataset", "imagenet16", str(path))
    assert r.returncode == 0, r.stderr
    # then predict (cifar100's networks) and a search without --dataset name the dataset
    r = hwnas_main("predict", "--device", "b16", "--arch", "1")
    assert r.returncode == 2
    assert (
        "its stored latency_ms values are of imagenet16's networks, not cifar100's: hwnas "
        "predict adapts on cifar100's; search on them with `hwnas search --device b16 "
        "--dataset imagenet16`" in r.stderr
    ), r.stderr
    r = hwnas_main("search", "--device", "b16", "--budget", "5", "--out", str(tmp_path / "r"))
    assert r.returncode == 2
    assert r.stderr.strip().endswith(
        "its stored latency_ms values are of imagenet16's networks, not cifar100's: search "
        "with --dataset imagenet16"
    ), r.stderr
    r = hwnas_main("search", "--device", "b16", "--dataset", "imagenet16", "--budget", "5",
                   "--no-zoo", "--out", str(tmp_path / "r16"))  # fmt: skip
    assert r.returncode == 0, r.stderr


def test_values_typed_in_seconds_are_warned_of_wherever_they_are_used(tmp_path, hwnas_home):
    path = _calibration(tmp_path / "seconds.csv", scale=1e-3)
    warning = "latency_ms values are 35x below the lowest of 43 recorded devices'"
    r = hwnas_main("predict", "--calibration", str(path), "--arch", "1")
    assert r.returncode == 0 and warning in r.stderr and "in s, not ms?" in r.stderr, r.stderr
    assert hwnas_main("measure", "import", "--device", "sec", str(path)).returncode == 0
    r = hwnas_main("predict", "--device", "sec", "--arch", "1")
    assert r.returncode == 0 and warning in r.stderr, r.stderr
    r = hwnas_main("search", "--device", "sec", "--max-latency", "20", "--budget", "4",
                   "--no-zoo", "--out", str(tmp_path / "run"))  # fmt: skip
    assert r.returncode == 0 and warning in r.stderr + r.stdout
    r = hwnas_main("runs", "show", "latest")
    assert "  max_latency  20 ms\n" in r.stdout, r.stdout
    # values in ms: nothing said
    r = hwnas_main(
        "predict", "--calibration", str(_calibration(tmp_path / "ms.csv")), "--arch", "1"
    )
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_a_folder_and_a_device_name_read_as_an_option_are_refused_in_plain_words(
    tmp_path, hwnas_home
):
    r = hwnas_main("measure", "import", "--device", "x", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: {tmp_path}: not a readable CSV file (a folder, not a file)"
    path = _calibration(tmp_path / "cal.csv")
    for name in ("-x", ".", ".."):
        r = hwnas_main("measure", "import", f"--device={name}", str(path))
        assert r.returncode == 2
        assert r.stderr.strip() == (
            f"error: device name '{name}': a letter or digit first, then letters, digits, "
            "'-', '_', '.'"
        )
    assert [p.name for p in (hwnas_home / "devices").glob("*.yaml")] == ["cpu-fast.yaml"]
