"""``hwnas train``: train an architecture, or a zoo's models, from scratch for the zoo."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.cli.options import SEED, SpaceLast, storage_url
from hwnas.spaces import space_option


@click.command("train", cls=SpaceLast)
@click.argument("target", metavar="ARCH|ZOO_DIR")
@click.option(
    "--data",
    required=True,
    help="Training data: 'digits' (scikit-learn's bundled digits), a CIFAR-10/100 "
    "python-pickle folder, or a folder with one sub-folder of images per class.",
)
@click.option(
    "--space",
    default=None,
    callback=space_option,
    help="Space of ARCH (default nasbench201). A ZOO_DIR's entries name theirs; give it only "
    "for a space made in Python or given by path (FILE.py:ATTR, PATH.yaml), as the search did.",
)
@click.option(
    "--dataset",
    default=None,
    help="The space's dataset whose network ARCH is built as (input shape, recorded "
    "latencies; default cifar100 where the space has it); the classifier gets --data's classes.",
)
@click.option(
    "--epochs",
    type=int,
    default=None,
    help="Training epochs. Default: the space's recipe (NAS-Bench-201 200, FBNet 360, OFA "
    "180) on a GPU, 5 on a CPU; the card records any shortening.",
)
@click.option(
    "--batch-size",
    type=int,
    default=None,
    help="Mini-batch size (default the recipe's; the learning rate is scaled linearly).",
)
@click.option(
    "--lr", type=float, default=None, help="Initial learning rate (default the recipe's)."
)
@click.option("--seed", type=SEED, default=0, show_default=True, help="Initialisation seed.")
@click.option(
    "--threads", type=int, default=1, show_default=True, help="torch CPU threads while training."
)
@click.option(
    "--limit", type=int, default=None, metavar="N", help="Use at most N images (quick runs)."
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Entry folder for ARCH. Default: trained/<space>-<model hash>-<data>-<settings "
    "digest> (other data or settings: another folder). A ZOO_DIR is "
    "retrained in place.",
)
@click.option(
    "--storage",
    default=None,
    callback=storage_url,
    metavar="URL",
    help="Study storage of ZOO_DIR's run (the search's --storage), where the retrained entries "
    "are recorded so that `hwnas zoo verify` proves them and a rerun of the search keeps them. "
    "Default: the storage its summary.json names, where that is an SQLite file; a run folder "
    "never chooses a database server: give a postgresql:// study's URL here.",
)
def train_cmd(
    target, data, space, dataset, epochs, batch_size, lr, seed, threads, limit, out, storage
):
    """Train ARCH (an arch string of --space, or its index in a numbered space, as `hwnas
    arch` takes it), or every model of ZOO_DIR (a zoo folder or one entry, retrained in place),
    from scratch on --data with the space's recipe (NAS-Bench-201:
    SGD, Nesterov momentum 0.9, lr 0.1 cosine, weight decay 5e-4, batch 256). An existing path
    is a ZOO_DIR; anything else is an ARCH (quote one that holds spaces).

    Each entry gets weights.pt, model.onnx, the measured test accuracy (the benchmark's table
    accuracy beside it, or the search's accuracy function's value), README.md, card.json and
    test_data_set_0/ (check with `hwnas zoo verify`).
    """
    from hwnas.cli import command_line
    from hwnas.cli.render import Console
    from hwnas.paths import ZOO_MIN_FREE_MB, check_writable
    from hwnas.zoo.jobs import check_retrain_storage, plan_training, record_retrained, run_training
    from hwnas.zoo.train import TrainSettings

    err = Console(emoji=False, stderr=True)

    def log(message: str) -> None:
        err.print(message, markup=False, highlight=False, soft_wrap=True)

    settings = TrainSettings(
        data=data,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        seed=seed,
        limit=limit,
        threads=threads,
    )
    plan = plan_training(target, settings, space, dataset, out, log=log)
    for task in plan.tasks:
        check_writable(task.folder.parent, "the entry folder", ZOO_MIN_FREE_MB)
    check_retrain_storage([task.folder for task in plan.tasks], storage)
    rerun = command_line()  # named, with --storage, where a server's study was not updated
    runs: dict[Path, bool] = {}  # the run folders recorded, in order -> their study too
    said: set[str] = set()

    def once(message: str) -> None:  # one line per run, not one per entry
        if message not in said:
            said.add(message)
            log(message)

    done = 0

    def record(task, _card) -> None:  # each entry once in place: `zoo verify` passes any time
        nonlocal done
        done += 1
        recorded = record_retrained([task.folder], log=once, storage=storage, rerun=rerun)
        for run, study in recorded.items():
            runs[run] = runs.get(run, True) and study

    try:
        cards = run_training(plan, log=log, on_written=record)
    except (KeyboardInterrupt, click.exceptions.Abort):
        n = len(plan.tasks)
        recorded = " (recorded in the run's summary.json and study)" if runs else ""
        click.echo(
            f"interrupted: {done} of {n} entr{'y' if n == 1 else 'ies'} retrained{recorded}, "
            "the others as they were; run the same command again to train them (those done "
            "come from the training cache)",
            err=True,
        )
        raise click.exceptions.Exit(130) from None
    for run, study in runs.items():
        also = " and the run's study" if study else " (not in its study: said above)"
        log(f"{run}: the retrained entries recorded in summary.json{also}")
    for task, card in zip(plan.tasks, cards):
        acc, training = card["accuracy"], card["training"]
        table = card.get("table_accuracy")
        if not table:
            beside = ""
        elif table.get("kind") == "function":  # the user's score of the architecture
            beside = f"; the search's accuracy function gave {table['value']:.2f}%"
        else:
            beside = f"; benchmark {table['value']:.2f}% on {card['benchmark_dataset']}"
        chance = card["chance_level"]
        flag = (
            f"; CHANCE-LEVEL (chance {chance['chance_accuracy']:g}%): it learnt nothing of the "
            "data, do not ship it"
            if chance["value"]
            else ""
        )
        click.echo(
            f"{task.folder}: {acc['value']:.2f}% test accuracy on {card['dataset']} "
            f"({training['applied']['epochs']} epoch(s), {training['seconds']:.0f} s{beside})"
            f"{flag}"
        )
    where = plan.tasks[0].folder if len(plan.tasks) == 1 else plan.tasks[0].folder.parent
    import shlex  # a command to paste: a folder named 'z;touch x' stays one argument

    click.echo(
        f"check {'it' if len(plan.tasks) == 1 else 'them'} with: hwnas zoo verify "
        f"{shlex.quote(str(where))}"
    )
