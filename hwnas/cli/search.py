"""``hwnas search``."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.cli.options import (
    DEVICE,
    RUNTIME,
    SEED,
    LiveHelp,
    SpaceLast,
    artifact_option,
    checked,
    default_of,
    storage_option,
    store_option,
)
from hwnas.cli.supernet_search import supernet_options
from hwnas.cost_record import cost_digits as num
from hwnas.engine.loop import DEFAULT_SPACE, SearchSettings
from hwnas.engine.strategies import pipeline_of
from hwnas.errors import HwnasError
from hwnas.limits import bounded, positive_ms
from hwnas.spaces import space_option

DATASET = default_of(SearchSettings, "dataset")
"""The table search's default dataset (the settings type's: one source for code and help)."""


def _before_space(ctx: click.Context) -> None:
    """The checks that need no space, before ``--space FILE.py:ATTR`` is imported
    (:func:`hwnas.jobs.settings.check_before_space`): ``ctx.params`` holds every other option
    typed."""
    from hwnas.jobs.settings import check_before_space

    typed = click.core.ParameterSource.COMMANDLINE
    given = {name for name in ctx.params if ctx.get_parameter_source(name) == typed}
    p = ctx.params
    check_before_space(p, given, p.get("out"), p.get("store"), p.get("artifact_dir"))


@click.command("search", cls=SpaceLast, before_space=_before_space)
@click.option("--device", "-d", required=True, help="Device name (see `hwnas devices`).", **DEVICE)
@click.option(
    "--space",
    default=None,
    callback=space_option,
    help="Search space: a name, the path of a space file (YAML, the space language), or "
    "path/to/file.py:NAME (a space written in PyTorch, or your model made elastic: "
    f"docs/api.md). Default: {DEFAULT_SPACE} (for a supernet strategy: the space of its "
    "paper).",
)
@click.option(
    "--accuracy",
    default=None,
    metavar="FILE.py:FUNCTION",
    help="Accuracy from your function instead of the space's table: FUNCTION(model, arch"
    "[, data]) returns top-1 % (docs/api.md, 'The evaluator protocol'); --data is handed "
    "to it. Table and supernet strategies alike.",
)
@click.option(
    "--dataset",
    default=None,
    help="Dataset of the space's tables: whose accuracy is maximised by table search "
    f"(cifar10, cifar100, imagenet16; default {DATASET}), and whose network the recorded "
    "latencies are for.",
)
@click.option(
    "--objective",
    type=click.Choice(["latency", "energy"]),
    default=default_of(SearchSettings, "objective"),
    show_default=True,
    help="Device cost to minimise (latency in ms, energy in mJ).",
)
@click.option(
    "--max-latency",
    type=float,
    default=None,
    callback=checked(lambda v: positive_ms("--max-latency", v)),
    metavar="MS",
    help="Latency limit in ms: `best` is the most accurate architecture within it.",
)
@click.option(
    "--budget",
    type=int,
    default=default_of(SearchSettings, "budget"),
    callback=checked(lambda v: bounded("--budget", v, 1, integer=True)),
    show_default=True,
    help="Number of distinct architectures whose accuracy is queried (trials); left out on a "
    "space of fewer architectures, every one of them.",
)
@click.option(
    "--strategy",
    cls=LiveHelp,
    default=None,
    callback=checked(lambda v: pipeline_of(v) and v),  # an unknown name: before --space
    help_from="hwnas.engine.strategies:strategy_help",
)
@click.option(
    "--runtime",
    type=RUNTIME,
    default=None,
    help=(
        "Runtime replacing the device profile's (live devices, table search; TVM tunes once "
        "per workload)."
    ),
)
@storage_option
@click.option(
    "--study",
    default=None,
    help="Study name. Default: derived from the settings, "
    "so re-running the same command resumes the same study.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Run folder. Default: runs/<study name>.",
)
@click.option(
    "--seed",
    type=SEED,
    default=default_of(SearchSettings, "seed"),
    show_default=True,
    help="Sampler seed.",
)
@store_option
@click.option(
    "--no-zoo",
    is_flag=True,
    help="Do not export the Pareto models to ONNX (an earlier run's zoo/ in the run folder is "
    "removed).",
)
@click.option(
    "--train-zoo",
    is_flag=True,
    help="Table search: train each zoo model from scratch on --data with its space's recipe "
    "(--epochs, --batch-size shorten it; default on a CPU: 5 epochs) instead of exporting "
    "random weights.",
)
@supernet_options
@click.option(
    "--predictor",
    default=None,
    metavar="NAME|PATH",
    help="Search on costs predicted by this predictor artifact (hwnas predictor list) after "
    "calibrating it on the reference set; measure only to calibrate and verify.",
)
@click.option(
    "--measurement-budget",
    type=int,
    default=None,
    metavar="N",
    help="Most device measurements (calibration + verification; implies a predictor, "
    "default 20). A recorded device then behaves like a new one: only N table values are read.",
)
@artifact_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the run's summary (summary.json) as JSON on stdout, and nothing else there "
    "(the tables and progress go to stderr).",
)
def search_cmd(
    device,
    space,
    accuracy,
    dataset,
    objective,
    max_latency,
    budget,
    strategy,
    runtime,
    storage,
    study,
    out,
    seed,
    store,
    no_zoo,
    train_zoo,
    predictor,
    measurement_budget,
    artifact_dir,
    as_json,
    **supernet,
):
    """Search SPACE for the accuracy/latency (or energy) Pareto front on DEVICE.

    Writes pareto.csv, pareto.png, summary.json and zoo/ (ONNX + card.json per Pareto
    architecture) to the run folder, and keeps the Optuna study in STORAGE.
    """
    from hwnas.cli.render import Console
    from hwnas.jobs.settings import build_settings

    ctx = click.get_current_context()
    typed = click.core.ParameterSource.COMMANDLINE
    given = {name for name in ctx.params if ctx.get_parameter_source(name) == typed}
    settings = build_settings(ctx.params, given)
    if settings.pipeline == "supernet":
        from hwnas.cli.supernet_search import run_supernet_search

        return run_supernet_search(
            settings,
            storage=storage,
            out=out,
            store=store,
            no_zoo=no_zoo,
            nproc=supernet["nproc"],
            as_json=as_json,
            artifact_dir=artifact_dir,
        )
    from hwnas.db import redact
    from hwnas.jobs import prepare, run
    from hwnas.jobs.output import check_run_folder
    from hwnas.paths import confined

    # a run of another storage's study is never replaced: refused before this storage is
    # opened or made (the study's own name is checked once it is known, in _before_run)
    early = out or confined(Path("runs"), settings.study, what="study name (the default --out)")
    check_run_folder(early, settings.study, storage_url=redact(storage) if storage else None,
                     storage_only=True)  # fmt: skip
    job = prepare(settings, storage, store, predictor, measurement_budget)
    out, trainer = _before_run(job, out, artifact_dir, train_zoo, supernet, no_zoo)
    from hwnas.cli.progress import TerminalReporter

    console = Console(emoji=False, stderr=True)
    # --json: stdout holds the JSON alone
    out_console = console if as_json else Console(emoji=False)
    reporter = TerminalReporter(console)
    from hwnas.cost_record import unit_of

    progress = _Progress(job.prepared.profiler.counts, reporter, out_console, out, no_zoo,
                         settings.max_latency,
                         unit_of("latency_ms", job.prepared.device.value_batch_size))  # fmt: skip
    with reporter.step(f"search {settings.device}", total=settings.budget, unit="trials") as step:
        progress.step = step
        done = run(
            job,
            out,
            reporter,
            zoo=not no_zoo,
            artifact_dir=artifact_dir,
            trainer=trainer,
            on_trial=progress.on_trial,
            on_front=progress.on_front,
            on_candidate=progress.on_candidate,
        )
    result, summary = done.result, done.summary
    _print_summary(result, summary, out, out_console, no_zoo, artifact_dir)
    if as_json:
        from hwnas.cli.render import print_json

        print_json({**summary, "run_folder": str(out)})


def _before_run(job, out, artifact_dir, train_zoo: bool, supernet: dict, no_zoo: bool):
    """The run folder (default ``runs/<study>``) and artifact store checked writable, the
    ``--train-zoo`` trainer made, the few-shot plan said: before the first trial.

    Returns:
        (the run folder, the zoo trainer or None).

    Raises:
        HwnasError: a folder that cannot be written, bad ``--train-zoo`` options.
    """
    from hwnas.cli.render import Console
    from hwnas.paths import ZOO_MIN_FREE_MB, check_writable, confined

    settings = job.settings
    out = out or confined(Path("runs"), settings.study, what="study name (the default --out)")
    check_writable(out, "--out", ZOO_MIN_FREE_MB)  # before the first trial, not after
    from hwnas.jobs.output import check_run_folder

    check_run_folder(out, settings.study, storage_url=job.prepared.storage_url,
                     settings=settings.as_dict())  # fmt: skip
    if not no_zoo:  # the zoo written at the end replaces out/zoo whole
        from hwnas.zoo.write import check_zoo_folder

        check_zoo_folder(out)
    if artifact_dir is not None:
        check_writable(artifact_dir, "--artifact-dir")
    from hwnas.devices.recorded import power_warning, table_unit_warning

    # a user's table 1000x off (s or us for ms, J or uJ for mJ) is said first
    metrics = dict.fromkeys([settings.metric] + ["latency_ms"] * (settings.max_latency is not None))
    energy = settings.metric == "energy_mj"
    power = power_warning(job.prepared.device, job.prepared.space.name) if energy else None
    if power:  # energy over latency says it more precisely
        metrics.pop("energy_mj")
    warnings = [table_unit_warning(job.prepared.device, job.prepared.space, m) for m in metrics]
    warnings.append(power)
    for warning in filter(None, warnings):
        Console(emoji=False, stderr=True).print(
            f"warning: {warning}", markup=False, highlight=False, soft_wrap=True
        )
    trainer = _zoo_trainer(job.prepared, supernet, no_zoo) if train_zoo else None
    fewshot = job.prepared.fewshot
    if fewshot is not None:
        described = fewshot.describe()
        Console(emoji=False, stderr=True).print(  # one whole line, never folded at the pipe's width
            f"few-shot search: predictor {described['name']} ({described['path']}), "
            f"at most {fewshot.budget} measurements on {settings.device}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    return out, trainer


class _Progress:
    """The table search's progress line (best accuracy, measurements, skipped candidates,
    the candidate being measured) and the front printed as soon as it is known."""

    def __init__(self, counts, reporter, out_console, out: Path, no_zoo: bool,
                 max_latency: float | None = None, unit: str = "ms"):  # fmt: skip
        self.counts, self.reporter, self.out_console = counts, reporter, out_console
        self.out, self.no_zoo, self.max_latency = out, no_zoo, max_latency
        self.unit = unit  # of the limit: "ms per batch of 32" on a table of a batch
        self.state = {"best": None, "now": "", "noisy": 0, "failed": 0, "unrecorded": 0}
        self.step = None

    def status(self) -> str:
        state, counts = self.state, self.counts
        within = f" within {self.max_latency:g} {self.unit}" if self.max_latency is not None else ""
        parts = [f"best {state['best']:.2f}%{within}"] if state["best"] is not None else []
        parts.append(f"measured {counts.taken} reused {counts.reused}")
        if counts.read:
            parts.append(f"table {counts.read}")
        parts.append(f"noisy-skipped {state['noisy']}")
        if state["failed"]:
            parts.append(f"failed {state['failed']}")
        if state["unrecorded"]:
            parts.append(f"not in table {state['unrecorded']}")
        if state["now"]:
            parts.append(f"now {state['now']}")
        return " | ".join(parts)

    def on_trial(self, done, record) -> None:
        state = self.state
        latency = record.costs.get("latency_ms") if record is not None else None
        within = self.max_latency is None or (
            latency is not None and latency.value <= self.max_latency
        )  # the best line's rule: most accurate within the limit (a few-shot one: predicted)
        if (
            record is not None
            and within
            and (state["best"] is None or record.accuracy > state["best"])
        ):
            state["best"] = record.accuracy
        self.step.update(done, self.status())

    def on_candidate(self, arch, event) -> None:
        if event in ("noisy", "failed", "unrecorded"):
            self.state[event] += 1
        self.state["now"] = arch if event == "measuring" else ""
        self.step.update(status=self.status())

    def on_front(self, result) -> None:
        self.step.update(len(result.records), self.status())
        self.step.close()
        _print_front(result, self.out_console)
        if not self.no_zoo and result.pareto:
            self.reporter.note(f"zoo: {self.out / 'zoo'}")


def _zoo_trainer(job, options: dict, no_zoo: bool):
    """The zoo trainer of ``--train-zoo`` (its data loaded now, before the search).

    Raises:
        HwnasError: --no-zoo as well, bad numbers, unreadable --data.
    """
    from hwnas.cli.render import Console
    from hwnas.zoo.train import TrainSettings, ZooTrainer

    if no_zoo:
        raise HwnasError("--train-zoo trains the zoo's models; it cannot go with --no-zoo")
    ctx = click.get_current_context()
    given = lambda name: ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE  # noqa: E731
    settings = TrainSettings(
        data=options["data"],
        epochs=options["epochs"] if given("epochs") else None,
        batch_size=options["batch_size"] if given("batch_size") else None,
        seed=job.settings.seed,
    )
    err = Console(emoji=False, stderr=True)
    return ZooTrainer.prepare(
        settings,
        job.space,
        job.settings.dataset,
        log=lambda m: err.print(m, markup=False, highlight=False, soft_wrap=True),
    )


def _print_front(result, console) -> None:
    """The Pareto front as a table; arch strings whole (see :mod:`hwnas.cli.render`). A live
    latency whose 95% interval missed the profile's precision target is marked ``!``."""
    from hwnas.cli.render import missed_precision_line, print_table, text_line

    s = result.settings
    metrics = [m for m in ("latency_ms", "energy_mj") if any(m in r.costs for r in result.pareto)]
    rows, missed = [], []
    for i, r in enumerate(result.pareto):
        cells = []
        for m in metrics:
            cost = r.costs.get(m)
            if cost is None:  # a partial table (energy) without this architecture
                cells.append("-")
                continue
            cell = num(cost.value)
            if cost.precision_met is False:
                rel = cost.rel_ci95
                cell += f" +-{100 * rel:.1f}%!" if rel is not None else " +-?!"
                missed.append(i)
            cells.append(cell)
        rows.append((str(i), r.arch, f"{r.accuracy:.2f}", *cells))
    from hwnas.cost_record import search_batch

    batch = search_batch(s.device)  # a table of batch 32: its values are a batch's, said so
    per = f" (costs per batch of {batch})" if batch > 1 else ""
    print_table(
        console,
        f"Pareto front: {s.dataset} accuracy vs {s.objective} on {s.device}{per}",
        ("#", "arch", "accuracy %", *metrics),
        rows,
        keys=("arch",),
        right=("#", "accuracy %", *metrics),
    )
    if missed:
        text_line(console, missed_precision_line(sorted(set(missed))))


def _print_summary(
    result, summary, out: Path, console, no_zoo: bool = False, artifact_dir: Path | None = None
) -> None:
    """The best architecture, counts, and where the run folder and study are, with the
    dashboard command that serves the study's artifacts from ``artifact_dir`` (all printed
    literally: arch strings and paths are not markup)."""
    from hwnas.cli.render import cost_text, print_chance_best, print_chance_line

    s = result.settings
    console = _Literal(console)
    best = summary["best"]
    m = summary["measurements"]
    if best:
        console.print(
            f"best ({summary['best_rule']}): {best['arch']}  {best['accuracy']:.2f}%"
            + (f" ({best['accuracy_source']})" if best.get("accuracy_source") else "")
            + "  "
            + cost_text(best, s.metric, summary.get("units"))
        )
        print_chance_best(best, s.max_latency, console.console)
    else:
        unit = (summary.get("units") or {}).get("latency_ms", "ms")  # "ms per batch of 32"
        console.print(f"no architecture met --max-latency {s.max_latency:g} {unit}")
    if "device_measurements" in summary:
        p = summary["predictor"]
        verified = summary.get("best_verified")  # None: no --max-latency to verify it under
        note = {None: "", True: "; best verified"}.get(verified, "; best NOT verified")
        if verified is False and not summary.get("verification"):
            from hwnas.devices import get_device

            if not get_device(s.device).can_measure:  # an imported device's values alone
                note += (
                    f" ({s.device} cannot measure: time the best on the device, then "
                    f"hwnas measure import --device {s.device} FILE.csv)"
                )
        timed = summary.get("timed_within_limit")
        if timed:
            note += (
                f"; the most accurate timed within the limit: {timed['arch']}  "
                f"{timed['accuracy']:.2f}% at {num(timed['latency_ms'])} ms"
            )
        n = p.get("calibrated_on")  # how many values priced the front (absent before)
        values = f", calibrated on {n} {s.device} values" if n is not None else ""
        console.print(
            f"costs predicted by {p['name']} ({p['path']}){values}; "
            f"{summary['device_measurements']} device measurements "
            f"(budget {summary['measurement_budget']}){note}"
        )
    console.print(
        f"{summary['trials']['completed']} architectures scored "
        f"({summary['trials']['completed_this_run']} this run); measurements: {m['taken']} taken, "
        f"{m['reused_from_store']} reused, {m['read_from_table']} values read from the device "
        "table (one per metric)"
    )
    if summary.get("stopped"):
        console.print(summary["stopped"])
    if summary["trials"]["completed"] > s.budget:  # workers of one study, several budgets
        console.print(
            f"note: the study holds {summary['trials']['completed']} scored architectures, more "
            f"than this run's --budget {s.budget}: another worker searches it with a larger "
            "--budget (the front is the study's)"
        )
    p = summary.get("profiling", {})
    if p.get("noisy_skipped"):
        console.print(
            f"{p['noisy_skipped']} candidate(s) skipped: their timing stayed above the profile's "
            "CV limit (stored flagged, measured again by a later run)"
        )
    if p.get("failed_skipped"):
        console.print(
            f"{p['failed_skipped']} candidate(s) skipped: the runtime failed on them (failed "
            "trials in the study, with the reason in their 'failed' attribute)"
        )
    if p.get("unrecorded_skipped"):
        console.print(
            f"{p['unrecorded_skipped']} candidate(s) skipped: the device's table has no value "
            "for them (failed trials in the study, with the reason in their 'failed' attribute)"
        )
    if p.get("runtime", "").startswith("tvm"):
        console.print(
            f"TVM ({p['runtime']}): {p['tvm_workloads_tuned']} new workload(s) tuned in "
            f"{p['tvm_tuning_s']:.0f} s, compile {p['compile_s']:.0f} s"
        )
    if not no_zoo:
        print_chance_line(out / "pareto.csv", console.console)
    if summary.get("zoo_weights") == "trained" and summary["zoo_models"]:
        _print_trained_zoo(out / "zoo", summary, console.console)
    kind = {
        "trained": "trained ",
        "inherited": "inherited-weight ",
        "function-trained": "function-trained ",
    }.get(summary.get("zoo_weights") or "", "")
    zoo = "no zoo: --no-zoo" if no_zoo else f"zoo/ with {summary['zoo_models']} {kind}ONNX models"
    console.print(f"run folder: {out}  (pareto.csv, pareto.png, summary.json, {zoo})")
    from hwnas.engine.publish import dashboard_command

    storage = summary["storage"]  # redacted: the command names it as it can be typed
    console.print(f"study '{s.study}' in {storage}: {dashboard_command(storage, artifact_dir)}")


class _Literal:
    """A console whose ``print`` takes no markup and never wraps (paths, arch strings)."""

    def __init__(self, console) -> None:
        self.console = console

    def print(self, text: str = "") -> None:
        from hwnas.cli.render import text_line

        text_line(self.console, text)


def _print_trained_zoo(zoo, summary, console) -> None:
    """The trained zoo's measured accuracies beside the benchmark's, and the training time."""
    from hwnas.cli.render import print_table
    from hwnas.zoo import entry_folders, read_entry

    entries = [read_entry(folder) for folder in entry_folders(zoo)]
    first = entries[0]
    rows = []
    for e in entries:
        bench = e.get("table_accuracy") or {}
        training = e.get("training") or {}
        rows.append(
            (
                Path(e["folder"]).name,
                f"{e['accuracy_value']:.2f}" + (" (chance)" if e["chance_level"]["value"] else ""),
                f"{bench['value']:.2f}" if bench else "",
                str(training.get("applied", {}).get("epochs", "")),
                f"{training.get('seconds', 0):.0f}",
            )
        )
    cols = ("entry", "test acc %", "benchmark acc %", "epochs", "train s")
    print_table(
        console,
        f"zoo trained on {first['dataset']} ({summary['zoo_s']:.0f} s)",
        cols,
        rows,
        keys=("entry",),
        right=cols[1:],
    )
