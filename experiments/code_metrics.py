"""Structure counts of the hwnas code base (issue 19's "Done when"), from its source alone.

    python experiments/code_metrics.py [--root DIR] [--details]

Every count is an AST walk of ``hwnas/**/*.py`` (no import of hwnas), so the same command on
two commits gives their before/after table. What each row counts:

- ``write_zoo(`` / ``publish_run(`` / ``write_summary(`` call sites: calls of a function of that
  name (definitions are not calls).
- import cycles: pairs of hwnas modules that import each other, at module level or inside a
  function (a lazy import is still a dependency). ``TYPE_CHECKING`` blocks are left out.
- upward imports: an import of a module in a higher layer than the importer's (the layers are
  :data:`LAYERS`, lowest first: what a lower layer may not use), or of a package the importer
  lives in (``hwnas/devices/base.py`` importing ``hwnas.devices``: the package imports it).
- function-level imports: ``import`` statements inside a function (all; and those of hwnas
  modules).
- study name built: assignments to an attribute ``study`` whose value is computed (an f-string,
  a call, an operation), and functions whose name ends in ``study_name`` (an assignment of a
  call of such a function is a use of that place, not another one).
- ``isinstance(..., MultilinearLUT)``: type checks on the lookup-table class.
- settings re-cast after parsing: ``int(...)``, ``float(...)``, ``str(...)``, ``bool(...)`` of
  ``X.option(...)`` or of ``options[...]`` / ``options.get(...)`` (a typed setting cast again).
- functions over 80 lines (``def`` to its last line) in the engine (``hwnas/engine/``, named
  ``hwnas/search/`` before the Python API's ``hwnas.search`` took the name) and the job layer
  (``hwnas/jobs/``, and before it existed the modules that were the jobs: ``hwnas/search/run.py``,
  ``hwnas/supernet/run.py``, ``hwnas/cli/search.py``, ``hwnas/cli/supernet_search.py``).
- Optuna's private names outside ``hwnas/engine/ledger.py``: attributes ``_storage``,
  ``_study_id``, ``_trial_id``, ``_backend``, ``_cached_frozen_trial``, ``_CachedStorage``, and
  imports from ``optuna.*._*`` modules.
- files a new runtime touches: the runtime's module and its registration, plus every file with
  a hand-written list of runtime names (a list/tuple/set literal holding both "ort" and "tvm").
"""

from __future__ import annotations

import argparse
import ast
from collections import defaultdict
from pathlib import Path

LAYERS = [
    # foundations: used by everything, use nothing of hwnas above them
    {"hwnas", "hwnas.errors", "hwnas.limits", "hwnas.paths", "hwnas.registry", "hwnas.yamlfile",
     "hwnas.db", "hwnas.progress", "hwnas.assets", "hwnas.isolate", "hwnas.tables",
     "hwnas.distributed"},
    # what a network is: spaces, their PyTorch modules, export, data
    {"hwnas.spaces", "hwnas.nn", "hwnas.export", "hwnas.export_cache", "hwnas.datasets",
     "hwnas.loops", "hwnas.known_networks"},
    # where it runs and what it cost
    {"hwnas.runtimes", "hwnas.devices", "hwnas.store"},
    {"hwnas.measure"},
    {"hwnas.predictors"},
    {"hwnas.costs"},
    {"hwnas.engine", "hwnas.search"},
    {"hwnas.supernet"},
    {"hwnas.zoo"},
    {"hwnas.jobs", "hwnas.api"},
    {"hwnas.cli", "hwnas.__main__"},
]  # fmt: skip
"""Layers, lowest first. A module's layer is that of the longest prefix listed."""

OPTUNA_PRIVATE = {
    "_storage", "_study_id", "_trial_id", "_backend", "_cached_frozen_trial", "_CachedStorage",
}  # fmt: skip
OPTION_READS = ("options[", "options.get(", "self.options[", "self.options.get(",
                "opts[", "s.options[")
ENGINE = ("hwnas/engine/", "hwnas/search/")
"""The engine package, under its name now and before."""
JOB_LAYER = ("hwnas/jobs/", "hwnas/search/run.py", "hwnas/supernet/run.py",
             "hwnas/cli/search.py", "hwnas/cli/supernet_search.py")  # fmt: skip
LONG = 80


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(name: str) -> int | None:
    best, best_len = None, -1
    for i, group in enumerate(LAYERS):
        for prefix in group:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    return best


class Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: set[str]):
        self.module, self.is_package, self.known = module, is_package, known
        self.depth = 0
        self.type_checking = 0
        self.imports: list[tuple[str, int, bool]] = []  # (target module, line, in a function)
        self.function_imports = 0
        self.function_imports_hwnas = 0
        self.calls: dict[str, list[int]] = defaultdict(list)
        self.study_names: list[int] = []
        self.lut_checks: list[int] = []
        self.recasts: list[int] = []
        self.optuna_private: list[int] = []
        self.runtime_lists: list[int] = []
        self.functions: list[tuple[str, int, int]] = []

    # -- imports -----------------------------------------------------------------------------
    def _resolve(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        base = self.module.split(".")
        if not self.is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def _target(self, name: str) -> str | None:
        """The hwnas module (or package) ``name`` refers to: the longest known prefix."""
        parts = name.split(".")
        for k in range(len(parts), 0, -1):
            cand = ".".join(parts[:k])
            if cand in self.known:
                return cand
        return None

    def _add_import(self, names: list[str], node: ast.AST) -> None:
        if self.type_checking:
            return
        inside = self.depth > 0
        hw = False
        for name in dict.fromkeys(names):  # "from x import a, b" is one import of x
            if name.split(".")[0] != "hwnas":
                continue
            target = self._target(name)
            if target is not None:
                hw = True
                self.imports.append((target, node.lineno, inside))
        if inside:
            self.function_imports += 1
            self.function_imports_hwnas += hw

    def visit_Import(self, node: ast.Import) -> None:
        self._add_import([a.name for a in node.names], node)
        if any(a.name.startswith("optuna.") and "._" in a.name for a in node.names):
            self.optuna_private.append(node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._resolve(node)
        # "from hwnas.x import y": y may be a module
        names = [
            f"{base}.{a.name}" if f"{base}.{a.name}" in self.known else base for a in node.names
        ]
        self._add_import(names, node)
        if base.startswith("optuna") and any(p.startswith("_") for p in base.split(".")):
            self.optuna_private.append(node.lineno)

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        if "TYPE_CHECKING" in test:
            self.type_checking += 1
            for child in node.body:
                self.visit(child)
            self.type_checking -= 1
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    # -- functions ---------------------------------------------------------------------------
    def _function(self, node) -> None:
        self.functions.append((node.name, node.lineno, node.end_lineno - node.lineno + 1))
        if node.name.endswith("study_name"):
            self.study_names.append(node.lineno)
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    # -- the rest ----------------------------------------------------------------------------
    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name:
            self.calls[name].append(node.lineno)
        if name == "isinstance" and len(node.args) == 2:
            if "MultilinearLUT" in ast.unparse(node.args[1]):
                self.lut_checks.append(node.lineno)
        if isinstance(f, ast.Name) and f.id in ("int", "float", "str", "bool") and node.args:
            arg = node.args[0]
            text = ast.unparse(arg)
            if (
                isinstance(arg, ast.Call)
                and isinstance(arg.func, ast.Attribute)
                and arg.func.attr == "option"
            ) or text.startswith(OPTION_READS):
                self.recasts.append(node.lineno)
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        for t in node.targets:
            if (
                isinstance(t, ast.Attribute)
                and t.attr == "study"
                and isinstance(node.value, (ast.JoinedStr, ast.Call, ast.BinOp))
                and not _calls_study_name(node.value)
            ):
                self.study_names.append(node.lineno)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in OPTUNA_PRIVATE:
            self.optuna_private.append(node.lineno)
        self.generic_visit(node)

    def _literal(self, node) -> None:
        values = {e.value for e in node.elts if isinstance(e, ast.Constant)}
        if {"ort", "tvm"} <= values:
            self.runtime_lists.append(node.lineno)
        self.generic_visit(node)

    visit_List = _literal
    visit_Tuple = _literal
    visit_Set = _literal


def _calls_study_name(node: ast.AST) -> bool:
    """``node`` is a call of a function named ``...study_name``."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name.endswith("study_name")


def analyse(root: Path) -> dict:
    files = sorted((root / "hwnas").rglob("*.py"))
    known = {module_name(p, root) for p in files}
    visitors: dict[str, tuple[Path, Visitor]] = {}
    for p in files:
        mod = module_name(p, root)
        v = Visitor(mod, p.name == "__init__.py", known)
        v.visit(ast.parse(p.read_text(), str(p)))
        visitors[mod] = (p, v)

    rel = lambda p: str(p.relative_to(root))  # noqa: E731
    out: dict = {"details": defaultdict(list)}

    for fn in ("write_zoo", "publish_run", "write_summary"):
        sites = [f"{rel(p)}:{ln}" for p, v in visitors.values() for ln in v.calls.get(fn, [])]
        out[f"{fn}( call sites"] = len(sites)
        out["details"][fn] = sites

    edges: dict[str, dict[str, list[tuple[int, bool]]]] = defaultdict(lambda: defaultdict(list))
    for mod, (_path, v) in visitors.items():
        for target, line, inside in v.imports:
            if target != mod:
                edges[mod][target].append((line, inside))
    cycles = sorted(
        {tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, {})}
    )
    # a package importing its own submodules is how packages work; a submodule importing its
    # package back is counted under upward imports, not here
    cycles = [c for c in cycles if not (c[1].startswith(c[0] + ".") or c[0].startswith(c[1] + "."))]
    out["import cycles (module pairs)"] = len(cycles)
    out["details"]["cycles"] = [f"{a} <-> {b}" for a, b in cycles]

    upward = []
    for mod, targets in edges.items():
        p, v = visitors[mod]
        lm = layer_of(mod)
        for target, sites in targets.items():
            lt = layer_of(target)
            own_package = mod.startswith(target + ".") and target != "hwnas"
            climbs = lm is not None and lt is not None and lt > lm
            if own_package or climbs:
                for line, inside in sites:
                    upward.append((f"{rel(p)}:{line}", target, inside))
    out["upward imports"] = len(upward)
    out["upward imports inside functions"] = sum(u[2] for u in upward)
    out["details"]["upward"] = [
        f"{a} -> {t}{' (in a function)' if i else ''}" for a, t, i in sorted(upward)
    ]

    out["function-level imports"] = sum(v.function_imports for _p, v in visitors.values())
    out["function-level imports of hwnas modules"] = sum(
        v.function_imports_hwnas for _p, v in visitors.values()
    )
    sites = [f"{rel(p)}:{ln}" for p, v in visitors.values() for ln in v.study_names]
    out["study name built (places)"] = len(sites)
    out["details"]["study names"] = sites
    sites = [f"{rel(p)}:{ln}" for p, v in visitors.values() for ln in v.lut_checks]
    out["isinstance(..., MultilinearLUT)"] = len(sites)
    out["details"]["lut checks"] = sites
    sites = [f"{rel(p)}:{ln}" for p, v in visitors.values() for ln in v.recasts]
    out["settings re-cast after parsing"] = len(sites)
    out["details"]["recasts"] = sites

    long = []
    for _mod, (p, v) in visitors.items():
        r = rel(p)
        if r.startswith(ENGINE) or r.startswith(JOB_LAYER):
            long += [f"{r}:{ln} {name} ({n} lines)" for name, ln, n in v.functions if n > LONG]
    out[f"functions over {LONG} lines (search + job layer)"] = len(long)
    out["details"]["long functions"] = long
    longest = max(
        (
            (n, f"{rel(p)}:{name}")
            for _m, (p, v) in visitors.items()
            for name, _ln, n in v.functions
            if rel(p).startswith(ENGINE) or rel(p).startswith(JOB_LAYER)
        ),
        default=(0, ""),
    )
    out["longest function there (lines)"] = f"{longest[0]} ({longest[1]})"

    sites = [
        f"{rel(p)}:{ln}"
        for p, v in visitors.values()
        for ln in v.optuna_private
        if rel(p) not in (ENGINE[0] + "ledger.py", ENGINE[1] + "ledger.py")
    ]
    out["Optuna private names outside the ledger"] = len(sites)
    out["details"]["optuna private"] = sites

    lists = sorted({rel(p) for p, v in visitors.values() if v.runtime_lists})
    out["files a new runtime touches"] = 2 + len(lists)
    out["details"]["runtime lists"] = [
        f"{rel(p)}:{ln}" for p, v in visitors.values() for ln in v.runtime_lists
    ]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--details", action="store_true", help="list every site counted")
    args = ap.parse_args()
    result = analyse(args.root)
    details = result.pop("details")
    width = max(map(len, result))
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    if args.details:
        for key, items in details.items():
            print(f"\n## {key} ({len(items)})")
            for item in items:
                print(f"  {item}")


if __name__ == "__main__":
    main()
