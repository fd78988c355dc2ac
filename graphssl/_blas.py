"""Thread limits for small dense linear algebra, through one cached threadpoolctl
controller.

``threadpoolctl.threadpool_limits`` builds a new ``ThreadpoolController`` on every call, and
building one scans every shared library the process has loaded (17 ms CPU per call on the
2-core project machine: half of a whole default fit at n = 10^3). :func:`limited_threads`
uses scikit-learn's own process-wide controller (the one its neighbour search and
pairwise-distance reductions limit threads with), so a fit that runs both pays one scan,
not two; without that private helper it builds one of its own, once per process. A library
loaded after the first scan (a BLAS that comes with a later import) is not limited; the
BLAS of NumPy and SciPy, which these limits are for, is loaded with them.
"""

from __future__ import annotations

import functools

__all__ = ["limited_threads"]


@functools.cache
def _controller():
    try:  # scikit-learn's cached controller: one library scan per process for both
        from sklearn.utils.parallel import _get_threadpool_controller
    except ImportError:  # pragma: no cover - a scikit-learn without the helper
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController()
    return _get_threadpool_controller()


def limited_threads(limit: int = 1, user_api: str | None = "blas"):
    """Context manager: at most ``limit`` threads for ``user_api`` (``"blas"``,
    ``"openmp"``, or None for both) inside the ``with`` block."""
    return _controller().limit(limits=limit, user_api=user_api)
