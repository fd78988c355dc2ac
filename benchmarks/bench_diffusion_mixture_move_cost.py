"""What one iteration of Walder's sampler costs, part by part, and what the O(n) draws buy.

Digit1, split 0 with 10 labels, the 10-label protocol of Walder Sec. 5 (k = 10, tau = 5,
alpha = 0.5, gamma = 0.8), 4 chains from the Parzen start. For each move setting (attempts per
iteration of ``dms.MOVES``) it times ``--iterations`` iterations (compile excluded: a first
run compiles; the fastest of ``--repeats`` runs) and reports milliseconds per iteration;
``(0, 0)`` is the Gibbs sweep alone, so a row minus that one is the cost of its moves.

The moves draw categorical indices (a centre, a node, a partner) from one uniform through the
blocked inverse CDF (``diffusion_mixture.proposals.categorical``, O(n)). The peer, in the same
run, is the same sampler with ``jax.random.categorical`` (n Gumbel variates per draw) and the
member slots from a stable ``argsort`` (what the moves used before): the table gives both
and their ratio. Both samplers draw from the same distributions (the exactness tests of
``tests/test_diffusion_mixture.py`` pass with either).

Usage::

    python benchmarks/bench_diffusion_mixture_move_cost.py [--iterations 200] [--repeats 3]

Writes ``benchmarks/results/bench_diffusion_mixture_move_cost.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
from bench_diffusion_mixture import RESULTS, Diffusions, load, split_run

from graphssl.inference.diffusion_mixture import cluster_moves, proposals, split_merge
from graphssl.inference.diffusion_mixture import moves as paper_moves
from graphssl.inference.diffusion_mixture import sampler as dms

# the modules whose moves draw through proposals.categorical / proposals.member_slots
_USERS = (proposals, paper_moves, split_merge, cluster_moves)

SETTINGS = [(0, 0), (20, 0), (0, 1), (0, 0, 0, 4), (0, 0, 0, 0, 0, 0, 10),
            (20, 1, 0, 4, 0, 0, 10)]


def _gumbel_categorical(key, logits):
    return jax.random.categorical(key, logits).astype(jnp.int32)


def _sorted_member_slots(members, max_members):
    index = jnp.argsort(~members, stable=True)[:max_members]
    count = jnp.sum(members)
    used = jnp.arange(index.shape[0]) < count
    return proposals.Slots(jnp.where(used, index, 0), used, count)


@contextlib.contextmanager
def peer_draws():
    """The moves with Gumbel categorical draws and sorted member slots (the peer)."""
    names = {"categorical": _gumbel_categorical, "member_slots": _sorted_member_slots}
    saved = [(mod, name, getattr(mod, name)) for mod in _USERS for name in names
             if hasattr(mod, name)]
    for mod, name, _ in saved:
        setattr(mod, name, names[name])
    try:
        yield
    finally:
        for mod, name, value in saved:
            setattr(mod, name, value)


def ms_per_iteration(model, init, moves, n_iterations, repeats):
    """Milliseconds per iteration of 4 chains (compile excluded) and the final labels (so the
    caller can check that the peer's draws really are other draws)."""
    jax.clear_caches()  # trace afresh: the peer's draws are patched module globals
    static = dict(n_chains=4, n_iterations=n_iterations, burn_in=0, thin=10, max_components=2,
                  moves=moves, init_beta="self", engine="scan", block_size=24,
                  init_noise=0.1)
    key = jax.random.PRNGKey(0)
    run = lambda: jax.block_until_ready(dms.sample_mixture(model, key, init_labels=init,  # noqa: E731
                                                           **static))
    run()  # compiles
    seconds = []
    for _ in range(repeats):  # the fastest of a few runs: the machine's load only adds time
        t = time.perf_counter()
        samples = run()
        seconds.append(time.perf_counter() - t)
    return 1000 * min(seconds) / n_iterations, np.asarray(samples.final_state.labels)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3, help="timed runs per setting (fastest)")
    p.add_argument("--out", default=str(RESULTS / "bench_diffusion_mixture_move_cost.json"))
    args = p.parse_args()
    X, y, splits = load("digit1")
    model, parzen = split_run(Diffusions(X), y, splits[10][0], np.full(2, 0.5), 10, 5.0, 0.8)
    init = jnp.asarray(parzen, jnp.int32)
    rows = []
    load_before = os.getloadavg()
    for moves in SETTINGS:
        counts = dms.move_counts(moves)
        ours, y_ours = ms_per_iteration(model, init, counts, args.iterations, args.repeats)
        with peer_draws():
            peer, y_peer = ms_per_iteration(model, init, counts, args.iterations, args.repeats)
        if sum(counts) and np.array_equal(y_ours, y_peer):
            raise RuntimeError("the peer drew what ours drew: its patch did not take effect")
        rows.append(dict(moves=list(counts), ms_per_iteration=ours,
                         peer_ms_per_iteration=peer, speedup=peer / ours))
    out = dict(device=str(jax.devices()[0]), iterations=args.iterations, chains=4,
               repeats=args.repeats,
               loadavg_before=load_before, loadavg_after=os.getloadavg(), rows=rows)
    print(f"Digit1 split 0, 4 chains, {args.iterations} iterations per setting, "
          f"{out['device']}, load {load_before[0]:.1f} -> {out['loadavg_after'][0]:.1f}")
    print(f"{'moves':>24s} {'ms/it (O(n) draws)':>19s} {'ms/it (Gumbel, sort)':>21s} "
          f"{'ratio':>6s}")
    for r in rows:
        print(f"{str(tuple(r['moves'])):>24s} {r['ms_per_iteration']:19.1f} "
              f"{r['peer_ms_per_iteration']:21.1f} {r['speedup']:6.2f}")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
