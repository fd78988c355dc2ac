"""Warnings attributed to the user's line, not to the library frame that noticed the problem.

A fixed ``stacklevel`` counts frames from the call of :func:`warnings.warn`; the same check
reached through ``fit``, ``fit_graph``, a suite or a helper sits at different depths, so a
fixed count names a library file for some of them (and the default "once per location"
filter then hides a second estimator's warning behind the first's). Python 3.12's
``skip_file_prefixes`` skips every frame in this package instead: the warning names the
first line outside it -- the user's script or notebook cell that called graphssl.
"""

from __future__ import annotations

import os
import warnings

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """:func:`warnings.warn` of ``message`` as ``category``, attributed to the first frame
    outside the graphssl package (:data:`PACKAGE_DIR`)."""
    warnings.warn(message, category, stacklevel=2, skip_file_prefixes=(PACKAGE_DIR,))
