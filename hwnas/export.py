"""PyTorch -> ONNX export, model hashing, and parameter/FLOP counts.

Export uses the TorchScript exporter (``dynamo=False``, opset 17): 0.3-1 s per NAS-Bench-201
network against 3-10 s for the dynamo exporter, and the result passes the full ONNX checker.
"""

from __future__ import annotations

import hashlib
import io
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from hwnas.errors import HwnasError

if TYPE_CHECKING:  # pragma: no cover
    import onnx
    import torch

OPSET = 17
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
    """
    import onnx
    import torch

    model = model.eval()
    example = torch.zeros(input_shape, dtype=torch.float32)
    buffer = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad(), one_torch_thread():
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
    data = buffer.getvalue()
    if check:
        onnx.checker.check_model(onnx.load_from_string(data), full_check=True)
    return data


def load_onnx(path: str | Path) -> onnx.ModelProto:
    """Load and check an ONNX file.

    Raises:
        HwnasError: missing, unreadable or invalid ONNX (one line naming the file).
    """
    import onnx

    path = Path(path)
    if not path.is_file():
        raise HwnasError(f"ONNX file not found: {path}")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx raises DecodeError, ValidationError, ...
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise HwnasError(f"corrupt or invalid ONNX file {path}: {first}") from None
    return model


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
    convolution and linear layers (batch norm, pooling and additions are not counted).

    Args:
        model: the network.
        input_shape: (B, C, H, W); FLOPs are for the whole batch.

    Returns:
        (number of parameters, FLOPs).
    """
    import torch

    _, params, macs = forward_counted(model, torch.zeros(input_shape))
    return params, macs


def forward_counted(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """One eval-mode forward pass of ``x`` (B, C, H, W) that also counts parameters and
    multiply-accumulates (see :func:`count_params_flops`; MACs are for the whole batch).

    Returns:
        (the output, number of parameters, multiply-accumulates).
    """
    import torch
    from torch import nn

    macs = 0

    def conv_hook(module: nn.Conv2d, _inp, out):
        nonlocal macs
        k = module.kernel_size[0] * module.kernel_size[1]
        macs += out.numel() * (module.in_channels // module.groups) * k

    def linear_hook(module: nn.Linear, _inp, out):
        nonlocal macs
        macs += out.numel() * module.in_features

    handles = []
    for m in model.modules():
        if isinstance(m, nn.Conv2d):
            handles.append(m.register_forward_hook(conv_hook))
        elif isinstance(m, nn.Linear):
            handles.append(m.register_forward_hook(linear_hook))
    try:
        with torch.no_grad(), one_torch_thread():
            out = model.eval()(x)
    finally:
        for h in handles:
            h.remove()
    params = sum(p.numel() for p in model.parameters())
    return out, params, macs
