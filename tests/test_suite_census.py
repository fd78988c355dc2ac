"""benchmarks/suite_census.py: the per-file sums of a ``--compile-census`` run."""

import importlib.util
import json
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "suite_census.py"
_spec = importlib.util.spec_from_file_location("suite_census", _PATH)
census = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(census)


def test_records_are_summed_by_file(tmp_path):
    records = [
        {"test": "tests/a.py::t1", "wall_s": 2.0, "compile_s": 1.5, "lower_s": 0.2},
        {"test": "tests/a.py::t2[x]", "wall_s": 1.0, "trace_s": 0.3},
        {"test": "tests/b.py::t", "wall_s": 4.0, "compile_s": 3.0},
    ]
    (tmp_path / "tests-1.jsonl").write_text("\n".join(json.dumps(r) for r in records[:2]))
    (tmp_path / "tests-2.jsonl").write_text(json.dumps(records[2]) + "\n")
    read = census.read_records(tmp_path)
    assert sorted(r["test"] for r in read) == sorted(r["test"] for r in records)
    files = census.by_file(read)
    assert files["tests/a.py"] == {"tests": 2, "wall_s": 3.0, "trace_s": 0.3, "lower_s": 0.2,
                                   "compile_s": 1.5}
    assert files["tests/b.py"]["compile_s"] == 3.0 and files["tests/b.py"]["tests"] == 1


def test_a_folder_without_records_says_how_to_make_them(tmp_path):
    with pytest.raises(SystemExit, match="--compile-census"):
        census.read_records(tmp_path)
