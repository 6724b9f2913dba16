"""``hwnas predictor train|eval|list``: build, score and list predictor artifacts."""

from __future__ import annotations

from pathlib import Path

import click

from hwnas.cli.options import SEED


@click.group("predictor")
def predictor_group():
    """Meta-learned latency/energy predictor artifacts (latency_predictors/<name>/)."""


@predictor_group.command("train")
@click.argument("names", nargs=-1)
@click.option(
    "--root",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder receiving <root>/<name>/. Default: latency_predictors in the hwnas home "
    "(user artifacts, used before the shipped ones of the same name). "
    "Use --root latency_predictors in a checkout to rebuild the shipped ones.",
)
@click.option("--space", default=None, help="Custom artifact: search space.")
@click.option(
    "--devices",
    default=None,
    metavar="K1,K2,...",
    help="Custom artifact: recorded columns to train on (device or device:energy_mj).",
)
@click.option("--name", "custom_name", default=None, help="Custom artifact: its name.")
@click.option(
    "--archs",
    "archs_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="ARCHS.csv",
    help="Meta-train only on these architectures (column arch: indices or arch strings of the "
    "space's recorded table), e.g. the ones you measured; default: every one.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace a custom artifact of the same --name (refused without it); rebuilding a "
    "shipped one (NAMES) always replaces it.",
)
@click.option("--steps", type=int, default=3000, show_default=True, help="Steps per encoder.")
@click.option(
    "--seed",
    type=SEED,
    default=0,
    show_default=True,
    help="Seed of the meta-training (its initialisation and mini-batches).",
)
def train_cmd(names, root, space, devices, custom_name, archs_file, overwrite, steps, seed):
    """Meta-train artifacts NAMES (default: every shipped one: nasbench201, nasbench201-help,
    fbnet, fbnet-help, ofa), or a custom one with --space/--devices/--name."""
    from hwnas.cli.render import Console
    from hwnas.errors import HwnasError
    from hwnas.paths import confined, hwnas_home
    from hwnas.predictors.recipes import RECIPES, build, build_custom, get_recipe

    console = Console(emoji=False, stderr=True)
    root = root or hwnas_home() / "latency_predictors"
    if steps < 1:
        raise HwnasError(f"--steps must be at least 1, got {steps}")
    custom = any(x is not None for x in (space, devices, custom_name))
    if custom:
        given = (("--space", space), ("--devices", devices), ("--name", custom_name))
        empty = [o for o, v in given if v is not None and not v.strip()]
        if empty:
            raise HwnasError(f"{' and '.join(empty)} given empty: name what to train on")
        if names or not (space and devices and custom_name):
            raise HwnasError("a custom artifact needs --space, --devices and --name (no NAMES)")
        from hwnas.predictors.data import get_column
        from hwnas.predictors.train import check_columns
        from hwnas.spaces import get_space

        _check_custom_name(custom_name)
        get_space(space)
        keys = _device_keys(devices)
        cols = [get_column(space, k) for k in keys]  # unknown columns fail before any training
        if len(cols) < 2:
            raise HwnasError(f"meta-training needs at least 2 device columns, got {len(cols)}")
        rows = _rows(archs_file, [space])
        check_columns(cols, rows if rows is not None else range(len(cols[0].values)))
        for c in cols:  # so do columns with too few values, or too few to score on
            _check_scorable(space, c)
        out = confined(root, custom_name, what="--name")
        _check_out(out, overwrite)
        log, source = console.print, _source(archs_file)
        cards = [build_custom(custom_name, space, keys, out, steps, seed, log, rows, source)]
    else:
        names = names or tuple(RECIPES)
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise HwnasError(f"NAMES names {', '.join(twice)} more than once")
        spaces = [get_recipe(n).space for n in names]  # unknown names fail before any training
        for n in names:  # rebuilding a shipped artifact replaces it: that is what it is for
            _check_out(confined(root, n, what="NAMES"), overwrite=True)
        rows = _rows(archs_file, spaces)
        cards = [
            build(n, root, steps, seed, console.print, rows, _source(archs_file)) for n in names
        ]
    _summary(cards, root)


def _check_out(out: Path, overwrite: bool) -> None:
    """Refuse, before training, an artifact folder that cannot be written: a file in its place,
    or (without ``overwrite``) a folder already holding an artifact or anything else.

    Raises:
        HwnasError: naming the path and what to do.
    """
    from hwnas.errors import HwnasError

    if out.exists() and not out.is_dir():
        raise HwnasError(f"{out} is a file: the artifact is a folder; choose another --name")
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        what = "an artifact" if (out / "card.json").exists() else "other files"
        raise HwnasError(
            f"{out} already holds {what}: choose another --name, or --overwrite to replace it"
        )


def _check_scorable(space: str, column) -> None:
    """Refuse a training column whose table lacks the reference set: a custom artifact is
    scored by adapting on each training device's reference values
    (:func:`hwnas.predictors.recipes.score_artifact`), which needs at least
    :data:`hwnas.predictors.base.MIN_CALIBRATION` of them (or isomorphic stand-ins).

    Raises:
        HwnasError: too few reference values, naming the column and how many it has.
    """
    from hwnas.errors import HwnasError
    from hwnas.predictors.base import MIN_CALIBRATION
    from hwnas.predictors.data import measured_reference, reference_indices

    have = len(measured_reference(space, column.values))
    if have < MIN_CALIBRATION:
        raise HwnasError(
            f"device column '{column.key}' has values for {have} of the "
            f"{len(reference_indices(space))} reference architectures of {space} (or isomorphic "
            f"stand-ins); the artifact is scored by adapting on them, which needs at least "
            f"{MIN_CALIBRATION}: add them to its table (hwnas refset export lists them)"
        )


def _check_custom_name(name: str) -> None:
    """Refuse a custom artifact name that would hide a shipped artifact (user artifacts are
    looked up first) or that names a predictor kind (flops, regressor, meta, kernel).

    Raises:
        HwnasError: such a name.
    """
    from hwnas.errors import HwnasError
    from hwnas.predictors.artifacts import PREDICTORS, shipped_artifact_names
    from hwnas.predictors.recipes import RECIPES

    shipped = sorted({*shipped_artifact_names(), *RECIPES})
    if name in shipped:
        raise HwnasError(
            f"--name {name} is the name of a shipped predictor artifact, which yours would hide; "
            f"choose another (shipped: {', '.join(shipped)})"
        )
    if name in PREDICTORS:
        raise HwnasError(
            f"--name {name} is a predictor kind ({', '.join(PREDICTORS.names())}); choose another"
        )


def _rows(archs_file: Path | None, spaces: list[str]) -> list[int] | None:
    """Table indices of --archs (one space only), read and checked before any training."""
    if archs_file is None:
        return None
    from hwnas.errors import HwnasError
    from hwnas.predictors.calibration import read_table_archs
    from hwnas.spaces import get_space

    if len(set(spaces)) != 1:
        raise HwnasError(
            f"--archs names architectures of one space; these artifacts are for "
            f"{', '.join(sorted(set(spaces)))}: name artifacts of one space"
        )
    return read_table_archs(archs_file, get_space(spaces[0]))


def _device_keys(devices: str) -> list[str]:
    """The recorded columns of ``--devices K1,K2,...``, in order.

    Raises:
        HwnasError: a column named twice (meta-training on it twice would count it as two
            devices).
    """
    from hwnas.errors import HwnasError

    keys = [k.strip() for k in devices.split(",") if k.strip()]
    twice = sorted({k for k in keys if keys.count(k) > 1})
    if twice:
        raise HwnasError(f"--devices names {', '.join(twice)} more than once")
    return keys


def _source(archs_file: Path | None) -> str:
    return archs_file.name if archs_file is not None else ""


def _summary(cards, root: Path) -> None:
    from hwnas.cli.render import Console, print_table

    rows = []
    for c in cards:
        s = c.get("scores", {})
        seen = "unseen" if s.get("protocol", "").startswith("unseen") else "seen"
        rows.append(
            (
                c["name"],
                c["space"],
                str(len(c["training_devices"])),
                _archs_cell(c.get("training_archs", {})),
                f"{c['training_time_s']:.0f}",
                f"{len(s.get('devices', {}))} {seen}",
                f"{s.get('mean', {}).get('spearman_rho', float('nan')):.3f}",
                f"{s.get('mean', {}).get('acc_10pct', float('nan')):.3f}",
            )
        )
    columns = ("name", "space", "devices", "archs", "train s", "scored on", "rho", "±10%")
    print_table(  # a name too wide folds, and is printed whole below the table
        Console(emoji=False),
        f"predictor artifacts in {root}",
        columns,
        rows,
        keys=("name",),
        right=("archs", "train s", "rho", "±10%"),
    )


def _archs_cell(archs: dict) -> str:
    """The architectures an artifact was trained on: those with a value of any training
    device, and the device with the fewest when it has fewer."""
    count, per = archs.get("count", ""), archs.get("per_device") or {}
    if not per or min(per.values()) >= count:
        return str(count)
    fewest = min(per, key=per.get)
    return f"{count} ({fewest}: {per[fewest]})"


@predictor_group.command("eval")
@click.argument("predictor")
@click.option(
    "--devices",
    default=None,
    metavar="K1,K2,...",
    help="Recorded columns to score on. Default: the artifact's unseen devices, or its "
    "training devices (marked seen) when it has none.",
)
def eval_cmd(predictor, devices):
    """Score PREDICTOR (artifact name or folder): adapt on each device's 10 reference-set
    values, predict every architecture, and score on the device's other values (rows: how
    many; a device with fewer than 10 is refused): Spearman rho, Kendall tau, MAPE, median APE
    (a few near-zero values cannot dominate it), ±10% accuracy and the share of values within
    2 predicted standard deviations."""
    from hwnas.cli.render import Console, print_table
    from hwnas.predictors import load_predictor
    from hwnas.predictors.data import get_column
    from hwnas.predictors.evaluate import evaluate_columns, mean_scores
    from hwnas.predictors.meta import MetaPredictor

    first = load_predictor(predictor)
    if not isinstance(first, MetaPredictor):
        from hwnas.errors import HwnasError

        raise HwnasError("predictor eval scores meta-learned artifacts (a name or a folder)")
    card, space = first.card, first.space_name
    unseen = list(card.get("split", {}).get("meta_test", []))
    training = set(card["training_devices"])
    if devices is not None and not _device_keys(devices):
        from hwnas.errors import HwnasError

        raise HwnasError(
            f"--devices {devices!r} names no device column: name some, or leave it out"
        )
    keys = _device_keys(devices) if devices else (unseen or sorted(training))
    cols = [get_column(space, k) for k in keys]
    per = evaluate_columns(lambda: MetaPredictor(first.path), space, cols)
    columns = ("Spearman rho", "Kendall tau", "MAPE %", "median APE %", "±10% acc", "in 2 std")

    def row(name, seen, s):
        return (
            name,
            seen,
            str(s.get("rows", "")),
            f"{s['spearman_rho']:.3f}",
            f"{s['kendall_tau']:.3f}",
            f"{s['mape_pct']:.1f}",
            f"{s['median_ape_pct']:.1f}",
            f"{s['acc_10pct']:.3f}",
            f"{s['coverage_2std']:.3f}",
        )

    rows = [row(k, "seen" if k in training else "unseen", s) for k, s in per.items()]
    rows.append(row("mean", "", mean_scores(per)))
    print_table(  # 140 wide: numbers in one line; a device key too wide folds, then whole
        Console(emoji=False, width=140),
        f"{first.name} ({first.path}): {space}, adapted on the 10 reference architectures, "
        "scored on the others",
        ("device", "split", "rows", *columns),
        rows,
        keys=("device",),
        right=("rows", *columns),
    )


@predictor_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON on stdout.")
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="List the artifacts in this folder (one `predictor train --root` wrote; name one as "
    "ROOT/NAME where a predictor is asked for) instead of the home's and the shipped ones.",
)
def list_cmd(as_json, root):
    """List predictor artifacts: space, metrics, training devices, unseen-device score."""
    from hwnas.cli.render import Console, print_json, print_table, text_line
    from hwnas.errors import HwnasError
    from hwnas.predictors import list_artifacts
    from hwnas.predictors.meta import read_card, read_weights

    listed, broken = [], {}
    for name, path in list_artifacts(root).items():
        try:
            card = read_card(path)
            read_weights(path / "weights.npz")  # a damaged file is listed as broken, not used
        except HwnasError as exc:  # one broken user artifact does not hide the others
            broken[name] = str(exc)
            continue
        scores = card.get("scores", {})
        unseen = scores.get("protocol", "").startswith("unseen")
        listed.append(
            {
                "name": name,
                "space": card["space"],
                "metrics": list(card.get("metrics", [])),
                "training_devices": list(card["training_devices"]),
                "unseen_spearman_rho": scores["mean"]["spearman_rho"] if unseen else None,
                "path": str(path),
            }
        )
    if as_json:
        print_json({"predictors": listed, "broken": broken})
        return
    rows = [
        (
            p["name"],
            p["space"],
            ", ".join(p["metrics"]),
            str(len(p["training_devices"])),
            "-" if p["unseen_spearman_rho"] is None else f"{p['unseen_spearman_rho']:.3f}",
            p["path"],
        )
        for p in listed
    ]
    console = Console(emoji=False)
    print_table(
        console,
        "predictor artifacts (--predictor NAME)",
        ("name", "space", "metrics", "devices", "unseen rho", "path"),
        rows,
        keys=("name", "space", "path"),
        right=("devices", "unseen rho"),
    )
    for name, why in broken.items():
        text_line(console, f"broken predictor artifact {name}: {why} (skipped)")
