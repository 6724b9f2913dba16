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

from dataclasses import dataclass
from typing import Any

from hwnas.errors import HwnasError


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
    """

    key: str
    type: type
    default: Any
    help: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def parse(self, value: Any) -> Any:
        """``value`` (a string from the command line, or a typed value) as this setting's type.

        Raises:
            HwnasError: not of the type, outside the range, or not one of the choices.
        """
        try:
            if self.type is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            out = self.type(value)
        except (TypeError, ValueError):
            kind = {int: "an integer", float: "a number", str: "a string"}[self.type]
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be {kind}") from None
        if self.choices is not None and out not in self.choices:
            allowed = ", ".join(map(str, self.choices))
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be one of {allowed}")
        if self.low is not None and (out < self.low or (self.low_open and out == self.low)):
            bound = f"> {self.low:g}" if self.low_open else f">= {self.low:g}"
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be {bound}")
        if self.high is not None and out > self.high:
            raise HwnasError(f"--set {self.key}={value}: {self.key} must be <= {self.high:g}")
        return out


def _positive(key: str, default: float, help: str) -> Setting:
    return Setting(key, float, default, help, low=0.0, low_open=True)


STRATEGY_BASE = (
    _positive("lr", 0.05, "weight SGD learning rate (cosine-annealed)"),
    Setting("momentum", float, 0.9, "weight SGD momentum", low=0.0, high=0.999),
    Setting("weight_decay", float, 3e-4, "weight decay of the supernet weights", low=0.0),
    _positive("arch_lr", 3e-3, "Adam learning rate of the architecture parameters"),
    Setting("arch_weight_decay", float, 1e-3, "weight decay of architecture parameters", low=0),
    _positive("grad_clip", 5.0, "gradient-norm clip of the weights"),
    Setting("warmup", float, 0.2, "share of steps training weights only", low=0.0, high=0.95),
    Setting(
        "target_tolerance",
        float,
        0.05,
        "accepted relative miss of --latency-target",
        low=0.0,
        high=1.0,
        low_open=True,
    ),  # fmt: skip
)
"""Settings every supernet strategy reads (:class:`hwnas.supernet.strategies.base.
SupernetStrategy`)."""

STRATEGY_OWN: dict[str, tuple[Setting, ...]] = {
    "darts": (Setting("order", int, 1, "DARTS approximation order", choices=(1, 2)),),
    "gdas": (
        _positive("tau_max", 10.0, "Gumbel-softmax temperature at the start"),
        _positive("tau_min", 0.1, "Gumbel-softmax temperature at the end"),
    ),
    "fbnet": (
        _positive("tau_max", 5.0, "Gumbel-softmax temperature at the start"),
        _positive("tau_min", 0.2, "Gumbel-softmax temperature at the end"),
    ),
    "proxyless": (),
    "singlepath": (
        Setting("margin", float, 1.0, "initial threshold margin of the superkernel", low=0.0),
        _positive("sigmoid_tau", 0.5, "temperature of the threshold sigmoid"),
        _positive("arch_lr", 0.01, "Adam learning rate of the thresholds"),
    ),
    "oneshot": (
        Setting("sampling", str, "uniform", "path sampling", choices=("uniform", "sandwich")),
        Setting("evolution_trials", int, 60, "NSGA-II subnets scored after training", low=1),
        Setting("population", int, 20, "NSGA-II population", low=2),
        Setting("candidates", int, 4, "Pareto subnets handed out for fine-tuning", low=1),
    ),
}
"""Each strategy's own settings (a key also in :data:`STRATEGY_BASE` replaces its default)."""

SUPERNET_SETTINGS: dict[str, tuple[Setting, ...]] = {
    "nasbench201": (
        Setting("channels", int, 8, "channels of the first stage", low=1),
        Setting("cells", int, 1, "cells per stage", low=1),
    ),
    "fbnet": (
        _positive("width", 0.25, "width multiplier of every layer"),
        Setting("profile", str, "cifar100", "macro skeleton", choices=("cifar100", "imagenet")),
    ),
    "ofa": (
        _positive("width", 0.5, "width multiplier of every layer"),
        _positive("resolution_scale", 0.25, "input resolution scale"),
    ),
    "declared": (
        _positive("width", 0.25, "width multiplier of every layer"),
        _positive("resolution_scale", 0.25, "input resolution scale (spaces with resolution)"),
        Setting("profile", str, "", "dataset skeleton (default: the smallest images)"),
    ),
}
"""Size settings of each space's supernet (defaults sized for a CPU); ``declared`` is the
supernet of every space written in the space language."""


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
        choices=("auto", "table", "measured", "flops", "predicted"),
    ),  # fmt: skip
    Setting("predictor", str, "", "predictor artifact for cost=predicted (default: the space's)"),
    _positive("finetune_lr", 0.02, "learning rate of fine-tuning extracted subnets"),
    Setting("hw_strength", float, 2.0, "target-mode strength of the hardware term", low=0.0),
    Setting("limit", int, 0, "use at most this many training images (0: all)", low=0),
    Setting("threads", int, 1, "torch CPU threads", low=1),
    Setting("torch_device", str, "", "torch device (default: cuda if available, else cpu)"),
    Setting("image_size", int, 0, "image side in pixels (0: the space's default)", low=0),
    Setting("data_seed", int, 0, "seed of the train/validation/test split"),
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


def strategy_settings(strategy: str) -> dict[str, Setting]:
    """The settings a supernet strategy reads (base, then its own), by key."""
    out = {s.key: s for s in STRATEGY_BASE}
    out.update({s.key: s for s in STRATEGY_OWN.get(strategy, ())})
    return out


def own_defaults(strategy: str) -> dict[str, Any]:
    """Defaults of the settings ``strategy`` declares itself (see :data:`STRATEGY_OWN`)."""
    return {s.key: s.default for s in STRATEGY_OWN[strategy]}


def supernet_defaults(space: str) -> dict[str, Any]:
    """Defaults of the size settings of ``space``'s supernet."""
    return {s.key: s.default for s in SUPERNET_SETTINGS[space]}


def strategy_defaults(strategy: str) -> dict[str, Any]:
    """Default value of every setting of ``strategy``."""
    return {k: s.default for k, s in strategy_settings(strategy).items()}


def applicable(strategy: str, space: str) -> dict[str, Setting]:
    """Every ``--set`` key that a search with ``strategy`` on ``space`` reads."""
    return {
        **strategy_settings(strategy),
        **{s.key: s for s in space_settings(space)},
        **{s.key: s for s in JOB_SETTINGS},
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
    return out


def _owners(key: str) -> str:
    """Which other strategies or supernets read ``key`` ("" if none)."""
    owners = [f"strategy {n}" for n, ss in STRATEGY_OWN.items() if any(s.key == key for s in ss)]
    owners += [
        "the supernet of declared spaces" if n == "declared" else f"the {n} supernet"
        for n, ss in SUPERNET_SETTINGS.items()
        if any(s.key == key for s in ss)
    ]
    return ", ".join(owners)


def job_value(options: dict[str, Any], key: str) -> Any:
    """A job setting: the given value, else its declared default."""
    if key in options:
        return options[key]
    return next(s.default for s in JOB_SETTINGS if s.key == key)


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
    parts = ["Supernet search setting, repeatable, typed and range-checked."]
    parts.append("Strategies: " + ", ".join(f"{s.key} ({s.default})" for s in STRATEGY_BASE))
    for name, own in STRATEGY_OWN.items():
        if own:
            parts.append(f"{name}: " + ", ".join(f"{s.key} ({s.default})" for s in own))
    for name, own in SUPERNET_SETTINGS.items():
        who = "declared spaces' supernet" if name == "declared" else f"{name} supernet"
        parts.append(f"{who}: " + ", ".join(f"{s.key} ({s.default!r})" for s in own))
    parts.append("Job: " + ", ".join(f"{s.key} ({s.default!r})" for s in JOB_SETTINGS))
    return "; ".join(parts) + "."
