"""hwnas from Python: :func:`search` is ``hwnas search`` as a function (issue 22).

It takes the CLI's options as keyword arguments (``--max-latency`` is ``max_latency=``, ``--set``
is ``settings={...}``), with the same defaults, builds the settings in the same place as the CLI
(:func:`hwnas.jobs.settings.build_settings`), runs the same job (:mod:`hwnas.jobs`) and returns
a :class:`SearchRun`. Bad input raises the same one-line :class:`hwnas.errors.HwnasError` the CLI
prints, in keyword terms (:func:`hwnas.errors.keyword_terms`: ``max_latency``, not
``--max-latency``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwnas.errors import HwnasError, UnknownNameError, keyword_terms, shown
from hwnas.progress import SILENT, Reporter

OPTIONS = (
    "space", "accuracy", "dataset", "objective", "max_latency", "budget", "strategy", "runtime",
    "study", "seed", "predictor", "measurement_budget", "data", "epochs", "latency_target",
    "latency_weight", "batch_size", "finetune_epochs", "settings",
)  # fmt: skip
"""Keyword options of :func:`search`: ``hwnas search``'s search options by parameter name."""


@dataclass
class SearchRun:
    """A finished (or resumed) search.

    Attributes:
        result: the :class:`hwnas.engine.loop.SearchResult` (records, Pareto front, best;
            its costs as :class:`hwnas.cost_record.CostRecord` records).
        summary: what ``summary.json`` holds.
        out: the run folder.
        storage: the Optuna storage the study lives in.
        study_name: the study's name.
    """

    result: Any
    summary: dict[str, Any]
    out: Path
    storage: Any
    study_name: str
    pareto_csv: str = field(default="", repr=False)
    """``pareto.csv`` as this search wrote it (:attr:`front`: a later search into the same
    folder does not change this run's front)."""

    def __repr__(self) -> str:  # the records and summary would fill a notebook cell
        best = (self.best or {}).get("arch")
        return (
            f"SearchRun(study_name={self.study_name!r}, out={str(self.out)!r}, "
            f"records={len(getattr(self.result, 'records', []) or [])}, best={best!r})"
        )

    @property
    def study(self):
        """The Optuna study (``optuna.Study``), loaded from its storage."""
        import optuna

        return optuna.load_study(study_name=self.study_name, storage=self.storage)

    @property
    def front(self):
        """The Pareto front as a ``pandas.DataFrame`` with ``pareto.csv``'s columns (accuracy
        in %, latency in ms, energy in mJ, with their sources).

        Raises:
            HwnasError: pandas is not installed (``pip install 'hwnas[api]'``).
        """
        try:
            import pandas as pd
        except ImportError:
            raise HwnasError(
                "SearchRun.front is a pandas DataFrame: pip install 'hwnas[api]' (or read "
                f"{self.out / 'pareto.csv'})"
            ) from None
        if not self.pareto_csv:
            return pd.read_csv(self.out / "pareto.csv")
        import io

        return pd.read_csv(io.StringIO(self.pareto_csv))

    @property
    def best(self) -> dict[str, Any] | None:
        """The best architecture under the run's ``best_rule`` (``summary.json``'s ``best``:
        arch string, accuracy %, cost), or None when none met ``max_latency``."""
        return self.summary.get("best")

    @property
    def zoo(self) -> list[Path]:
        """The run's zoo entry folders (load one with :func:`hwnas.zoo.load`); ``[]`` where it
        has none: ``zoo=False``, a front at chance level, or no front at all (a latency limit
        no architecture met)."""
        from hwnas.zoo.read import zoo_contents

        folder = self.out / "zoo"
        if not folder.is_dir():
            return []
        return list(zoo_contents(folder).entries)


def _typed_args(
    device: Any, storage: Any, zoo: Any, reporter: Any, options: dict[str, Any]
) -> None:
    """Refuse, in one line naming the argument, the types the CLI's parser would have refused
    (a ``TypeError`` deep inside, or a ``zoo="no"`` taken as true, otherwise).

    Raises:
        HwnasError: a wrong type.
    """
    import os

    if not isinstance(device, str):
        raise HwnasError(f"device must be a device's name (a string), got {shown(device)}")
    if storage is not None and not isinstance(storage, str):
        hint = (
            f" (a SQLite file is sqlite:///{os.fspath(storage)})"
            if isinstance(storage, os.PathLike) else ""
        )  # fmt: skip
        raise HwnasError(f"storage must be an Optuna storage URL, got {shown(storage)}{hint}")
    if not isinstance(zoo, bool):
        raise HwnasError(f"zoo must be True or False, got {shown(zoo)}")
    if not isinstance(reporter, Reporter):  # a string failed after the whole search
        raise HwnasError(
            f"reporter must be a hwnas.progress.Reporter (or left out), got {shown(reporter)}"
        )
    for name in ("dataset", "objective", "strategy", "study", "runtime"):
        value = options.get(name)
        if value is not None and not isinstance(value, str):
            raise HwnasError(f"{name} must be a string, got {shown(value)}")
    predictor = options.get("predictor")
    if predictor is not None and not isinstance(predictor, (str, os.PathLike)):
        raise HwnasError(f"predictor must be an artifact's name or folder, got {shown(predictor)}")
    budget = options.get("measurement_budget")
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
        raise HwnasError(f"measurement_budget must be an integer, got {shown(budget)}")


@keyword_terms(*OPTIONS)
def search(
    device: str,
    *,
    out: str | Path | None = None,
    storage: str | None = None,
    store: str | Path | None = None,
    zoo: bool = True,
    artifact_dir: str | Path | None = None,
    reporter: Reporter = SILENT,
    **options: Any,
) -> SearchRun | None:
    """Search a space for its accuracy/latency (or energy) Pareto front on ``device``:
    ``hwnas search`` as a function, with the same defaults and the same run folder.

    Args:
        device: device name (``hwnas devices``).
        out: run folder (default ``runs/<study name>``).
        storage: Optuna storage URL (default ``studies.db`` in the hwnas home).
        store: measurement store, a SQLite path or a PostgreSQL URL.
        zoo: export the front's models (ONNX + card each).
        artifact_dir: the study's artifact store (default ``artifacts/`` in the hwnas home).
        reporter: where progress goes (:mod:`hwnas.progress`; default: nowhere): a table
            search's trials as one step (``search DEVICE``, ``total`` the budget), the zoo
            export, a supernet search's training and derivation.
        **options: ``hwnas search``'s options by name (:data:`OPTIONS`): ``space`` (a name,
            a space file's path, ``file.py:attr``, or a space object such as
            :func:`hwnas.elastic`'s), ``accuracy`` (a function of the evaluator protocol,
            :data:`hwnas.engine.evaluate.AccuracyFunction`, scoring each candidate instead of
            the space's table; ``data`` is handed to it), ``dataset`` (default the space's),
            ``objective`` ("latency", the default, in ms, or "energy" in mJ), ``max_latency``
            (ms; default none), ``budget`` (distinct architectures scored; default 300, or
            every architecture of a smaller space),
            ``strategy`` (default ``frontier`` where costs are known first, else ``nsga3``),
            ``seed`` (default 0), ``predictor``, ``measurement_budget``, the supernet options
            ``data`` (default "digits"), ``epochs`` (5), ``batch_size`` (64),
            ``finetune_epochs`` (2), ``latency_target`` (ms), ``latency_weight``, and
            ``settings`` (a dict: ``--set``). ``hwnas search --help`` gives each in full.

    Returns:
        The :class:`SearchRun`. A chance-level ``best`` (a ``max_latency`` that only networks
        whose output ignores their input meet) is also issued as :class:`hwnas.HwnasWarning`.
        None in a process of a ``torchrun`` job other than rank 0 (a supernet search across
        processes): it trained its share, and rank 0 alone derives, writes the run folder
        and returns the run (``if run is not None:`` before using it).

    Raises:
        HwnasError: an unknown option or any bad input the CLI refuses, with its message.
    """
    from hwnas.jobs import torch_turn
    from hwnas.jobs.settings import check_before_space
    from hwnas.paths import path_arg
    from hwnas.spaces import searching, user_space

    path_arg("out", out)
    path_arg("store", store, "a path or a URL")
    path_arg("artifact_dir", artifact_dir)
    _typed_args(device, storage, zoo, reporter, options)
    for name in options:
        if name not in OPTIONS:
            import inspect

            own = set(inspect.signature(search).parameters) - {"device", "options"}
            raise UnknownNameError("option of hwnas.search", name, sorted({*OPTIONS, *own}))
    # what needs no space is refused before a file.py:attr space's code runs
    check_before_space({"device": device, **options}, set(options), out, store, artifact_dir)
    # a supernet search runs alone in the process (torch's one generator: jobs.torch_turn)
    with torch_turn(_supernet(options.get("strategy"))):
        space = user_space(options["space"]) if options.get("space") is not None else None
        if space is not None:  # an object, a path: known by its name from here on, and in
            options["space"] = space.name  # this search that name is this object, whatever
        with searching(space):  # another thread's search registers under it meanwhile
            return _search(device, out, storage, store, zoo, artifact_dir, reporter, options)


def _supernet(strategy: str | None) -> bool:
    """Whether ``strategy`` is a supernet strategy (the default never is; an unknown name is
    refused by the settings)."""
    from hwnas.engine.strategies import pipeline_of

    try:
        return strategy is not None and pipeline_of(strategy) == "supernet"
    except UnknownNameError:
        return False


def _search(
    device: str,
    out: str | Path | None,
    storage: str | None,
    store: str | Path | None,
    zoo: bool,
    artifact_dir: str | Path | None,
    reporter: Reporter,
    options: dict[str, Any],
) -> SearchRun | None:
    """:func:`search` once its arguments are checked and its space is known (see there)."""
    from hwnas.jobs import prepare, run
    from hwnas.jobs.settings import build_settings
    from hwnas.paths import ZOO_MIN_FREE_MB, check_writable, confined

    settings = build_settings({"device": device, **options}, given=set(options))
    folder = (
        Path(out)
        if out is not None
        else confined(Path("runs"), settings.study, what="study name (the default out)")
    )
    from hwnas.db import redact
    from hwnas.jobs.output import check_run_folder

    # a run of another storage's study is never replaced: refused before this storage is
    # opened or made; the study's own name once it is known (a few-shot search's is made here)
    check_run_folder(folder, settings.study, "out", redact(storage) if storage else None, True)
    job = prepare(
        settings,
        storage,
        Path(store) if store is not None and "://" not in str(store) else store,
        options.get("predictor"),
        options.get("measurement_budget"),
    )
    if out is None:  # the default folder is named by the study prepare settled
        folder = confined(Path("runs"), job.study, what="study name (the default out)")
    check_writable(folder, "out", ZOO_MIN_FREE_MB)
    check_run_folder(
        folder, job.study, "out", job.prepared.storage_url, settings=job.settings.as_dict()
    )
    if zoo:  # the zoo written at the end replaces out/zoo whole
        from hwnas.zoo.write import check_zoo_folder

        check_zoo_folder(folder)
    artifacts = Path(artifact_dir) if artifact_dir is not None else None
    if artifacts is not None:
        check_writable(artifacts, "artifact_dir")
    if job.pipeline == "table":  # the trials as one step, as the CLI's progress line shows
        with reporter.step(f"search {device}", total=settings.budget, unit="trials") as step:
            done = run(
                job, folder, reporter, zoo=zoo, artifact_dir=artifacts,
                on_trial=lambda completed, record: step.update(completed),
            )  # fmt: skip
    else:  # a supernet search reports its own steps (training, derivation)
        done = run(job, folder, reporter, zoo=zoo, artifact_dir=artifacts)
    if done.result is None:  # a torchrun rank other than 0: rank 0 writes and reports (an
        return None  # error here made torchrun stop rank 0 before it wrote the run)
    best = done.summary.get("best")
    if best and best.get("chance_level"):  # what the CLI prints under its best line
        import warnings

        from hwnas.datasets import CHANCE_FACTOR, chance_best_reason
        from hwnas.errors import HwnasWarning

        limit = settings.max_latency
        weight = getattr(settings, "latency_weight", None)  # a supernet search's
        warnings.warn(
            f"best is chance-level ({best['accuracy']:.2f}%, top-1 at most {CHANCE_FACTOR:g}x "
            "chance: no better than guessing): "
            + chance_best_reason(
                f"max_latency={limit:g}" if limit is not None else None,
                f"latency_weight={weight:g}" if weight else None,
            ),
            HwnasWarning,
            stacklevel=4,  # the caller of search
        )
    pareto = folder / "pareto.csv"
    return SearchRun(  # absolute: run.zoo after an os.chdir in a notebook was silently []
        done.result, done.summary, folder.absolute(), job.prepared.storage, settings.study,
        pareto.read_text() if pareto.is_file() else "",
    )  # fmt: skip


def get_space(name: Any, code: bool = True) -> Any:
    """The search space ``name`` names, as :func:`search` finds it (``hwnas.get_space``): a
    space's name (``hwnas spaces``), a space file's path, or ``path/to/file.py:attr``, whose
    file is imported (a name you give is your own input, as ``space=`` of :func:`search`
    is). ``code=False`` refuses ``file.py:attr``, as hwnas does for a space name read from a
    file someone else wrote (a device profile, a zoo card).

    Raises:
        UnknownNameError: no space of that name, or no such attribute in the Python file.
        HwnasError: not a string or a path, an invalid space file, a Python file that fails
            to import or whose attribute is not a space, ``file.py:attr`` with ``code=False``.
    """
    from hwnas.spaces import get_space as find

    return find(name, code=code)


@keyword_terms()
def predict(
    models: Any,
    *,
    device: str | None = None,
    calibration: str | Path | None = None,
    space: str | None = None,
    metric: str = "latency_ms",
    runtime: str | None = None,
    predictor: str | None = None,
    kernel_budget: int | None = None,
    dims: dict[str, int] | None = None,
    store: str | Path | None = None,
) -> list[Any]:
    """Predict latency (ms) or energy (mJ) of ``models`` on a device: ``hwnas predict`` as a
    function. ONNX models on a live ONNX Runtime device get the kernel-level predictor (with a
    90% interval); otherwise a predictor is adapted on a few of the device's measurements
    (:mod:`hwnas.predictors.predict`).

    Args:
        models: an arch string of ``space`` (or its index in a numbered space) or an ONNX
            file path, or a list of them.
        device: the device (its recorded table or stored reference-set values adapt the
            predictor), or None with ``calibration``.
        calibration: a CSV of the device's measurements (columns arch and latency_ms or
            energy_mj), or None with ``device``.
        space: the space of the arch strings (default nasbench201): a name, a path, or a
            space object.
        metric: with ``device``: "latency_ms" or "energy_mj".
        runtime: with ``device``: the runtime replacing its profile's.
        predictor: a predictor artifact's name, or "kernel"; default: picked per model.
        kernel_budget: the kernel-level predictor's new kernels it may time on the device
            (None: ``hwnas predict``'s default, 2000; 0: none).
        dims: sizes of ONNX models' dynamic input axes other than the batch, by name
            (``{"sequence_length": 128}``; ``hwnas predict --dim``).
        store: measurement store, a SQLite path or a PostgreSQL URL (default: the home's).

    Returns:
        One :class:`hwnas.predictors.predict.Prediction` per model, in order (``.value`` and
        ``.std`` in the metric's unit, ``.low``/``.high`` its 90% interval, ``.source``
        what predicted it: one call may mix predictors).
        What ``hwnas predict`` prints as ``warning:`` lines is issued as
        :class:`hwnas.HwnasWarning` (:func:`warnings.warn`; ``warnings.simplefilter("error",
        hwnas.HwnasWarning)`` makes them errors).

    Raises:
        HwnasError: neither or both of ``device`` and ``calibration``, unknown names, a
            malformed arch, an unreadable file, too few usable device measurements.
    """
    from hwnas.errors import warn_caller
    from hwnas.measure import in_given_order, split_models
    from hwnas.onnx_inputs import check_dims
    from hwnas.paths import path_arg
    from hwnas.predictors.calibration import parse_model
    from hwnas.predictors.predict import onnx_model, predict_models
    from hwnas.spaces import searching, user_space

    path_arg("calibration", calibration)
    path_arg("store", store, "a path or a URL")
    path_arg("predictor", predictor, "a name or a folder's path")
    if kernel_budget is not None:
        from hwnas.limits import bounded

        kernel_budget = bounded("kernel_budget", kernel_budget, 0, 10**6, integer=True)

    onnx, archs, is_onnx = split_models(models)
    check_dims(onnx, dims or {})
    sp = user_space(space or "nasbench201")
    said: list[str] = []  # hwnas predict's lines; its "warning:" ones are warned below
    with searching(sp):  # sp's name is sp in this call, whatever another thread registers
        out = predict_models(
            [onnx_model(p, dims) for p in onnx],
            [parse_model(sp, t, Path.cwd(), "arch") for t in archs],
            sp,
            device=device,
            calibration=Path(calibration) if calibration is not None else None,
            metric=metric,
            runtime=runtime,
            predictor=predictor,
            kernel_budget=kernel_budget,
            store=store,
            note=said.append,
        )
    for line in said:
        if line.startswith("warning: "):
            warn_caller(line.removeprefix("warning: "))
    return in_given_order(is_onnx, out[: len(onnx)], out[len(onnx) :])  # the ONNX models' first
