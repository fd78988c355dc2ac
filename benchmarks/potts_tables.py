"""One accuracy table per data set and label rate from ``bench_potts.py accuracy`` JSON files.

    python benchmarks/potts_tables.py results/bench_potts_accuracy_linked20_small.json ...

Rows: our grf / lgc / nmfA / nmfB with the authors' mean (``ssl_nmf_results.npz``), the gap in
points and our standard error over splits; then the peers on the same splits (scikit-learn
LabelSpreading, GraphLearning Laplace / Poisson). A later file overrides an earlier one for
the same (data set, rate, method). Prints markdown and writes it beside the first input as
``bench_potts_accuracy_tables.md``.
"""

from __future__ import annotations

import json
import pathlib
import sys

ORDER = ("grf", "lgc", "nmfA", "nmfB", "sklearn_ls", "gl_laplace", "gl_poisson")


def load(paths):
    rows = {}
    for path in paths:
        data = json.loads(pathlib.Path(path).read_text())
        for r in data["records"]:
            rows[(r["dataset"], r["pct"], r["method"])] = r
    return rows


def tables(rows):
    lines = []
    for name in dict.fromkeys(key[0] for key in rows):
        lines += [f"\n### {name}", "", "| rate | method | ours (acc, all N) | se | splits | "
                  "authors | gap (pts) | ours (unlabelled only) |", "|---" * 8 + "|"]
        for pct in sorted({key[1] for key in rows if key[0] == name}):
            for m in ORDER:
                r = rows.get((name, pct, m))
                if r is None:
                    continue
                a, se = r.get("authors_acc"), r.get("acc_se")
                cells = [f"{pct} %", m, f"{r['acc']:.4f}",
                         "-" if se is None else f"{se:.4f}", str(r["n_splits"]),
                         "-" if a is None else f"{a:.4f}",
                         "-" if a is None else f"{100 * (r['acc'] - a):+.1f}",
                         f"{r['acc_unlabelled']:.4f}"]
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(paths):
    text = tables(load(paths))
    print(text)
    out = pathlib.Path(paths[0]).parent / "bench_potts_accuracy_tables.md"
    title = "# Potts / GRF / LGC vs Bergamim & Breve and peers (same splits)\n"
    out.write_text(title + text + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
