"""Class mass normalisation's target: raw labelled frequencies against add-one smoothed.

Class mass normalisation (Zhu, Ghahramani & Lafferty 2003, Sec. 4) scales the unlabelled
class masses to proportions ``q``. Estimated from the labels, ``q`` is either the raw
frequencies ``n_c / L`` or, as in Zhu's own code, ``(n_c + 1) / (L + C)``
(:func:`graphssl.inference.optimize.baselines.propagation.labelled_class_proportions`, the
library's default since 2026-11-29).

For every (set, split) this script fits the estimator once with the rule off
(``--off-params``, default ``{"class_mass_normalize": false}``), then applies the
estimator's own rule (``GraphSSLClassifier._class_mass_normalized``: the nodes a label
reaches) to its unscaled marginals (``posterior_mean_`` where the estimator keeps them, else
``label_distributions_``; nodes no label reaches get the estimator's own fill, the class
prior) with each ``q``, and scores argmax, raw and add-one on the unlabelled points: the
same fit, so the comparison is paired exactly. Sets that come with a graph (CiteSeer) are
skipped: with node features the estimators normalise to the feature model's proportions,
which this choice does not touch.

    GRAPHSSL_DATA=... python benchmarks/bench_cmn_prior.py HarmonicFunctionClassifier \\
        --splits 10 --tag hf
    python benchmarks/bench_cmn_prior.py --table hf

Writes ``results/bench_cmn_prior_<tag>.json`` after every set (a rerun resumes).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_defaults import load_panel_set  # noqa: E402
from bench_option import paired_arguments, run_paired  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
RULES = ("argmax", "raw", "add_one")


def _scores(clf, data, labels, mask):
    """Accuracy on ``mask`` of each rule in ``RULES`` from one fitted ``clf``."""
    from graphssl.inference.optimize.baselines.propagation import labelled_class_proportions

    dist = getattr(clf, "posterior_mean_", None)
    dist = np.array(clf.label_distributions_ if dist is None else dist, dtype=np.float64)
    nodes, fill = clf._unreached_fill  # what the estimator gives nodes no label reaches
    dist[nodes] = fill
    encoded = np.full(labels.shape, -1)
    encoded[labels >= 0] = np.searchsorted(clf.classes_, labels[labels >= 0])
    counts = np.bincount(encoded[encoded >= 0], minlength=dist.shape[1]).astype(np.float64)
    targets = {"raw": counts / counts.sum(), "add_one": labelled_class_proportions(counts)}
    y = data["y"]
    out = {"argmax": float(np.mean(clf.classes_[dist.argmax(1)][mask] == y[mask]))}
    for rule, q in targets.items():
        scaled = clf._class_mass_normalized(dist, clf.graph_, encoded, q)
        out[rule] = float(np.mean(clf.classes_[scaled.argmax(1)][mask] == y[mask]))
    return out


def run_set(estimator, off_params, name, data_dir, n_splits):
    import graphssl.estimators as est

    cls = getattr(est, estimator)
    data = load_panel_set(name, data_dir, n_splits)
    if data.get("graph") is not None:
        print(f"{name}: skipped (comes with a graph: the feature model's proportions)")
        return []
    records = []
    for split, idx in enumerate(data["splits"][:n_splits]):
        labels = np.full(len(data["y"]), -1)
        labels[idx] = data["y"][idx]
        mask = labels < 0
        clf = cls(**off_params)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clf.fit(data["X"], labels)
        rec = dict(set=name, split=split, counts=np.bincount(
            np.searchsorted(clf.classes_, labels[labels >= 0])).tolist(),
            **_scores(clf, data, labels, mask))
        print(json.dumps(rec), flush=True)
        records.append(rec)
    return records


def table(tag):
    payload = json.loads((RESULTS / f"bench_cmn_prior_{tag}.json").read_text())
    print(f"{payload['estimator']}: class mass normalisation to raw or add-one frequencies, "
          "same fits")
    print("| set | splits | argmax | raw | add-one | add-one - raw |")
    print("|---|---|---|---|---|---|")
    by_set = {}
    for r in payload["records"]:
        by_set.setdefault(r["set"], []).append(r)
    means = []
    for name, rs in by_set.items():
        acc = {rule: 100 * np.array([r[rule] for r in rs]) for rule in RULES}
        diff = acc["add_one"] - acc["raw"]
        se = diff.std(ddof=1) / np.sqrt(len(rs)) if len(rs) > 1 else float("nan")
        means.append([acc[rule].mean() for rule in RULES])
        print(f"| {name} | {len(rs)} | " + " | ".join(f"{m:.1f}" for m in means[-1])
              + f" | {diff.mean():+.1f} +- {se:.1f} |")
    m = np.mean(means, axis=0)
    print(f"| mean ({len(means)} sets) | | " + " | ".join(f"{v:.2f}" for v in m)
          + f" | {m[2] - m[1]:+.2f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    paired_arguments(parser, "--off-params", '{"class_mass_normalize": false}',
                     "the estimator's option that turns the rule off, as JSON")
    args = parser.parse_args(argv)
    if args.table:
        table(args.table)
        return
    run_paired(parser, args, "bench_cmn_prior", "off_params", json.loads(args.off_params),
               run_set, table)


if __name__ == "__main__":
    main()
