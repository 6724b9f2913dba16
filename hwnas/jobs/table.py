"""`hwnas search` as functions: :func:`prepare` resolves names and opens the device, store and
storage (every user error surfaces here, before work starts); :func:`search` runs the study and
writes the run folder. Experiments call :func:`hwnas.engine.loop.run_search` directly with an
in-memory study.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from hwnas.devices import Device
from hwnas.engine.costs import (
    CostContext,
    CostModel,
    CostRequest,
    make_cost_model,
    table_costs,
)
from hwnas.engine.evaluate import FunctionEvaluator, TableEvaluator, get_accuracy
from hwnas.engine.fewshot import FewShotPlan, plan_fewshot, run_fewshot
from hwnas.engine.loop import (
    SearchHalted,
    SearchResult,
    SearchSettings,
    TrialRecord,
    check_stored_budget,
    run_search,
)
from hwnas.engine.plot import PlotProcess
from hwnas.engine.problem import open_problem, resolve
from hwnas.engine.strategies import FALLBACK, TABLE_STRATEGIES, can_predict
from hwnas.errors import HwnasError
from hwnas.jobs.output import RunOutput, write_run
from hwnas.measure import Profiler
from hwnas.progress import SILENT, Reporter
from hwnas.registry import load
from hwnas.spaces import IndexedSpace, SearchSpace, TabulatedSpace, ability, get_space


def device_metrics(device, settings: SearchSettings) -> list[str]:
    """Metrics to obtain per architecture: the objective's, latency, and energy where known
    (the device's metrics were checked by :func:`hwnas.engine.problem.resolve`)."""
    wanted = [settings.metric, "latency_ms", "energy_mj"]
    return [m for m in dict.fromkeys(wanted) if m in device.metrics]


@dataclass
class PreparedSearch:
    """A search whose names are resolved and whose device, store and storage are open."""

    settings: SearchSettings
    space: SearchSpace
    device: Device
    profiler: Profiler
    evaluator: TableEvaluator | FunctionEvaluator
    storage_url: str
    storage: Any
    costs: CostContext
    fewshot: FewShotPlan | None = None


def prepare(
    settings: SearchSettings,
    storage: str | None = None,
    store_path: Path | None = None,
    predictor: str | None = None,
    measurement_budget: int | None = None,
) -> PreparedSearch:
    """Check every name and open what the search needs, before any work starts.

    With ``predictor`` or ``measurement_budget``, or on a device that cannot take new
    measurements, the search is few-shot (:mod:`hwnas.engine.fewshot`).

    Raises:
        HwnasError: unknown space, dataset or device; unreachable device; a device without
            the metric or space; unusable measurement store or study storage; unknown
            predictor or one of another space; a measurement budget below 4; a latency limit
            below every latency of the device's table; a device table of another dataset's
            input size; an accuracy function on a device that cannot measure.
    """
    accuracy = _accuracy_source(settings, predictor, measurement_budget)
    space, device = resolve(settings)
    for metric in dict.fromkeys((settings.metric, "latency_ms")):  # the table networks: these
        device.check_table_dataset(space.name, metric, settings.dataset)
    data = _function_data(settings, space)
    if data is None and getattr(accuracy, "needs_data", False):  # before any measurement
        raise HwnasError(
            f"the accuracy function {settings.accuracy} takes (model, arch, data): give the "
            "data to hand it, --data digits or a folder (data= from Python)"
        )
    metrics = device_metrics(device, settings)
    fewshot = plan_fewshot(settings, space, device, predictor, measurement_budget)
    if fewshot is not None and accuracy is not None:  # an imported device: few-shot
        raise HwnasError(
            f"device '{device.name}' cannot measure, so its costs would be predicted, and a "
            "search on predicted costs reads an accuracy table; with --accuracy search a "
            "device that measures each subnet (hwnas devices)"
        )
    check = TABLE_STRATEGIES.info(settings.strategy).get("check")
    if check is not None:  # what the strategy alone needs (exact: full tables)
        load(check)(settings, space, device, fewshot)
    # a few-shot search must not read the table beyond its measurement budget: its costs come
    # from the adapted predictor (set in run_fewshot)
    costs = CostContext(
        space,
        cost=None if fewshot else table_costs(space, device, settings.metric),
        latency=None if fewshot else table_costs(space, device, "latency_ms"),
        max_latency=settings.max_latency,
        budget=settings.budget,
        dataset=settings.dataset,
    )
    needs_costs = TABLE_STRATEGIES.info(settings.strategy).get("needs_costs", False)
    # a live device: costs predicted from its reference set, measured when the search starts
    predict_live = (
        needs_costs
        and costs.cost is None
        and fewshot is None
        and device.can_measure
        and can_predict(space)
    )
    if needs_costs and costs.cost is None and fewshot is None and not predict_live:
        raise HwnasError(
            f"strategy '{settings.strategy}' needs every candidate's {settings.metric} before "
            f"measuring it, and device '{device.name}' has no table or predictor for it; "
            f"use --strategy {FALLBACK}"
        )
    if not needs_costs and fewshot is None:
        _check_covered(settings, space, device)
    if fewshot is None:
        check_feasible(settings.max_latency, "--max-latency", space, device)
    problem = open_problem(settings, space, device, storage, store_path)
    check_stored_budget(settings, problem.storage)
    if predict_live:

        def calibrated(metric: str) -> CostModel:  # the reference set measured on first use
            request = CostRequest(space, device, problem.profiler, metric, on_use=True)
            return make_cost_model("predicted", request)

        costs.cost = calibrated(settings.metric)
        if settings.max_latency is not None and settings.metric != "latency_ms":
            costs.latency = calibrated("latency_ms")
    # the objective's value, and latency under a latency limit; the rest where known
    required = 2 if settings.max_latency is not None and settings.metric != "latency_ms" else 1
    evaluator: Any = (
        TableEvaluator(space, settings.dataset, problem.profiler, metrics, required)
        if accuracy is None
        else FunctionEvaluator(
            space, accuracy, problem.profiler, metrics, settings.dataset, data,
            required=required,
        )  # fmt: skip
    )
    return PreparedSearch(
        settings, space, device, problem.profiler, evaluator, problem.storage_url,
        problem.storage, costs, fewshot,
    )  # fmt: skip


MIN_COVERED = 0.9
"""Least share of the space a device's table must hold for a strategy that proposes from the
whole space: it skips each architecture the table lacks (a failed trial, which does not count
towards :data:`hwnas.engine.loop.MAX_NOISY_IN_A_ROW`), and below this share most of its
proposals, bounded by 20 per query of the budget, would be such skips."""


def _check_covered(settings: SearchSettings, space: SearchSpace, device: Any) -> None:
    """A strategy that proposes from the whole space (not from the candidates whose cost is
    known) skips the architectures a device's table lacks; on a table holding less than
    :data:`MIN_COVERED` of the space it would skip most proposals.

    Raises:
        HwnasError: the device's table holds less than :data:`MIN_COVERED` of the space (one
            line: how many it holds, and the strategies that search what it holds).
    """
    import numpy as np

    column = device.table(space.name, settings.metric)
    if column is None:
        return
    held = int(np.isfinite(column).sum())
    size = max(len(column), space.num_architectures())  # FBNet's table: a sample of 1e20+
    if held < MIN_COVERED * size:
        info = TABLE_STRATEGIES.info  # cost-aware ones with no check of their own (exact's:
        names = [  # full tables)
            n for n in TABLE_STRATEGIES if info(n).get("needs_costs") and not info(n).get("check")
        ]
        pool = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        of = f"{size:,}" if size < 10**9 else f"{size:.4g}"  # FBNet's: 9.848e+20
        raise HwnasError(
            f"the {settings.metric} table of device '{device.name}' holds {held:,} of the {of} "
            f"architectures of {space.name}, and strategy '{settings.strategy}' proposes from "
            f"all of them; use --strategy {pool}, which search the architectures the table holds"
        )


def check_feasible(
    limit: float | None,
    option: str,
    space: SearchSpace,
    device: Any,
    whole: bool = False,
    metric: str = "latency_ms",
    target: bool = False,
) -> None:
    """Under a ``limit`` of ``metric`` (ms, or mJ for energy) on a device whose table the
    search reads, some architecture of the table must meet it: otherwise every strategy would
    spend its budget (or a supernet its training) on architectures none of which can be the
    answer.

    Args:
        limit: ``--max-latency`` or ``--latency-target``, or None (nothing checked).
        option: the option's name, for the message.
        whole: the search prices architectures the table lacks by its lookup table (a
            supernet search): a table of a space it can list whole (the Pi 5's 6,466 of
            NAS-Bench-201's 15,625 cells) is checked with those predictions too
            (:func:`_gap_predictions`); a table sampled from a larger space (OFA's and
            FBNet's 5,000) against the space's range: its values joined with the lookup
            table's bounds over the whole space, widened by its error margin
            (:func:`_check_sampled`).
        metric: the device metric the limit is on.
        target: the limit is a target the search pulls towards (``--latency-target``): one
            above every recorded value is refused too (a 1e9 ms target trained and derived a
            whole supernet for an answer no architecture comes near).

    Raises:
        HwnasError: no recorded value is within the limit, or, for a target, none reaches it
            (one line: the limit and the recorded extreme, in the metric's unit); with
            ``whole`` on a sampled table, the limit below the space's range, or a target
            above it (one line: the range).
    """
    import numpy as np

    from hwnas.cost_record import bound_text, unit_of

    if limit is None:
        return
    column = device.table(space.name, metric)
    if column is None:  # measured or predicted as the search goes
        return
    recorded = column[np.isfinite(column)]
    guessed = np.empty(0)
    if whole and recorded.size < space.num_architectures():
        gaps = _gap_predictions(space, device, metric)
        if gaps is None:  # a sampled table (OFA, FBNet): the space's range, bounded
            _check_sampled(limit, option, space, device, metric, target, recorded)
            return
        guessed = gaps
    unit = unit_of(metric, device.value_batch_size)  # a GPU's table: "ms per batch of 32"
    least = "fastest" if metric == "latency_ms" else "least"
    values = "latencies" if metric == "latency_ms" else f"{metric.split('_')[0]} values"
    lacks = f"the lookup table fitted on them predicts the {guessed.size:,} others it lacks at "
    if recorded.size and min(recorded.min(), guessed.min(initial=np.inf)) > limit:
        raise HwnasError(
            f"no architecture of {space.name} meets {option} {limit:g} {unit} on device "
            f"'{device.name}': the {least} of its {recorded.size:,} recorded {values} is "
            f"{bound_text(recorded.min())} {unit}"
            + (f", and {lacks}least {bound_text(guessed.min())} {unit}" if guessed.size else "")
        )
    if target and recorded.size and max(recorded.max(), guessed.max(initial=0)) < limit:
        most = "slowest" if metric == "latency_ms" else "largest"
        raise HwnasError(
            f"no architecture of {space.name} reaches {option} {limit:g} {unit} on device "
            f"'{device.name}': the {most} of its {recorded.size:,} recorded {values} is "
            f"{bound_text(recorded.max(), up=False)} {unit}"
            + (
                f", and {lacks}most {bound_text(guessed.max(), up=False)} {unit}"
                if guessed.size
                else ""
            )
            + f" (leave {option} out to search without one)"
        )


def _check_sampled(
    limit: float,
    option: str,
    space: SearchSpace,
    device: Any,
    metric: str,
    target: bool,
    recorded: Any,
) -> None:
    """:func:`check_feasible` on a table sampled from a larger space (OFA's and FBNet's 5,000):
    a supernet search prices the architectures it lacks by the lookup table fitted on it, so
    the space's achievable range is the recorded values' joined with the lookup table's bounds
    over the whole space (:meth:`hwnas.supernet.cost.MultilinearLUT.cost_bounds`), widened by
    its error margin (:attr:`~hwnas.supernet.cost.MultilinearLUT.margin`). A limit below that
    range (or a target above it) was trained for a whole supernet, and exited 0 with an empty
    front.

    Raises:
        HwnasError: the limit is below the range, or a target above it (one line: the range).
    """
    from hwnas.cost_record import bound_text, unit_of
    from hwnas.supernet.cost import fit_table_lut

    if not recorded.size:
        return
    if float(recorded.min()) <= limit and (not target or limit <= float(recorded.max())):
        return  # a recorded architecture meets it: no lookup table to fit (a second of OFA's)
    lut = fit_table_lut(space, device, metric)
    low, high = lut.cost_bounds()
    margin = lut.margin
    lo = min(float(recorded.min()), low * (1 - margin))
    hi = max(float(recorded.max()), high * (1 + margin))
    if lo <= limit and (not target or limit <= hi):
        return
    unit = unit_of(metric, device.value_batch_size)
    values = "latencies" if metric == "latency_ms" else f"{metric.split('_')[0]} values"
    verb = "meets" if limit < lo else "reaches"
    widened = f", widened by its {margin:.1%} error margin" if margin >= 0.0005 else ""
    raise HwnasError(
        f"no architecture of {space.name} {verb} {option} {limit:g} {unit} on device "
        f"'{device.name}': the space's achievable range is {bound_text(lo)}-"
        f"{bound_text(hi, up=False)} {unit} (its {recorded.size:,} recorded {values} span "
        f"{recorded.min():.4g}-{recorded.max():.4g} {unit}; the lookup table fitted on them "
        f"prices the architectures it lacks within {low:.4g}-{high:.4g} {unit}{widened})"
        + (f"; leave {option} out to search without one" if limit > hi else "")
    )


def _gap_predictions(space: SearchSpace, device: Any, metric: str) -> Any:
    """What a supernet search prices the architectures a recorded table lacks at: the lookup
    table fitted on the table (:func:`hwnas.supernet.cost.fit_table_lut`, half a second), for
    a table of a space it can list whole (the Pi 5 tables hold 6,466 of NAS-Bench-201's 15,625
    cells: a cell of its isomorphism class was measured, and its value is not the others');
    None for a table sampled from a larger space (OFA's and FBNet's 5,000), whose unlisted
    architectures may be cheaper than any it holds.

    Returns:
        (M,) predictions (the metric's unit) of the M architectures the table lacks, or None.
    """
    indexed = ability(space, IndexedSpace)
    if indexed is None or len(indexed) < space.num_architectures():
        return None
    from hwnas.supernet.cost import fit_table_lut

    lut = fit_table_lut(space, device, metric)
    enum = lut.enumeration()
    if enum is None:
        return None
    _, cost, exact = enum
    return cost[~exact]


def _accuracy_source(
    settings: SearchSettings, predictor: str | None, measurement_budget: int | None
) -> Any:
    """The user's accuracy function (checked), or None where the space's table is read.

    Raises:
        HwnasError: a space without a table and no function; a budget above a table's size
            or the space's;
            a few-shot option with a function (few-shot reads the table).
    """
    space = get_space(settings.space)
    tabulated = ability(space, TabulatedSpace)
    if tabulated is None and settings.accuracy is None:
        raise HwnasError(
            f"space '{settings.space}' has no accuracy table to search over: give an accuracy "
            "function (--accuracy path/to/file.py:function, or accuracy= in Python) or a "
            f"supernet strategy (--strategy {_supernet_strategy(space)})"
        )
    if tabulated is not None and settings.budget > len(tabulated):  # a budget never spent
        raise HwnasError(
            f"--budget {settings.budget} is more than the {len(tabulated)} architectures of "
            f"space '{settings.space}'; --budget {len(tabulated)} scores every one"
        )
    size = space.num_architectures()
    if settings.budget > size:  # a user's small space: the search stopped, study kept growing
        raise HwnasError(
            f"--budget {settings.budget} is more than the {size} architectures of space "
            f"'{settings.space}'; --budget {size} scores every one"
        )
    if settings.accuracy is None:
        return None
    if predictor is not None or measurement_budget is not None:
        raise HwnasError(
            "--predictor and --measurement-budget read an accuracy table; with --accuracy the "
            "costs come from the device (measured once per subnet)"
        )
    return get_accuracy(settings.accuracy)


def _function_data(settings: SearchSettings, space: SearchSpace) -> Any:
    """The data a user's accuracy function gets (``settings.data``, at the space's image size),
    or None.

    Raises:
        HwnasError: ``data`` without an accuracy function; unreadable data.
    """
    if settings.data is None:
        return None
    if settings.accuracy is None:
        raise HwnasError("--data applies to --accuracy (or --train-zoo) in a table search")
    from hwnas.datasets import check_input_shape, input_channels, load_data

    shape = space.dataset(settings.dataset).input_shape
    data = load_data(
        settings.data, seed=settings.seed, image_size=shape[-1], channels=input_channels(shape)
    )
    check_input_shape(data, shape, space.name)  # a Conv1d model and images: before any trial
    return data


def _watched(
    evaluate: Callable[[Any], Any], on_candidate: Callable[[str, str], None] | None
) -> Callable[[Any], Any]:
    """``evaluate`` reporting each candidate to ``on_candidate`` (see :func:`search`)."""
    if on_candidate is None:
        return evaluate
    from hwnas.engine.loop import skip_reason
    from hwnas.errors import CandidateError

    def watched(arch):
        on_candidate(arch.text, "measuring")
        try:
            ev = evaluate(arch)
        except CandidateError as exc:
            on_candidate(arch.text, skip_reason(exc))
            raise
        on_candidate(arch.text, "done")
        return ev

    return watched


def search(
    job: PreparedSearch,
    out: Path,
    on_trial: Callable[[int, TrialRecord | None], None] | None = None,
    zoo: bool = True,
    on_front: Callable[[SearchResult], None] | None = None,
    trainer: Any = None,
    on_candidate: Callable[[str, str], None] | None = None,
    artifact_dir: Path | None = None,
    reporter: Reporter = SILENT,
) -> tuple[SearchResult, dict[str, Any]]:
    """Run or resume a prepared search and write its run folder.

    Args:
        job: from :func:`prepare`.
        out: run folder (created).
        on_trial: progress callback (see :func:`run_search`).
        zoo: export the Pareto architectures as ONNX with cards.
        on_front: called with the result as soon as the front is known, before the zoo is
            exported (the CLI prints the front there).
        trainer: a :class:`hwnas.zoo.train.ZooTrainer` (``--train-zoo``): train each zoo
            model with its space's recipe instead of exporting random weights.
        on_candidate: called with (arch string, event) around each candidate scored by this
            process: ``measuring`` before, then ``done``, or why it was skipped
            (:func:`hwnas.engine.loop.skip_reason`: ``noisy``, ``unrecorded``, ``failed``).
            The CLI's progress line.
        artifact_dir: the study's artifact store (:mod:`hwnas.engine.publish`; default
            ``artifacts/`` in the hwnas home), where the run's files are uploaded.
        reporter: shows the zoo export's progress, and a few-shot search's calibration and
            verification (:mod:`hwnas.progress`).

    Returns:
        (the result, the summary written to ``summary.json``).

    Raises:
        HwnasError: unusable study storage; measurement problems; 5 candidates in a row
            that could not be measured (raised after the run folder of what was scored before
            is written).
    """
    started = time.time()
    settings, space, device, profiler = job.settings, job.space, job.device, job.profiler
    store = profiler.store
    fewshot_extra: dict[str, Any] = {}
    evaluator: Any = job.evaluator
    halted: SearchHalted | None = None
    plotter = PlotProcess.start()  # imports matplotlib while the search runs
    try:
        if job.fewshot is not None:
            try:
                result, fewshot_extra, evaluator = run_fewshot(
                    settings, space, profiler, job.fewshot, job.storage, on_trial,
                    costs=job.costs, reporter=reporter,
                )  # fmt: skip
            except SearchHalted as exc:  # the device lost in the verification
                if exc.result is None or not exc.result.records:
                    raise
                halted, result = exc, exc.result  # the run folder of the searched front
                evaluator = exc.evaluator or evaluator
        else:
            evaluate = _watched(job.evaluator.evaluate, on_candidate)
            for model in (job.costs.cost, job.costs.latency):  # a live device's reference set
                if model is not None:
                    model.report_to(on_candidate)
            try:
                result = run_search(
                    settings, space, evaluate, job.storage, on_trial, costs=job.costs,
                    instant=job.evaluator.instant, check=job.evaluator.check_resumed,
                )  # fmt: skip
            except SearchHalted as exc:
                if exc.result is None or not exc.result.records:
                    raise
                halted, result = exc, exc.result  # the run folder of what was scored
    except BaseException:
        plotter.cancel()
        raise
    finally:
        if store is not None:
            store.close()

    # the user's accuracy function: the zoo ships the networks it scored (a model made
    # elastic: its subnets; any network the function trained: as it left it), made for the
    # entries the run folder's zoo does not hold already; summary.json's zoo_weights is then
    # read from the cards (hwnas.jobs.output.write_run)
    inherited = job.evaluator.zoo_models if zoo else None
    weights = "trained" if trainer is not None else "random"
    output = RunOutput(
        result, space, device.name, space.dataset(settings.dataset).num_classes, job.storage,
        settings.study, started, partial(_summary, job, result, evaluator, weights, fewshot_extra),
        trained=inherited, trainer=trainer, plotter=plotter,
    )  # fmt: skip
    summary_written = write_run(out, output, zoo, reporter, on_front, artifact_dir)
    if halted is not None:  # its own type and exit status (1: no fault of the input)
        raise type(halted)(
            f"{halted}; {out} holds the front of the {len(result.records)} architectures "
            "scored before (rerun the command to resume)"
        )
    return result, summary_written


def _supernet_strategy(space: Any) -> str:
    """The supernet strategy to suggest for ``space``: ``oneshot``, or ``gdas`` where its
    supernet's one-shot training is known not to rank subnets (FBNet's ``one_shot_caveat``)."""
    from hwnas.supernet import SUPERNETS

    name = space.supernet_name
    caveat = name in SUPERNETS and SUPERNETS.get(name).one_shot_caveat
    return "gdas" if caveat else "oneshot"


def _summary(
    job: PreparedSearch,
    result: SearchResult,
    evaluator: Any,
    weights: str,
    fewshot_extra: dict[str, Any],
    zoo_models: int,
    zoo_s: float,
) -> dict[str, Any]:
    """The table search's own summary.json fields (device, measurements, profiling, the
    selection costs, the zoo's size and time, the few-shot plan's), in their order."""
    device, profiler, store = job.device, job.profiler, job.profiler.store
    return {
        "device": {"name": device.name, "kind": device.kind, "description": device.description},
        "storage": job.storage_url,
        "measurement_store": str(store.path) if store is not None else None,
        "measurements": {
            "taken": profiler.counts.taken,
            "reused_from_store": profiler.counts.reused,
            "read_from_table": profiler.counts.read,
        },
        "profiling": {
            "runtime": device.runtime,
            "flagged_attempts": profiler.counts.flagged,
            "noisy_skipped": result.noisy_skipped,
            "failed_skipped": result.failed_skipped,
            "unrecorded_skipped": result.unrecorded_skipped,
            "tvm_workloads_tuned": profiler.counts.tuned_workloads,
            "tvm_tuning_s": round(profiler.counts.tuning_s, 1),
            "compile_s": round(profiler.counts.compile_s, 1),
        },
        "accuracy_queries_this_run": evaluator.accuracy_queries,
        "selection_costs": job.costs.cost.describe() if job.costs.cost is not None else None,
        "zoo_models": zoo_models,
        "zoo_weights": weights,
        "zoo_s": zoo_s,
        "stopped": result.stopped,
        **fewshot_extra,
    }
