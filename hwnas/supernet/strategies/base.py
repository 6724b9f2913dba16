"""What every supernet strategy shares: architecture parameters, the weight and architecture
optimisers, path sampling, and derivation.

A strategy needs two methods: :meth:`SupernetStrategy.step` (one training step on a training
batch and, for bilevel strategies, a validation batch) and :meth:`SupernetStrategy.probs` (the
current architecture distribution, one probability vector per decision). :meth:`derive` has a
default (the most probable candidate of every decision, or the most probable architecture whose
cost, judged by the device's recorded value where it has one, is within the tolerance of the
latency target). Optimiser settings, their paper defaults and presets are declared in
:mod:`hwnas.supernet.settings`; the hardware term's form (additive, FBNet's or ProxylessNAS's
multiplicative) in :data:`hwnas.supernet.cost.HW_FORMS`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch
from hwnas.spaces.mixed import Choice, Path
from hwnas.supernet.base import Supernet
from hwnas.supernet.cost import HardwareLoss, check_form, constrained_choice
from hwnas.supernet.settings import resolve_strategy_options


def gumbel_like(t: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Standard Gumbel noise of ``t``'s shape on ``t``'s device. Drawn on the CPU from
    ``generator`` (a CPU generator: the strategies' own, checkpointed) and then moved, so that a
    CUDA supernet neither fails (a CPU generator cannot fill a CUDA tensor) nor draws another
    sequence than a CPU one."""
    u = torch.rand(t.shape, generator=generator).clamp_(1e-9, 1 - 1e-9).to(t.device)
    return -torch.log(-torch.log(u))


NEAR_TIE = 0.01
"""Two choices of a decision whose probabilities differ by less than this are a near-tie: the
derived architecture is the argmax of a distribution that training barely moved (a short run
of `--epochs 2` left GDAS's at 0.199-0.202 of 5 choices on every edge)."""


class SupernetStrategy:
    """Base of the supernet strategies.

    Args:
        supernet: the supernet (its parameters are the weights).
        hw: the hardware term, or None for accuracy only.
        options: strategy settings given (the rest: the defaults of the named preset,
            :func:`hwnas.supernet.settings.resolve_strategy_options`).
        total_steps: number of :meth:`step` calls planned (for schedules).
        seed: sampling seed.

    Attributes:
        options: every setting of the strategy, typed (``self.options.lr``: a record of
            :func:`hwnas.supernet.settings.options_type`).
        bilevel: whether architecture parameters are trained on the validation split.
        hw_in_training: whether the hardware term steers training (an architecture
            distribution's expected cost), or only the choice among evaluated subnets.
    """

    name = ""
    bilevel = True
    hw_in_training = True
    spaces: tuple[str, ...] | None = None
    """Spaces the strategy supports (None: every supernet)."""
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
        self.options = resolve_strategy_options(self.name, options)
        if hw is not None and self.hw_in_training:  # the strategy's form of the weight term
            hw.form, hw.alpha = self.options.hw_form, self.options.hw_alpha
            try:
                check_form(hw)
            except HwnasError as e:
                if "hw_form" in options:  # asked for: refuse
                    raise
                hw.form, hw.note = "additive", f"additive, not the default {hw.form}: {e}"
        self.total_steps = max(1, total_steps)
        self.steps = 0
        self.generator = torch.Generator().manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        device = next(supernet.parameters()).device
        self.alphas = nn.ParameterList(
            [nn.Parameter(torch.zeros(n, device=device)) for n in supernet.sizes]
        )
        # PC-DARTS edge normalisation: one parameter per edge, a softmax over each node's edges
        n_edges = sum(len(g) for g in supernet.edge_groups)
        self.edge_betas = nn.Parameter(torch.zeros(n_edges, device=device)) if n_edges else None
        self.w_opt = torch.optim.SGD(
            supernet.parameters(),
            lr=self.options.lr,
            momentum=self.options.momentum,
            weight_decay=self.options.weight_decay,
            nesterov=self.options.nesterov,
        )
        self.a_opt = self.arch_optimizer(self.arch_parameters())
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

    def near_ties(self, tol: float = NEAR_TIE) -> tuple[int, int]:
        """(decisions whose two most probable choices are within ``tol`` of each other in
        probability, decisions): how much of the derived architecture ties decided, not
        training. (0, 0) for a strategy without architecture parameters (oneshot)."""
        if not list(self.arch_parameters()):
            return 0, 0
        with torch.no_grad():
            probs = [p.detach().cpu().numpy().ravel() for p in self.probs()]
        tied = sum(1 for p in probs if len(p) > 1 and np.diff(np.sort(p)[-2:])[0] < tol)
        return tied, len(probs)

    def derive(self) -> Arch:
        """The derived architecture: the most probable candidate of every decision, or, in
        target mode, the most probable architecture whose cost is within ``target_tolerance``
        of the target (under ``--max-latency``, whose cost is at most the limit), judged by
        the device's own value where it has one (a recorded table) and else by the lookup
        table with its error margin (:func:`hwnas.supernet.cost.constrained_choice`); what
        was chosen and how is kept in :attr:`derivation`."""
        logp = self.decision_scores()
        idx = np.array([int(np.argmax(p)) for p in logp])
        self.derivation = {"rule": self.argmax_rule}
        if (
            self.hw is not None
            and self.hw.target is not None
            and self.hw.model.lookup_table
        ):
            tol = self.options.target_tolerance
            choice = constrained_choice(logp, self.hw.model, self.hw.target, tol)
            idx = choice.indices
            self.derivation = {
                "rule": f"{self.ranking} architecture within ±{tol:.0%} of the target",
                "target": self.hw.target,
                "tolerance": tol,
                "lut_margin": self.hw.model.margin,
                "argmax_log_prob": float(sum(float(np.max(p)) for p in logp)),
                **choice.describe(),
            }
        elif self.hw is not None and self.hw.limit is not None and self.hw.model.lookup_table:
            choice = constrained_choice(logp, self.hw.model, self.hw.limit, at_most=True)
            idx = choice.indices
            self.derivation = {
                "rule": f"{self.ranking} architecture within --max-latency",
                "limit": self.hw.limit,
                "lut_margin": self.hw.model.margin,
                "argmax_log_prob": float(sum(float(np.max(p)) for p in logp)),
                **choice.describe(),
            }
        if "log_prob" in self.derivation:  # the distribution's own, whatever ranked them
            true = self.log_probs()
            self.derivation["log_prob"] = float(sum(float(p[k]) for p, k in zip(true, idx)))
            self.derivation["argmax_log_prob"] = float(
                sum(float(p[k]) for p, k in zip(true, self.argmax_indices()))
            )
        return self.supernet.arch(idx)

    argmax_rule = "argmax of every decision"
    """How :meth:`derive` reads the architecture off the trained distribution, unconstrained."""
    ranking = "most probable"
    """How :meth:`derive` ranks architectures under a target or ``--max-latency``."""

    def log_probs(self) -> list[np.ndarray]:
        """Per decision, the log of :meth:`probs` (each (candidates,), at least log 1e-12)."""
        with torch.no_grad():
            return [torch.log(p.clamp_min(1e-12)).cpu().numpy() for p in self.probs()]

    def decision_scores(self) -> list[np.ndarray]:
        """Per decision, a score of each candidate (by default :meth:`log_probs`):
        :meth:`derive` takes the best of each, or under a target or limit the architecture of
        the highest total within it; :meth:`argmax_indices` their argmax."""
        return self.log_probs()

    def argmax_indices(self) -> np.ndarray:
        """The trained distribution's own architecture, before any target or limit: the best
        candidate of each decision by :meth:`decision_scores` (candidate indices, (D,))."""
        return np.array([int(np.argmax(p)) for p in self.decision_scores()])

    def finish(self, score) -> list[Arch]:
        """Candidates to hand out after training, the derived architecture first.

        Args:
            score: arch -> validation accuracy (%) with inherited weights (used by one-shot
                search; the differentiable strategies ignore it).
        """
        return [self.derive()]

    # -- shared machinery ---------------------------------------------------------------------

    def arch_optimizer(self, params: list[torch.Tensor]) -> torch.optim.Optimizer:
        """Adam over the architecture parameters ``params`` (``arch_lr``, ``arch_beta1``,
        ``arch_weight_decay``); with none (``oneshot``), a placeholder that is never stepped
        and reads no setting (:mod:`hwnas.supernet.settings` declares who reads what)."""
        if not params:
            return torch.optim.Adam([nn.Parameter(torch.zeros(1))])
        return torch.optim.Adam(
            params,
            lr=self.options.arch_lr,
            betas=(self.options.arch_beta1, 0.999),
            weight_decay=self.options.arch_weight_decay,
        )

    def arch_parameters(self) -> list[torch.Tensor]:
        extra = [self.edge_betas] if getattr(self, "edge_betas", None) is not None else []
        return [*self.alphas, *extra]

    def edge_normalised(self, path: Path) -> Path:
        """``path`` with each decision's weights multiplied by its edge's weight, a softmax over
        the edges entering the same node (PC-DARTS's edge normalisation, Xu et al., ICLR 2020);
        ``path`` itself when the supernet declares no :attr:`~hwnas.supernet.base.Supernet.
        edge_groups`."""
        if self.edge_betas is None:
            return path
        out, pos = list(path), 0
        for group in self.supernet.edge_groups:
            w = F.softmax(self.edge_betas[pos : pos + len(group)], dim=-1)
            pos += len(group)
            for g, d in enumerate(group):
                out[d] = Choice(out[d].weights * w[g], out[d].active)
        return out

    @property
    def progress(self) -> float:
        return min(1.0, self.steps / self.total_steps)

    @property
    def warming_up(self) -> bool:
        return self.progress < self.options.warmup

    def autocast(self):
        if self.amp:
            return torch.autocast("cuda", dtype=torch.float16)
        return contextlib.nullcontext()

    def set_lr(self) -> None:
        """Cosine schedule of the weight learning rate from ``lr`` to ``lr_min``."""
        lo, hi = self.options.lr_min, self.options.lr
        lr = lo + 0.5 * (hi - lo) * (1 + np.cos(np.pi * self.progress))
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
        """Train across processes (:mod:`hwnas.distributed`).

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
        nn.utils.clip_grad_norm_(self.supernet.parameters(), self.options.grad_clip)
        if self.scaler is not None:
            self.scaler.step(self.w_opt)
            self.scaler.update()
        else:
            self.w_opt.step()
        return float(loss.detach())

    def hw_objective(
        self, task: torch.Tensor, probs: list[torch.Tensor] | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(objective, hardware part): the task loss combined with the hardware term in the
        strategy's form (:meth:`hwnas.supernet.cost.HardwareLoss.objective`)."""
        if self.hw is None:
            return task, torch.zeros((), device=task.device)
        return self.hw.objective(task, self.probs() if probs is None else probs)

    def arch_step(
        self,
        x: torch.Tensor,
        y: torch.Tensor,
        path: Path,
        probs: list[torch.Tensor] | None = None,
    ) -> tuple[float, float]:
        """One Adam step of the architecture parameters on the task loss combined with the
        hardware term (no gradient of the weights is computed); the term's cost is taken under
        ``probs`` (per decision, (candidates,)), by default :meth:`probs`."""
        self.a_opt.zero_grad(set_to_none=True)
        with self.unsynced():
            task = self.loss(x, y, path).float()
        total, hw = self.hw_objective(task, probs)
        total.backward(inputs=self.arch_parameters())
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
        return self.edge_normalised(out)

    @staticmethod
    def path_weights(path: Path) -> list[torch.Tensor]:
        """Per decision, the weight ``path`` gives each candidate, (candidates,): a soft
        path's mixture weights, a straight-through sample's one-hot (differentiable with
        respect to the architecture parameters, as the path is)."""
        return [choice.weights for choice in path]

    def hard_choice(self, d: int, tau: float) -> Choice:
        """Straight-through Gumbel-softmax one-hot sample of decision ``d`` (GDAS)."""
        a = self.alphas[d]
        soft = F.softmax((F.log_softmax(a, -1) + gumbel_like(a, self.generator)) / tau, -1)
        k = int(soft.argmax())
        hard = torch.zeros_like(soft)
        hard[k] = 1.0
        return Choice(hard - soft.detach() + soft, (k,))

    def hard_path(self, tau: float = 1.0) -> Path:
        """One straight-through Gumbel-softmax sample per decision (edge-normalised)."""
        return self.edge_normalised([self.hard_choice(d, tau) for d in range(len(self.alphas))])

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
            "edge_betas": None if self.edge_betas is None else self.edge_betas.detach().cpu(),
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
            if self.edge_betas is not None and state.get("edge_betas") is not None:
                self.edge_betas.copy_(state["edge_betas"])
        self.w_opt.load_state_dict(state["w_opt"])
        self.a_opt.load_state_dict(state["a_opt"])
        self.steps = int(state["steps"])
        self.rng.bit_generator.state = state["rng"]
        self.generator.set_state(state["generator"])

    def warnings(self) -> list[str]:
        """Lines on what this strategy cannot do well on its supernet, said before training
        (none by default)."""
        return []

    def describe(self) -> dict[str, Any]:
        out = {"name": self.name, "paper": self.paper, "bilevel": self.bilevel,
               **dataclasses.asdict(self.options)}  # fmt: skip
        if "hw_form" in out and self.hw is not None:  # the form in use (a fallback is noted)
            out["hw_form"] = self.hw.active_form
        if getattr(self, "derivation", None):
            out["derivation"] = self.derivation
        return out
