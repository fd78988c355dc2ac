"""The diffusion mixture's decision rule, paired on the same fits: posterior-mean argmax
against class mass normalisation to the model's own eta (Zhu, Ghahramani & Lafferty 2003,
Sec. 4) and the MAP.

One default ``DiffusionMixtureClassifier`` (or, ``--estimator grid``,
``DiffusionMixtureGridClassifier``: no MAP, eta the settings' etas averaged) fit per split
(panel sets of ``bench_defaults.py``, or ``--sets heldout``); every rule is read from that
one fit, so the differences are paired and carry no Monte-Carlo noise between rules.
Accuracy on the unlabelled points (CiteSeer: its test mask). The fits are those of the
estimator's current defaults; the rule it applies by default is whichever
``class_mass_normalize`` says, and this script scores both from the posterior marginals
(``posterior_mean_``, or the grid's ``label_distributions_``) and ``class_prior_``.

    GRAPHSSL_DATA=... python benchmarks/bench_dm_decision.py --splits 3 --tag panel
    GRAPHSSL_DATA=... python benchmarks/bench_dm_decision.py --sets heldout --splits 3 \
        --tag heldout
    GRAPHSSL_DATA=... python benchmarks/bench_dm_decision.py --sets usps_10 usps_100 \
        --eta-known --tag usps_eta_known
    GRAPHSSL_DATA=... python benchmarks/bench_dm_decision.py --estimator grid --splits 3 \
        --tag grid_panel
    python benchmarks/bench_dm_decision.py --table panel heldout

Prints a table (mean over splits per set, and the paired difference with its standard
error) and writes ``results/bench_dm_decision_<tag>.json``.
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
from bench_defaults import HELDOUT, PANEL, load_panel_set  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
RULES = ("posterior_mean", "cmn_eta", "map")
# usps_full: a default fit is over 300 CPU s (bench_defaults.py); the large held-out sets
# likewise over 120 CPU s
SKIP = ("usps_full_2pct", "ringnorm_keel_1pct", "twonorm_keel_1pct", "satimage_keel_1pct",
        "mushroom_1pct", "g241c_10", "g241n_10", "coil_10")


# the grid builds one graph per k from features: no fit_graph (CiteSeer)
GRID_SKIP = ("citeseer",)


def rule_labels(clf, labels) -> dict:
    """Encoded labels of every rule from one fitted ``DiffusionMixtureClassifier`` or
    ``DiffusionMixtureGridClassifier`` (no MAP; its posterior is the combined marginals)
    (``labels``: int[n], -1 unlabelled). CMN is the estimators' own rule
    (``_class_mass_normalized``: over the nodes a label reaches)."""
    posterior = np.asarray(getattr(clf, "posterior_mean_", clf.label_distributions_),
                           np.float64)
    encoded = np.where(labels >= 0, np.searchsorted(clf.classes_, labels), -1)
    cmn = clf._class_mass_normalized(posterior, clf.graph_, encoded, clf.class_prior_)
    rules = dict(posterior_mean=posterior.argmax(1), cmn_eta=cmn.argmax(1))
    if getattr(clf, "_map_encoded", None) is not None:
        rules["map"] = np.asarray(clf._map_encoded)
    return rules


def run_set(name, data_dir, n_splits, eta_known=False, estimator="mixture"):
    from graphssl.estimators import DiffusionMixtureClassifier, DiffusionMixtureGridClassifier

    data = load_panel_set(name, data_dir, n_splits)
    X, y, graph = data["X"], data["y"], data.get("graph")
    records = []
    for split, idx in enumerate(data["splits"][:n_splits]):
        labels = np.full(len(y), -1)
        labels[idx] = y[idx]
        # Walder's protocol (Sec. 5): eta known, the class proportions of the whole set
        prior = np.bincount(np.searchsorted(np.unique(y), y)) / len(y) if eta_known else "auto"
        make = DiffusionMixtureGridClassifier if estimator == "grid" else \
            DiffusionMixtureClassifier
        clf = make(progress=False, class_prior=prior)
        start = time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if graph is not None:
                clf.fit_graph(graph, labels, X=X)
            else:
                clf.fit(X, labels)
        seconds = time.process_time() - start
        mask = data.get("eval_mask")
        mask = labels < 0 if mask is None else np.asarray(mask)
        truth = y[mask]
        rec = dict(set=name, split=split, estimator=estimator, cpu_seconds=seconds,
                   gamma=float(getattr(clf, "gamma_", clf.gamma)),
                   eta=np.asarray(clf.class_prior_).round(4).tolist(),
                   true_fraction=(np.bincount(np.searchsorted(clf.classes_, truth),
                                              minlength=len(clf.classes_))
                                  / len(truth)).round(4).tolist())
        for rule, encoded in rule_labels(clf, labels).items():
            rec[rule] = float(np.mean(clf.classes_[encoded][mask] == truth))
        print(json.dumps(rec), flush=True)
        records.append(rec)
    return records


def _set_means(records) -> dict:
    """Per set: ``(n_splits, {rule: mean accuracy %}, paired CMN - posterior mean in
    points per split)``."""
    by_set = {}
    for r in records:
        by_set.setdefault(r["set"], []).append(r)
    return {name: (len(rs), {k: 100 * np.mean([r.get(k, np.nan) for r in rs]) for k in RULES},
                   100 * np.array([r["cmn_eta"] - r["posterior_mean"] for r in rs]))
            for name, rs in by_set.items()}


def table(tags):
    """The sets of every tag, then a mean row per tag."""
    print("| set | splits | posterior mean | CMN to eta | MAP | CMN - posterior mean |")
    print("|---|---|---|---|---|---|")
    per_tag = {tag: _set_means(json.loads(
        (RESULTS / f"bench_dm_decision_{tag}.json").read_text())["records"]) for tag in tags}
    for sets in per_tag.values():
        for name, (n, means, diff) in sets.items():
            se = diff.std(ddof=1) / np.sqrt(n) if n > 1 else float("nan")
            print(f"| {name} | {n} | {means['posterior_mean']:.1f} | {means['cmn_eta']:.1f} | "
                  f"{means['map']:.1f} | {diff.mean():+.1f} +- {se:.1f} |")
    for tag, sets in per_tag.items():
        mean = {k: np.mean([m[k] for _, m, _ in sets.values()]) for k in RULES}
        print(f"| mean ({tag}, {len(sets)} sets) | | {mean['posterior_mean']:.1f} | "
              f"{mean['cmn_eta']:.1f} | {mean['map']:.1f} | "
              f"{mean['cmn_eta'] - mean['posterior_mean']:+.1f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("GRAPHSSL_DATA"))
    parser.add_argument("--sets", nargs="+", default=None,
                        help="panel set names, or 'heldout' (default: the panel)")
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--tag", default="panel")
    parser.add_argument("--eta-known", action="store_true",
                        help="class_prior = the set's true class proportions (Walder's "
                             "protocol) instead of the default 'auto'")
    parser.add_argument("--estimator", choices=("mixture", "grid"), default="mixture")
    parser.add_argument("--table", nargs="+", metavar="TAG", default=None)
    args = parser.parse_args(argv)
    if args.table:
        table(args.table)
        return
    if not args.data_dir:
        parser.error("--data-dir or GRAPHSSL_DATA: the folder of ../shared/datasets")
    sets = list(PANEL) if args.sets is None else (
        list(HELDOUT) if args.sets == ["heldout"] else args.sets)
    out = RESULTS / f"bench_dm_decision_{args.tag}.json"
    done = json.loads(out.read_text())["records"] if out.exists() else []
    finished = {r["set"] for r in done}
    for name in sets:
        if name in SKIP or name in finished or (args.estimator == "grid" and name in GRID_SKIP):
            continue
        done += run_set(name, args.data_dir, args.splits, args.eta_known, args.estimator)
        out.write_text(json.dumps(dict(records=done, splits=args.splits), indent=1))
    table([args.tag])


if __name__ == "__main__":
    main()
