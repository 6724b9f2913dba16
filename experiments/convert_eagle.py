"""Convert the Eagle / BRP-NAS NAS-Bench-201 latency pickles into hwnas's recorded table.

Eagle (Dudziak et al., "BRP-NAS: Prediction-based NAS using GCNs", NeurIPS 2020;
github.com/SamsungLabs/eagle, Apache-2.0) released the latency of NAS-Bench-201 cells on 13
devices as pickle files on Google Drive, one per device: ``{arch_vector: seconds}`` where
``arch_vector`` is the 6 operation indices of the cell's edges in NAS-Bench-201 string order
(0 none, 1 skip_connect, 2 nor_conv_1x1, 3 nor_conv_3x3, 4 avg_pool_3x3; Eagle's
``eagle/models/nasbench201/utils.py``). hwnas ships them as one gzip CSV,
``devices/recorded/nasbench201_eagle_latency_ms.csv.gz``: ``index`` (NAS-Bench-201 order) and
one column per device in milliseconds (10 significant digits), ``nan`` where the device has no
value (the 341 cells whose output is not connected to their input were never measured; three
mobile devices also miss a few dozen more).

The pickles are read with a restricted unpickler that only builds numpy scalars (a pickle is
code otherwise). Usage, with the 13 pickles in one folder (any of Eagle's file names, e.g.
``embeeded-tpu-edgetpu-int8.pickle`` or ``embedded-tpu-edge-tpu-int8.pickle``)::

    python experiments/convert_eagle.py PICKLE_FOLDER \
        devices/recorded/nasbench201_eagle_latency_ms.csv.gz
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib
import io
import pickle
import sys
from pathlib import Path

import numpy as np

OPS = ("none", "skip_connect", "nor_conv_1x1", "nor_conv_3x3", "avg_pool_3x3")

DEVICES = {
    # hwnas / NASFLAT device name: the stem of Eagle's file (with its typos), then a cleaned one
    "desktop_cpu_core_i7_7820x_fp32": ("desktop-cpu-core-i7-7820x-fp32",),
    "desktop_gpu_gtx_1080ti_fp32": ("desktop-gpu-gtx-1080ti-fp32", "desktop-gpu-gtx-1080-ti-fp32"),
    "embedded_gpu_jetson_nano_fp16": ("embedded-gpu-jetson-nano-fp16",),
    "embedded_gpu_jetson_nano_fp32": ("embedded-gpu-jetson-nano-fp32",),
    "embedded_tpu_edge_tpu_int8": ("embedded-tpu-edge-tpu-int8", "embeeded-tpu-edgetpu-int8"),
    "mobile_cpu_snapdragon_450_cortex_a53_int8": (
        "mobile-cpu-snapdragon-450-cortex-a53-int8",
        "mobile-cpu-snapdragon-450-contex-a53-int8",
    ),
    "mobile_cpu_snapdragon_675_kryo_460_int8": ("mobile-cpu-snapdragon-675-kryo-460-int8",),
    "mobile_cpu_snapdragon_855_kryo_485_int8": ("mobile-cpu-snapdragon-855-kryo-485-int8",),
    "mobile_dsp_snapdragon_675_hexagon_685_int8": ("mobile-dsp-snapdragon-675-hexagon-685-int8",),
    "mobile_dsp_snapdragon_855_hexagon_690_int8": ("mobile-dsp-snapdragon-855-hexagon-690-int8",),
    "mobile_gpu_snapdragon_450_adreno_506_int8": ("mobile-gpu-snapdragon-450-adreno-506-int8",),
    "mobile_gpu_snapdragon_675_adreno_612_int8": (
        "mobile-gpu-snapdragon-675-adreno-612-int8",
        "mobile-gpu-snapdragon-675-adren0-612-int8",
    ),
    "mobile_gpu_snapdragon_855_adreno_640_int8": (
        "mobile-gpu-snapdragon-855-adreno-640-int8",
        "mobile-gpu-snapdragon-855-adren0-640-int8",
    ),
}


class _NumpyScalars(pickle.Unpickler):
    """Builds only numpy scalars and dtypes; anything else in the pickle is refused."""

    ALLOWED = {
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy", "dtype"),
    }

    def find_class(self, module: str, name: str):
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"refusing {module}.{name} in a latency pickle")
        return getattr(importlib.import_module(module), name)


def arch_string(vector) -> str:
    """NAS-Bench-201 arch string of an Eagle ``arch_vector`` (Eagle's own conversion)."""
    return "|{}~0|+|{}~0|{}~1|+|{}~0|{}~1|{}~2|".format(*(OPS[int(o)] for o in vector))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("out", type=Path)
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from hwnas.spaces import get_space

    space = get_space("nasbench201")
    index = {a.text: i for i, a in enumerate(space.all_archs())}
    columns = {}
    for name, stems in DEVICES.items():
        path = next((args.folder / f"{s}.pickle" for s in stems
                     if (args.folder / f"{s}.pickle").is_file()), None)  # fmt: skip
        if path is None:
            raise SystemExit(f"no pickle for {name} in {args.folder} (tried {', '.join(stems)})")
        raw = path.read_bytes()
        data = _NumpyScalars(io.BytesIO(raw)).load()
        col = np.full(len(index), np.nan)
        for vector, seconds in data.items():
            col[index[arch_string(vector)]] = float(seconds) * 1000.0
        columns[name] = col
        print(f"{name}: {len(data)} values from {path.name} (sha256 "
              f"{hashlib.sha256(raw).hexdigest()[:16]})")  # fmt: skip
    lines = ["index," + ",".join(columns)]
    for i in range(len(index)):
        lines.append(f"{i}," + ",".join(f"{c[i]:.10g}" for c in columns.values()))
    args.out.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
