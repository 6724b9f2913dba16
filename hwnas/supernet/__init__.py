"""Weight-sharing supernets and hardware-aware differentiable / one-shot search.

- :mod:`hwnas.supernet.base`: the :class:`Supernet` interface (forward under a path,
  ``extract(arch)`` -> standalone module with inherited weights).
- :mod:`hwnas.supernet.nasbench201`, :mod:`~hwnas.supernet.fbnet`, :mod:`~hwnas.supernet.ofa`:
  the supernets of the three spaces (registered in :data:`SUPERNETS` by space name).
- :mod:`hwnas.supernet.cost`: the hardware cost model (expected latency under the architecture
  distribution, differentiable w.r.t. the architecture parameters).
- :mod:`hwnas.supernet.strategies`: DARTS, GDAS, FBNet, ProxylessNAS, Single-Path NAS, one-shot.
- :mod:`hwnas.supernet.train`: training loops; :mod:`hwnas.supernet.run`: the search job.

Nothing here is imported by ``import hwnas``; torch is loaded only when a supernet is built.
"""

from __future__ import annotations

from typing import Any

from hwnas.registry import Registry

SUPERNETS: Registry = Registry("supernet")
SUPERNETS.register("nasbench201", "hwnas.supernet.nasbench201:NasBench201Supernet")
SUPERNETS.register("fbnet", "hwnas.supernet.fbnet:FBNetSupernet")
SUPERNETS.register("ofa", "hwnas.supernet.ofa:OFASupernet")


def build_supernet(
    space_name: str,
    num_classes: int,
    image_shape: tuple[int, int, int],
    config: dict[str, Any] | None = None,
):
    """The supernet of a space (randomly initialised, train mode).

    Args:
        space_name: "nasbench201", "fbnet" or "ofa".
        num_classes: classifier width.
        image_shape: (C, H, W) of the training images.
        config: size settings of that supernet (see its module); defaults for a CPU.

    Raises:
        hwnas.errors.UnknownNameError: a space without a supernet.
    """
    from hwnas.spaces import get_space

    cls = SUPERNETS.get(space_name)
    return cls(get_space(space_name), num_classes, image_shape, dict(config or {}))
