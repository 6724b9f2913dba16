"""Graph features: the ONNX reader on a hand-built graph, and the analytic features of every
space equal to what the reader finds in the exported networks."""

from __future__ import annotations

import numpy as np
import pytest

from hwnas.predictors.graph import COLUMN, GRAPH_COLUMNS, onnx_graph_features


def test_onnx_reader_counts_a_hand_built_graph():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w1 = numpy_helper.from_array(np.zeros((8, 3, 3, 3), np.float32), "w1")
    w2 = numpy_helper.from_array(np.zeros((8, 1, 3, 3), np.float32), "w2")
    fc = numpy_helper.from_array(np.zeros((8, 10), np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),  # dense 3x3
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=8, strides=[2, 2]),
        helper.make_node("AveragePool", ["r1"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Add", ["c2", "p"], ["a"]),
        helper.make_node("GlobalAveragePool", ["a"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("MatMul", ["f", "fc"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
        [w1, w2, fc],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    g = onnx_graph_features(model)
    assert g.shape == (len(GRAPH_COLUMNS),)
    expect = {
        "macs_conv_dense": 8 * 16 * 16 * 3 * 9,
        "macs_conv_depthwise": 8 * 8 * 8 * 9,
        "macs_gemm": 80,
        "params": 8 * 3 * 9 + 8 * 9 + 80,
        "n_conv": 2,
        "n_conv_depthwise": 1,
        "n_conv_strided": 1,
        "n_pool": 1,
        "pool_out_elems": 8 * 8 * 8,
        "n_add": 1,
        "add_elems": 8 * 8 * 8,
        "n_act": 1,
        "act_elems": 8 * 16 * 16,
        "n_global_pool": 1,
        "input_elems": 3 * 16 * 16,
    }
    for name, value in expect.items():
        assert g[COLUMN[name]] == value, name


EXAMPLES = {
    "nasbench201": [
        "|nor_conv_3x3~0|+|nor_conv_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_3x3~1|skip_connect~2|",
        # zero node 1 feeding convolutions; dead edges; identity aliasing of node 2
        "|none~0|+|skip_connect~0|nor_conv_3x3~1|+|none~0|nor_conv_1x1~1|nor_conv_3x3~2|",
        "|skip_connect~0|+|avg_pool_3x3~0|avg_pool_3x3~1|+|skip_connect~0|nor_conv_1x1~1|none~2|",
    ],
    "fbnet": [
        "k3_e1_g2 k5_e6 skip k3_e3 k5_e1_g2 skip k3_e6 k5_e3 skip k3_e1 k5_e6 "
        "k3_e3 k5_e1 skip k3_e6 k5_e3 k3_e1_g2 skip k5_e6 k3_e3 k5_e1 k3_e6",
    ],
    "ofa": [
        "ks=3,5,7,3,5,7,3,5,7,3,5,7,3,5,7,3,5,7,3,5;e=3,4,6,3,4,6,3,4,6,3,4,6,3,4,6,3,4,6,3,4;"
        "d=2,3,4,2,3;r=160",
    ],
}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("space", "text"), [(s, t) for s, texts in EXAMPLES.items() for t in texts]
)
def test_analytic_features_equal_the_exported_onnx_graph(space, text):
    import onnx
    import torch

    from hwnas.export import export_onnx
    from hwnas.predictors.featurize import get_featurizer

    fz = get_featurizer(space)
    arch = fz.space.parse(text)
    torch.manual_seed(0)
    shape = (1, *fz.space.input_shape(arch, fz.dataset))
    exported = onnx_graph_features(
        onnx.load_from_string(export_onnx(fz.space.build(arch, fz.dataset), shape))
    )
    analytic = fz.graph([arch])[0]
    mismatch = {
        c: (a, e) for c, a, e in zip(GRAPH_COLUMNS, analytic, exported) if not np.isclose(a, e)
    }
    assert not mismatch
    assert analytic[COLUMN["n_conv"]] > 0


@pytest.mark.parametrize("space", ["nasbench201", "fbnet", "ofa"])
def test_featurizers_give_finite_features_of_the_documented_shape(space):
    from hwnas.predictors.featurize import get_featurizer

    fz = get_featurizer(space)
    archs = fz.space.all_archs()[:50]
    assert np.array_equal(fz.encoding(archs), fz.space.encode(archs))
    s, g = fz.structural(archs), fz.graph(archs)
    assert s.shape == (50, len(fz.structural_names)) and (s >= 0).all()
    assert g.shape == (50, len(GRAPH_COLUMNS)) and np.isfinite(g).all() and (g >= 0).all()
    assert len(np.unique(g[:, COLUMN["params"]])) > 1  # architectures differ


@pytest.mark.parametrize(
    ("ops", "counts"),
    [
        # pooling node 0 three times (node 1 is node 0 through its skip): one pooling; node 2's
        # own pooling input is new; no zeroing; no convolution
        (("skip_connect", "avg_pool_3x3", "avg_pool_3x3", "avg_pool_3x3", "avg_pool_3x3",
          "avg_pool_3x3"), (2, 0, 0)),
        # zeroing nodes 0, 1 and 2, node 1 its own tensor: three zeroings
        (("nor_conv_3x3", "none", "none", "none", "none", "none"), (0, 3, 1)),
        # three convolutions read node 0: one ReLU, the fourth reads node 2; both zeroings
        # read node 1: one
        (("nor_conv_1x1", "nor_conv_3x3", "none", "nor_conv_1x1", "none", "nor_conv_3x3"),
         (0, 1, 2)),
    ],
)  # fmt: skip
def test_merged_counts_follow_nas_bench_201s_own_network_after_merging(ops, counts):
    """What PyTorch Mobile runs of NAS-Bench-201's reference network code (every edge, a
    ``none`` edge as x.mul(0.)) once it merges identical parameter-free operations: the
    Raspberry Pi 5's PyTorch Mobile latency follows these counts (docs/benchmarks.md)."""
    from hwnas.predictors.featurize import get_featurizer

    fz = get_featurizer("nasbench201")
    arch = fz.space.from_ops(ops)
    assert tuple(fz.merged([arch])[0]) == counts
    assert fz.merged(fz.space.all_archs()[:7]).shape == (7, len(fz.merged_names))


def test_transposed_convolutions_recurrent_layers_and_einsum_are_counted_and_the_rest_named(
    tmp_path, capsys
):
    """A decoder's ConvTranspose, an LSTM's and a GRU's products (every step) and a contracting
    Einsum count as MACs (exported by PyTorch, so the graphs are what users bring); a Resize is
    not counted, and it is named (GraphModel.uncounted) rather than silently left out: `hwnas
    predict --device pixel3 --onnx decoder.onnx` warns that its time is not in the prediction.
    (main: both networks read as 0 MACs of their heaviest layers, without a word.)"""
    import torch
    import torch.nn.functional as F
    from torch import nn

    from hwnas.predictors.graph import load_graph_model

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2, bias=False)

        def forward(self, x):  # (1, 16, 8, 8) -> (1, 8, 32, 32)
            return F.interpolate(self.up(x), scale_factor=2.0, mode="bilinear")

    class Recurrent(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(12, 20, batch_first=True)
            self.gru = nn.GRU(20, 6)
            self.w = nn.Parameter(torch.randn(6, 5))

        def forward(self, x):  # (1, 7, 12)
            y, _ = self.lstm(x)
            z, _ = self.gru(y.transpose(0, 1))
            return torch.einsum("tbh,ho->tbo", z, self.w)

    def read(net, shape, name):
        path = tmp_path / f"{name}.onnx"
        torch.onnx.export(net.eval(), torch.randn(*shape), str(path), dynamo=False)
        return load_graph_model(path)

    dec = read(Decoder(), (1, 16, 8, 8), "decoder")
    assert dec.features[COLUMN["macs_conv_dense"]] == 16 * 8 * 8 * 8 * 2 * 2  # per input pixel
    assert dec.features[COLUMN["params"]] == 16 * 8 * 2 * 2
    assert dec.uncounted == {"Resize": 1}

    rec = read(Recurrent(), (1, 7, 12), "recurrent")
    lstm = 7 * 4 * 20 * (12 + 20)  # 7 steps, 4 gates
    gru = 7 * 3 * 6 * (20 + 6)  # the GRU's first axis is its steps: 7
    einsum = 7 * 1 * 6 * 5
    assert rec.features[COLUMN["macs_gemm"]] == lstm + gru + einsum
    assert rec.uncounted == {}

    from hwnas.cli import main

    assert main(["predict", "--device", "pixel3", "--onnx", str(tmp_path / "decoder.onnx")]) == 0
    err = capsys.readouterr().err
    assert "decoder.onnx: its graph has operators this predictor's graph features do not count " \
        "(Resize x1): their time is not in the prediction" in err
    assert main(["predict", "--device", "pixel3", "--onnx", str(tmp_path / "recurrent.onnx")]) == 0
    assert "do not count" not in capsys.readouterr().err


def test_one_and_three_dimensional_convolutions_are_counted_exactly(tmp_path):
    """An audio network's Conv1d and ConvTranspose1d and a video network's Conv3d (exported by
    PyTorch) are read: their multiply-accumulates, parameters and elements are the products
    of their sizes, as for a 2-D convolution. (main: "cannot infer the shapes of Conv node",
    exit 2: `hwnas predict --onnx` could not read them at all.)"""
    import torch
    from torch import nn

    from hwnas.predictors.graph import load_graph_model

    def read(net, shape, name):
        path = tmp_path / f"{name}.onnx"
        torch.onnx.export(net.eval(), torch.randn(*shape), str(path), dynamo=False)
        return load_graph_model(path).features

    audio = read(
        nn.Sequential(nn.Conv1d(8, 16, 5, stride=2), nn.ConvTranspose1d(16, 4, 4, stride=2)),
        (1, 8, 101), "audio",
    )  # fmt: skip
    # 101 -> 49 (k5 s2) -> 100 (k4 s2)
    assert audio[COLUMN["macs_conv_dense"]] == 16 * 49 * 8 * 5 + 16 * 49 * 4 * 4
    assert audio[COLUMN["params"]] == 16 * 8 * 5 + 16 * 4 * 4
    assert audio[COLUMN["n_conv"]] == 2 and audio[COLUMN["n_conv_strided"]] == 1
    assert audio[COLUMN["conv_out_elems"]] == 16 * 49 + 4 * 100

    video = read(
        nn.Sequential(nn.Conv3d(3, 8, 3, padding=1), nn.Conv3d(8, 8, (1, 1, 1), groups=8)),
        (1, 3, 4, 10, 12), "video",
    )  # fmt: skip
    assert video[COLUMN["macs_conv_dense"]] == 8 * 4 * 10 * 12 * 3 * 27
    assert video[COLUMN["macs_conv_depthwise"]] == 8 * 4 * 10 * 12
    assert video[COLUMN["params"]] == 8 * 3 * 27 + 8
    assert video[COLUMN["input_elems"]] == 3 * 4 * 10 * 12


@pytest.mark.slow
def test_modules_exported_as_local_functions_are_counted_as_when_inlined(tmp_path):
    """PyTorch's ``export_modules_as_functions`` writes each block as an ONNX local function
    (a node of the model's own domain): its convolutions are counted as in the plain export.
    (main: "operators this predictor's graph features do not count (Block x3)", and 3 of the
    4 convolutions left out.)"""
    import torch
    from torch import nn

    from hwnas.predictors.graph import load_graph_model

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(8, 8, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x)) + x

    net = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), Block(), Block(), Block()).eval()
    x = torch.randn(1, 3, 32, 32)
    plain, functions = tmp_path / "plain.onnx", tmp_path / "functions.onnx"
    torch.onnx.export(net, (x,), str(plain), dynamo=False)
    torch.onnx.export(net, (x,), str(functions), dynamo=False, export_modules_as_functions={Block})
    import onnx

    assert onnx.load(str(functions)).functions  # the blocks are functions
    read = load_graph_model(functions)
    assert read.uncounted == {}
    assert read.features[COLUMN["n_conv"]] == 4
    np.testing.assert_array_equal(read.features, load_graph_model(plain).features)


def test_opset_23_attention_and_rms_normalization_are_counted(tmp_path, capsys):
    """PyTorch's dynamo exporter writes ``scaled_dot_product_attention`` and ``nn.RMSNorm`` as
    ONNX opset 23's ``Attention`` and ``RMSNormalization``: their products (queries x keys,
    scores x values, per head) and normalisations are counted. (main: "operators this
    predictor's graph features do not count (Attention x1, RMSNormalization x1)", the
    attention's products left out.)"""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from hwnas.predictors.graph import load_graph_model
    from hwnas.predictors.kernels.features import macs
    from hwnas.predictors.kernels.read import read_kernels

    t, d, heads = 32, 64, 4
    w = {n: numpy_helper.from_array(np.full((d, d), 0.01, np.float32), n) for n in "qkv"}
    scale = numpy_helper.from_array(np.ones(d, np.float32), "g")
    nodes = [helper.make_node("RMSNormalization", ["x", "g"], ["n"], axis=-1)]
    nodes += [helper.make_node("MatMul", ["n", n], [n + "_"]) for n in "qkv"]
    nodes.append(helper.make_node("Attention", ["q_", "k_", "v_"], ["y"], q_num_heads=heads,
                                  kv_num_heads=heads))  # fmt: skip
    graph = helper.make_graph(
        nodes, "attention", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, t, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, t, d])], [*w.values(), scale],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    path = tmp_path / "attention.onnx"
    onnx.save(model, str(path))
    g = load_graph_model(path)
    assert g.uncounted == {}
    per_head = t * t * (d // heads) * 2  # queries x keys, then scores x values
    assert g.features[COLUMN["macs_gemm"]] == 3 * t * d * d + heads * per_head
    assert g.features[COLUMN["n_act"]] == 2  # the normalisation and the attention's softmax
    assert g.features[COLUMN["act_elems"]] == t * d + heads * t * t
    (attention,) = [k for k in read_kernels(path.read_bytes()).kernels if k.op == "Attention"]
    assert macs(attention) == heads * per_head  # what its time follows before it is timed

    from hwnas.cli import main

    assert main(["predict", "--device", "pixel3", "--onnx", str(path)]) == 0
    assert "do not count" not in capsys.readouterr().err


@pytest.mark.slow
def test_a_sequence_first_transformer_counts_every_token_and_shared_weights(tmp_path):
    """PyTorch's ``nn.TransformerEncoder`` (sequence first, as by default) exported by the
    TorchScript exporter: its projections read (tokens, batch, width) tensors and (tokens x
    batch, width) matrices, and its second layer's weights, equal to the first's, are shared
    through Identity nodes. Every token's products and both layers' weights are counted.
    (main: the first axis read as the batch, so 1 token of 10 counted, and the second
    layer's weights read as a (1, width) activation: 8.3x too few MACs, half the params.)"""
    import torch
    from torch import nn

    from hwnas.predictors.graph import load_graph_model

    tokens, width, heads, ff = 10, 32, 2, 64
    layer = nn.TransformerEncoderLayer(width, heads, ff, dropout=0.0)
    net = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    path = tmp_path / "encoder.onnx"
    torch.onnx.export(net, (torch.randn(tokens, 1, width),), str(path), dynamo=False)
    g = load_graph_model(path)
    assert g.uncounted == {}
    per_layer = tokens * width * (3 * width + width + 2 * ff) + 2 * tokens * tokens * width
    assert g.features[COLUMN["macs_gemm"]] == 2 * per_layer
    assert g.features[COLUMN["params"]] == 2 * (4 * width * width + 2 * width * ff)


def test_onnx_runtimes_fused_attention_nodes_are_counted(tmp_path):
    """ONNX Runtime's transformer optimiser writes BERT-like models with its own fused
    ``com.microsoft`` ``Attention`` (the packed query/key/value projection, then attention)
    and ``MultiHeadAttention`` (already projected) nodes: their products are counted, and the
    model runs in ONNX Runtime as written. (main: both named as uncounted.)"""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from hwnas.predictors.graph import load_graph_model

    seq, hidden, heads = 16, 32, 4
    w = numpy_helper.from_array(np.full((hidden, 3 * hidden), 0.01, np.float32), "w")
    b = numpy_helper.from_array(np.zeros(3 * hidden, np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("Attention", ["x", "w", "b"], ["y"], domain="com.microsoft",
                          num_heads=heads),
         helper.make_node("MultiHeadAttention", ["y", "y", "y"], ["z"], domain="com.microsoft",
                          num_heads=heads)], "fused",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, seq, hidden])], [w, b],
    )  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    path = tmp_path / "fused.onnx"
    onnx.save(model, str(path))
    x = np.random.default_rng(0).standard_normal((1, seq, hidden)).astype(np.float32)
    ran = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    assert ran[0].shape == (1, seq, hidden)
    g = load_graph_model(path)
    assert g.uncounted == {}
    attention = seq * seq * (hidden + hidden)  # queries x keys, scores x values, all heads
    assert g.features[COLUMN["macs_gemm"]] == seq * hidden * 3 * hidden + 2 * attention
    assert g.features[COLUMN["params"]] == hidden * 3 * hidden
    assert g.features[COLUMN["act_elems"]] == 2 * heads * seq * seq


def test_windowed_attention_counts_every_window_with_a_dynamic_batch():
    """Swin folds its windows into the batch axis, (batch x windows, tokens, width): from a
    dynamic-batch export (hwnas's own) that symbolic axis was read as the batch and the
    attention counted for one window (Swin C=48: 905 instead of 1161 MMACs). The reader now
    takes such an axis from one run at batch 1, and counts what the static export counts."""
    import onnx
    import torch

    from hwnas.export import export_onnx
    from hwnas.predictors.graph import read_graph

    class Windows(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = torch.nn.Linear(8, 24)

        def forward(self, x):  # (B, 8, 8, 8) -> 4 windows of 4x4 tokens, sizes from x.shape
            x = x.permute(0, 2, 3, 1)
            b, h, w, d = x.shape
            t = x.reshape(b, h // 4, 4, w // 4, 4, d).permute(0, 1, 3, 2, 4, 5)
            t = t.reshape(-1, 16, d)
            q, k, v = self.qkv(t).reshape(t.shape[0], 16, 3, d).permute(2, 0, 1, 3)
            return ((q @ k.transpose(1, 2)).softmax(-1) @ v).reshape(b, -1)

    def macs(data: bytes) -> float:
        f, _ = read_graph(onnx.load_from_string(data))
        return float(sum(f[i] for n, i in COLUMN.items() if n.startswith("macs_")))

    net = Windows().eval()
    dynamic = export_onnx(net, (1, 8, 8, 8))
    static = onnx.load_from_string(dynamic)
    for inp in static.graph.input:  # the same model at a written batch of 1
        inp.type.tensor_type.shape.dim[0].dim_value = 1
    expected = 4 * 16 * 8 * 24 + 2 * 4 * 16 * 16 * 8  # qkv, then q k^T and (.) v per window
    assert macs(dynamic) == expected
    assert macs(static.SerializeToString()) == expected
