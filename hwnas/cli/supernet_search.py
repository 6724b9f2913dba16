"""The supernet half of ``hwnas search``: its options and the run (kept out of the table
search's code path; heavy imports happen inside :func:`run_supernet_search`)."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

import click

from hwnas.cli.options import checked, default_of
from hwnas.cost_record import cost_digits as num
from hwnas.errors import HwnasError, LostProcessError, ProcessError
from hwnas.jobs.supernet import SupernetSettings
from hwnas.supernet.settings import help_text as settings_help


def _low(option: str, low: float, words: str, strict: bool = False):
    """A parse-time check of an option's lower bound, in the settings' own words (they check
    the rest): a bad value stops the command before a ``--space`` file is imported."""

    def check(value):
        if not (value > low if strict else value >= low):  # nan too
            raise HwnasError(f"{option} must be {words}, got {value}")
        return value

    return checked(check)


def supernet_options(f):
    """The options only supernet strategies read."""
    options = [
        click.option(
            "--data",
            default=default_of(SupernetSettings, "data"),
            show_default=False,
            help="Supernet strategies: training data, 'digits' (scikit-learn's bundled digits; "
            "the default) or a folder (CIFAR-10/100 python-pickle folder, or one sub-folder of "
            "images per class). With --accuracy in a table search: the data handed to your "
            "function (no default there: a function taking data needs --data).",
        ),
        click.option(
            "--epochs",
            type=int,
            default=default_of(SupernetSettings, "epochs"),
            show_default=True,
            help=(
                "Supernet training epochs. With --train-zoo (a table search): each model's "
                "training epochs, default 5 on a CPU and the recipe's on a GPU."
            ),
        ),
        click.option(
            "--latency-target",
            type=float,
            default=None,
            callback=_low("--latency-target", 0, "positive", strict=True),
            metavar="MS",
            help="Supernet strategies: pull the architecture's expected latency (or energy, mJ) "
            "on the device to this value.",
        ),
        click.option(
            "--latency-weight",
            type=float,
            default=None,
            callback=_low("--latency-weight", 0, ">= 0"),
            metavar="W",
            help="Supernet strategies: weight of the hardware term (the strategy's form: "
            "additive, relative to the space's average; fbnet and proxyless their papers' "
            "multiplicative terms). Default: the paper's weight for fbnet (0.6) and "
            "proxyless (0.3), none for the others; 0 = accuracy only.",
        ),
        click.option(
            "--batch-size",
            type=int,
            default=default_of(SupernetSettings, "batch_size"),
            show_default=True,
            help="Supernet strategies: training mini-batch size (--train-zoo: the recipe's "
            "unless given).",
        ),
        click.option(
            "--finetune-epochs",
            type=int,
            default=default_of(SupernetSettings, "finetune_epochs"),
            callback=_low("--finetune-epochs", 0, ">= 0"),
            show_default=True,
            help="Fine-tuning epochs of each extracted subnet (training split) before scoring.",
        ),
        click.option(
            "--nproc",
            type=int,
            default=None,
            callback=_low("--nproc", 1, "at least 1"),
            metavar="N",
            help="Supernet strategies: train across N processes on this machine "
            "(DistributedDataParallel under torchrun's launcher: gloo on CPU, one GPU each with "
            "NCCL); --batch-size is the global batch. Several machines: run "
            "`torchrun --nnodes ... -m hwnas search ...` on each.",
        ),
        click.option(
            "--set",
            "settings",
            multiple=True,
            metavar="KEY=VALUE",
            help=settings_help(),
        ),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def command_line(ctx: click.Context, leave_out: tuple[str, ...] = ()) -> list[str]:
    """The options given on the command line to ``ctx``'s command, as arguments again
    (without those named in ``leave_out``), preceded by the command's name; a value a callback
    converted (a space file's path to its name) is passed as typed (``ctx.meta["typed"]``)."""
    typed = ctx.meta.get("typed", {})
    args = [ctx.info_name or ctx.command.name or ""]
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in leave_out:
            continue
        if ctx.get_parameter_source(param.name) != click.core.ParameterSource.COMMANDLINE:
            continue
        flag = max(param.opts, key=len)
        value = typed.get(param.name, ctx.params[param.name])
        if param.is_flag:
            args += [flag] if value else []
        elif param.multiple:
            for item in value:
                args += [flag, str(item)]
        else:
            args += [flag, str(value)]
    return args


def run_supernet_search(
    s, *, storage, out, store, no_zoo, nproc=None, as_json=False, artifact_dir=None
):
    """Run a supernet search of settings ``s`` (:func:`hwnas.jobs.settings.build_settings`)
    and print its result.

    With ``nproc`` above 1, the same command (less ``--nproc``) runs in ``nproc`` processes
    started by torchrun's launcher, after every check here has passed; the launcher says when
    they were interrupted or one was killed. Under torchrun, every process runs the checks,
    then they agree that all passed (:func:`hwnas.distributed.join`) before any trains; only
    rank 0 prints, but for an error rank 0 cannot see (:class:`~hwnas.errors.ProcessError`).

    Raises:
        HwnasError: any device, data or storage problem (before training starts), of this
            process or, on rank 0, of another one.
        LostProcessError: a process of the job never arrived, was lost during training, or
            (``nproc``) was killed.
        KeyboardInterrupt: interrupted (Ctrl-C; under torchrun SIGTERM too).
    """
    from hwnas import distributed
    from hwnas.cli.progress import TerminalReporter
    from hwnas.cli.render import Console, print_json, text_line
    from hwnas.distributed import INTERRUPTED, launch, ranks_from_env
    from hwnas.jobs import prepare, run
    from hwnas.paths import ZOO_MIN_FREE_MB, check_writable, confined

    ranks = ranks_from_env()
    torchrun = ranks.many and not (nproc is not None and nproc > 1)
    quiet = distributed.launched()  # its launcher speaks for it when it is stopped
    sigterm = ExitStack()  # the SIGTERM handler found, back on the way out
    if torchrun:
        distributed.guard()
        sigterm.enter_context(distributed.interrupt_on_sigterm())
    err = Console(emoji=False, stderr=True)
    try:
        failure = None
        try:
            if nproc is not None and nproc > 1:  # one GPU per process: refused before any work
                from hwnas.distributed import check_gpus
                from hwnas.supernet.train import resolve_device

                check_gpus(resolve_device(s.job.torch_device or None), nproc)
            out = out or confined(Path("runs"), s.study, what="study name (the default --out)")
            if ranks.main:  # path checks first: they need no torch, data or device
                check_writable(out, "--out", ZOO_MIN_FREE_MB)  # before the first epoch
                from hwnas.db import redact
                from hwnas.jobs.output import check_run_folder

                # another study's run (and supernet.pt) is kept
                check_run_folder(out, s.study, storage_url=redact(storage) if storage else None)
                if artifact_dir is not None:
                    check_writable(artifact_dir, "--artifact-dir")
            job = prepare(s, storage, store)
        except HwnasError as exc:
            if not torchrun:
                raise
            failure = exc
        if torchrun:  # every process's checks passed, or none trains
            distributed.join(ranks, failure, say=lambda line: text_line(err, line))
        if nproc is not None and nproc > 1:
            ctx = click.get_current_context()
            code = launch(nproc, command_line(ctx, leave_out=("nproc",)))
            if code == INTERRUPTED:
                raise KeyboardInterrupt
            if code:
                raise SystemExit(code)  # rank 0 has said why
            return None
        done = run(job, out, TerminalReporter(err), zoo=not no_zoo, artifact_dir=artifact_dir)
        result, summary = done.result, done.summary
    except HwnasError as exc:
        if torchrun:  # said whole: torchrun's agent stops the others' survivors with SIGTERM
            distributed.ignore_sigterm()
        if isinstance(exc, ProcessError):
            if quiet and isinstance(exc, LostProcessError):
                raise SystemExit(exc.exit_status) from None  # the launcher names the lost one
            raise
        if ranks.main:
            raise
        raise SystemExit(exc.exit_status) from None  # rank 0 says it, once
    except KeyboardInterrupt:
        if ranks.main and not quiet:
            raise
        raise SystemExit(INTERRUPTED) from None
    finally:
        sigterm.close()
    if result is None:  # a rank other than 0: rank 0 reports
        return None
    console = err if as_json else Console(emoji=False)  # --json: stdout holds the JSON alone
    _print_result(s, job.prepared.data.name, summary, out, console, no_zoo, artifact_dir)
    if as_json:
        print_json({**summary, "run_folder": str(out)})


def _print_result(
    s, data_name: str, summary: dict, out: Path, console, no_zoo: bool, artifact_dir=None
) -> None:
    """The subnets handed out, the best (by the run's rule) and derived architectures with
    their units, the run folder, and the study with the command that serves it (and its
    artifacts, from ``artifact_dir``), as a table search prints them."""
    from hwnas.cli.render import (
        UNITS,
        cost_text,
        missed_precision_line,
        precision_misses,
        print_chance_best,
        print_chance_line,
        print_table,
        text_line,
    )

    units = {**UNITS, **(summary.get("units") or {})}  # "ms per batch of 32": a table of 32
    unit = units[s.metric]
    misses = precision_misses(out / "pareto.csv", s.metric)  # live values marked '!'

    def cost_cell(c: dict) -> str:
        if c["arch"] not in misses:
            return num(c[s.metric])
        rel = misses[c["arch"]]
        return f"{num(c[s.metric])} " + (f"+-{rel:.1f}%!" if rel is not None else "+-?!")

    columns = (
        "role",
        "arch",
        f"{data_name} val acc %",
        "test acc %",
        f"{s.metric} ({unit})",
        "source",
    )
    rows = [
        (
            c["role"],
            c["arch"],
            f"{c['accuracy']:.2f}",
            f"{c['test_accuracy']:.2f}" if "test_accuracy" in c else "",
            cost_cell(c),
            c[f"{s.metric}_source"],
        )
        for c in summary["candidates"]
    ]
    print_table(
        console,
        f"{s.strategy} on {s.space}: subnets handed out (device {s.device})",
        columns,
        rows,
        keys=("arch",),
        label="role",
    )
    missed = [c["role"] for c in summary["candidates"] if c["arch"] in misses]
    if missed:
        text_line(console, missed_precision_line(missed, s.metric))
    best, derived = summary["best"], summary["derived"]
    if best is None:
        limit = f"{s.max_latency:g} {units['latency_ms']}"
        text_line(console, f"no architecture met --max-latency {limit}")
    shown = ((f"best ({summary['best_rule']})", best), (f"derived ({derived['rule']})", derived))
    for label, r in shown:
        if r is None:
            continue
        accuracy = f"{r['accuracy']:.2f}% ({r['accuracy_label']})"
        line = f"{label}: {r['arch']}  {accuracy}  {cost_text(r, s.metric, units)}"
        if "test_accuracy" in r:
            line += f"; test accuracy {r['test_accuracy']:.2f}% ({r['test_accuracy_source']})"
        if "table_accuracy" in r:
            line += f"; table accuracy {r['table_accuracy']:.2f}% ({r['table_accuracy_label']})"
        text_line(console, line)
    print_chance_best(best, s.max_latency, console, weight=s.latency_weight)
    if not no_zoo:
        print_chance_line(out / "pareto.csv", console)
    text_line(
        console,
        f"run folder: {out}  (supernet.pt, pareto.csv, pareto.png, summary.json, "
        + (
            "no zoo: --no-zoo)"
            if no_zoo
            else f"zoo/ with {summary['zoo_models']} trained ONNX models)"
        ),
    )
    from hwnas.engine.publish import dashboard_command

    storage = summary["storage"]  # redacted: the command names it as it can be typed
    hint = dashboard_command(storage, artifact_dir)
    text_line(console, f"study '{s.study}' in {storage}: {hint}")
