"""The runtime interface: what compiles an exported ONNX model for a device and runs it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from hwnas.runtimes.executable import Executable


@dataclass
class BuildInfo:
    """What compiling one model cost.

    Attributes:
        cached: the compiled model came from the artifact cache (or the runtime keeps none).
        compile_s: seconds to import and compile (0 when cached).
        tuned_workloads: names of workloads tuned for this model (new to the database).
        tuning_s: seconds spent tuning them.
        workloads: tunable workloads of the model (tuned before or now).
    """

    cached: bool = True
    compile_s: float = 0.0
    tuned_workloads: list[str] = field(default_factory=list)
    tuning_s: float = 0.0
    workloads: int = 0


class Runtime(ABC):
    """A runtime, registered in :data:`hwnas.runtimes.RUNTIMES` under :attr:`name`.

    Attributes:
        name: registry key ("ort", "tvm"); what ``--runtime`` and profiles' ``runtime:`` say.
        last_build: what the latest :meth:`compile` cost.
    """

    name: str = ""
    last_build: BuildInfo

    def __init__(self) -> None:
        self.last_build = BuildInfo()

    @property
    @abstractmethod
    def key(self) -> str:
        """The runtime part of a measurement's store key ("ort", "ort:cuda",
        "tvm:llvm-1a2b3c4d"): measurements with different keys never mix."""

    @abstractmethod
    def status(self) -> tuple[bool, str]:
        """(usable here, one line saying what it is or what to install). Never raises."""

    def check_settings(self) -> None:
        """Refuse settings the runtime reads only when it compiles (a TVM target), before a
        search or measurement starts; the runtime is known usable (:meth:`status`). The
        default has none.

        Raises:
            hwnas.errors.HwnasError: one line naming the setting and where it was given.
        """
        return None

    @abstractmethod
    def compile(self, onnx_bytes: bytes, input_shape: tuple[int, ...]) -> Executable:
        """An executable of the model with a fixed random float32 input of ``input_shape``
        bound; sets :attr:`last_build`.

        Raises:
            hwnas.errors.DeviceUnavailableError: the runtime cannot run here now.
            hwnas.errors.CandidateError: the runtime rejects (or crashed on) this model.
        """

    @abstractmethod
    def versions(self) -> dict[str, str]:
        """Library versions and settings recorded with each measurement."""
