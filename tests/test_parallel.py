"""Node-sharded mean field equals the single-device solve (4 forced host devices)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from graphssl import parallel
from graphssl.graph import knn_graph
from graphssl.models.potts import PottsModel

_SCRIPT = textwrap.dedent(
    """
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    from graphssl.graph import knn_graph
    from graphssl.models.potts import PottsModel
    from graphssl.inference.optimize.mean_field import MeanFieldOptions, naive_mean_field
    from graphssl.parallel import sharded_mean_field
    assert len(jax.devices()) == 4, jax.devices()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(203, 2))
    labels = np.full(203, -1); labels[:6] = [0, 1, 2, 0, 1, 2]
    model = PottsModel.create(knn_graph(X, 6), 3, beta=2.0, labels=labels)
    options = MeanFieldOptions(order="parallel", damping=0.5, tol=1e-10, max_iter=5000)
    ref, ref_info = naive_mean_field(model, options=options)
    sol, info = sharded_mean_field(model, options)
    assert sol.marginals.shape == (203, 3)
    np.testing.assert_allclose(sol.marginals, ref.marginals, atol=1e-9)
    assert int(info.iterations) == int(ref_info.iterations)
    print("OK", int(info.iterations))
    """
)


def test_sharded_mean_field_matches_single_device_on_4_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4",
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("OK")


def test_sharded_mean_field_single_device_and_errors():
    from graphssl.inference.optimize.mean_field import MeanFieldOptions, naive_mean_field

    X = np.random.default_rng(1).normal(size=(40, 2))
    labels = np.full(40, -1)
    labels[:2] = [0, 1]
    model = PottsModel.create(knn_graph(X, 4), 2, beta=1.5, labels=labels)
    sol, _ = parallel.sharded_mean_field(model)
    ref, _ = naive_mean_field(model, options=MeanFieldOptions(order="parallel"))
    np.testing.assert_allclose(sol.marginals, ref.marginals, atol=1e-12)
    with pytest.raises(ValueError, match="order"):
        parallel.sharded_mean_field(model, MeanFieldOptions(order="sequential"))
    with pytest.raises(ValueError, match="n_padded"):
        parallel.pad_rows(np.zeros(5), 3)
