"""k-means for the mixtures of Zhu & Lafferty (2005): k-means++ seeding and Lloyd iterations.

Initialises the mixtures (Sec. 4.2) and gives the hard-clustering backbone of Sec. 3.3.
Assignments are computed over row batches (memory ``O(batch * M)``, never ``n x M``).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from graphssl.validation import check_count

__all__ = ["kmeans", "kmeans_assign"]


def _sq_dists(X, centers):
    d2 = (X * X).sum(1)[:, None] - 2.0 * X @ centers.T + (centers * centers).sum(1)[None]
    return jnp.maximum(d2, 0.0)


def _batches(X, batch_size):
    """Pad X to a multiple of batch_size; returns ``([nb, B, ...], keep [nb, B])``."""
    n = X.shape[0]
    B = min(batch_size, n)
    nb = -(-n // B)
    pad = nb * B - n
    Xp = jnp.concatenate([X, jnp.zeros((pad,) + X.shape[1:], X.dtype)])
    keep = jnp.concatenate([jnp.ones(n, bool), jnp.zeros(pad, bool)])
    return Xp.reshape((nb, B) + X.shape[1:]), keep.reshape(nb, B)


def kmeans_assign(X, centers, batch_size: int = 8192):
    """Nearest centre of each row and its squared distance (batched), ``(int[n], float[n])``."""
    Xb, _ = _batches(X, batch_size)

    def one(xb):
        d2 = _sq_dists(xb, centers)
        return jnp.argmin(d2, 1), jnp.min(d2, 1)

    a, d = jax.lax.map(one, Xb)
    n = X.shape[0]
    return a.reshape(-1)[:n], d.reshape(-1)[:n]


def _kmeans_plus_plus(X, n_clusters, key):
    n = X.shape[0]
    k0, key = jax.random.split(key)
    first = X[jax.random.randint(k0, (), 0, n)]
    centers = jnp.zeros((n_clusters, X.shape[1]), X.dtype).at[0].set(first)
    d2 = ((X - first) ** 2).sum(1)

    def body(j, carry):
        centers, d2, key = carry
        key, sub = jax.random.split(key)
        logits = jnp.log(jnp.maximum(d2, 0.0) + jnp.finfo(X.dtype).tiny)
        c = X[jax.random.categorical(sub, logits)]
        return centers.at[j].set(c), jnp.minimum(d2, ((X - c) ** 2).sum(1)), key

    centers, _, _ = jax.lax.fori_loop(1, n_clusters, body, (centers, d2, key))
    return centers


def kmeans(X, n_clusters: int, key, *, n_iter: int = 50, batch_size: int = 8192):
    """k-means (k-means++ seeding + Lloyd): ``(centers [M, D], assignments int[n], inertia)``.

    Empty clusters keep their previous centre. Used to initialise the mixtures (Sec. 4.2)
    and as the hard-clustering backbone of Sec. 3.3.

    Args:
      X: float[n, D], n >= 1 points, finite (NaN would put every point in cluster 0).
      n_clusters: M >= 1.
      key: a JAX random key (``jax.random.key(seed)`` or ``jax.random.PRNGKey(seed)``).
      n_iter, batch_size: Lloyd iterations (>= 0) and rows per assignment batch (>= 1).
    """
    _check_points(X)
    n_clusters = check_count(n_clusters, "n_clusters", least=1)
    n_iter = check_count(n_iter, "n_iter", least=0)
    batch_size = check_count(batch_size, "batch_size", least=1)
    _check_key(key)
    return _kmeans(X, key, n_clusters, n_iter, batch_size)


def _check_points(X) -> None:
    """``X`` is ``[n, D]`` with ``n >= 1``; concrete values must be finite (a traced ``X``,
    inside ``jax.jit``, is checked for its shape only)."""
    shape = np.shape(X)
    if len(shape) != 2 or shape[0] == 0:
        raise ValueError(f"X: expected points float[n, D] with n >= 1, got shape {shape}; "
                         "reshape one feature with X.reshape(-1, 1)")
    if not isinstance(X, jax.core.Tracer):
        finite = np.isfinite(np.asarray(X)).all(axis=1)
        if not finite.all():
            rows = np.flatnonzero(~finite)
            raise ValueError(f"X: {rows.size} rows contain NaN or inf (first: "
                             f"{rows[:5].tolist()}); impute or drop them")


def _check_key(key) -> None:
    """A JAX random key: a typed key array or a legacy ``uint32[2]`` ``PRNGKey``."""
    dtype = getattr(key, "dtype", None)
    if dtype is not None and (jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key)
                              or (np.dtype(dtype) == np.uint32 and np.shape(key) == (2,))):
        return
    raise ValueError(f"key: a JAX random key, e.g. jax.random.key(0), got {key!r}; "
                     "wrap an integer seed with jax.random.key(seed)")


@partial(jax.jit, static_argnums=(2, 3, 4))
def _kmeans(X, key, n_clusters, n_iter, batch_size):
    centers = _kmeans_plus_plus(X, n_clusters, key)

    def body(_, centers):
        a, _ = kmeans_assign(X, centers, batch_size)
        sums = jax.ops.segment_sum(X, a, num_segments=n_clusters)
        counts = jax.ops.segment_sum(jnp.ones(X.shape[0], X.dtype), a, num_segments=n_clusters)
        return jnp.where(counts[:, None] > 0, sums / jnp.maximum(counts, 1)[:, None], centers)

    centers = jax.lax.fori_loop(0, n_iter, body, centers)
    a, d2 = kmeans_assign(X, centers, batch_size)
    return centers, a, d2.sum()
