"""Shared pieces of the estimator hyper-parameter tests (``test_estimator_params_a`` / ``_b``):
two labelled Gaussian blobs, and one bad parameter value as a ``pytest.param``."""

from __future__ import annotations

import re

import numpy as np
import pytest


def two_blobs(per_class: int):
    """``(X, y, truth)``: two 2-D Gaussian blobs (sd 0.7, means 0 and 4) of ``per_class``
    points each, the first three points of each labelled in ``y`` (-1 elsewhere)."""
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.7, (per_class, 2)), rng.normal(4, 0.7, (per_class, 2))])
    truth = np.repeat([0, 1], per_class)
    labelled = np.r_[0:3, per_class:per_class + 3]
    y = np.full(2 * per_class, -1)
    y[labelled] = truth[labelled]
    return X, y, truth


def bad_value_case(estimator, name, value, label=None, **extra):
    """One bad value: the message must start with ``label`` (default ``name``) and show the
    value given (``repr``), so that a message about some other value does not pass."""
    label = name if label is None else label
    pattern = rf"^{re.escape(label)}\b.*{re.escape(repr(value))}"
    ident = f"{estimator.__name__}-{name}={value!r}"
    return pytest.param(estimator, {**extra, name: value}, pattern, id=ident)
