"""PyTorch -> ONNX export, model hashing, parameter/FLOP counts, and a module exported with
its test data (:class:`ExportedModel`, :func:`from_module`).

Export uses the TorchScript exporter (``dynamo=False``, opset 17): 0.3-1 s per NAS-Bench-201
network against 3-10 s for the dynamo exporter, and the result passes the full ONNX checker.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import math
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hwnas.errors import HwnasError

if TYPE_CHECKING:  # pragma: no cover
    import onnx
    import torch

OPSET = 17

_EXPORT_LOCK = threading.RLock()
"""Held around ``torch.onnx.export``: the exporter, the attention fast path it needs off and
the warnings filter are process-wide state, so two searches in two threads of one process
(``hwnas.search`` from a notebook's threads) crashed each other's export ("GLOBALS.
in_onnx_export must be True"). One export at a time; the threads' other work goes on."""
INPUT_NAME = "input"
OUTPUT_NAME = "logits"


@contextmanager
def one_torch_thread() -> Iterator[None]:
    """Run torch on one intra-op thread for the duration (restored after).

    Tracing and single-image forward passes of these small networks are dominated by Python;
    with torch's default threads they run 3-30x slower as soon as another process holds a core
    (0.4 s instead of 1.4-2.6 s per NAS-Bench-201 export here).
    """
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def export_onnx(
    model: torch.nn.Module, input_shape: tuple[int, ...], opset: int = OPSET, check: bool = True
) -> bytes:
    """Serialised ONNX model of ``model`` with a dynamic batch axis.

    Args:
        model: a module in eval mode taking one float32 tensor.
        input_shape: example input shape (B, C, H, W); B becomes the dynamic axis ``batch``.
        opset: ONNX opset version.
        check: run ``onnx.checker.check_model(full_check=True)`` on the result (most of the
            time of small exports; the graph featurizer of declared spaces skips it).

    Returns:
        The model as bytes; with ``check`` it passed the full ONNX checker.

    Raises:
        ExportError: PyTorch's exporter cannot export the model with a dynamic batch axis
            (one line: :func:`export_failure`).
    """
    import onnx
    import torch

    model = model.eval()
    example = torch.zeros(input_shape, dtype=torch.float32)
    buffer = io.BytesIO()
    with _EXPORT_LOCK:
        fastpath = torch.backends.mha.get_fastpath_enabled()
        # nn.MultiheadAttention's fused fast path (taken without gradients) has no ONNX export
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            _export(model, example, buffer, opset)
        except (HwnasError, MemoryError, KeyboardInterrupt):
            raise
        except Exception as exc:  # the exporter's own: 150 lines of TorchScript IR
            raise ExportError(export_failure(exc)) from None
        finally:
            torch.backends.mha.set_fastpath_enabled(fastpath)
    data = buffer.getvalue()
    if check:
        onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    return data


class ExportError(HwnasError):
    """PyTorch's ONNX exporter refused a network (:func:`export_onnx`)."""


def export_failure(exc: Exception) -> str:
    """One line for an exception of ``torch.onnx.export``: its type and first line, and where
    the exporter says a value is not constant (a size read from the input, ``x.size()[2:]`` as
    a pooling kernel), what to write instead."""
    import re

    text = str(exc).strip()
    if "not constant" in text:  # the exporter's message quotes a node of TorchScript IR
        where = re.search(r"# (\S+:\d+)", text)
        return (
            "cannot export the network to ONNX: a value read from the input's size (x.size(), "
            "x.shape) is an operator's argument"
            + (f" ({where.group(1)})" if where else "")
            + ", which a dynamic batch axis does not allow (hwnas measures and ships every "
            "network with one): write F.adaptive_avg_pool2d(x, 1) for F.avg_pool2d(x, "
            "x.size()[2:]), or fixed sizes"
        )
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"cannot export the network to ONNX: {type(exc).__name__}: {first[:300]}"


@contextmanager
def _no_ir_dump() -> Iterator[None]:
    """The TorchScript exporter's ``setup_onnx_logging`` tests the function
    ``_jit_is_onnx_log_enabled`` instead of its result (torch 2.13), so its log is always on
    and a refused network printed its whole TorchScript IR ("Torch IR graph at exception",
    150 lines on stdout) before the error hwnas reports in one line. Called with the export
    lock held; where the module is laid out otherwise, nothing is changed."""
    try:
        from torch.onnx._internal.torchscript_exporter import utils as exporter
    except ImportError:
        yield
        return
    original = getattr(exporter, "setup_onnx_logging", None)
    if original is None:
        yield
        return
    exporter.setup_onnx_logging = lambda verbose: contextlib.nullcontext()
    try:
        yield
    finally:
        exporter.setup_onnx_logging = original


def _export(model: torch.nn.Module, example: torch.Tensor, buffer: io.BytesIO, opset: int) -> None:
    import torch

    with warnings.catch_warnings(), torch.no_grad(), one_torch_thread(), _no_ir_dump():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice
        torch.onnx.export(
            model,
            (example,),
            buffer,
            dynamo=False,
            opset_version=opset,
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
        )


MAX_ONNX_BYTES = 2**31 - 1
"""The largest model hwnas runs (protobuf's 2 GB limit on one serialised message)."""


def read_onnx(path: str | Path) -> tuple[onnx.ModelProto, bytes]:
    """Load and check an ONNX file: the model and the bytes a runtime loads.

    The bytes are the file's own when it holds its weights; a model whose weights lie in
    external data files beside it (what ``torch.onnx.export`` writes for large models, as
    ``model.onnx.data``) is read with them and serialised whole, so that it runs from memory on
    any device.

    Raises:
        HwnasError: missing, unreadable or invalid ONNX, an external data file that is missing
            or lies outside the model's folder, or a model over 2 GB with its weights (one line
            naming the file).
    """
    from onnx.external_data_helper import (
        _get_all_tensors,
        load_external_data_for_model,
        uses_external_data,
    )

    path = Path(path)
    model, data = _parsed(path)
    try:
        # every tensor the loader reads: initializers, Constant nodes' values, subgraphs'
        external = [t for t in _get_all_tensors(model) if uses_external_data(t)]
        if external:
            _check_external_files(path, external)
            load_external_data_for_model(model, str(path.resolve().parent))
        _check(model)
    except HwnasError:
        raise
    except Exception as exc:  # onnx raises ValidationError, OSError, ...
        raise _corrupt(path, exc) from None
    if not external:
        return model, data
    size = model.ByteSize()
    if size > MAX_ONNX_BYTES:
        raise HwnasError(
            f"{path}: the model is {size / 2**30:.1f} GiB with its external data; hwnas runs "
            "models up to 2 GiB (one protobuf message)"
        )
    return model, model.SerializeToString()


def _check(model: onnx.ModelProto) -> None:
    """``onnx.checker.check_model``, where a graph input or output with a type but no shape
    (which ONNX Runtime runs, and the checker refuses before it looks at the nodes) is checked
    with the shapes ONNX's shape inference gives it: such a model is valid, and a node's own
    defect is named instead of the missing shape.

    Raises:
        onnx.checker.ValidationError: what the checker finds.
    """
    import onnx

    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        if "Field 'shape' of 'type' is required but missing" not in str(exc):
            raise
        try:
            inferred = onnx.shape_inference.infer_shapes(model)
        except Exception:  # noqa: BLE001 - a node shape inference cannot take: the checker says
            inferred = model
        known = {v.name: v for v in inferred.graph.value_info}
        for value in [*inferred.graph.input, *inferred.graph.output]:
            t = value.type.tensor_type
            if value.type.HasField("tensor_type") and not t.HasField("shape"):
                if value.name in known and known[value.name].type.tensor_type.HasField("shape"):
                    t.shape.CopyFrom(known[value.name].type.tensor_type.shape)
                else:  # for the checker only (the model run is the file's): its nodes next
                    t.shape.SetInParent()
        onnx.checker.check_model(inferred)


def _parsed(path: Path) -> tuple[onnx.ModelProto, bytes]:
    """(the model without its external data, the file's bytes) of the ONNX file ``path``,
    read as a regular file of at most :data:`MAX_ONNX_BYTES` (a pipe or a device given as a
    model would hang or fill the memory).

    Raises:
        HwnasError: missing, not a regular file, too large, unreadable, not ONNX (one line
            naming it).
    """
    import onnx

    from hwnas.paths import read_bounded

    if not path.exists():
        raise HwnasError(f"ONNX file not found: {path}")
    try:
        data = read_bounded(path, MAX_ONNX_BYTES)
    except OSError as exc:
        raise HwnasError(f"cannot read ONNX file {path}: {exc.strerror or exc}") from None
    try:
        return onnx.load_model_from_string(data), data
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and others
        raise _corrupt(path, exc) from None


def _corrupt(path: Path, exc: Exception) -> HwnasError:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return HwnasError(f"corrupt or invalid ONNX file {path}: {first}")


def load_graph(path: str | Path) -> onnx.ModelProto:
    """The ONNX file ``path`` without its external data (its graph, to read its inputs), read
    as :func:`read_onnx` reads it.

    Raises:
        HwnasError: missing, not a regular file, too large, not ONNX.
    """
    return _parsed(Path(path))[0]


def _check_external_files(path: Path, tensors: list) -> None:
    """Raise when a file the model's weights are stored in (``model.onnx.data``, named in the
    model, relative to its folder) is missing: ONNX says the model is invalid instead.

    Raises:
        HwnasError: naming the first missing file.
    """
    from onnx.external_data_helper import ExternalDataInfo

    total = 0
    for t in tensors:
        info = ExternalDataInfo(t)
        location = info.location
        # a location leading out of the folder is left to onnx, which refuses it as such
        if location and ".." not in location and not (path.parent / location).exists():
            raise HwnasError(
                f"{path}: its weights are stored in {location}, which is not beside it (copy "
                "the .onnx file together with its data file)"
            )
        file = path.parent / location if location and ".." not in location else None
        if file is not None and file.is_file():  # what loading it reads, before it is read
            size = file.stat().st_size
            offset = int(info.offset or 0)
            total += int(info.length) if info.length else max(size - offset, 0)
    if total > MAX_ONNX_BYTES:
        raise HwnasError(
            f"{path}: its external data hold {total / 2**30:.1f} GiB of weights; hwnas runs "
            "models up to 2 GiB (one protobuf message)"
        )


def content_hash(*parts: str | bytes) -> str:
    """Stable 16-hex-digit SHA-256 digest of the parts (used as a model hash)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]


def count_params_flops(model: torch.nn.Module, input_shape: tuple[int, ...]) -> tuple[int, int]:
    """Parameters and FLOPs of one forward pass.

    FLOPs follow the NAS-Bench-201 convention of counting multiply-accumulates of the
    convolution (1-D, 2-D, 3-D) and linear layers, a multi-head attention's input and output
    projections among them (batch norm, pooling, additions and the attention's own matrix
    products are not counted).

    Args:
        model: the network.
        input_shape: (B, C, H, W); FLOPs are for the whole batch.

    Returns:
        (number of parameters, FLOPs).
    """
    import torch

    _, params, macs = forward_counted(model, torch.zeros(input_shape))
    return params, macs


def forward_counted(
    model: torch.nn.Module, x: torch.Tensor, live_only: bool = False
) -> tuple[torch.Tensor, int, int]:
    """One eval-mode forward pass of ``x`` ((B, C, H, W) for images) that also counts parameters and
    multiply-accumulates (see :func:`count_params_flops`; MACs are for the whole batch).

    Args:
        model: the network.
        x: its input.
        live_only: count only the MACs of layers whose output reaches the network's output
            (found on the autograd graph of this pass): a layer whose result the network
            discards (a NAS-Bench-201 cell's node that no edge takes to the output) is
            executed by PyTorch, but the ONNX exporter leaves it out of the graph. Otherwise
            every layer executed counts (the benchmarks' convention).

    Returns:
        (the output, number of parameters, multiply-accumulates).
    """
    import torch
    from torch import nn

    counted: list[tuple[Any, int]] = []  # (the layer output's autograd node, its MACs)

    def add(out, n: int) -> None:
        counted.append((out.grad_fn if live_only else None, n))

    def conv_hook(module, _inp, out):  # Conv1d, Conv2d, Conv3d
        k = math.prod(module.kernel_size)
        add(out, out.numel() * (module.in_channels // module.groups) * k)

    def linear_hook(module: nn.Linear, _inp, out):
        add(out, out.numel() * module.in_features)

    def attention_hook(module: nn.MultiheadAttention, args, kwargs, out):
        # its input and output projections are linear layers it applies through its own
        # weights (F.multi_head_attention_forward), so no Linear hook sees them
        names = ("query", "key", "value")
        given = [*args, *(kwargs[n] for n in names[len(args) :] if n in kwargs)][:3]
        n = sum(t.numel() for t in given) * module.embed_dim
        add(out[0], n + out[0].numel() * module.embed_dim)

    handles = []
    for m in model.modules():
        if isinstance(m, nn.modules.conv._ConvNd) and not m.transposed:
            handles.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            handles.append(m.register_forward_hook(linear_hook))
        elif isinstance(m, nn.MultiheadAttention):
            handles.append(m.register_forward_hook(attention_hook, with_kwargs=True))
    try:
        with torch.set_grad_enabled(live_only), one_torch_thread():
            # an input that requires grad: every layer that depends on it gets an autograd node
            # (a copy, not the leaf: a network may change its input in place)
            out = model.eval()(x.detach().requires_grad_(True).clone() if live_only else x)
    finally:
        for h in handles:
            h.remove()
    live = _autograd_nodes(out) if live_only else set()
    # a layer without a node (it depends on neither the input nor a trainable weight) counts
    macs = sum(n for node, n in counted if node is None or node in live)
    params = sum(p.numel() for p in model.parameters())
    return out.detach(), params, macs


def _autograd_nodes(out: torch.Tensor) -> set:
    """The autograd nodes ``out`` was computed through (what reaches it)."""
    seen: set = set()
    todo = [out.grad_fn] if out.grad_fn is not None else []
    while todo:
        node = todo.pop()
        if node in seen:
            continue
        seen.add(node)
        todo.extend(n for n, _ in node.next_functions if n is not None and n not in seen)
    return seen


WEIGHT_TYPES = frozenset((1, 10, 11, 16))
"""The ``TensorProto`` data types of weights: FLOAT, FLOAT16, DOUBLE, BFLOAT16 (the integer
initializers of an exported graph are shapes and indices)."""


def weight_count(model: onnx.ModelProto) -> int:
    """The weights ``model`` holds: the elements of its graph's floating-point initializers
    (what ``params`` on a zoo card counts, and ``hwnas zoo verify`` counts again). An exported
    network's batch norms that follow a convolution are folded into it, and layers whose
    results the network discards are left out: the file's own count, not PyTorch's."""
    return sum(math.prod(t.dims) for t in model.graph.initializer if t.data_type in WEIGHT_TYPES)


def graph_signature(model: onnx.ModelProto) -> str:
    """A 16-hex-digit digest of the network ``model``'s graph computes, weights aside: its
    nodes in order (operator, domain, attributes, which values they take), the type and shape
    of its inputs, weights and outputs, and its opsets; names, weight values, metadata and
    doc strings do not count. Two zoo entries with the same signature ship the same network
    (a NAS-Bench-201 cell whose extra operations compute results it discards exports to the
    graph of the cell without them)."""
    g = model.graph
    weights = {t.name: t for t in g.initializer}
    names: dict[str, str] = {}
    parts: list[Any] = []
    for i, value in enumerate(v for v in g.input if v.name not in weights):
        names[value.name] = f"in{i}"
        parts.append(("input", value.type.SerializeToString()))

    def name(value: str) -> str:
        if value and value not in names:
            t = weights.get(value)
            names[value] = f"w{len(parts)}" if t is not None else f"?{value}"
            if t is not None:
                parts.append(("weight", names[value], t.data_type, tuple(t.dims)))
        return names.get(value, "")

    for k, node in enumerate(g.node):
        taken = tuple(name(v) for v in node.input)
        for j, v in enumerate(node.output):
            names[v] = f"v{k}.{j}"
        attrs = tuple(sorted((a.name, a.SerializeToString()) for a in node.attribute))
        parts.append(("node", node.domain, node.op_type, taken, len(node.output), attrs))
    for value in g.output:
        parts.append(("output", name(value.name), value.type.SerializeToString()))
    parts.append(("opset", tuple(sorted((o.domain, o.version) for o in model.opset_import))))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


@dataclass
class ExportedModel:
    """A network exported for the zoo.

    Attributes:
        onnx_bytes: the ONNX model (no metadata yet).
        params: the weights it holds (:func:`weight_count`).
        flops: multiply-accumulates of the conv and linear layers it computes (those whose
            output reaches the network's output) for one image.
        input_shape: (1, C, H, W).
        test_input: float32 array, shape ``input_shape``.
        test_output: the PyTorch module's logits on ``test_input``, shape (1, num_classes).
        weights: ``torch.save`` bytes of the state dict (trained weights), or None.
        test_label: the true label of ``test_input`` when it is a real image, else None.
    """

    onnx_bytes: bytes
    params: int
    flops: int
    input_shape: tuple[int, ...]
    test_input: np.ndarray
    test_output: np.ndarray
    weights: bytes | None = None
    test_label: int | None = None


def from_module(
    model: torch.nn.Module,
    input_shape: tuple[int, ...],
    test_input: np.ndarray,
    test_label: int | None = None,
    keep_weights: bool = False,
) -> ExportedModel:
    """Export a module: ONNX bytes, the weights they hold (:func:`weight_count`), the
    multiply-accumulates of the layers they compute (layers whose results the module discards
    are left out by the exporter, and not counted), and its own output on ``test_input`` (the
    reference ONNX Runtime is checked against).

    Args:
        model: the network (put in eval mode, on the CPU).
        input_shape: (1, C, H, W).
        test_input: float32, shape ``input_shape``.
        test_label: the true label of ``test_input`` (a real image), if known.
        keep_weights: also keep the state dict (``torch.save`` bytes) for ``weights.pt``.
    """
    import onnx
    import torch

    model = model.cpu().eval()
    x = torch.from_numpy(np.array(test_input, dtype=np.float32))
    output, _params, macs = forward_counted(model, x, live_only=True)
    output, flops = output.numpy(), macs // max(1, x.shape[0])  # per image
    data = export_onnx(model, input_shape)
    params = weight_count(onnx.load_from_string(data))
    weights = None
    if keep_weights:
        buffer = io.BytesIO()
        torch.save(model.state_dict(), buffer)
        weights = buffer.getvalue()
    return ExportedModel(
        data, params, flops, tuple(input_shape), test_input, output, weights, test_label
    )
