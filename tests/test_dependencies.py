"""The declared dependencies match the imports of graphssl/ (parsed with ``ast``).

* every third-party top-level package imported in graphssl/ is declared in pyproject.toml,
  in the core list or in an extra;
* a package declared only in an extra is imported lazily (inside a function) or under
  ``try: ... except ImportError``, so that ``import graphssl`` works without it;
* every core dependency is imported somewhere in graphssl/ (or is listed in
  ``USED_INDIRECTLY`` with the call that needs it).

Optional back ends loaded by name (``_optional("faiss", ...)``, ``importlib.import_module``)
count as lazy imports.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re
import sys
import tomllib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "graphssl"

# distribution name (lower case) -> import name, where they differ
IMPORT_NAMES = {
    "pymaxflow": "maxflow",
    "scikit-learn": "sklearn",
    "faiss-cpu": "faiss",
    "faiss-gpu": "faiss",
    "faiss-gpu-cu12": "faiss",
    "python-igraph": "igraph",
    "pyyaml": "yaml",
    "pillow": "PIL",
}
# declared core dependencies that graphssl uses without importing them by name
USED_INDIRECTLY = {
    "h5netcdf": "the netCDF engine of arviz / xarray's to_netcdf (graphssl.runs)",
    "h5py": "h5netcdf's HDF5 back end (h5netcdf >= 1.8 no longer requires it)",
}
LOADERS = {"_optional", "import_module"}  # calls whose first argument is a module name


def _distribution(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower()


def _import_name(distribution: str) -> str:
    return IMPORT_NAMES.get(distribution, distribution.replace("-", "_"))


def _declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {_import_name(_distribution(r)) for r in project["dependencies"]}
    extras = {
        _import_name(_distribution(r))
        for group in project.get("optional-dependencies", {}).values()
        for r in group
    }
    return core, extras - core


class _Imports(ast.NodeVisitor):
    """Top-level package of every import, with whether it is lazy or guarded."""

    def __init__(self):
        self.found: list[tuple[str, bool, int]] = []  # (package, guarded, line)
        self._depth = 0  # inside a function, or in a try that catches ImportError

    def _guarded_visit(self, node):
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _guarded_visit

    def visit_Try(self, node):
        catches = any(
            handler.type is None
            or any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError")
                   for n in ast.walk(handler.type))
            for handler in node.handlers
        )
        if catches:
            self._depth += 1
        for child in node.body:
            self.visit(child)
        if catches:
            self._depth -= 1
        for child in node.handlers + node.orelse + node.finalbody:
            self.visit(child)

    def _add(self, name: str, line: int, lazy: bool = False):
        self.found.append((name.split(".")[0], lazy or self._depth > 0, line))

    def visit_Import(self, node):
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node):
        if node.level == 0 and node.module:
            self._add(node.module, node.lineno)

    def visit_Call(self, node):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if name in LOADERS and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str) and "{" not in node.args[0].value:
            self._add(node.args[0].value, node.lineno, lazy=True)
        self.generic_visit(node)


@functools.cache
def _third_party_imports():
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    out: dict[str, list[tuple[str, bool]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        visitor = _Imports()
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        for package, guarded, line in visitor.found:
            if package in stdlib or package == "graphssl":
                continue
            where = f"{path.relative_to(ROOT)}:{line}"
            out.setdefault(package, []).append((where, guarded))
    return out


def test_every_import_is_declared_and_extras_are_guarded():
    core, extras = _declared()
    imports = _third_party_imports()
    undeclared = {p: [w for w, _ in uses] for p, uses in imports.items()
                  if p not in core and p not in extras}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    unguarded = {p: [w for w, g in uses if not g] for p, uses in imports.items()
                 if p in extras and not all(g for _, g in uses)}
    assert not unguarded, (
        f"packages of an extra imported at module level (import them inside the function "
        f"that needs them, or under try/except ImportError): {unguarded}"
    )


def test_every_core_dependency_is_imported():
    core, _ = _declared()
    imports = _third_party_imports()
    unused = sorted(core - set(imports) - set(USED_INDIRECTLY))
    assert not unused, f"declared core dependencies never imported by graphssl/: {unused}"
    stale = sorted(set(USED_INDIRECTLY) - core)
    assert not stale, f"USED_INDIRECTLY names packages that are no longer declared: {stale}"


def test_the_checker_sees_lazy_and_module_level_imports():
    source = (
        "import numpy\n"
        "try:\n    import faiss\nexcept ImportError:\n    faiss = None\n"
        "def f():\n    import dask.distributed\n    return _optional('pynndescent', None, 'x')\n"
    )
    visitor = _Imports()
    visitor.visit(ast.parse(source))
    assert sorted((p, g) for p, g, _ in visitor.found) == [
        ("dask", True), ("faiss", True), ("numpy", False), ("pynndescent", True)
    ]
    assert _import_name(_distribution("scikit-learn>=1.4")) == "sklearn"
    assert _import_name(_distribution("PyMaxflow>=1.3")) == "maxflow"
    assert _import_name(_distribution("dask[distributed]>=2024.1")) == "dask"
