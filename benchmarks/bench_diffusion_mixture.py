"""Walder's Dirichlet diffusion mixture on the SSL-book benchmark, against peers.

Protocol (Walder Sec. 5): kNN graph (max-symmetrised) with ``w = exp(-omega d^2)``, omega =
1 / mean squared pairwise distance; 10 labels: k = 10, tau = 5; 100 labels: (k, tau) by
leave-one-out error of the graph Parzen window on the labelled points (grid ``K_GRID`` x
``TAU_GRID``); alpha = 0.5; gamma in {0, 0.8}; eta = the known class proportions. The 24
split-runs of a data set (12 splits x {10, 100} labels) are ONE batched (vmapped) sampler
call per gamma. Chains start from the Parzen-window labels (``--init parzen``, default;
the paper does not say how its chains started) or from labels ~ eta (``--init random``),
centres beta_i = i. One iteration = Gibbs sweep + one attempt of each MH move; the paper ran
10^5 iterations after 10^3 burn-in ("around ten hours per split"); we run what fits.

Methods (same splits, same run): mixture posterior mean (gamma 0, 0.8), mixture MAP (best
visited state + conditional-maximisation refinement), graph Parzen window (same D_tau),
scikit-learn LabelSpreading / LabelPropagation (kernel='knn', 10 neighbours), GraphLearning
laplace / poisson (gl.weightmatrix.knn(X, 10)).

Speed: iterations per second of the whole 24-run batch (compile excluded: the first call of
a setting runs twice and the second is timed), projected time of 10^5 iterations. The
sampler is ``sample_mixture``: the mixture's kernels under the library's ``sample_chains``,
the runs as one model per chain (``batched_model``). Usage::

    python benchmarks/bench_diffusion_mixture.py [--iterations N] [--burn-in B]
        [--datasets digit1,text] [--moves 1,1,0] [--merge] [--quick]

``--moves`` sets the attempts per iteration of the moves of ``dms.MOVES`` (re-sampling,
re-labelling, split-merge, centred split-merge, cluster flip, neighbourhood block, component
flip; ``1,1,0`` = the paper's iteration); ``--merge`` keeps the records of the data sets not
re-run, so a longer run of some sets updates the JSON in place. Every record carries its own
``settings``, every timing the load average before and after it.

Writes ``benchmarks/results/bench_diffusion_mixture.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import time
import warnings

import jax
import numpy as np
from _portable import portable

from graphssl.graph import knn_graph, laplacian_eigh
from graphssl.inference.diffusion_mixture import sampler as dms
from graphssl.inference.diffusion_mixture.selection import parzen_loo_error
from graphssl.inference.optimize.baselines import parzen_window
from graphssl.models.diffusion_mixture import DirichletDiffusionMixture

RESULTS = pathlib.Path(__file__).resolve().parent / "results"
DATASETS = ["digit1", "text", "usps", "coil", "bci", "g241c", "g241n"]
K_GRID = (5, 10, 20)
TAU_GRID = (1.0, 2.5, 5.0, 10.0, 20.0)
GAMMAS = (0.0, 0.8)
_COMPILED = set()


def timed_sampler(batch, key, static, init):
    """``(samples, run_seconds, compile_seconds)`` of one batched ``sample_mixture`` call.
    The first call with a signature runs twice: the first run compiles (``sample_chains``
    caches the compiled scan on shapes and settings; gamma is data: no recompile), the
    second is timed, so the time excludes compilation."""
    sig = (tuple(x.shape for x in jax.tree.leaves(batch)), batch.n_classes,
           tuple(sorted(static.items())), init is None)
    run = lambda: jax.block_until_ready(dms.sample_mixture(batch, key, init_labels=init,  # noqa: E731
                                                           **static))
    compile_s = 0.0
    if sig not in _COMPILED:
        t = time.perf_counter()
        run()
        compile_s = time.perf_counter() - t
        _COMPILED.add(sig)
    t = time.perf_counter()
    samples = run()
    run_s = time.perf_counter() - t
    return samples, run_s, max(compile_s - run_s, 0.0)


def data_dir() -> pathlib.Path:
    env = os.environ.get("GRAPHSSL_DATA")
    if env:
        return pathlib.Path(env)
    return pathlib.Path(__file__).resolve().parents[2] / "shared" / "datasets"


def load(name):
    """``(X dense float64, y, {10: splits, 100: splits})`` of an SSL-book set."""
    d = np.load(data_dir() / f"{name}.npz")
    if "X" in d:
        X = np.asarray(d["X"], np.float64)
    else:
        import scipy.sparse as sp

        X = sp.csr_matrix((d["data"], d["indices"], d["indptr"]),
                          shape=tuple(d["shape"])).toarray().astype(np.float64)
    return X, np.asarray(d["y"]), {L: np.asarray(d[f"splits_labeled_{L}"]) for L in (10, 100)}


class Diffusions:
    """D_tau for any (k, tau) of one data set, from one eigendecomposition per k."""

    def __init__(self, X):
        self.X = X
        self._graphs, self._eig = {}, {}

    def graph(self, k):
        if k not in self._graphs:
            self._graphs[k] = knn_graph(self.X, k, sigma="walder", on_duplicates="ignore")
        return self._graphs[k]

    def pmfs(self, k, tau):
        if k not in self._eig:
            self._eig[k] = laplacian_eigh(self.graph(k), "symmetric")
        w, V = self._eig[k]
        K = np.maximum((V * np.exp(-0.5 * tau * w)) @ V.T, 1e-30)
        return K / K.sum(axis=0, keepdims=True)


def parzen_scores(D, labels, eta):
    """Graph Parzen window ``eta_c / |L_c| sum_{l in L_c} D[i, l]`` (Walder Sec. 5)."""
    C = eta.size
    idx = np.flatnonzero(labels >= 0)
    onehot = np.eye(C)[labels[idx]]
    return (D[:, idx] @ onehot) * eta / np.maximum(onehot.sum(0), 1)


def loo_select(diff, y, lab_idx, eta):
    """(k, tau) minimising the leave-one-out Parzen error on the labelled points (ties: the
    first grid point; :func:`graphssl.inference.diffusion_mixture.selection.parzen_loo_error`)."""
    labels = np.full(y.size, -1)
    labels[lab_idx] = y[lab_idx]
    errors = {(k, tau): parzen_loo_error(diff.pmfs(k, tau), labels, eta)
              for k in K_GRID for tau in TAU_GRID}
    (k, tau), err = min(errors.items(), key=lambda kv: kv[1])
    return k, tau, err


def split_run(diff, y, lab_idx, eta, k, tau, gamma):
    """One split-run of the Sec. 5 protocol: ``(model, Parzen-window labels)`` on D_tau of the
    k-NN graph (alpha 0.5, eta known, float32); the Parzen labels also start the chain."""
    labels = np.full(y.size, -1)
    labels[lab_idx] = y[lab_idx]
    D = diff.pmfs(k, tau)
    parzen = parzen_scores(D, labels, eta).argmax(1)
    model = DirichletDiffusionMixture.create(diff.graph(k), labels, eta.size, alpha=0.5,
                                             gamma=gamma, class_prior=eta, diffusion=D,
                                             dtype=np.float32)
    return model, parzen


def accuracy(pred, y, lab_idx):
    test = np.ones(y.size, bool)
    test[lab_idx] = False
    return float(np.mean(pred[test] == y[test]))


def peers(X, y, splits):
    out = {}
    from sklearn.semi_supervised import LabelPropagation, LabelSpreading

    for name, make in (("LabelSpreading", lambda: LabelSpreading(kernel="knn", n_neighbors=10)),
                       ("LabelPropagation", lambda: LabelPropagation(kernel="knn",
                                                                     n_neighbors=10,
                                                                     max_iter=2000))):
        accs = []
        for lab_idx in splits:
            yl = np.full(y.size, -1)
            yl[lab_idx] = y[lab_idx]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                accs.append(accuracy(make().fit(X, yl).transduction_, y, lab_idx))
        out[name] = accs
    try:
        import graphlearning as gl

        W = gl.weightmatrix.knn(X, 10)
        for name, cls in (("gl_laplace", gl.ssl.laplace), ("gl_poisson", gl.ssl.poisson)):
            out[name] = [accuracy(cls(W).fit_predict(s, y[s]), y, s) for s in splits]
    except ImportError:
        pass
    return out


def run_dataset(name, args, key):
    X, y, splits = load(name)
    C = int(y.max()) + 1
    eta = np.bincount(y, minlength=C) / y.size  # "known" class proportions (Sec. 5)
    if args.quick:
        splits = {L: s[: args.splits] for L, s in splits.items()}
    diff = Diffusions(X)
    models, meta, inits = [], [], []
    t0 = time.perf_counter()
    for L in (10, 100):
        for s, lab_idx in enumerate(splits[L]):
            if L == 10:
                k, tau, loo = 10, 5.0, None
            else:
                k, tau, loo = loo_select(diff, y, lab_idx, eta)
            model, parzen = split_run(diff, y, lab_idx, eta, k, tau, gamma=0.0)
            inits.append(parzen)
            models.append(model)
            meta.append(dict(labels=L, split=s, k=k, tau=tau, loo_error=loo,
                             parzen=accuracy(parzen, y, lab_idx)))
    # cross-check our Parzen with the library's on one split
    lab_idx = splits[10][0]
    labels = np.full(y.size, -1)
    labels[lab_idx] = y[lab_idx]
    lib = parzen_window(diff.graph(10), labels, tau=5.0, class_prior=eta, n_classes=C)
    ours = parzen_scores(diff.pmfs(10, 5.0), labels, eta)
    parzen_agrees = bool(np.array_equal(lib.argmax(1), ours.argmax(1)))
    setup_s = time.perf_counter() - t0
    record = dict(dataset=name, n=int(y.size), n_classes=C, eta=eta.tolist(), runs=meta,
                  setup_seconds=setup_s, parzen_matches_library=parzen_agrees, gamma={})
    batch = dms.stack_models(models, width=args.width)
    for gamma in GAMMAS:
        batch_g = batch.replace(gamma=np.full(len(models), gamma, np.float32))
        static = dict(n_chains=args.chains, n_iterations=args.iterations,
                      burn_in=args.burn_in, thin=args.thin, max_components=args.R,
                      moves=tuple(int(v) for v in args.moves.split(",")), init_beta="self",
                      engine=dms.resolve_engine(args.engine, batch))
        key, sub = jax.random.split(key)
        init = np.stack(inits).astype(np.int32) if args.init == "parzen" else None
        load_before = os.getloadavg()
        samples, run_s, compile_s = timed_sampler(batch_g, sub, static, init)
        load_after = os.getloadavg()
        n_it = args.iterations + args.burn_in
        post = dms.class_marginals(samples, len(models))
        mean_acc, map_acc, accs = [], [], []
        for r, info in enumerate(meta):
            lab_idx = splits[info["labels"]][info["split"]]
            mean_acc.append(accuracy(post[r].argmax(1), y, lab_idx))
            y_map, _, _ = dms.map_estimate(batch_g, samples, member=r)
            map_acc.append(accuracy(y_map, y, lab_idx))
            rows = slice(r * args.chains, (r + 1) * args.chains)  # chains of run r
            accs.append({k: float(np.mean(samples.stats[f"{k}_accepted"][rows]))
                         for k in dms.MOVES if f"{k}_accepted" in samples.stats})
        record["gamma"][str(gamma)] = dict(
            mean=mean_acc, map=map_acc, acceptance=accs, compile_seconds=compile_s,
            run_seconds=run_s, iterations=n_it, chains=args.chains, moves=args.moves,
            engine=static["engine"],
            loadavg_before=load_before, loadavg_after=load_after,
            iterations_per_second=n_it / run_s,
            projected_seconds_1e5=1e5 / (n_it / run_s),
            final_energy=np.asarray(samples.energy[:, -1]).reshape(len(models), -1).tolist())
        print(f"  {name} gamma={gamma}: {n_it} it x {len(models)} runs x {args.chains} chains "
              f"in {run_s:.1f} s (compile {compile_s:.1f} s) -> {n_it / run_s:.2f} it/s "
              f"[{static['engine']}]",
              flush=True)
    record["peers"] = {}
    for L in (10, 100):
        for m, accs in peers(X, y, splits[L]).items():
            record["peers"].setdefault(m, {})[str(L)] = accs
    return record


def summarise(records):
    lines = []
    head = ("set", "L", "mix g=0", "mix g=.8", "MAP g=0", "MAP g=.8", "Parzen", "LabSpread",
            "LabProp", "GL lapl", "GL poiss")
    lines.append(" | ".join(f"{h:>9}" for h in head))
    claims = []
    for rec in records:
        for L in (10, 100):
            sel = [i for i, r in enumerate(rec["runs"]) if r["labels"] == L]
            f = lambda v, sel=sel: f"{np.mean([v[i] for i in sel]):.3f}"  # noqa: E731
            g0, g8 = rec["gamma"]["0.0"], rec["gamma"]["0.8"]
            parzen = [r["parzen"] for r in rec["runs"]]
            row = [rec["dataset"], str(L), f(g0["mean"]), f(g8["mean"]), f(g0["map"]),
                   f(g8["map"]), f(parzen)]
            for m in ("LabelSpreading", "LabelPropagation", "gl_laplace", "gl_poisson"):
                v = rec["peers"].get(m, {}).get(str(L))
                row.append(f"{np.mean(v):.3f}" if v else "-")
            lines.append(" | ".join(f"{c:>9}" for c in row))
            m = lambda v, sel=sel: float(np.mean([v[i] for i in sel]))  # noqa: E731
            sd = lambda v, sel=sel: float(np.std([v[i] for i in sel]))  # noqa: E731
            claims.append(dict(
                dataset=rec["dataset"], labels=L,
                gamma0_vs_parzen=m(g0["mean"]) - m(parzen),
                mean_vs_map_gamma0=m(g0["mean"]) - m(g0["map"]),
                mean_vs_map_gamma08=m(g8["mean"]) - m(g8["map"]),
                gamma08_vs_gamma0=m(g8["mean"]) - m(g0["mean"]),
                std_gamma0=sd(g0["mean"]), std_parzen=sd(parzen)))
    return "\n".join(lines), claims


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--iterations", type=int, default=60)
    p.add_argument("--burn-in", type=int, default=20)
    p.add_argument("--thin", type=int, default=20)
    p.add_argument("--chains", type=int, default=1)
    p.add_argument("--R", type=int, default=2)
    p.add_argument("--moves", default="1,1,0",
                   help="attempts per iteration: re-sampling, re-labelling, split-merge")
    p.add_argument("--merge", action="store_true",
                   help="keep the records of other data sets already in --out")
    p.add_argument("--width", type=int, default=96,
                   help="neighbour-table width (shared compile across data sets)")
    p.add_argument("--init", default="parzen", choices=("parzen", "random"),
                   help="chain start: Parzen-window labels (warm) or labels ~ eta")
    p.add_argument("--engine", default="auto", choices=dms.ENGINES,
                   help="Gibbs sweep: lax.scan or one fused Pallas kernel per chain (GPU)")
    p.add_argument("--quick", action="store_true", help="2 splits per label count")
    p.add_argument("--splits", type=int, default=2)
    p.add_argument("--out", default=str(RESULTS / "bench_diffusion_mixture.json"))
    args = p.parse_args()
    args.thin = min(args.thin, args.iterations)
    records = []
    kept = []
    if args.merge and pathlib.Path(args.out).is_file():
        old = json.loads(pathlib.Path(args.out).read_text())
        for rec in old["records"]:
            rec.setdefault("settings", {k: old["settings"][k] for k in (
                "iterations", "burn_in", "chains", "init")} | {"moves": "1,1,0"})
        kept = [r for r in old["records"] if r["dataset"] not in args.datasets.split(",")]
    key = jax.random.PRNGKey(0)
    start = time.perf_counter()
    for name in args.datasets.split(","):
        key, sub = jax.random.split(key)
        print(f"{name} ...", flush=True)
        records.append(run_dataset(name, args, sub))
        records[-1]["settings"] = {k: getattr(args, k) for k in (
            "iterations", "burn_in", "chains", "init", "moves")}
        ordered = sorted(records + kept, key=lambda r: DATASETS.index(r["dataset"]))
        table, claims = summarise(ordered)
        out = dict(
            device=str(jax.devices()[0]), platform=platform.platform(),
            gpu=any(d.platform == "gpu" for d in jax.devices()),
            versions=dict(jax=jax.__version__, numpy=np.__version__),
            settings=portable(vars(args)), k_grid=K_GRID, tau_grid=TAU_GRID,
            wall_seconds=time.perf_counter() - start, records=ordered, claims=claims,
            table=table)
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(json.dumps(out, indent=1))
    print(table)
    for c in claims:
        print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in c.items()})
    for rec in ordered:
        for g, r in rec["gamma"].items():
            print(f"{rec['dataset']} gamma={g}: {r['iterations_per_second']:.2f} it/s for "
                  f"{len(rec['runs'])} runs x {r['chains']} chains batched; 10^5 iterations "
                  f"-> {r['projected_seconds_1e5'] / 3600:.1f} h ({rec['n']} nodes, "
                  f"device {out['device']})")


if __name__ == "__main__":
    main()
