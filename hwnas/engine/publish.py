"""A finished run, published in its Optuna study: what ``hwnas runs`` lists and what
optuna-dashboard shows.

After a search writes its run folder, :func:`publish_run` puts in the study

- user attributes ``run_folder`` (absolute path) and ``summary`` (the numbers ``hwnas runs``
  lists: best architecture, trials, Pareto size, zoo size and weights);
- a note (optuna-dashboard's :func:`optuna_dashboard.save_note`, Markdown): the settings, the
  run folder, the summary and the zoo, written by :func:`write_notes` when ``hwnas dashboard``
  starts (importing optuna-dashboard costs a search 1-4 s);
- the run's ``pareto.png``, ``pareto.csv``, ``summary.json`` and every zoo entry's
  ``model.onnx``, ``README.md`` and ``card.json`` as Optuna study artifacts
  (:func:`optuna.artifacts.upload_artifact` into a
  :class:`optuna.artifacts.FileSystemArtifactStore`, by default ``artifacts/`` in the hwnas
  home), downloadable from the dashboard (``hwnas dashboard`` serves the same store).

Each file is uploaded once per run folder: the study's ``artifacts`` user attribute maps each
file (relative to the run folder) to its artifact id and sha256, so a resumed or repeated run
uploads only files whose content changed, removes the version it replaces, and removes the
artifacts of files the run folder no longer has (an earlier front's zoo entries). Links in a
run folder are never followed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from hwnas.errors import HwnasError
from hwnas.paths import plain_dir, plain_file, sha256_file, sweep_temporaries, temporary

ARTIFACT_FILES = ("pareto.png", "pareto.csv", "summary.json")
"""Run-folder files uploaded as artifacts (with each zoo entry's :data:`ZOO_FILES`)."""

ZOO_FILES = ("model.onnx", "README.md", "card.json")
"""Files of a zoo entry uploaded as artifacts."""


def default_artifact_dir() -> Path:
    """The artifact store of studies: ``artifacts/`` in the hwnas home."""
    from hwnas.paths import hwnas_home

    return hwnas_home() / "artifacts"


def dashboard_command(storage: str, artifact_dir: str | Path | None = None) -> str:
    """The command that serves a study of ``storage`` (its URL as shown: redacted,
    :func:`hwnas.db.storage_hint`) whose artifacts are in ``artifact_dir``: ``hwnas dashboard
    --storage URL``, and ``--artifact-dir DIR`` where that is not :func:`default_artifact_dir`
    (a dashboard serving the default store answers each of those downloads with HTTP 500)."""
    import shlex

    from hwnas.db import storage_hint

    command = f"hwnas dashboard {storage_hint(storage)}"
    if isinstance(artifact_dir, (str, Path)) and str(artifact_dir):
        folder = Path(artifact_dir).expanduser().resolve()
        if folder != default_artifact_dir().expanduser().resolve():
            command += f" --artifact-dir {shlex.quote(str(folder))}"
    return command


def elsewhere_line(briefs: list[tuple[Any, ...]], served: Path) -> str | None:
    """A ``warning:`` line naming the studies of ``briefs`` (:func:`hwnas.engine.ledger.
    study_briefs`) whose recorded ``artifact_dir`` is not ``served``, the artifact store a
    dashboard serves (their downloads fail there), with the option that serves them; None
    when there are none."""
    served = Path(served).expanduser().resolve()
    others = []
    for name, attrs, *_ in briefs:
        recorded = (attrs or {}).get("artifact_dir")
        if isinstance(recorded, str) and recorded and Path(recorded).resolve() != served:
            others.append((name, recorded))
    if not others:
        return None
    import shlex

    name, recorded = others[0]
    more = f" (and {len(others) - 1} more studies: `hwnas runs show STUDY` names each one's)"
    return (
        f"warning: study '{name}' records its artifacts in {recorded}, not in {served}, which "
        f"this dashboard serves: its downloads fail here; serve it with --artifact-dir "
        f"{shlex.quote(recorded)}{more if len(others) > 1 else ''}"
    )


def run_files(out: Path, zoo: bool = True) -> list[str]:
    """The files of run folder ``out`` uploaded as artifacts, relative to it (existing regular
    files, not links; its zoo's only with ``zoo``)."""
    names = [n for n in ARTIFACT_FILES if plain_file(out / n)]
    folder = out / "zoo"
    if zoo and plain_dir(folder):  # links are never followed: they could name any file
        for entry in sorted(p for p in folder.iterdir() if plain_dir(p)):
            names += [f"zoo/{entry.name}/{f}" for f in ZOO_FILES if plain_file(entry / f)]
    return names


def brief_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """The part of ``summary.json`` kept in the study (what ``hwnas runs list`` shows)."""
    trials = summary.get("trials")
    trials = trials if isinstance(trials, dict) else {}  # a summary.json edited by hand
    return {
        "best": summary.get("best"),
        "best_rule": summary.get("best_rule"),
        "units": summary.get("units"),  # "ms per batch of 32" for a table of a batch
        "trials": trials.get("completed", trials.get("budget")),
        "pareto_size": summary.get("pareto_size"),
        "zoo_models": summary.get("zoo_models"),
        "zoo_weights": summary.get("zoo_weights"),
        "no_zoo": summary.get("no_zoo"),  # --no-zoo: no zoo, not 0 models
        "measurements": summary.get("measurements"),
        "elapsed_s": summary.get("elapsed_s"),
        "finished_at": summary.get("finished_at"),
        # the settings as the run used them: a supernet search's dataset is its training data
        # (as in the study's own record since it holds table_dataset too; before, there, the
        # tables' dataset)
        "settings": summary.get("settings"),
    }


def run_settings(attrs: dict[str, Any]) -> dict[str, Any]:
    """A study's search settings from its user attributes: as its finished run used them (its
    :func:`brief_summary`), else as the study was opened with them (a run not finished, or one
    recorded by an older hwnas). ``{}`` for a study hwnas did not make (another program's
    study in a shared storage): attributes that are not dicts are ignored, never raised on."""
    summary = attrs.get("summary")
    finished = summary.get("settings") if isinstance(summary, dict) else None
    for settings in (finished, attrs.get("settings")):
        if isinstance(settings, dict) and settings:
            return settings
    return {}


def _md_code(value: Any, cell: bool = False) -> str:
    """``value`` as a Markdown code span that nothing in it can end: fenced by one backtick
    more than its longest run of them, on one line, its pipes escaped in a table ``cell``.
    Inside a code span optuna-dashboard's Markdown renders no HTML."""
    import re

    text = " ".join(str(value).split())
    if cell:
        text = text.replace("|", "\\|")
    run = max((len(m) for m in re.findall(r"`+", text)), default=0)
    pad = " " if run else ""
    return f"{'`' * (run + 1)}{pad}{text}{pad}{'`' * (run + 1)}"


def _md_text(value: Any) -> str:
    """``value`` as Markdown text that renders as itself: on one line, HTML's ``<`` and ``&``
    escaped, Markdown's punctuation backslash-escaped (a value another program wrote into a
    study attribute cannot become a link, an image or HTML in the note)."""
    import html
    import re

    text = html.escape(" ".join(str(value).split()), quote=False)
    return re.sub(r"([\\`*_{}\[\]()#+!|~>])", r"\\\1", text)


def _costs_text(best: dict[str, Any], brief: dict[str, Any], settings: Any) -> str:
    """The costs of a run's ``best`` as the terminal prints them: each value in hwnas's digits
    with its unit (the run's ``units``: "14.079 ms per batch of 32" for a table of a batch),
    the searched metric first and the others named in brackets ("18.83 mJ (latency 34.000
    ms)"). Values that are not numbers (another program's attribute) are left out."""
    from hwnas.cost_record import UNITS, cost_digits
    from hwnas.engine.evaluate import OBJECTIVES

    units = brief.get("units") if isinstance(brief.get("units"), dict) else {}
    objective = settings.get("objective") if isinstance(settings, dict) else None
    first = OBJECTIVES.get(objective if isinstance(objective, str) else "", "latency_ms")
    shown = []
    for m in sorted(UNITS, key=lambda m: m != first):
        value = best.get(m)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            unit = units.get(m) if isinstance(units.get(m), str) else UNITS[m]
            shown.append((m, f"{cost_digits(value)} {unit}"))
    if not shown:
        return ""
    (m, text), others = shown[0], shown[1:]
    text = text if m == first else f"{m.split('_')[0]} {text}"
    named = ", ".join(f"{o.split('_')[0]} {v}" for o, v in others)
    return text + (f" ({named})" if named else "")


def note_markdown(
    study_name: str, out: str, brief: dict[str, Any], settings: dict[str, Any] | None
) -> str:
    """The study's note: run folder, best architecture, counts and settings (Markdown).

    Args:
        study_name: the study.
        out: the run folder.
        brief: :func:`brief_summary` of the run.
        settings: the study's ``settings`` user attribute.

    Values of another type than hwnas writes (a study attribute edited by another program)
    are printed as they are, or left out where a number is formatted; never raised on.
    """

    def number(value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    t = _md_text
    lines = [f"## hwnas run {_md_code(study_name)}", "", f"Run folder: {_md_code(out)}", ""]
    best = brief.get("best")
    if isinstance(best, dict) and number(best.get("accuracy")):
        lines += [
            f"**Best** ({t(brief.get('best_rule', ''))}): {_md_code(best.get('arch'))}, "
            f"{best['accuracy']:.2f}% top-1, {t(_costs_text(best, brief, settings))}",
            "",
        ]
    zoo = (
        "none (--no-zoo)"
        if brief.get("no_zoo") is True
        else f"{t(brief.get('zoo_models', 0))} {t(brief.get('zoo_weights') or '')} ONNX models"
    )
    lines += [
        f"Trials: {t(brief.get('trials', '?'))} scored; Pareto front: "
        f"{t(brief.get('pareto_size', '?'))} architectures; zoo: {zoo}; "
        f"{t(brief.get('elapsed_s', '?'))} s; finished {t(brief.get('finished_at', '?'))}.",
        "",
        "### Settings",
        "",
        "| setting | value |",
        "|---|---|",
    ]
    for key, value in (settings if isinstance(settings, dict) else {}).items():
        lines.append(f"| {t(key)} | {_md_code(value, cell=True)} |")
    if brief.get("measurements"):
        lines += ["", f"Measurements: {_md_code(json.dumps(brief['measurements']))}"]
    lines += [
        "",
        "The run's pareto.png, pareto.csv, summary.json and each zoo entry's model.onnx, "
        "README.md and card.json are this study's artifacts (Study Artifacts, at the end of "
        "the study's page).",
    ]
    return "\n".join(lines) + "\n"


class NotesUnwritten(HwnasError):
    """The storage refused to write a note (a database the user may read but not write: a
    read-only file or mount, a read-only database role); the notes written before it stay."""


def write_notes(storage: Any) -> int:
    """Write the note of every study whose run finished since its note was written
    (``hwnas dashboard`` calls this before serving: importing optuna-dashboard takes seconds,
    which a search does not pay). Returns the number of notes written.

    A study not shaped like hwnas's (another program's study in a shared storage: no hwnas
    settings, a ``summary`` that is not a dict, a ``run_folder`` that is not a string,
    attributes that are not JSON) is skipped, never raised on or written to.

    Raises:
        NotesUnwritten: the storage refused a write (one line saying why), at the first note.
    """
    import optuna
    import sqlalchemy
    from optuna.exceptions import StorageInternalError
    from optuna_dashboard import save_note

    from hwnas.db import scrub
    from hwnas.engine.ledger import study_briefs

    written = 0
    for name, attrs, *_ in study_briefs(storage):
        attrs = attrs or {}  # unreadable (not JSON): another program's study
        brief, folder = attrs.get("summary"), attrs.get("run_folder")
        if not isinstance(brief, dict) or not brief or not isinstance(folder, str) or not folder:
            continue
        if not run_settings(attrs):
            continue
        if attrs.get("note_for") == brief.get("finished_at"):
            continue
        study = optuna.load_study(study_name=name, storage=storage)
        try:
            save_note(study, note_markdown(name, folder, brief, run_settings(attrs)))
            study.set_user_attr("note_for", brief.get("finished_at"))
        except (StorageInternalError, sqlalchemy.exc.SQLAlchemyError) as exc:
            cause = exc.__cause__ if isinstance(exc, StorageInternalError) else exc
            why = str(getattr(cause, "orig", None) or cause or exc).strip().splitlines()
            raise NotesUnwritten(
                f"the storage refused to write the note of study '{name}': "
                f"{scrub((why or [type(exc).__name__])[0][:200])}"
            ) from None
        written += 1
    return written


def publish_run(
    storage: Any,
    study_name: str,
    out: Path,
    summary: dict[str, Any],
    artifact_dir: Path | None = None,
    zoo: bool = True,
) -> dict[str, Any]:
    """Record a finished run in its study (attributes, note, artifacts; see the module).

    Args:
        storage: the Optuna storage (URL or object) holding the study.
        study_name: the study.
        out: the run folder (its files are uploaded).
        summary: the run's ``summary.json`` dict.
        artifact_dir: the file-system artifact store (default :func:`default_artifact_dir`).
        zoo: whether the run wrote a zoo (``--no-zoo``: a ``zoo/`` in the folder is not the
            run's, and is not uploaded).

    Returns:
        ``{"artifact_dir": str, "uploaded": [files], "kept": [files], "removed": [files]}``:
        files uploaded now, files whose artifact from an earlier run of the study was already
        current, and an earlier run's files this run folder no longer has (their artifacts
        deleted: an earlier front's zoo entries). A study whose artifacts were in another
        folder forgets them there and uploads every file here.

    Raises:
        HwnasError: the artifact folder cannot be created or written.
    """
    import optuna

    from hwnas.paths import file_lock

    out = Path(out).resolve()
    artifact_dir = Path(artifact_dir or default_artifact_dir()).expanduser().resolve()
    try:
        artifact_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise HwnasError(f"cannot create artifact folder {artifact_dir}: {exc}") from None
    study = optuna.load_study(study_name=study_name, storage=storage)
    moved = study.user_attrs.get("artifact_dir") not in (None, str(artifact_dir))
    study.set_user_attr("run_folder", str(out))
    study.set_user_attr("summary", brief_summary(summary))
    study.set_user_attr("artifact_dir", str(artifact_dir))
    # workers finishing the same study at once: one publishes at a time, the others find the
    # files uploaded (their sha256 in the study) and upload nothing
    with file_lock(artifact_dir / ".publish.lock"):
        return _upload(study, out, artifact_dir, fresh=moved, zoo=zoo)


def _upload(
    study: Any, out: Path, artifact_dir: Path, fresh: bool, zoo: bool = True
) -> dict[str, Any]:
    """Upload the run folder's new or changed files (every file when ``fresh``: the study's
    artifacts were in another store)."""
    from optuna.artifacts import FileSystemArtifactStore, upload_artifact

    from hwnas.errors import out_of_space

    store = _WholeFiles(FileSystemArtifactStore(str(artifact_dir)))
    known = _recorded(study)
    if fresh:  # the records of another store's files: the dashboard serves this one
        for record in known.values():
            _forget(study, record["id"])
        known = {}
    uploaded, kept = [], []
    sweep_temporaries(artifact_dir)  # links a killed upload left
    links = temporary(artifact_dir / "links")
    links.mkdir()
    try:
        for rel in run_files(out, zoo):
            path = out / rel
            digest = sha256_file(path)
            old = known.get(rel)
            # kept while its copy is there (a file deleted from the folder by another hand,
            # optuna-dashboard's delete among them, is uploaded again)
            if old and old.get("sha256") == digest and (artifact_dir / old["id"]).is_file():
                kept.append(rel)
                continue
            # the dashboard names an artifact by its file name: make it say where it is from
            link = links / rel.replace("/", "__")
            os.symlink(path, link)
            try:
                artifact_id = upload_artifact(
                    artifact_store=store, file_path=str(link), study_or_trial=study
                )
            except OSError as exc:
                if store.failed is not None:  # its record names a file that is not there
                    _forget(study, store.failed)
                why = out_of_space(exc) or exc.strerror or exc
                raise HwnasError(f"cannot write artifact folder {artifact_dir}: {why}") from None
            if old and not fresh:  # a changed file: the new version replaces the old one
                _remove(study, store, old["id"])
            known[rel] = {"id": artifact_id, "sha256": digest}
            uploaded.append(rel)
            # recorded at once: a later failure (a full disk) keeps what is uploaded
            study.set_user_attr("artifacts", known)
    finally:
        shutil.rmtree(links, ignore_errors=True)
    current = set(uploaded) | set(kept)
    gone = [rel for rel in known if rel not in current]  # an earlier front's zoo entries
    for rel in gone:
        _remove(study, store, known.pop(rel)["id"])
    if gone:
        study.set_user_attr("artifacts", known)
    return {"artifact_dir": str(artifact_dir), "uploaded": uploaded, "kept": kept,
            "removed": gone}  # fmt: skip


class _WholeFiles:
    """An artifact store whose files are whole or absent: a write that fails part-way (a full
    disk) removes what it wrote, so no partial, unrecorded artifact stays in the folder."""

    def __init__(self, store: Any):
        self.store = store
        self.failed: str | None = None  # the artifact whose write failed

    def write(self, artifact_id: str, content_body: Any) -> None:
        try:
            self.store.write(artifact_id, content_body)
        except BaseException:
            self.failed = artifact_id
            try:
                self.store.remove(artifact_id)
            except Exception:
                pass
            raise

    def open_reader(self, artifact_id: str) -> Any:
        return self.store.open_reader(artifact_id)

    def remove(self, artifact_id: str) -> None:
        self.store.remove(artifact_id)


def _recorded(study: Any) -> dict[str, dict[str, str]]:
    """The study's ``artifacts`` attribute (run-folder file -> ``{"id", "sha256"}``), keeping
    only entries that name an artifact Optuna made for this study: a study database handed
    over could name any file of the shared artifact folder, and the file it names is deleted
    when a newer version replaces it."""
    import uuid

    from hwnas.engine.ledger import study_system_attrs

    attrs = study.user_attrs.get("artifacts")
    system = study_system_attrs(study)
    out = {}
    for rel, record in (attrs.items() if isinstance(attrs, dict) else ()):
        if not isinstance(record, dict) or not isinstance(record.get("sha256"), str):
            continue
        artifact_id = record.get("id")
        try:
            own = str(uuid.UUID(artifact_id)) == artifact_id  # Optuna's ids are uuid4s
        except (TypeError, ValueError, AttributeError):
            own = False
        if own and system.get(f"artifacts:{artifact_id}") not in (None, "null"):  # _forget
            out[str(rel)] = {"id": artifact_id, "sha256": record["sha256"]}
    return out


def _remove(study: Any, store: Any, artifact_id: str) -> None:
    """Delete an artifact of ``study`` as optuna-dashboard does (its file, then its record)."""
    from optuna.artifacts.exceptions import ArtifactNotFound

    try:
        store.remove(artifact_id)
    except ArtifactNotFound:
        pass
    _forget(study, artifact_id)


def _forget(study: Any, artifact_id: str) -> None:
    """Drop the study's record of an artifact (its row: Optuna's listing of a study's
    artifacts fails on the ``null`` optuna-dashboard's delete leaves)."""
    from hwnas.engine.ledger import drop_study_system_attr

    drop_study_system_attr(study, f"artifacts:{artifact_id}")
