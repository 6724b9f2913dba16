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
import threading
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
    with torch_turn(job.pipeline == "supernet"):
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


class _TorchTurns:
    """The searches of one process and the process-wide settings they change: Optuna's logging
    level, and torch's thread count and CPU generator where the caller imported torch.

    A supernet search seeds torch's one CPU generator and sets its threads once, then draws
    from the generator for its whole run (weights, batches, sampled paths); a table search
    seeds every draw it makes itself (:func:`hwnas.engine.seeding.seeded_globals`, the
    random-weight exports) and puts the generator back after it. Two searches in threads of
    one process drew from each other's generator, so a supernet search runs alone: it waits
    for the searches under way, and the searches started while it runs wait for it; table
    searches run beside each other. The caller's settings are saved by the first search in
    and given back by the last out (for ``hwnas.search`` from a notebook and for several
    searches in one process: one search giving them back while another ran reset that
    one's generator and threads). torch is not imported here: a search that does not need it
    stays without it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._inside = 0  # searches holding a turn
        self._alone = False  # the one inside is a supernet search
        self._saved: tuple[int, Any, Any, int] | None = None
        self._depth = threading.local()  # hwnas.search's turn, then jobs.run's inside it

    @contextlib.contextmanager
    def turn(self, alone: bool) -> Iterator[None]:
        """Hold a turn for one search (``alone``: a supernet search) until the block ends."""
        depth = getattr(self._depth, "n", 0)
        if depth:  # this thread's search holds its turn already
            self._depth.n = depth + 1
            try:
                yield
            finally:
                self._depth.n = depth
            return
        with self._changed:
            self._changed.wait_for(lambda: not self._alone and not (alone and self._inside))
            if not self._inside:
                self._saved = _callers_state()
            self._inside += 1
            self._alone = alone
        self._depth.n = 1
        try:
            yield
        finally:
            self._depth.n = 0
            with self._changed:
                self._inside -= 1
                self._alone = False
                if not self._inside:
                    _give_back(self._saved)
                self._changed.notify_all()


def _callers_state() -> tuple[int, Any, Any, int]:
    import optuna

    torch = sys.modules.get("torch")
    if torch is None:
        return optuna.logging.get_verbosity(), None, None, 0
    return optuna.logging.get_verbosity(), torch, torch.get_rng_state(), torch.get_num_threads()


def _give_back(saved: tuple[int, Any, Any, int] | None) -> None:
    import optuna

    if saved is None:
        return
    verbosity, torch, generator, threads = saved
    optuna.logging.set_verbosity(verbosity)
    if torch is not None:
        torch.set_rng_state(generator)
        torch.set_num_threads(threads)


torch_turn = _TorchTurns().turn
"""``with torch_turn(alone):`` around one search, from its first step (a ``FILE.py:ATTR``
space's import draws from torch's generator) to its last (:class:`_TorchTurns`)."""
