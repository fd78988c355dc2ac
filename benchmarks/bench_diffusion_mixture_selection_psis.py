"""Choosing tau (and k) of Walder's mixture: harmonic-mean CPO against PSIS-LOO (ArviZ).

Per data set (Digit1, Text), number of labels (10, 100; the shipped splits) and split, the
mixture (gamma 0.8, alpha 0.5, eta uniform: no label information, one chain from the Parzen
labels) runs at every setting of the grid in one batched call
(:func:`graphssl.inference.diffusion_mixture.selection.fit_grid`, ``--checkpoints`` draws
``--every`` iterations apart after ``--burn-in``), and the setting is chosen on the labelled
points only, by

* ``CPO (8 draws)``: the harmonic-mean CPO of the states every 25 iterations, i.e. the
  states that the former default (8 checkpoints every 25 iterations) evaluated: the same
  chain, so the same states;
* ``CPO``: the harmonic-mean CPO of all recorded draws;
* ``PSIS-LOO``: ``az.loo`` on the same draws (largest elpd_loo);

and the settings are combined by ``stacking`` (``az.compare`` weights), ``pseudo-BMA``
(weights prod_i CPO_i) and the ``uniform average``. The test accuracy of each choice is
read once, after the choice; ``oracle`` (the best setting by test accuracy) only bounds what
choosing can gain. Pareto k of every setting and the CPU seconds of each split are recorded.
Usage::

    GRAPHSSL_DATA=../shared/datasets python benchmarks/bench_diffusion_mixture_selection_psis.py \
        [--datasets digit1,text] [--labels 10,100] [--splits 4] [--first-split 0] \
        [--k-grid 10] [--tau-grid 1,2.5,5,10,20] [--checkpoints 40] [--every 5] \
        [--chains 1] [--burn-in 100] [--out FILE]

Writes ``benchmarks/results/bench_diffusion_mixture_selection_psis.json`` (the defaults) and
prints a table; ``bench_diffusion_mixture_selection_psis_4chains.json`` holds ``--labels 100
--chains 4 --checkpoints 100`` (10 times the draws and the CPU time), splits 0-3.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time
import warnings

import arviz as az
import jax
import numpy as np
from _portable import portable
from bench_diffusion_mixture import RESULTS, accuracy, load

from graphssl.inference.diffusion_mixture.selection import LeaveOneOut, fit_grid

CHOICES = ("CPO (8 draws)", "CPO", "PSIS-LOO", "parzen LOO")
AVERAGES = ("stacking", "pseudo-BMA", "uniform average")


def cpo_every_25(loo: LeaveOneOut, every: int) -> np.ndarray:
    """Harmonic-mean CPO log loss per setting from the first 8 states 25 iterations apart
    of each chain (the former default's states)."""
    step = 25 // every
    if step * every != 25 or loo.log_probs.shape[-3] < step:
        raise ValueError(f"--every must divide 25 (got {every})")
    lp = loo.log_probs.reshape(loo.log_probs.shape[:-3] + (loo.n_chains, -1)
                               + loo.log_probs.shape[-2:])
    lp = lp[..., step - 1::step, :, :][..., :8, :, :]
    return loo._replace(log_probs=lp.reshape(lp.shape[:-4] + (-1,) + lp.shape[-2:])).log_loss()


def readings(fit, y, lab_idx, every) -> dict:
    """Chosen setting and test accuracy of each criterion and combination of one grid fit."""
    acc = [accuracy(p.argmax(1), y, lab_idx) for p in fit.class_probs]
    grid = [(s.k, s.tau) for s in fit.scores]
    index = {"CPO (8 draws)": int(np.argmin(cpo_every_25(fit.loo, every))),
             "CPO": fit.choose("cpo"), "PSIS-LOO": fit.choose("psis_loo"),
             "parzen LOO": fit.choose("parzen")}
    weights = {"stacking": fit.weights("stacking"), "pseudo-BMA": fit.weights("loo"),
               "uniform average": fit.weights("uniform")}
    out = {name: {"chosen": grid[g], "accuracy": acc[g]} for name, g in index.items()}
    for name, w in weights.items():
        pred = np.tensordot(w, fit.class_probs, axes=1).argmax(1)
        out[name] = {"weights": [float(x) for x in w], "accuracy": accuracy(pred, y, lab_idx)}
    out["oracle"] = {"chosen": grid[int(np.argmax(acc))], "accuracy": max(acc)}
    per_setting = []
    for s, a, r in zip(fit.scores, acc, fit.psis, strict=True):
        k = np.asarray(r.pareto_k)
        per_setting.append(dict(
            k=s.k, tau=s.tau, accuracy=a, parzen_loo_error=s.parzen_loo_error,
            cpo_log_loss=s.mixture_loo_log_loss, psis_loo_log_loss=s.psis_loo_log_loss,
            elpd_loo=float(r.elpd), elpd_se=float(r.se), p_loo=float(r.p),
            good_k=float(r.good_k), pareto_k_max=float(np.nanmax(k)),
            high_k_fraction=float(np.mean(k > r.good_k)),
            unfit_k_fraction=float(np.mean(np.isnan(k))),
            high_k_07_fraction=float(np.mean(k > 0.7))))
    out["per_setting"] = per_setting
    return out


def run(name, n_labels, args):
    X, y, splits = load(name)
    runs = []
    for s in range(args.first_split, args.first_split + args.splits):
        lab_idx = splits[n_labels][s]
        labels = np.full(y.size, -1)
        labels[lab_idx] = y[lab_idx]
        cpu, wall = time.process_time(), time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fit = fit_grid(X, labels, k_grid=args.k_grid, tau_grid=args.tau_grid,
                           class_prior=None, alpha=0.5, gamma=args.gamma,
                           key=jax.random.PRNGKey(s), n_checkpoints=args.checkpoints,
                           every=args.every, burn_in=args.burn_in, n_chains=args.chains)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        rec = dict(split=s, cpu_seconds=cpu, wall_seconds=wall,
                   warnings=sorted({str(w.message)[:300] for w in caught}),
                   **readings(fit, y, lab_idx, args.every))
        runs.append(rec)
        print(f"  {name} L={n_labels} split {s}: " + ", ".join(
            f"{c} {rec[c].get('chosen', '')} {rec[c]['accuracy']:.3f}"
            for c in (*CHOICES, *AVERAGES, "oracle")) + f" ({cpu:.0f} CPU s)", flush=True)
    return dict(dataset=name, n_labels=n_labels, runs=runs)


def _tau(chosen) -> str:
    k, tau = chosen
    return f"{tau:g}" if k is None else f"{k}/{tau:g}"


def table(records, one_k: bool) -> str:
    cols = (*CHOICES, *AVERAGES, "oracle")
    head = ["set", "L"] + list(cols)
    lines = [" | ".join(f"{h:>15}" for h in head)]
    for rec in records:
        row = [rec["dataset"], str(rec["n_labels"])]
        for c in cols:
            acc = np.mean([r[c]["accuracy"] for r in rec["runs"]])
            row.append(f"{acc:.4f}")
        lines.append(" | ".join(f"{x:>15}" for x in row))
    lines.append("chosen " + ("tau" if one_k else "k/tau") + " per split:")
    for rec in records:
        for c in (*CHOICES, "oracle"):
            picks = [_tau((None if one_k else r[c]["chosen"][0], r[c]["chosen"][1]))
                     for r in rec["runs"]]
            lines.append(f"  {rec['dataset']:>7} L={rec['n_labels']:<3} {c:>14}: "
                         + " ".join(picks))
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default="digit1,text")
    p.add_argument("--labels", default="10,100")
    p.add_argument("--splits", type=int, default=4)
    p.add_argument("--k-grid", default="10")
    p.add_argument("--tau-grid", default="1,2.5,5,10,20")
    p.add_argument("--gamma", type=float, default=0.8)
    p.add_argument("--burn-in", type=int, default=100)
    p.add_argument("--every", type=int, default=5)
    p.add_argument("--checkpoints", type=int, default=40)
    p.add_argument("--chains", type=int, default=1)
    p.add_argument("--first-split", type=int, default=0)
    p.add_argument("--out", default=str(RESULTS / "bench_diffusion_mixture_selection_psis.json"))
    args = p.parse_args()
    args.k_grid = tuple(int(k) for k in args.k_grid.split(","))
    args.tau_grid = tuple(float(t) for t in args.tau_grid.split(","))
    start, cpu = time.perf_counter(), time.process_time()
    records = []
    for name in args.datasets.split(","):
        for n_labels in (int(x) for x in args.labels.split(",")):
            print(f"{name}, {n_labels} labels ...", flush=True)
            records.append(run(name, n_labels, args))
            text = table(records, len(args.k_grid) == 1)
            out = dict(device=str(jax.devices()[0]), platform=platform.platform(),
                       versions={"jax": jax.__version__, "numpy": np.__version__,
                                 "arviz": az.__version__},
                       settings=portable(vars(args)), loadavg=os.getloadavg(),
                       wall_seconds=time.perf_counter() - start,
                       cpu_seconds=time.process_time() - cpu, records=records, table=text)
            pathlib.Path(args.out).write_text(json.dumps(out, indent=1))  # after each set
    print(text)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
