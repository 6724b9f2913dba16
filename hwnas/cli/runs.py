"""``hwnas runs list|show``: past searches, read from their Optuna studies.

A finished search records its run folder and summary in its study
(:func:`hwnas.engine.publish.publish_run`), so the listing reads only study summaries: no
trial is loaded, and no run folder is needed (one that was moved or deleted is shown as such).
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import click

from hwnas.cli.options import storage_option
from hwnas.cost_record import cost_digits as num
from hwnas.engine.publish import run_settings
from hwnas.paths import read_bounded_text

SETTING_UNITS = {"max_latency": "ms"}
"""The unit of a numeric search setting, printed after its value."""


def _storage(storage: str | None):
    """(the storage URL to show: without its password, the opened storage), refusing a missing
    default database before any work."""
    from hwnas.db import redact
    from hwnas.errors import HwnasError
    from hwnas.paths import default_storage_url

    url = storage or default_storage_url()
    shown = redact(url)  # an unparseable URL is refused here, without echoing it
    from hwnas.engine.workers import missing_sqlite_file

    if missing_sqlite_file(url):
        raise HwnasError(f"no study database at {shown}; run `hwnas search` first")
    from hwnas.engine.loop import open_storage

    return shown, open_storage(url)


def _typed(value: Any, kind: type | tuple[type, ...]) -> Any:
    """``value`` if it is of ``kind`` (a study attribute as hwnas writes it), else None: the
    storage may hold other programs' studies, whose attributes can be anything. A bool is no
    number."""
    return value if isinstance(value, kind) and not isinstance(value, bool) else None


_NUMBER = (int, float)


def _best(value: Any) -> dict[str, Any] | None:
    """A summary's best architecture: a dict with an arch string and a numeric accuracy (%),
    else None (another program's attribute)."""
    best = _typed(value, dict)
    if best is None or _typed(best.get("arch"), str) is None:
        return None
    return best if _typed(best.get("accuracy"), _NUMBER) is not None else None


def run_rows(storage: Any) -> list[dict[str, Any]]:
    """One dict per study of ``storage``: study, whether hwnas made it (``hwnas_run``: it holds
    hwnas's search settings), device, space, strategy, trials, best (arch, accuracy %, latency
    ms), folder (None where the study records none: a search not finished), whether the
    folder still exists, and the zoo size. ``trials`` is the study's scored (COMPLETE) trials
    now, and ``unfinished`` says that a run scored some after the last run folder was written
    (a run killed, or running now). A study of another program sharing the storage is
    its name and trial count, the rest None; an attribute of another type than hwnas writes
    reads as None (trials: the study's count), and attributes that cannot be read at all
    (not JSON) as none, never raised on."""
    from hwnas.engine.ledger import study_briefs

    rows = []
    for name, attrs, n_trials, n_scored in study_briefs(storage):
        attrs = attrs or {}  # unreadable: listed as another program's study
        settings = run_settings(attrs)
        # another program's study: its name and trial count, none of its attributes
        summary = (_typed(attrs.get("summary"), dict) or {}) if settings else {}
        folder = (_typed(attrs.get("run_folder"), str) or None) if settings else None
        trials = _typed(summary.get("trials"), int)  # what the last finished run scored
        rows.append(
            {
                "study": name,
                "hwnas_run": bool(settings),
                "device": _typed(settings.get("device"), str),
                "space": _typed(settings.get("space"), str),
                "dataset": _typed(settings.get("dataset"), str),
                "objective": _typed(settings.get("objective", "latency"), str),
                "strategy": _typed(settings.get("strategy"), str),
                # what the study holds now: a later run killed before it finished scored
                # more than the folder's summary says (the folder is the earlier run's)
                "trials": n_scored if settings else n_trials,
                "unfinished": bool(settings) and n_scored > (trials or 0),
                "best": _best(summary.get("best")),
                "units": _typed(summary.get("units"), dict),
                "pareto_size": _typed(summary.get("pareto_size"), int),
                "zoo_models": _typed(summary.get("zoo_models"), int),
                "zoo_weights": _typed(summary.get("zoo_weights"), str),
                "no_zoo": summary.get("no_zoo") is True,  # --no-zoo: no zoo, not 0 models
                "finished_at": _typed(summary.get("finished_at"), str),
                "folder": folder,
                "folder_exists": folder is not None and Path(folder).is_dir(),
            }
        )
    return rows


def find_run(ref: str, rows: list[dict[str, Any]], url: str) -> dict[str, Any]:
    """The run of ``rows`` (:func:`run_rows`) that ``ref`` names: ``latest`` (the most recently
    finished search), a study name, a unique prefix of one, or a word that names one run only
    (a device, a space: ``raspi4``). ``latest:WORD`` is the most recent run whose name has WORD.

    Raises:
        HwnasError: no run, or several runs, match (the message lists them).
    """
    from hwnas.errors import HwnasError

    def recent(r: dict[str, Any]) -> str:
        return r["finished_at"] or ""

    def named(word: str) -> list[dict[str, Any]]:
        exact = [r for r in rows if r["study"] == word]
        prefix = [r for r in rows if r["study"].startswith(word)]
        # a whole word of the name first: cifar10 is not cifar100's, seed1 not seed10's
        words = [r for r in rows if word in r["study"].split("-")]
        parts = [r for r in rows if word in r["study"]]
        return exact or prefix or words or parts

    if not rows:
        raise HwnasError(f"no searches in {url} yet: run `hwnas search`")
    if ref == "latest" or ref.startswith("latest:"):
        word = ref.partition(":")[2]
        found = named(word) if word else rows
        finished = [r for r in found if r["finished_at"]]
        if not finished:
            unfinished = ", ".join(sorted(r["study"] for r in found))
            hint = (
                f"; unfinished (killed, or still running): {unfinished}: `hwnas runs show "
                "STUDY` shows one, and rerunning its search command finishes it"
                if found
                else ""
            )
            raise HwnasError(f"no finished search matches '{ref}' in {url}{hint}")
        return max(finished, key=recent)
    found = named(ref)
    if len(found) == 1:
        return found[0]
    if not found:
        known = ", ".join(sorted(r["study"] for r in rows))
        raise HwnasError(f"no study matches '{ref}' in {url}; studies: {known} (or: latest)")
    names = ", ".join(sorted(r["study"] for r in found))
    raise HwnasError(
        f"'{ref}' matches {len(found)} studies: {names}; give more of the name, or "
        f"latest:{ref} for the most recent of them"
    )


def _best_cell(
    best: dict[str, Any] | None, objective: str | None, units: dict[str, Any] | None = None
) -> str:
    """Accuracy (%) and the search objective's cost (its unit: the run's ``units``, "ms per
    batch of 32" for a table of a batch, else :data:`hwnas.cost_record.UNITS`) of a run's best
    architecture; a value that is not a number (another program's attribute) is left out."""
    from hwnas.cost_record import UNITS
    from hwnas.engine.evaluate import OBJECTIVES

    best = _best(best)
    if best is None:
        return ""
    metric = OBJECTIVES.get(_typed(objective, str) or "latency", "latency_ms")
    value = _typed(best.get(metric), _NUMBER)
    unit = (units or {}).get(metric) if isinstance(units, dict) else None
    unit = unit if isinstance(unit, str) else UNITS[metric]
    cost = f"{num(value)} {unit}" if value is not None else ""
    return f"{best['accuracy']:.2f}% {cost}".strip()


def _folder_cell(row: dict[str, Any]) -> str:
    """The run folder of a :func:`run_rows` row as ``hwnas runs list`` shows it."""
    if row["folder"]:
        cell = row["folder"] + ("" if row["folder_exists"] else " (missing)")
        # its best is the folder's, of fewer trials than the study now holds: say so
        return cell + (" (a later run has not finished)" if row.get("unfinished") else "")
    return "(not finished)" if row["hwnas_run"] else "(not an hwnas run)"


@click.group("runs")
def runs_group() -> None:
    """Past searches: their studies, run folders and best architectures."""


@runs_group.command("list")
@storage_option
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
def list_cmd(storage, as_json):
    """List every search in STORAGE: study, device, space, strategy, trials, best (accuracy and
    cost of the best architecture; its arch string with `hwnas runs show`) and run folder."""
    from hwnas.cli.render import Console, print_json, print_table, text_line

    url, rdb = _storage(storage)
    rows = run_rows(rdb)
    if as_json:
        print_json({"storage": url, "runs": rows})
        return
    console = Console(emoji=False)
    print_table(
        console,
        f"runs (studies in {url})",
        ("study", "device", "space", "strategy", "trials", "best", "folder"),
        [
            (
                r["study"],
                r["device"] or "",
                r["space"] or "",
                r["strategy"] or "",
                str(r["trials"]),
                _best_cell(r["best"], r["objective"], r["units"]),
                _folder_cell(r),
            )
            for r in rows
        ],
        keys=("study", "device", "folder"),
        right=("trials",),
    )
    if not rows:
        text_line(console, "no studies yet: run `hwnas search`")
    else:
        text_line(console, "details: hwnas runs show STUDY; zoo: hwnas zoo list FOLDER/zoo")


@runs_group.command("show")
@click.argument("study", default="latest")
@storage_option
@click.option("--json", "as_json", is_flag=True, help="Print the run as JSON on stdout.")
def show_cmd(study, storage, as_json):
    """Show the search STUDY: its settings, best architecture, counts, run folder and zoo.

    STUDY is a study name, a unique prefix of one, a word naming one run (a device: raspi4),
    `latest` (the default: the most recent search) or `latest:WORD`."""
    import json

    from hwnas.cli.render import Console, print_json, text_line
    from hwnas.engine.publish import dashboard_command

    url, rdb = _storage(storage)
    row = find_run(study, run_rows(rdb), url)
    study = row["study"]
    import optuna

    attrs = optuna.load_study(study_name=study, storage=rdb).user_attrs
    summary = None
    if row["folder_exists"]:
        try:
            summary = json.loads(read_bounded_text(Path(row["folder"]) / "summary.json"))
        except (OSError, ValueError):
            summary = None
        settings = summary.get("settings") if isinstance(summary, dict) else None
        if not isinstance(settings, dict) or settings.get("study") != study:
            summary = None  # another run's file, where the study (a handed one) points
    if as_json:
        print_json({**row, "settings": run_settings(attrs), "summary": summary})
        return
    console = Console(emoji=False)
    line = lambda *p: text_line(console, *p)  # noqa: E731
    line(f"study      {study}  ({url})")
    if not row["hwnas_run"]:
        line("           not an hwnas run: the study holds no hwnas search settings")
    for key, value in run_settings(attrs).items():
        if value is not None:  # unset options (a recorded device has no runtime)
            unit = SETTING_UNITS.get(key) if isinstance(value, (int, float)) else None
            if unit is not None and isinstance(row["units"], dict):  # "ms per batch of 32"
                unit = _typed(row["units"].get("latency_ms"), str) or unit
            line(f"  {key:<12} {value:g} {unit}" if unit else f"  {key:<12} {value}")
    more = "  (a later run has not finished: the folder below is of an earlier run)"
    line(f"trials     {row['trials']} scored{more if row['unfinished'] and row['folder'] else ''}")
    best = row["best"]
    if best:
        line(f"best       {best['arch']}")
        cell = _best_cell(best, row["objective"], row["units"])
        line(f"           {cell}  (trial {best.get('trial')})")
        if best.get("chance_level"):
            line("           chance-level: no better than guessing")
    elif row["finished_at"]:  # finished without one: no architecture met the limit
        limit = _typed(run_settings(attrs).get("max_latency"), _NUMBER)
        met = f": no architecture met --max-latency {limit:g} ms" if limit is not None else ""
        line(f"best       none{met}")
    if row["folder"]:
        state = "" if row["folder_exists"] else "  (missing: moved or deleted)"
        line(f"folder     {row['folder']}{state}")
        line(f"finished   {row['finished_at']}")
        models = "?" if row["zoo_models"] is None else row["zoo_models"]
        kind = {"mixed": "models (trained and random weights)"}.get(
            row["zoo_weights"] or "", f"{row['zoo_weights'] or ''} models"
        )
        line("zoo        none (--no-zoo)" if row["no_zoo"] else f"zoo        {models} {kind}")
        if row["folder_exists"] and (Path(row["folder"]) / "zoo").is_dir():
            line(f"           hwnas zoo list {shlex.quote(str(Path(row['folder']) / 'zoo'))}")
    elif row["hwnas_run"]:
        line("folder     none yet: the search has not finished")
    artifacts = _typed(attrs.get("artifacts"), dict)
    if artifacts:
        line(
            f"artifacts  {len(artifacts)} files in {attrs.get('artifact_dir')} "
            f"({dashboard_command(url, attrs.get('artifact_dir'))})"
        )
