"""Weight-sharing supernets and hardware-aware differentiable / one-shot search.

- :mod:`hwnas.supernet.base`: the :class:`Supernet` interface (forward under a path,
  ``extract(arch)`` -> standalone module with inherited weights).
- :mod:`hwnas.supernet.nasbench201`, :mod:`~hwnas.supernet.fbnet`, :mod:`~hwnas.supernet.ofa`:
  the supernets of the three spaces (registered in :data:`SUPERNETS` by space name).
- :mod:`hwnas.supernet.cost`: the hardware cost model (expected latency under the architecture
  distribution, differentiable w.r.t. the architecture parameters).
- :mod:`hwnas.supernet.strategies`: DARTS, GDAS, FBNet, ProxylessNAS, Single-Path NAS, one-shot.
- :mod:`hwnas.supernet.train`: search epochs (the loops they share: :mod:`hwnas.loops`);
  :mod:`hwnas.jobs.supernet`: the search job.

Nothing here is imported by ``import hwnas``; torch is loaded only when a supernet is built.
"""

from __future__ import annotations

from typing import Any

from hwnas.registry import Registry

SUPERNETS: Registry = Registry("supernet")
SUPERNETS.register("nasbench201", "hwnas.supernet.nasbench201:NasBench201Supernet")
SUPERNETS.register("fbnet", "hwnas.supernet.fbnet:FBNetSupernet")
SUPERNETS.register("ofa", "hwnas.supernet.ofa:OFASupernet")
SUPERNETS.register("declared", "hwnas.supernet.declared:DeclaredSupernet")
SUPERNETS.register("module", "hwnas.supernet.module:ModuleSupernet")


def supernet_class(space_name: str):
    """The supernet class of a space (by its ``supernet_name``: every declared space shares
    :class:`hwnas.supernet.declared.DeclaredSupernet`).

    Raises:
        hwnas.errors.UnknownNameError: a space without a supernet (or an unknown space).
    """
    from hwnas.spaces import get_space

    return SUPERNETS.get(get_space(space_name).supernet_name)


def check_supernet(space_name: str, config: dict[str, Any]) -> None:
    """Check, before any work, that the space has a supernet and that its size settings fit the
    space (a declared space's ``profile`` must be one of its datasets).

    Raises:
        hwnas.errors.HwnasError: no supernet, or a setting the space cannot take.
    """
    from hwnas.spaces import get_space

    space = get_space(space_name)
    SUPERNETS.get(space.supernet_name).check_config(space, config)


def build_supernet(
    space_name: str,
    num_classes: int,
    image_shape: tuple[int, int, int],
    config: dict[str, Any] | None = None,
):
    """The supernet of a space (randomly initialised, train mode).

    Args:
        space_name: "nasbench201", "fbnet", "ofa" or any declared space.
        num_classes: classifier width.
        image_shape: (C, H, W) of the training images.
        config: size settings of that supernet (see its module); defaults for a CPU.

    Raises:
        hwnas.errors.UnknownNameError: a space without a supernet.
    """
    from hwnas.spaces import get_space

    space = get_space(space_name)
    cls = SUPERNETS.get(space.supernet_name)
    return cls(space, num_classes, image_shape, dict(config or {}))
