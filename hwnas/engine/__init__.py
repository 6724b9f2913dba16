"""The search engine and its strategies: the loop every search runs (:mod:`hwnas.engine.loop`),
table strategies (:mod:`.strategies`), cost models (:mod:`.costs`), evaluators
(:mod:`.evaluate`), the study ledger (:mod:`.ledger`) and the run's report. The Python API's
``hwnas.search(...)`` is :func:`hwnas.api.search`. Importing this package imports nothing else.
"""
