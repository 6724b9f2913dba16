"""Declared spaces' features: equal to what the ONNX reader finds in the exported network, and
``hwnas predict`` on a user's space file through the default artifact's graph path."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from hwnas.cli import main
from hwnas.predictors.graph import COLUMN, GRAPH_COLUMNS, onnx_graph_features


@pytest.mark.parametrize("name", ["tiny", "vit"])
def test_declared_features_equal_the_exported_onnx_graph(name, hwnas_home):
    """A user's file (MBConv with squeeze-excite, UIB, skip, pool) on two architectures, and
    the ViT space's smallest network (exports take the time)."""
    import onnx

    from hwnas.export import export_onnx
    from hwnas.predictors.featurize.declared import DeclaredFeaturizer
    from hwnas.spaces import get_space, reload_spaces

    (hwnas_home / "spaces").mkdir(exist_ok=True)
    (hwnas_home / "spaces" / "tiny.yaml").write_text(TINY)
    reload_spaces()
    space = get_space(name)
    dataset = "digits" if name == "tiny" else "cifar10"
    fz = DeclaredFeaturizer(space, dataset)
    archs = space.reference_archs()[:: 9 if name == "tiny" else 10]
    got = fz.graph(archs)
    for arch, row in zip(archs, got):
        shape = (1, *space.input_shape(arch, dataset))
        data = export_onnx(space.build(arch, dataset), shape, check=False)
        want = onnx_graph_features(onnx.load_from_string(data))
        diff = {c: (a, b) for c, a, b in zip(GRAPH_COLUMNS, row, want) if not np.isclose(a, b)}
        assert not diff, f"{arch.text}: featurizer vs exported graph {diff}"
    assert got[0, COLUMN["macs_conv_depthwise" if name == "tiny" else "macs_gemm"]] > 0
    if name == "vit":  # GELU (Erf), softmax and layer norms are counted as activations
        blocks = int(fz.structural(archs[:1])[0, fz.structural_names.index("n_transformer")])
        assert got[0, COLUMN["n_act"]] >= 4 * blocks + 2  # 2 ReLU, per block: 2 LN, Softmax, Erf


def test_predict_a_users_declared_space_from_its_reference_set(tmp_path, hwnas_home, capsys):
    from hwnas.predictors import DECLARED_ARTIFACT
    from hwnas.predictors.featurize import get_featurizer
    from hwnas.spaces import get_space, reload_spaces

    (hwnas_home / "spaces").mkdir(exist_ok=True)
    (hwnas_home / "spaces" / "tiny.yaml").write_text(TINY)
    reload_spaces()
    try:
        space = get_space("tiny")
        fz = get_featurizer("tiny")
        ref = space.reference_archs()
        # a device whose latency is 0.2 ms + 1 ms per MMAC (what the graph features can see)
        ms = 0.2 + fz.flops(ref) / 1e6
        cal = tmp_path / "cal.csv"
        with open(cal, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["arch", "latency_ms"])
            w.writerows([(a.text, v) for a, v in zip(ref, ms)])
        small, big = ref[0], ref[-1]
        code = main(["predict", "--space", "tiny", "--calibration", str(cal),
                     "--arch", small.text, "--arch", big.text])  # fmt: skip
        out = capsys.readouterr()
        assert code == 0, out.err
        pred = [float(line.split(": ")[1].split()[0]) for line in out.out.splitlines()]
        want = 0.2 + fz.flops([small, big]) / 1e6
        assert pred[0] < pred[1]
        assert np.allclose(pred, want, rtol=0.1), (pred, want)
        assert f"predictor {DECLARED_ARTIFACT}" in out.err
    finally:
        reload_spaces()


TINY = """\
name: tiny
datasets:
  digits: {classes: 10, input_shape: [3, 16, 16]}
stem:
  - {block: conv, out: 8, kernel: 3}
stages:
  - name: a
    out: {choices: [8, 16]}
    stride: 2
    depth: {choices: [1, 2]}
    layer: {block: mbconv, kernel: {choices: [3, 5]}, expand: {choices: [2, 4]}, se: 0.25}
  - name: b
    out: 16
    stride: 2
    layer:
      candidates:
        ib: {block: uib, start_kernel: 0, mid_kernel: 3, expand: 2}
        skip: {block: skip}
head:
  - {block: pool}
"""
