"""Typed ``--set KEY=VALUE`` settings of supernet searches, declared once.

Each supernet strategy, each space's supernet and the job declare their settings as
:class:`Setting` records (type, default, allowed range or values, one line of help). One
function, :func:`parse_options`, reads ``--set`` values against the settings that apply to the
chosen strategy and space: values are converted to the declared type and range-checked, and an
unknown key, a key that a command-line option sets (``batch_size`` -> ``--batch-size``), a key
the chosen strategy or space does not read, or a bad value is refused in one line that lists the
valid keys or values. The ``--set`` help text is generated from the same declarations.

Importing this module imports neither torch nor any strategy.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from hwnas.errors import HwnasError
from hwnas.limits import MAX_LEARNING_RATE, MAX_THREADS

MAX_WIDTH = 8.0
"""Largest width multiplier of a supernet (8x the declared widths)."""


@dataclass(frozen=True)
class Setting:
    """One ``--set`` key.

    Attributes:
        key: the name after ``--set``.
        type: int, float or str.
        default: the value used when the key is not given.
        help: one line: what it sets, with its unit.
        choices: the allowed values (None: any of the type within the range).
        low: smallest allowed value (numbers), or None.
        high: largest allowed value (numbers), or None.
        low_open: ``low`` itself is not allowed (a value must exceed it).
        strategies: the only strategies that read it (None: every strategy).
        pattern: a regular expression a string value must match whole, and
            ``pattern_help``, what it means for the user.
    """

    key: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    strategies: tuple[str, ...] | None = None
    pattern: str | None = None
    pattern_help: str = ""

    def __post_init__(self) -> None:
        """A default of the declared type (an int default of a float setting becomes a float),
        so that a setting is typed whether given or not: no caller casts it again."""
        if self.type is float and type(self.default) is int:
            object.__setattr__(self, "default", float(self.default))
        elif self.default is not None and not isinstance(self.default, self.type):
            kind = self.type.__name__
            raise TypeError(f"setting {self.key}: default {self.default!r} is not {kind}")

    def parse(self, value: Any) -> Any:
        """``value`` (a string from the command line, or a typed value) as this setting's type.

        Raises:
            HwnasError: not of the type, outside the range, or not one of the choices.
        """
        try:
            if self.type is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            out = _as_flag(value) if self.type is bool else self.type(value)
        except (TypeError, ValueError):
            kind = {int: "an integer", float: "a number", str: "a string", bool: "0 or 1"}[
                self.type
            ]
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be {kind}") from None
        if self.type is float and not math.isfinite(out):  # nan would pass every bound
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be a finite number")
        if self.pattern is not None and not re.fullmatch(self.pattern, str(out)):
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be {self.pattern_help}")
        if self.choices is not None and out not in self.choices:
            allowed = ", ".join(map(str, self.choices))
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be one of {allowed}")
        if self.low is not None and (out < self.low or (self.low_open and out == self.low)):
            bound = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be {bound}")
        if self.high is not None and out > self.high:
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be <= {self.high:g}")
        return out


FLAG_VALUES = {"0": False, "1": True, "false": False, "true": True, "no": False, "yes": True}
"""How an on/off setting may be written (``--set nesterov=1``), case aside."""


def _as_flag(value: Any) -> bool:
    """``value`` (a bool, 0 or 1, or a word of :data:`FLAG_VALUES`) as a bool.

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    out = FLAG_VALUES.get(str(value).strip().lower())
    if out is None:
        raise ValueError(value)
    return out


def _flag(key: str, default: bool, help: str) -> Setting:
    """An on/off setting: typed bool, written 0 or 1 (or true/false, yes/no)."""
    return Setting(key, bool, default, help)


def _positive(key: str, default: float, help: str, high: float | None = None) -> Setting:
    return Setting(key, float, default, help, low=0.0, high=high, low_open=True)


def _rate(key: str, default: float, help: str) -> Setting:
    """A learning rate: positive, at most :data:`hwnas.limits.MAX_LEARNING_RATE`."""
    return _positive(key, default, help, high=MAX_LEARNING_RATE)


HW_FORM_NAMES = ("additive", "fbnet", "proxyless")
"""Forms of the weight-mode hardware term (:data:`hwnas.supernet.cost.HW_FORMS`)."""

BILEVEL = ("darts", "gdas", "fbnet", "proxyless")
"""Strategies that alternate weight steps with architecture steps of the base class's Adam
(:meth:`~hwnas.supernet.strategies.base.SupernetStrategy.arch_step`, its ``warming_up``):
they read ``warmup`` and ``arch_weight_decay`` (Single-Path's own Adam has no weight decay and
it trains weights and thresholds together from the first step)."""

ARCH = (*BILEVEL, "singlepath")
"""Strategies with architecture parameters, trained on the hardware term
(:meth:`~hwnas.supernet.strategies.base.SupernetStrategy.hw_objective`): they read
``arch_lr``, ``arch_beta1``, ``hw_form``, ``hw_alpha`` and ``hw_strength``; ``oneshot`` has
none and uses the term only to choose among the subnets it evaluated."""

STRATEGY_BASE = (
    _rate("lr", 0.025, "weight SGD learning rate at the start (cosine-annealed to lr_min)"),
    Setting("lr_min", float, 0.001, "weight SGD learning rate at the end", low=0.0),
    Setting("momentum", float, 0.9, "weight SGD momentum", low=0.0, high=0.999),
    _flag("nesterov", False, "Nesterov momentum for the weight SGD (0 or 1)"),
    Setting("weight_decay", float, 3e-4, "weight decay of the supernet weights", low=0.0),
    dataclasses.replace(
        _rate("arch_lr", 3e-4, "Adam learning rate of the architecture parameters"),
        strategies=ARCH,
    ),
    Setting(
        "arch_beta1",
        float,
        0.5,
        "Adam beta1 of the architecture parameters",
        low=0,
        high=0.999,
        strategies=ARCH,
    ),
    Setting(
        "arch_weight_decay",
        float,
        1e-3,
        "weight decay of architecture parameters",
        low=0,
        strategies=BILEVEL,
    ),
    _positive("grad_clip", 5.0, "gradient-norm clip of the weights"),
    Setting(
        "warmup",
        float,
        0.0,
        "share of steps training weights only",
        low=0.0,
        high=0.95,
        strategies=BILEVEL,
    ),
    Setting(
        "target_tolerance",
        float,
        0.05,
        "accepted relative miss of --latency-target",
        low=0.0,
        high=1.0,
        low_open=True,
    ),  # fmt: skip
    Setting(
        "hw_form",
        str,
        "additive",
        "form of the --latency-weight term: additive W*E/E_uniform; fbnet CE*alpha*ln(E)^W; "
        "proxyless alpha*CE*(ln E/ln E_uniform)^W",
        choices=HW_FORM_NAMES,
        strategies=ARCH,
    ),
    dataclasses.replace(
        _positive("hw_alpha", 0.2, "alpha of the multiplicative hardware terms (fbnet, proxyless)"),
        strategies=ARCH,
    ),
    Setting(
        "preset",
        str,
        "paper",
        "named defaults: paper (each method's published settings) or small-data (hwnas's "
        "earlier settings: lr 0.05 Nesterov, arch_lr 3e-3 (singlepath 0.01), 20% warm-up, "
        "additive term; fbnet tau_min 0.2, proxyless arch_every 1)",
        choices=("paper", "small-data"),
    ),
)
"""Settings of the supernet strategies (:class:`hwnas.supernet.strategies.base.
SupernetStrategy`): each read by every strategy, or by those its ``strategies`` names
(:data:`ARCH`, :data:`BILEVEL`). The defaults are DARTS's (Liu et al., ICLR 2019; quark0/darts
``train_search.py`` and ``architect.py``): weights SGD 0.025 cosine to 0.001, momentum 0.9,
weight decay 3e-4; architecture Adam 3e-4, betas (0.5, 0.999), weight decay 1e-3; no warm-up.
Each strategy's own settings replace them with its paper's values."""

_TODAY = (  # hwnas's weight settings before the paper defaults (SPOS, Single-Path keep them)
    _rate("lr", 0.05, "weight SGD learning rate at the start (cosine-annealed to lr_min)"),
    Setting("lr_min", float, 0.0, "weight SGD learning rate at the end", low=0.0),
    _flag("nesterov", True, "Nesterov momentum for the weight SGD (0 or 1)"),
)

STRATEGY_OWN: dict[str, tuple[Setting, ...]] = {
    "darts": (Setting("order", int, 1, "DARTS approximation order", choices=(1, 2)),),
    "gdas": (  # D-X-Y/AutoDL-Projects: GDAS.sh, configs/nas-benchmark/algos/GDAS.config
        _positive("tau_max", 10.0, "Gumbel-softmax temperature at the start"),
        _positive("tau_min", 0.1, "Gumbel-softmax temperature at the end"),
        Setting("weight_decay", float, 5e-4, "weight decay of the supernet weights", low=0.0),
        _flag("nesterov", True, "Nesterov momentum for the weight SGD (0 or 1)"),
    ),
    "fbnet": (  # Wu et al., CVPR 2019, section 4.1
        _positive("tau_max", 5.0, "Gumbel-softmax temperature at the start"),
        _positive("tau_min", 0.087, "Gumbel-softmax temperature at the end (5 * exp(-0.045 * 90))"),
        _rate("lr", 0.1, "weight SGD learning rate at the start (cosine-annealed to lr_min)"),
        Setting("lr_min", float, 0.0, "weight SGD learning rate at the end", low=0.0),
        Setting("weight_decay", float, 1e-4, "weight decay of the supernet weights", low=0.0),
        _rate("arch_lr", 0.01, "Adam learning rate of the architecture parameters"),
        Setting(
            "arch_beta1", float, 0.9, "Adam beta1 of the architecture parameters", low=0, high=0.999
        ),
        Setting("arch_weight_decay", float, 5e-4, "weight decay of architecture parameters", low=0),
        Setting(
            "warmup", float, 10 / 90, "share of steps training weights only", low=0.0, high=0.95
        ),
        Setting(
            "hw_form", str, "fbnet", "form of the --latency-weight term", choices=HW_FORM_NAMES
        ),
    ),
    "proxyless": (  # mit-han-lab/proxylessnas search/imagenet_arch_search.py, nas_manager.py
        Setting("lr_min", float, 0.0, "weight SGD learning rate at the end", low=0.0),
        _flag("nesterov", True, "Nesterov momentum for the weight SGD (0 or 1)"),
        Setting("weight_decay", float, 4e-5, "weight decay of the supernet weights", low=0.0),
        _rate("arch_lr", 1e-3, "Adam learning rate of the architecture parameters"),
        Setting(
            "arch_beta1", float, 0.0, "Adam beta1 of the architecture parameters", low=0, high=0.999
        ),
        Setting("arch_weight_decay", float, 0.0, "weight decay of architecture parameters", low=0),
        Setting("warmup", float, 0.25, "share of steps training weights only", low=0.0, high=0.95),
        Setting(
            "hw_form", str, "proxyless", "form of the --latency-weight term", choices=HW_FORM_NAMES
        ),
        Setting("arch_every", int, 5, "weight steps per architecture step", low=1, high=10**4),
    ),
    "singlepath": (
        *_TODAY,
        Setting("margin", float, 1.0, "initial threshold margin of the superkernel", low=0.0),
        _positive("sigmoid_tau", 0.5, "temperature of the threshold sigmoid"),
        _rate("arch_lr", 0.01, "Adam learning rate of the thresholds"),
    ),
    "oneshot": (
        *_TODAY,
        Setting("sampling", str, "uniform", "path sampling", choices=("uniform", "sandwich")),
        Setting(
            "evolution_trials", int, 60, "NSGA-II subnets scored after training", low=1, high=10**5
        ),
        Setting("population", int, 20, "NSGA-II population", low=2, high=10**4),
        Setting(
            "candidates", int, 4, "Pareto subnets handed out for fine-tuning", low=1, high=1000
        ),
    ),
}
"""Each strategy's own settings (a key also in :data:`STRATEGY_BASE` replaces its default):
the values of its paper and official code (GDAS: AutoDL-Projects' NAS-Bench-201 GDAS; FBNet:
the paper's section 4.1, its 90-epoch temperature schedule 5.0 * 0.956^epoch compressed to the
run; ProxylessNAS: mit-han-lab/proxylessnas, 40 warm-up of 160 epochs, an architecture step
every 5 weight steps)."""

PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "paper": {},
    "small-data": {
        "*": {
            "lr": 0.05,
            "lr_min": 0.0,
            "nesterov": True,
            "weight_decay": 3e-4,
            "arch_lr": 3e-3,
            "arch_beta1": 0.5,
            "arch_weight_decay": 1e-3,
            "warmup": 0.2,
            "hw_form": "additive",
        },
        "fbnet": {"tau_min": 0.2},
        "proxyless": {"arch_every": 1},
        "singlepath": {"arch_lr": 0.01},
    },
}
"""Named sets of defaults (``--set preset=NAME``): ``paper`` is the declared defaults;
``small-data`` is hwnas's settings before they followed the papers (``"*"``: every strategy,
then the strategy's own entry). Explicit ``--set`` values override a preset."""

SUPERNET_SETTINGS: dict[str, tuple[Setting, ...]] = {
    "nasbench201": (
        Setting("channels", int, 8, "channels of the first stage", low=1, high=1024),
        Setting("cells", int, 1, "cells per stage", low=1, high=64),
        Setting(
            "partial_channels",
            int,
            1,
            "PC-DARTS: 1/K of each edge's channels go through the mixed operation, the rest "
            "bypass it, then a channel shuffle; with edge normalisation (1: off)",
            low=1,
            high=64,
            strategies=("darts", "gdas"),
        ),
    ),
    "fbnet": (
        _positive("width", 0.25, "width multiplier of every layer", high=MAX_WIDTH),
        Setting("profile", str, "cifar100", "macro skeleton", choices=("cifar100", "imagenet")),
    ),
    "ofa": (
        _positive("width", 0.5, "width multiplier of every layer", high=MAX_WIDTH),
        _positive("resolution_scale", 0.25, "input resolution scale", high=4.0),
    ),
    "declared": (
        _positive("width", 0.25, "width multiplier of every layer", high=MAX_WIDTH),
        _positive(
            "resolution_scale", 0.25, "input resolution scale (spaces with resolution)", high=4.0
        ),
        Setting("profile", str, "", "dataset skeleton (default: the smallest images)"),
    ),
    "module": (),
}
"""Size settings of each space's supernet (defaults sized for a CPU); ``declared`` is the
supernet of every space written in the space language; ``module`` (spaces made from a PyTorch
module: the module as written) has none."""


def space_settings(space: str) -> tuple[Setting, ...]:
    """The size settings of ``space``'s supernet (none for an unknown space)."""
    if space in SUPERNET_SETTINGS:
        return SUPERNET_SETTINGS[space]
    from hwnas.errors import HwnasError
    from hwnas.spaces import get_space

    try:
        return SUPERNET_SETTINGS.get(get_space(space).supernet_name, ())
    except HwnasError:
        return ()


JOB_SETTINGS = (
    Setting(
        "cost",
        str,
        "auto",
        "cost model",
        choices=("auto", "table", "measured", "flops", "predicted", "kernel"),
    ),  # fmt: skip
    Setting("predictor", str, "", "predictor artifact for cost=predicted (default: the space's)"),
    _rate("finetune_lr", 0.02, "learning rate of fine-tuning extracted subnets"),
    Setting(
        "hw_strength",
        float,
        2.0,
        "target-mode strength of the hardware term",
        low=0.0,
        strategies=ARCH,
    ),
    Setting(
        "limit",
        int,
        0,
        "use at most this many images, split into train / validation / "
        "test (a CIFAR folder's own test split cut to a quarter of it; 0: all)",
        low=0,
    ),
    Setting("threads", int, 1, "torch CPU threads", low=1, high=MAX_THREADS),
    Setting(
        "torch_device",
        str,
        "",
        "torch device (default: cuda if available, else cpu)",
        pattern=r"(cpu|cuda(:\d+)?|mps)?",
        pattern_help="cpu, cuda, cuda:N or mps",
    ),
    Setting(
        "image_size", int, 0, "image side in pixels (0: the space's default)", low=0, high=4096
    ),
    Setting("data_seed", int, 0, "seed of the train/validation/test split", low=0, high=2**32 - 1),
)
"""Settings the job reads (cost model, fine-tuning, data, threads)."""

CLI_OPTIONS = {
    "batch_size": "--batch-size",
    "finetune_epochs": "--finetune-epochs",
    "epochs": "--epochs",
    "latency_target": "--latency-target",
    "latency_weight": "--latency-weight",
    "seed": "--seed",
    "dataset": "--dataset",
    "data": "--data",
    "max_latency": "--max-latency",
}
"""Keys that are command-line options, not ``--set`` settings."""


def reads(setting: Setting, strategy: str) -> bool:
    """Whether ``strategy`` reads ``setting`` (its ``strategies``, None: every strategy)."""
    return setting.strategies is None or strategy in setting.strategies


def strategy_settings(strategy: str) -> dict[str, Setting]:
    """The settings a supernet strategy reads (base, then its own), by key."""
    out = {s.key: s for s in STRATEGY_BASE if reads(s, strategy)}
    out.update({s.key: s for s in STRATEGY_OWN.get(strategy, ())})
    return out


def own_defaults(strategy: str) -> dict[str, Any]:
    """Defaults of the settings ``strategy`` declares itself (see :data:`STRATEGY_OWN`)."""
    return {s.key: s.default for s in STRATEGY_OWN[strategy]}


def strategy_defaults(strategy: str, preset: str | None = None) -> dict[str, Any]:
    """Default value of every setting of ``strategy`` under ``preset`` (default: the declared
    ``preset``): the declared defaults, then the preset's values for every strategy, then its
    values for ``strategy``.

    Raises:
        HwnasError: an unknown preset.
    """
    settings = strategy_settings(strategy)
    out = {k: s.default for k, s in settings.items()}
    preset = preset or out["preset"]
    table = PRESETS.get(preset)
    if table is None:
        raise HwnasError(f"unknown preset '{preset}'; known: {', '.join(PRESETS)}")
    for part in ("*", strategy):
        out.update({k: v for k, v in table.get(part, {}).items() if k in settings})
    out["preset"] = preset
    return out


def record_type(name: str, settings: Iterable[Setting]) -> type:
    """A frozen dataclass with one field per setting, of the setting's type and default: the
    typed record parsed settings are read from (``options.lr``, never ``options["lr"]``)."""
    fields = [(s.key, s.type, dataclasses.field(default=s.default)) for s in settings]
    cls = dataclasses.make_dataclass(name, fields, frozen=True)
    cls.__module__ = __name__
    return cls


@functools.cache
def options_type(strategy: str) -> type:
    """The typed record of ``strategy``'s settings (:data:`STRATEGY_BASE` and its own), e.g.
    ``GdasOptions``."""
    return record_type(f"{strategy.capitalize()}Options", strategy_settings(strategy).values())


JobOptions = record_type("JobOptions", JOB_SETTINGS)
"""The typed record of the job's settings (:data:`JOB_SETTINGS`): ``cost``, ``finetune_lr``..."""


def job_options(options: dict[str, Any]) -> Any:
    """The job's settings among parsed ``--set`` values (the rest: declared defaults)."""
    keys = {s.key for s in JOB_SETTINGS}
    return JobOptions(**{k: v for k, v in options.items() if k in keys})


def resolve_strategy_options(strategy: str, options: dict[str, Any]) -> Any:
    """Every setting of ``strategy`` as its typed record (:func:`options_type`): explicit
    ``options`` (typed and checked) over the defaults of the preset they name (else the
    declared one).

    Raises:
        HwnasError: a key the strategy does not read (the message lists the known ones), a
            bad value, Nesterov momentum without momentum, ``tau_min`` above ``tau_max``, or
            ``lr_min`` above ``lr``.
    """
    settings = strategy_settings(strategy)
    unknown = sorted(set(options) - set(settings))
    if unknown:
        raise HwnasError(
            f"unknown setting '{unknown[0]}' for strategy '{strategy}'; "
            f"known: {', '.join(sorted(settings))}"
        )
    given = {k: settings[k].parse(v) for k, v in options.items()}
    out = {**strategy_defaults(strategy, given.get("preset")), **given}
    if out.get("nesterov") and not out.get("momentum"):
        raise HwnasError("--set nesterov=1 needs momentum > 0")
    if "tau_min" in out and "tau_max" in out and out["tau_min"] > out["tau_max"]:
        raise HwnasError(  # the temperature anneals from tau_max down to tau_min
            f"--set tau_min={out['tau_min']:g} is above tau_max={out['tau_max']:g}: the "
            "Gumbel-softmax temperature anneals from tau_max down to tau_min"
        )
    if "lr_min" in out and "lr" in out and out["lr_min"] > out["lr"]:
        raise HwnasError(  # the cosine schedule anneals from lr down to lr_min
            f"--set lr_min={out['lr_min']:g} is above lr={out['lr']:g}: the learning rate "
            "anneals from lr down to lr_min"
        )
    return options_type(strategy)(**out)


def supernet_defaults(space: str) -> dict[str, Any]:
    """Defaults of the size settings of ``space``'s supernet."""
    return {s.key: s.default for s in SUPERNET_SETTINGS[space]}


def applicable(strategy: str, space: str) -> dict[str, Setting]:
    """Every ``--set`` key that a search with ``strategy`` on ``space`` reads."""
    return {
        **strategy_settings(strategy),
        **{s.key: s for s in space_settings(space) if reads(s, strategy)},
        **{s.key: s for s in JOB_SETTINGS if reads(s, strategy)},
    }


def parse_options(options: dict[str, Any], strategy: str, space: str) -> dict[str, Any]:
    """Typed, validated ``--set`` values for ``strategy`` on ``space`` (only the keys given).

    Raises:
        HwnasError: a key that a command-line option sets, a key no setting of this strategy
            and space has (the message lists the valid ones), or a bad value.
    """
    valid = applicable(strategy, space)
    out = {}
    for key, value in options.items():
        if key in CLI_OPTIONS:
            raise HwnasError(f"--set {key}=... is the option {CLI_OPTIONS[key]}; use that")
        if key not in valid:
            elsewhere = _owners(key)
            note = f" ({key} is read by {elsewhere})" if elsewhere else ""
            raise HwnasError(
                f"--set {key}: no such setting for strategy '{strategy}' on space '{space}'"
                f"{note}; valid: {', '.join(sorted(valid))}"
            )
        out[key] = valid[key].parse(value)
    _check_together(out, space)
    own = strategy_settings(strategy)  # the strategy's settings resolve (nesterov needs momentum)
    resolve_strategy_options(strategy, {k: v for k, v in out.items() if k in own})
    return out


def _check_together(options: dict[str, Any], space: str) -> None:
    """Settings that must agree with each other.

    Raises:
        HwnasError: NAS-Bench-201 ``channels`` not a multiple of ``partial_channels``.
    """
    if space == "nasbench201" and options.get("partial_channels", 1) > 1:
        k = options["partial_channels"]
        c = options.get("channels", supernet_defaults(space)["channels"])
        if c % k:
            raise HwnasError(f"--set partial_channels={k}: channels ({c}) must be a multiple of it")


def _owners(key: str) -> str:
    """Which other strategies or supernets read ``key`` ("" if none)."""
    readers = [n for n in STRATEGY_OWN if key in strategy_settings(n)]
    readers += [n for s in JOB_SETTINGS if s.key == key for n in s.strategies or ()]
    owners = []
    if readers:
        owners.append(f"strateg{'ies' if len(readers) > 1 else 'y'} {', '.join(readers)}")
    for n, ss in SUPERNET_SETTINGS.items():
        for s in ss:
            if s.key == key:
                only = f" with strategy {', '.join(s.strategies)}" if s.strategies else ""
                name = "the supernet of declared spaces" if n == "declared" else f"the {n} supernet"
                owners.append(f"{name}{only}")
    return ", ".join(owners)


def supernet_config(options: dict[str, Any], space: str) -> dict[str, Any]:
    """The supernet size settings given for ``space``."""
    keys = {s.key for s in space_settings(space)}
    return {k: v for k, v in options.items() if k in keys}


def strategy_options(options: dict[str, Any], strategy: str) -> dict[str, Any]:
    """The strategy settings given (those the strategy reads)."""
    keys = strategy_settings(strategy)
    return {k: v for k, v in options.items() if k in keys}


def help_text() -> str:
    """The ``--set`` help: every key with its default, grouped by who reads it."""
    parts = ["Supernet search setting, repeatable, typed and range-checked"]
    parts.append("Strategies: " + ", ".join(_shown(s, _show(s.default)) for s in STRATEGY_BASE))
    for name, own in STRATEGY_OWN.items():
        if own:
            parts.append(f"{name}: " + ", ".join(f"{s.key} ({_show(s.default)})" for s in own))
    parts.append(preset_text("small-data"))
    for name, own in SUPERNET_SETTINGS.items():
        if not own:
            continue
        who = "declared spaces' supernet" if name == "declared" else f"{name} supernet"
        parts.append(f"{who}: " + ", ".join(_shown(s, _default(s)) for s in own))
    parts.append("Job: " + ", ".join(_shown(s, _default(s)) for s in JOB_SETTINGS))
    return "; ".join(parts) + "."


def preset_text(name: str) -> str:
    """What ``--set preset=NAME`` sets, from :data:`PRESETS`: its values for every strategy
    (each where the strategy reads it), then each strategy's own ones, which replace them
    (``--help`` said "arch_lr=0.003" while singlepath's small-data arch_lr is 0.01)."""
    table = PRESETS[name]
    text = f"preset={name} sets " + ", ".join(
        f"{k}={_show(v)}" for k, v in table.get("*", {}).items()
    )
    own = [
        f"{strategy} " + ", ".join(f"{k}={_show(v)}" for k, v in values.items())
        for strategy, values in table.items()
        if strategy != "*" and values
    ]
    if own:
        text += " (each where the strategy reads it), then per strategy, over those: " + (
            ", ".join(own)
        )
    return text


def _shown(s: Setting, default: str) -> str:
    """``key (default)``, with the strategies that read it where not every one does."""
    return f"{s.key} ({default}{'; ' + ', '.join(s.strategies) if s.strategies else ''})"


def _default(s: Setting) -> str:
    """A default as ``--help`` shows it: what 0 or '' means where its help says
    (``image_size (0: the space's default)``), else the value."""
    help_text = s.help.lower()
    if s.default == "" and "default:" in help_text:
        return "'': " + help_text.split("default:", 1)[1].strip(" )")
    if s.default == 0 and not isinstance(s.default, bool) and "(0: " in help_text:
        return "0: " + help_text.split("(0: ", 1)[1].split(")", 1)[0]
    return repr(s.default)


def _show(value: Any) -> str:
    if isinstance(value, bool):  # an on/off setting is written 0 or 1
        return str(int(value))
    return f"{value:.3g}" if isinstance(value, float) else str(value)
