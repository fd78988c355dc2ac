"""Host-side array helpers (graphssl._device): same values as JAX's operations, without a
compiled program for arrays on the host, and JAX's own path inside ``jit``."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from graphssl._device import concatenate, take, to_device


@pytest.mark.parametrize("dtype", [np.int8, np.float32])
def test_concatenate_and_take_match_jax_and_compile_nothing(dtype, lowered_programs):
    rng = np.random.default_rng(0)
    parts = [to_device(rng.integers(0, 5, (3, size, 7)).astype(dtype)) for size in (4, 9, 2)]
    parts.append(rng.integers(0, 5, (3, 5, 7)).astype(dtype))  # a NumPy part too
    joined, n = lowered_programs(lambda: concatenate(parts, axis=1))
    assert n == 0 and isinstance(joined, jax.Array) and joined.dtype == dtype
    np.testing.assert_array_equal(joined, np.concatenate([np.asarray(p) for p in parts], 1))
    tail, n = lowered_programs(lambda: take(joined, 13))
    assert n == 0 and tail.shape == (3, 7, 7)
    np.testing.assert_array_equal(tail, np.asarray(joined)[:, 13:])
    middle, n = lowered_programs(lambda: take(joined, 2, 11))
    assert n == 0
    np.testing.assert_array_equal(middle, np.asarray(joined)[:, 2:11])
    rows, n = lowered_programs(lambda: take(joined, 1, axis=0))
    assert n == 0
    np.testing.assert_array_equal(rows, np.asarray(joined)[1:])
    assert take(joined, 0, joined.shape[1]) is joined
    # the check itself: JAX's eager concatenate of a new shape does compile
    _, n = lowered_programs(lambda: jnp.concatenate(parts[:2] + [parts[0]], axis=1))
    assert n >= 1


def test_inside_jit_the_helpers_take_jax_operations():
    @jax.jit
    def f(a, b):
        return take(concatenate([a, b], axis=1), 2)

    a, b = jnp.ones((2, 3)), jnp.zeros((2, 4))
    np.testing.assert_array_equal(f(a, b), np.concatenate([np.ones((2, 3)), np.zeros((2, 4))],
                                                          1)[:, 2:])
