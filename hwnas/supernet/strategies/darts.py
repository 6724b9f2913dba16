"""DARTS: differentiable architecture search (Liu et al., ICLR 2019).

Every candidate of every decision is computed and weighted by softmax(alpha) (memory grows with
the number of candidates). Weights are trained on the training split, alpha on the validation
split (bilevel). ``order=1`` uses the first-order approximation; ``order=2`` the unrolled
second-order gradient: grad_alpha L_val(w', alpha) - xi * (grad_alpha L_train(w+) -
grad_alpha L_train(w-)) / (2 eps) with w' = w - xi grad_w L_train(w) and w+- = w +- eps
grad_w' L_val(w'), the paper's finite-difference Hessian-vector product (xi = the current weight
learning rate, eps = 0.01 / ||grad_w' L_val||). The virtual step is the weight optimiser's, as
``architect._compute_unrolled_model`` of the official code takes it: w' = w - xi * (momentum *
its momentum buffer + grad_w L_train(w) + weight decay * w).

Defaults are the paper's (quark0/darts ``train_search.py``, ``architect.py``): weights SGD
lr 0.025 cosine-annealed to 0.001, momentum 0.9, weight decay 3e-4; architecture Adam lr 3e-4,
betas (0.5, 0.999), weight decay 1e-3; architecture steps from the first step (no warm-up).
``--set preset=small-data`` gives hwnas's earlier settings.
"""

from __future__ import annotations

import torch

from hwnas.supernet.strategies.base import SupernetStrategy


class Darts(SupernetStrategy):
    name = "darts"
    paper = "Liu et al., DARTS: Differentiable Architecture Search, ICLR 2019"

    def step(self, train, val):
        x, y = train
        out = {}
        if not self.warming_up:
            xv, yv = val
            if self.options.order == 2:
                out["arch_loss"], out["hw_loss"] = self._second_order(x, y, xv, yv)
            else:
                out["arch_loss"], out["hw_loss"] = self.arch_step(xv, yv, self.soft_path())
        out["loss"] = self.weight_step(x, y, self.soft_path())
        self.steps += 1
        return out

    def _second_order(self, x, y, xv, yv) -> tuple[float, float]:
        net = self.supernet
        params = [p for p in net.parameters() if p.requires_grad]
        group = self.w_opt.param_groups[0]
        xi = group["lr"]
        momentum, decay = group.get("momentum", 0.0), group.get("weight_decay", 0.0)
        backup = [p.detach().clone() for p in params]
        alphas = self.arch_parameters()
        # virtual step of the weight optimiser (quark0/darts architect._compute_unrolled_model):
        # w' = w - xi * (momentum * buffer + grad_w L_train(w, alpha) + weight decay * w)
        path = self.soft_path()
        grads = torch.autograd.grad(self.loss(x, y, path).float(), params, allow_unused=True)
        with torch.no_grad():
            for p, g in zip(params, grads):
                step = decay * p if g is None else g + decay * p
                buffer = self.w_opt.state.get(p, {}).get("momentum_buffer")
                if buffer is not None:
                    step = step + momentum * buffer
                p.sub_(xi * step)
        # grad of L_val(w', alpha) w.r.t. alpha and w'
        path = self.soft_path()
        val_loss = self.loss(xv, yv, path).float()
        g = torch.autograd.grad(val_loss, alphas + params, allow_unused=True)
        d_alpha, d_w = g[: len(alphas)], g[len(alphas) :]
        norm = torch.sqrt(sum((t * t).sum() for t in d_w if t is not None))
        eps = 0.01 / (float(norm) + 1e-12)

        def train_alpha_grad(sign: float):
            with torch.no_grad():
                for p, b, dw in zip(params, backup, d_w):
                    p.copy_(b + sign * eps * dw if dw is not None else b)
            loss = self.loss(x, y, self.soft_path()).float()
            return torch.autograd.grad(loss, alphas, allow_unused=True)

        g_plus, g_minus = train_alpha_grad(1.0), train_alpha_grad(-1.0)
        with torch.no_grad():
            for p, b in zip(params, backup):
                p.copy_(b)
        self.a_opt.zero_grad(set_to_none=True)
        # the hardware term's own gradient, and d objective / d task (1 for the additive form,
        # the multiplicative factor for FBNet's and ProxylessNAS's) to scale the task gradient
        task = val_loss.detach().clone().requires_grad_(True)
        total, hw = self.hw_objective(task)
        total.backward()
        scale = task.grad if task.grad is not None else torch.ones(())
        with torch.no_grad():
            for a, da, gp, gm in zip(alphas, d_alpha, g_plus, g_minus):
                hess = (gp - gm) / (2 * eps) if gp is not None and gm is not None else 0.0
                grad = scale * ((da if da is not None else torch.zeros_like(a)) - xi * hess)
                a.grad = grad if a.grad is None else a.grad + grad
        self.a_opt.step()
        return float(val_loss.detach()), float(hw.detach())
