"""Once-for-All MobileNetV3 space (Cai et al., ICLR 2020).

Five stages of up to 4 MBConv blocks: per block a kernel size (3/5/7) and expansion ratio
(3/4/6), per stage a depth (2/3/4), and an input resolution (128..224 in steps of 4).
Arch string: ``ks=k0,...,k19;e=e0,...,e19;d=d0,...,d4;r=R``. Blocks past a stage's depth are
inactive; their values stay in the string (the sampled tables keep them) but do not change the
network and are masked out of :meth:`OFASpace.encode`.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hwnas.errors import HwnasError, UnknownNameError
from hwnas.spaces.base import Arch, DatasetSpec, SearchSpace
from hwnas.spaces.sampled import SampledArchs, SampledIndex


@dataclass(frozen=True)
class OFAConfig:
    """Decoded OFA architecture: 20 kernel sizes, 20 expansions, 5 depths, a resolution."""

    ks: tuple[int, ...]
    e: tuple[int, ...]
    d: tuple[int, ...]
    r: int

    def text(self) -> str:
        j = lambda v: ",".join(map(str, v))  # noqa: E731
        return f"ks={j(self.ks)};e={j(self.e)};d={j(self.d)};r={self.r}"

    def active(self, max_depth: int = 4) -> list[bool]:
        """Whether each of the 20 blocks is used (block i of stage s is used if i < d[s])."""
        return [i < d for d in self.d for i in range(max_depth)]


class OFASpace(SampledIndex, SearchSpace):
    """The OFA MobileNetV3 space.

    Choice dimensions: ``ks_0..ks_19``, ``e_0..e_19``, ``d_0..d_4`` and ``r`` (values as strings).

    Args:
        config: the parsed ``space.yaml``.
        root: folder of ``space.yaml`` and the sampled architectures.
    """

    name = "ofa"

    def __init__(self, config: dict[str, Any], root: Path):
        self.config = config
        self.macro = config["macro"]
        self.max_depth = int(self.macro["max_depth"])
        self.num_stages = len(self.macro["stage_channels"])
        self.num_blocks = self.max_depth * self.num_stages
        res = config["resolutions"]
        self.resolutions = tuple(range(int(res["min"]), int(res["max"]) + 1, int(res["step"])))
        self.kernel_sizes = tuple(config["kernel_sizes"])
        self.expand_ratios = tuple(config["expand_ratios"])
        self.depths = tuple(config["depths"])
        self._datasets = {
            n: DatasetSpec(n, int(d["classes"]), tuple(d["input_shape"]))
            for n, d in config["datasets"].items()
        }
        self.sampled = SampledArchs(self.name, root / config["sampled_archs"], self._read_archs)

    # -- parsing ------------------------------------------------------------------------------

    def decode(self, arch: Arch | str) -> OFAConfig:
        """The :class:`OFAConfig` of an arch or arch string.

        Raises:
            HwnasError: malformed string (the message names the bad part).
        """
        text = arch.text if isinstance(arch, Arch) else arch
        if not isinstance(text, str):
            raise HwnasError(f"arch must be a string, got {type(text).__name__}")
        parts: dict[str, str] = {}
        for part in text.strip().split(";"):
            key, sep, value = part.partition("=")
            if not sep or key.strip() not in ("ks", "e", "d", "r"):
                raise HwnasError(
                    f"malformed OFA arch string: bad part '{part}' (expected ks=..;e=..;d=..;r=..)"
                )
            parts[key.strip()] = value
        missing = [k for k in ("ks", "e", "d", "r") if k not in parts]
        if missing:
            raise HwnasError(f"malformed OFA arch string: missing {', '.join(missing)}")

        def ints(key: str, n: int, allowed: Sequence[int]) -> tuple[int, ...]:
            try:
                values = tuple(int(v) for v in parts[key].split(","))
            except ValueError:
                raise HwnasError(
                    f"malformed OFA arch string: non-integer in '{key}={parts[key]}'"
                ) from None
            if len(values) != n:
                raise HwnasError(
                    f"malformed OFA arch string: '{key}' needs {n} values, got {len(values)}"
                )
            bad = [v for v in values if v not in allowed]
            if bad:
                raise HwnasError(
                    f"malformed OFA arch string: {key} value {bad[0]} not in {list(allowed)}"
                )
            return values

        return OFAConfig(
            ints("ks", self.num_blocks, self.kernel_sizes),
            ints("e", self.num_blocks, self.expand_ratios),
            ints("d", self.num_stages, self.depths),
            ints("r", 1, self.resolutions)[0],
        )

    def parse(self, text: str) -> Arch:
        return Arch(self.name, self.decode(text).text())

    def from_config(self, cfg: OFAConfig) -> Arch:
        """The arch of a decoded config (validated)."""
        return self.parse(cfg.text())

    def lut_terms(self) -> list:
        """The lookup-table terms (:func:`hwnas.spaces.ofa.terms.ofa_terms`)."""
        from hwnas.spaces.ofa.terms import ofa_terms

        return ofa_terms(self)

    def choices(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for i in range(self.num_blocks):
            out[f"ks_{i}"] = tuple(map(str, self.kernel_sizes))
        for i in range(self.num_blocks):
            out[f"e_{i}"] = tuple(map(str, self.expand_ratios))
        for s in range(self.num_stages):
            out[f"d_{s}"] = tuple(map(str, self.depths))
        out["r"] = tuple(map(str, self.resolutions))
        return out

    def num_architectures(self) -> int:
        """Distinct networks: per stage, the sum over its depths d of (kernels x expansions)^d
        (blocks past the depth do not count), times the resolutions; about 2.2e19 per
        resolution, the paper's "more than 10^19"."""
        per_block = len(self.kernel_sizes) * len(self.expand_ratios)
        per_stage = sum(per_block ** int(d) for d in self.depths)
        return per_stage**self.num_stages * len(self.resolutions)

    def from_choices(self, values: dict[str, str]) -> Arch:
        cfg = OFAConfig(
            tuple(int(values[f"ks_{i}"]) for i in range(self.num_blocks)),
            tuple(int(values[f"e_{i}"]) for i in range(self.num_blocks)),
            tuple(int(values[f"d_{s}"]) for s in range(self.num_stages)),
            int(values["r"]),
        )
        return self.from_config(cfg)

    def to_choices(self, arch: Arch) -> dict[str, str]:
        cfg = self.decode(arch)
        out = {f"ks_{i}": str(k) for i, k in enumerate(cfg.ks)}
        out.update({f"e_{i}": str(e) for i, e in enumerate(cfg.e)})
        out.update({f"d_{s}": str(d) for s, d in enumerate(cfg.d)})
        out["r"] = str(cfg.r)
        return out

    def encode(self, archs: Sequence[Arch]) -> np.ndarray:
        """One-hot encoding with inactive blocks zeroed, shape (n, 20*3 + 20*3 + 5*3 + 25).

        The kernel and expansion one-hots of a block past its stage's depth are all zero, so
        architectures that build the same network encode the same.
        """
        x = super().encode(archs)
        nk, ne = len(self.kernel_sizes), len(self.expand_ratios)
        for row, arch in enumerate(archs):
            active = self.decode(arch).active(self.max_depth)
            for i, used in enumerate(active):
                if not used:
                    x[row, i * nk : (i + 1) * nk] = 0
                    start = self.num_blocks * nk + i * ne
                    x[row, start : start + ne] = 0
        return x

    def dataset(self, name: str) -> DatasetSpec:
        try:
            return self._datasets[name]
        except KeyError:
            raise UnknownNameError("dataset", name, list(self._datasets)) from None

    def datasets(self) -> list[str]:
        return list(self._datasets)

    def proxy_input_side(self, dataset: str) -> int:
        """32: its five stride-2 stages leave a 1x1 map (16 pixels would leave them nothing
        to tell apart after the fourth)."""
        return 32

    def input_shape(self, arch: Arch, dataset: str) -> tuple[int, int, int]:
        """(3, r, r): the architecture's own input resolution."""
        self.dataset(dataset)
        r = self.decode(arch).r
        return (3, r, r)

    def build(self, arch: Arch, dataset: str, num_classes: int | None = None):
        from hwnas.spaces.ofa.model import OFAMobileNetV3

        spec = self.dataset(dataset)
        return OFAMobileNetV3(self.decode(arch), num_classes or spec.num_classes, self.macro).eval()

    # -- sampled architectures ------------------------------------------------------------------

    def _read_archs(self, path: Path) -> list[str]:
        with gzip.open(path, "rt") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        rows.sort(key=lambda r: r["index"])
        return [
            OFAConfig(tuple(r["ks"]), tuple(r["e"]), tuple(r["d"]), int(r["r"])).text()
            for r in rows
        ]
