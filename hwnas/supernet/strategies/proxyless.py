"""ProxylessNAS (Cai et al., ICLR 2019): binary gates, one path in memory.

Weight step: sample one candidate per decision from softmax(alpha) (binary gates) and train only
that path. Architecture step: the paper's two-path gradient estimate: sample two candidates per
decision, renormalise their probabilities, gate them with a binary straight-through gate (the
gradient dL/dalpha_i = sum_j dL/dg_j * p_j (delta_ij - p_i) over the two), then rescale the two
updated alphas so that the probability mass of the unsampled candidates is unchanged. Only the
sampled candidates are ever computed.

Defaults are those of mit-han-lab/proxylessnas (``search/imagenet_arch_search.py``,
``nas_manager.py``): weights SGD lr 0.025 cosine, Nesterov, weight decay 4e-5, trained alone
for the first 40 of 160 epochs (``warmup`` 0.25); then an architecture step every 5 weight steps
(``arch_every``), Adam lr 1e-3, betas (0, 0.999), no weight decay; hardware term ``mul#log``:
``alpha * CE * (log E[LAT] / log ref)^beta`` (``hw_form=proxyless``, alpha 0.2, beta =
``--latency-weight``, the paper's 0.3; ref: the uniform distribution's expected latency).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hwnas.spaces.mixed import Choice
from hwnas.supernet.strategies.base import SupernetStrategy


class ProxylessNas(SupernetStrategy):
    name = "proxyless"
    paper = (
        "Cai et al., ProxylessNAS: Direct Neural Architecture Search on Target Task and "
        "Hardware, ICLR 2019"
    )

    def _two_path(self):
        path, picks = [], []
        for d, a in enumerate(self.alphas):
            if d in self.supernet.hard_only or len(a) == 1:
                path.append(self.hard_choice(d, 1.0))
                picks.append(None)
                continue
            p = F.softmax(a.detach(), -1)
            # the CPU generator samples from CPU probabilities, wherever the supernet lives
            pair = torch.multinomial(p.cpu(), 2, replacement=False, generator=self.generator)
            i, j = int(pair[0]), int(pair[1])
            sub = F.softmax(a[[i, j]], -1)
            k = 0 if float(torch.rand((), generator=self.generator)) < float(sub[0].detach()) else 1
            hard = torch.zeros(2, device=a.device)
            hard[k] = 1.0
            gate = hard - sub.detach() + sub
            w = torch.zeros_like(a).index_put((torch.tensor([i, j], device=a.device),), gate)
            path.append(Choice(w, (i, j)))
            picks.append((i, j))
        return path, picks

    def step(self, train, val):
        x, y = train
        out = {}
        if not self.warming_up and (self.steps + 1) % self.options.arch_every == 0:
            xv, yv = val
            path, picks = self._two_path()
            old = [a.detach().clone() for a in self.alphas]
            out["arch_loss"], out["hw_loss"] = self.arch_step(xv, yv, path)
            with torch.no_grad():  # keep the unsampled candidates' probability mass
                for a, o, pick in zip(self.alphas, old, picks):
                    if pick is None:
                        continue
                    idx = list(pick)
                    shift = torch.logsumexp(o[idx], 0) - torch.logsumexp(a[idx], 0)
                    a[idx] += shift
        out["loss"] = self.weight_step(x, y, self.sampled_path())
        self.steps += 1
        return out
