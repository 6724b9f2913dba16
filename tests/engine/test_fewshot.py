"""Few-shot search: calibrate on the reference set, search on predicted costs, verify by
measurement, never reading more device values than the budget allows."""

from __future__ import annotations

import json

import pytest

from hwnas.devices import get_device
from hwnas.engine.fewshot import (
    BudgetSpent,
    FewShotPlan,
    MeasurementBudget,
    plan_fewshot,
    run_fewshot,
)
from hwnas.engine.loop import SearchSettings
from hwnas.errors import HwnasError
from hwnas.measure import Profiler
from hwnas.predictors import load_predictor
from hwnas.spaces import get_space


def plan(budget: int, metrics=("latency_ms",)) -> FewShotPlan:
    return FewShotPlan(
        load_predictor("nasbench201-help", "nasbench201"), "nasbench201-help", budget, list(metrics)
    )


def test_latency_limit_is_met_by_measured_latency_within_the_budget():
    space = get_space("nasbench201")
    device = get_device("fpga")  # unseen by nasbench201-help
    profiler = Profiler(device, None)
    settings = SearchSettings(space="nasbench201", device="fpga", max_latency=5.0, budget=40)
    result, extra, evaluator = run_fewshot(settings, space, profiler, plan(14))
    table = device.column("nasbench201", "latency_ms")
    assert result.best is not None and extra["best_verified"] is True
    measured = table[space.index(space.parse(result.best.arch))]
    assert measured <= 5.0 and result.best.costs["latency_ms"].value == measured
    assert isinstance(extra["device_measurements"], int)
    assert 10 < extra["device_measurements"] <= 14
    assert profiler.counts.read == extra["device_measurements"] * 1  # one metric per arch
    assert evaluator.accuracy_queries == 40
    assert all(
        r.attrs["latency_ms_source"].startswith(("predicted:", "recorded:")) for r in result.records
    )


def test_surrogate_searches_on_predicted_costs_never_the_devices_table():
    space = get_space("nasbench201")
    device = get_device("eyeriss")  # unseen by nasbench201-help
    profiler = Profiler(device, None)
    settings = SearchSettings(
        space="nasbench201", device="eyeriss", max_latency=7.0, budget=60, strategy="surrogate"
    )
    result, extra, _ = run_fewshot(settings, space, profiler, plan(14))
    assert profiler.counts.read == extra["device_measurements"] <= 14
    assert len(result.records) == 60 and extra["best_verified"] is True
    table = device.column("nasbench201", "latency_ms")
    assert table[space.index(space.parse(result.best.arch))] <= 7.0
    unmeasured = [r for r in result.records if r.attrs["latency_ms_source"].startswith("predicted")]
    assert len(unmeasured) >= 60 - 14


def test_a_recorded_device_searched_as_new_hands_strategies_no_table_costs(tmp_path):
    from hwnas.jobs.table import prepare

    settings = SearchSettings(space="nasbench201", device="eyeriss", strategy="surrogate")
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    job = prepare(settings, storage, None, measurement_budget=14)  # a table: no store read
    assert job.fewshot is not None and job.costs.cost is None and job.costs.latency is None
    measured = prepare(SearchSettings(space="nasbench201", device="eyeriss"), storage, None)
    assert measured.fewshot is None and measured.costs.cost is not None


def test_pareto_candidates_are_verified_most_accurate_first():
    space = get_space("nasbench201")
    device = get_device("gold_6226")
    settings = SearchSettings(space="nasbench201", device="gold_6226", budget=30)
    result, extra, _ = run_fewshot(settings, space, Profiler(device, None), plan(13))
    table = device.column("nasbench201", "latency_ms")
    assert extra["device_measurements"] <= 13 and extra["verification"]
    accs = [v["accuracy"] for v in extra["verification"]]
    assert accs == sorted(accs, reverse=True)
    for v in extra["verification"]:
        assert v["measured"]["latency_ms"] == table[space.index(space.parse(v["arch"]))]


def test_budget_is_a_hard_cap():
    space = get_space("nasbench201")
    budget = MeasurementBudget(
        Profiler(get_device("pixel2"), None), space, "cifar100", ["latency_ms"], 3
    )
    archs = space.all_archs()[:4]
    for a in archs[:3]:
        budget.measure(a)
    budget.measure(archs[0])  # already measured: free
    assert budget.used == 3
    with pytest.raises(BudgetSpent):
        budget.measure(archs[3])


def test_plan_rejects_bad_settings():
    space = get_space("nasbench201")
    device = get_device("fpga")
    s = SearchSettings(space="nasbench201", device="fpga")
    assert plan_fewshot(s, space, device, None, None) is None  # a recorded table: no plan
    with pytest.raises(HwnasError, match="at least 4"):
        plan_fewshot(s, space, device, None, 3)
    with pytest.raises(HwnasError, match="is for space 'fbnet'"):
        plan_fewshot(s, space, device, "fbnet-help", None)
    p = plan_fewshot(s, space, device, None, 12)
    assert p.budget == 12 and p.predictor.name == "nasbench201"
    assert s.study.endswith("-predicted-nasbench201-m12")


def test_search_cli_reports_device_measurements_and_predictor(tmp_path, capsys):
    from hwnas.cli import main

    out = tmp_path / "run"
    code = main(
        [
            "search", "--device", "eyeriss", "--measurement-budget", "12", "--budget", "20",
            "--predictor", "nasbench201-help", "--no-zoo", "--out", str(out),
            "--storage", f"sqlite:///{tmp_path / 's.db'}",
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    summary = json.loads((out / "summary.json").read_text())
    assert type(summary["device_measurements"]) is int and summary["device_measurements"] <= 12
    assert summary["predictor"]["name"] == "nasbench201-help"
    assert summary["predictor"]["path"].endswith("nasbench201-help")
    assert "nasbench201-help" in captured.err + captured.out
    rows = (out / "pareto.csv").read_text().splitlines()
    assert "predicted:nasbench201-help" in "".join(rows) or "recorded:" in "".join(rows)


def test_each_cost_is_one_record_from_the_predictor_or_the_device_to_the_study():
    """A predicted cost carries its 90% interval (around the prediction), a verified one the
    device's value and source and no interval; what the study holds reads back as the same
    records (a resumed search sees what this one saw)."""
    import optuna

    from hwnas.cost_record import CostRecord
    from hwnas.engine.ledger import study_ledger
    from hwnas.engine.loop import completed_records

    space = get_space("nasbench201")
    device = get_device("fpga")
    storage = optuna.storages.InMemoryStorage()
    settings = SearchSettings(space="nasbench201", device="fpga", budget=30, study="rec")
    result, extra, _ = run_fewshot(settings, space, Profiler(device, None), plan(14), storage)
    table = device.column("nasbench201", "latency_ms")
    verified = {v["arch"] for v in extra["verification"]}
    assert verified and len(verified) < len(result.records)
    for r in result.records:
        cost = r.costs["latency_ms"]
        assert isinstance(cost, CostRecord) and cost.unit == "ms"
        if r.arch in verified:  # the device's value replaced the prediction
            assert cost.value == table[space.index(space.parse(r.arch))]
            assert cost.source.startswith("recorded:") and cost.interval is None
            assert r.attrs["latency_ms_predicted"] is not None
        else:
            lo, hi = cost.interval
            assert cost.source.startswith("predicted:") and lo < cost.value < hi
    study = optuna.load_study(study_name="rec", storage=storage)
    ledger = study_ledger(study, "rec")
    ledger.load()  # as a resumed search reads it
    stored = {r.arch: r.costs["latency_ms"] for r in completed_records(ledger)}
    predicted = [r for r in result.records if r.arch not in verified]
    assert len(stored) == len(result.records)
    assert all(stored[r.arch] == r.costs["latency_ms"] for r in predicted)


def test_a_live_measurement_keeps_its_precision_in_its_record():
    from hwnas.cost_record import CostRecord
    from hwnas.devices.base import Measurement

    m = Measurement("cpu", "ort", "latency_ms", "h", "x", 1, (1, 3, 32, 32), 2.5,
                    extra={"rel_ci": 0.02}, source="measured:cpu:ort")  # fmt: skip
    missed = CostRecord.of_measurement(m, target_rel_ci=0.01)
    assert (missed.rel_ci95, missed.precision_met, missed.timed) == (0.02, False, True)
    assert CostRecord.of_measurement(m, target_rel_ci=0.05).precision_met is True
    assert CostRecord.from_attrs(missed.attrs(), "latency_ms") == missed
    table = CostRecord.of_measurement(Measurement("pixel3", "recorded", "latency_ms", "h", "x", 1,
                                                  (1, 3, 32, 32), 4.0, source="recorded:t:c"))
    assert not table.timed and set(table.attrs()) == {"latency_ms", "latency_ms_source"}


@pytest.mark.parametrize(
    ("device_name", "stand_ins"),
    [("pi5_torchmobile", 5), ("mobile_gpu_snapdragon_855_adreno_640_int8", 0)],
)
def test_a_recorded_device_with_a_partial_table_is_searched_on_what_it_holds(
    device_name, stand_ins
):
    """The Pi 5 tables measured one NAS-Bench-201 cell per isomorphism class (6,466 of 15,625),
    the Eagle ones lack the 341 cells whose output ignores the input. A few-shot search there
    calibrates on the measured cell of each reference cell's class and searches and verifies
    only cells the table holds (main: "no recorded latency_ms for ..." at the calibration on
    the Pi 5, at the verification on the Eagle phone; exit 2)."""
    from hwnas.predictors.data import reference_indices

    space = get_space("nasbench201")
    device = get_device(device_name)
    table = device.column("nasbench201", "latency_ms")
    settings = SearchSettings(space="nasbench201", device=device_name, budget=30)
    result, extra, _ = run_fewshot(settings, space, Profiler(device, None), plan(16))
    calibrated = [space.index(space.parse(c["arch"])) for c in extra["calibration"]]
    assert len(calibrated) == 10 and all(table[i] == table[i] for i in calibrated)
    ref = reference_indices("nasbench201")
    assert sum(i not in ref for i in calibrated) == stand_ins
    for c, i in zip(extra["calibration"], calibrated):
        assert c["latency_ms"] == table[i]
        if i not in ref:  # the stand-in computes what a reference cell computes
            assert any(space.unique_str(space.arch_at(r)) == space.unique_str(space.arch_at(i))
                       for r in ref)  # fmt: skip
    assert len(result.records) == 30 and extra["verification"]
    assert all(table[space.index(space.parse(r.arch))] > 0 for r in result.records)
    for v in extra["verification"]:
        assert v["measured"]["latency_ms"] == table[space.index(space.parse(v["arch"]))]
