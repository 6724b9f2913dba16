"""The model zoo: what a user ships from a search.

A zoo is a folder of entries, one per Pareto architecture (``NN-<model hash>/``), each with
``model.onnx`` (the card's keys in its ``metadata_props``), ``README.md`` (a Hugging Face /
timm style model card), ``card.json`` (preprocessing, label order, accuracy and latency with
their sources, tool versions, the sha256 of every file), ``test_data_set_0/`` (an input and the
expected output, ONNX Model Zoo layout) and, for trained weights, ``weights.pt``.

- :mod:`hwnas.zoo.write`: a run's zoo (:func:`write_zoo`, :func:`zoo_columns`);
- :mod:`hwnas.zoo.entry`, :mod:`hwnas.zoo.card`: one entry's files and card;
- :mod:`hwnas.zoo.train`, :mod:`hwnas.zoo.recipes`: training from scratch with the space's
  recipe; :mod:`hwnas.zoo.jobs`: ``hwnas train ARCH|ZOO_DIR``;
- :mod:`hwnas.zoo.read`, :mod:`hwnas.zoo.verify`: reading and checking entries;
- :mod:`hwnas.zoo.load`: an entry as an ONNX Runtime session or a PyTorch module
  (:func:`load`).

Importing this package imports neither torch nor onnx.
"""

from __future__ import annotations

from hwnas.zoo.load import load
from hwnas.zoo.read import entry_folders, is_entry, read_entry
from hwnas.zoo.write import write_zoo, zoo_columns

__all__ = ["entry_folders", "is_entry", "load", "read_entry", "write_zoo", "zoo_columns"]
