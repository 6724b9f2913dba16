"""One zoo entry on disk: ``model.onnx`` (with the card in its ``metadata_props``),
``weights.pt`` for trained weights, ``test_data_set_0/`` (ONNX Model Zoo layout), ``README.md``
and ``card.json`` with the sha256 of every other file. Nothing here imports torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hwnas import jsonfile
from hwnas.export import ExportedModel
from hwnas.paths import sha256_file
from hwnas.zoo.card import (
    CARD_FILE,
    MODEL_FILE,
    README_FILE,
    TEST_DATA,
    WEIGHTS_FILE,
    metadata_props,
    render_readme,
)


def with_metadata(onnx_bytes: bytes, props: dict[str, str], doc: str) -> bytes:
    """``onnx_bytes`` with its ``metadata_props`` replaced by ``props`` and its doc string set."""
    import onnx

    model = onnx.load_from_string(onnx_bytes)
    del model.metadata_props[:]
    for key, value in props.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    model.doc_string = doc
    return model.SerializeToString()


def write_tensor(path: Path, array: np.ndarray, name: str) -> None:
    """One TensorProto file (``onnx.numpy_helper.from_array``), as the ONNX Model Zoo stores
    test inputs and outputs."""
    from onnx import numpy_helper

    path.write_bytes(numpy_helper.from_array(np.ascontiguousarray(array), name).SerializeToString())


def read_tensor(path: Path) -> np.ndarray:
    """The array of a TensorProto file written by :func:`write_tensor`, which holds its data
    inline.

    Raises:
        ValueError: the tensor names an external data file instead (``data_location``
            EXTERNAL): never written by hwnas, and ONNX would read it from the current folder
            (a received entry's test input naming ``secret.txt`` read whatever file of that
            name the folder ``hwnas zoo verify`` ran in held).
        OSError: the file cannot be read.
        Exception: what ONNX raises for a file that is not a TensorProto.
    """
    import onnx
    from onnx import numpy_helper
    from onnx.external_data_helper import uses_external_data

    tensor = onnx.load_tensor(str(path))
    if uses_external_data(tensor):
        raise ValueError(
            f"{path.name} names an external data file; a zoo entry's test data holds its values "
            "itself"
        )
    return numpy_helper.to_array(tensor)


def write_entry(folder: Path, model: ExportedModel, card: dict[str, Any]) -> dict[str, Any]:
    """Write one entry into ``folder`` (created; its files are overwritten).

    Args:
        folder: the entry folder.
        model: the exported network and its test data.
        card: the card without ``files`` (see :func:`hwnas.zoo.build.card_for`).

    Returns:
        The card as written to ``card.json`` (with ``files``).
    """
    folder.mkdir(parents=True, exist_ok=True)
    props = metadata_props(card)
    doc = f"hwnas zoo model {card['name']}: {card['space']} {card['arch']}"
    (folder / MODEL_FILE).write_bytes(with_metadata(model.onnx_bytes, props, doc))
    files = [MODEL_FILE]
    if model.weights is not None:
        (folder / WEIGHTS_FILE).write_bytes(model.weights)
        files.append(WEIGHTS_FILE)
    tests = folder / TEST_DATA
    tests.mkdir(exist_ok=True)
    write_tensor(tests / "input_0.pb", model.test_input, card["input"]["name"])
    write_tensor(tests / "output_0.pb", model.test_output, card["output"]["name"])
    files += [f"{TEST_DATA}/input_0.pb", f"{TEST_DATA}/output_0.pb"]
    card = {**card, "files": {f: sha256_file(folder / f) for f in files}}
    (folder / README_FILE).write_text(render_readme(card))
    card["files"][README_FILE] = sha256_file(folder / README_FILE)
    (folder / CARD_FILE).write_text(jsonfile.dumps(card, indent=2) + "\n")
    return card
