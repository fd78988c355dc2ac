"""The ``graphssl`` command end to end on tiny data, and its bad-input paths."""

import json

import numpy as np
import pytest

from graphssl.cli import MODELS, main, register_model


def test_run_two_moons_writes_json(tmp_path, capsys):
    code = main(["run", "--dataset", "two_moons", "--n-splits", "2", "--label-rate", "0.05",
                 "--models", "grf,lgc", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    assert "grf" in out and "lgc" in out and "acc MAP" in out and "ECE" in out
    report = json.loads((tmp_path / "results.json").read_text())
    assert report["dataset"] == "two_moons" and report["n_samples"] == 1000
    assert len(report["splits"]) == 2 and len(report["splits"][0]) == 50
    for name in ("grf", "lgc"):
        model = report["models"][name]
        assert model["accuracy_mean"] > 0.9 and len(model["runs"]) == 2
        assert all(r["seconds"] >= 0 for r in model["runs"])


def test_run_csv_with_own_unlabelled_rows(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.3, (15, 2)), rng.normal(3, 0.3, (15, 2))])
    labels = ["a"] * 15 + ["b"] * 15
    rows = ["x1,x2,label"]
    for i, (x, lab) in enumerate(zip(X, labels, strict=True)):
        rows.append(f"{x[0]},{x[1]},{lab if i in (0, 1, 15, 16) else ''}")
    path = tmp_path / "tiny.csv"
    path.write_text("\n".join(rows) + "\n")
    code = main(["run", "--dataset", str(path), "--label-column", "label", "--k", "4",
                 "--n-splits", "1", "--models", "knn", "--out", str(tmp_path / "o")])
    assert code == 0
    report = json.loads((tmp_path / "o" / "results.json").read_text())
    predictions = report["models"]["knn"]["runs"][0]["predictions"]
    assert predictions[:15] == [0] * 15 and predictions[15:] == [1] * 15
    assert "accuracy" not in report["models"]["knn"]["runs"][0]
    assert "knn" in capsys.readouterr().out


def test_run_npz_path(tmp_path):
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0, 0.3, (20, 3)), rng.normal(2, 0.3, (20, 3))]).astype(np.float32)
    np.savez(tmp_path / "mine.npz", X=X, y=np.repeat([0, 1], 20))
    code = main(["run", "--dataset", str(tmp_path / "mine.npz"), "--k", "5", "--label-rate",
                 "0.1", "--models", "all", "--n-splits", "1", "--out", str(tmp_path)])
    assert code == 0
    report = json.loads((tmp_path / "results.json").read_text())
    assert set(report["models"]) == set(MODELS)


def test_registry_accepts_new_models(tmp_path):
    from graphssl.estimators.baselines import LGCClassifier

    register_model("lgc_half", lambda: LGCClassifier(alpha=0.5), "LGC alpha 0.5")
    try:
        assert main(["run", "--models", "lgc_half", "--n-splits", "1", "--out",
                     str(tmp_path)]) == 0
    finally:
        MODELS.pop("lgc_half")


@pytest.mark.parametrize(
    "argv, match",
    [
        (["run", "--dataset", "no_such_set"], "--dataset"),
        (["run", "--dataset", "missing.npz"], "does not exist"),
        (["run", "--models", "grf,nope"], "--models"),
        (["run", "--label-rate", "1.5"], "--label-rate"),
        (["run", "--k", "ten"], "--k"),
        (["run", "--k", "5000"], "k"),
        (["run", "--sigma", "-1"], "sigma"),
        (["run", "--n-splits", "0"], "--n-splits"),
        (["frobnicate"], "invalid choice"),
        ([], "choose a command"),
    ],
)
def test_bad_input_one_line_exit_2(argv, match, tmp_path, capsys):
    code = main(argv + ["--out", str(tmp_path)] if argv and argv[0] == "run" else argv)
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("graphssl: error:") and match in err
    assert err.count("\n") == 1


def test_list(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "grf" in out and "two_moons" in out
