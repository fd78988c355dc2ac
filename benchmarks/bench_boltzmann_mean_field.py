"""The Boltzmann MRF's naive mean field against its sampled posterior and HF: a diagnosis of
issue 25 item 3 ("at least the harmonic function's accuracy on the same graph").

For every (set, split): HF's default and the Boltzmann MRF's default (its coupling search
and sampled posterior), then, on the same model (pairs, data scale, clamped labels), the
naive mean field (:func:`graphssl.inference.optimize.mean_field.naive_mean_field`, the
symmetric couplings of the sampling law, tol 1e-5) at the default's own point and along
``alpha_0`` from -3 to 1.5 (0.25 apart) at each length-scale offset (-1, 0, +1), scored by
the estimator's decision rule (``class_mass_normalize="auto"``) and by the argmax. The test
labels are read to score; nothing is chosen from them.

    GRAPHSSL_DATA=... python benchmarks/bench_boltzmann_mean_field.py \\
        --sets digit1_10 usps_10 coil2_10 usps_100 --splits 3 --tag lagging
    python benchmarks/bench_boltzmann_mean_field.py --table lagging

Writes ``results/bench_boltzmann_mean_field_<tag>.json`` after every split (a rerun resumes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

RESULTS = Path(__file__).resolve().parent / "results"
OFFSETS = (-1.0, 0.0, 1.0)
ALPHAS = np.round(np.arange(-3.0, 1.51, 0.25), 3)


def mean_field_scores(clf, model, geometry, base, offset, alpha0, labels, y, test):
    """(decision, argmax) accuracy of the mean field at ``(offset, alpha0)``."""
    from graphssl.inference.optimize.mean_field import MeanFieldOptions, naive_mean_field
    from graphssl.models.boltzmann import length_scale_couplings

    C = len(clf.classes_)
    at = model.with_parameters(length_scale_couplings(geometry, alpha0, base + offset))
    solution, _ = naive_mean_field(at, options=MeanFieldOptions(tol=1e-5, max_iter=5000),
                                   couplings="symmetric")
    phi = np.asarray(solution.marginals, dtype=np.float64)[:, :C]
    decided = clf._class_mass_decision(phi, clf.graph_, labels)
    return (float(np.mean(clf.classes_[decided.argmax(1)][test] == y[test])),
            float(np.mean(clf.classes_[phi.argmax(1)][test] == y[test])))


def one_split(data, split: int) -> dict:
    from graphssl.estimators import BoltzmannMRFClassifier, HarmonicFunctionClassifier
    from graphssl.inference.boltzmann import selection as bs

    y = np.asarray(data["y"])
    given = np.full(y.shape, -1)
    given[data["splits"][split]] = y[data["splits"][split]]
    test = given < 0
    started = time.process_time()
    hf = HarmonicFunctionClassifier().fit(data["X"], given)
    clf = BoltzmannMRFClassifier(progress=False).fit(data["X"], given)
    labels = np.full(y.shape, -1)
    labels[~test] = np.searchsorted(clf.classes_, given[~test])
    geometry, model = clf.pair_geometry_, clf._sampled_model
    base = bs.data_scale_log_length_scales(geometry)
    point = [float(clf.grid_.log_scale_offset), float(clf.grid_.alpha0)]
    record = {"split": split, "hf": float(np.mean(hf.transduction_[test] == y[test])),
              "default": float(np.mean(clf.transduction_[test] == y[test])),
              "default_point": point,
              "mean_field_at_point": mean_field_scores(clf, model, geometry, base, *point,
                                                       labels, y, test)}
    record["curves"] = {str(offset): [mean_field_scores(clf, model, geometry, base, offset,
                                                        a, labels, y, test) for a in ALPHAS]
                        for offset in OFFSETS}
    record["cpu_s"] = time.process_time() - started
    return record


def run_sets(args) -> None:
    from bench_boltzmann_equilibrium import run_resumable

    run_resumable(
        RESULTS / f"bench_boltzmann_mean_field_{args.tag}.json", args, one_split,
        lambda r: (f"HF {r['hf']:.3f} default {r['default']:.3f} mean field there "
                   f"{r['mean_field_at_point'][0]:.3f} / {r['mean_field_at_point'][1]:.3f} "
                   f"({r['cpu_s']:.0f} CPU s)"))


def table(tags) -> None:
    print("| set | splits | HF | default (sampled) | mean field at the default's point "
          "(decision / argmax) | best mean field in hindsight (decision) |")
    print("|---|---|---|---|---|---|")
    for tag in tags:
        results = json.loads((RESULTS / f"bench_boltzmann_mean_field_{tag}.json").read_text())
        for name, records in results.items():
            if name == "alpha0":
                continue
            hf = 100 * np.mean([r["hf"] for r in records])
            default = 100 * np.mean([r["default"] for r in records])
            at = 100 * np.mean([r["mean_field_at_point"] for r in records], axis=0)
            best = 100 * np.mean([max(v[0] for c in r["curves"].values() for v in c)
                                  for r in records])
            print(f"| {name} | {len(records)} | {hf:.1f} | {default:.1f} | {at[0]:.1f} / "
                  f"{at[1]:.1f} | {best:.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=["digit1_10", "usps_10", "coil2_10",
                                                       "usps_100"])
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--data", default=None)
    parser.add_argument("--tag", default="lagging")
    parser.add_argument("--table", nargs="*", default=None)
    args = parser.parse_args(argv)
    if args.table is not None:
        table(args.table or [args.tag])
    else:
        run_sets(args)


if __name__ == "__main__":
    main()
