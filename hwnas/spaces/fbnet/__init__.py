"""FBNet block space (Wu et al., CVPR 2019) as used by HW-NAS-Bench (Li et al., ICLR 2021).

22 searchable layers in 7 stages; each layer is one of 9 blocks (8 inverted-residual variants
and skip). An arch string is the 22 block names separated by single spaces. 9**22 networks
exist; the 5,000 shipped with recorded latencies are indexed by :meth:`FBNetSpace.index`.
"""

from __future__ import annotations

import csv
import gzip
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwnas.errors import HwnasError, UnknownNameError
from hwnas.spaces.base import Arch, DatasetSpec, SearchSpace
from hwnas.spaces.fbnet.blocks import block_spec
from hwnas.spaces.sampled import SampledArchs, SampledIndex


class FBNetSpace(SampledIndex, SearchSpace):
    """The FBNet space; choice dimensions ``layer_0`` .. ``layer_21``, each over the 9 blocks.

    Args:
        config: the parsed ``space.yaml``.
        root: folder of ``space.yaml`` and the sampled architectures.
    """

    name = "fbnet"

    def __init__(self, config: dict[str, Any], root: Path):
        self.config = config
        self.blocks: tuple[str, ...] = tuple(config["blocks"])
        self.num_layers = sum(config["macro"]["layers_per_stage"])
        self._datasets = {
            n: DatasetSpec(n, int(d["classes"]), tuple(d["input_shape"]))
            for n, d in config["datasets"].items()
        }
        self.sampled = SampledArchs(self.name, root / config["sampled_archs"], _read_archs)

    def parse(self, text: str) -> Arch:
        """Parse 22 space-separated block names.

        Raises:
            HwnasError: wrong number of layers or an unknown block (named in the message).
        """
        if not isinstance(text, str):
            raise HwnasError(f"arch must be a string, got {type(text).__name__}")
        tokens = text.split()
        for i, tok in enumerate(tokens):
            if tok not in self.blocks:
                raise HwnasError(
                    f"malformed FBNet arch string: unknown block '{tok}' at layer {i}; "
                    f"blocks: {', '.join(self.blocks)}"
                )
        if len(tokens) != self.num_layers:
            raise HwnasError(
                f"malformed FBNet arch string: {len(tokens)} blocks, expected {self.num_layers}"
            )
        return Arch(self.name, " ".join(tokens))

    def choices(self) -> dict[str, tuple[str, ...]]:
        return {f"layer_{i}": self.blocks for i in range(self.num_layers)}

    def from_choices(self, values: dict[str, str]) -> Arch:
        return self.parse(" ".join(values[f"layer_{i}"] for i in range(self.num_layers)))

    def to_choices(self, arch: Arch) -> dict[str, str]:
        return {f"layer_{i}": b for i, b in enumerate(self.layers(arch))}

    def dataset(self, name: str) -> DatasetSpec:
        try:
            return self._datasets[name]
        except KeyError:
            raise UnknownNameError("dataset", name, list(self._datasets)) from None

    def datasets(self) -> list[str]:
        return list(self._datasets)

    def layers(self, arch: Arch) -> tuple[str, ...]:
        """The 22 block names of ``arch``."""
        if arch.space != self.name:
            raise HwnasError(f"architecture of space '{arch.space}' given to {self.name}")
        return tuple(arch.text.split())

    def build(self, arch: Arch, dataset: str, num_classes: int | None = None):
        from hwnas.spaces.fbnet.model import FBNetNetwork

        self.dataset(dataset)
        d, macro = self.config["datasets"][dataset], self.config["macro"]
        return FBNetNetwork(
            self.layers(arch),
            num_classes=num_classes or int(d["classes"]),
            stem_channels=int(macro["stem_channels"]),
            stem_stride=int(d["stem_stride"]),
            layers_per_stage=tuple(macro["layers_per_stage"]),
            stage_channels=tuple(macro["stage_channels"]),
            stage_strides=tuple(d["stage_strides"]),
            head_channels=int(d["head_channels"]),
        ).eval()


def _read_archs(path: Path) -> list[str]:
    with gzip.open(path, "rt") as fh:
        rows = list(csv.DictReader(fh))
    return [" ".join(r["ops"].split()) for r in rows]


__all__: Sequence[str] = ["FBNetSpace", "block_spec"]
