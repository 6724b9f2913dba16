"""MobileNetV4-Conv-S and -M as architectures of the `mobilenetv4` / `mobilenetv4_m` spaces,
checked against the official definitions (Qin et al., ECCV 2024).

Prints, for each model at ImageNet resolution (224x224, 1000 classes), the parameters and
multiply-accumulates of the network the space language builds, the paper's figures (MNv4-Conv-S
3.8M params / 0.2G MACs, MNv4-Conv-M 9.7M / 1.0G), and, when timm is importable (it is not a
dependency of hwnas: ``pip install timm``), timm's ``mobilenetv4_conv_small`` / ``_medium``
parameter count and the largest output difference after copying timm's weights into ours in
order (same layers in the same order give 0 up to float rounding).

    python experiments/mobilenetv4_reference.py
"""

from __future__ import annotations

import argparse

import torch

from hwnas.export import count_params_flops
from hwnas.spaces import get_space

UIB = {  # (start kernel, middle kernel, expansion) per layer, from the official block specs
    "mobilenetv4": {
        "s2": [(5, 5, 3), (0, 3, 2), (0, 3, 2), (0, 3, 2), (0, 3, 2), (3, 0, 4)],
        "s3": [(3, 3, 6), (5, 5, 4), (0, 5, 4), (0, 5, 3), (0, 3, 4), (0, 3, 4)],
    },
    "mobilenetv4_m": {
        "s1": [(3, 5, 4), (3, 3, 2)],
        "s2": [(3, 5, 6), (3, 3, 4), (3, 3, 4), (3, 5, 4), (3, 3, 4), (3, 0, 4), (0, 0, 2),
               (3, 0, 4)],
        "s3": [(5, 5, 6), (5, 5, 4), (3, 5, 4), (3, 5, 4), (0, 0, 4), (3, 0, 4), (3, 5, 2),
               (5, 5, 4), (0, 0, 4), (0, 0, 4), (5, 0, 2)],
    },
}  # fmt: skip
PAPER = {"mobilenetv4": (3.8, 0.2), "mobilenetv4_m": (9.7, 1.0)}
TIMM = {"mobilenetv4": "mobilenetv4_conv_small", "mobilenetv4_m": "mobilenetv4_conv_medium"}


def reference_arch(space_name: str):
    """The official model as an architecture of the space."""
    space = get_space(space_name)
    values = {}
    for stage, layers in UIB[space_name].items():
        values[f"{stage}.d"] = str(len(layers))
        for i, (a, k, e) in enumerate(layers):
            values.update({f"{stage}.{i}.start_kernel": str(a), f"{stage}.{i}.mid_kernel": str(k)})
            values[f"{stage}.{i}.expand"] = str(e)
    for d in space.decisions:  # layers past the depth: any value
        values.setdefault(d.key, d.labels[0])
    return space, space.from_choices(values)


def main() -> None:
    # no options: --help prints the description instead of running the benchmark
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    torch.set_num_threads(1)
    try:
        import timm
    except ImportError:
        timm = None
    print("| model | params (hwnas) | MACs (hwnas) | paper | timm params | max |out - timm| |")
    print("|---|---|---|---|---|---|")
    for name in UIB:
        space, arch = reference_arch(name)
        net = space.build(arch, "imagenet")
        params, macs = count_params_flops(net, (1, 3, 224, 224))
        p_paper, m_paper = PAPER[name]
        timm_params, diff = "-", "-"
        if timm is not None:
            ref = timm.create_model(TIMM[name], pretrained=False).eval()
            timm_params = f"{sum(p.numel() for p in ref.parameters()):,}"
            src, dst = ref.state_dict(), net.state_dict()
            if [t.shape for t in src.values()] == [t.shape for t in dst.values()]:
                net.load_state_dict(dict(zip(dst, src.values())))
                x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
                with torch.no_grad():
                    diff = f"{float((net(x) - ref(x)).abs().max()):.1e}"
            else:
                diff = "layers differ"
        print(
            f"| {TIMM[name]} | {params:,} | {macs / 1e9:.3f} G | {p_paper}M / {m_paper}G "
            f"| {timm_params} | {diff} |"
        )
        print(f"|   arch | `{arch.text[:90]}...` | | | | |")


if __name__ == "__main__":
    main()
