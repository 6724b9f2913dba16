"""One search's settings from the options of ``hwnas search``: the CLI's and ``hwnas.search``'s.

:func:`build_settings` is the one place where the options a user gives (on the command line, or
as keyword arguments of :func:`hwnas.search`) become a search's settings: the empty and
misplaced options refused, the default strategy resolved, the table or supernet settings type
made (each checks its own values). The CLI and the Python API both call it, so the same
options give the same search.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any

from hwnas.errors import EXIT_USAGE, HwnasError, shown

SUPERNET_ONLY = {
    "epochs": "--epochs",
    "batch_size": "--batch-size",
    "data": "--data",
    "finetune_epochs": "--finetune-epochs",
    "latency_target": "--latency-target",
    "latency_weight": "--latency-weight",
    "settings": "--set",
}
"""Options a table search does not read (``--epochs``, ``--batch-size`` and ``--data`` are read
with ``--train-zoo``)."""

TABLE_ONLY = {
    "runtime": "--runtime",
    "predictor": "--predictor",
    "measurement_budget": "--measurement-budget",
    "budget": "--budget",
}
"""Options a supernet search does not read."""


def default_strategy(
    device: str,
    space: str | None,
    objective: str,
    runtime: str | None,
    predictor: str | None,
    measurement_budget: int | None,
) -> str:
    """The table strategy run when no strategy is given
    (:func:`hwnas.engine.strategies.default_strategy`: ``frontier`` where every candidate's
    cost can be known before its accuracy, else ``nsga3``).

    Raises:
        HwnasError: unknown device, space or runtime (the same one-line errors as the search).
    """
    from hwnas.devices import get_device
    from hwnas.engine.evaluate import objective_metric
    from hwnas.engine.loop import DEFAULT_SPACE
    from hwnas.engine.strategies import default_strategy as resolve
    from hwnas.spaces import get_space

    dev = get_device(device, runtime=runtime)
    fewshot = predictor is not None or measurement_budget is not None or not dev.can_measure
    return resolve(get_space(space or DEFAULT_SPACE), dev, objective_metric(objective), fewshot)


def parse_settings(items: Collection[str] | Mapping[str, Any]) -> dict[str, Any]:
    """``KEY=VALUE`` strings (``--set``), or a mapping (the Python API), -> {key: value}; the
    values are typed and checked against the declared settings by
    :func:`hwnas.supernet.settings.parse_options`.

    Raises:
        HwnasError: an item that is no string, or without '=', or a key given twice.
    """
    if isinstance(items, Mapping):
        return dict(items)
    if isinstance(items, (str, bytes)) or not isinstance(items, Collection):
        # a string was read character by character ("got 'l'"), a number was a TypeError
        raise HwnasError(
            f"--set takes KEY=VALUE items (from Python, settings={{'KEY': VALUE}}), got "
            f"{shown(items)}"
        )
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, str):  # settings=[("evolution_trials", 4)]: an AttributeError
            raise HwnasError(
                f"--set takes KEY=VALUE items (from Python, settings={{'KEY': VALUE}}), got "
                f"{shown(item)} among them"
            )
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise HwnasError(f"--set needs KEY=VALUE, got '{item}'")
        if key.strip() in out:
            raise HwnasError(f"--set {key.strip()} is given twice")
        out[key.strip()] = value.strip()
    return out


def refuse_processes(strategy: str, nproc: int | None) -> None:
    """Stop a table search given ``--nproc`` or started by torchrun with several processes.

    Raises:
        HwnasError: when ``nproc`` is given or ``WORLD_SIZE`` is above 1 (on rank 0; the other
            ranks exit with status 2 without a word).
    """
    if nproc is not None or int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        if int(os.environ.get("RANK", "0") or 0) > 0:
            raise SystemExit(EXIT_USAGE)  # rank 0 says it, once
        raise HwnasError(
            f"--nproc and torchrun train supernets; table strategy '{strategy}' runs in one "
            "process (for more, start several workers on one study: docs/workers.md)"
        )


def _defaults(cls) -> dict[str, Any]:
    """The defaults a settings type declares (the options a caller left out take them)."""
    import dataclasses

    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _default(cls, name: str) -> Any:
    return _defaults(cls)[name]


def build_settings(options: Mapping[str, Any], given: Collection[str]) -> Any:
    """The settings of the search ``options`` describe.

    Args:
        options: ``hwnas search``'s options by parameter name (``device``, ``space``,
            ``dataset``, ``objective``, ``max_latency``, ``budget``, ``strategy``, ``runtime``,
            ``study``, ``seed``, ``predictor``, ``measurement_budget``, ``train_zoo``, and the
            supernet options ``data``, ``epochs``, ``latency_target``, ``latency_weight``,
            ``batch_size``, ``finetune_epochs``, ``nproc``, ``settings``); one left out takes
            the default its settings type declares.
        given: the names the user gave (an option of the other kind of search given is
            refused; one left at its default is not).

    Returns:
        A :class:`hwnas.engine.loop.SearchSettings` (table strategies) or a
        :class:`hwnas.jobs.supernet.SupernetSettings` (supernet strategies).

    Raises:
        HwnasError: an empty name, an option of the other kind of search, an unknown
            strategy, device, space or runtime, a bad value (one line each).
    """
    from hwnas.engine.loop import SearchSettings
    from hwnas.engine.strategies import pipeline_of

    o = dict(options)
    o.setdefault("objective", _default(SearchSettings, "objective"))
    _refuse_empty(o)
    if o.get("accuracy") is not None:
        o["accuracy"] = accuracy_label(o["accuracy"])
    strategy = o.get("strategy") or default_strategy(
        o["device"],
        o.get("space"),
        o["objective"],
        o.get("runtime"),
        o.get("predictor"),
        o.get("measurement_budget"),
    )
    if pipeline_of(strategy) == "supernet":
        return _supernet_settings(o, given, strategy)
    return _table_settings(o, given, strategy)


def _refuse_empty(o: Mapping[str, Any]) -> None:
    named = (("--dataset", "dataset"), ("--space", "space"), ("--strategy", "strategy"),
             ("--study", "study"))  # fmt: skip
    for flag, key in named:
        if o.get(key) is not None and not str(o[key]).strip():
            raise HwnasError(f"{flag} is empty; leave it out for the default")


def check_before_space(
    options: Mapping[str, Any],
    given: Collection[str],
    out: Any = None,
    store: Any = None,
    artifact_dir: Any = None,
) -> None:
    """The checks of :func:`build_settings` (and of the run) that need no space, for before a
    ``FILE.py:ATTR`` space is imported (its code runs: a model may train): an empty name, a
    ``--data`` that is neither ``digits`` nor a folder, an ``--accuracy`` file that is not
    there, a study name that cannot name the default run folder, a run folder or artifact
    store that cannot be written, a measurement store in a folder that is not there, and,
    where the strategy is given, the options of the other kind of search and the training
    numbers. The rest (``--dataset`` and ``--set`` against the space's, a
    default strategy, which the space decides) stays with :func:`build_settings`.

    Args:
        options: as :func:`build_settings` takes them (``space`` not read).
        given: the names the user gave.
        out: the run folder given (``--out``), or None (``runs/<study>``).
        store: the measurement store given (``--store``), or None.
        artifact_dir: the artifact store given (``--artifact-dir``), or None.

    Raises:
        HwnasError: one line, as :func:`build_settings` or the run would say it.
    """
    from pathlib import Path

    from hwnas.engine.strategies import pipeline_of
    from hwnas.paths import ZOO_MIN_FREE_MB, check_writable, confined
    from hwnas.usercode import CODE

    o = dict(options)
    _refuse_empty(o)
    data = o.get("data")
    if "data" in given and isinstance(data, (str, os.PathLike)):
        from hwnas.datasets import check_data

        check_data(str(data))
    accuracy = o.get("accuracy")
    code = CODE.match(accuracy) if isinstance(accuracy, str) else None
    if code is not None and not Path(code["file"]).expanduser().is_file():
        raise HwnasError(f"Python file not found: {Path(code['file']).expanduser()}")
    if out is not None:
        check_writable(out, "--out", ZOO_MIN_FREE_MB)
    elif o.get("study"):
        confined(Path("runs"), o["study"], what="study name (the default --out)")
    if store is not None:
        from hwnas.store import check_store_folder

        check_store_folder(store)
    if artifact_dir is not None:
        check_writable(artifact_dir, "--artifact-dir")
    for name in ("epochs", "batch_size"):
        if name in given and o.get(name) is not None:
            _check_training(name, o[name])
    strategy = o.get("strategy")
    if not strategy:
        return
    if pipeline_of(strategy) == "supernet":
        _refuse_table_options(o, given, strategy)
    else:
        refuse_processes(strategy, o.get("nproc"))
        _refuse_supernet_options(o, given, strategy)


def _check_training(name: str, value: Any) -> None:
    """``--epochs`` (at least 1) or ``--batch-size`` (at least 2) as a supernet search and
    ``--train-zoo`` check them."""
    from hwnas.limits import MAX_BATCH_SIZE, MAX_EPOCHS, bounded

    flag, low, high = {
        "epochs": ("--epochs", 1, MAX_EPOCHS),
        "batch_size": ("--batch-size", 2, MAX_BATCH_SIZE),
    }[name]
    bounded(flag, value, integer=True)
    if value < low:
        raise HwnasError(f"{flag} must be at least {low}, got {value}")
    bounded(flag, value, low, high, integer=True)


def _refuse_supernet_options(o: Mapping[str, Any], given: Collection[str], strategy: str) -> None:
    """Refuse the supernet options a table search does not read.

    Raises:
        HwnasError: one line naming them.
    """
    read: tuple[str, ...] = ("epochs", "batch_size", "data") if o.get("train_zoo") else ()
    if o.get("accuracy") is not None:
        read = (*read, "data")  # handed to the user's accuracy function
    wrong = [f for name, f in SUPERNET_ONLY.items() if name in given and name not in read]
    if wrong:
        zoo = (
            " (--epochs, --batch-size and --data apply to --train-zoo; --data also to "
            "--accuracy)"
            if {"--epochs", "--batch-size", "--data"} & set(wrong)
            else ""
        )
        raise HwnasError(
            f"{', '.join(wrong)} applies to supernet strategies, not to table strategy "
            f"'{strategy}'{zoo}"
        )


def _table_settings(o: dict[str, Any], given: Collection[str], strategy: str) -> Any:
    from hwnas.engine.loop import DEFAULT_SPACE, SearchSettings

    dataset = o.get("dataset")  # left out: the space's (below), not the declared default
    o = {**_defaults(SearchSettings), **o}
    refuse_processes(strategy, o.get("nproc"))
    _refuse_supernet_options(o, given, strategy)
    space = o.get("space") or DEFAULT_SPACE
    return SearchSettings(
        space=space,
        device=o["device"],
        dataset=dataset or space_dataset(space, _default(SearchSettings, "dataset")),
        objective=o["objective"],
        budget=o["budget"] if "budget" in given else space_budget(space, o["budget"]),
        strategy=strategy,
        seed=o["seed"],
        max_latency=o.get("max_latency"),
        study=o.get("study") or "",
        runtime=o.get("runtime"),
        accuracy=o.get("accuracy"),
        data=o.get("data") if o.get("accuracy") is not None and "data" in given else None,
    )


def _refuse_table_options(o: Mapping[str, Any], given: Collection[str], strategy: str) -> None:
    """Refuse the table-search options a supernet search does not read.

    Raises:
        HwnasError: one line naming them.
    """
    from hwnas.supernet.settings import strategy_settings

    if o.get("train_zoo"):
        raise HwnasError(
            f"--train-zoo applies to table search; supernet strategy '{strategy}' already "
            "puts its fine-tuned subnets in the zoo"
        )
    wrong = [flag for name, flag in TABLE_ONLY.items() if name in given and o.get(name) is not None]
    if wrong:
        hint = (
            "; for a supernet cost model from a predictor use --set cost=predicted "
            "--set predictor=NAME"
            if {"--predictor", "--measurement-budget"} & set(wrong)
            else ""
        )
        if "--budget" in wrong and "evolution_trials" in strategy_settings(strategy):
            hint += "; the subnets its evolution scores: --set evolution_trials=N"
        raise HwnasError(
            f"{', '.join(wrong)} applies to table search, not to supernet strategy "
            f"'{strategy}'{hint}"
        )


def _supernet_settings(o: dict[str, Any], given: Collection[str], strategy: str) -> Any:
    from hwnas.distributed import check_processes, ranks_from_env
    from hwnas.jobs.supernet import SupernetSettings
    from hwnas.supernet.strategies import DEFAULT_SPACE

    dataset = o.get("dataset")  # left out: the space's (below), not the declared default
    o = {**_defaults(SupernetSettings), **o}
    _refuse_table_options(o, given, strategy)
    nproc = o.get("nproc")
    if nproc is not None:
        if ranks_from_env().many:
            raise HwnasError("--nproc starts torchrun itself: give it, or run under torchrun")
        check_processes(o["batch_size"], nproc)
    space = o.get("space") or DEFAULT_SPACE[strategy]
    default = space_dataset(space, _default(SupernetSettings, "dataset"))
    if dataset is not None and dataset != default:
        _check_deployment_dataset(space, dataset)
    dataset = dataset or default
    return SupernetSettings(
        space=space,
        device=o["device"],
        dataset=dataset,
        objective=o["objective"],
        strategy=strategy,
        seed=o["seed"],
        max_latency=o.get("max_latency"),
        study=o.get("study") or "",
        data=o["data"] if o["data"] is not None else _default(SupernetSettings, "data"),
        epochs=o["epochs"],
        latency_target=o.get("latency_target"),
        latency_weight=o.get("latency_weight"),
        batch_size=o["batch_size"],
        finetune_epochs=o["finetune_epochs"],
        options=parse_settings(o.get("settings") or ()),
        accuracy=o.get("accuracy"),
    )


def _check_deployment_dataset(space_name: str, dataset: str) -> None:
    """Refuse a ``--dataset`` other than the default for a table-less space that has it: a
    supernet search of a declared space trains on ``--data`` and measures its networks at
    its ``reference_dataset`` whatever ``--dataset`` says, so the option was ignored (a 48x48
    space searched with --dataset cifar10 measured 48x48 networks) while it still made the
    study another search's.

    Raises:
        HwnasError: one line naming the dataset, the reference one and what to do.
    """
    from hwnas.spaces import IndexedSpace, ability, get_space

    space = get_space(space_name)
    if ability(space, IndexedSpace) is not None or dataset not in space.datasets():
        return  # a table's dataset picks its tables; one the space lacks is refused later
    ref = space.reference_dataset
    raise HwnasError(
        f"--dataset {dataset} changes nothing in a supernet search of {space_name}: it trains "
        f"on --data and measures its networks at its reference_dataset, {ref}: leave "
        "--dataset out (another deployment size is a copy of the space file with another "
        "reference_dataset)"
    )


def space_dataset(space: str, default: str) -> str:
    """The dataset a search of ``space`` takes when none is given: ``default`` where the space
    has it, else the space's first (a user's model made elastic knows only its own).

    Raises:
        HwnasError: an unknown space (one line).
    """
    from hwnas.spaces import get_space

    return get_space(space).default_dataset(default)


def space_budget(space: str, default: int) -> int:
    """The budget of a search of ``space`` that names none: ``default`` (300), or every
    architecture of a smaller space (a user's model made elastic may have 80), or of its
    accuracy table where the table holds fewer. A budget given is never changed: one above the
    space's size is refused in one line (:func:`hwnas.jobs.table.prepare`).

    Raises:
        HwnasError: an unknown space (one line).
    """
    from hwnas.spaces import TabulatedSpace, ability, get_space

    found = get_space(space)
    tabulated = ability(found, TabulatedSpace)
    sizes = [default, found.num_architectures()]
    if tabulated is not None:
        sizes.append(len(tabulated))
    return min(sizes)


def accuracy_label(value: Any) -> str:
    """The label settings carry for the accuracy function ``value``: a function (the Python
    API; registered by :func:`hwnas.engine.evaluate.register_accuracy`) or its
    ``path/to/file.py:function`` (``--accuracy``; imported and checked now, before any work).

    Raises:
        HwnasError: not a function of the accuracy protocol, a file that cannot be imported,
            an unknown name.
    """
    from hwnas.engine.evaluate import get_accuracy, register_accuracy

    if not isinstance(value, str):  # a function (anything else is refused there)
        return register_accuracy(value)
    get_accuracy(str(value))
    return str(value)
