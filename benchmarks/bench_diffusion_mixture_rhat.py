"""Do chains of Walder's sampler started apart agree on Digit1? R-hat vs iterations and moves.

Digit1, split 0 with 10 labels, the 10-label protocol of Walder Sec. 5 (k = 10, tau = 5,
alpha = 0.5, eta uniform), gamma = 0.8. Four chains started apart: Parzen-window labels with
10 % of them redrawn from eta per chain, centres beta_i = i (``--init parzen``), or labels
~ eta and random centres (``--init random``). For each move setting (attempts per iteration
of re-sampling, re-labelling, split-merge, centred split-merge, cluster flip, neighbourhood
block, component flip; ``1,1,0`` is the paper's iteration) it records,
in one process so the settings share the machine's load:

* rank-normalised split R-hat (ArviZ) and bulk ESS of the permutation-invariant energy,
  number of occupied components, weighted edge agreement (every post-burn-in iteration);
  of the co-assignment indicators ``[y_a = y_b]`` of 20 random node pairs and the sorted
  class sizes (thinned draws, :func:`graphssl.diagnostics.convergence_summary`);
* the same R-hats on the second half only (is the first half still burn-in?);
* the per-chain test accuracy of the draws (do chains sit in different label states?);
* iterations per second (compile excluded) with the load average before and after.

Usage::

    python benchmarks/bench_diffusion_mixture_rhat.py [--iterations N] [--burn-in B]
        [--moves 1,1,0 1,2,20] [--init parzen] [--engine auto] [--state FILE]
        [--block-size 24]

``--state FILE`` saves the chains after the run and, when the file exists, continues them
for ``--iterations`` more (``sample_mixture(resume=...)``: the same draws as one long run),
so a long run can be split over several calls of a time-limited machine.

Writes ``benchmarks/results/bench_diffusion_mixture_rhat.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import pickle
import time

import arviz as az
import jax
import jax.numpy as jnp
import numpy as np
from _portable import portable
from bench_diffusion_mixture import RESULTS, Diffusions, load, split_run, timed_sampler

from graphssl import diagnostics
from graphssl.inference.diffusion_mixture import sampler as dms


def _rhat_ess(x):
    x = np.asarray(x, np.float64)
    return float(az.rhat(x)), float(az.ess(x))


def _state_path(args, moves):
    return pathlib.Path(f"{args.state}.{'_'.join(map(str, moves))}.pkl") if args.state else None


def run(model, parzen, y, test, moves, args):
    static = dict(n_chains=4, n_iterations=args.iterations, burn_in=args.burn_in,
                  thin=args.thin, max_components=2, moves=moves,
                  init_beta="self" if args.init == "parzen" else "random",
                  engine=dms.resolve_engine(args.engine, model), block_size=args.block_size)
    init = jnp.asarray(parzen, jnp.int32) if args.init == "parzen" else None
    noise = 0.1 if args.init == "parzen" else 0.0
    key = jax.random.PRNGKey(args.seed)
    path = _state_path(args, moves)
    previous = pickle.loads(path.read_bytes()) if path is not None and path.is_file() else None
    load_before = os.getloadavg()
    if previous is None:
        s, run_s, compile_s = timed_sampler(model, key, dict(static, init_noise=noise), init)
    else:  # continue the saved chains (compile included in the time)
        t = time.perf_counter()
        s = jax.block_until_ready(dms.sample_mixture(
            model, key, n_iterations=args.iterations, thin=args.thin, moves=moves,
            max_components=2, engine=args.engine, resume=previous,
            block_size=args.block_size))
        run_s, compile_s = time.perf_counter() - t, None
    if path is not None:
        path.write_bytes(pickle.dumps(jax.device_get(s)))
    load_after = os.getloadavg()
    half = int(np.asarray(s.energy).shape[-1]) // 2  # draws (one per thin iterations)
    rec = dict(moves=list(moves), iterations=args.iterations, burn_in=args.burn_in,
               total_recorded_draws=2 * half, resumed=previous is not None,
               engine=static["engine"], compile_seconds=compile_s, run_seconds=run_s,
               iterations_per_second=(args.iterations + (0 if previous else args.burn_in))
               / run_s,
               loadavg_before=load_before, loadavg_after=load_after,
               acceptance={k: float(np.mean(s.stats[f"{k}_accepted"]))
                           for k in dms.MOVES if f"{k}_accepted" in s.stats})
    for name in ("energy", "n_components", "edge_agreement"):
        x = np.asarray(s.energy if name == "energy" else s.stats[name], np.float64)
        rec[name] = dict(zip(("rhat", "ess"), _rhat_ess(x), strict=True))
        rec[name]["rhat_second_half"] = _rhat_ess(x[:, half:])[0]
        rec[name]["chain_means"] = x.mean(axis=1).tolist()
    conv = diagnostics.convergence_summary(s)
    for name in ("coassignment", "class_sizes"):
        r = np.asarray(conv[name]["rhat"])
        rec[name] = dict(max_rhat=float(np.max(r)) if r.size else None,
                         min_ess=float(np.min(conv[name]["ess"])) if r.size else None)
    labels = np.asarray(s.labels)
    acc = (labels[..., test] == y[test]).mean(axis=-1)
    rec["chain_accuracy"] = acc.mean(axis=1).tolist()
    post = dms.posterior_mean_labels(s)
    rec["posterior_mean_accuracy"] = float(np.mean(post[test] == y[test]))
    return rec


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--iterations", type=int, default=4000)
    p.add_argument("--burn-in", type=int, default=1000)
    p.add_argument("--thin", type=int, default=10)
    p.add_argument("--moves", nargs="+", default=["1,1,0", "1,2,20"])
    p.add_argument("--init", default="parzen", choices=("parzen", "random"))
    p.add_argument("--gamma", type=float, default=0.8)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--engine", default="auto", choices=dms.ENGINES)
    p.add_argument("--block-size", type=int, default=24,
                   help="nodes re-drawn by one neighbourhood block move (6th --moves count)")
    p.add_argument("--state", default="",
                   help="save the chains to STATE.<moves>.pkl; if it exists, continue them "
                        "for --iterations more (R-hat over all recorded iterations)")
    p.add_argument("--out", default=str(RESULTS / "bench_diffusion_mixture_rhat.json"))
    args = p.parse_args()
    X, y, splits = load("digit1")
    model, parzen = split_run(Diffusions(X), y, splits[10][0], np.full(2, 0.5), 10, 5.0,
                              args.gamma)
    test = ~np.asarray(model.observed)
    out = dict(device=str(jax.devices()[0]), settings=portable(vars(args)),
               parzen_accuracy=float(np.mean(parzen[test] == y[test])), runs=[])
    for moves in args.moves:
        counts = tuple(int(v) for v in moves.split(","))
        rec = run(model, parzen, y, test, counts, args)
        out["runs"].append(rec)
        print(f"moves {counts}: {rec['iterations_per_second']:.1f} it/s (4 chains, load "
              f"{rec['loadavg_before'][0]:.1f}); R-hat energy {rec['energy']['rhat']:.3f} "
              f"(2nd half {rec['energy']['rhat_second_half']:.3f}), n_components "
              f"{rec['n_components']['rhat']:.3f}, edge agreement "
              f"{rec['edge_agreement']['rhat']:.3f}, co-assignment max "
              f"{rec['coassignment']['max_rhat']:.3f}; ESS(energy) {rec['energy']['ess']:.0f}; "
              f"chain accuracy {np.round(rec['chain_accuracy'], 3).tolist()}; posterior mean "
              f"{rec['posterior_mean_accuracy']:.3f}; acceptance "
              f"{ {k: round(v, 4) for k, v in rec['acceptance'].items()} }", flush=True)
        pathlib.Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
