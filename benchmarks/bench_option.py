"""One estimator option against the defaults, paired on the same splits and seeds.

``bench_defaults.py`` builds every estimator with no argument (nothing tuned there); this
script measures what one option changes, so that a README line such as "``symmetrize="min"``:
Digit1-10 81.1 -> 85.8" can be re-run. For every (set, split) it fits
``Estimator()`` and ``Estimator(**params)`` on the same labels (the same ``random_state``,
the default) and records both accuracies on the unlabelled points (CiteSeer: its test
mask), their paired difference and the CPU seconds of each fit. Sets as
``bench_defaults.py`` (``--sets heldout`` for the held-out ones).

    GRAPHSSL_DATA=... python benchmarks/bench_option.py BoltzmannMRFClassifier \\
        --params '{"symmetrize": "min"}' --splits 3 --tag boltzmann_mutual
    python benchmarks/bench_option.py --table boltzmann_mutual

Prints a table (per set: mean default, mean option, paired difference +- its standard
error; then the mean over sets) and writes ``results/bench_option_<tag>.json`` after every
set, so an interrupted run resumes with the sets it has not done.
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


def _fit_accuracy(make, data, labels, mask):
    """Accuracy on ``mask`` and CPU seconds of one fit (``fit_graph`` where the set has a
    graph); warnings are not the point here and are silenced."""
    clf = make()
    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if data.get("graph") is not None:
            clf.fit_graph(data["graph"], labels, X=data["X"])
        else:
            clf.fit(data["X"], labels)
    seconds = time.process_time() - start
    y = data["y"]
    return float(np.mean(np.asarray(clf.transduction_)[mask] == y[mask])), seconds


def run_set(estimator, params, name, data_dir, n_splits):
    import graphssl.estimators as est

    cls = getattr(est, estimator)
    data = load_panel_set(name, data_dir, n_splits)
    records = []
    for split, idx in enumerate(data["splits"][:n_splits]):
        labels = np.full(len(data["y"]), -1)
        labels[idx] = data["y"][idx]
        mask = data.get("eval_mask")
        mask = labels < 0 if mask is None else np.asarray(mask)
        default, default_s = _fit_accuracy(cls, data, labels, mask)
        option, option_s = _fit_accuracy(lambda: cls(**params), data, labels, mask)
        rec = dict(set=name, split=split, default=default, option=option,
                   default_cpu_s=default_s, option_cpu_s=option_s)
        print(json.dumps(rec), flush=True)
        records.append(rec)
    return records


def table(tag):
    payload = json.loads((RESULTS / f"bench_option_{tag}.json").read_text())
    print(f"{payload['estimator']}({payload['params']}) against its defaults, paired")
    print("| set | splits | default | option | option - default |")
    print("|---|---|---|---|---|")
    by_set = {}
    for r in payload["records"]:
        by_set.setdefault(r["set"], []).append(r)
    means = []
    for name, rs in by_set.items():
        d = 100 * np.array([r["default"] for r in rs])
        o = 100 * np.array([r["option"] for r in rs])
        diff = o - d
        se = diff.std(ddof=1) / np.sqrt(len(rs)) if len(rs) > 1 else float("nan")
        means.append((d.mean(), o.mean()))
        print(f"| {name} | {len(rs)} | {d.mean():.1f} | {o.mean():.1f} | "
              f"{diff.mean():+.1f} +- {se:.1f} |")
    d, o = np.mean(means, axis=0)
    print(f"| mean ({len(means)} sets) | | {d:.1f} | {o:.1f} | {o - d:+.1f} |")


def paired_arguments(parser, option, default, help_text):
    """The command line shared by the paired benchmarks (this one and
    ``bench_cmn_prior.py``): the estimator, its ``option`` (JSON), sets, splits, tag and
    ``--table``."""
    parser.add_argument("estimator", nargs="?", help="a class of graphssl.estimators")
    parser.add_argument(option, default=default, help=help_text)
    parser.add_argument("--data-dir", default=os.environ.get("GRAPHSSL_DATA"))
    parser.add_argument("--sets", nargs="+", default=None,
                        help="panel set names, or 'heldout' (default: the panel)")
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--table", metavar="TAG", default=None)


def run_paired(parser, args, prefix, key, params, run_set_fn, table_fn):
    """Check the arguments, then run ``run_set_fn(estimator, params, set, data_dir, splits)``
    on every set not yet in ``results/<prefix>_<tag>.json`` (written after each set, so a
    rerun resumes; a file holding another estimator or ``key`` value is refused), then print
    ``table_fn(tag)``."""
    if not args.estimator or not args.tag:
        parser.error("give the estimator and --tag (or --table TAG)")
    if not args.data_dir:
        parser.error("--data-dir or GRAPHSSL_DATA: the folder of ../shared/datasets")
    sets = list(PANEL) if args.sets is None else (
        list(HELDOUT) if args.sets == ["heldout"] else args.sets)
    out = RESULTS / f"{prefix}_{args.tag}.json"
    payload = {"estimator": args.estimator, key: params, "splits": args.splits, "records": []}
    if out.exists():
        payload = json.loads(out.read_text())
        if payload["estimator"] != args.estimator or payload[key] != params:
            parser.error(f"{out.name} holds another comparison; choose another --tag")
    done = {r["set"] for r in payload["records"]}
    for name in sets:
        if name in done:
            continue
        payload["records"] += run_set_fn(args.estimator, params, name, args.data_dir,
                                         args.splits)
        out.write_text(json.dumps(payload, indent=1))
    table_fn(args.tag)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    paired_arguments(parser, "--params", "{}", "the option, as a JSON object")
    args = parser.parse_args(argv)
    if args.table:
        table(args.table)
        return
    params = json.loads(args.params)
    if not isinstance(params, dict) or not params:
        parser.error("--params: a non-empty JSON object of keyword arguments")
    run_paired(parser, args, "bench_option", "params", params, run_set, table)


if __name__ == "__main__":
    main()
