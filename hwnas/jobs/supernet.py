"""The supernet search job behind ``hwnas search --strategy darts|gdas|fbnet|proxyless|
singlepath|oneshot``.

:func:`prepare` resolves every name and reads the data before work starts (user errors surface
here); :func:`search` trains the supernet, in one process or across the processes of a
``torchrun`` job (a checkpoint per epoch in the run folder, so a killed job resumes at its last
epoch), derives the architecture (and, for one-shot search, the Pareto
candidates), extracts each with its inherited weights, recalibrates batch norm, fine-tunes
briefly on the training split, measures its validation accuracy (what the front and ``best``
are chosen on), its test accuracy (reported beside, never used to choose) and its device cost,
adds each as a COMPLETE trial to the Optuna study, and writes the run folder through the
spine's report functions.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from hwnas.cost_record import NOT_IN_TABLE, UNITS, CostRecord, precision_target
from hwnas.devices import Device
from hwnas.engine.evaluate import OBJECTIVES, Evaluation
from hwnas.engine.loop import (
    SearchSettings,
    check_stored_study,
    load_study,
    run_search,
    study_name,
)
from hwnas.engine.problem import open_problem, resolve
from hwnas.errors import HwnasError, UnrecordedError
from hwnas.jobs.output import RunOutput, write_run
from hwnas.limits import MAX_BATCH_SIZE, MAX_EPOCHS, bounded
from hwnas.measure import Profiler, arch_workload
from hwnas.progress import SILENT, Reporter
from hwnas.spaces import SearchSpace, TabulatedSpace, ability
from hwnas.supernet.settings import job_options, parse_options, strategy_options, supernet_config
from hwnas.supernet.strategies import SUPERNET_STRATEGIES
from hwnas.supernet.turn import TrainingTurn


@dataclass
class SupernetSettings(SearchSettings):
    """A supernet search (the spine's :class:`SearchSettings` plus training settings).

    Attributes:
        data: "digits" or a folder (CIFAR pickle folder or class-per-folder images).
        epochs: supernet training epochs.
        latency_target: target of the device metric (ms or mJ), target mode.
        latency_weight: penalty weight W (unit-free), weight mode; left out with no
            ``latency_target``, the paper's weight of a strategy whose method has one (FBNet
            0.6, ProxylessNAS 0.3), else None (accuracy alone).
        batch_size: mini-batch size.
        finetune_epochs: epochs of fine-tuning each extracted subnet before measuring it.
        options: ``--set`` settings for the supernet, the strategy and the job (strings or
            typed values; parsed and validated against :mod:`hwnas.supernet.settings`).
    """

    data: str = "digits"
    epochs: int = 5  # the CLI's --epochs default (hwnas.cli.supernet_search takes it from here)
    latency_target: float | None = None
    latency_weight: float | None = None
    batch_size: int = 64
    finetune_epochs: int = 2
    options: dict[str, Any] = field(default_factory=dict)

    pipeline: ClassVar[str] = "supernet"

    def __post_init__(self) -> None:
        self._check_shared()
        SUPERNET_STRATEGIES.info(self.strategy)  # the name checked; the class (torch) not loaded
        self.options = parse_options(dict(self.options), self.strategy, self.space)
        # the type first (a string or a fraction from Python is one line, not a TypeError),
        # then the range
        bounded("--epochs", self.epochs, integer=True)
        if self.epochs < 1:  # 0 epochs derive from untrained architecture weights: meaningless
            raise HwnasError(f"--epochs must be at least 1, got {self.epochs}")
        bounded("--epochs", self.epochs, 1, MAX_EPOCHS, integer=True)
        bounded("--finetune-epochs", self.finetune_epochs, integer=True)
        if self.finetune_epochs < 0:
            raise HwnasError(f"--finetune-epochs must be >= 0, got {self.finetune_epochs}")
        bounded("--finetune-epochs", self.finetune_epochs, 0, MAX_EPOCHS, integer=True)
        bounded("--batch-size", self.batch_size, integer=True)
        if self.batch_size < 2:
            raise HwnasError(f"--batch-size must be at least 2, got {self.batch_size}")
        bounded("--batch-size", self.batch_size, 2, MAX_BATCH_SIZE, integer=True)
        if self.latency_target is not None and self.latency_weight is not None:
            raise HwnasError("give either --latency-target or --latency-weight, not both")
        if self.latency_target is None and self.latency_weight is None:
            # FBNet's and ProxylessNAS's hardware term is their method: their paper's weight
            # (--latency-weight 0 trains for accuracy alone)
            self.latency_weight = SUPERNET_STRATEGIES.info(self.strategy).get("latency_weight")
        if self.latency_target is not None and self.job.cost == "flops":
            raise HwnasError("--latency-target needs a latency cost model, not FLOPs (cost=flops)")
        if self.max_latency is not None and self.metric != "latency_ms":
            raise HwnasError(  # a supernet search measures its objective's metric alone
                f"--max-latency limits a supernet search of latency; this one searches "
                f"{self.metric}: steer it with --latency-target (its target, in "
                f"{UNITS[self.metric]}) or --latency-weight"
            )
        if self.latency_target is not None:
            bounded("--latency-target", self.latency_target)
            if not self.latency_target > 0:
                raise HwnasError(f"--latency-target must be positive, got {self.latency_target}")
            bounded("--latency-target", self.latency_target, 0, low_open=True)
            if self.max_latency is not None:
                bounded("--max-latency", self.max_latency)
                if self.latency_target > self.max_latency:  # it would aim outside its limit
                    raise HwnasError(
                        f"--latency-target {self.latency_target:g} ms is above --max-latency "
                        f"{self.max_latency:g} ms: give a target within the limit"
                    )
        if self.latency_weight is not None:
            bounded("--latency-weight", self.latency_weight)
            if self.latency_weight < 0:
                raise HwnasError(f"--latency-weight must be >= 0, got {self.latency_weight}")
            bounded("--latency-weight", self.latency_weight, 0)
        if not self.study:
            self.study = study_name(self)

    def study_settings(self) -> dict[str, Any]:
        """The settings the study records (:meth:`SearchSettings.study_settings`), its dataset
        as summary.json names it: ``dataset`` the data the subnets are trained and scored on
        (``--data``), ``table_dataset`` the dataset of the space's tables (``--dataset``: table
        accuracy, recorded latencies). A study recorded before had the tables' dataset as
        ``dataset``: :func:`hwnas.engine.loop._identity` compares the two records alike."""
        from hwnas.datasets import data_name

        out = super().study_settings()
        out["table_dataset"] = out["dataset"]
        out["dataset"] = data_name(self.data)
        return out

    def name_parts(self) -> list[str]:
        """What tells this search's study apart (:func:`~hwnas.engine.loop.study_name`):
        space, data, device, objective, hardware term and latency limit, strategy, epochs,
        seed, and a digest of the rest that differs from the defaults (``--set`` values,
        batch size, fine-tuning epochs): two searches that differ only there never share a
        name, and the default command keeps its plain one; and the space's fingerprint where
        it is more than its name (an edited space file, a retrained model: another study)."""
        hw = (
            f"-target{self.latency_target:g}"
            if self.latency_target is not None
            else f"-weight{self.latency_weight:g}"
            if self.latency_weight is not None
            else ""
        )
        if self.max_latency is not None:
            hw += f"-max{self.max_latency:.15g}ms"
        from hwnas.datasets import data_identity

        data = data_identity(self.data)  # a folder by its files too: other images, other study
        rest = {"set": self.options}
        for name in ("batch_size", "finetune_epochs"):
            if getattr(self, name) != SupernetSettings.__dataclass_fields__[name].default:
                rest[name] = getattr(self, name)
        digest = []
        if self.options or len(rest) > 1:
            text = json.dumps(rest, sort_keys=True, default=str)
            digest = [f"x{hashlib.sha256(text.encode()).hexdigest()[:8]}"]
        return [
            self.space, data, self.device, f"{self.objective}{hw}", self.strategy,
            f"e{self.epochs}", f"seed{self.seed}", *self.accuracy_parts(), *digest,
            *self.fingerprint_parts(),
        ]  # fmt: skip

    @property
    def job(self) -> Any:
        """The job's settings (``--set cost=...``), typed: the given values over the declared
        defaults (:data:`hwnas.supernet.settings.JobOptions`)."""
        return job_options(self.options)


@dataclass
class PreparedSupernetSearch:
    settings: SupernetSettings
    space: SearchSpace
    device: Device
    profiler: Profiler
    data: Any
    storage_url: str
    storage: Any


def prepare(
    settings: SupernetSettings, storage: str | None = None, store_path: Path | None = None
) -> PreparedSupernetSearch:
    """Resolve names, open the device, store and storage, and load the data.

    Raises:
        HwnasError: unknown space, dataset, device or setting; unreadable data; a device
            without the metric or without a table for the space; ``cost=measured`` or
            ``cost=kernel`` on a device that cannot run them; under torchrun, a
            ``--batch-size`` that the processes cannot share; a ``--study`` made by another
            search or program (:func:`hwnas.engine.loop.check_stored_study`); a strategy with
            architecture steps (darts, gdas, fbnet, proxyless) on a validation split of fewer
            than 2 images per process.
    """
    from hwnas.datasets import check_input_shape, input_channels, load_data
    from hwnas.distributed import check_gpus, check_processes, local_processes, ranks_from_env
    from hwnas.supernet import check_supernet

    check_processes(settings.batch_size, ranks_from_env().world)
    from hwnas.supernet.train import resolve_device

    # a device this machine lacks, or fewer GPUs than torchrun's processes here: now
    check_gpus(resolve_device(settings.job.torch_device or None), local_processes())
    # a space without a supernet, or size settings it cannot take, fail here
    check_supernet(settings.space, supernet_config(settings.options, settings.space))
    cls = SUPERNET_STRATEGIES.get(settings.strategy)
    only = cls.spaces is not None and tuple(cls.spaces) == (settings.space,)
    space, device = resolve(  # a strategy of one space: the space the device lacks is why
        settings,
        f"strategy '{settings.strategy}' searches the {settings.space} space only" if only else "",
    )
    device.check_table_dataset(space.name, settings.metric, settings.dataset)
    # a limit or target no subnet can meet: before training
    from hwnas.jobs.table import check_feasible

    check_feasible(settings.max_latency, "--max-latency", space, device, whole=True)
    check_feasible(
        settings.latency_target, "--latency-target", space, device, whole=True,
        metric=settings.metric, target=True,
    )  # fmt: skip
    if settings.job.cost == "kernel":  # the one cost model refused on what it is given
        from hwnas.engine.kernel_cost import check_kernel_cost

        check_kernel_cost(device, settings.metric)
    if settings.job.cost == "measured":  # a device that runs nothing: before training
        from hwnas.supernet.cost import check_measured_cost

        check_measured_cost(device)
    if cls.spaces is not None and space.name not in cls.spaces:
        raise HwnasError(
            f"strategy '{settings.strategy}' works on the {', '.join(cls.spaces)} space, "
            f"not '{space.name}'"
        )
    need = space.min_input_side()  # a patch_embed after strides: 16x16 proxies were too small
    if settings.job.image_size and settings.job.image_size < need:
        raise HwnasError(
            f"--set image_size={settings.job.image_size} is too small for {space.name}: its "
            f"patch embedding needs images of at least {need}x{need} pixels"
        )
    image_size = settings.job.image_size or space.proxy_input_side(settings.dataset)
    shape = space.dataset(settings.dataset).input_shape
    data = load_data(
        settings.data,
        seed=settings.job.data_seed,
        image_size=image_size,
        limit=settings.job.limit or None,
        channels=input_channels(shape),
    )
    check_input_shape(data, shape, space.name, exact=False)
    if cls.bilevel:  # architecture steps cycle the validation split in batches of 2 or more
        _check_validation_split(settings, data, ranks_from_env().world)
    problem = open_problem(settings, space, device, storage, store_path)
    # another search's or program's study: refused before the run folder is made
    check_stored_study(settings, problem.storage)
    return PreparedSupernetSearch(
        settings, space, device, problem.profiler, data, problem.storage_url, problem.storage
    )


def _check_validation_split(settings: SupernetSettings, data, world: int) -> None:
    """Refuse a validation split too small for a bilevel strategy's architecture steps.

    Those strategies draw a validation batch for every training step, and a batch of fewer
    than 2 images per process is skipped (batch norm needs 2 in training mode): a split of 1
    image gave no batch at all, and the search spun forever at full CPU with no output.

    Raises:
        HwnasError: fewer than 2 validation images per process.
    """
    need = 2 * world
    have = len(data.val)
    if have >= need:
        return
    images = len(data.train) + have + (0 if data.own_test else len(data.test))
    enough = next(n for n in range(images, images + 1000) if round(0.2 * n) >= need)
    per = f" ({world} processes, 2 each)" if world > 1 else ""
    limited = settings.job.limit and settings.job.limit < enough
    how = f"--set limit={enough} or more" if limited else "more images in --data"
    raise HwnasError(
        f"strategy '{settings.strategy}' trains its architecture on the validation split, "
        f"which holds {have} of the {images} images (a fifth is held out for it): it needs "
        f"at least {need}{per}; give at least {enough} images ({how}), or a strategy "
        "without architecture steps (--strategy oneshot or singlepath)"
    )


NOT_TRAINING = ("study", "budget", "finetune_epochs", "max_latency")
"""Settings a supernet's training does not read: the study's name and budget, the fine-tuning
of the extracted subnets, and ``--max-latency`` (derivation alone keeps under it; no training
term). A checkpoint trained under other values of these is the same supernet."""

NOT_TRAINING_OPTIONS = (
    "finetune_lr", "threads", "evolution_trials", "population", "candidates", "target_tolerance",
)  # fmt: skip
"""``--set`` keys a supernet's training does not read: fine-tuning's learning rate, torch's CPU
threads (the same arithmetic, on more cores), one-shot's NSGA-II over the trained supernet and
the candidates it hands out, and the band derivation accepts around ``--latency-target``. The
rest stays: the cost model's settings too, since the checkpoint holds the lookup table its
training steered with (and one-shot's derivation reads it)."""


def _training(settings: dict[str, Any]) -> dict[str, Any]:
    """The settings (:meth:`SupernetSettings.as_dict`, or a checkpoint's fingerprint read back)
    that a supernet's training reads."""
    keep = {k: v for k, v in settings.items() if k not in NOT_TRAINING}
    if isinstance(keep.get("options"), dict):
        options = keep["options"].items()
        keep["options"] = {k: v for k, v in options if k not in NOT_TRAINING_OPTIONS}
    return keep


def _fingerprint(settings: SupernetSettings) -> str:
    """The settings the supernet's training reads (:func:`_training`), as the checkpoint and the
    study's record of a trained supernet (:mod:`hwnas.supernet.turn`) know them: changing only
    ``--finetune-epochs`` after an interrupted search threw its supernet's epochs away."""
    return json.dumps(_training(settings.as_dict()), sort_keys=True, default=str)


def search(
    job: PreparedSupernetSearch,
    out: Path,
    log: Callable[[str], None] | None = None,
    zoo: bool = True,
    artifact_dir: Path | None = None,
    reporter: Reporter = SILENT,
) -> tuple[Any, dict[str, Any]]:
    """Train, derive, evaluate and report a supernet search; writes the run folder.

    The steps: :func:`_train` (the supernet, its cost model and hardware term, the strategy's
    epochs, resumed from the checkpoint), :func:`_derive` (the candidates, the deployed
    network's report, the distribution's argmax), :func:`_score` (the candidates through the
    engine: fine-tuned, measured, recorded), then the run folder
    (:func:`hwnas.jobs.output.write_run`).

    ``reporter`` shows each long stage as a step (:mod:`hwnas.progress`): the cost model
    (measurements: blocks, kernels), supernet training (steps, with ETA), derivation
    (subnets scored), fine-tuning and measuring the candidates, the zoo; ``log`` gets one-off
    lines.

    Under torchrun (``RANK``, ``WORLD_SIZE`` set) every process calls this; they train the
    supernet together (:mod:`hwnas.distributed`), then rank 0 alone derives,
    evaluates and writes, and the others return at once.

    ``artifact_dir``: the study's artifact store (:mod:`hwnas.engine.publish`), where the run
    folder's files are uploaded (default ``artifacts/`` in the hwnas home).

    Returns:
        (the :class:`~hwnas.engine.loop.SearchResult` over the study, the summary), or
        (None, {}) on a rank other than 0.
    """
    from hwnas import distributed

    ranks = distributed.ranks_from_env()
    log = (log if ranks.main else None) or (lambda _m: None)
    reporter = reporter if ranks.main else SILENT
    started = time.time()
    with distributed.watched(ranks):  # a process lost: one line, not the backend's traceback
        t = _train(job, out, log, ranks, reporter)
    if t is None:  # a rank other than 0: rank 0 reports
        return None, {}
    d = _derive(job, t, log, reporter)
    result, evaluated, derived_record, described = _score(job, t, d, zoo, reporter)
    output = _output(job, t, d, result, evaluated, derived_record, described, started)
    return result, write_run(out, output, zoo, reporter, artifact_dir=artifact_dir)


@dataclass
class _Trained:
    """What :func:`_train` leaves: the trained supernet and what trained it."""

    net: Any
    strategy: Any
    cost: Any
    hw: Any
    history: list[dict[str, Any]]
    tdev: Any
    ckpt: Path


@dataclass
class _Derived:
    """What :func:`_derive` leaves: the candidates (the derived one first) and the reports."""

    evaluator: Any
    candidates: list[Any]
    derived: Any
    deployed: dict[str, Any] | None
    argmax_info: dict[str, Any]


TOO_SMALL = ("Output size is too small", "Kernel size can't be greater", "input image is smaller")
"""PyTorch's words when a layer's input map is smaller than its window (``--set image_size``
below what a supernet's strides allow)."""


def _train(
    job: PreparedSupernetSearch, out: Path, log: Callable[[str], None], ranks, reporter: Reporter
) -> _Trained | None:
    """Build the supernet, its cost model and hardware term, and train it (resuming from the
    run folder's checkpoint; one worker of the study trains, the others reuse it). None on a
    torchrun rank other than 0 once training is done."""
    import torch

    from hwnas import distributed
    from hwnas.supernet import build_supernet
    from hwnas.supernet.checkpoint import read_checkpoint
    from hwnas.supernet.cost import frozen_lut
    from hwnas.supernet.train import resolve_device

    s, space, data = job.settings, job.space, job.data
    torch.set_num_threads(max(1, s.job.threads))
    torch.manual_seed(s.seed)
    tdev = resolve_device(s.job.torch_device or None)
    if ranks.many:
        tdev = distributed.start(ranks, tdev)
        log(f"training across {ranks.world} processes ({tdev.type}, rank 0 writes)")
        crowded = distributed.crowded_cpus(tdev, max(1, s.job.threads))
        if crowded is not None:
            log(f"warning: {crowded}")
    # the study first: one made by another search since prepare() leaves no run folder
    study = load_study(s, job.storage, s.metric) if ranks.main else None
    if ranks.main:
        out.mkdir(parents=True, exist_ok=True)
    # one worker of the study trains; the others wait and reuse its checkpoint (turn.py)
    ckpt = out / "supernet.pt"
    turn = TrainingTurn.take(
        study,
        ckpt,
        _fingerprint(s),
        s.epochs,
        log,
        ranks.main,
    )
    state: Any = None
    if ranks.main:  # before any work: a file that is no safe checkpoint stops the search here
        try:
            state = read_checkpoint(ckpt, _fingerprint(s), log, _training)
        except HwnasError as exc:
            state = exc
    state = distributed.share(state, ranks)  # rank 0 reads it, every rank resumes from it
    net_cfg = supernet_config(s.options, space.name)
    net = build_supernet(space.name, data.num_classes, data.image_shape, net_cfg).to(tdev)
    if tdev.type == "cuda":
        net = net.to(memory_format=torch.channels_last)

    frozen = state.get("cost") if isinstance(state, dict) else None
    cost, hw = _hardware(job, net, ranks, log, reporter, frozen)
    strategy_opts = strategy_options(s.options, s.strategy)
    steps_per_epoch = int(np.ceil(len(data.train) / s.batch_size))
    for line in net.size_warnings():  # a decision whose candidates build one network
        log(f"warning: {line}")
    if s.batch_size > len(data.train):  # one step an epoch, of the whole split
        log(
            f"warning: --batch-size {s.batch_size} is more than the {len(data.train)} training "
            f"images: each epoch is one step of {len(data.train)}"
        )
    cls = SUPERNET_STRATEGIES.get(s.strategy)
    strategy = cls(net, hw, strategy_opts, s.epochs * steps_per_epoch, s.seed)
    for line in strategy.warnings():  # what it is known not to do well on this supernet
        log(f"warning: {line}")

    history: list[dict[str, Any]] = []
    start_epoch = 0
    if state is not None:
        net.load_state_dict(state["supernet"])
        strategy.load_state_dict(state["strategy"])
        start_epoch, history = state["epoch"], state["history"]
        log(f"resuming from {ckpt} after epoch {start_epoch}")
    if ranks.many:
        strategy.distribute(distributed.wrap(net, tdev), distributed.average)
    try:
        _epochs(job, net, strategy, history, start_epoch, tdev, ranks, ckpt, log, reporter,
                frozen_lut(cost))  # fmt: skip
    except RuntimeError as exc:  # a map pooled or convolved down to nothing: images too small
        first = (str(exc).strip().splitlines() or [""])[0]
        if not any(m in first for m in TOO_SMALL):
            raise
        raise HwnasError(
            f"images of {data.image_shape[-1]}x{data.image_shape[-2]} pixels are too small "
            f"for the {space.name} supernet's downsampling (set a larger --set image_size): "
            f"{first}"
        ) from None
    turn.done(ckpt, s.epochs)
    if ranks.many:  # rank 0 goes on alone: derivation, fine-tuning, scoring, the run folder
        # free the DDP wrapper while the process group and the interpreter are alive: freed at
        # interpreter exit (a reference cycle), its gloo work aborted rank 1 once ("terminate
        # called without an active exception", exit code -6)
        strategy.net = net
        gc.collect()
        distributed.stop()
        if not ranks.main:
            return None

    return _Trained(net, strategy, cost, hw, history, tdev, ckpt)


def _epochs(
    job, net, strategy, history, start_epoch, tdev, ranks, ckpt, log, reporter, cost=None
) -> None:
    """Train the supernet from ``start_epoch`` to the last epoch (a step per mini-batch on the
    reporter, a line and a checkpoint per epoch, with ``cost``, the frozen lookup table;
    ``history`` gets each epoch's statistics)."""
    from hwnas.supernet.checkpoint import save_checkpoint
    from hwnas.supernet.train import search_epoch

    s, data = job.settings, job.data
    steps_per_epoch = int(np.ceil(len(data.train) / s.batch_size))
    training = reporter.step("supernet training", total=s.epochs * steps_per_epoch, unit="steps")
    with training:
        training.update(start_epoch * steps_per_epoch)
        for epoch in range(start_epoch, s.epochs):
            training.update(status=f"epoch {epoch + 1}/{s.epochs}")
            st = search_epoch(
                strategy, data.train, data.val, s.batch_size, epoch, tdev, ranks,
                on_step=training.advance,
            )  # fmt: skip
            history.append(st.__dict__)
            # strategies without architecture steps (oneshot) have no hardware term to show
            hw_part = f", hw {st.hw_loss:.3f}" if np.isfinite(st.hw_loss) else ""
            log(
                f"epoch {epoch + 1}/{s.epochs}: loss {st.loss:.3f}{hw_part}, "
                f"{st.seconds:.1f} s, peak {st.peak_mib:.0f} MiB"
            )
            if ranks.main:
                save_checkpoint(
                    ckpt, _fingerprint(s), epoch + 1, net.state_dict(), strategy.state_dict(),
                    history, cost,
                )  # fmt: skip


def _hardware(
    job: PreparedSupernetSearch,
    net,
    ranks,
    log: Callable[[str], None],
    reporter,
    frozen: dict[str, Any] | None = None,
):
    """The supernet's cost model (made on rank 0, shared with the others) and its hardware
    term; returns (cost model, :class:`~hwnas.supernet.cost.HardwareLoss`). ``frozen``: the
    lookup table a checkpoint holds (:func:`~hwnas.supernet.cost.thaw_lut`): a resumed
    training steers with it, not with the one the store gives now.

    Raises:
        HwnasError: the cost model cannot be made, or FLOPs under a latency target.
    """
    import torch

    from hwnas import distributed
    from hwnas.supernet.cost import HardwareLoss, cost_model_for, thaw_lut

    s, space = job.settings, job.space
    cost: Any = None
    if ranks.main:  # measured once; the other ranks get rank 0's model (or its error)
        costing = f"cost model for {job.device.name} ({s.job.cost})"
        with reporter.step(costing, unit="measurements") as step:

            def cost_log(message: str) -> None:
                log(message)
                step.update(status=message)

            try:
                cost = cost_model_for(
                    net,
                    job.device,
                    job.profiler,
                    s.metric,
                    s.job.cost,
                    s.job.predictor or None,
                    log=cost_log,
                    on_measured=lambda label: step.advance(status=f"measured {label}"),
                    status=lambda message: step.update(status=message),
                )
            except HwnasError as exc:
                cost = exc
    cost = distributed.share(cost, ranks, {"space": space, "supernet": net})
    if not isinstance(cost, Exception) and frozen:
        cost = thaw_lut(cost, frozen)  # the table training began with
    if not isinstance(cost, Exception) and "truth_r2" in cost.fit:  # fit against measurements
        log(_fit_line(cost))
        if cost.fit["truth_r2"] < WEAK_FIT_R2:
            log(
                f"warning: the cost model explains little of the measured networks' latency "
                f"(R^2 {cost.fit['truth_r2']:.3f} < {WEAK_FIT_R2}): it steers the search "
                "weakly (a busy machine makes measurements noisy); the front's values are "
                "measured, judge by them"
            )
    if s.latency_target is not None and cost.metric == "mflops":
        raise HwnasError("--latency-target needs a latency cost model, not FLOPs (cost=flops)")
    uniform = [torch.full((n,), 1.0 / n) for n in net.sizes]
    hw = HardwareLoss(
        cost,
        weight=s.latency_weight,
        target=s.latency_target,
        strength=s.job.hw_strength,
        reference=float(cost.expected(uniform)),
        limit=s.max_latency if s.metric == "latency_ms" else None,
    )
    return cost, hw


def _derive(
    job: PreparedSupernetSearch, t: _Trained, log: Callable[[str], None], reporter: Reporter
) -> _Derived:
    """The strategy's candidates (the derived architecture first), the deployed network's
    predicted-vs-measured report, and the distribution's own argmax."""
    s, space = job.settings, job.space
    net, strategy, cost, tdev = t.net, t.strategy, t.cost, t.tdev
    evaluator = SubnetEvaluator(job, net, cost, tdev)
    with reporter.step(f"derivation ({s.strategy})", unit="subnets scored") as step:

        def inherited(arch) -> float:
            acc = evaluator.inherited_val_accuracy(arch)
            step.advance()
            return acc

        candidates = strategy.finish(inherited)
    derived = candidates[0]
    log(f"derived: {derived.text}")
    tied, decisions = strategy.near_ties()
    if decisions and 2 * tied >= decisions:  # the argmax of a distribution near its start
        log(
            f"warning: in {tied} of {decisions} decisions the two most probable choices are "
            "within 0.01 of each other: training barely moved the architecture distribution, "
            "so near-ties decided the derived architecture (train longer: --epochs)"
        )
    d = getattr(strategy, "derivation", None) or {}
    if d.get("within_tolerance") is False:  # said in summary.json alone before
        unit = UNITS.get(cost.metric, cost.metric)
        what = (
            f"within ±{d['tolerance']:.0%} of the target {d['target']:g} {unit}"
            if "target" in d
            else f"within --max-latency {d.get('limit', 0):g} {unit}"
        )
        log(
            f"warning: no architecture could be judged {what} for sure (the lookup table's "
            f"error margin is {d.get('lut_margin', 0):.1%}); the derived one is predicted at "
            f"{d['cost']:.4g} {unit}: its measured value below says where it is"
        )
    from hwnas.engine.kernel_cost import deployed_report

    deployed = deployed_report(cost, space, job.profiler, derived)
    if deployed is not None:
        lo, hi = deployed["interval_90_ms"]
        log(
            f"deployed network ({deployed['deployment']}): predicted "
            f"{deployed['predicted_ms']:.3f} ms, 90% interval {lo:.3f}-{hi:.3f} ms; measured "
            f"{deployed['measured_ms']:.3f} ms ("
            + ("inside" if deployed["inside"] else "OUTSIDE")
            + " the interval"
            + (
                "; too noisy to use, measured again for the front"
                if deployed.get("measured_flagged")
                else ""
            )
            + ")"
        )
    # the distribution's own argmax, before any target constraint (singlepath: the thresholds')
    argmax = net.arch(strategy.argmax_indices())
    argmax_info = {"arch": argmax.text, "predicted_cost": float(cost.cost(argmax))}
    if not job.device.runs_models:  # a recorded table, or imported values
        found, _, _ = evaluator._device_cost(argmax, None)
        argmax_info[s.metric], argmax_info["source"] = found.value, found.source
    return _Derived(evaluator, candidates, derived, deployed, argmax_info)


def _score(job: PreparedSupernetSearch, t: _Trained, d: _Derived, zoo: bool, reporter: Reporter):
    """The candidates through the engine like any strategy's proposals (claimed, fine-tuned
    and measured once, recorded; workers share the study); returns (the result, this run's
    evaluations by arch, the derived architecture's record, the candidates' descriptions).

    Raises:
        HwnasError: the derived architecture could not be measured.
    """
    s, space = job.settings, job.space
    evaluator, candidates, derived = d.evaluator, d.candidates, d.derived
    roles: dict[str, str] = {}
    for i, a in enumerate(candidates):
        roles.setdefault(a.text, "derived" if i == 0 else "candidate")
    evaluated: dict[str, dict[str, Any]] = {}

    scoring = reporter.step(
        f"fine-tuning and measuring candidates on {job.device.name}",
        total=len(roles),
        unit="subnets",
    )

    def score(arch) -> SubnetEvaluation:
        scoring.update(status=f"now {arch.text}")
        e = evaluator.evaluate(arch, role=roles[arch.text])
        evaluated[arch.text] = e
        scoring.advance(status="")
        return SubnetEvaluation.of(e, s.metric)

    # the candidates go through the engine like any strategy's proposals: claimed, scored
    # once, recorded, interrupted trials told, workers sharing the study
    with scoring:
        result = run_search(s, space, score, job.storage, proposals=candidates)
    records = result.records
    derived_record = next((r for r in reversed(records) if r.arch == derived.text), None)
    if derived_record is None:
        raise HwnasError(f"the derived architecture {derived.text} could not be measured")
    # result.best stays the engine's answer to best_rule over the front written to pareto.csv
    # (a candidate can beat the derived architecture on both axes); the derived one is
    # reported beside it as "derived"
    if zoo:  # zoo entries scored by another worker or an earlier run: their weights again
        # (the front and the derived architecture only: every worker fine-tuned every
        # candidate of the study again, the off-front ones for nothing)
        shipped = {r.arch for r in result.pareto} | {derived.text}
        for a in dict.fromkeys(candidates):
            if a.text not in evaluated and a.text in shipped:
                evaluated[a.text] = evaluator.evaluate(a, role=roles[a.text])
    by_arch = {r.arch: r for r in records}
    described = [
        _describe(evaluated.get(a.text), by_arch.get(a.text), s.metric)
        for a in dict.fromkeys(candidates)
    ]

    return result, evaluated, derived_record, described


def _output(job, t: _Trained, d: _Derived, result, evaluated, derived_record, described, started):
    """The supernet search's :class:`~hwnas.jobs.output.RunOutput`: its zoo of fine-tuned
    subnets (the front and the derived architecture) and its summary fields."""
    s, space, data = job.settings, job.space, job.data
    net, strategy, hw, history, tdev, ckpt = t.net, t.strategy, t.hw, t.history, t.tdev, t.ckpt
    from hwnas.distributed import ranks_from_env

    ranks = ranks_from_env()
    deployed, argmax_info = d.deployed, d.argmax_info
    trained = dict(evaluated)
    zoo_records = list(result.pareto)
    if derived_record not in zoo_records:
        zoo_records.append(derived_record)
    zoo_records = [r for r in zoo_records if r.arch in trained]
    store = job.profiler.store
    best = _best_summary(result.best, s, data) if result.best is not None else None
    rule = _derived_rule(s, getattr(strategy, "derivation", None))
    derived = {**_best_summary(derived_record, s, data), "rule": rule}

    def summary(zoo_models: int, zoo_s: float) -> dict[str, Any]:
        return {
            "best": best,
            "derived": derived,
            # the data the subnets were trained and scored on; table_dataset: the benchmark
            # table's dataset (table_accuracy, recorded latencies), for a space with a table
            "settings": {  # no budget: a table search's number of queries, none here
                **{k: v for k, v in s.as_dict().items() if k != "budget"},
                "dataset": data.name,
                **({"table_dataset": s.dataset} if ability(space, TabulatedSpace) else {}),
            },
            "device": {
                "name": job.device.name,
                "kind": job.device.kind,
                "description": job.device.description,
            },
            "storage": job.storage_url,
            "measurement_store": str(store.path) if store is not None else None,
            "measurements": {
                "taken": job.profiler.counts.taken,
                "reused_from_store": job.profiler.counts.reused,
                "read_from_table": job.profiler.counts.read,
            },
            "data": data.describe(),
            "supernet": net.describe(),
            "strategy": strategy.describe(),
            "hardware_term": {**hw.describe(), "applied": _hw_applied(hw, strategy)},
            "epochs": history,
            "torch_device": str(tdev),
            "processes": ranks.world,  # batch norm normalised each process's shard
            "checkpoint": str(ckpt),
            "distribution_argmax": argmax_info,
            **({"deployed": deployed} if deployed is not None else {}),
            "candidates": [d for d in described if d is not None],
            "zoo_models": zoo_models,
            "zoo_weights": "trained",  # the supernet's weights, fine-tuned per subnet
            "zoo_s": zoo_s,
        }

    output = RunOutput(
        result,
        space,
        job.device.name,
        data.num_classes,
        job.storage,
        job.settings.study,
        started,
        summary,
        zoo_records=zoo_records,
        others={},
        trained={
            a: {
                "model": e["model"],
                "input_shape": (1, *e["input_shape"]),
                "num_classes": data.num_classes,
                "dataset": data.name,
                "weights": e["weights_note"],
                "data": data,
            }
            for a, e in trained.items()
        },
        accuracy_label=_accuracy_axis(s, data),
        close=store.close if store is not None else None,
    )
    return output




WEAK_FIT_R2 = 0.5
"""Below this R^2 against the networks measured on the device, a supernet search's cost model
is said to steer weakly (a ViT space on a loaded 2-core machine: 0.286, said nowhere)."""


def _fit_line(cost) -> str:
    """One line on a cost model's fit against networks measured on the device."""
    f = cost.fit
    parts = [f"cost model {cost.source}"]
    if "r2" in f:
        parts.append(f"table R^2 {f['r2']:.3f} on held-out predictions")
    parts.append(
        f"R^2 {f['truth_r2']:.3f} against {f.get('truth_networks', '?')} networks measured at "
        f"{f.get('deployment', 'deployment size')}"
    )
    if "correction" in f:
        parts.append(str(f["correction"]))
    return "; ".join(parts)


def _accuracy_axis(s: SupernetSettings, data) -> str:
    """The plot's accuracy axis: validation accuracy, or the user's function's."""
    if s.accuracy is None:
        return f"{data.name} validation accuracy (%)"
    return f"accuracy (%) by {s.accuracy.rsplit(':', 1)[-1]} on {data.name}"


def _best_summary(r, s: SupernetSettings, data) -> dict[str, Any]:
    """A scored subnet in ``summary.json``: accuracy and cost with their sources (``best``,
    ``derived``)."""
    out: dict[str, Any] = {"arch": r.arch, "trial": r.number}
    out["accuracy"] = r.accuracy
    out["accuracy_source"] = r.attrs.get("accuracy_source", "")  # as a table search's best
    out["accuracy_label"] = out["accuracy_source"]
    for m in OBJECTIVES.values():
        if m in r.costs:
            out[m] = r.costs[m].value
            out[f"{m}_source"] = r.costs[m].source
        for k in (f"trained_subnet_{m}", f"trained_subnet_{m}_source"):  # the proxy's own
            if k in r.attrs:
                out[k] = r.attrs[k]
    for k in (
        "predicted_cost",
        "predicted_cost_source",
        "inherited_test_accuracy",
        "test_accuracy",
        "test_accuracy_source",
        "table_accuracy",
        "table_accuracy_label",
    ):
        if k in r.attrs:
            out[k] = r.attrs[k]
    return out


def _derived_rule(s: SupernetSettings, derivation: dict[str, Any] | None = None) -> str:
    """How the derived architecture was chosen (the ``rule`` of ``derived`` in the summary):
    the strategy and its hardware setting, and the derivation's own rule where it judged a
    limit (``strategy.derivation``: the most probable architecture within --max-latency)."""
    d = derivation or {}
    what, unit = s.metric.split("_")[0], UNITS[s.metric]
    return (
        f"architecture derived by {s.strategy}"
        + (
            f" for the {what} target {s.latency_target:g} {unit}"
            if s.latency_target is not None
            else ""
        )
        + (f" with {what} weight {s.latency_weight:g}" if s.latency_weight is not None else "")
        + (f": {d['rule']} {d['limit']:g} {unit}" if "limit" in d else "")
    )


@dataclass(frozen=True)
class SubnetEvaluation(Evaluation):
    """A fine-tuned subnet's evaluation, with what only supernet searches know (its role,
    inherited accuracy, predicted cost, weights) as trial attributes."""

    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, e: dict[str, Any], metric: str) -> SubnetEvaluation:
        """From :meth:`SubnetEvaluator.evaluate`'s dict."""
        extra = {
            k: v
            for k, v in e.items()
            if k not in ("model", "arch", "input_shape", "accuracy", "accuracy_source", "cost")
            and k not in (metric, f"{metric}_source", "model_hash")
        }
        costs = {metric: e["cost"]}
        return cls(e["arch"], e["accuracy"], e["accuracy_source"], costs, e["model_hash"], extra)

    def attrs(self) -> dict[str, object]:
        return {**super().attrs(), **self.extra}


def _describe(e: dict[str, Any] | None, record, metric: str) -> dict[str, Any] | None:
    """A candidate in ``summary.json``: from this run's evaluation, else from its trial."""
    if e is not None:
        kept = {k: v for k, v in e.items() if k not in ("model", "arch", "cost")}
        return kept | {"arch": e["arch"].text}
    if record is None:  # failed
        return None
    return {**record.attrs, "accuracy": record.accuracy, metric: record.costs[metric].value}


class SubnetEvaluator:
    """Scores subnets of a trained supernet: inherited-weight accuracy (for one-shot search),
    and, for handed-out candidates, fine-tuned validation and test accuracy and device cost."""

    def __init__(self, job: PreparedSupernetSearch, net, cost, tdev):
        from hwnas.engine.evaluate import get_accuracy

        self.job, self.net, self.cost, self.tdev = job, net, cost, tdev
        s = job.settings
        self.metric = s.metric
        # the user's accuracy function scores the fine-tuned candidates (the supernet's own
        # validation accuracy still ranks subnets during a one-shot search's evolution)
        self.fn = get_accuracy(s.accuracy) if s.accuracy is not None else None

    def inherited_val_accuracy(self, arch) -> float:
        from hwnas.loops import accuracy, recalibrate_bn

        net, data = self.net, self.job.data
        path = net.path_of(arch)
        path = [type(c)(c.weights.to(self.tdev), c.active) for c in path]
        recalibrate_bn(lambda x: net(x, path), net, data.train, max_batches=4, device=self.tdev)
        acc = accuracy(lambda x: net(x, path), data.val, device=self.tdev)
        net.train()
        return acc

    def evaluate(self, arch, role: str) -> dict[str, Any]:
        import torch

        from hwnas.loops import accuracy, finetune, recalibrate_bn, resized_forward

        s, data, space = self.job.settings, self.job.data, self.job.space
        model = self.net.extract(arch).to(self.tdev)
        shape = tuple(self.net.input_shape(arch))
        side = shape[-1]
        fwd = resized_forward(model, side)
        recalibrate_bn(fwd, model, data.train, device=self.tdev)
        inherited = accuracy(fwd, data.test, device=self.tdev)
        # fine-tuned on the training split and scored on the validation split: the front and
        # `best` are chosen on it; the test split only reports (choosing the best of several
        # candidates by their test accuracy would bias the accuracy reported for it)
        finetune(
            model,
            data.train,
            s.finetune_epochs,
            lr=s.job.finetune_lr,
            batch_size=s.batch_size,
            seed=s.seed,
            device=self.tdev,
            resize=side,
        )
        acc = accuracy(fwd, data.val, device=self.tdev)
        test = accuracy(fwd, data.test, device=self.tdev)
        model = model.cpu().eval()
        tuned = f"inherited supernet weights + {s.finetune_epochs} fine-tune epochs"
        source = f"measured:{data.name}:validation split ({len(data.val)} images), {tuned}"
        if self.fn is not None:
            acc = self.fn(model, arch, data)
            source = (
                f"function:{self.fn.label} on inherited supernet weights + "  # type: ignore[attr-defined]
                f"{s.finetune_epochs} fine-tune epochs on {data.name}"
            )
            model.eval()
        out: dict[str, Any] = {
            "arch": arch,
            "role": role,
            "accuracy": acc,
            "accuracy_source": source,
            "inherited_test_accuracy": inherited,
            "test_accuracy": test,
            "test_accuracy_source": (
                f"measured:{data.name}:test split ({len(data.test)} images), {tuned}; never "
                "used to choose"
            ),
            "model": model,
            "input_shape": shape,
            "predicted_cost": float(self.cost.cost(arch)),
            "predicted_cost_source": f"{self.cost.source} ({self.cost.metric})",
            "weights_note": (
                f"supernet ({s.strategy}, {s.epochs} epochs) on {data.name}, inherited, "
                f"batch norm recalibrated, fine-tuned {s.finetune_epochs} epochs; supernet "
                f"config {json.dumps(self.net.config, sort_keys=True)}"
            ),
        }
        cost, model_hash, trained = self._device_cost(arch, copy.deepcopy(model))
        out[self.metric] = cost.value
        out[f"{self.metric}_source"] = cost.source
        if trained is not None:  # the zoo's ONNX model: the trained subnet at training size
            out[f"trained_subnet_{self.metric}"] = trained.value
            out[f"trained_subnet_{self.metric}_source"] = trained.source
        out["model_hash"] = model_hash
        out["cost"] = cost
        if ability(space, TabulatedSpace) is not None:
            ds = s.dataset
            out["table_accuracy"] = float(space.table_accuracy(ds)[space.index(arch)])
            out["table_accuracy_label"] = (
                f"{space.accuracy_source(ds)} (NAS-Bench-201 table: this cell in the benchmark's "
                f"network trained 200 epochs on {ds}, not on {data.name})"
            )
        torch.set_grad_enabled(True)
        return out

    def _table_guess(self, arch) -> CostRecord:
        """The lookup table's prediction (ms or mJ) of an architecture the device's recorded
        table lacks, what derivation judges it by (:meth:`hwnas.supernet.cost.MultilinearLUT.
        judged`), with the table's error margin as its interval, labelled :data:`NOT_IN_TABLE`.
        A Pi 5 table measured one NAS-Bench-201 cell per isomorphism class and has no value for
        the others; its class's value is not theirs (docs/benchmarks.md), so it is not used."""
        value = float(self.cost.cost(arch))
        margin = min(float(getattr(self.cost, "margin", 0.0)), 0.9)
        source = f"predicted:{self.cost.source} {NOT_IN_TABLE}"
        interval = (value * (1 - margin), value / (1 - margin))
        return CostRecord(self.metric, value, source, interval=interval)

    def _imported_cost(self, arch) -> tuple[CostRecord, str, None]:
        """Cost on a device that holds only the values it was given (``hwnas measure
        import``): the architecture's imported value where it has one (its network as the
        predicted cost model's calibration reads them), else the cost model's prediction: its
        predictor's, with the 90% interval, where the lookup table was fitted on one, else the
        lookup table's (labelled ``predicted:``)."""
        from hwnas.errors import DeviceUnavailableError
        from hwnas.predictors.featurize import get_featurizer

        space, profiler = self.job.space, self.job.profiler
        try:
            dataset = get_featurizer(space.name).dataset
        except HwnasError:  # a space without a predictor's features: the search's dataset
            dataset = self.job.settings.dataset
        wl = arch_workload(space, arch, dataset)
        try:
            return CostRecord.of_measurement(profiler.measure(wl, self.metric)), wl.model_hash, None
        except (DeviceUnavailableError, UnrecordedError):  # not imported: predicted
            pass
        truth = getattr(self.cost, "truth", None)
        if truth is not None:
            mean, std = truth.predict([arch])
            return CostRecord.predicted(self.metric, mean[0], std[0], truth.source), "", None
        value, source = float(self.cost.cost(arch)), f"predicted:{self.cost.source}"
        return CostRecord.predicted(self.metric, value, None, source), "", None

    def _device_cost(self, arch, model) -> tuple[CostRecord, str, CostRecord | None]:
        """Cost on the device: its table where it has the architecture (else the lookup table's
        prediction, :meth:`_table_guess`); on a live device a
        measurement of the deployed network where the cost model works at deployment size (a
        declared space's kernel-level model: the limit steers there), else of the trained
        subnet; on a device of imported values, :meth:`_imported_cost`. Returns (the cost, the
        trained subnet's model hash or the table network's, the trained subnet's own
        measurement where the cost is the deployed network's)."""
        from hwnas.engine.kernel_cost import deployment_of
        from hwnas.supernet.cost import subnet_workload

        device, profiler, space = self.job.device, self.job.profiler, self.job.space
        s = self.job.settings
        if not device.runs_models and space.name not in device.table_spaces:
            return self._imported_cost(arch)
        if not device.runs_models:  # a recorded table
            try:
                space.index(arch)
            except HwnasError:  # outside a sampled table's index (OFA's 5,000)
                return self._table_guess(arch), "", None
            wl = arch_workload(space, arch, s.dataset)
            try:
                found = CostRecord.of_measurement(profiler.measure(wl, self.metric))
            except UnrecordedError:  # a gap of the table (a Pi 5's: 6,466 of 15,625 cells)
                return self._table_guess(arch), "", None
            return found, wl.model_hash, None
        wl = subnet_workload(self.net, arch, model=model)
        target = precision_target(device)
        cost = CostRecord.of_measurement(profiler.measure(wl, self.metric), target)
        source = f"{cost.source}:trained-subnet{list(wl.input_shape)}"
        trained = dataclasses.replace(cost, source=source)
        if deployment_of(self.cost) is None:
            return trained, wl.model_hash, None
        # the cost model, and so the limit, works at deployment size: the front's latency is
        # the deployed network's too (the trained subnet is a reduced proxy of it), measured
        dw = arch_workload(space, arch, space.reference_dataset)
        cost = CostRecord.of_measurement(profiler.measure(dw, self.metric), target)
        source = f"{cost.source}:deployed-network{list(dw.input_shape)}"
        return dataclasses.replace(cost, source=source), wl.model_hash, trained


def _hw_applied(hw: Any, strategy: Any) -> str:
    """Where a supernet search's hardware term and ``--max-latency`` acted, for
    ``summary.json``: training, where the strategy trains its architecture distribution on the
    term's expected cost (a target or weight); derivation as its rule says
    (``strategy.derivation``: constrained by a target or limit, or the argmax alone, which
    neither enters)."""
    steered = hw.target is not None or bool(hw.weight)
    d = getattr(strategy, "derivation", None) or {}
    rule = d.get("rule", getattr(strategy, "argmax_rule", ""))
    constrained = "target" in d or "limit" in d
    if not strategy.hw_in_training:
        if steered:
            return (
                f"derivation only: {strategy.name} trains every subnet alike, and the term "
                "chooses among the subnets its search evaluated"
            )
        if constrained:
            return f"derivation only: {rule}"
        return "nowhere: no --latency-target, --latency-weight or --max-latency"
    parts = ["training (the architecture distribution's expected cost)"] if steered else []
    if constrained:
        parts.append(f"derivation ({rule})")
    if not parts:
        return "nowhere: no --latency-target, --latency-weight or --max-latency"
    text = " and ".join(parts)
    return text if constrained else f"{text}; not derivation ({rule})"
