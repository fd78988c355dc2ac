"""Settings as recorded in ``benchmarks/results/*.json``: no path of the machine they ran on.

A tracked result must not name a path of the machine that made it (its checkout, a home
folder, a temporary folder): :func:`portable` writes paths inside the repository relative to
its root (``benchmarks/results/x.json``) and any other absolute path as its last part.
"""

from __future__ import annotations

import os
import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]


def portable_path(value):
    """``value`` relative to the repository root when it lies inside it, its file name when
    it is another absolute path; anything else unchanged."""
    if not isinstance(value, str | os.PathLike) or not os.path.isabs(value):
        return value
    path = pathlib.Path(value).resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def portable(settings: dict) -> dict:
    """A copy of ``settings`` (e.g. ``vars(args)``) with :func:`portable_path` on each value."""
    return {key: portable_path(value) for key, value in settings.items()}
