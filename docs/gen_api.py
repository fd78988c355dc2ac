"""Write ``docs/API.md`` from the docstrings of graphssl's public modules.

    python docs/gen_api.py           # rewrite docs/API.md
    python docs/gen_api.py --check   # exit 1 if docs/API.md is out of date

Public = every module of the package whose name has no leading underscore, and in it every
function or class defined there (not imported) whose name has no leading underscore.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import re
import sys
from pathlib import Path

import graphssl

API_PAGE = Path(__file__).resolve().parent / "API.md"


def public_modules() -> list[str]:
    """Dotted names of graphssl's public modules, sorted."""
    names = ["graphssl"]
    for info in pkgutil.walk_packages(graphssl.__path__, prefix="graphssl."):
        if not any(part.startswith("_") for part in info.name.split(".")):
            names.append(info.name)
    return sorted(names)


def public_members(module) -> list[tuple[str, object]]:
    """(name, object) for the functions and classes a module defines itself."""
    members = []
    for name, obj in vars(module).items():
        if callable(obj) and hasattr(obj, "__wrapped__"):  # a jitted function: the one inside
            obj = inspect.unwrap(obj)
        if name.startswith("_") or not (inspect.isfunction(obj) or inspect.isclass(obj)):
            continue
        if getattr(obj, "__module__", None) == module.__name__:
            members.append((name, obj))
    return sorted(members)


def missing_docstrings() -> list[str]:
    """Public modules, functions and classes without a docstring (dotted names)."""
    missing = []
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        if not inspect.getdoc(module):
            missing.append(module_name)
        missing += [f"{module_name}.{name}" for name, obj in public_members(module)
                    if not _has_own_docstring(name, obj)]
    return missing


def _has_own_docstring(name: str, obj) -> bool:
    """False for no docstring or the one dataclass/NamedTuple writes itself (``Name(a, b)``)."""
    doc = inspect.getdoc(obj) or ""
    return bool(doc) and not (inspect.isclass(obj) and doc.startswith(f"{name}("))


def _signature(name: str, obj) -> str:
    """``name(params)``, with object defaults shown without their memory address."""
    try:
        text = f"{name}{inspect.signature(obj)}"
    except (TypeError, ValueError):
        return name
    return re.sub(r"<(function|built-in function|class) ([\w.]+)( at 0x[0-9a-f]+)?>", r"\2", text)


def _section(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    lines = [f"## `{module_name}`", "", inspect.getdoc(module) or "", ""]
    for name, obj in public_members(module):
        kind = "class" if inspect.isclass(obj) else "def"
        lines += [f"### `{module_name}.{name}`", "", "```python",
                  f"{kind} {_signature(name, obj)}", "```", "",
                  (inspect.getdoc(obj) or "").replace("\n", "  \n"), ""]
    return lines


def render() -> str:
    """The whole API page as Markdown."""
    lines = ["# graphssl API", "",
             "Generated from the docstrings by `python docs/gen_api.py`; do not edit by hand.", ""]
    modules = public_modules()
    lines += [f"- [`{m}`](#{m.replace('.', '')})" for m in modules] + [""]
    for module_name in modules:
        lines += _section(module_name)
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if API.md is stale")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = API_PAGE.read_text() if API_PAGE.exists() else ""
        if current != text:
            print(f"{API_PAGE} is out of date: run python docs/gen_api.py", file=sys.stderr)
            return 1
        return 0
    API_PAGE.write_text(text)
    print(f"wrote {API_PAGE} ({len(text)} characters)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
