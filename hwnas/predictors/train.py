"""Meta-training of :class:`hwnas.predictors.meta.MetaPredictor` artifacts.

Steps, on the recorded columns of the training devices:

1. features of every architecture of the space's table (one-hot encoding, structural counts,
   graph features);
2. the two architecture encoders (space features, graph features only): multi-output MLPs with
   a linear path, trained to predict each training column divided by its mean on the reference
   set, with a log-ratio loss, 10% of the architectures held out for early stopping;
3. the additive-cost priors: each training column's weighted least-squares fit of its values on
   the additive features (relative errors), whose mean and covariance across columns are the
   prior of a new device's costs.

Takes about a minute per artifact on two CPU cores (see ``experiments/help_protocol.py``).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hwnas import __version__, jsonfile
from hwnas.errors import HwnasError
from hwnas.predictors.data import Column, measured_reference, reference_indices
from hwnas.predictors.featurize import get_featurizer
from hwnas.predictors.meta import (
    DEFAULT_GRID,
    DEFAULT_OUTLIER,
    DEFAULT_SELECT,
    FORMAT_VERSION,
    PROXIES,
    AdditivePrior,
    Encoder,
)

DEFAULT_ADDITIVE = {
    "nasbench201": ("structural", "graph", "merged"),
    "fbnet": ("graph",),
    "ofa": ("graph",),
}
"""Additive feature groups of the space head, per space (the intercept is always there)."""


def table_features(space: str, rows: Sequence[int] | None = None) -> dict[str, np.ndarray]:
    """Features of the architectures of the space's table (every one, or the indices
    ``rows``), in that order.

    Returns:
        {"encoding": (N, e), "structural": (N, s), "merged": (N, m),
        "graph": (N, len(GRAPH_COLUMNS))}.
    """
    fz = get_featurizer(space)
    archs = fz.space.all_archs()
    if rows is not None:
        archs = [archs[i] for i in rows]
    return {
        "encoding": fz.encoding(archs).astype(np.float64),
        "structural": fz.structural(archs),
        "merged": fz.merged(archs),
        "graph": fz.graph(archs),
    }


def train_encoder(
    x: np.ndarray,
    targets: np.ndarray,
    seed: int = 0,
    hidden: int = 256,
    steps: int = 3000,
    batch: int = 512,
    lr: float = 2e-3,
    log: Callable[[str], None] | None = None,
) -> Encoder:
    """Fit an :class:`Encoder` from inputs (N, p) to positive targets (N, K) (NaN = missing).

    Loss: mean squared log ratio; Adam with cosine decay; the weights with the lowest loss on a
    held-out 10% of the rows are kept.
    """
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # small matrices: one thread is faster, and much faster on a busy CPU
    try:
        return _train_encoder(torch, x, targets, seed, hidden, steps, batch, lr, log)
    finally:
        torch.set_num_threads(threads)


def _train_encoder(torch, x, targets, seed, hidden, steps, batch, lr, log) -> Encoder:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    n, p = x.shape
    k = targets.shape[1]
    mean, scale = x.mean(0), x.std(0)
    scale = np.where(scale > 1e-9, scale, 1.0)
    z = torch.tensor((x - mean) / scale, dtype=torch.float32)
    mask_np = np.isfinite(targets) & (targets > 0)
    logt = torch.tensor(np.log(np.where(mask_np, targets, 1.0)), dtype=torch.float32)
    mask = torch.tensor(mask_np, dtype=torch.float32)
    perm = rng.permutation(n)
    held, fit = perm[: max(n // 10, 1)], perm[max(n // 10, 1) :]

    mlp = torch.nn.Sequential(
        torch.nn.Linear(p, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, hidden),
        torch.nn.SiLU(),
        torch.nn.Linear(hidden, k),
    )
    linear = torch.nn.Linear(p, k)
    with torch.no_grad():  # start near the mean target
        linear.weight.zero_()
        mlp[-1].weight.mul_(0.1)
        mlp[-1].bias.zero_()
        linear.bias.copy_(torch.log(torch.expm1(torch.ones(k))))
    params = [*mlp.parameters(), *linear.parameters()]
    opt = torch.optim.Adam(params, lr=lr, weight_decay=1e-6)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.1)

    def loss_of(rows) -> torch.Tensor:
        out = torch.nn.functional.softplus(mlp(z[rows]) + linear(z[rows])) + 1e-6
        err = (torch.log(out) - logt[rows]) ** 2 * mask[rows]
        return err.sum() / mask[rows].sum().clamp(min=1)

    best, best_state = float("inf"), None
    for step in range(steps):
        rows = fit[rng.integers(0, len(fit), batch)]
        loss = loss_of(rows)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        if step % 100 == 99 or step == steps - 1:
            with torch.no_grad():
                val = float(loss_of(held))
            if val < best:
                best = val
                best_state = [t.detach().clone() for t in params]
            if log and step % 500 == 499:
                log(f"  step {step + 1}/{steps}: train {loss.item():.5f} held-out {val:.5f}")
    with torch.no_grad():
        for t, b in zip(params, best_state):
            t.copy_(b)
    hidden_layers = [
        (mlp[i].weight.detach().numpy().T.copy(), mlp[i].bias.detach().numpy().copy())
        for i in (0, 2)
    ]
    return Encoder(
        mean.astype(np.float32),
        scale.astype(np.float32),
        hidden_layers,
        (mlp[4].weight.detach().numpy().T.copy(), mlp[4].bias.detach().numpy().copy()),
        (linear.weight.detach().numpy().T.copy(), linear.bias.detach().numpy().copy()),
    )


def additive_prior(f: np.ndarray, targets: np.ndarray, broad_only: int = 0) -> AdditivePrior:
    """Mean and covariance over columns of each column's relative-error least-squares costs.

    Args:
        f: (N, d) additive features (with the intercept).
        targets: (N, K) normalised values.
        broad_only: how many last columns of ``f`` only the broad prior families read (the
            merged counts): the training devices' costs are fitted without them, and their
            prior mean and covariance are zero (near-duplicates of the counts before them,
            they made the fitted costs, hence the covariance, ill-conditioned).
    """
    if broad_only:
        inner = additive_prior(f[:, :-broad_only], targets)
        d = f.shape[1]
        mean, cov = np.zeros(d), np.zeros((d, d))
        mean[: d - broad_only] = inner.mean
        cov[: d - broad_only, : d - broad_only] = inner.cov
        return AdditivePrior(mean, cov + 1e-4 * np.eye(d) * (np.arange(d) >= d - broad_only))
    coefs = []
    for k in range(targets.shape[1]):
        t = targets[:, k]
        ok = np.isfinite(t) & (t > 0)
        w = 1.0 / t[ok] ** 2
        a = (f[ok] * w[:, None]).T @ f[ok]
        a += 1e-6 * np.trace(a) / len(a) * np.eye(len(a))
        coefs.append(np.linalg.solve(a, (f[ok] * w[:, None]).T @ t[ok]))
    c = np.stack(coefs)
    cov = np.cov(c.T) if len(c) > 1 else np.zeros((c.shape[1], c.shape[1]))
    cov = np.atleast_2d(cov) + 1e-4 * np.eye(c.shape[1])
    return AdditivePrior(c.mean(0), cov)


def is_current(card: dict[str, Any]) -> bool:
    """Whether an artifact's card was trained with this hwnas's training settings (additive
    features, from which its cost prior is fitted): experiments that cache artifacts retrain
    stale ones. The adaptation settings (head grid, cost proxies) are not trained:
    :func:`refresh_adaptation` brings a cached artifact's up to date without training."""
    model = card.get("model", {})
    additive = list(DEFAULT_ADDITIVE.get(card.get("space", ""), ("graph",)))
    return model.get("additive_features") == additive


def refresh_adaptation(path: Path) -> None:
    """Write this hwnas's adaptation settings (head grid, family weighting, cost proxies) into
    the card of the artifact at ``path`` (they are read at adaptation, not trained; scores in
    the card are dropped when the settings change, as they no longer describe the artifact)."""
    from hwnas.predictors.meta import read_card

    card = read_card(path)
    settings = adaptation_settings()
    if all(card["model"].get(k) == v for k, v in settings.items()):
        return
    card["model"].update(settings)
    card.pop("scores", None)
    write_card(Path(path), card)


def reuse_cached(path: Path) -> bool:
    """Whether the artifact an experiment cached at ``path`` can be used as it is: its card
    exists, reads and was trained with this hwnas's training settings (:func:`is_current`),
    and now has this hwnas's adaptation settings (:func:`refresh_adaptation`). False: train it
    (again)."""
    from hwnas.predictors.meta import read_card

    if not (Path(path) / "card.json").is_file():
        return False
    try:
        if not is_current(read_card(path)):
            return False
        refresh_adaptation(path)
    except Exception:  # noqa: BLE001 - an artifact of an older format: train again
        return False
    return True


def adaptation_settings() -> dict[str, Any]:
    """The card's adaptation settings: head grid, family weighting, cost proxies."""
    return {
        "grid": {k: list(v) for k, v in DEFAULT_GRID.items()},
        "select": DEFAULT_SELECT,
        "outlier": DEFAULT_OUTLIER,
        "proxies": list(PROXIES),
    }


def meta_train(
    space: str,
    columns: Sequence[Column],
    out: Path,
    name: str,
    split: dict[str, Any] | None = None,
    additive: Sequence[str] | None = None,
    seed: int = 0,
    steps: int = 3000,
    log: Callable[[str], None] | None = None,
    rows: Sequence[int] | None = None,
    rows_source: str = "",
) -> dict[str, Any]:
    """Meta-train an artifact on ``columns`` and write it to ``out`` (card + weights).

    Args:
        space: search-space name.
        columns: the training devices' recorded columns.
        out: artifact folder (created; its files are replaced).
        name: artifact name (for the card and for ``--predictor``).
        split: what the card should say about the device split.
        additive: additive feature groups of the space head ("structural", "graph").
        seed: seed of the encoders' initialisation and batches.
        steps: optimisation steps per encoder.
        log: progress messages.
        rows: table indices of the architectures to train on (default: every one); values
            of other architectures are never read, but for the reference set's, which
            normalise each column when they are among ``rows``.
        rows_source: where ``rows`` came from (a file name), for the card.

    Returns:
        The card (without scores; :func:`hwnas.predictors.recipes.score_artifact` adds them).

    Raises:
        HwnasError: fewer than two training columns or rows, rows out of range, a column with
            fewer than :data:`hwnas.predictors.calibration.MIN_TRAIN_ARCHS` values among them
            (:func:`check_columns`).
    """
    if len(columns) < 2:
        raise HwnasError(f"meta-training needs at least 2 device columns, got {len(columns)}")
    started = time.time()
    say = log or (lambda _m: None)
    fz = get_featurizer(space)
    ref = np.array(reference_indices(space))
    n_all = len(columns[0].values)
    rows = np.arange(n_all) if rows is None else np.asarray(sorted({int(i) for i in rows}))
    if len(rows) < 2 or rows[0] < 0 or rows[-1] >= n_all:
        raise HwnasError(f"meta-training rows must be at least 2 indices in 0..{n_all - 1}")
    per_device = check_columns(columns, rows)
    feats = table_features(space, None if len(rows) == n_all else rows)

    def scale(column: Column) -> float:
        """The column's mean on its reference set (the calibration a new device gives), or
        on the training rows when the reference set is not among them (or not measured)."""
        refs = measured_reference(space, column.values)
        among = len(refs) > 0 and np.isin(refs, rows).all()
        return float(np.nanmean(column.values[refs if among else rows]))

    targets = np.stack([c.values / scale(c) for c in columns], 1)[rows]

    g = feats["graph"]
    keep = np.nonzero(g.std(0) > 1e-9 * np.abs(g).mean(0).clip(min=1e-30))[0]
    graph_scale = g[:, keep].mean(0)
    u = g[:, keep] / graph_scale
    x_space = np.concatenate([feats["encoding"], feats["structural"], np.log1p(u)], 1)
    x_graph = np.log1p(u)
    additive = tuple(additive or DEFAULT_ADDITIVE.get(space, ("graph",)))
    parts = [np.ones((len(u), 1))]
    if "structural" in additive:
        parts.append(feats["structural"])
    if "graph" in additive:
        parts.append(u)
    broad_only = feats["merged"].shape[1] if "merged" in additive else 0
    if broad_only:
        parts.append(feats["merged"])
    f_space = np.concatenate(parts, 1)
    f_graph = np.concatenate([np.ones((len(u), 1)), u], 1)

    used = int(np.count_nonzero((np.isfinite(targets) & (targets > 0)).any(1)))
    say(f"{name}: {len(columns)} columns x {used} architectures with values; space encoder")
    enc_space = train_encoder(x_space, targets, seed=seed, steps=steps, log=say)
    say(f"{name}: graph encoder")
    enc_graph = train_encoder(x_graph, targets, seed=seed + 1, steps=steps, log=say)
    prior_space = additive_prior(f_space, targets, broad_only)
    prior_graph = additive_prior(f_graph, targets)

    out.mkdir(parents=True, exist_ok=True)
    arrays = {
        **enc_space.arrays("space_"),
        **enc_graph.arrays("graph_"),
        "space_prior_mean": prior_space.mean,
        "space_prior_cov": prior_space.cov,
        "graph_prior_mean": prior_graph.mean,
        "graph_prior_cov": prior_graph.cov,
        "graph_keep": keep.astype(np.int64),
        "graph_scale": graph_scale,
    }
    np.savez_compressed(out / "weights.npz", **{k: np.asarray(v) for k, v in arrays.items()})
    from hwnas.predictors.graph import GRAPH_COLUMNS

    card = {
        "format_version": FORMAT_VERSION,
        "name": name,
        "kind": "meta",
        "space": space,
        "dataset": fz.dataset,
        "metrics": sorted({c.metric for c in columns}),
        "hwnas_version": __version__,
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "method": (
            "hierarchical Bayesian linear regression over a meta-trained architecture "
            "encoder (training devices' normalised values) and additive cost features, "
            "prior conditioned on the hardware embedding (reference-set values), Bayesian "
            "model averaging over the head's hyper-parameters"
        ),
        "training_devices": [c.key for c in columns],
        "split": split or {"meta_train": [c.key for c in columns]},
        "reference_set": [int(i) for i in ref],
        "training_archs": {  # those with a value of at least one training column
            "count": used,
            "per_device": per_device,
            "of": int(n_all),
            "source": rows_source or ("all" if len(rows) == n_all else "given"),
            "sha256": hashlib.sha256(",".join(map(str, rows)).encode()).hexdigest(),
        },
        "data_sources": sorted({c.source for c in columns}),
        "model": {
            "additive_features": list(additive),
            "graph_features": [GRAPH_COLUMNS[i] for i in keep],
            "encoder": {"hidden": [256, 256], "steps": steps, "seed": seed},
            **adaptation_settings(),
        },
        "training_time_s": round(time.time() - started, 1),
        "training_threads": 1,
    }
    write_card(out, card)
    say(f"{name}: trained in {card['training_time_s']} s")
    return card


def check_columns(columns: Sequence[Column], rows: Sequence[int]) -> dict[str, int]:
    """How many of the architectures ``rows`` (table indices) each training column has a value
    for (finite, positive), checked before any training: a column with fewer than
    :data:`hwnas.predictors.calibration.MIN_TRAIN_ARCHS` (a recorded device with a few rows)
    says too little to fit its costs.

    Returns:
        column key -> number of values among ``rows``.

    Raises:
        HwnasError: a column with too few values, naming it and its count.
    """
    from hwnas.predictors.calibration import MIN_TRAIN_ARCHS

    counts = {}
    for c in columns:
        v = np.asarray(c.values, dtype=np.float64)[np.asarray(rows)]
        counts[c.key] = int(np.count_nonzero(np.isfinite(v) & (v > 0)))
        if counts[c.key] < MIN_TRAIN_ARCHS:
            raise HwnasError(
                f"device column '{c.key}' has {counts[c.key]} values among the "
                f"{len(rows)} training architectures; meta-training needs at least "
                f"{MIN_TRAIN_ARCHS} per device"
            )
    return counts


def write_card(out: Path, card: dict[str, Any]) -> None:
    (out / "card.json").write_text(jsonfile.dumps(card, indent=2) + "\n")
