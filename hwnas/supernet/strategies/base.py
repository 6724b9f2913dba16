"""What every supernet strategy shares: architecture parameters, the weight and architecture
optimisers, path sampling, and derivation.

A strategy needs two methods: :meth:`SupernetStrategy.step` (one training step on a training
batch and, for bilevel strategies, a validation batch) and :meth:`SupernetStrategy.probs` (the
current architecture distribution, one probability vector per decision). :meth:`derive` has a
default (the most probable candidate of every decision, or the most probable architecture whose
predicted cost meets the latency target).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch
from hwnas.supernet.base import Choice, Path, Supernet
from hwnas.supernet.cost import HardwareLoss, MultilinearLUT, constrained_choice
from hwnas.supernet.settings import STRATEGY_BASE

DEFAULT_OPTIONS: dict[str, Any] = {s.key: s.default for s in STRATEGY_BASE}
"""Settings every strategy reads, with defaults (declared in :mod:`hwnas.supernet.settings`)."""


def gumbel_like(t: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Standard Gumbel noise of ``t``'s shape on ``t``'s device. Drawn on the CPU from
    ``generator`` (a CPU generator: the strategies' own, checkpointed) and then moved, so that a
    CUDA supernet neither fails (a CPU generator cannot fill a CUDA tensor) nor draws another
    sequence than a CPU one."""
    u = torch.rand(t.shape, generator=generator).clamp_(1e-9, 1 - 1e-9).to(t.device)
    return -torch.log(-torch.log(u))


class SupernetStrategy:
    """Base of the supernet strategies.

    Args:
        supernet: the supernet (its parameters are the weights).
        hw: the hardware term, or None for accuracy only.
        options: strategy settings (defaults in ``DEFAULT_OPTIONS`` and each strategy's own).
        total_steps: number of :meth:`step` calls planned (for schedules).
        seed: sampling seed.

    Attributes:
        bilevel: whether architecture parameters are trained on the validation split.
    """

    name = ""
    bilevel = True
    spaces: tuple[str, ...] | None = None
    """Spaces the strategy supports (None: every supernet)."""
    own_options: dict[str, Any] = {}
    paper = ""

    def __init__(
        self,
        supernet: Supernet,
        hw: HardwareLoss | None,
        options: dict[str, Any],
        total_steps: int,
        seed: int = 0,
    ):
        if self.spaces is not None and supernet.space.name not in self.spaces:
            raise HwnasError(
                f"strategy '{self.name}' works on the {', '.join(self.spaces)} space, "
                f"not '{supernet.space.name}'"
            )
        self.supernet = supernet
        self.hw = hw
        known = {**DEFAULT_OPTIONS, **self.own_options}
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise HwnasError(
                f"unknown setting '{unknown[0]}' for strategy '{self.name}'; "
                f"known: {', '.join(sorted(known))}"
            )
        self.options = {k: type(v)(options[k]) if k in options else v for k, v in known.items()}
        self.total_steps = max(1, total_steps)
        self.steps = 0
        self.generator = torch.Generator().manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        device = next(supernet.parameters()).device
        self.alphas = nn.ParameterList(
            [nn.Parameter(torch.zeros(n, device=device)) for n in supernet.sizes]
        )
        self.w_opt = torch.optim.SGD(
            supernet.parameters(),
            lr=self.options["lr"],
            momentum=self.options["momentum"],
            weight_decay=self.options["weight_decay"],
            nesterov=True,
        )
        self.a_opt = torch.optim.Adam(
            self.arch_parameters() or [nn.Parameter(torch.zeros(1))],
            lr=self.options["arch_lr"],
            betas=(0.5, 0.999),
            weight_decay=self.options["arch_weight_decay"],
        )
        self.amp = device.type == "cuda"
        self.scaler = torch.amp.GradScaler("cuda") if self.amp else None
        self.net: Callable[[torch.Tensor, Path], torch.Tensor] = supernet
        """What :meth:`loss` runs: the supernet, or it wrapped by :meth:`distribute`."""

    # -- the interface --------------------------------------------------------------------------

    def step(self, train: tuple, val: tuple | None) -> dict[str, float]:
        """One training step; returns losses for logging."""
        raise NotImplementedError

    def probs(self) -> list[torch.Tensor]:
        """The architecture distribution: one probability vector per decision."""
        return [F.softmax(a, dim=-1) for a in self.alphas]

    def derive(self) -> Arch:
        """The derived architecture: the most probable candidate of every decision, or, in
        target mode, the most probable architecture within ``target_tolerance`` of the target
        under the cost model."""
        with torch.no_grad():
            logp = [torch.log(p.clamp_min(1e-12)).cpu().numpy() for p in self.probs()]
        idx = np.array([int(np.argmax(p)) for p in logp])
        if (
            self.hw is not None
            and self.hw.target is not None
            and isinstance(self.hw.model, MultilinearLUT)
        ):
            idx, _ = constrained_choice(
                logp, self.hw.model, self.hw.target, self.options["target_tolerance"]
            )
        return self.supernet.arch(idx)

    def finish(self, score) -> list[Arch]:
        """Candidates to hand out after training, the derived architecture first.

        Args:
            score: arch -> validation accuracy (%) with inherited weights (used by one-shot
                search; the differentiable strategies ignore it).
        """
        return [self.derive()]

    # -- shared machinery ---------------------------------------------------------------------

    def arch_parameters(self) -> list[torch.Tensor]:
        return list(self.alphas)

    @property
    def progress(self) -> float:
        return min(1.0, self.steps / self.total_steps)

    @property
    def warming_up(self) -> bool:
        return self.progress < self.options["warmup"]

    def autocast(self):
        if self.amp:
            return torch.autocast("cuda", dtype=torch.float16)
        return contextlib.nullcontext()

    def set_lr(self) -> None:
        lr = 0.5 * self.options["lr"] * (1 + np.cos(np.pi * self.progress))
        for g in self.w_opt.param_groups:
            g["lr"] = lr

    def loss(self, x: torch.Tensor, y: torch.Tensor, path: Path) -> torch.Tensor:
        with self.autocast():
            return F.cross_entropy(self.net(x, path), y)

    def distribute(
        self,
        wrapped: Callable[[torch.Tensor, Path], torch.Tensor],
        average: Callable[[list[torch.Tensor]], None],
    ) -> None:
        """Train across processes (:mod:`hwnas.supernet.distributed`).

        Args:
            wrapped: the supernet wrapped once by DistributedDataParallel (``(x, path) ->
                logits``): :meth:`loss` runs through it, so the weights' gradients of every
                backward are averaged over the processes.
            average: replaces gradient tensors by their mean over the processes (an
                all-reduce); it runs before every step of the architecture optimiser.
        """
        self.net = wrapped

        def average_arch_grads(opt, _args, _kwargs) -> None:
            average([p.grad for g in opt.param_groups for p in g["params"] if p.grad is not None])

        self.a_opt.register_step_pre_hook(average_arch_grads)

    @contextlib.contextmanager
    def unsynced(self):
        """Within: :meth:`loss` runs on the bare supernet, so the weights' gradients are not
        averaged across processes (for forwards whose weight gradients are thrown away)."""
        net, self.net = self.net, self.supernet
        try:
            yield
        finally:
            self.net = net

    def weight_step(self, x: torch.Tensor, y: torch.Tensor, path: Path) -> float:
        """One SGD step of the weights on ``path``."""
        self.set_lr()
        self.w_opt.zero_grad(set_to_none=True)
        loss = self.loss(x, y, path)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.w_opt)
        else:
            loss.backward()
        nn.utils.clip_grad_norm_(self.supernet.parameters(), self.options["grad_clip"])
        if self.scaler is not None:
            self.scaler.step(self.w_opt)
            self.scaler.update()
        else:
            self.w_opt.step()
        return float(loss.detach())

    def hw_loss(self) -> torch.Tensor:
        if self.hw is None:
            return torch.zeros((), device=self.alphas[0].device)
        return self.hw(self.probs())

    def arch_step(self, x: torch.Tensor, y: torch.Tensor, path: Path) -> tuple[float, float]:
        """One Adam step of the architecture parameters on task loss + hardware term (no
        gradient of the weights is computed)."""
        self.a_opt.zero_grad(set_to_none=True)
        with self.unsynced():
            task = self.loss(x, y, path).float()
        hw = self.hw_loss()
        (task + hw).backward(inputs=self.arch_parameters())
        self.a_opt.step()
        return float(task.detach()), float(hw.detach())

    def soft_path(self, gumbel_tau: float | None = None) -> Path:
        """Every candidate, weighted by softmax(alpha) (or a Gumbel-softmax sample at
        temperature ``gumbel_tau``); decisions the supernet can only compute one at a time
        get a straight-through hard sample."""
        out = []
        for d, a in enumerate(self.alphas):
            if d in self.supernet.hard_only:
                out.append(self.hard_choice(d, 1.0))
                continue
            if gumbel_tau is None:
                w = F.softmax(a, dim=-1)
            else:
                w = F.softmax(
                    (F.log_softmax(a, -1) + gumbel_like(a, self.generator)) / gumbel_tau, -1
                )
            out.append(Choice(w, tuple(range(len(a)))))
        return out

    def hard_choice(self, d: int, tau: float) -> Choice:
        """Straight-through Gumbel-softmax one-hot sample of decision ``d`` (GDAS)."""
        a = self.alphas[d]
        soft = F.softmax((F.log_softmax(a, -1) + gumbel_like(a, self.generator)) / tau, -1)
        k = int(soft.argmax())
        hard = torch.zeros_like(soft)
        hard[k] = 1.0
        return Choice(hard - soft.detach() + soft, (k,))

    def hard_path(self, tau: float = 1.0) -> Path:
        return [self.hard_choice(d, tau) for d in range(len(self.alphas))]

    def sampled_path(self) -> Path:
        """One path sampled from the distribution, constant weights (no architecture
        gradient)."""
        out = []
        for p in self.probs():
            p = p.detach().cpu().numpy().astype(np.float64)
            k = int(self.rng.choice(len(p), p=p / p.sum()))
            w = torch.zeros(len(p), device=self.alphas[0].device)
            w[k] = 1.0
            out.append(Choice(w, (k,)))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "alphas": [a.detach().cpu() for a in self.alphas],
            "w_opt": self.w_opt.state_dict(),
            "a_opt": self.a_opt.state_dict(),
            "steps": self.steps,
            "rng": self.rng.bit_generator.state,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            for a, v in zip(self.alphas, state["alphas"]):
                a.copy_(v)
        self.w_opt.load_state_dict(state["w_opt"])
        self.a_opt.load_state_dict(state["a_opt"])
        self.steps = int(state["steps"])
        self.rng.bit_generator.state = state["rng"]
        self.generator.set_state(state["generator"])

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "paper": self.paper, "bilevel": self.bilevel, **self.options}
