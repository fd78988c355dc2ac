"""The Boltzmann MRF at equilibrium along ``alpha_0``: how far the model itself reaches.

A diagnosis, not a tuning run: the test labels are read to measure the model's accuracy at
every coupling, and nothing is chosen from them.

For every (set, split) the default ``BoltzmannMRFClassifier`` is fitted once: its accuracy,
its chosen point ``(offset, alpha_0)``, and the model's pairs, data scale, label-noise
channel and decision rule (``class_mass_normalize="auto"``), which the rest reuses. Then,
for each length-scale offset of the grid (-1, 0, +1), one replica-exchange chain
(:func:`graphssl.inference.mcmc.tempering.tempered_step`, Swendsen-Wang sweeps) runs the
all-labels model at every ``alpha_0`` from ``--low`` to ``--high``, ``--step`` apart, and
each copy's Rao-Blackwellised marginals give the accuracy of the estimator's decision and
of the argmax at that coupling, and the ordered-phase test of the argmax labelling against
the labelled counts (``ordered``; label-side only). Beside them, in the same run: the
harmonic function's default (``HarmonicFunctionClassifier()``) on the same data.

Columns: HF; the default fit (its chains are annealed along the grid, then sampled from the
state the path reached); the equilibrium accuracy at the default's own point (the model's
law there, which the default's chains may not sample: near the ordering transition they keep
the macrostate they fell into); the best equilibrium accuracy over the whole range, in
hindsight (what a perfect choice of coupling could reach).

    GRAPHSSL_DATA=... python benchmarks/bench_boltzmann_equilibrium.py \\
        --sets digit1_10 usps_10 --splits 5 --tag lagging
    python benchmarks/bench_boltzmann_equilibrium.py --table lagging

Writes ``results/bench_boltzmann_equilibrium_<tag>.json`` after every split (a rerun
resumes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_defaults import load_panel_set  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
OFFSETS = (-1.0, 0.0, 1.0)


def ladder_marginals(model, alphas, init, key, n_burn: int, n_keep: int):
    """Rao-Blackwellised marginals ``float[R, n, C]`` of ``model`` with its couplings scaled
    to each ``alpha`` of ``alphas`` (``model`` itself at ``alphas[-1]``), from one replica-
    exchange chain started at ``init int[n]`` in every copy, and its exchange rate."""
    import jax
    import jax.numpy as jnp

    from graphssl.inference import swendsen_wang
    from graphssl.inference.mcmc.tempering import tempered_step
    from graphssl.models.protocol import conditional_logits_from_tables, pairwise_tables

    kernel = swendsen_wang()
    scales = jnp.exp(jnp.asarray(alphas) - alphas[-1])
    nodes = jnp.arange(model.n_nodes)

    @jax.jit
    def run(model, ladder, key):
        tables = pairwise_tables(model)

        def step(carry, k):
            ladder, parity, accepted, proposed = carry
            ladder, a, p = tempered_step(kernel, model, k, ladder, scales, parity)
            return (ladder, 1 - parity, accepted + a, proposed + p)

        def conditionals(scale, labels):
            scaled = tables._replace(coupling=scale * tables.coupling)
            return jax.nn.softmax(conditional_logits_from_tables(scaled, labels, nodes), -1)

        def burn(carry, k):
            return step(carry, k), None

        def keep(carry, k):
            chain, total = carry
            chain = step(chain, k)
            return (chain, total + jax.vmap(conditionals)(scales, chain[0])), None

        keys = jax.random.split(key, n_burn + n_keep)
        zero = jnp.int32(0)
        chain, _ = jax.lax.scan(burn, (ladder, zero, zero, zero), keys[:n_burn])
        chain = (chain[0], chain[1], zero, zero)  # the rate of the kept steps
        total = jnp.zeros((scales.shape[0], model.n_nodes, model.n_classes), tables.unary.dtype)
        (chain, total), _ = jax.lax.scan(keep, (chain, total), keys[n_burn:])
        return total / n_keep, chain[2] / jnp.maximum(chain[3], 1)

    ladder = jnp.tile(jnp.asarray(init, jnp.int32)[None], (len(alphas), 1))
    marginals, rate = run(model, ladder, key)
    return np.asarray(marginals, dtype=np.float64), float(rate)


def one_split(data, split: int, args) -> dict:
    """Everything measured on one (set, split) (module docstring)."""
    import jax

    from graphssl.estimators import BoltzmannMRFClassifier, HarmonicFunctionClassifier
    from graphssl.inference.boltzmann import selection as bs
    from graphssl.inference.ordered_phase import collapsed_classes
    from graphssl.models.boltzmann import length_scale_couplings

    y = np.asarray(data["y"])
    labels = np.full(y.shape, -1)
    idx = data["splits"][split]
    labels[idx] = y[idx]
    test = labels < 0
    record = {"split": split}
    started = time.process_time()
    hf = HarmonicFunctionClassifier().fit(data["X"], labels)
    record["hf"] = float(np.mean(hf.transduction_[test] == y[test]))
    clf = BoltzmannMRFClassifier(progress=False).fit(data["X"], labels)
    record["default"] = float(np.mean(clf.transduction_[test] == y[test]))
    record["default_point"] = [float(clf.grid_.log_scale_offset), float(clf.grid_.alpha0)]
    encoded = np.full(labels.shape, -1)
    encoded[~test] = np.searchsorted(clf.classes_, labels[~test])
    C = len(clf.classes_)
    geometry, model = clf.pair_geometry_, clf._sampled_model
    base = bs.data_scale_log_length_scales(geometry)
    alphas = np.round(np.arange(args.low, args.high + args.step / 2, args.step), 6)
    start = np.asarray(clf.samples_.labels)[0, -1]
    curves = {}
    for offset in OFFSETS:
        couplings = length_scale_couplings(geometry, alphas[-1], base + offset)
        top = model.with_parameters(couplings)
        key = jax.random.key(1000 * split + int(offset + 5))
        marginals, rate = ladder_marginals(top, alphas, start, key, args.burn_in, args.draws)
        decided = [clf._class_mass_decision(m[:, :C], clf.graph_, encoded) for m in marginals]
        curves[str(offset)] = {
            "alpha0": alphas.tolist(),
            "decision": [float(np.mean(clf.classes_[d.argmax(1)][test] == y[test]))
                         for d in decided],
            "argmax": [float(np.mean(clf.classes_[m[:, :C].argmax(1)][test] == y[test]))
                       for m in marginals],
            # label-side only: the ordered-phase test on the argmax labelling
            "ordered": [bool(collapsed_classes(m[:, :C].argmax(1), encoded, C).size)
                        for m in marginals],
            "exchange_rate": rate}
    record["curves"] = curves
    offset, alpha0 = record["default_point"]
    at = curves[str(offset)]
    record["equilibrium_at_default"] = at["decision"][int(np.argmin(np.abs(alphas - alpha0)))]
    for rule in ("decision", "argmax"):
        best = max((v, float(o), a) for o, c in curves.items()
                   for v, a in zip(c[rule], c["alpha0"], strict=True))
        record[f"best_{rule}"] = {"accuracy": best[0], "offset": best[1], "alpha0": best[2]}
    record["cpu_s"] = time.process_time() - started
    return record


def run_resumable(path: Path, args, fit_split, describe) -> None:
    """For every set of ``args.sets`` and split below ``args.splits`` not yet in the JSON at
    ``path``: ``fit_split(data, split)`` (warnings silenced), the record appended and the file
    rewritten, then ``describe(record)`` printed: a rerun resumes. Shared by the Boltzmann
    diagnoses (this script, ``bench_boltzmann_mean_field.py``)."""
    results = json.loads(path.read_text()) if path.exists() else {}
    root = args.data or os.environ.get("GRAPHSSL_DATA")
    if not root:
        raise SystemExit("give --data or GRAPHSSL_DATA: the folder of the shared data sets")
    for name in args.sets:
        data = load_panel_set(name, root, args.splits)
        done = {r["split"] for r in results.get(name, [])}
        for split in range(args.splits):
            if split in done:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                record = fit_split(data, split)
            results.setdefault(name, []).append(record)
            path.write_text(json.dumps(results, indent=1))
            print(f"{name} split {split}: {describe(record)}", flush=True)


def run_sets(args) -> None:
    run_resumable(
        RESULTS / f"bench_boltzmann_equilibrium_{args.tag}.json", args,
        lambda data, split: one_split(data, split, args),
        lambda r: (f"HF {r['hf']:.3f} default {r['default']:.3f} at {r['default_point']}, "
                   f"equilibrium there {r['equilibrium_at_default']:.3f}, best "
                   f"{r['best_decision']} ({r['cpu_s']:.0f} CPU s)"))


def table(tags) -> None:
    """The per-set means (over the splits run) of every tag's file."""
    print("| set | splits | HF | default | equilibrium at the default's point | best "
          "equilibrium, decision (in hindsight) | best, argmax | exchange rate |")
    print("|---|---|---|---|---|---|---|---|")
    for tag in tags:
        results = json.loads((RESULTS / f"bench_boltzmann_equilibrium_{tag}.json").read_text())
        for name, records in results.items():
            def mean(key, records=records):
                return 100 * np.mean([r[key] if not isinstance(r[key], dict)
                                      else r[key]["accuracy"] for r in records])
            rates = [c["exchange_rate"] for r in records for c in r["curves"].values()]
            print(f"| {name} | {len(records)} | {mean('hf'):.1f} | {mean('default'):.1f} | "
                  f"{mean('equilibrium_at_default'):.1f} | {mean('best_decision'):.1f} | "
                  f"{mean('best_argmax'):.1f} | {min(rates):.2f}-{max(rates):.2f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=["digit1_10", "usps_10", "coil2_10",
                                                       "usps_100"])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--low", type=float, default=-3.0)
    parser.add_argument("--high", type=float, default=1.5)
    parser.add_argument("--step", type=float, default=0.1)
    parser.add_argument("--burn-in", type=int, default=300)
    parser.add_argument("--draws", type=int, default=1500)
    parser.add_argument("--data", default=None)
    parser.add_argument("--tag", default="lagging")
    parser.add_argument("--table", nargs="+", default=None, metavar="TAG")
    args = parser.parse_args(argv)
    if args.table:
        table(args.table)
    else:
        run_sets(args)


if __name__ == "__main__":
    main()
