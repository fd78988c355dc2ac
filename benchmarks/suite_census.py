"""Where the test suite's time goes: wall seconds and JAX's tracing, lowering and XLA
compilation seconds per test file, from a run with ``--compile-census``.

Run the suite as CI does, with the census on, then sum it::

    python -m pytest -q --compile-census /tmp/census
    python benchmarks/suite_census.py /tmp/census [--top 30] [--tag TAG]

Each test process writes one JSON line per test (``tests/conftest.py``): its wall seconds
(setup, call and teardown) and the seconds JAX spent in this process tracing jaxprs
(``trace_s``), lowering them to StableHLO (``lower_s``) and compiling them with XLA
(``compile_s``) while it ran. Tests that run a subprocess (notebooks, the CLI) show their
wall time only. The sums are worker seconds: with 3 test processes on 2 cores they exceed
the run's wall time, and a process that waits for a core counts the wait too.

Prints the files by wall seconds (tests, wall, trace, lower, compile, compile share), the
slowest tests, and the totals; writes ``benchmarks/results/suite_census[_TAG].json``.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
COLUMNS = ("wall_s", "trace_s", "lower_s", "compile_s")


def read_records(folder: pathlib.Path) -> list[dict]:
    """Every test's record in ``folder/tests-*.jsonl``."""
    files = sorted(folder.glob("tests-*.jsonl"))
    if not files:
        raise SystemExit(f"{folder}: no tests-*.jsonl (run pytest with --compile-census "
                         f"{folder} first)")
    return [json.loads(line) for path in files for line in path.read_text().splitlines()
            if line.strip()]


def by_file(records: list[dict]) -> dict[str, dict]:
    """``{file: {"tests": count, "wall_s": ..., ...}}``, the seconds summed."""
    sums: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for record in records:
        row = sums[record["test"].split("::")[0]]
        row["tests"] += 1
        for column in COLUMNS:
            row[column] += record.get(column, 0.0)
    return {name: dict(row) for name, row in sums.items()}


def _line(name: str, row: dict) -> str:
    share = row["compile_s"] / row["wall_s"] if row["wall_s"] else 0.0
    return (f"{name[:62]:62s} {row.get('tests', ''):>5} "
            + " ".join(f"{row[c]:9.1f}" for c in COLUMNS) + f" {share:6.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=pathlib.Path)
    parser.add_argument("--top", type=int, default=25, help="slowest tests to list")
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    records = read_records(args.folder)
    files = by_file(records)
    totals = {"tests": len(records),
              **{c: sum(r.get(c, 0.0) for r in records) for c in COLUMNS}}
    header = f"{'file':62s} {'tests':>5} " + " ".join(f"{c:>9s}" for c in COLUMNS) + " compile"
    print(header)
    for name, row in sorted(files.items(), key=lambda kv: -kv[1]["wall_s"]):
        print(_line(name, row))
    print(_line("TOTAL (worker seconds)", totals))
    print(f"\nslowest {args.top} tests:")
    for record in sorted(records, key=lambda r: -r["wall_s"])[: args.top]:
        row = {c: record.get(c, 0.0) for c in COLUMNS}
        print(_line(record["test"].split("/")[-1], {"tests": "", **row}))
    out = HERE / "results" / f"suite_census{'_' + args.tag if args.tag else ''}.json"
    out.write_text(json.dumps({"totals": totals, "files": files, "tests": records}, indent=1))
    print(f"\nwrote {out.relative_to(HERE.parent)}")


if __name__ == "__main__":
    main()
