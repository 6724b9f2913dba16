"""Per-call cost of the convolutions a supernet runs, on a CUDA GPU: float32 against mixed
precision (float16 autocast) and channels-last, with cuDNN's benchmark mode off and on, and the
first call of new depthwise shapes (what a supernet with hundreds of shapes pays once).

    python experiments/cuda_conv_first_call.py

Printed on one H100 (torch 2.11 cu130, 2026-11-27), batch 64 at 16x16, forward + backward per
call: a 3x3 depthwise convolution of 96 channels 0.17 ms in float32, 0.69 ms with mixed
precision, 0.51 ms with mixed precision and channels-last; the first call of 24 new depthwise
shapes 0.02 s in float32 and 9.8 s with mixed precision and channels-last (cuDNN builds a
kernel for each). docs/supernets.md ("On a GPU") says what it means for a search.
"""

from __future__ import annotations

import argparse
import time

import torch

CASES = [  # name, in channels, out channels, kernel, groups
    ("1x1", 64, 64, 1, 1),
    ("3x3", 32, 32, 3, 1),
    ("dw3x3", 96, 96, 3, 96),
    ("dw5x5", 96, 96, 5, 96),
    ("g2 1x1", 64, 64, 1, 2),
]
MODES = ((False, False), (True, False), (True, True))  # (mixed precision, channels-last)


def layer(c_in: int, c_out: int, k: int, groups: int, channels_last: bool):
    """A convolution and a batch of 64 at 16x16 on the GPU, in the given memory format."""
    conv = torch.nn.Conv2d(c_in, c_out, k, padding=k // 2, groups=groups, bias=False).cuda()
    x = torch.randn(64, c_in, 16, 16, device="cuda")
    if channels_last:
        conv = conv.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    return conv, x.requires_grad_()


def step(conv, x, amp: bool) -> None:
    with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
        y = conv(x)
    y.float().sum().backward()


def per_call_ms(conv, x, amp: bool, n: int = 50) -> float:
    """Forward + backward time per call after 5 warm-up calls (ms)."""
    for _ in range(5):
        step(conv, x, amp)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        step(conv, x, amp)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e3


def main() -> None:
    # no options: --help prints the description instead of running the benchmark
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU (torch.cuda.is_available() is False)")
    torch.manual_seed(0)
    for benchmark in (False, True):
        torch.backends.cudnn.benchmark = benchmark
        for name, c_in, c_out, k, g in CASES:
            row = [per_call_ms(*layer(c_in, c_out, k, g, cl), amp) for amp, cl in MODES]
            print(f"cudnn.benchmark={benchmark} {name:7s} float32 {row[0]:.3f} | mixed "
                  f"{row[1]:.3f} | mixed + channels-last {row[2]:.3f} ms per call")  # fmt: skip
    torch.backends.cudnn.benchmark = False
    for amp, cl in (MODES[0], MODES[2]):  # first call of 24 new depthwise shapes
        t = time.perf_counter()
        for c in range(8, 200, 8):
            step(*layer(c, c, 3, c, cl), amp)
        torch.cuda.synchronize()
        print(f"24 new depthwise shapes, first call each: mixed={amp} channels-last={cl}: "
              f"{time.perf_counter() - t:.2f} s")  # fmt: skip


if __name__ == "__main__":
    main()
