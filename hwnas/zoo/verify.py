"""``hwnas zoo verify``: check zoo entries as a deployment would use them, and say how far
each can be trusted.

An entry is first checked against itself: every file listed in ``card.json`` exists with its
sha256 (the listed files must include ``model.onnx`` and the test data); ``model.onnx`` loads,
passes the ONNX checker and carries the card's keys (but ``files``) with the same values in its
``metadata_props``; what the card says of the network's structure (its input's name, dtype and
shape with its dynamic batch axis, its output's name and shape, ``num_classes``, ``opset``, the
weights it holds and the signature of its graph) is what the graph holds; ONNX Runtime's output
on ``test_data_set_0/input_0.pb`` is within the tolerance of ``output_0.pb`` (the PyTorch
module's output before export). The tolerance is :data:`~hwnas.zoo.card.RTOL` /
:data:`~hwnas.zoo.card.ATOL` or the card's, whichever is tighter: a card cannot loosen it.

Anyone who can edit the entry can make it consistent with itself (new weights, new test
output, new checksums), so the entry is then checked against records it does not hold:

1. the run's ``summary.json`` (``zoo_files``: the sha256 of each entry's ``card.json`` and
   ``model.onnx`` when the run wrote it), for an entry inside a run folder's ``zoo/``;
2. the Optuna study that published the run (its ``artifacts`` attribute: each uploaded file's
   sha256 at publish time), found in the study storage (``--storage``, default the hwnas
   home's ``studies.db``) by its run folder or by the study the card names.

The verdict says which records the entry matched. A run folder rewritten as a whole matches
its own summary.json; only the study, kept elsewhere, proves it was not. An entry that no
record covers (copied alone, another machine's storage) is reported as consistent with its own
card, provenance not proven.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.export import graph_signature, weight_count
from hwnas.paths import read_bounded_text, sha256_file
from hwnas.zoo.card import ATOL, MODEL_FILE, PARAMS_CONVENTION, RTOL, TEST_DATA, metadata_props
from hwnas.zoo.read import MANIFEST_FILES, entry_folders, zoo_contents

MAX_VERIFY_BYTES = 2**30
"""Most memory the tensors one test inference computes may take in ``hwnas zoo verify`` (its
weights aside, which the model file holds): a zoo network's at batch 1 take a few MB to a few
hundred; a 190-byte handed model (a ConstantOfShape of a shape it holds) took 2.2 GB."""

REQUIRED_FILES = (MODEL_FILE, f"{TEST_DATA}/input_0.pb", f"{TEST_DATA}/output_0.pb")
"""Files every card must list with their sha256 (what the checks read)."""


@dataclass(frozen=True)
class Verdict:
    """The check of one entry.

    Attributes:
        folder: the entry.
        ok: every check passed.
        detail: what was checked (ok), or the first failure.
        provenance: which records outside the entry it matched, or that none did.
        proven: whether a study's record (kept outside the run folder) matched.
    """

    folder: Path
    ok: bool
    detail: str
    provenance: str = ""
    proven: bool = False

    def line(self) -> str:
        """One line for the terminal."""
        tail = f"; {self.provenance}" if self.provenance else ""
        return f"{'ok  ' if self.ok else 'FAIL'} {self.folder.name}: {self.detail}{tail}"


def verify(path: str | Path, storage: str | None = None) -> list[Verdict]:
    """Verify a zoo folder (each entry) or one entry.

    Args:
        path: a zoo folder or one entry.
        storage: the Optuna storage URL whose studies' records are checked (default: the
            hwnas home's ``studies.db``, where it exists).

    Raises:
        HwnasError: ``path`` is missing or is neither a zoo folder nor an entry; ``storage``
            cannot be opened.
    """
    contents = zoo_contents(path)
    records = StudyRecords(storage)
    listed = _listed(contents.zoo, records) if contents.zoo is not None else {}
    if not contents.entries and not listed and not any(p.is_symlink() for p, _ in contents.others):
        entry_folders(path)  # no entry at all, and none recorded: the reason (HwnasError)
    verdicts = [verify_entry(folder, records) for folder in contents.entries]
    for folder, why in contents.others:
        by = listed.get(folder.name)
        verdicts.append(Verdict(folder, False, why + (f" ({_listing(by)} it)" if by else "")))
    present = {p.name for p in contents.entries} | {p.name for p, _ in contents.others}
    verdicts += [
        Verdict(
            contents.zoo / name,
            False,
            f"missing: {_listing(by)} this entry, and the zoo has no folder of that name",
        )
        for name, by in listed.items()
        if contents.zoo is not None and name not in present
    ]
    return sorted(verdicts, key=lambda v: v.folder.name)


def _listing(by: list[str]) -> str:
    """The words "summary.json's zoo_files and pareto.csv's zoo column list" and the like."""
    return f"{' and '.join(by)} list{'s' if len(by) == 1 else ''}"


def _listed(zoo: Path, records: StudyRecords) -> dict[str, list[str]]:
    """The entries that the records of the run whose zoo is ``zoo`` list: name -> the records
    (words) that list it: its ``summary.json``'s ``zoo_files``, ``pareto.csv``'s ``zoo``
    column and the study that published the run. Empty for a zoo outside a run folder."""
    if zoo.name != "zoo" or not (zoo.parent / "summary.json").is_file():
        return {}
    run = zoo.parent
    listed: dict[str, list[str]] = {}

    def note(name: object, by: str) -> None:
        if isinstance(name, str) and name not in ("", ".", "..") and not set("/\\") & set(name):
            listed.setdefault(name, [])
            if by not in listed[name]:
                listed[name].append(by)

    def zoo_keys(keys: Any, by: str) -> None:
        for key in keys if isinstance(keys, dict) else ():
            parts = str(key).split("/")
            if len(parts) == 3 and parts[0] == "zoo":
                note(parts[1], by)

    summary: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):  # an unreadable one fails each entry
        loaded = json.loads(read_bounded_text(run / "summary.json"))
        summary = loaded if isinstance(loaded, dict) else {}
    zoo_keys(summary.get("zoo_files"), "the run's summary.json")
    for name in _pareto_zoo_column(run / "pareto.csv"):
        note(name, "pareto.csv's zoo column")
    settings = summary.get("settings") if isinstance(summary.get("settings"), dict) else {}
    study = records.find(run, [str(settings["study"])] if settings.get("study") else [])
    if study is not None and study[1].get("run_folder") == str(run.resolve()):
        zoo_keys(study[1]["artifacts"], f"study '{study[0]}' ({records.shown})")
    return dict(sorted(listed.items()))


def _pareto_zoo_column(path: Path) -> list[str]:
    """The ``zoo`` cells of the run's ``pareto.csv`` (none where it is missing or unreadable)."""
    import csv
    import io

    try:
        rows = csv.DictReader(io.StringIO(read_bounded_text(path)))
        return [str(row.get("zoo") or "") for row in rows]
    except (OSError, ValueError, csv.Error):
        return []


def verify_entry(folder: Path, records: StudyRecords | None = None) -> Verdict:
    """Verify one entry (see the module doc); never raises on a broken entry."""
    try:
        card, detail = _check(folder)
        provenance, proven = _provenance(folder, card, records or StudyRecords(None))
        name = card.get("name")
        if isinstance(name, str) and name != folder.name:  # a copy under another name
            provenance += (
                f"; its folder is not named as its card says ({name!r}: what its README, "
                "metadata and any record of it name)"
            )
        return Verdict(folder, True, detail, provenance, proven)
    except _Failed as exc:
        return Verdict(folder, False, str(exc))


class _Failed(Exception):
    pass


def _tolerance(test: dict[str, Any], key: str, limit: float) -> float:
    """The card's tolerance where it is tighter than ``limit``, else ``limit``."""
    try:
        value = float(test.get(key, limit))
    except (TypeError, ValueError):
        return limit
    return value if math.isfinite(value) and 0 <= value < limit else limit


def _check(folder: Path) -> tuple[dict[str, Any], str]:
    """The entry against itself: (its card, what was checked)."""
    from hwnas.errors import HwnasError
    from hwnas.paths import confined

    try:
        card = json.loads(read_bounded_text(folder / "card.json"))
    except (OSError, ValueError) as exc:
        raise _Failed(f"card.json unreadable: {exc}") from None
    files = card.get("files") if isinstance(card, dict) else None
    if not isinstance(files, dict) or MODEL_FILE not in files:
        raise _Failed("card.json lists no checksums (written by an older hwnas?)")
    weights = card.get("weights") if isinstance(card.get("weights"), dict) else {}
    named = [weights["file"]] if isinstance(weights.get("file"), str) else []
    unlisted = [f for f in (*REQUIRED_FILES, *named) if f not in files]
    if unlisted:
        raise _Failed(f"card.json lists no checksum of {', '.join(unlisted)}")
    for name, digest in files.items():
        try:  # a name such as ../../x would check files outside the entry
            path = confined(folder, *str(name).split("/"), what="card.json file")
        except HwnasError as exc:
            raise _Failed(str(exc)) from None
        if not path.is_file():
            raise _Failed(f"{name} is missing")
        if sha256_file(path) != digest:
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
    claims = _check_structure(card, model)
    test = card.get("test_data") if isinstance(card.get("test_data"), dict) else {}
    rtol, atol = _tolerance(test, "rtol", RTOL), _tolerance(test, "atol", ATOL)
    del model  # its weights' shapes were all the checks read; ONNX Runtime reads the file
    diff = _run_test_data(folder, folder / MODEL_FILE, rtol, atol)
    return card, (
        f"{len(files)} files' sha256 match, {len(expected)} metadata keys, "
        + (f"{claims} as in the graph, " if claims else "")
        + f"ONNX Runtime output within rtol {rtol:g} / atol {atol:g} (max |diff| {diff:.1e})"
    )


def _dims(value) -> list[int | str | None]:
    """The shape of a graph input or output: each axis's size, its symbolic name (a dynamic
    axis), or None (unknown); [] where the value declares no tensor shape."""
    t = value.type.tensor_type
    if not value.type.HasField("tensor_type") or not t.HasField("shape"):
        return []
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]


def _check_structure(card: dict[str, Any], model) -> str:
    """Check what the card says of the network's structure against ``model``'s graph, each
    claim the card makes: the input's name, dtype and shape (an axis the card's
    ``dynamic_axes`` names dynamic in the graph, every other of the card's size), the
    output's name and shape, ``num_classes`` (the output's last axis), ``params`` (the weights
    the graph holds, :func:`hwnas.export.weight_count`, where the card counts those),
    ``graph_signature`` (:func:`hwnas.export.graph_signature`) and ``opset``. Returns
    the claims checked, in words ("" for none).

    Raises:
        _Failed: the first claim the graph contradicts.
    """
    from onnx import helper

    graph = model.graph
    weights = {t.name for t in graph.initializer}
    inputs = [v for v in graph.input if v.name not in weights]
    checked = []
    inp = card.get("input") if isinstance(card.get("input"), dict) else None
    if inp is not None:
        names = [v.name for v in inputs]
        if len(inputs) != 1 or inputs[0].name != inp.get("name"):
            raise _Failed(
                f"card.json's input {inp.get('name')!r} is not model.onnx's (its inputs: "
                f"{', '.join(map(repr, names)) or 'none'})"
            )
        value = inputs[0]
        if "dtype" in inp:
            elem = value.type.tensor_type.elem_type
            try:
                dtype = helper.tensor_dtype_to_np_dtype(elem).name
            except Exception:  # noqa: BLE001 - no numpy type (a string, an undefined type)
                dtype = f"ONNX type {elem}"
            if dtype != inp["dtype"]:
                raise _Failed(
                    f"card.json's input dtype {inp['dtype']!r} is not model.onnx's ({dtype})"
                )
        dynamic = inp.get("dynamic_axes") if isinstance(inp.get("dynamic_axes"), dict) else {}
        _same_shape("input", inp.get("shape"), _dims(value), {str(k) for k in dynamic})
        checked.append("input")
    out = card.get("output") if isinstance(card.get("output"), dict) else None
    outputs = list(graph.output)
    if out is not None:
        if not outputs or outputs[0].name != out.get("name"):
            raise _Failed(
                f"card.json's output {out.get('name')!r} is not model.onnx's first (its "
                f"outputs: {', '.join(repr(v.name) for v in outputs) or 'none'})"
            )
        # the batch axis: the card gives the example's (1), any the graph has is fine
        _same_shape("output", out.get("shape"), _dims(outputs[0]), {"0"}, fixed_ok=True)
        checked.append("output")
    if "num_classes" in card:
        dims = _dims(outputs[0]) if outputs else []
        if not dims or dims[-1] != card["num_classes"]:
            raise _Failed(
                f"card.json's num_classes {card['num_classes']!r} is not model.onnx's output "
                f"size ({dims[-1] if dims else 'unknown'})"
            )
        checked.append("classes")
    if "params" in card and card.get("params_convention") == PARAMS_CONVENTION:
        held = weight_count(model)  # a card of an older hwnas counted PyTorch's parameters
        if card["params"] != held:
            raise _Failed(
                f"card.json's params {card['params']!r} is not the {held} weights model.onnx holds"
            )
        checked.append("params")
    if "graph_signature" in card:
        signature = graph_signature(model)
        if card["graph_signature"] != signature:
            raise _Failed(
                f"card.json's graph_signature {card['graph_signature']!r} is not model.onnx's "
                f"({signature})"
            )
        checked.append("graph")
    if "opset" in card:
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
        if card["opset"] != opset:
            raise _Failed(f"card.json's opset {card['opset']!r} is not model.onnx's ({opset})")
        checked.append("opset")
    return ", ".join(checked)


def _same_shape(
    what: str, claimed: Any, dims: list, dynamic: set[str], fixed_ok: bool = False
) -> None:
    """Check the card's ``claimed`` shape of the graph's ``what`` against its ``dims``
    (:func:`_dims`): the same rank, each axis in ``dynamic`` symbolic in the graph (any size;
    with ``fixed_ok`` also a fixed one), every other the claimed size.

    Raises:
        _Failed: naming the first axis that differs.
    """
    if not isinstance(claimed, list):
        raise _Failed(f"card.json's {what} shape is not a list")
    shown = "(" + ", ".join("?" if d is None else str(d) for d in dims) + ")"
    if len(claimed) != len(dims):
        raise _Failed(f"card.json's {what} shape {claimed} is not model.onnx's {shown}")
    for axis, (size, dim) in enumerate(zip(claimed, dims)):
        if str(axis) in dynamic:
            if isinstance(dim, int) and not fixed_ok:  # the card says any batch; the graph not
                raise _Failed(
                    f"card.json's {what} axis {axis} is dynamic; model.onnx's is fixed at {dim}"
                )
        elif dim != size:
            raise _Failed(f"card.json's {what} shape {claimed} is not model.onnx's {shown}")


SMALL_TENSOR = 1024
"""The most elements of an initializer whose values :func:`_load_model`'s copy keeps (what
shape inference reads, a Reshape's target shape); larger ones keep their name, type and
shape only."""


def _load_model(path: Path):
    """``model.onnx``'s graph, checked, as a copy without the values of its large
    initializers (:func:`_skeleton`: the checks read their shapes and types; ONNX's checker
    and ONNX Runtime read the file itself); a model naming external data files is refused
    unread: hwnas writes a zoo entry's model whole, and the card has no checksum of any other
    file. A model computing strings (:func:`_computes_strings`) is refused unrun.

    Memory: the file's bytes and their parse at once while it loads (twice the file), then
    one parse (ONNX's checker's) at a time.

    Raises:
        _Failed: the model is unreadable, invalid, names external data or computes strings.
    """
    import onnx
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    try:
        model = onnx.load(str(path), load_external_data=False)
        if any(uses_external_data(t) for t in _get_all_tensors(model)):
            raise _Failed(
                "model.onnx names external data files; a zoo entry's model holds its weights itself"
            )
        model = _skeleton(model)  # the whole parse is freed
        onnx.checker.check_model(str(path))  # from the file: no serialised copy of the model
    except _Failed:
        raise
    except Exception as exc:  # DecodeError, ValidationError, ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise _Failed(f"model.onnx is not a valid ONNX model: {first}") from None
    strings = _computes_strings(model)
    if strings:
        raise _Failed(
            f"model.onnx computes strings ({strings}); a zoo entry's model is a numeric network "
            "(ONNX Runtime keeps strings outside the memory bound of its test inference)"
        )
    return model


def _skeleton(model):
    """A copy of ``model`` without the values of its initializers of more than
    :data:`SMALL_TENSOR` elements, nor of its nodes' tensor attributes of more: their names,
    types and shapes stay, and so does everything else the checks read (metadata, opsets,
    inputs, outputs, nodes, functions). A 400 MB model.onnx took 2.1 GB to verify when its
    weights were copied for shape inference and again for ONNX Runtime."""
    import math

    import onnx

    light = onnx.ModelProto(ir_version=model.ir_version)
    light.opset_import.extend(model.opset_import)
    light.metadata_props.extend(model.metadata_props)
    light.functions.extend(model.functions)
    graph, g = model.graph, light.graph
    g.name = graph.name
    for field in ("input", "output", "value_info", "node", "sparse_initializer"):
        getattr(g, field).extend(getattr(graph, field))
    values = ("raw_data", "float_data", "int32_data", "int64_data", "double_data",
              "uint64_data", "string_data")  # fmt: skip
    for t in graph.initializer:
        if math.prod(t.dims) <= SMALL_TENSOR:
            g.initializer.add().CopyFrom(t)
        else:
            g.initializer.add(name=t.name, data_type=t.data_type, dims=t.dims)
    for node in g.node:  # a Constant of a large tensor (a weight the exporter kept as one)
        for attr in node.attribute:
            if attr.HasField("t") and math.prod(attr.t.dims) > SMALL_TENSOR:
                for field in values:
                    attr.t.ClearField(field)
    return light


STRING_OPS = frozenset(
    ("StringConcat", "StringSplit", "RegexFullMatch", "StringNormalizer", "LabelEncoder",
     "CategoryMapper", "Tokenizer")
)  # fmt: skip
"""Operators that make strings, refused by name where a model declares no type of their
outputs (and ONNX's shape inference infers none)."""


def _computes_strings(model) -> str:
    """What in ``model`` is or makes a string (words naming it), or "" where nothing is: a
    value whose declared or inferred type holds strings, an operator of :data:`STRING_OPS`, a
    cast to strings or a string constant, in the graph, its subgraphs and its functions.
    ONNX Runtime keeps string contents on the heap, not in the bounded arena of
    :func:`_bounded_options`: 31 StringConcat nodes of a 1 KB model took 4.2 GB."""
    import onnx

    string = onnx.TensorProto.STRING
    try:  # the inferred types of the values the model leaves untyped
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # an inference error: the declared types and operators still count
        inferred = model

    def holds_strings(tp) -> bool:
        kind = tp.WhichOneof("value")
        if kind in ("tensor_type", "sparse_tensor_type"):
            return getattr(tp, kind).elem_type == string
        if kind in ("sequence_type", "optional_type"):
            return holds_strings(getattr(tp, kind).elem_type)
        if kind == "map_type":
            return tp.map_type.key_type == string or holds_strings(tp.map_type.value_type)
        return False

    def in_nodes(nodes) -> str:
        for node in nodes:
            if node.op_type in STRING_OPS:
                return f"operator {node.op_type}"
            for attr in node.attribute:
                tensors = [attr.t, *attr.tensors, attr.sparse_tensor.values]
                tensors += [s.values for s in attr.sparse_tensors]
                if any(t.data_type == string for t in tensors) or (
                    attr.name in ("to", "dtype") and attr.i == string
                ):
                    return f"{node.op_type} attribute {attr.name}"
                for graph in [attr.g, *attr.graphs]:
                    found = in_graph(graph)
                    if found:
                        return found
        return ""

    def in_graph(graph) -> str:
        for value in (*graph.input, *graph.output, *graph.value_info):
            if holds_strings(value.type):
                return f"value {value.name!r}"
        for tensor in (*graph.initializer, *(s.values for s in graph.sparse_initializer)):
            if tensor.data_type == string:
                return f"initializer {tensor.name!r}"
        return in_nodes(graph.node)

    for found in (in_graph(inferred.graph), *(in_nodes(f.node) for f in inferred.functions)):
        if found:
            return found
    return ""


def _run_test_data(folder: Path, model: Path, rtol: float, atol: float) -> float:
    from hwnas.zoo.entry import read_tensor

    tests = folder / TEST_DATA
    try:
        x = read_tensor(tests / "input_0.pb")
        y = read_tensor(tests / "output_0.pb")
    except Exception as exc:  # missing or corrupt TensorProto files
        raise _Failed(f"{TEST_DATA} unreadable: {str(exc).splitlines()[0]}") from None
    try:
        got = _infer(model, x)
    except Exception as exc:  # ORT rejects the model or the input
        if "Available memory of" in str(exc):  # the arena's bound (_bounded_options)
            raise _Failed(
                "ONNX Runtime failed: one inference needs more than the "
                f"{MAX_VERIFY_BYTES / 2**30:g} GiB hwnas zoo verify allows its tensors"
            ) from None
        raise _Failed(f"ONNX Runtime failed: {str(exc).splitlines()[0]}") from None
    if got.shape != y.shape:
        raise _Failed(f"ONNX Runtime output shape {got.shape} != stored {y.shape}")
    diff = float(np.max(np.abs(got - y))) if got.size else 0.0
    if not np.allclose(got, y, rtol=rtol, atol=atol) or not np.isfinite(diff):
        raise _Failed(
            f"ONNX Runtime output differs from {TEST_DATA}/output_0.pb: max |diff| {diff:.3g} "
            f"beyond rtol {rtol:g} / atol {atol:g}"
        )
    return diff


def _infer(model: Path, x: np.ndarray) -> np.ndarray:
    """The first output of one inference of the model file ``model`` on ``x`` (a copy), under
    :func:`_bounded_options`, stopped after :data:`~hwnas.runtimes.executable.CALL_LIMIT_S`;
    the arena is then given back (:func:`_shrink_arena`), the run failed or not.

    Raises:
        Exception: whatever ONNX Runtime raises (the model or the input is refused, the arena
            is exhausted), HwnasError when the run was stopped.
    """
    import onnxruntime as ort

    from hwnas.runtimes.executable import CALL_LIMIT_S
    from hwnas.runtimes.onnxruntime import stop_after

    session = outputs = None
    try:
        session = ort.InferenceSession(  # from the file: no serialised copy in this process
            str(model), _bounded_options(), providers=["CPUExecutionProvider"]
        )
        name = session.get_inputs()[0].name
        with stop_after(CALL_LIMIT_S, "one inference") as run:  # a zoo from someone else
            outputs = session.run(None, {name: x}, run)
        return np.array(outputs[0], copy=True)  # the outputs lie in the arena
    finally:
        session = outputs = None
        with contextlib.suppress(Exception):  # never in place of the inference's own outcome
            _shrink_arena()


ARENA_SHRINKAGE = ("memory.enable_memory_arena_shrinkage", "cpu:0")
"""The run option under which the arena of :func:`_bounded_options` gives back each of its
regions that holds no tensor when a run ends."""

_ARENA: list[bool] = []
"""Whether this process registered the bounded allocator of :func:`_bounded_options`."""

_FLUSH: list = []
"""The session of :func:`_shrink_arena`, once made."""


def _shrink_arena() -> None:
    """Give the arena of :func:`_bounded_options` back (every region no tensor holds): run a
    one-float Identity, its input and output bound to numpy buffers (nothing allocated in the
    arena), under :data:`ARENA_SHRINKAGE`. The arena is the process's and keeps every region
    it grew by (a region is only given back by a run that asks, and a run's outputs hold theirs
    when it ends): without this, an entry that fits in a fresh process failed ("needs more
    than the 1 GiB") after others had run."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    if not _FLUSH:
        x, y = (helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in "xy")
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [x], [y])
        flush = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        flush.ir_version = 8
        _FLUSH.append(
            ort.InferenceSession(
                flush.SerializeToString(), _bounded_options(), providers=["CPUExecutionProvider"]
            )
        )
    session = _FLUSH[0]
    x, y = np.zeros(1, np.float32), np.empty(1, np.float32)
    binding = session.io_binding()
    binding.bind_cpu_input("x", x)
    binding.bind_output("y", "cpu", 0, np.float32, [1], y.ctypes.data)
    run = ort.RunOptions()
    run.log_severity_level = 4
    run.add_run_config_entry(*ARENA_SHRINKAGE)
    session.run_with_iobinding(binding, run)


def _bounded_options():
    """ONNX Runtime session options under which the tensors an inference computes come from
    one CPU arena of at most :data:`MAX_VERIFY_BYTES` (registered once per process, used only
    by sessions that ask for it): an allocation beyond it fails the run instead of taking the
    machine's memory. Graph optimisations are off: constant folding, when the session is
    made, computes tensors outside the arena (2.2 GB for a 190-byte model)."""
    import onnxruntime as ort

    if not _ARENA:
        info = ort.OrtMemoryInfo(
            "Cpu", ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, ort.OrtMemType.DEFAULT
        )
        config = ort.OrtArenaCfg({"max_mem": MAX_VERIFY_BYTES, "arena_extend_strategy": 1})
        ort.create_and_register_allocator(info, config)
        _ARENA.append(True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 4  # the failure is the FAIL line, not a log on stderr
    options.add_session_config_entry("session.use_env_allocators", "1")
    return options


# -- records outside the entry ---------------------------------------------------------------


class StudyRecords:
    """The studies of one Optuna storage, read once: what each published run recorded.

    Args:
        storage: a storage URL, or None for the hwnas home's ``studies.db`` (skipped where it
            does not exist: then no study records anything).
    """

    def __init__(self, storage: str | None):
        self.storage = storage
        self._studies: list[tuple[str, dict[str, Any]]] | None = None
        self.shown = ""

    def studies(self) -> list[tuple[str, dict[str, Any]]]:
        """(study name, user attributes) of every study (opened on first use).

        Raises:
            HwnasError: a ``storage`` given by the user that cannot be opened.
        """
        if self._studies is not None:
            return self._studies
        from hwnas.db import redact
        from hwnas.errors import HwnasError
        from hwnas.paths import default_storage_url

        url = self.storage or default_storage_url()
        self.shown = redact(url)
        self._studies = []
        from hwnas.engine.workers import missing_sqlite_file

        if missing_sqlite_file(url):
            if self.storage is not None:
                raise HwnasError(f"no study database at {self.shown}")
            return self._studies
        import optuna

        from hwnas.engine.loop import open_storage

        rdb = open_storage(url)
        self._studies = [
            (s.study_name, dict(s.user_attrs))
            for s in optuna.get_all_study_summaries(rdb, include_best_trial=False)
        ]
        return self._studies

    def find(self, run_folder: Path | None, names: list[str]) -> tuple[str, dict] | None:
        """The study that published ``run_folder``, else the first study named in ``names``
        that recorded any artifact: (name, user attributes), or None. A study whose
        ``artifacts`` is not a mapping (another program's study) records none."""
        studies = [(n, a) for n, a in self.studies() if isinstance(a.get("artifacts"), dict)]
        if run_folder is not None:
            where = str(run_folder.resolve())
            for name, attrs in studies:
                if attrs.get("run_folder") == where and attrs["artifacts"]:
                    return name, attrs
        for wanted in names:
            for name, attrs in studies:
                if name == wanted and attrs["artifacts"]:
                    return name, attrs
        return None


def _sha256(path: Path) -> str | None:
    try:
        return sha256_file(path)  # read in blocks, not whole
    except OSError:
        return None


def _compare(folder: Path, recorded: dict[str, str], prefix: str, by: str) -> bool:
    """Check the entry's :data:`MANIFEST_FILES` against ``recorded`` (rel path -> sha256),
    which ``by`` (words: "the run's summary.json (PATH) records") holds.

    Returns:
        Whether ``recorded`` covers the entry at all.

    Raises:
        _Failed: a file differs from the record.
    """
    covered = False
    for name in MANIFEST_FILES:
        digest = recorded.get(f"{prefix}/{name}")
        if not isinstance(digest, str):  # unrecorded (or a record edited into another type)
            continue
        covered = True
        if _sha256(folder / name) != digest:
            raise _Failed(f"{name} is not the file that {by}")
    return covered


def _provenance(folder: Path, card: dict[str, Any], records: StudyRecords) -> tuple[str, bool]:
    """Check the entry against its run's summary.json and its study: (what it matched,
    whether a study's record proves it).

    Raises:
        _Failed: a record differs, or the run's records do not list the entry.
    """
    run, summary, odd = None, {}, []
    if folder.parent.name == "zoo" and (folder.parent.parent / "summary.json").is_file():
        run = folder.parent.parent
        try:
            summary = json.loads(read_bounded_text(run / "summary.json"))
        except (OSError, ValueError):
            raise _Failed(f"the run's {run / 'summary.json'} is unreadable") from None
        if not isinstance(summary, dict):
            odd.append("is not a JSON object")
            summary = {}
    matched = []
    prefix = f"zoo/{folder.name}"
    manifest = summary.get("zoo_files")
    if run is not None and isinstance(manifest, dict):
        where = f"the run's summary.json ({run / 'summary.json'})"
        if not _compare(folder, manifest, prefix, f"{where} records"):
            raise _Failed(f"not an entry of this run: {where} does not list it")
        matched.append("the run's summary.json")
    elif manifest is not None:
        odd.append("has a zoo_files that is not a mapping of files to sha256")
    settings = summary.get("settings")
    if settings is not None and not isinstance(settings, dict):
        odd.append("has settings that are not a mapping (no study named)")
        settings = None
    names = [str(n) for n in ((settings or {}).get("study"), card.get("study")) if n]
    study = records.find(run, names)
    if study is not None:
        name, attrs = study
        artifacts = attrs.get("artifacts")
        artifacts = artifacts if isinstance(artifacts, dict) else {}
        recorded = {rel: v.get("sha256") for rel, v in artifacts.items() if isinstance(v, dict)}
        where = f"study '{name}' ({records.shown})"
        own = prefix if any(k.startswith(prefix + "/") for k in recorded) else None
        if own is None and card.get("name"):
            own = f"zoo/{card['name']}"
        if _compare(folder, recorded, own or prefix, f"{where} recorded at publish time"):
            matched.append(f"study '{name}' in {records.shown} (sha256 recorded at publish time)")
            return "provenance: card and model match " + " and ".join(matched), True
        if run is not None and attrs.get("run_folder") == str(run.resolve()):
            raise _Failed(f"not an entry of this run: {where} does not list it")
    why = f"; the run's summary.json {' and '.join(odd)}" if odd else ""
    if matched:
        return (
            "provenance: card and model match the run's summary.json; not proven by a study "
            f"(none in {records.shown or 'the study storage'} published this run: give "
            f"--storage), and a run folder rewritten as a whole would match its own summary{why}",
            False,
        )
    return (
        "provenance not proven: consistent with its own card only (no run folder or study "
        f"records this entry{why})",
        False,
    )
