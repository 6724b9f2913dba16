"""Models that are not one float image, measured and predicted on this machine's ``cpu``.

Builds text models written from their papers in PyTorch (a 2-layer LSTM classifier at 50
tokens; a 2-layer encoder at 64 tokens with one input and with ids + mask; BERT-base, Devlin
et al. 2019: 12 layers, 768 wide, 12 heads, token, position and segment embeddings, 128
tokens, ids + segment ids + mask, exported once with the TorchScript exporter and once with
the default exporter, which writes its weights to ``model.onnx.data``), plus well-known CNNs
at small sizes (:mod:`hwnas.known_networks`), ResNet-18 quantized to int8 (dynamically and
statically, by ONNX Runtime's quantization tool) and a GRU cell stepped by a scripted loop (an
ONNX ``Loop``), and prints for each the latency ``hwnas
measure`` takes, the kernel-level prediction ``hwnas predict`` gives with its 90% interval, and
whether the measurement is inside. The prediction uses whatever calibration the machine's store
holds (``hwnas refset measure --device cpu --space vit`` / ``--space mobilenetv4``: run them
first for calibrated numbers).

    python experiments/onnx_beyond_images.py [--folder DIR] [--no-bert-base]

Takes 5-6 minutes on a 2-core VM (BERT-base: ~350 ms a run, ~30 s of kernel timing).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path


def text_models(folder: Path, bert_base: bool) -> list[tuple[str, Path, dict]]:
    """(label, path, dims) of the text models, exported to ``folder``."""
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self, vocab, d, layers, heads, max_pos=512, segments=0):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_pos, d)
            self.seg = nn.Embedding(segments, d) if segments else None
            self.norm = nn.LayerNorm(d)
            layer = nn.TransformerEncoderLayer(d, heads, 4 * d, batch_first=True,
                                               activation="gelu")  # fmt: skip
            self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = nn.Linear(d, 2)

        def forward(self, ids, *rest):
            pos = torch.arange(ids.shape[1]).unsqueeze(0)
            x = self.tok(ids) + self.pos(pos)
            mask = None
            if self.seg is not None:
                x = x + self.seg(rest[0])
            if rest:
                mask = rest[-1] == 0
            return self.head(self.enc(self.norm(x), src_key_padding_mask=mask)[:, 0])

    torch.manual_seed(0)
    out = []

    def export(model, names, seq, label, dynamo=False):
        args = tuple(torch.randint(0, 2, (1, seq)) if n != "input_ids"
                     else torch.randint(0, 1000, (1, seq)) for n in names)  # fmt: skip
        path = folder / f"{label}.onnx"
        dynamic = {n: {0: "batch", 1: "sequence_length"} for n in names}
        kwargs = {"dynamic_shapes": None} if dynamo else {"dynamic_axes": dynamic}
        torch.onnx.export(model.eval(), args, str(path), input_names=list(names), dynamo=dynamo,
                          **kwargs)  # fmt: skip
        out.append((label, path, {} if dynamo else {"sequence_length": seq}))

    class Recurrent(nn.Module):  # an LSTM text classifier (Hochreiter & Schmidhuber, 1997)
        def __init__(self):
            super().__init__()
            self.tok, self.lstm = nn.Embedding(5000, 128), nn.LSTM(128, 256, 2, batch_first=True)
            self.head = nn.Linear(256, 4)

        def forward(self, ids):
            return self.head(self.lstm(self.tok(ids))[0][:, -1])

    export(Recurrent(), ["input_ids"], 50, "lstm-2x256 ids")
    small = Encoder(1000, 128, 2, 4)
    export(small, ["input_ids"], 64, "encoder-2x128 ids")
    export(small, ["input_ids", "attention_mask"], 64, "encoder-2x128 ids+mask")
    if bert_base:
        bert = Encoder(30522, 768, 12, 12, segments=2)
        names = ["input_ids", "token_type_ids", "attention_mask"]
        export(bert, names, 128, "bert-base-128")
        export(bert, names, 128, "bert-base-128 (external data)", dynamo=True)
    return out


def cnn_models(folder: Path) -> list[tuple[str, Path, dict]]:
    from hwnas.export import export_onnx
    from hwnas.known_networks import build_network

    out = []
    for name, side in [("resnet18", 32), ("mobilenet_v2", 32), ("mobilenet_v3_small", 32),
                       ("mobilenet_v3_small", 96), ("shufflenet_v2", 64), ("efficientnet_b0", 64),
                       ("resnet50", 64), ("resnet18", 224), ("vit_tiny", 224)]:  # fmt: skip
        path = folder / f"{name}_{side}.onnx"
        path.write_bytes(export_onnx(build_network(name, 1000, 1.0, side), (1, 3, side, side)))
        out.append((f"{name} {side}x{side}", path, {}))
    return out


def control_flow_models(folder: Path) -> list[tuple[str, Path, dict]]:
    """A GRU cell written by hand and stepped over 40 tokens by a Python loop, exported by
    TorchScript's scripting: an ONNX Loop whose body reads the cell's weights and the input
    from the graph around it (hwnas could not read it before 2026-11-29)."""
    import torch
    from torch import nn

    class Cell(nn.Module):
        def __init__(self, d=128, hidden=256):
            super().__init__()
            self.x, self.h = nn.Linear(d, 3 * hidden), nn.Linear(hidden, 3 * hidden)
            self.hd, self.out = hidden, nn.Linear(hidden, 10)

        def forward(self, x):  # (batch, tokens, d)
            state = torch.zeros(x.size(0), self.hd)
            for t in range(x.size(1)):
                gx, gh = self.x(x[:, t]), self.h(state)
                r = torch.sigmoid(gx[:, : self.hd] + gh[:, : self.hd])
                z = torch.sigmoid(gx[:, self.hd : 2 * self.hd] + gh[:, self.hd : 2 * self.hd])
                n = torch.tanh(gx[:, 2 * self.hd :] + r * gh[:, 2 * self.hd :])
                state = (1 - z) * n + z * state
            return self.out(state)

    torch.manual_seed(0)
    path = folder / "scripted_gru_cell.onnx"
    torch.onnx.export(torch.jit.script(Cell().eval()), (torch.randn(1, 40, 128),), str(path),
                      dynamo=False, input_names=["x"])  # fmt: skip
    return [("GRU cell, scripted Loop (40 steps)", path, {})]


def int8_models(folder: Path) -> list[tuple[str, Path, dict]]:
    """ResNet-18 at 64x64 quantized to int8 by ONNX Runtime's own tool, dynamically
    (``ConvInteger``) and statically in the QDQ format (``QLinearConv``), calibrated on 4
    random images."""
    import numpy as np
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    from hwnas.export import export_onnx
    from hwnas.known_networks import build_network

    class Images(CalibrationDataReader):
        def __init__(self):
            self.rng, self.n = np.random.default_rng(0), 0

        def get_next(self):
            self.n += 1
            x = self.rng.standard_normal((1, 3, 64, 64)).astype(np.float32)
            return {"input": x} if self.n <= 4 else None

    float_path = folder / "resnet18_64_float.onnx"
    float_path.write_bytes(export_onnx(build_network("resnet18", 1000, 1.0, 64), (1, 3, 64, 64)))
    dynamic, qdq = folder / "resnet18_64_int8_dynamic.onnx", folder / "resnet18_64_int8_qdq.onnx"
    quantize_dynamic(float_path, dynamic, weight_type=QuantType.QInt8)
    quantize_static(float_path, qdq, Images(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)  # fmt: skip
    return [("resnet18 64x64 int8 (dynamic)", dynamic, {}),
            ("resnet18 64x64 int8 (static QDQ)", qdq, {})]  # fmt: skip


def main() -> None:
    import warnings

    import hwnas

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=None, help="where the models go")
    parser.add_argument("--no-bert-base", action="store_true", help="skip BERT-base")
    args = parser.parse_args()
    folder = args.folder or Path(tempfile.mkdtemp(prefix="hwnas-beyond-"))
    folder.mkdir(parents=True, exist_ok=True)
    warnings.filterwarnings("ignore")
    models = text_models(folder, not args.no_bert_base) + cnn_models(folder) + int8_models(folder)
    models += control_flow_models(folder)
    print(f"{'model':32s} {'measured ms':>11s} {'predicted ms':>12s} {'90% interval':>18s}"
          f" {'ratio':>6s}  inside")  # fmt: skip
    inside = 0
    for label, path, dims in models:
        m = hwnas.measure(path, device="cpu", dims=dims)[0].latency.value
        p = hwnas.predict(path, device="cpu", dims=dims)[0]
        ok = p.low <= m <= p.high
        inside += ok
        print(f"{label:32s} {m:11.3f} {p.value:12.3f} {p.low:8.3g} - {p.high:<8.3g} "
              f"{m / p.value:6.2f}  {'yes' if ok else 'no'}")  # fmt: skip
    print(f"{inside} of {len(models)} measurements inside their 90% interval; models in {folder}")


if __name__ == "__main__":
    main()
