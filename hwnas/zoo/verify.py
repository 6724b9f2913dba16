"""``hwnas zoo verify``: check zoo entries as a deployment would use them.

For each entry: every file listed in ``card.json`` exists with its sha256; ``model.onnx``
loads, passes the ONNX checker and carries the card's keys (but ``files``) with the same
values in its ``metadata_props``; ONNX Runtime's output on ``test_data_set_0/input_0.pb`` is
within the card's tolerance of ``output_0.pb`` (the PyTorch module's output before export).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hwnas.zoo.card import MODEL_FILE, TEST_DATA, metadata_props, sha256_file
from hwnas.zoo.read import entry_folders


@dataclass(frozen=True)
class Verdict:
    """The check of one entry.

    Attributes:
        folder: the entry.
        ok: every check passed.
        detail: what was checked (ok), or the first failure.
    """

    folder: Path
    ok: bool
    detail: str

    def line(self) -> str:
        """One line for the terminal."""
        return f"{'ok  ' if self.ok else 'FAIL'} {self.folder.name}: {self.detail}"


def verify(path: str | Path) -> list[Verdict]:
    """Verify a zoo folder (each entry) or one entry.

    Raises:
        HwnasError: ``path`` is missing or is neither a zoo folder nor an entry.
    """
    return [verify_entry(folder) for folder in entry_folders(path)]


def verify_entry(folder: Path) -> Verdict:
    """Verify one entry (see the module doc); never raises on a broken entry."""
    try:
        return Verdict(folder, True, _check(folder))
    except _Failed as exc:
        return Verdict(folder, False, str(exc))


class _Failed(Exception):
    pass


def _check(folder: Path) -> str:
    import json

    try:
        card = json.loads((folder / "card.json").read_text())
    except (OSError, ValueError) as exc:
        raise _Failed(f"card.json unreadable: {exc}") from None
    files = card.get("files")
    if not isinstance(files, dict) or MODEL_FILE not in files:
        raise _Failed("card.json lists no checksums (written by an older hwnas?)")
    for name, digest in files.items():
        if not (folder / name).is_file():
            raise _Failed(f"{name} is missing")
        if sha256_file(folder / name) != digest:
            raise _Failed(f"{name} sha256 differs from card.json")
    model = _load_model(folder / MODEL_FILE)
    props = {p.key: p.value for p in model.metadata_props}
    expected = metadata_props(card)
    missing = sorted(set(expected) - set(props))
    if missing:
        raise _Failed(f"model.onnx metadata lacks {', '.join(missing[:5])}")
    differing = sorted(k for k in expected if props[k] != expected[k])
    if differing:
        raise _Failed(f"model.onnx metadata differs from card.json in {', '.join(differing[:5])}")
    test = card.get("test_data") or {}
    rtol, atol = float(test.get("rtol", 1e-3)), float(test.get("atol", 1e-4))
    diff = _run_test_data(folder, model, rtol, atol)
    return (
        f"{len(files)} files' sha256 match, {len(expected)} metadata keys, ONNX Runtime output "
        f"within rtol {rtol:g} / atol {atol:g} (max |diff| {diff:.1e})"
    )


def _load_model(path: Path):
    import onnx

    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:  # DecodeError, ValidationError, ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _Failed(f"model.onnx is not a valid ONNX model: {first}") from None
    return model


def _run_test_data(folder: Path, model, rtol: float, atol: float) -> float:
    import onnxruntime as ort

    from hwnas.zoo.entry import read_tensor

    tests = folder / TEST_DATA
    try:
        x = read_tensor(tests / "input_0.pb")
        y = read_tensor(tests / "output_0.pb")
    except Exception as exc:  # missing or corrupt TensorProto files
        raise _Failed(f"{TEST_DATA} unreadable: {str(exc).splitlines()[0]}") from None
    try:
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        name = session.get_inputs()[0].name
        got = session.run(None, {name: x})[0]
    except Exception as exc:  # ORT rejects the model or the input
        raise _Failed(f"ONNX Runtime failed: {str(exc).splitlines()[0]}") from None
    if got.shape != y.shape:
        raise _Failed(f"ONNX Runtime output shape {got.shape} != stored {y.shape}")
    diff = float(np.max(np.abs(got - y))) if got.size else 0.0
    if not np.allclose(got, y, rtol=rtol, atol=atol):
        raise _Failed(
            f"ONNX Runtime output differs from {TEST_DATA}/output_0.pb: max |diff| {diff:.3g} "
            f"beyond rtol {rtol:g} / atol {atol:g}"
        )
    return diff
