"""Every warning graphssl raises goes through :func:`graphssl._warnings.warn_user`, so that it
names the user's line, not a library frame (parsed with ``ast``: a bare ``warnings.warn``
anywhere else in graphssl/ fails here)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from graphssl import _warnings

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "graphssl"


def _bare_warn_calls(path: pathlib.Path) -> list[int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "warn" and isinstance(node.func.value, ast.Name) \
                and node.func.value.id == "warnings":
            lines.append(node.lineno)
        if isinstance(node, ast.ImportFrom) and node.module == "warnings" \
                and any(alias.name == "warn" for alias in node.names):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_bare_warnings_warn_in_the_package():
    found = {str(p.relative_to(PACKAGE)): lines for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "_warnings.py" and (lines := _bare_warn_calls(p))}
    assert found == {}, f"use graphssl._warnings.warn_user instead of warnings.warn: {found}"


def test_the_scan_sees_a_bare_call(tmp_path):
    source = tmp_path / "bad.py"
    source.write_text("import warnings\nwarnings.warn('x')\nfrom warnings import warn\n")
    assert _bare_warn_calls(source) == [2, 3]


def test_warn_user_names_the_first_frame_outside_the_package():
    with pytest.warns(UserWarning, match="here") as record:
        _warnings.warn_user("here")
    assert [w.filename for w in record] == [__file__]
