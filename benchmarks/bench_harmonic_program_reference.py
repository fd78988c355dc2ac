"""The whole harmonic-mixture program under NUTS against a long random-walk reference run.

    python benchmarks/bench_harmonic_program_reference.py           # 16 points, M = 2
    python benchmarks/bench_harmonic_program_reference.py --quick   # smoke run

:func:`graphssl.models.numpyro.programs.harmonic_mixture_program` (Zhu & Lafferty 2005, Eq. 3
with the priors of ``numpyro_mixture_model``) has only continuous sites: component weights,
means and scales, and lambda (``label_probs``), seven unconstrained dimensions here. The tests
check it with the components fixed (lambda against quadrature on a grid); this script samples
**every site** with ``MCMC(NUTS(program))`` and compares it with a long reference run of a
different algorithm on the same density: random-walk Metropolis in numpyro's unconstrained
space (``initialize_model``'s potential, Jacobians included; Gaussian steps whose scale is
adapted to 0.25 acceptance during warm-up, then fixed).

The mixture's components are exchangeable, so the comparison uses quantities invariant to
relabelling them: the posterior mean of ``f_i = p(y_i = 1 | x_i)`` (``R lambda``) at every
unlabelled node and of the graph energy (Eq. 2). Standard errors: the spread of per-chain
means over sqrt(chains), for each run; ``z = |NUTS - reference| / sqrt(se_1^2 + se_2^2)``.
Data: 16 points on a line (two clusters, four labelled points), the weighted ring graph of
``tests/test_numpyro_programs.py``, ``alpha = 0.5``, ``M = 2``, diagonal covariances.
Writes ``benchmarks/results/bench_harmonic_program_reference.json``.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro.infer import MCMC, NUTS
from numpyro.infer.util import initialize_model

from graphssl.models.harmonic_mixture import GaussianMixture, responsibilities
from graphssl.models.numpyro import harmonic_mixture_program

jax.config.update("jax_enable_x64", True)
RESULTS = Path(__file__).resolve().parent / "results"
POINTS = np.array([0.0, 0.4, 0.9, 1.3, 3.0, 3.5, 3.9, 4.6])
X = np.concatenate([POINTS, POINTS + 0.1])[:, None]
LABELS = np.array([0, -1, -1, -1, 1, -1, -1, -1] * 2)
ALPHA, M = 0.5, 2
KWARGS = dict(n_components=M, alpha=ALPHA)


def ring_laplacian(n=16, chord=0.6, seed=0):
    """The weighted ring (with one chord) of the tests, as a dense Laplacian."""
    rng = np.random.default_rng(seed)
    W = np.zeros((n, n))
    for i in range(n):
        W[i, (i + 1) % n] = W[(i + 1) % n, i] = rng.uniform(0.6, 1.2)
    W[0, n // 2] = W[n // 2, 0] = chord
    return np.diag(W.sum(1)) - W


def invariants(params, laplacian):
    """``[f_U..., E]`` of one constrained draw: soft labels of the unlabelled nodes and the
    graph energy, both invariant to relabelling the components."""
    mixture = GaussianMixture(jnp.log(params["weights"]), params["means"],
                              params["scales"] ** 2, jnp.log(params["label_probs"]), "diag")
    f = responsibilities(mixture, jnp.asarray(X)) @ params["label_probs"][:, 1]
    f = jnp.where(jnp.asarray(LABELS >= 0), jnp.asarray(LABELS, f.dtype), f)
    energy = f @ (jnp.asarray(laplacian) @ f)
    return jnp.concatenate([f[LABELS < 0], energy[None]])


def nuts_run(laplacian, chains, warmup, samples, key):
    mcmc = MCMC(NUTS(harmonic_mixture_program), num_warmup=warmup, num_samples=samples,
                num_chains=chains, chain_method="vectorized", progress_bar=False)
    mcmc.run(key, X, LABELS, laplacian, **KWARGS)
    draws = mcmc.get_samples(group_by_chain=True)
    params = {k: draws[k] for k in ("weights", "means", "scales", "label_probs")}
    return jax.vmap(jax.vmap(lambda p: invariants(p, laplacian)))(params)


def reference_run(laplacian, chains, warmup, samples, thin, key):
    """Random-walk Metropolis in the unconstrained space, ``chains`` vmapped chains."""
    init = initialize_model(key, harmonic_mixture_program, model_args=(X, LABELS, laplacian),
                            model_kwargs=KWARGS)
    flat0, unravel = ravel_pytree(init.param_info.z)
    potential = jax.jit(lambda v: init.potential_fn(unravel(v)))

    def step(carry, key, adapt):
        v, u, log_scale = carry
        k1, k2 = jax.random.split(key)
        prop = v + jnp.exp(log_scale) * jax.random.normal(k1, v.shape)
        u_new = potential(prop)
        accept = jnp.exp(jnp.minimum(u - jnp.where(jnp.isnan(u_new), jnp.inf, u_new), 0.0))
        take = jax.random.uniform(k2) < accept
        v, u = jnp.where(take, prop, v), jnp.where(take, u_new, u)
        log_scale = log_scale + adapt * 0.05 * (accept - 0.25)
        return (v, u, log_scale), None

    def chain(key):
        k0, k_warm, k_keep = jax.random.split(key, 3)
        v = flat0 + 0.1 * jax.random.normal(k0, flat0.shape)
        carry = (v, potential(v), jnp.log(0.3))
        carry, _ = jax.lax.scan(lambda c, k: step(c, k, 1.0), carry,
                                jax.random.split(k_warm, warmup))

        def keep(c, k):
            c, _ = jax.lax.scan(lambda c2, k2: step(c2, k2, 0.0), c, jax.random.split(k, thin))
            params = init.postprocess_fn(unravel(c[0]))
            return c, invariants(params, laplacian)

        _, out = jax.lax.scan(keep, carry, jax.random.split(k_keep, samples))
        return out

    return jax.jit(jax.vmap(chain))(jax.random.split(key, chains))


def chain_estimate(values):
    per_chain = np.asarray(values).mean(axis=1)
    return per_chain.mean(0), per_chain.std(0, ddof=1) / np.sqrt(per_chain.shape[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    laplacian = ring_laplacian()
    chains = 16
    nuts = dict(warmup=200, samples=200) if args.quick else dict(warmup=1000, samples=1500)
    ref = (dict(warmup=2000, samples=200, thin=10) if args.quick
           else dict(warmup=20000, samples=2000, thin=100))
    t0 = time.process_time()
    a = nuts_run(laplacian, chains, key=jax.random.key(0), **nuts)
    t_nuts = time.process_time() - t0
    t0 = time.process_time()
    b = reference_run(laplacian, chains, key=jax.random.key(1), **ref)
    t_ref = time.process_time() - t0
    (ma, sa), (mb, sb) = chain_estimate(a), chain_estimate(b)
    z = np.abs(ma - mb) / np.sqrt(sa**2 + sb**2)
    names = [f"f[{i}]" for i in np.flatnonzero(LABELS < 0)] + ["graph_energy"]
    print(f"{'quantity':14} {'NUTS':>16} {'reference RWM':>16} {'z':>6}")
    for name, x, s, y, t, zz in zip(names, ma, sa, mb, sb, z, strict=True):
        print(f"{name:14} {x:9.4f} ± {s:.4f} {y:9.4f} ± {t:.4f} {zz:6.2f}")
    print(f"max z {z.max():.2f}; CPU s: NUTS {t_nuts:.1f}, reference {t_ref:.1f}")
    out = {"chains": chains, "nuts": nuts, "reference": ref, "alpha": ALPHA,
           "n_components": M, "quantities": names, "nuts_mean": ma.tolist(),
           "nuts_se": sa.tolist(), "reference_mean": mb.tolist(), "reference_se": sb.tolist(),
           "z": z.tolist(), "max_z": float(z.max()), "cpu_s": {"nuts": t_nuts,
                                                                "reference": t_ref}}
    if not args.quick:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / "bench_harmonic_program_reference.json"
        path.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
