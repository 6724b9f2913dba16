"""The run folder of every search, written from this one place.

A search stage (:mod:`hwnas.jobs.table` for table and few-shot searches,
:mod:`hwnas.jobs.supernet` for supernet searches) ends with a :class:`RunOutput`: the result,
what its zoo is made of and the summary fields only it knows. :func:`write_run` then writes
``pareto.csv``, ``pareto.png``, the zoo, ``summary.json`` and records the run in its study
(:func:`hwnas.engine.publish.publish_run`), in that order, for all of them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hwnas.engine.loop import SearchResult, TrialRecord
from hwnas.engine.plot import PlotProcess, front_spec
from hwnas.engine.publish import publish_run
from hwnas.engine.report import (
    empty_front_header,
    pareto_rows,
    plot_front,
    write_csv,
    write_summary,
)
from hwnas.progress import SILENT, Reporter
from hwnas.spaces import SearchSpace
from hwnas.zoo import write_zoo, zoo_columns
from hwnas.zoo.read import zoo_manifest
from hwnas.zoo.write import remove_zoo


@dataclass
class RunOutput:
    """What a search stage hands to :func:`write_run`.

    Attributes:
        result: the search's result over its study.
        space: the space searched.
        device_name: the device, as the plot names it.
        num_classes: classes of the dataset whose accuracy is on the front (chance level).
        storage: the study's Optuna storage (the run is recorded there).
        study: the study's name.
        started: ``time.time()`` when the job started (summary.json's ``elapsed_s``).
        summary: the summary fields only this stage knows, given the number of zoo models
            written and the seconds the zoo took (in summary.json's key order).
        zoo_records: the records whose zoo entries are written (default: the Pareto front).
        others: arch -> device -> {"value": ms, "source"}: other devices' recorded latencies
            for the zoo cards (``None``: computed from the recorded devices when the zoo is
            written).
        trained: arch -> trained model handed to the zoo (supernet subnets), or a function
            making them for the records it is given (:func:`hwnas.zoo.write_zoo`'s), or None.
        trainer: a :class:`hwnas.zoo.train.ZooTrainer` training each zoo model, or None.
        accuracy_label: the plot's accuracy axis label (None: the table's).
        plotter: a :class:`~hwnas.engine.plot.PlotProcess` started with the search, or None.
        close: called after the zoo and before summary.json (the measurement store), or None.
    """

    result: SearchResult
    space: SearchSpace
    device_name: str
    num_classes: int
    storage: Any
    study: str
    started: float
    summary: Callable[[int, float], dict[str, Any]]
    zoo_records: list[TrialRecord] | None = None
    others: dict[str, dict[str, dict[str, Any]]] | None = None
    trained: dict[str, dict[str, Any]] | Callable[[list[TrialRecord]], Any] | None = None
    trainer: Any = None
    accuracy_label: str | None = None
    plotter: PlotProcess | None = None
    close: Callable[[], None] | None = None


SUMMARY_MAX_BYTES = 64 * 2**20
"""Largest ``summary.json`` :func:`read_summary` reads (a larger one is no run's)."""


def read_summary(out: Path) -> dict[str, Any]:
    """The run folder ``out``'s ``summary.json`` as a dict; empty where there is none, or it
    is no plain file, larger than :data:`SUMMARY_MAX_BYTES`, not JSON or not an object."""
    import json

    from hwnas.paths import plain_file

    summary = out / "summary.json"
    try:
        if not plain_file(summary) or summary.stat().st_size > SUMMARY_MAX_BYTES:
            return {}
        data = json.loads(summary.read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def check_run_folder(
    out: Path,
    study: str,
    option: str = "--out",
    storage_url: str | None = None,
    storage_only: bool = False,
    settings: dict[str, Any] | None = None,
) -> None:
    """Refuse, before a search, a run folder that holds another study's finished run (its
    ``summary.json`` names another study, or the same name in another storage: another
    ``--storage``, another hwnas home): the run would replace its pareto.csv, summary and zoo,
    silently (``--study b --out runs/a``; the same command run from the same folder with
    another ``HWNAS_HOME``).

    Args:
        out: the run folder.
        study: this search's study name.
        option: the option naming the folder, for the message.
        storage_url: this search's storage URL as its summary will name it (password
            redacted, :func:`hwnas.db.redact`; None: the default, ``studies.db`` in the hwnas
            home), compared with the summary's.
        storage_only: refuse only a run of ``study`` in another storage (the check before
            the storage is opened, where a few-shot search's study name is not yet final).
        settings: this search's settings (``SearchSettings.as_dict()``), or None: the
            message offers ``--study OTHER`` only where the other run's settings are this
            search's (that study would be refused as another search's: an edited space
            file, another strategy).

    Raises:
        HwnasError: one line naming the other study, or the other storage.
    """
    from hwnas.db import storage_hint, storage_identity
    from hwnas.errors import HwnasError

    data = read_summary(Path(out))  # unreadable: no run's summary to protect
    recorded = data.get("settings")
    other = recorded.get("study") if isinstance(recorded, dict) else None
    if isinstance(other, str) and other and other != study:
        if storage_only:
            return
        differ = _other_search(settings, recorded)
        if differ:
            raise HwnasError(
                f"{out} holds the run of study '{other}' (its summary.json), another search "
                f"({differ} differ), which this search ('{study}') would replace: give another "
                f"{option}"
            )
        raise HwnasError(
            f"{out} holds the run of study '{other}' (its summary.json), which this search "
            f"('{study}') would replace: give another {option}, or go on with that one: "
            f"--study {other}"
        )
    theirs = data.get("storage")
    if storage_url is None:
        from hwnas.db import redact
        from hwnas.paths import default_storage_url

        storage_url = redact(default_storage_url())
    ours = storage_url
    if isinstance(theirs, str) and theirs and storage_identity(theirs) != storage_identity(ours):
        theirs = theirs if len(theirs) <= 200 else theirs[:200] + "..."
        raise HwnasError(
            f"{out} holds the run of study '{study}' in another storage ({theirs}; its "
            f"summary.json), which this search (its study in {ours}) would replace: give "
            f"another {option}, or go on with that one: {storage_hint(theirs)}"
        )


def _other_search(ours: dict[str, Any] | None, theirs: Any) -> str:
    """The settings (``space_fingerprint, strategy``) in which the run folder's summary
    (``theirs``) is another search than ``ours``, as a study's identity counts them
    (:func:`hwnas.engine.loop._identity`; the study's name aside); "" where they are the same
    search, or either is unknown."""
    from hwnas.engine.loop import _identity

    if ours is None or not isinstance(theirs, dict):
        return ""
    a = {k: v for k, v in _identity(theirs).items() if k != "study"}
    b = {k: v for k, v in _identity(ours).items() if k != "study"}
    if "space_fingerprint" not in theirs:
        b.pop("space_fingerprint", None)  # a run made before hwnas recorded one
    return ", ".join(k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k))


def write_run(
    out: Path,
    o: RunOutput,
    zoo: bool = True,
    reporter: Reporter = SILENT,
    on_front: Callable[[SearchResult], None] | None = None,
    artifact_dir: Path | None = None,
) -> dict[str, Any]:
    """Write the run folder ``out`` of a finished search stage and record it in its study.

    Args:
        out: run folder (created).
        o: the stage's output.
        zoo: export the zoo (``--no-zoo``: not, and an earlier run's zoo folder is removed).
        reporter: shows the zoo export's progress (:mod:`hwnas.progress`).
        on_front: called with the result once ``pareto.csv`` and ``pareto.png`` are written,
            before the zoo (the CLI prints the front there).
        artifact_dir: the study's artifact store (:mod:`hwnas.engine.publish`).

    Returns:
        The summary written to ``summary.json``.

    Raises:
        HwnasError: a zoo entry that cannot be written (full disk), an unusable artifact store.
    """
    from hwnas.errors import HwnasError

    result, space = o.result, o.space
    out.mkdir(parents=True, exist_ok=True)
    records = o.zoo_records if o.zoo_records is not None else result.pareto
    columns = zoo_columns(records, o.num_classes, zoo)
    # a front row not put in the zoo (a supernet candidate scored by an earlier run, which
    # this one does not fine-tune again under --no-zoo) still says whether it is at chance
    for arch, cells in zoo_columns(result.pareto, o.num_classes, False).items():
        columns.setdefault(arch, cells)
    write_csv(out / "pareto.csv", pareto_rows(result, columns), empty_front_header(result))
    _plot(out / "pareto.png", o)
    if on_front is not None:
        on_front(result)
    cards: list[Path] = []
    zoo_started = time.time()
    # whether `hwnas train` retrained entries of the zoo in place (its summary says so)
    retrained = zoo and bool(read_summary(out).get("retrained"))
    if zoo:
        others = o.others
        if others is None:
            from hwnas.zoo.write import recorded_latencies

            others = recorded_latencies(
                space.name, [r.arch for r in result.pareto], o.device_name,
                dataset=result.settings.dataset, shipped=True,
            )  # fmt: skip
        cards = write_zoo(
            out / "zoo",
            result,
            space,
            others,
            records=o.zoo_records,
            trained=o.trained,
            trainer=o.trainer,
            log=o.trainer.log if o.trainer is not None else None,
            reporter=reporter,
            # the study read only where a zoo in place may hold trained entries to keep
            recorded=_recorded_zoo(o.storage, o.study, out) if (out / "zoo").is_dir() else None,
        )
    else:  # an earlier run's zoo would be read, verified and published as this run's
        remove_zoo(out / "zoo")
    extra = o.summary(len(cards), round(time.time() - zoo_started, 2))
    extra["no_zoo"] = not zoo  # no zoo at all (--no-zoo), not a zoo of 0 models
    if not zoo:  # no weights of any kind: "random" (or a supernet's "trained") said otherwise
        extra["zoo_weights"] = None
    if cards and extra.get("zoo_weights") == "random":  # trained entries kept (write_zoo)
        from hwnas.zoo.read import zoo_weights

        extra["zoo_weights"] = zoo_weights([c.parent for c in cards])  # trained, or mixed
    # the entries `hwnas train` retrained that write_zoo kept (a rerun dropped the record):
    # each as its card says now, under its name now (a kept entry moves with its front row)
    if retrained and o.trainer is None and "retrained" not in extra:
        from hwnas.zoo.jobs import _retrained_record
        from hwnas.zoo.read import read_entry

        kept = {}
        for card in cards:
            try:
                trained = read_entry(card.parent).get("weights_kind") == "trained"
            except HwnasError:
                continue
            if trained:
                kept[card.parent.name] = _retrained_record(card.parent)
        if kept:
            extra["retrained"] = kept
    if o.close is not None:
        o.close()
    elapsed = time.time() - o.started
    zoo_files = zoo_manifest(out) if zoo else {}  # a zoo/ kept under --no-zoo is not this run's
    summary = write_summary(out / "summary.json", result, extra, elapsed, zoo_files, o.num_classes)
    publish_run(o.storage, o.study, out, summary, artifact_dir, zoo=zoo)
    return summary


def _recorded_zoo(storage: Any, study: str, out: Path) -> dict[str, str]:
    """``zoo/<entry>/<file>`` -> sha256 that ``study`` recorded of run folder ``out``'s zoo
    when it last published it (or ``hwnas train`` recorded a retrained entry): what vouches
    for the trained entries :func:`hwnas.zoo.write_zoo` keeps. Empty where the study
    recorded another run folder, or none, or cannot be read."""
    import optuna

    try:
        attrs = optuna.load_study(study_name=study, storage=storage).user_attrs
    except Exception:  # noqa: BLE001 - no record: nothing is kept, as before
        return {}
    artifacts = attrs.get("artifacts")
    if attrs.get("run_folder") != str(out.resolve()) or not isinstance(artifacts, dict):
        return {}
    return {
        rel: v["sha256"]
        for rel, v in artifacts.items()
        if isinstance(rel, str) and rel.startswith("zoo/") and isinstance(v, dict)
        and isinstance(v.get("sha256"), str)
    }  # fmt: skip


def _plot(path: Path, o: RunOutput) -> None:
    """``pareto.png``: drawn by the plot process started with the search where there is one
    (matplotlib imported while the search ran), else here."""
    if o.plotter is not None:
        spec = front_spec(o.result, o.device_name, num_classes=o.num_classes)
        if o.plotter.draw(spec, path):
            return
    plot_front(
        o.result,
        path,
        o.device_name,
        accuracy_label=o.accuracy_label,
        num_classes=o.num_classes,
    )
