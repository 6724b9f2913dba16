"""ONNX Runtime vs PyTorch on the zoo of a supernet search over a declared space.

For each zoo model of a run folder, rebuilds the PyTorch network of its arch at the supernet's
size (``summary.json``: width, profile), loads ``weights.pt``, runs both it and ``model.onnx``
(ONNX Runtime, CPU) on the same random batch of 8 and prints the largest absolute difference of
the logits (the goal: at most 1e-4).

    python experiments/zoo_onnx_check.py runs/<study>
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import torch

from hwnas.spaces import get_space
from hwnas.spaces.declared.network import DeclaredNetwork


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="run folder of hwnas search (supernet strategy)")
    args = parser.parse_args()
    summary = json.loads((args.run / "summary.json").read_text())
    space = get_space(summary["settings"]["space"])
    config = summary["supernet"]["config"]
    print("| zoo model | arch | input | max abs diff | max abs logit |")
    print("|---|---|---|---|---|")
    worst = 0.0
    for card_path in sorted(args.run.glob("zoo/*/card.json")):
        card = json.loads(card_path.read_text())
        arch = space.parse(card["arch"])
        # the card's input (batch 1): "input": {"shape": [1, C, H, W]} since the zoo package
        # (hwnas/zoo/card.py); run folders written before it have a top-level "input_shape"
        full = card["input"]["shape"] if "input" in card else card["input_shape"]
        shape = tuple(full[1:])
        values = {k: (v,) for k, v in space.values(arch).items()}
        net = DeclaredNetwork(
            space, config["profile"], values, config["width"], card["num_classes"], shape
        )
        net.load_state_dict(torch.load(card_path.parent / "weights.pt"))
        x = np.random.default_rng(0).standard_normal((8, *shape)).astype(np.float32)
        session = ort.InferenceSession(
            str(card_path.parent / "model.onnx"), providers=["CPUExecutionProvider"]
        )
        got = session.run(None, {"input": x})[0]
        with torch.no_grad():
            want = net.eval()(torch.from_numpy(x)).numpy()
        diff = float(np.abs(got - want).max())
        worst = max(worst, diff)
        print(
            f"| {card_path.parent.name} | `{arch.text[:60]}` | {list(shape)} | {diff:.2e} "
            f"| {float(np.abs(want).max()):.2f} |"
        )
    print(f"largest difference: {worst:.2e} ({'within' if worst <= 1e-4 else 'ABOVE'} 1e-4)")


if __name__ == "__main__":
    main()
