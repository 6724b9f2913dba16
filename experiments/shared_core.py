"""A live CPU measurement beside a process busy on the same core: what is stored, and whether it
is flagged.

Pins itself to one core (``--core``, default the last one), then measures three NAS-Bench-201
networks of 0.1 to 4 ms (CIFAR-100, batch 1) on the ``cpu`` device: on a quiet core, then beside
a busy loop pinned to the same core at the same priority, then beside one at ``nice 10``. Each
measurement is taken afresh (no store). Prints the median latency (ms), its CV across rounds,
the median round's share of waiting for the CPU (``cpu_wait_share``) and whether the timing
was flagged (``timing.max_wait_share``, 0.1 by default; ``timing.max_cv``, 15%).

    python experiments/shared_core.py [--core 1]

Needs Linux (CPU affinity, ``/proc/self/task/*/schedstat``). Run it on a machine where nothing
else uses that core, or the "quiet" row is not.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

NETWORKS = {
    "conv3x3 x6": "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~1|+|nor_conv_3x3~0|nor_conv_3x3~1|nor_conv_3x3~2|",  # noqa: E501
    "conv1x1 x3": "|nor_conv_1x1~0|+|nor_conv_1x1~0|skip_connect~1|+|none~0|skip_connect~1|nor_conv_1x1~2|",  # noqa: E501
    "skips": "|skip_connect~0|+|none~0|skip_connect~1|+|none~0|none~1|skip_connect~2|",
}

BUSY = "import os, sys\nos.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def measure_all(label: str) -> None:
    from hwnas.devices import get_device
    from hwnas.measure import arch_workload
    from hwnas.spaces import get_space

    device = get_device("cpu")
    space = get_space("nasbench201")
    for name, arch in NETWORKS.items():
        work = arch_workload(space, space.parse(arch), "cifar100")
        m = device.measure_all(work)["latency_ms"]
        share = m.extra.get("cpu_wait_share")
        shown = "-" if share is None else f"{share:.2f}"
        print(f"| {label} | {name} | {m.value:.3f} | {m.cv:.1%} | {shown} | {m.flagged} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", type=int, default=max(os.sched_getaffinity(0)))
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.core})
    print(f"core {args.core}; device cpu (ONNX Runtime, 1 thread)\n")
    print("| beside | network | latency ms | CV | wait share | flagged |")
    print("|---|---|---|---|---|---|")
    measure_all("nothing")
    nice = ["nice", "-n", "10"]
    for label, prefix in (("a busy process", []), ("a busy process at nice 10", nice)):
        busy = subprocess.Popen([*prefix, sys.executable, "-c", BUSY, str(args.core)])
        try:
            time.sleep(0.5)
            measure_all(label)
        finally:
            busy.kill()
            busy.wait()


if __name__ == "__main__":
    main()
