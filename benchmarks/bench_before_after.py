"""Before / after a refactor: the same measurements on two source trees, interleaved.

    python benchmarks/bench_before_after.py --before PATH [--after PATH] [--rounds 3]
        [--cases grf_usps_full,boltzmann_exact_step,boltzmann_sw_step,chromatic_gibbs]

``PATH`` is the root of a checkout (e.g. ``git worktree add /tmp/before <commit>``; default
``--after``: this checkout). Each round runs every case once per tree, alternating the order,
each in a fresh ``nice -n 10`` process whose ``PYTHONPATH`` is the tree (the worker checks that
it imported that tree's ``graphssl``). A worker warms up (compilation, first call), then times
``--repeats`` calls with ``time.process_time`` (CPU seconds of the process, all threads:
steadier than wall time on a shared machine) and reports the median. The script imports only
names present in both layouts (``graphssl.inference.kernels`` before issue 23's layout,
``graphssl.inference.mcmc.kernels`` after).

Cases:
* ``grf_usps_full``: the harmonic function (GRF, Zhu et al. 2003) on usps_full, kNN graph
  (k = 10, ``sigma="kth_over_3"``, built once, not timed), 5 random splits at 2 % labels, CPU
  seconds per solve (median over splits x repeats) and mean accuracy on the unlabelled nodes.
* ``boltzmann_exact_step``: one exact-enumeration gradient of the Boltzmann MRF's extended
  model on the 16-point double arcs (2 x 2^16 configurations; ``bench_boltzmann.py`` 1).
* ``boltzmann_sw_step``: one Swendsen-Wang gradient of the basic model (two moons n = 1000,
  10 labels, kNN k = 10 pairs, 4 chains x 200 draws, 100 burn-in; ``bench_boltzmann.py`` 2).
* ``chromatic_gibbs``: chromatic Gibbs, default layout, Potts q = 10, N = 10^5 on the
  random kNN-like graph of ``bench_samplers.py`` (1 % clamped, beta = 1), ``--sweeps`` sweeps
  in one compiled loop: site updates per CPU second, and a digest of the optimised program
  (source locations stripped): the same digest in both trees means the same program.

Writes ``benchmarks/results/bench_before_after[_TAG].json`` and prints a table of medians and
after/before ratios (> 1: after is slower for times, faster for rates).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import pathlib
import re
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve()
RESULTS = HERE.parent / "results"
CASES = ("grf_usps_full", "boltzmann_exact_step", "boltzmann_sw_step", "chromatic_gibbs")
RATES = {"chromatic_gibbs"}  # higher is better


def _cpu_median(fn, repeats):
    import jax

    jax.block_until_ready(fn())  # compile / warm up
    cpu = []
    for _ in range(repeats):
        c = time.process_time()
        jax.block_until_ready(fn())
        cpu.append(time.process_time() - c)
    return statistics.median(cpu), cpu


def case_grf_usps_full(repeats, **_):
    import numpy as np

    from graphssl.data import load_dataset, random_splits
    from graphssl.graph import knn_graph
    try:
        from graphssl.inference.optimize.baselines import harmonic_function
    except ImportError:  # before the layout of issue 23
        from graphssl.models.baselines import harmonic_function
    usps = load_dataset("usps_full")
    C = int(usps.y.max()) + 1
    W = knn_graph(usps.X, 10, sigma="kth_over_3").to_scipy()
    splits = list(random_splits(usps.y, 0.02, n_splits=5, seed=0))
    cpu, acc = [], []
    for lab_idx in splits:
        labels = np.full(usps.y.size, -1)
        labels[lab_idx] = usps.y[lab_idx]
        mask = labels < 0
        harmonic_function(W, labels, n_classes=C)  # warm up
        for _ in range(repeats):
            c = time.process_time()
            pred = harmonic_function(W, labels, n_classes=C).argmax(1)
            cpu.append(time.process_time() - c)
        acc.append(float(np.mean(pred[mask] == usps.y[mask])))
    return {"value": statistics.median(cpu), "unit": "CPU s per solve", "runs": cpu,
            "accuracy": float(np.mean(acc))}


def _boltzmann():
    try:
        from graphssl.inference.boltzmann import learning as bl
    except ImportError:
        from graphssl.inference import boltzmann_learning as bl
    return bl


def case_boltzmann_exact_step(repeats, **_):
    import jax.numpy as jnp
    import numpy as np

    from graphssl import data
    from graphssl.models.boltzmann import ExtendedParams, pair_geometry

    bl = _boltzmann()
    X = data.double_arcs().X
    labels = np.full(16, -1)
    labels[[0, 15]] = [0, 1]
    problem = bl.BoltzmannProblem(pair_geometry(X), labels, 2, "extended")
    theta = ExtendedParams(jnp.asarray(1.1), jnp.asarray([0.8, -1.9]), jnp.asarray([1.0, 1.0]),
                           jnp.asarray(1.6))
    oracle = bl.GradientOracle(problem)
    if hasattr(oracle, "init"):  # after issue 23: a pure (state, theta) -> (state, value)
        state = oracle.init()
        med, runs = _cpu_median(lambda: oracle(state, theta)[1].gradient, repeats)
    else:
        med, runs = _cpu_median(lambda: oracle(theta)[1], repeats)
    return {"value": med, "unit": "CPU s per gradient", "runs": runs}


def case_boltzmann_sw_step(repeats, **_):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from graphssl import data
    from graphssl.models.boltzmann import pair_geometry

    bl = _boltzmann()
    n = 1000
    ds = data.two_moons(n, seed=0)
    rng = np.random.default_rng(0)
    idx = np.r_[rng.choice(np.flatnonzero(ds.y == 0), 5, replace=False),
                rng.choice(np.flatnonzero(ds.y == 1), 5, replace=False)]
    labels = np.full(n, -1)
    labels[idx] = ds.y[idx]
    geometry = pair_geometry(ds.X, k=10)
    problem = bl.BoltzmannProblem(geometry, labels, 2, "basic")
    d = np.sqrt(np.asarray(geometry.sq_dist))
    prior = bl.ExponentialSigmaPrior(
        rate=20.0, sigma_max=float(np.sqrt(((ds.X[:, None] - ds.X[None]) ** 2).sum(-1).max())))
    chains = bl.ChainSettings(n_chains=4, n_samples=200, burn_in=100)
    theta = bl.BasicParams(jnp.log(jnp.asarray(float(np.median(d)))))
    if hasattr(bl, "OracleState"):  # after issue 23: the chains' state is threaded through
        oracle = bl.GradientOracle(problem, "swendsen_wang", prior, chains)
        box = [oracle.init(jax.random.key(0))]

        def call():
            box[0], value = oracle(box[0], theta)
            return value.gradient
    else:
        oracle = bl.GradientOracle(problem, "swendsen_wang", prior, jax.random.key(0), chains)

        def call():
            return oracle(theta)[1]
    med, runs = _cpu_median(call, repeats)
    return {"value": med, "unit": "CPU s per gradient", "runs": runs}


def _knn_like_graph(n, k=10, window=50, seed=0):
    """The graph of ``bench_samplers.knn_like_graph`` (copied: the script must not depend on
    either tree's benchmarks)."""
    import jax.numpy as jnp
    import numpy as np

    from graphssl.graph import Graph

    rng = np.random.default_rng(seed)
    width = 2 * window + 1
    present = np.zeros((n, width), dtype=bool)
    rows = np.repeat(np.arange(n, dtype=np.int64), k)
    offsets = rng.integers(1, window + 1, size=rows.size) * rng.choice([-1, 1], rows.size)
    present[rows, window + offsets] = True
    present[(rows + offsets) % n, window - offsets] = True
    s, col = np.nonzero(present)
    r = (s + col - window) % n
    lo, hi = np.minimum(s, r).astype(np.uint64), np.maximum(s, r).astype(np.uint64)
    z = lo * np.uint64(n) + hi + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    w = (0.2 + 0.8 * (z >> np.uint64(11)).astype(np.float64) / 2.0**53).astype(np.float32)
    return Graph(jnp.asarray(s, jnp.int32), jnp.asarray(r, jnp.int32), jnp.asarray(w), n)


def case_chromatic_gibbs(repeats, sweeps=100, n=100_000, q=10, **_):
    import jax
    import numpy as np

    from graphssl.inference import chromatic_gibbs, greedy_coloring
    from graphssl.models.potts import PottsModel
    try:
        from graphssl.inference.mcmc.kernels import merge_kernel, prepared, split_kernel
    except ImportError:
        from graphssl.inference.kernels import merge_kernel, prepared, split_kernel
    graph = _knn_like_graph(n)
    rng = np.random.default_rng(1)
    labels = np.full(n, -1)
    clamped = rng.choice(n, size=n // 100, replace=False)
    labels[clamped] = rng.integers(0, q, clamped.size)
    model = PottsModel.create(graph, q, beta=1.0, labels=labels)
    kernel = chromatic_gibbs(graph, colors=greedy_coloring(graph))
    state = kernel.init(model, jax.random.key(0))
    arrays, static = split_kernel(kernel)

    @jax.jit
    def run(arrays, model, key, state):
        k = merge_kernel(arrays, static)
        step_model = prepared(k, model)
        return jax.lax.fori_loop(
            0, sweeps, lambda t, s: k.step(step_model, jax.random.fold_in(key, t), s)[0], state)

    med, runs = _cpu_median(lambda: run(arrays, model, jax.random.key(1), state).labels,
                            repeats)
    # the optimised program without source locations: equal digests = the same program
    text = run.lower(arrays, model, jax.random.key(1), state).compile().as_text()
    text = re.sub(r",? ?metadata=\{[^}]*\}", "", text)
    text = re.sub(r",? ?stack_frame_id=\d+", "", text)
    text = "\n".join(line for line in text.splitlines()  # the source-location tables
                      if not re.match(r"\d+ (\"|\{file_)", line))
    if os.environ.get("BENCH_DUMP_PROGRAM"):  # to diff the two trees' programs
        pathlib.Path(os.environ["BENCH_DUMP_PROGRAM"]).write_text(text)
    return {"value": n * sweeps / med, "unit": "site updates per CPU s", "runs": runs,
            "cpu_s": med, "sweeps": sweeps, "n": n, "q": q,
            "program_sha256": hashlib.sha256(text.encode()).hexdigest()[:16],
            "program_lines": text.count("\n")}


def worker(case, tree, repeats, sweeps):
    import graphssl

    root = pathlib.Path(graphssl.__file__).resolve().parent.parent
    if root != pathlib.Path(tree).resolve():
        raise SystemExit(f"imported graphssl from {root}, not from {tree}")
    out = globals()[f"case_{case}"](repeats=repeats, sweeps=sweeps)
    out["loadavg_1min"] = os.getloadavg()[0]
    print("RESULT " + json.dumps(out), flush=True)


def run_worker(case, tree, repeats, sweeps, timeout):
    env = dict(os.environ, PYTHONPATH=str(tree), JAX_PLATFORMS="cpu")
    command = ["nice", "-n", "10", sys.executable, str(HERE), "--worker", case, "--tree",
               str(tree), "--repeats", str(repeats), "--sweeps", str(sweeps)]
    done = subprocess.run(command, env=env, cwd=str(tree), capture_output=True, text=True,
                          timeout=timeout)
    lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode or not lines:
        raise RuntimeError(f"{case} on {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def _commit(tree):
    """The checked-out commit of ``tree`` (None outside git)."""
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True)
    return done.stdout.strip() or None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before")
    ap.add_argument("--after", default=str(HERE.parent.parent))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sweeps", type=int, default=100)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--tag", default="")
    ap.add_argument("--worker")
    ap.add_argument("--tree")
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.tree, args.repeats, args.sweeps)
    if not args.before:
        ap.error("--before PATH is required")
    say = functools.partial(print, flush=True)
    trees = {"before": args.before, "after": args.after}
    cases = [c for c in args.cases.split(",") if c]
    results = {c: {"before": [], "after": []} for c in cases}
    for r in range(args.rounds):
        for case in cases:
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for which in order:
                out = run_worker(case, trees[which], args.repeats, args.sweeps, args.timeout)
                results[case][which].append(out)
                say(f"round {r} {case:22s} {which:6s} {out['value']:.4g} {out['unit']} "
                    f"(load {out['loadavg_1min']:.1f})"
                    + (f" program {out['program_sha256']}" if "program_sha256" in out else ""))
    table = {}
    for case in cases:
        b = statistics.median(o["value"] for o in results[case]["before"])
        a = statistics.median(o["value"] for o in results[case]["after"])
        table[case] = {"before": b, "after": a, "after_over_before": a / b,
                       "unit": results[case]["before"][0]["unit"]}
    say("\n| case | unit | before | after | after / before |\n|---|---|---|---|---|")
    for case, row in table.items():
        say(f"| {case} | {row['unit']} | {row['before']:.4g} | {row['after']:.4g} | "
            f"{row['after_over_before']:.3f} |")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"bench_before_after{'_' + args.tag if args.tag else ''}.json"
    meta = {"before_commit": _commit(args.before), "after_commit": _commit(args.after),
            "rounds": args.rounds, "repeats": args.repeats, "sweeps": args.sweeps,
            "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    path.write_text(json.dumps({"meta": meta, "table": table, "runs": results}, indent=1))
    say(f"wrote {path}")


if __name__ == "__main__":
    main()
