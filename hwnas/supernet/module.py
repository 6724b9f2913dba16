"""The supernet of a space made from a PyTorch module (:mod:`hwnas.spaces.module`): the module
itself, at its largest, its weights shared by every subnet.

A path sets one subnet (:func:`hwnas.spaces.module.network.configure`): each width group's
first channels, each kernel's centre, each stage's first blocks (Once-for-All, Cai et al., ICLR
2020), each :class:`hwnas.nn.Choice`'s candidates (DARTS's mixed operation: a Choice may mix its
active candidates, weighted). Widths, kernels and depths run one candidate at a time
(``hard_only``: differentiable strategies sample them, straight-through): the logits are
multiplied by the chosen candidates' weights (1 in value), so their gradient reaches the
architecture parameters. :meth:`ModuleSupernet.extract` returns the subnet as an ordinary
module with the supernet's weights.

No size settings: the supernet is the module as written (or as trained, for
:func:`hwnas.elastic`); the data must have the module's input shape and classes.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from hwnas.errors import HwnasError
from hwnas.spaces.base import Arch, SearchSpace
from hwnas.spaces.mixed import Path
from hwnas.supernet.base import Supernet


class ModuleSupernet(Supernet):
    """Supernet of a :class:`hwnas.spaces.module.ModuleSpace`.

    Input (B, *image_shape); output (B, num_classes) logits.

    Raises:
        HwnasError: data whose classes or image shape the module does not take.
    """

    def __init__(
        self,
        space: SearchSpace,
        num_classes: int,
        image_shape: tuple[int, int, int],
        config: dict[str, Any],
    ):
        super().__init__(space, num_classes, image_shape, config)
        spec = space.dataset(space.reference_dataset)
        if num_classes != spec.num_classes:
            raise HwnasError(
                f"space '{space.name}': its network outputs {spec.num_classes} classes; the "
                f"data has {num_classes}"
            )
        self.net = copy.deepcopy(space.net)  # type: ignore[attr-defined]
        self.analysis = space.analysis  # type: ignore[attr-defined]
        self.hard_only = frozenset(
            i
            for i, d in enumerate(space.decisions)
            if d.kind != "op"  # type: ignore[attr-defined]
        )
        if tuple(image_shape) != tuple(spec.input_shape):
            was = self.net.training
            try:
                with torch.no_grad():
                    self.net.eval()(torch.zeros(2, *image_shape))
            except Exception:
                raise HwnasError(
                    f"space '{space.name}': its network takes inputs of shape "
                    f"{tuple(spec.input_shape)} (its example input), not the data's "
                    f"{tuple(image_shape)} (--set image_size={spec.input_shape[-1]})"
                ) from None
            finally:
                self.net.train(was)

    def mixed_choices(self) -> list:
        """None: per-block lookup tables would time only the Choice decisions, so a live cost
        model measures whole subnets (:func:`hwnas.supernet.cost.measured_subnet_lut`)."""
        return []

    def _configure(self, path: Path):
        from hwnas.spaces.module.network import Subnet, configure

        space = self.space
        sub = Subnet()
        scale = None
        for d, choice in zip(space.decisions, path):  # type: ignore[attr-defined]
            if d.kind != "op" and len(choice.active) != 1:
                raise ValueError(f"decision {d.key} runs one candidate at a time")
            if d.kind == "op":
                sub.ops.update({p: (choice.active, choice.weights) for p in d.sites})
                continue
            k = choice.active[0]
            v = d.values[k]
            target = {"width": sub.widths, "kernel": sub.kernels, "depth": sub.depths}[d.kind]
            target.update({s: int(v) for s in d.sites})
            w = choice.weights[k]
            scale = w if scale is None else scale * w
        configure(self.net, self.analysis, sub)
        return scale

    def forward(self, x: torch.Tensor, path: Path) -> torch.Tensor:
        scale = self._configure(path)
        y = self.net(x)
        return y if scale is None else y * scale.to(y.dtype)

    def input_shape(self, arch: Arch) -> tuple[int, int, int]:
        return self.image_shape  # type: ignore[return-value]

    def extract(self, arch: Arch) -> nn.Module:
        from hwnas.spaces.module.network import extract

        sub = self.space.subnet_of(self.space.parse(arch.text))  # type: ignore[attr-defined]
        return extract(self.net, self.analysis, sub).cpu()
