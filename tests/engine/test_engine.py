"""The search engine on a recorded device: true Pareto sets, limits, resuming, counting."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from hwnas.devices import get_device
from hwnas.engine.costs import CostContext, table_costs
from hwnas.engine.evaluate import TableEvaluator
from hwnas.engine.loop import SearchSettings, run_search
from hwnas.errors import HwnasError
from hwnas.measure import Profiler
from hwnas.spaces import get_space

SPACE = get_space("nasbench201")


def evaluator(device="pixel3", metrics=("latency_ms",)):
    return TableEvaluator(SPACE, "cifar100", Profiler(get_device(device), None), list(metrics))


def brute_force_front(records, metric="latency_ms", limit=None):
    pool = [r for r in records if limit is None or r.costs["latency_ms"].value <= limit]
    return {
        r.arch
        for r in pool
        if not any(
            o.accuracy >= r.accuracy
            and o.costs[metric].value <= r.costs[metric].value
            and (o.accuracy > r.accuracy or o.costs[metric].value < r.costs[metric].value)
            for o in pool
        )
    }


def table_context(device="pixel3", **kwargs):
    dev = get_device(device)
    return CostContext(SPACE, cost=table_costs(SPACE, dev, "latency_ms"), **kwargs)


@pytest.mark.parametrize("strategy", ["nsga2", "random", "surrogate"])
def test_pareto_set_equals_brute_force_on_the_queried_pool(strategy):
    ev = evaluator()
    settings = SearchSettings(space="nasbench201", device="pixel3", budget=80, strategy=strategy)
    result = run_search(settings, SPACE, ev.evaluate, costs=table_context(budget=80))
    assert len(result.records) == 80 == len({r.arch for r in result.records})
    assert ev.accuracy_queries == 80  # duplicates never re-query accuracy
    front = {r.arch for r in result.pareto}
    assert front == brute_force_front(result.records)
    costs = [r.costs["latency_ms"].value for r in result.pareto]
    assert costs == sorted(costs)
    assert result.best.accuracy == max(r.accuracy for r in result.records)
    # values are the table's
    lat = get_device("pixel3").column("nasbench201", "latency_ms")
    acc = SPACE.table_accuracy("cifar100")
    for r in result.records[:10]:
        i = SPACE.index(SPACE.parse(r.arch))
        assert r.accuracy == acc[i] and r.costs["latency_ms"].value == lat[i]


def test_pareto_set_is_exact_on_a_small_complete_pool():
    """On a pool small enough to enumerate, a search that queries all of it returns the pool's
    true Pareto set."""
    # budget 200 over a 5**6 space is not exhaustive; instead restrict the truth to what was
    # queried and compare with the front over the full table restricted to those archs
    ev = evaluator("fpga")
    result = run_search(
        SearchSettings(space="nasbench201", device="fpga", budget=200, strategy="random", seed=3),
        SPACE,
        ev.evaluate,
    )
    from hwnas.engine.pareto import pareto_mask

    idx = np.array([SPACE.index(SPACE.parse(r.arch)) for r in result.records])
    acc = SPACE.table_accuracy("cifar100")[idx]
    lat = get_device("fpga").column("nasbench201", "latency_ms")[idx]
    truth = {result.records[i].arch for i in np.flatnonzero(pareto_mask(acc, lat))}
    assert {r.arch for r in result.pareto} == truth


def test_max_latency_best_is_the_most_accurate_within_the_limit():
    settings = SearchSettings(
        space="nasbench201", device="pixel3", budget=120, max_latency=5.0, seed=1,
        strategy="nsga2",
    )  # fmt: skip
    result = run_search(settings, SPACE, evaluator().evaluate)
    feasible = [r for r in result.records if r.costs["latency_ms"].value <= 5.0]
    assert result.best.costs["latency_ms"].value <= 5.0
    assert result.best.accuracy == max(r.accuracy for r in feasible)
    assert {r.arch for r in result.pareto} == brute_force_front(result.records, limit=5.0)
    assert all(r.costs["latency_ms"].value <= 5.0 for r in result.pareto)


def test_energy_objective_on_pi5():
    ev = evaluator("pi5_onnx", metrics=("energy_mj", "latency_ms"))
    settings = SearchSettings(
        space="nasbench201", device="pi5_onnx", objective="energy", budget=60, strategy="nsga2"
    )
    result = run_search(settings, SPACE, ev.evaluate)
    assert all(set(r.costs) == {"energy_mj", "latency_ms"} for r in result.records)
    assert {r.arch for r in result.pareto} == brute_force_front(result.records, metric="energy_mj")


def test_resume_continues_the_same_study(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    ev = evaluator()
    first = run_search(
        SearchSettings(
            space="nasbench201", device="pixel3", budget=15, study="s", strategy="nsga2"
        ),
        SPACE,
        ev.evaluate,
        storage,
    )
    again = run_search(
        SearchSettings(
            space="nasbench201", device="pixel3", budget=15, study="s", strategy="nsga2"
        ),
        SPACE,
        ev.evaluate,
        storage,
    )
    assert again.new_trials == 0 and ev.accuracy_queries == 15
    more = run_search(
        SearchSettings(
            space="nasbench201", device="pixel3", budget=25, study="s", strategy="nsga2"
        ),
        SPACE,
        ev.evaluate,
        storage,
    )
    assert more.new_trials == 10 and len(more.records) == 25 and ev.accuracy_queries == 25
    assert [r.arch for r in more.records[:15]] == [r.arch for r in first.records]


def test_a_worker_with_its_own_seed_joins_a_named_study_and_replays_on_resume(tmp_path):
    """The seed is not the study's identity (a seed per worker); a worker with its seed that
    resumes proposes what it would have proposed without stopping (hwnas.engine.seeding)."""

    def run(storage, seed, budget):
        s = SearchSettings(
            space="nasbench201", device="pixel3", budget=budget, study="s", strategy="nsga2",
            seed=seed,
        )  # fmt: skip
        return run_search(s, SPACE, evaluator().evaluate, storage)

    whole, parts = (f"sqlite:///{tmp_path / name}.db" for name in ("whole", "parts"))
    run(whole, 1, 10)
    straight = run(whole, 2, 30)  # another seed on the same named study: accepted
    run(parts, 1, 10)
    run(parts, 2, 20)
    resumed = run(parts, 2, 30)  # the seed-2 worker stopped at 20 and started again
    assert [r.arch for r in resumed.records] == [r.arch for r in straight.records]
    assert len({r.arch for r in straight.records}) == 30


def test_a_study_name_cannot_be_reused_for_another_search(tmp_path):
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    run_search(
        SearchSettings(space="nasbench201", device="pixel3", budget=3, study="s", strategy="nsga2"),
        SPACE,
        evaluator().evaluate,
        storage,
    )
    differ = r"made by a different search \(device 'pixel3' there, 'fpga' here\)"
    with pytest.raises(HwnasError, match=differ):
        run_search(
            SearchSettings(
                space="nasbench201", device="fpga", budget=3, study="s", strategy="nsga2"
            ),
            SPACE,
            evaluator("fpga").evaluate,
            storage,
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"budget": 0}, "--budget"),
        ({"max_latency": -1.0}, "--max-latency"),
        ({"strategy": "annealing"}, "unknown strategy"),
        ({"objective": "memory"}, "unknown objective"),
    ],
)
def test_bad_settings(kwargs, message):
    with pytest.raises(HwnasError, match=message):
        SearchSettings(space="nasbench201", device="pixel3", **kwargs)


def _quality(device, records):
    """(share of the true front found, mean regret at the 10/30/50/70/90% latency quantiles)."""
    from hwnas.engine.pareto import pareto_mask

    acc = SPACE.table_accuracy("cifar100")
    lat = get_device(device).column("nasbench201", "latency_ms")
    front = {SPACE.arch_at(int(i)).text for i in np.flatnonzero(pareto_mask(acc, lat))}
    share = len(front & {r.arch for r in records}) / len(front)
    regret = []
    for b in np.quantile(lat, [0.1, 0.3, 0.5, 0.7, 0.9]):
        found = max(r.accuracy for r in records if r.costs["latency_ms"].value <= b)
        regret.append(acc[lat <= b].max() - found)
    return share, float(np.mean(regret))


def test_surrogate_beats_random_with_the_same_budget():
    """100 accuracy queries on the Xeon Gold 6226 table (50-point true front)."""
    quality = {}
    for strategy in ("random", "surrogate"):
        settings = SearchSettings(
            space="nasbench201", device="gold_6226", budget=100, strategy=strategy, seed=0
        )
        result = run_search(
            settings,
            SPACE,
            evaluator("gold_6226").evaluate,
            costs=table_context("gold_6226", budget=100),
        )
        quality[strategy] = _quality("gold_6226", result.records)
    (share_r, regret_r), (share_s, regret_s) = quality["random"], quality["surrogate"]
    assert share_s > share_r and regret_s < regret_r - 1.0, quality


def test_surrogate_only_queries_candidates_within_the_latency_limit():
    settings = SearchSettings(
        space="nasbench201", device="pixel3", budget=40, strategy="surrogate", max_latency=4.0
    )
    result = run_search(
        settings,
        SPACE,
        evaluator().evaluate,
        costs=table_context(max_latency=4.0, budget=40),
    )
    assert len(result.records) == 40
    assert all(r.costs["latency_ms"].value <= 4.0 for r in result.records)


def test_surrogate_needs_a_cost_model():
    settings = SearchSettings(space="nasbench201", device="cpu", budget=5, strategy="surrogate")
    with pytest.raises(HwnasError, match="needs the cost of every candidate"):
        run_search(settings, SPACE, evaluator().evaluate)


def _noisy(arch_text: str):
    from hwnas.devices.base import Measurement
    from hwnas.measure import NoisyMeasurementError

    m = Measurement("cpu", "ort", "latency_ms", "h", arch_text, 1, (1, 3, 32, 32), 2.0, (2.0,))
    return NoisyMeasurementError(dataclasses.replace(m, cv=0.3, flagged=True), 2, 0.15)


def test_a_noisy_candidate_is_skipped_and_never_used():
    import optuna

    ev = evaluator()
    noisy: list[str] = []

    def evaluate(arch):
        if len(noisy) < 3 and SPACE.index(arch) % 3 == 0:  # the first three such are noisy
            noisy.append(arch.text)
            raise _noisy(arch.text)
        return ev.evaluate(arch)

    storage = optuna.storages.InMemoryStorage()
    settings = SearchSettings(
        space="nasbench201", device="pixel3", budget=30, strategy="random", seed=1
    )
    result = run_search(settings, SPACE, evaluate, storage=storage)
    assert len(noisy) == 3 and result.noisy_skipped == 3
    assert len(result.records) == 30  # the budget is still spent on usable measurements
    assert not {r.arch for r in result.records} & set(noisy)
    study = optuna.load_study(study_name=settings.study, storage=storage)
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL]
    assert sorted(t.user_attrs["arch"] for t in failed) == sorted(noisy)
    assert all("too noisy" in t.user_attrs["noisy"] for t in failed)


def test_a_machine_too_noisy_to_time_stops_the_search():
    from hwnas.engine.loop import MAX_NOISY_IN_A_ROW

    calls = []

    def evaluate(arch):
        calls.append(arch)
        raise _noisy(arch.text)

    settings = SearchSettings(
        space="nasbench201", device="pixel3", budget=30, strategy="random", seed=1
    )
    with pytest.raises(HwnasError, match="in a row could not be measured.*too noisy"):
        run_search(settings, SPACE, evaluate, storage=None)
    assert len(calls) == MAX_NOISY_IN_A_ROW


def test_two_latency_limits_never_share_a_default_study_name():
    """main named both -max8ms (':g' keeps 6 digits): the second search was refused as
    'made by a different search' although the user named no study."""
    def name(limit):
        return SearchSettings(space="nasbench201", device="pixel3", max_latency=limit).study

    assert "-max8ms-" in name(8.0) and "-max5.5ms-" in name(5.5)
    assert name(8.0) != name(8.00000001)


def test_supernet_searches_that_differ_only_in_their_settings_never_share_a_study_name():
    """main named `--set preset=small-data` and the plain command alike, and refused the
    second as 'made by a different search'; the plain command keeps its plain name."""
    from hwnas.jobs.supernet import SupernetSettings

    def name(**kw):
        return SupernetSettings(space="nasbench201", device="pixel3", strategy="gdas", **kw).study

    plain = name()
    assert plain == "nasbench201-digits-pixel3-latency-gdas-e5-seed0"
    others = [name(options={"preset": "small-data"}), name(options={"lr": 0.01}),
              name(batch_size=32), name(finetune_epochs=0), name(max_latency=8.0)]  # fmt: skip
    assert len({plain, *others}) == 1 + len(others)
    assert name(options={"preset": "small-data"}) == name(options={"preset": "small-data"})
    assert name(options={"lr": "0.01"}) == name(options={"lr": 0.01})  # typed as --set gives


def test_a_users_accuracy_function_scores_a_candidate_alike_whatever_ran_before():
    """A freshly built network's weights and the function's own draws come from generators
    seeded by the architecture: main drew them from the process's global state, so a resumed
    search (or another worker) scored 3 of 10 candidates differently (8.36% vs 0.0%)."""
    import random

    import torch

    from hwnas.engine.evaluate import FunctionEvaluator

    def accuracy(model, arch, data):  # depends on the initial weights and on fresh draws
        first = next(model.parameters()).detach().flatten()[:8].sum()
        return float(50 + first + torch.rand(1) + np.random.rand() + random.random())

    def fresh():
        return FunctionEvaluator(SPACE, accuracy, Profiler(get_device("pixel3"), None),
                                 ["latency_ms"], "cifar10")  # fmt: skip

    a, b = SPACE.arch_at(11), SPACE.arch_at(4242)
    alone = fresh().evaluate(a).accuracy
    after = fresh()
    after.evaluate(b)
    torch.rand(5), np.random.rand(3), random.random()  # any other draws in between
    assert after.evaluate(a).accuracy == alone
    before = torch.rand(1)  # the caller's own generators are left as they were
    torch.manual_seed(0)
    x = torch.rand(1)
    torch.manual_seed(0)
    fresh().evaluate(b)
    assert torch.rand(1) == x and before.shape == (1,)


def test_a_search_the_device_stops_midway_still_writes_its_run_folder(
    tmp_path, hwnas_home, monkeypatch
):
    """A device that turns noisy after 8 candidates: the search stops after 5 unmeasurable ones
    in a row, in one error line, but the run folder of the 8 scored before is written (its
    summary says why it stopped) and a rerun resumes them. (Before: no run folder; the front
    of the scored architectures was only in the study.)"""
    import json

    from helpers import hwnas_main

    from hwnas.engine.evaluate import TableEvaluator

    calls, plain = [], TableEvaluator.evaluate

    def turning_noisy(self, arch):
        calls.append(arch.text)
        if len(calls) > 8:
            raise _noisy(arch.text)
        return plain(self, arch)

    monkeypatch.setattr(TableEvaluator, "evaluate", turning_noisy)
    args = ["search", "--device", "pixel3", "--budget", "20", "--strategy", "random",
            "--no-zoo", "--out", str(tmp_path / "run")]  # fmt: skip
    r = hwnas_main(*args, cwd=tmp_path)
    assert r.returncode == 1, r.stderr  # stopped part-way, no fault of the input
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "5 candidates in a row could not be measured" in errors[0]
    assert "Traceback" not in r.stderr
    assert f"{tmp_path / 'run'} holds the front of the 8 architectures scored" in errors[0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"].startswith("stopped at 8 of the budget's 20 scored architectures: 5")
    assert (tmp_path / "run" / "pareto.csv").read_text().count("\n") >= 2
    monkeypatch.setattr(TableEvaluator, "evaluate", plain)
    r = hwnas_main(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "20 architectures scored (12 this run)" in r.stdout + r.stderr


def _lost_on_compile(monkeypatch, after: int, gate=None) -> list[int]:
    """ONNX Runtime's compile raises DeviceUnavailableError (a phone unplugged) once it has
    compiled ``after`` models (counted while ``gate()`` is true, default always)."""
    import hwnas.runtimes.onnxruntime as ort_runtime
    from hwnas.errors import DeviceUnavailableError

    plain, count = ort_runtime.OnnxRuntime.compile, [0]

    def compile(self, *args, **kwargs):
        if gate is None or gate():
            count[0] += 1
            if count[0] > after:
                raise DeviceUnavailableError("the phone stopped answering: adb: device offline")
        return plain(self, *args, **kwargs)

    monkeypatch.setattr(ort_runtime.OnnxRuntime, "compile", compile)
    return count


def test_a_device_lost_part_way_through_measure_or_a_few_shot_search_exits_1(
    tmp_path, hwnas_home, monkeypatch
):
    """`hwnas measure` of 3 models whose device goes away after the first, and a few-shot
    search whose device goes away in its verification by measurement: both exited 2 (a
    mistake in the input) and the few-shot search wrote no run folder, although its 8
    architectures were scored. Both now exit 1 (stopped part-way, no fault of the input; the
    rerun resumes), and the search writes the run folder of the front it searched."""
    import json

    from helpers import hwnas_main

    import hwnas.engine.fewshot as fewshot
    from hwnas.runtimes.onnxruntime import OnnxRuntime

    compile_ = OnnxRuntime.compile
    _lost_on_compile(monkeypatch, 1)
    r = hwnas_main("measure", "--device", "cpu-fast", "--arch", "5", "--arch", "7",
                   "--arch", "9", cwd=tmp_path)  # fmt: skip
    assert r.returncode == 1, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert errors == ["error: the phone stopped answering: adb: device offline"], r.stderr
    assert "1/3 models" in r.stderr and "Traceback" not in r.stderr

    verifying = [False]
    plain_verify = fewshot.verify

    def verify(*args, **kwargs):
        verifying[0] = True
        return plain_verify(*args, **kwargs)

    monkeypatch.setattr(fewshot, "verify", verify)
    monkeypatch.setattr(OnnxRuntime, "compile", compile_)  # the device is back
    _lost_on_compile(monkeypatch, 1, gate=lambda: verifying[0])
    args = ["search", "--device", "cpu-fast", "--predictor", "nasbench201", "--budget", "8",
            "--no-zoo", "--out", str(tmp_path / "run")]  # fmt: skip
    r = hwnas_main(*args, cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: the phone stopped answering: adb: device offline; {tmp_path / 'run'} holds the "
        "front of the 8 architectures scored before (rerun the command to resume)"
    ], r.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"].startswith("stopped in the verification by measurement, after 1 ")
    assert summary["trials"]["completed"] == 8 and summary["accuracy_queries_this_run"] == 8


def test_a_device_lost_mid_search_stops_it_and_writes_the_run_folder(
    tmp_path, hwnas_home, monkeypatch
):
    """A device that goes away after 3 candidates (a phone unplugged, an RPC board that stopped
    answering: DeviceUnavailableError): the search stopped in one line but wrote no run folder,
    the front of what it had scored only in the study. It now stops at once (no 5 tries),
    writes the run folder of the 3 scored, says why in summary.json, and a rerun resumes."""
    import json

    from helpers import hwnas_main

    from hwnas.errors import DeviceUnavailableError

    calls, plain = [], TableEvaluator.evaluate

    def unplugged(self, arch):
        calls.append(arch.text)
        if len(calls) > 3:
            raise DeviceUnavailableError("device 'myboard' (RPC key 'b') stopped answering")
        return plain(self, arch)

    monkeypatch.setattr(TableEvaluator, "evaluate", unplugged)
    args = ["search", "--device", "pixel3", "--budget", "6", "--strategy", "random",
            "--no-zoo", "--out", str(tmp_path / "run")]  # fmt: skip
    r = hwnas_main(*args, cwd=tmp_path)
    assert r.returncode == 1 and len(calls) == 4, r.stderr  # stopped part-way
    errors = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "Traceback" not in r.stderr, r.stderr
    assert errors[0].startswith("error: device 'myboard' (RPC key 'b') stopped answering; ")
    assert f"{tmp_path / 'run'} holds the front of the 3 architectures scored" in errors[0]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["stopped"] == (
        "stopped at 3 of the budget's 6 scored architectures: device 'myboard' (RPC key 'b') "
        "stopped answering"
    )
    monkeypatch.setattr(TableEvaluator, "evaluate", plain)
    r = hwnas_main(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "6 architectures scored (3 this run)" in r.stdout + r.stderr


def test_a_supernet_energy_search_names_energy_in_mj_and_refuses_a_latency_limit():
    """`--objective energy --strategy darts --max-latency 2` trained, then crashed with
    KeyError 'latency_ms' (a supernet search measures its objective alone); `--latency-target
    3` with energy was reported as "the latency target 3 ms"."""
    from hwnas.jobs.supernet import SupernetSettings, _derived_rule

    with pytest.raises(HwnasError, match="--max-latency limits a supernet search of latency"):
        SupernetSettings(space="nasbench201", device="pi5_onnx", strategy="darts",
                         objective="energy", max_latency=2.0)  # fmt: skip
    energy = SupernetSettings(space="nasbench201", device="pi5_onnx", strategy="darts",
                              objective="energy", latency_target=3.0)  # fmt: skip
    assert _derived_rule(energy) == "architecture derived by darts for the energy target 3 mJ"
    latency = SupernetSettings(space="nasbench201", device="pixel3", strategy="darts",
                               latency_weight=0.5)  # fmt: skip
    assert _derived_rule(latency) == "architecture derived by darts with latency weight 0.5"


def test_fbnet_and_proxylessnas_train_with_their_papers_hardware_term_by_default():
    """FBNet's and ProxylessNAS's latency term is their method: `--strategy fbnet` without
    `--latency-weight` trained for accuracy alone (no hardware term) and derived the most
    accurate cell whatever its latency. Now the paper's weight (FBNet beta 0.6, ProxylessNAS
    0.3) is the default; `--latency-weight 0` or a target replaces it; DARTS, GDAS, SPOS and
    Single-Path, whose papers have no such term, still default to none."""
    from hwnas.jobs.supernet import SupernetSettings

    def weight(strategy, **kw):
        return SupernetSettings(device="pixel3", strategy=strategy, **kw).latency_weight

    assert (weight("fbnet", space="fbnet"), weight("proxyless", space="ofa")) == (0.6, 0.3)
    assert weight("fbnet", space="fbnet", latency_weight=0.0) == 0.0
    assert weight("fbnet", space="fbnet", latency_target=9.0) is None
    for strategy in ("darts", "gdas", "oneshot"):
        assert weight(strategy, space="nasbench201") is None
    assert weight("singlepath", space="ofa") is None
    default = SupernetSettings(space="fbnet", device="pixel3", strategy="fbnet")
    assert "-weight0.6-" in default.study  # its study is not an accuracy-only search's


def test_a_run_folder_of_another_study_is_never_replaced(tmp_path, hwnas_home):
    """`--study b --out runs/a` replaced study a's pareto.csv, summary.json and zoo without a
    word; a supernet search retrained over a's supernet.pt. Refused now before any work; the
    same study goes on as before."""
    from helpers import hwnas_main

    run = tmp_path / "runs" / "a"
    args = ["search", "--device", "pixel3", "--budget", "5", "--no-zoo", "--out", str(run)]
    assert hwnas_main(*args, "--study", "a").returncode == 0
    before = (run / "summary.json").read_bytes()
    r = hwnas_main(*args, "--study", "b")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "holds the run of study 'a' (its summary.json), which this search ('b')" in r.stderr
    assert (run / "summary.json").read_bytes() == before
    assert hwnas_main(*args, "--study", "a").returncode == 0


def test_a_run_folder_of_the_same_study_name_in_another_storage_is_never_replaced(
    tmp_path, hwnas_home, monkeypatch
):
    """The same command with another --storage, or from the same folder with another
    HWNAS_HOME, replaced the run folder of the study of that name in the first storage and
    deleted its zoo (helper-48). Refused now before any work, naming the other storage; the
    first storage goes on as before, and a relative SQLite path is its absolute one."""
    from helpers import hwnas_main

    run = tmp_path / "runs" / "a"
    args = ["search", "--device", "pixel3", "--budget", "5", "--no-zoo", "--out", str(run)]
    assert hwnas_main(*args).returncode == 0
    before = (run / "summary.json").read_bytes()
    other = f"sqlite:///{tmp_path / 'other.db'}"
    r = hwnas_main(*args, "--storage", other)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"in another storage (sqlite:///{hwnas_home / 'studies.db'}" in r.stderr
    assert f"(its study in {other}) would replace" in r.stderr
    monkeypatch.setenv("HWNAS_HOME", str(tmp_path / "home2"))
    r = hwnas_main(*args)
    assert r.returncode == 2 and "in another storage" in r.stderr, r.stderr
    assert (run / "summary.json").read_bytes() == before
    assert not (tmp_path / "other.db").exists()  # refused before the storage was made
    monkeypatch.setenv("HWNAS_HOME", str(hwnas_home))
    assert hwnas_main(*args, "--storage", f"sqlite:///{hwnas_home / 'studies.db'}").returncode == 0
    monkeypatch.chdir(hwnas_home)
    assert hwnas_main(*args, "--storage", "sqlite:///studies.db").returncode == 0
