"""The one writer of JSON for users: ``summary.json``, zoo cards, ``--json`` output.

Python's ``json`` writes a float that is not finite as ``NaN`` or ``Infinity``, which is not
JSON: JavaScript's ``JSON.parse``, ``jq`` and strict parsers refuse the whole file. A loss never
computed (a one-shot search has no architecture loss) is such a value. Here it is ``null``.
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(data: Any) -> Any:
    """``data`` with every float that is not finite replaced by None (in dicts, lists and
    tuples, which become lists)."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    return data


def dumps(data: Any, **kwargs: Any) -> str:
    """``json.dumps`` of :func:`finite` ``(data)``: strict JSON (keyword arguments as there).

    Raises:
        ValueError: never for a non-finite float; TypeError for a value JSON cannot hold
            (unless ``default`` is given).
    """
    return json.dumps(finite(data), allow_nan=False, **kwargs)
