"""``hwnas train ARCH|ZOO_DIR`` as functions: :func:`plan_training` checks everything and
loads the data (user errors surface here, before any training); :func:`run_training` trains
each architecture and writes its entry, each entry swapped into place whole."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hwnas import jsonfile
from hwnas.errors import HwnasError, UnknownNameError
from hwnas.paths import read_bounded_text, sweep_temporaries
from hwnas.spaces import Arch, TabulatedSpace, ability, arch_from_text, get_space
from hwnas.zoo.read import entry_folders, is_entry, read_entry
from hwnas.zoo.train import TrainSettings, ZooTrainer
from hwnas.zoo.write import _swap_in, _temporary, trained_entry


@dataclass
class TrainTask:
    """One architecture to train into one entry folder.

    Attributes:
        folder: the entry folder written (replaced if it exists).
        arch: the architecture.
        dataset: the space's dataset whose network is trained.
        devices: the card's device costs (kept from the entry, or the recorded tables').
        table_accuracy: the benchmark's accuracy of the architecture, if known.
        table_explained: ``table_accuracy``'s source already says what it is the accuracy of
            (a trained entry's card: written beside a measured accuracy).
        found: ``study``, ``trial`` and ``device`` of the search that found it (None for an
            arch string).
        replaces: for an entry a supernet search wrote, what its network was (the subnet with
            inherited weights, and its input), which the network trained now replaces.
    """

    folder: Path
    arch: Arch
    dataset: str
    devices: dict[str, dict[str, dict[str, Any]]]
    table_accuracy: dict[str, Any] | None
    found: dict[str, Any] = field(
        default_factory=lambda: {"study": None, "trial": None, "device": None}
    )
    table_explained: bool = False
    replaces: str | None = None


@dataclass
class TrainingPlan:
    """Tasks and the trainers they use (one per space and dataset, its data loaded)."""

    tasks: list[TrainTask]
    trainers: dict[tuple[str, str], ZooTrainer]


def plan_training(
    target: str,
    settings: TrainSettings,
    space: str | None = None,
    dataset: str | None = None,
    out: Path | None = None,
    log: Callable[[str], None] | None = None,
) -> TrainingPlan:
    """Resolve ``target`` (an arch string of ``space``, a zoo folder or one entry), check the
    settings and load the data.

    ``target`` is a zoo folder or entry where that path exists, else an arch string (arch
    strings hold ``/``: ``s2.0=3/5/3``); a path-looking ``target`` (with ``/``, or starting
    with ``.`` or ``~``) that is no arch string of the space is a zoo folder not found.

    Args:
        target: an architecture string, or the path of a zoo folder or entry (retrained in
            place: its weights, accuracy, ONNX file and card are replaced).
        settings: training settings.
        space: the space of an arch string (default ``nasbench201``). Entries name theirs:
            for them ``space`` may only name the same space (one made in Python, or given by
            file, is known only once the user has loaded it: ``--space FILE.py:ATTR``).
        dataset: the space's dataset whose network an arch string is built for (default
            :meth:`~hwnas.spaces.base.SearchSpace.default_dataset`); entries name theirs.
        out: the entry folder for an arch string (default ``trained/`` and
            :func:`default_entry_name`).
        log: progress lines.

    Raises:
        HwnasError: a malformed arch string, a missing or foreign folder, options that do not
            apply to the target, entries of a space not loaded (or not ``space``), bad
            settings, unreadable data.
    """
    path = Path(target).expanduser()
    if path.exists():
        if dataset or out:
            pairs = (("--dataset", dataset), ("--out", out))
            given = [n for n, v in pairs if v]
            raise HwnasError(
                f"{', '.join(given)} applies to an arch string; the entries of {path} name their "
                "space and dataset and are retrained in place"
            )
        tasks = [_entry_task(folder, space) for folder in entry_folders(path)]
        for task in tasks:
            if task.replaces and log:
                log(
                    f"{task.folder}: {task.replaces}; it is retrained from scratch with the "
                    "space's recipe, and its card will describe the network trained now "
                    "(summary.json's best keeps the search's numbers, its retrained the new ones)"
                )
    else:
        name = space or "nasbench201"
        if "/" in target or target.startswith((".", "~")):  # a path, or an arch string
            _arch_or_missing_folder(target, path, get_space(name), space is not None)
        tasks = [_arch_task(target, name, dataset, out, settings)]
    trainers: dict[tuple[str, str], ZooTrainer] = {}
    for task in tasks:
        key = (task.arch.space, task.dataset)
        if key not in trainers:
            trainers[key] = ZooTrainer.prepare(settings, get_space(key[0]), key[1], log=log)
    return TrainingPlan(tasks, trainers)


def _arch_or_missing_folder(target: str, path: Path, space: Any, given: bool) -> None:
    """Check that ``target``, which looks like a path but names none, is an arch string of
    ``space`` (``given``: named by ``--space``, else the default).

    Raises:
        HwnasError: it is not: "zoo folder not found", with why it is no arch string either.
    """
    try:
        arch_from_text(space, target)
    except HwnasError as exc:
        if given:
            raise HwnasError(
                f"zoo folder not found: {path}; nor is it an arch string of space "
                f"'{space.name}': {exc}"
            ) from None
        raise HwnasError(
            f"zoo folder not found: {path} (an arch string of another space than "
            f"{space.name} needs --space)"
        ) from None


def _entry_task(folder: Path, given: str | None = None) -> TrainTask:
    """The task retraining entry ``folder`` in place, in the space its card names.

    Args:
        folder: the entry.
        given: the space named by ``--space``: the card's (its name), else an error.

    Raises:
        HwnasError: an unreadable card, a space other than ``given``, a space not known in
            this process (one made in Python or given by file: the message says to give it
            with ``--space``), an arch or dataset not of the space.
    """
    card = read_entry(folder)
    if given is not None and given != card["space"]:
        raise HwnasError(
            f"{folder} is a model of space '{card['space']}', not '{given}': the entries of a "
            "zoo folder name their space (--space is for one made in Python or given by file)"
        )
    try:
        space = get_space(card["space"])
    except UnknownNameError:
        raise HwnasError(
            f"{folder}: unknown search space '{card['space']}': a space made in Python (or read "
            "from a file given by its path) is not saved with its entries: give its file, "
            "--space FILE.py:ATTR (or --space PATH.yaml)"
        ) from None
    arch = space.parse(card["arch"])
    dataset = card.get("benchmark_dataset") or card.get("dataset")
    if dataset not in space.datasets():
        raise HwnasError(
            f"{folder}: the card names no dataset of space '{space.name}' "
            f"({', '.join(space.datasets())}) to build the network for"
        )
    devices = card.get("devices") or {}
    build = card.get("build")
    replaces = None
    if isinstance(build, dict) and build.get("kind") == "supernet":
        shape = (
            (card.get("input") or {}).get("shape") if isinstance(card.get("input"), dict) else None
        )
        replaces = "a supernet search's subnet with inherited weights" + (
            f", input {list(shape)}" if isinstance(shape, list) else ""
        )
        # its values are of the subnet at the supernet's size or of the deployed network, not
        # of the network trained now (the space's for the dataset): the tables' values of that
        # one, where they have it, and no measurement of another network
        from hwnas.zoo.write import recorded_latencies

        values = recorded_latencies(
            space.name, [arch.text], skip="", dataset=dataset, shipped=True
        )
        devices = {dev: {"latency_ms": v} for dev, v in values[arch.text].items()}
    weights = card.get("weights") or {}
    accuracy = card.get("accuracy") or {}
    explained = not (isinstance(weights, dict) and weights.get("kind") == "random")
    if not explained:
        table = {k: accuracy[k] for k in ("value", "source", "split", "kind") if k in accuracy}
    else:  # beside a measured accuracy: its source says already what it is
        table = card.get("table_accuracy")
    return TrainTask(
        folder=folder,
        arch=arch,
        dataset=dataset,
        devices=devices,
        table_accuracy=table,
        found={k: card.get(k) for k in ("study", "trial", "device")},
        table_explained=explained,
        replaces=replaces,
    )


def default_entry_name(space: Any, arch: Any, dataset: str, settings: TrainSettings) -> str:
    """``<space>-<model hash>-<data>-<digest of the training settings>``: the default entry
    folder of ``hwnas train ARCH`` under ``trained/``. The same command names the same folder
    (and retrains it in place from the training cache); other data or settings name another,
    where one folder per network let a quick run replace a trained entry without a word."""
    import dataclasses
    import json

    from hwnas.export import content_hash
    from hwnas.measure import arch_workload

    data = settings.data if settings.data == "digits" else str(Path(settings.data).resolve())
    trained = {k: v for k, v in dataclasses.asdict(settings).items()
               if k not in ("data", "torch_device", "threads")}  # fmt: skip
    digest = content_hash(data, json.dumps(trained, sort_keys=True, default=str))[:8]
    stem = Path(settings.data).name if settings.data != "digits" else "digits"
    model = arch_workload(space, arch, dataset).model_hash
    return f"{space.name}-{model}-{stem}-{digest}"


def _arch_task(
    text: str, space_name: str, dataset: str | None, out: Path | None, settings: TrainSettings
) -> TrainTask:
    from hwnas.zoo.write import recorded_latencies

    space = get_space(space_name)
    arch = arch_from_text(space, text)  # an arch string, or an index as every --arch takes
    dataset = dataset or space.default_dataset()  # the search's default where it has it
    space.dataset(dataset)  # an unknown dataset fails here
    name = default_entry_name(space, arch, dataset, settings)
    latencies = recorded_latencies(
        space.name, [arch.text], skip="", dataset=dataset, shipped=True
    )[arch.text]
    devices = {dev: {"latency_ms": entry} for dev, entry in latencies.items()}
    table = None
    tabulated = ability(space, TabulatedSpace)
    if tabulated is not None:
        try:
            table = {
                "value": float(tabulated.table_accuracy(dataset)[tabulated.index(arch)]),
                "source": tabulated.accuracy_source(dataset),
                "split": "test",
                "kind": "benchmark table",
            }
        except HwnasError:  # not in the benchmark's index
            table = None
    folder = (out or Path("trained") / name).expanduser()
    if folder.exists() and not is_entry(folder) and (not folder.is_dir() or any(folder.iterdir())):
        raise HwnasError(
            f"{folder} exists and is not a zoo entry; give --out a new folder (an entry is "
            "replaced whole)"
        )
    return TrainTask(
        folder=folder,
        arch=arch,
        dataset=dataset,
        devices=devices,
        table_accuracy=table,
    )


def record_retrained(
    folders: list[Path],
    log: Callable[[str], None] | None = None,
    storage: str | None = None,
    rerun: str = "hwnas train ...",
) -> dict[Path, bool]:
    """Record entries retrained in place in their run's records, as the run did when it wrote
    them: the run folder's ``summary.json`` gets the new ``zoo_files`` and its study the new
    artifacts, so that ``hwnas zoo verify`` proves them (and a rerun of the search keeps them).

    The study is updated in ``storage`` where given (the user's ``--storage``, as the search's:
    any URL, a server's included, :func:`check_retrain_storage` having checked that it is the
    storage the summary names), else in the storage the summary names only where that is an
    existing SQLite file (:func:`_not_this_runs_study`: a summary.json is the sender's, and
    never chooses a server to connect to); in both, only when the study records this run
    folder.

    Args:
        folders: retrained entry folders; those outside a run folder's ``zoo/`` are left out.
        log: gets a line per run whose study could not be updated (a storage on a server
            without ``storage``, naming the command that records it; an unreachable storage).
        storage: the study storage URL the user gave (``hwnas train --storage``), or None.
        rerun: the command that was run, which the line about a server's storage names with
            ``--storage URL`` added.

    Returns:
        Each run folder whose summary.json was rewritten -> whether its study was updated too.
    """
    import json

    from hwnas.db import typeable_url
    from hwnas.engine.publish import default_artifact_dir, publish_run
    from hwnas.paths import write_atomic
    from hwnas.zoo.read import entry_folders, zoo_manifest, zoo_weights

    log = log or (lambda _m: None)
    runs = sorted({f.parent.parent for f in folders if f.parent.name == "zoo"})
    done: dict[Path, bool] = {}
    for run in runs:
        path = run / "summary.json"
        try:
            summary = json.loads(read_bounded_text(path))
        except (OSError, ValueError):
            continue
        if not isinstance(summary, dict) or "zoo_files" not in summary:
            continue
        summary["zoo_files"] = zoo_manifest(run)
        summary["zoo_weights"] = zoo_weights(entry_folders(run / "zoo"))  # trained, or mixed
        retrained = summary.get("retrained")
        retrained = retrained if isinstance(retrained, dict) else {}
        for folder in folders:  # what each retrained entry's card says now
            if folder.parent.parent == run:
                retrained[folder.name] = _retrained_record(folder)
        summary["retrained"] = retrained
        write_atomic(path, jsonfile.dumps(summary, indent=2) + "\n")
        done[run] = False
        recorded = summary.get("storage")
        settings = summary.get("settings")
        study = settings.get("study") if isinstance(settings, dict) else None
        if not isinstance(recorded, str) or not isinstance(study, str):
            log(f"{run}: summary.json updated; it names no study to update")
            continue
        if storage is None and not recorded.startswith("sqlite:///"):
            shown = recorded if len(recorded) <= 200 else recorded[:200] + "..."
            bare = typeable_url(recorded) or "URL"
            password = " (with its password)" if bare != recorded else ""
            log(
                f"{run}: summary.json updated; study '{study}' in {shown} was not (a run "
                "folder's summary.json never chooses a database server to connect to): where "
                f"that is your study's storage, record it with {rerun} --storage "
                f"{bare}{password}; the training comes from the cache"
            )
            continue
        target, why = _not_this_runs_study(run, storage or recorded, study, trusted=bool(storage))
        if why:
            log(f"{run}: summary.json updated; study '{study}' was not: {why}")
            continue
        try:
            publish_run(target, study, run, summary, default_artifact_dir())
            done[run] = True
        except Exception as exc:  # noqa: BLE001 - the entries are written; say what is not
            log(f"{run}: summary.json updated; study '{study}' was not: {exc}")
    return done


def check_retrain_storage(folders: list[Path], storage: str | None) -> None:
    """Refuse, before any training, a ``hwnas train --storage`` that cannot record the entries
    it retrains: entries outside a run folder's ``zoo/``, or a run whose summary.json names
    its study in another storage (compared as the database named,
    :func:`hwnas.jobs.output.check_run_folder`).

    Raises:
        HwnasError: one line naming the run and both storages; a storage that cannot be
            opened (:func:`hwnas.engine.loop.open_storage`).
    """
    if storage is None:
        return
    from hwnas.db import redact, storage_hint, storage_identity
    from hwnas.jobs.output import read_summary

    runs = sorted({f.parent.parent for f in folders if f.parent.name == "zoo"})
    if not runs:
        raise HwnasError(
            "--storage records the entries of a run's zoo retrained in place (RUN/zoo or "
            "RUN/zoo/ENTRY); what this command trains is in no run's zoo"
        )
    ours = redact(storage)
    for run in runs:
        theirs = read_summary(run).get("storage")
        other = isinstance(theirs, str) and theirs and storage_identity(theirs)
        if other and other != storage_identity(ours):
            theirs = theirs if len(theirs) <= 200 else theirs[:200] + "..."
            raise HwnasError(
                f"{run}'s study is in another storage ({theirs}; its summary.json) than "
                f"--storage {ours}: give {storage_hint(theirs).removeprefix('--storage ')}"
            )
    from hwnas.engine.loop import open_storage

    open_storage(storage)  # unreachable, a wrong password: said now, not after the training


def _retrained_record(folder: Path) -> dict[str, Any]:
    """What ``summary.json``'s ``retrained`` says of a retrained entry: its card's test
    accuracy (%), input shape and weights note (None where the card lacks one)."""
    try:
        card = read_entry(folder)
    except HwnasError:
        return {}
    accuracy = card.get("accuracy") if isinstance(card.get("accuracy"), dict) else {}
    shape = card.get("input", {}).get("shape") if isinstance(card.get("input"), dict) else None
    weights = card.get("weights") if isinstance(card.get("weights"), dict) else {}
    return {
        "test_accuracy": accuracy.get("value"),
        "input_shape": shape,
        "weights": weights.get("note"),
    }


def _not_this_runs_study(
    run: Path, storage: str, study: str, trusted: bool = False
) -> tuple[Any, str]:
    """The storage to update the study that ``run``'s summary.json names in, and why it
    must not be updated, or "".

    ``trusted``: ``storage`` is the user's own ``--storage`` (opened as a search opens it,
    :func:`hwnas.engine.loop.open_storage`), not the summary's; only the run folder the study
    records is checked.

    A run folder may come from someone else, and its summary.json names the storage: a study
    is updated only in an SQLite file that exists (a URL never creates a database, never
    reaches a server), and only when the study records this very folder as its run (a handed
    summary naming the user's own studies.db cannot take over another run's study), and only
    when that file already holds an Optuna storage (:func:`hwnas.db.handed_sqlite_storage`:
    Optuna created its tables in any SQLite or empty file the summary named). Its artifacts
    go to the hwnas home's artifact store, never to a folder the study names."""
    import optuna

    from hwnas.db import handed_sqlite_storage

    try:
        if trusted:
            from hwnas.engine.loop import open_storage

            storage = open_storage(storage)
        else:
            storage = handed_sqlite_storage(storage)
    except HwnasError as exc:
        return storage, str(exc)
    try:
        attrs = optuna.load_study(study_name=study, storage=storage).user_attrs
    except Exception as exc:  # noqa: BLE001 - any failure to read it: said, not raised
        return storage, str(exc)
    recorded = attrs.get("run_folder")
    if not isinstance(recorded, str) or Path(recorded).resolve() != run.resolve():
        return storage, f"it records another run folder ({recorded}), not this one"
    return storage, ""


def run_training(
    plan: TrainingPlan,
    log: Callable[[str], None] | None = None,
    on_written: Callable[[TrainTask, dict], None] | None = None,
) -> list[dict]:
    """Train every task of ``plan`` and write its entry (each swapped into place whole; a
    failure leaves the entry as it was).

    Args:
        plan: what :func:`plan_training` made.
        log: progress lines.
        on_written: called with each task and its card as soon as its entry is in place
            (``hwnas train`` records it in its run there: an interrupted or failed run leaves
            the entries done so far recorded, :func:`record_retrained`).

    Returns:
        The cards written, in task order.
    """
    log = log or (lambda _m: None)
    cards = []
    for i, task in enumerate(plan.tasks):
        trainer = plan.trainers[(task.arch.space, task.dataset)]
        log(f"training {i + 1}/{len(plan.tasks)}: {task.arch.text}")
        model, card = trained_entry(
            trainer, task.arch, task.folder.name, task.devices, task.table_accuracy, task.found,
            table_explained=task.table_explained,
        )  # fmt: skip
        from hwnas.zoo.entry import write_entry
        from hwnas.zoo.write import same_network_of

        # the zoo's other entries whose model.onnx has this graph, as their cards say
        same = same_network_of(task.folder, card.get("graph_signature"))
        card = {k: v for k, v in card.items() if k != "same_network"}
        if same is not None:
            card["same_network"] = same
        task.folder.parent.mkdir(parents=True, exist_ok=True)
        sweep_temporaries(task.folder.parent)
        tmp = _temporary(task.folder)
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            cards.append(write_entry(tmp, model, card))
            _swap_in(tmp, task.folder)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        if on_written is not None:
            on_written(task, cards[-1])
    return cards
