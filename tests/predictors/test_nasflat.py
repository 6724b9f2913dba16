"""NASFLAT's protocol pieces: the Eagle devices as recorded devices, the sample selectors, the
broad prior family of the meta-learned head, and the protocol code on a small split."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from hwnas.cli import app as cli
from hwnas.errors import HwnasError, UnknownNameError
from hwnas.predictors import load_predictor
from hwnas.predictors.data import NASFLAT_SPLITS, get_column, recorded_columns, reference_indices
from hwnas.predictors.metrics import scores
from hwnas.predictors.selection import select
from hwnas.spaces import get_space

REPO = Path(__file__).resolve().parents[2]


def test_every_nasflat_split_device_is_a_recorded_column():
    for space, splits in NASFLAT_SPLITS.items():
        keys = {c.key for c in recorded_columns(space, ("latency_ms",))}
        for name, split in splits.items():
            assert not set(split["train"]) & set(split["test"]), name
            assert set(split["train"]) | set(split["test"]) <= keys, name


def test_an_eagle_device_is_listed_and_searched_on_its_own_values(tmp_path):
    runner = CliRunner()
    listed = runner.invoke(cli, ["devices", "--json"])
    assert listed.exit_code == 0, listed.output
    devices = {d["device"]: d for d in json.loads(listed.stdout)["devices"]}
    tpu = devices["embedded_tpu_edge_tpu_int8"]
    assert tpu["class"] == "asic"
    assert tpu["table_rows"] == {"nasbench201": 15284}  # 341 unconnected cells: no value
    out = tmp_path / "run"
    r = runner.invoke(
        cli,
        ["search", "-d", "embedded_tpu_edge_tpu_int8", "--budget", "12", "--no-zoo",
         "--max-latency", "1.2", "--out", str(out)],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    column = get_column("nasbench201", "embedded_tpu_edge_tpu_int8").values
    space = get_space("nasbench201")
    rows = [line.split(",") for line in (out / "pareto.csv").read_text().splitlines()[1:]]
    assert rows
    for row in rows:  # the front's latencies are the table's own values, within the limit
        value = column[space.index(space.parse(row[0]))]
        assert float(row[3]) == pytest.approx(value, rel=1e-5) and value <= 1.2
        assert "nasbench201_eagle_latency_ms.csv.gz" in row[4]


def test_selectors_pick_distinct_candidates():
    space = "fbnet"
    rng = np.random.default_rng(0)
    candidates = np.arange(0, 5000, 3)
    ref = [i for i in reference_indices(space) if i in set(candidates)]
    picks = select("reference", space, len(ref) + 4, candidates, rng)
    assert picks[: len(ref)] == ref and len(set(picks)) == len(picks)
    pred = load_predictor("fbnet-help", space)
    for name in ("nasflat", "random", "active"):
        picks = select(name, space, 9, candidates, rng, predictor=pred)
        assert len(set(picks)) == 9 and set(picks) <= set(candidates.tolist()), name
    with pytest.raises(UnknownNameError):
        select("oracle", space, 5)
    with pytest.raises(HwnasError, match="cannot pick 6"):
        select("random", space, 6, [1, 2, 3])
    with pytest.raises(HwnasError, match="needs a meta-learned predictor"):
        select("active", space, 5)


def test_head_adapts_to_a_device_unlike_every_training_device():
    """nasbench201-help saw GPUs, Xeons and phones (PyTorch and TFLite); the Edge TPU's costs
    follow none of them (Spearman rho 0.1-0.5 with the GPUs), and the broad prior family
    (independent costs per operation count) takes over from 20 measurements."""
    space = "nasbench201"
    archs = get_space(space).all_archs()
    y = get_column(space, "embedded_tpu_edge_tpu_int8").values
    measured = np.nonzero(np.isfinite(y))[0]
    picks = select("nasflat", space, 20, measured, np.random.default_rng(1))
    pred = load_predictor("nasbench201-help", space).fit([archs[i] for i in picks], y[picks])
    rho = scores(pred.predict(archs)[0][measured], y[measured])["spearman_rho"]
    assert rho >= 0.93


def test_protocol_code_on_a_small_split(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "nasflat_protocol", REPO / "experiments" / "nasflat_protocol.py"
    )
    protocol = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(protocol)
    split = {"tiny": {"train": ("1080ti_1", "pixel3"), "test": ("raspi4",)}}

    class Quiet:
        def print(self, *_):
            pass

    rows = protocol.evaluate_split(
        "fbnet", "tiny", [1], [5], ["nasflat", "reference"], 300, tmp_path, 20, Quiet(),
        splits={"fbnet": split},
    )  # fmt: skip
    assert len(rows) == 2
    y = get_column("fbnet", "raspi4").values
    for row in rows:
        assert row["device"] == "raspi4" and len(set(row["picks"])) == 5
        assert -1 <= row["help"] <= 1 and 0.3 <= row["nasflat"] <= 1
        assert np.isfinite(y[row["picks"]]).all()
    query = protocol.help_query(y, "fbnet")  # HELP's scored set: trimmed to 800 of 1,000
    assert len(query) == 800 and query.min() >= 4000
    assert y[query].min() >= np.quantile(y[4000:5000], 0.09)
