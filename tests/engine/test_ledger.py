"""The ledger writes Optuna's RDB tables itself (one transaction per batch of trials): what it
writes must read back through the installed Optuna exactly as Optuna's own writes would, and
two ledgers on one study must see each other's trials."""

from __future__ import annotations

import math

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from hwnas.engine.ledger import RdbLedger, make_trial, open_ledger
from hwnas.engine.loop import open_storage

DIST = {"a": CategoricalDistribution(["x", "y", "z"]), "b": CategoricalDistribution([1, 2])}


def _study(tmp_path):
    storage = open_storage(f"sqlite:///{tmp_path / 's.db'}")
    study = optuna.create_study(
        study_name="k", storage=storage, directions=["maximize", "minimize"]
    )
    return storage, study


def test_trials_written_by_the_ledger_read_back_through_optuna(tmp_path):
    storage, study = _study(tmp_path)
    ledger = open_ledger(study._storage, study._study_id, "k")
    assert isinstance(ledger, RdbLedger)
    ledger.load()
    attrs = {"arch": "A", "accuracy": 71.5, "latency_ms_source": "recorded:x", "nested": [1, 2]}
    with ledger.lock():
        ledger.refresh()
        done = ledger.add(
            make_trial(
                TrialState.COMPLETE,
                [71.5, math.inf],
                {"a": "y", "b": 2},
                DIST,
                attrs,
                {"NSGAIISampler:generation": 0, "constraints": [0.5]},
            )
        )
        for arch in ("B", "C"):  # two deferred trials, written when the lock is released
            ledger.add(
                make_trial(TrialState.PRUNED, None, {"a": "x"}, DIST, {"dup": arch}), defer=True
            )
        assert len(optuna.load_study(study_name="k", storage=storage).trials) == 1
    claim = ledger.add(
        make_trial(TrialState.RUNNING, None, {"a": "z"}, DIST, {"arch": "D", "worker": "w"})
    )
    assert ledger.state.claimed == {"D": 3} and ledger.state.completed == {"A": 0}
    finished = ledger.finish(
        claim._trial_id, TrialState.COMPLETE, [60.0, 2.5], {"arch": "D", "accuracy": 60.0}
    )
    assert finished is not None and ledger.state.completed == {"A": 0, "D": 3}

    trials = optuna.load_study(study_name="k", storage=storage).trials
    assert [t.number for t in trials] == [0, 1, 2, 3]
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.PRUNED,
                                         TrialState.PRUNED, TrialState.COMPLETE]  # fmt: skip
    first = trials[0]
    assert first.params == {"a": "y", "b": 2} and first.distributions == DIST
    assert first.values == [71.5, math.inf] and first.user_attrs == attrs
    assert first.system_attrs == {"NSGAIISampler:generation": 0, "constraints": [0.5]}
    assert abs((first.datetime_start - done.datetime_start).total_seconds()) < 1e-3
    assert first.datetime_complete is not None
    assert trials[2].user_attrs == {"dup": "C"} and trials[2].values is None
    assert trials[3].user_attrs == {"arch": "D", "worker": "w", "accuracy": 60.0}
    assert trials[3].values == [60.0, 2.5] and trials[3].params == {"a": "z"}


def test_two_ledgers_see_each_others_claims_and_optunas_own_trials(tmp_path):
    storage, study = _study(tmp_path)
    one = open_ledger(study._storage, study._study_id, "k")
    two = open_ledger(study._storage, study._study_id, "k")
    one.load()
    two.load()
    claim = one.add(make_trial(TrialState.RUNNING, None, {}, {}, {"arch": "A", "worker": "1"}))
    with two.lock():
        assert two.refresh() == []  # a claim is not a finished trial to learn from
        assert two.state.holder("A") == 0 and two.state.taken == 1
    with pytest.warns(UserWarning, match="Heartbeat"):  # Optuna's note: heartbeats outside optimize
        running = study.ask()  # an Optuna client writing the same study, then failing its trial
    study.tell(running, state=TrialState.FAIL)
    one.finish(claim._trial_id, TrialState.COMPLETE, [50.0, 1.0], {"accuracy": 50.0})
    learned = two.refresh()
    assert [(t.number, t.state) for t in learned] == [(0, TrialState.COMPLETE),
                                                      (1, TrialState.FAIL)]  # fmt: skip
    assert two.state.completed == {"A": 0} and not two.state.claimed
    added = two.add(make_trial(TrialState.COMPLETE, [40.0, 3.0], {}, {}, {"arch": "B"}))
    assert added.number == 2
    # a claim that another worker failed as stale cannot be finished: the caller records anew
    stale = one.add(make_trial(TrialState.RUNNING, None, {}, {}, {"arch": "C"}))
    storage.set_trial_state_values(stale._trial_id, TrialState.FAIL)
    assert one.finish(stale._trial_id, TrialState.COMPLETE, [1.0, 1.0], {}) is None
    numbers = [t.number for t in optuna.load_study(study_name="k", storage=storage).trials]
    assert numbers == [0, 1, 2, 3]


def test_study_briefs_count_every_and_the_complete_trials_in_one_query(postgres_url, tmp_path):
    """`hwnas runs list` counted a study's trials with RDBStorage.get_n_trials, which reads
    every trial: twice per study once it counted the complete ones too, 5.4 s for one study
    of 4,666 trials (helper-66). One grouped count now, on SQLite and PostgreSQL alike."""
    import optuna

    from hwnas.engine.ledger import study_briefs

    for url in (f"sqlite:///{tmp_path / 's.db'}", postgres_url):
        storage = optuna.storages.RDBStorage(url)
        study = optuna.create_study(storage=storage, study_name="counted")
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
        study.ask()  # a running trial: counted among all, not among the complete ones
        optuna.create_study(storage=storage, study_name="empty")
        briefs = {name: counts for name, _, *counts in study_briefs(storage)}
        assert briefs == {"counted": [4, 3], "empty": [0, 0]}, url
