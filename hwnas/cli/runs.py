"""``hwnas runs list|show``: past searches, read from their Optuna studies.

A finished search records its run folder and summary in its study
(:func:`hwnas.engine.publish.publish_run`), so the listing reads only study summaries: no
trial is loaded, and no run folder is needed (one that was moved or deleted is shown as such).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from hwnas.cli.options import storage_option
from hwnas.engine.publish import run_settings
from hwnas.paths import read_bounded_text


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


def run_rows(storage: Any) -> list[dict[str, Any]]:
    """One dict per study of ``storage``: study, device, space, strategy, trials, best
    (arch, accuracy %, latency ms), folder (None for a study whose search has not finished),
    whether the folder still exists, and the zoo size."""
    import optuna

    rows = []
    for s in optuna.get_all_study_summaries(storage, include_best_trial=False):
        attrs = s.user_attrs
        summary = attrs.get("summary") or {}
        settings = run_settings(attrs)
        folder = attrs.get("run_folder")
        rows.append(
            {
                "study": s.study_name,
                "device": settings.get("device"),
                "space": settings.get("space"),
                "dataset": settings.get("dataset"),
                "objective": settings.get("objective", "latency"),
                "strategy": settings.get("strategy"),
                "trials": summary.get("trials", s.n_trials),
                "best": summary.get("best"),
                "pareto_size": summary.get("pareto_size"),
                "zoo_models": summary.get("zoo_models"),
                "zoo_weights": summary.get("zoo_weights"),
                "finished_at": summary.get("finished_at"),
                "folder": folder,
                "folder_exists": bool(folder) and Path(folder).is_dir(),
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
        parts = [r for r in rows if word in r["study"].split("-") or word in r["study"]]
        return exact or prefix or parts

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
                if found else ""
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


def _best_cell(best: dict[str, Any] | None, objective: str | None) -> str:
    """Accuracy and the search objective's cost (its unit) of a run's best architecture."""
    from hwnas.cost_record import UNITS
    from hwnas.engine.evaluate import OBJECTIVES

    if not best:
        return ""
    metric = OBJECTIVES.get(objective or "latency", "latency_ms")
    cost = f"{best[metric]:.3f} {UNITS[metric]}" if best.get(metric) is not None else ""
    return f"{best['accuracy']:.2f}% {cost}".strip()


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
                _best_cell(r["best"], r["objective"]),
                (r["folder"] or "(not finished)")
                + ("" if r["folder_exists"] or not r["folder"] else " (missing)"),  # fmt: skip
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
    if as_json:
        print_json({**row, "settings": run_settings(attrs), "summary": summary})
        return
    console = Console(emoji=False)
    line = lambda *p: text_line(console, *p)  # noqa: E731
    line(f"study      {study}  ({url})")
    for key, value in run_settings(attrs).items():
        if value is not None:  # unset options (a recorded device has no runtime)
            line(f"  {key:<12} {value}")
    line(f"trials     {row['trials']}")
    best = row["best"]
    if best:
        line(f"best       {best['arch']}")
        line(f"           {_best_cell(best, row['objective'])}  (trial {best.get('trial')})")
        if best.get("chance_level"):
            line("           chance-level: no better than guessing")
    if row["folder"]:
        state = "" if row["folder_exists"] else "  (missing: moved or deleted)"
        line(f"folder     {row['folder']}{state}")
        line(f"finished   {row['finished_at']}")
        line(f"zoo        {row['zoo_models']} {row['zoo_weights'] or ''} models")
        if row["folder_exists"] and (Path(row["folder"]) / "zoo").is_dir():
            line(f"           hwnas zoo list {Path(row['folder']) / 'zoo'}")
    else:
        line("folder     none yet: the search has not finished")
    if attrs.get("artifacts"):
        line(
            f"artifacts  {len(attrs['artifacts'])} files in {attrs.get('artifact_dir')} "
            f"(hwnas dashboard --storage {url})"
        )
