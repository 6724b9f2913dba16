"""Supernet search strategies by name (lazily imported).

``hwnas search --strategy NAME`` runs the supernet job when NAME is registered here, and the
table search of :mod:`hwnas.search` otherwise.
"""

from __future__ import annotations

from hwnas.registry import Registry

SUPERNET_STRATEGIES: Registry = Registry("supernet strategy")
SUPERNET_STRATEGIES.register("darts", "hwnas.supernet.strategies.darts:Darts")
SUPERNET_STRATEGIES.register("gdas", "hwnas.supernet.strategies.gdas:Gdas")
SUPERNET_STRATEGIES.register("fbnet", "hwnas.supernet.strategies.fbnet:FBNetDnas")
SUPERNET_STRATEGIES.register("proxyless", "hwnas.supernet.strategies.proxyless:ProxylessNas")
SUPERNET_STRATEGIES.register("singlepath", "hwnas.supernet.strategies.singlepath:SinglePathNas")
SUPERNET_STRATEGIES.register("oneshot", "hwnas.supernet.strategies.oneshot:OneShotEvolution")

DEFAULT_SPACE = {
    "darts": "nasbench201",
    "gdas": "nasbench201",
    "fbnet": "fbnet",
    "proxyless": "ofa",
    "singlepath": "ofa",
    "oneshot": "nasbench201",
}
"""Space each strategy searches when ``--space`` is not given (the space of its paper)."""
