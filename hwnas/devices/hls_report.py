"""Reading Vivado HLS / Vitis HLS C-synthesis reports: latency and FPGA resources.

``csynth_design`` writes ``<project>/<solution>/syn/report/<top>_csynth.xml`` and a text twin
``<top>_csynth.rpt``. Both carry the target and estimated clock period (ns), the latency in
clock cycles (best and worst case), the initiation interval, and the resources used (LUT, FF,
DSP, BRAM_18K, URAM on Vitis). Vivado HLS calls DSPs ``DSP48E``; they are read as ``DSP``.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from hwnas.errors import HwnasError

RESOURCES = ("LUT", "FF", "DSP", "BRAM_18K", "URAM")


@dataclass(frozen=True)
class SynthesisReport:
    """The top function's C-synthesis estimates.

    Attributes:
        top: top function name.
        part: FPGA part.
        clock_ns: target clock period (ns).
        estimated_clock_ns: the clock period the design is estimated to reach (ns).
        latency_cycles: (best, worst) latency in clock cycles.
        interval_cycles: (min, max) initiation interval in cycles.
        resources: used resources (``LUT``, ``FF``, ``DSP``, ``BRAM_18K``, ``URAM``).
        available: the part's resources, same keys.
        tool: the tool version that wrote the report.
    """

    top: str
    part: str
    clock_ns: float
    estimated_clock_ns: float
    latency_cycles: tuple[int, int]
    interval_cycles: tuple[int, int]
    resources: dict[str, int] = field(default_factory=dict)
    available: dict[str, int] = field(default_factory=dict)
    tool: str = ""

    @property
    def latency_ms(self) -> float:
        """Worst-case latency: cycles x target clock period, in ms."""
        return self.latency_cycles[1] * self.clock_ns * 1e-6

    def utilisation(self) -> dict[str, float]:
        """Used / available per resource, in % (resources the part reports)."""
        return {
            k: 100.0 * v / self.available[k]
            for k, v in self.resources.items()
            if self.available.get(k)
        }


def _int(text: str | None, what: str, where: str) -> int:
    """A count from a report: ASCII digits only (no sign, '_' or other scripts' digits)."""
    value = str(text).strip()
    text = value if len(value) <= 40 else value[:40] + "..."
    if re.fullmatch(r"-[0-9]+", value):
        raise HwnasError(f"{where}: {what} is '{text}', a negative count")
    if not re.fullmatch(r"[0-9]{1,18}", value):
        raise HwnasError(
            f"{where}: {what} is '{text}', not a number (a design without a static latency "
            "bound, e.g. a loop with a variable trip count)"
        )
    return int(value)


def _period_ns(text: str | None, what: str, where: str) -> float:
    """A clock period in ns: a positive, finite number, optionally followed by "ns" (the
    text report writes "5.00 ns"; the XML report gives the unit in a ``<unit>`` element)."""
    value = re.sub(r"\s*ns$", "", str(text or "").replace("~", "").strip())
    try:
        period = float(value) if re.fullmatch(r"[0-9.eE+-]+", value) else math.nan
    except ValueError:
        period = math.nan
    if not (math.isfinite(period) and period > 0):
        if text is None:
            raise HwnasError(f"HLS report {where}: no {what} (the clock period in ns)")
        raise HwnasError(f"HLS report {where}: {what} '{text}' is not a positive number of ns")
    return period


def _checked(report: SynthesisReport, where: str) -> SynthesisReport:
    """``report`` if its worst-case latency is above 0 cycles and a finite number of ms.

    Raises:
        HwnasError: one line naming the report.
    """
    if report.latency_cycles[1] <= 0:
        raise HwnasError(f"HLS report {where}: Worst-caseLatency is 0 cycles, not a latency")
    if not math.isfinite(report.latency_ms):
        raise HwnasError(f"HLS report {where}: latency is not a finite number of ms")
    return report


def _resource_name(tag: str) -> str:
    return "DSP" if tag.startswith("DSP") else tag


def parse_csynth_xml(path: str | Path) -> SynthesisReport:
    """Read ``<top>_csynth.xml``.

    Raises:
        HwnasError: missing file, not a C-synthesis report, or no static latency.
    """
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise HwnasError(f"cannot read synthesis report {path}: {exc}") from None
    where = str(path)

    def text(xpath: str) -> str | None:
        node = root.find(xpath)
        return node.text if node is not None else None

    if root.find("PerformanceEstimates") is None or root.find("AreaEstimates") is None:
        raise HwnasError(f"{path} is not a Vivado/Vitis HLS C-synthesis report")
    latency = "PerformanceEstimates/SummaryOfOverallLatency/"
    for unit_path, unit in (("UserAssignments/unit", "ns"), (latency + "unit", "clock cycles")):
        found = text(unit_path)
        if found is not None and found.strip() != unit:
            raise HwnasError(f"HLS report {where}: {unit_path} is '{found}', not '{unit}'")
    resources = {
        _resource_name(n.tag): _int(n.text, n.tag, where)
        for n in root.find("AreaEstimates/Resources") or []
    }
    available = {
        _resource_name(n.tag): _int(n.text, n.tag, where)
        for n in root.find("AreaEstimates/AvailableResources") or []
    }
    timing = "PerformanceEstimates/SummaryOfTimingAnalysis/EstimatedClockPeriod"
    report = SynthesisReport(
        top=text("UserAssignments/TopModelName") or "",
        part=text("UserAssignments/Part") or "",
        clock_ns=_period_ns(text("UserAssignments/TargetClockPeriod"), "TargetClockPeriod", where),
        estimated_clock_ns=_period_ns(text(timing), "EstimatedClockPeriod", where),
        latency_cycles=(
            _int(text(latency + "Best-caseLatency"), "best-case latency", where),
            _int(text(latency + "Worst-caseLatency"), "worst-case latency", where),
        ),
        interval_cycles=(
            _int(text(latency + "Interval-min"), "interval", where),
            _int(text(latency + "Interval-max"), "interval", where),
        ),
        resources=resources,
        available=available,
        tool=text("ReportVersion/Version") or "",
    )
    return _checked(report, where)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_csynth_rpt(path: str | Path) -> SynthesisReport:
    """Read the text report ``<top>_csynth.rpt`` (Vivado HLS and Vitis HLS layouts).

    Raises:
        HwnasError: missing file or a section not found.
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise HwnasError(f"cannot read synthesis report {path}: {exc}") from None

    def header(pattern: str) -> str:
        for line in lines:
            found = re.match(pattern, line.strip())
            if found:
                return found.group(1).strip()
        return ""

    def first_row_after(marker: str, starts: str) -> list[str]:
        seen = False
        for line in lines:
            if marker in line:
                seen = True
            elif seen and line.strip().startswith(starts):
                return _cells(line)
        raise HwnasError(f"{path}: no '{marker}' table")

    top = header(r"== (?:Vivado|Vitis) HLS Report for '(.+)'")
    clock = first_row_after("+ Timing", "|ap_clk")
    # first numeric row after "+ Latency": Vivado |min|max|min|max|type|,
    # Vitis |min|max|abs min|abs max|min|max|type|
    lat_row = None
    seen = False
    for line in lines:
        if line.strip().startswith("+ Latency"):
            seen = True
        elif seen and re.match(r"^\|\s*\d", line.strip()):
            lat_row = _cells(line)
            break
    if lat_row is None:
        raise HwnasError(f"{path}: no latency summary row (no static latency bound?)")
    if len(lat_row) >= 7:
        cycles, interval = lat_row[0:2], lat_row[4:6]
    else:
        cycles, interval = lat_row[0:2], lat_row[2:4]
    names: list[str] = []
    total: list[str] = []
    available: list[str] = []
    in_summary = False
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("== Utilization Estimates"):
            in_summary = True
        elif in_summary and stripped.startswith("|") and "Name" in stripped and not names:
            names = [_resource_name(c) for c in _cells(stripped)[1:]]
        elif in_summary and stripped.startswith("|Total") and not total:
            total = _cells(stripped)[1:]
        elif in_summary and re.match(r"^\|Available\s*\|", stripped) and not available:
            available = _cells(stripped)[1:]
        elif in_summary and stripped.startswith("+ Detail"):
            break
    if not names or not total:
        raise HwnasError(f"{path}: no utilisation summary")
    where = str(path)
    report = SynthesisReport(
        top=top,
        part=header(r"\* Target device:\s*(.+)"),
        clock_ns=_period_ns(clock[1] if len(clock) > 1 else None, "ap_clk target", where),
        estimated_clock_ns=_period_ns(
            clock[2] if len(clock) > 2 else None, "ap_clk estimated", where
        ),
        latency_cycles=(_int(cycles[0], "latency", where), _int(cycles[1], "latency", where)),
        interval_cycles=(
            _int(interval[0], "interval", where),
            _int(interval[1], "interval", where),
        ),
        resources={n: _int(v, n, where) for n, v in zip(names, total) if n in RESOURCES},
        available={n: _int(v, n, where) for n, v in zip(names, available) if n in RESOURCES},
        tool=header(r"\* Version:\s*(\S+)"),
    )
    return _checked(report, where)


def find_report(project_dir: str | Path, top: str) -> Path:
    """The C-synthesis XML report of ``top`` in an HLS project folder (any solution).

    Raises:
        HwnasError: no report (synthesis did not run or failed).
    """
    found = sorted(Path(project_dir).glob(f"**/syn/report/{top}_csynth.xml"))
    if not found:
        raise HwnasError(
            f"no C-synthesis report {top}_csynth.xml under {project_dir}: synthesis did not "
            "finish (see vitis_hls.log there)"
        )
    return found[0]
