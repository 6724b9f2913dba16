"""Single-Path NAS (Stamoulis et al., ECML-PKDD 2019) on the OFA MobileNetV3 supernet.

One superkernel per block: the 3x3 kernel is always used; the 5x5 ring is added when its
mean-square weight exceeds a learned threshold, and the 7x7 ring when, in addition, its own does;
``w = w3 + 1[ring5 > t5] (ring5 + 1[ring7 > t7] ring7)``. Expansion 4 and 6 add channel groups
the same way (norms of the group's depthwise weights), and a stage's 3rd and 4th blocks are kept
when their weights' norm exceeds a threshold (the paper's skip choice, nested to fit OFA's
depth). Indicators are hard in the forward pass and take the gradient of a sigmoid (straight
through), so thresholds *and* weights receive the hardware term's gradient. The input resolution,
which has no superkernel, is a Gumbel-softmax straight-through sample as in GDAS.

Single-level, as in the paper: weights and thresholds are trained together on the training
split with cross-entropy + hardware term. Memory is one superkernel path.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from hwnas.spaces.mixed import Choice
from hwnas.supernet.strategies.base import SupernetStrategy


def _ms(t: torch.Tensor) -> torch.Tensor:
    return torch.log((t * t).mean() + 1e-12)


class SinglePathNas(SupernetStrategy):
    name = "singlepath"
    paper = (
        "Stamoulis et al., Single-Path NAS: Designing Hardware-Efficient ConvNets in less "
        "than 4 Hours, ECML-PKDD 2019"
    )
    bilevel = False
    spaces = ("ofa",)

    def __init__(self, supernet, hw, options, total_steps, seed=0):
        super().__init__(supernet, hw, options, total_steps, seed)
        net = supernet
        with torch.no_grad():
            init = []
            for blk in net.blocks:
                for z in self._block_norms(blk):
                    init.append(float(z) - self.options.margin)
            for s in range(net.space.num_stages):
                for i in (2, 3):
                    init.append(float(self._depth_norm(net.blocks[s * net.max_depth + i])))
                    init[-1] -= self.options.margin
        device = self.alphas[0].device
        self.thresholds = torch.nn.Parameter(torch.tensor(init, device=device))
        self.a_opt = self.arch_optimizer(self.arch_parameters())

    def arch_optimizer(self, params):
        """The paper's Adam over the thresholds (and the resolution's alpha): no weight decay,
        so ``arch_weight_decay`` is not read."""
        return torch.optim.Adam(
            params, lr=self.options.arch_lr, betas=(self.options.arch_beta1, 0.999)
        )

    def arch_parameters(self):
        params = [self.alphas[self.supernet.r_dim]]
        if hasattr(self, "thresholds"):
            params.append(self.thresholds)
        return params

    @staticmethod
    def _block_norms(blk) -> list[torch.Tensor]:
        """log mean-square of ring 5\\3, ring 7\\5, channel group e4\\e3 and e6\\e4."""
        w = blk.dw
        kmax = w.shape[-1]
        rings = []
        for inner, outer in ((3, 5), (5, 7)):
            lo_o, lo_i = (kmax - outer) // 2, (kmax - inner) // 2
            block = w[:, :, lo_o : lo_o + outer, lo_o : lo_o + outer]
            mask = torch.ones(outer, outer, device=w.device)
            off = lo_i - lo_o
            mask[off : off + inner, off : off + inner] = 0
            rings.append(torch.log(((block * mask) ** 2).sum() / (mask.sum() * w.shape[0]) + 1e-12))
        m = blk.mids
        groups = [_ms(w[m[0] : m[1]]), _ms(w[m[1] : m[2]])]
        return rings + groups

    @staticmethod
    def _depth_norm(blk) -> torch.Tensor:
        return _ms(blk.dw[: blk.mids[0]])

    def _indicators(self, hard: bool) -> list[torch.Tensor]:
        zs = []
        for blk in self.supernet.blocks:
            zs.extend(self._block_norms(blk))
        net = self.supernet
        for s in range(net.space.num_stages):
            for i in (2, 3):
                zs.append(self._depth_norm(net.blocks[s * net.max_depth + i]))
        z = torch.stack(zs) - self.thresholds
        soft = torch.sigmoid(z / self.options.sigmoid_tau)
        if not hard:
            return list(soft)
        h = (z > 0).to(soft.dtype)
        return list(h - soft.detach() + soft)

    def _nested(self, i1: torch.Tensor, i2: torch.Tensor) -> torch.Tensor:
        return torch.stack([1 - i1, i1 * (1 - i2), i1 * i2])

    def _probs(self, hard: bool) -> list[torch.Tensor]:
        net = self.supernet
        ind = self._indicators(hard)
        nb, ns = net.space.num_blocks, net.space.num_stages
        k = [self._nested(ind[4 * b], ind[4 * b + 1]) for b in range(nb)]
        e = [self._nested(ind[4 * b + 2], ind[4 * b + 3]) for b in range(nb)]
        d = [self._nested(ind[4 * nb + 2 * s], ind[4 * nb + 2 * s + 1]) for s in range(ns)]
        return [*k, *e, *d, F.softmax(self.alphas[net.r_dim], -1)]

    def probs(self):
        return self._probs(hard=False)

    def step(self, train, val):
        x, y = train
        probs = self._probs(hard=True)
        path = [Choice(p, tuple(range(len(p)))) for p in probs[:-1]]
        path.append(self.hard_choice(self.supernet.r_dim, 1.0))
        self.set_lr()
        self.w_opt.zero_grad(set_to_none=True)
        self.a_opt.zero_grad(set_to_none=True)
        task = self.loss(x, y, path).float()
        total, hw = self.hw_objective(task, probs)
        total.backward()
        torch.nn.utils.clip_grad_norm_(self.supernet.parameters(), self.options.grad_clip)
        self.w_opt.step()
        self.a_opt.step()
        self.steps += 1
        return {"loss": float(task.detach()), "hw_loss": float(hw.detach())}

    def state_dict(self):
        return {**super().state_dict(), "thresholds": self.thresholds.detach().cpu()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        with torch.no_grad():
            self.thresholds.copy_(state["thresholds"])

    argmax_rule = "the trained thresholds' hard indicators 1[||w||^2 > t] of every decision"
    ranking = "thresholds' own or nearest (fewest decisions changed, then most probable)"

    def hard_indices(self) -> np.ndarray:
        """The architecture the thresholds select, the one the forward pass trains: each
        decision's choice under the hard indicators 1[||w||^2 > t] (and the resolution's most
        probable size); candidate indices, (D,)."""
        with torch.no_grad():
            return np.array([int(torch.argmax(p)) for p in self._probs(hard=True)])

    def decision_scores(self) -> list[np.ndarray]:
        """The paper reads the network off the hard indicators, not the soft nested
        probabilities (whose argmax says "off" for s1 just above 0.5 while the threshold says
        "on"): each decision's hard choice scores above every other by more than the
        log-probabilities of all decisions together can differ (each log is at least
        log(1e-12) = -27.6), and the log-probabilities rank the rest, so :meth:`derive` takes
        the hard architecture, and under a target the one within it that changes the fewest of
        its decisions (then the most probable). ``summary.json`` reports the log-probabilities
        themselves (:meth:`log_probs`)."""
        hard = self.hard_indices()
        scores = self.log_probs()
        penalty = 28.0 * len(scores) + 1.0
        for p, k in zip(scores, hard):
            p -= penalty
            p[k] += penalty
        return scores
