"""The search engine and its strategies (:mod:`hwnas.search.engine`, :mod:`.strategies`, ...).

The package is also the Python API's ``hwnas.search(...)``: the name is both this package and
the function :func:`hwnas.api.search`, so the module is callable (importing a submodule such
as ``hwnas.search.engine`` makes ``hwnas.search`` this package, which must then still search).
Importing it imports nothing else.
"""

from __future__ import annotations

import sys
import types


class _SearchPackage(types.ModuleType):
    """This package, callable as :func:`hwnas.api.search`."""

    def __call__(self, *args, **kwargs):
        from hwnas.api import search

        return search(*args, **kwargs)


sys.modules[__name__].__class__ = _SearchPackage
