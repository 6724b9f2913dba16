"""Each kernel's time inside the whole network against its time alone, on this machine's CPU.

The kernel-level predictor sums kernels timed alone (plus the weight-streaming bound) and
scales the sum by one network-level correction. ONNX Runtime's own profiler
(``SessionOptions.enable_profiling``) times every node *inside* a run of the whole network, so
the two can be put side by side kernel by kernel: which kernels are slower in the network than
alone, and by how much. The whole network is run by the ``ort`` runtime's settings (one
intra-op thread, all graph optimisations) ``--runs`` times; each node's in-network time is the
median over the runs after the first 5. Its time alone is the predictor's (from the store of
the hwnas home, timed now where missing), less the per-call overhead.

Prints, per model, the kernels whose in-network time exceeds their time alone the most (label,
in-network us, alone us, the weights it reads in MB), then per kernel type the in-network and
alone sums.

    python experiments/in_network_profile.py resnet50 mobilenet_v3_small --side 224
    python experiments/in_network_profile.py model.onnx

A model is a well-known network's name (:mod:`hwnas.known_networks`, at ``--side`` px and
``--width``) or an ONNX file. About a minute per 224x224 network on this project's 2-core VM.
Run it on a quiet core (``taskset -c 1``): kernel times taken at another load are not
comparable.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
from pathlib import Path

import numpy as np


def in_network_us(onnx_bytes: bytes, runs: int) -> dict[str, float]:
    """Node name -> median time inside the whole network (us), from ONNX Runtime's profile."""
    import onnxruntime as ort

    from hwnas.onnx_inputs import bytes_inputs, feeds

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.enable_profiling = True
    with tempfile.TemporaryDirectory(prefix="hwnas-profile-") as folder:
        options.profile_file_prefix = str(Path(folder) / "p")
        session = ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
        fed = feeds(bytes_inputs(onnx_bytes))
        for _ in range(runs):
            session.run(None, fed)
        events = json.loads(Path(session.end_profiling()).read_text())
    times = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            times[e["name"][: -len("_kernel_time")]].append(float(e["dur"]))
    return {name: float(np.median(v[5:] or v)) for name, v in times.items()}


def unprofiled_ms(onnx_bytes: bytes, runs: int) -> float:
    """Median time of the whole network (ms) in a session like :func:`in_network_us`'s but
    without the profiler, whose timestamps around every kernel add their own cost to the times
    it reports (on EfficientNetV2-S: its kernels summed to 8.2 ms a run, the network ran
    6.1 ms unprofiled; helper-79, 2026-12-07)."""
    import time

    import onnxruntime as ort

    from hwnas.onnx_inputs import bytes_inputs, feeds

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    fed = feeds(bytes_inputs(onnx_bytes))
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        session.run(None, fed)
        times.append(1000 * (time.perf_counter() - start))
    return float(np.median(times[5:] or times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", help="well-known network names or ONNX files")
    parser.add_argument("--side", type=int, default=224)
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--top", type=int, default=12, help="kernels listed per model")
    args = parser.parse_args()

    from hwnas.devices import get_device
    from hwnas.measure import Profiler, network_workload
    from hwnas.paths import default_store_path
    from hwnas.predictors.graph import GraphModel
    from hwnas.predictors.kernels.features import kernel_type, streamed_bytes
    from hwnas.predictors.kernels.model import KernelPredictor
    from hwnas.store import MeasurementStore

    profiler = Profiler(get_device("cpu"), MeasurementStore(default_store_path()))
    kp = KernelPredictor(profiler, budget=100000)
    for name in args.models:
        if name.endswith(".onnx"):
            data = Path(name).read_bytes()
        else:
            data = network_workload(name, side=args.side, width=args.width).onnx_bytes()
        model = GraphModel(name, np.zeros(0), data)
        kp.estimate(model)
        inside = in_network_us(data, args.runs)
        rows, by_type = [], collections.defaultdict(lambda: [0.0, 0.0])
        for k in kp.kernels_of(model).kernels:
            if k.node not in inside:
                continue
            alone = 1000 * max(kp._times[k.key][0] - kp.overhead_ms, 0.0)
            rows.append((k.label, inside[k.node], alone, streamed_bytes(k) / 2**20))
            by_type[kernel_type(k)][0] += inside[k.node]
            by_type[kernel_type(k)][1] += alone
        n = len(kp.kernels_of(model).kernels)
        total_in, total_alone = sum(r[1] for r in rows), sum(r[2] for r in rows)
        whole = unprofiled_ms(data, args.runs)
        print(f"\n{name}: {len(rows)} of {n} kernels found in the profile; in the network "
              f"{total_in / 1000:.3f} ms, alone {total_alone / 1000:.3f} ms; the network "
              f"unprofiled {whole:.3f} ms (the profiler's cost is in the times in it)")  # fmt: skip
        for label, t_in, t_alone, mb in sorted(rows, key=lambda r: r[2] - r[1])[: args.top]:
            print(f"  {label[:62]:62s} in {t_in:8.1f} us  alone {t_alone:8.1f} us  "
                  f"weights {mb:6.2f} MB")  # fmt: skip
        for t, (t_in, t_alone) in sorted(by_type.items(), key=lambda x: -x[1][0]):
            print(f"  {t:44s} in {t_in / 1000:8.3f} ms  alone {t_alone / 1000:8.3f} ms")


if __name__ == "__main__":
    main()
