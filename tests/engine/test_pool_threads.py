"""A pool strategy plans each round on one BLAS thread: its model is small matrices, where a
thread per core cost more than it computed (a 100-query search twice as long on 2 cores), and
a round's sums are then the same on any machine."""

from __future__ import annotations

from threadpoolctl import threadpool_info, threadpool_limits

from hwnas.devices import get_device
from hwnas.engine.costs import CostContext, table_costs
from hwnas.engine.evaluate import TableEvaluator
from hwnas.engine.frontier import FrontierSampler
from hwnas.engine.loop import SearchSettings, run_search
from hwnas.measure import Profiler
from hwnas.spaces import get_space


def test_each_round_is_planned_on_one_blas_thread(monkeypatch):
    space, device = get_space("nasbench201"), get_device("pixel3")
    threads = []
    plan = FrontierSampler._plan

    def counted(self, *args, **kwargs):
        threads.append({p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"})
        return plan(self, *args, **kwargs)

    monkeypatch.setattr(FrontierSampler, "_plan", counted)
    settings = SearchSettings(space="nasbench201", device="pixel3", budget=30, strategy="frontier")
    ev = TableEvaluator(space, "cifar100", Profiler(device, None), ["latency_ms"])
    costs = CostContext(space, cost=table_costs(space, device, "latency_ms"), budget=30)
    with threadpool_limits(2, user_api="blas"):  # a machine's default: a thread per core
        result = run_search(settings, space, ev.evaluate, costs=costs)
    assert len(result.records) == 30 and len(threads) >= 3  # several rounds planned
    assert all(t == {1} for t in threads), threads
