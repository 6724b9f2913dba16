"""Search jobs: every search is prepared, run and reported here (issue 19).

One :func:`prepare` and one :func:`run` for every kind of search; the kind is the pipeline its
strategy is registered with (:func:`hwnas.engine.strategies.pipeline_of`), which its settings
type declares (``settings.pipeline``; :func:`hwnas.jobs.settings.build_settings` makes them):

- ``table`` (:mod:`hwnas.jobs.table`): the engine over a space's accuracy table; a few-shot
  search (a predictor calibrated on a few measurements) is the same job with a calibration
  step before the engine and a verification step after it;
- ``supernet`` (:mod:`hwnas.jobs.supernet`): train the supernet, derive, then the engine scores
  the handed-out subnets.

Every job ends in :func:`hwnas.jobs.output.write_run`, the one place that writes a run folder
(``pareto.csv``, ``pareto.png``, the zoo, ``summary.json``) and records it in the study. The CLI
(``hwnas search``) and the Python API call this module; nothing else runs a search job.
Importing it imports neither torch nor the supernet code.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwnas.progress import SILENT, Reporter

PIPELINES = {"table": "hwnas.jobs.table", "supernet": "hwnas.jobs.supernet"}
"""Pipeline (a strategy's registered ``pipeline``) -> the module of its job: a ``prepare``
and a ``search`` function (the table and supernet jobs)."""


@dataclass
class Job:
    """A search whose names are resolved and whose device, store, storage (and data) are open.

    Attributes:
        pipeline: "table" or "supernet".
        prepared: the pipeline's prepared search (:class:`hwnas.jobs.table.PreparedSearch`,
            :class:`hwnas.jobs.supernet.PreparedSupernetSearch`).
    """

    pipeline: str
    prepared: Any

    @property
    def settings(self) -> Any:
        """The search's settings (:class:`hwnas.engine.loop.SearchSettings` or its
        supernet subclass)."""
        return self.prepared.settings

    @property
    def study(self) -> str:
        """The study's name."""
        return self.prepared.settings.study


@dataclass
class JobResult:
    """What :func:`run` returns.

    Attributes:
        result: the :class:`hwnas.engine.loop.SearchResult` over the study, or None on a
            torchrun process other than rank 0 (rank 0 writes the run folder).
        summary: what ``summary.json`` holds ({} on a rank other than 0).
        out: the run folder.
    """

    result: Any
    summary: dict[str, Any]
    out: Path


def _module(pipeline: str):
    return importlib.import_module(PIPELINES[pipeline])


def prepare(
    settings: Any,
    storage: str | None = None,
    store: Path | str | None = None,
    predictor: str | None = None,
    measurement_budget: int | None = None,
) -> Job:
    """Check every name and open what the search needs, before any work starts.

    Args:
        settings: a :class:`hwnas.engine.loop.SearchSettings` (table strategies) or a
            :class:`hwnas.jobs.supernet.SupernetSettings` (supernet strategies).
        storage: Optuna storage URL (default: ``studies.db`` in the hwnas home).
        store: measurement store, a SQLite path or a PostgreSQL URL (default: the home's).
        predictor: table search on costs of this predictor artifact (few-shot).
        measurement_budget: most device measurements of a few-shot search.

    Returns:
        The prepared :class:`Job`.

    Raises:
        HwnasError: any unknown name, unusable device, store, storage or data, and a
            few-shot option given to a supernet search (one line each, before any work).
    """
    from hwnas.errors import HwnasError

    pipeline = settings.pipeline
    if pipeline == "table":
        prepared = _module(pipeline).prepare(
            settings, storage, store, predictor, measurement_budget
        )
        return Job(pipeline, prepared)
    if predictor is not None or measurement_budget is not None:
        raise HwnasError(
            f"a predictor or a measurement budget applies to table search, not to supernet "
            f"strategy '{settings.strategy}'"
        )
    return Job(pipeline, _module(pipeline).prepare(settings, storage, store))


def run(
    job: Job,
    out: Path,
    reporter: Reporter = SILENT,
    *,
    zoo: bool = True,
    artifact_dir: Path | None = None,
    trainer: Any = None,
    on_trial: Callable[[int, Any], None] | None = None,
    on_front: Callable[[Any], None] | None = None,
    on_candidate: Callable[[str, str], None] | None = None,
) -> JobResult:
    """Run or resume a prepared search and write its run folder.

    Args:
        job: from :func:`prepare`.
        out: the run folder (created).
        reporter: where the job's steps and notes go (:mod:`hwnas.progress`): the zoo
            export, and a supernet search's training, cost model and derivation.
        zoo: export the zoo (ONNX + card per Pareto architecture).
        artifact_dir: the study's artifact store (default ``artifacts/`` in the hwnas home).
        trainer: table search: a :class:`hwnas.zoo.train.ZooTrainer` training each zoo model.
        on_trial: table search: called with (completed trials, the new record or None).
        on_front: table search: called with the result once the front is written.
        on_candidate: table search: called with (arch, event) around each candidate.

    Returns:
        The :class:`JobResult`.

    Raises:
        HwnasError: unusable study storage, measurement or training problems, a full disk.
    """
    module = _module(job.pipeline)
    with _callers_state():
        if job.pipeline == "table":
            result, summary = module.search(
                job.prepared,
                out,
                on_trial,
                zoo=zoo,
                on_front=on_front,
                trainer=trainer,
                on_candidate=on_candidate,
                artifact_dir=artifact_dir,
                reporter=reporter,
            )
        else:
            result, summary = module.search(
                job.prepared,
                out,
                log=reporter.note,
                zoo=zoo,
                artifact_dir=artifact_dir,
                reporter=reporter,
            )
    return JobResult(result, summary, out)


@contextlib.contextmanager
def _callers_state() -> Iterator[None]:
    """Give back the process-wide settings a search changes, for ``hwnas.search`` from a
    notebook and for several searches in one process: Optuna's logging level (the search
    quiets Optuna's line per trial) and, where the caller has imported torch, its thread count
    and CPU generator (supernet training sets both; building networks, the zoo's random-weight
    models included, draws from the generator). torch is not imported here: a search that
    does not need it stays without it."""
    import optuna

    verbosity = optuna.logging.get_verbosity()
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else 0
    try:
        with torch.random.fork_rng(devices=[]) if torch is not None else contextlib.nullcontext():
            yield
    finally:
        optuna.logging.set_verbosity(verbosity)
        if torch is not None:
            torch.set_num_threads(threads)
