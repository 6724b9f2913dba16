"""docs/architecture.md against the code (issue 19): every module path it names exists, every
interface table row's files exist (and the ``file:name`` it points at is defined there), every
registry of its registries table is a :class:`hwnas.registry.Registry` where it says, and every
ALL-CAPS code name it uses is defined somewhere in hwnas."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

from hwnas.registry import Registry

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "architecture.md").read_text()

WORDS = {"ASCII", "CIFAR", "DARTS", "FAIL", "FILE", "HTML", "JSON", "NCCL", "NSGA", "ONNX", "PATH",
         "README", "RUNNING", "YAML", "HWNAS_HOME"}  # fmt: skip
"""Upper-case words of the page that are not code names (acronyms, states, placeholders)."""


def _section(title: str) -> str:
    start = DOC.index(f"## {title}\n")
    end = DOC.find("\n## ", start + 1)
    return DOC[start : end if end > 0 else None]


def _table_rows(title: str) -> list[list[str]]:
    rows = [line for line in _section(title).splitlines() if line.startswith("| ")]
    return [[c.strip() for c in row.strip("|").split("|")] for row in rows[1:]]  # less the header


def _defined_names() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "hwnas").rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            one = [getattr(node, "target", None)]
            targets = node.targets if isinstance(node, ast.Assign) else one
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_every_module_path_named_exists():
    paths = set(re.findall(r"hwnas/[\w/]*(?:\.py)?", DOC))
    assert len(paths) > 40
    missing = sorted(p for p in paths if not (REPO / p).exists())
    assert not missing, missing


def test_every_interface_rows_files_and_names_exist():
    rows = _table_rows("Interfaces")
    assert {"job", "settings", "Python API", "`CostModel`", "`Runtime`"} <= {r[0] for r in rows}
    for row in rows:
        for ref in re.findall(r"`(hwnas/[^`]+)`", row[1]):
            file, _, name = ref.partition(":")
            assert (REPO / file).exists(), (row[0], file)
            if name:
                text = (REPO / file).read_text()
                assert re.search(rf"\b(def|class) {name}\b|^{name}\b", text, re.M), ref


def test_every_registry_in_the_table_is_one():
    rows = _table_rows("Registries")
    assert len(rows) >= 10
    for name, module, _what in rows:
        name, module = name.strip("`"), module.strip("`")
        dotted = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        registry = getattr(importlib.import_module(dotted), name)
        assert isinstance(registry, Registry), name
        assert registry.names(), f"{name} has no entries"


def test_every_code_name_in_capitals_is_defined():
    used = set(re.findall(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*\b", DOC))
    used = {u for u in used if len(u) >= 4} - WORDS
    missing = sorted(used - _defined_names())
    assert not missing, missing
