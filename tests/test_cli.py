"""The ``graphssl`` command end to end on tiny data, and its bad-input paths."""

import json

import networkx as nx
import numpy as np
import pytest

from graphssl import cli_inputs, suite
from graphssl.cli import MODELS, main, register_model


def _report(root):
    [path] = root.glob("*/results.json")
    return path.parent, json.loads(path.read_text())


def test_run_two_moons_writes_json(tmp_path, capsys):
    code = main(["run", "--dataset", "two_moons", "--n-splits", "2", "--label-rate", "0.05",
                 "--models", "grf,lgc", "--out", str(tmp_path), "--no-progress"])
    assert code == 0
    out = capsys.readouterr().out
    assert "grf" in out and "lgc" in out and "acc MAP" in out and "ECE" in out
    folder, report = _report(tmp_path)
    assert folder.name.startswith("two_moons-grf+lgc-")  # non-default settings: a hash
    assert report["dataset"] == "two_moons" and report["n_samples"] == 1000
    assert len(report["splits"]) == 2 and len(report["splits"][0]) == 50
    for name in ("grf", "lgc"):
        model = report["models"][name]
        assert model["accuracy_mean"] > 0.9 and len(model["runs"]) == 2
        assert all(r["seconds"] >= 0 for r in model["runs"])
        assert model["converged"] is None  # not sampled
    assert not list(folder.rglob("*.tmp"))  # atomic writes leave no temporary files
    text = (folder / "results.json").read_text()
    json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))


def test_output_folders_per_data_set_and_models(tmp_path):
    args = ["--n-splits", "1", "--out", str(tmp_path), "--no-progress"]
    assert main(["run", "--models", "grf"] + args) == 0
    assert main(["run", "--models", "lgc"] + args) == 0
    assert main(["run", "--models", "grf", "--dataset", "three_clusters"] + args) == 0
    folders = sorted(p.name for p in tmp_path.iterdir())
    assert len(folders) == 3 and len(set(folders)) == 3
    assert [f.split("-")[:2] for f in folders] == [
        ["three_clusters", "grf"], ["two_moons", "grf"], ["two_moons", "lgc"]]


def test_damaged_run_file_is_reported_and_refitted(tmp_path, capsys):
    argv = ["run", "--models", "grf", "--n-splits", "2", "--out", str(tmp_path), "--no-progress"]
    assert main(argv) == 0
    folder, first = _report(tmp_path)
    damaged = folder / "runs" / "grf__split1.json"
    damaged.write_text('{"model": "grf", "accur')  # a half-written file from another tool
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "grf__split1.json is damaged (JSONDecodeError" in err and "refitting" in err
    _, again = _report(tmp_path)
    runs = again["models"]["grf"]["runs"]
    assert runs[0].get("resumed") and not runs[1].get("resumed")
    assert runs[1]["accuracy"] == first["models"]["grf"]["runs"][1]["accuracy"]
    assert json.loads(damaged.read_text())["accuracy"] == runs[1]["accuracy"]


def test_ctrl_c_stops_with_resume_message(tmp_path, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(suite, "compare_models", interrupted)
    code = main(["run", "--models", "grf", "--out", str(tmp_path), "--no-progress"])
    assert code == 130
    err = capsys.readouterr().err
    assert "interrupted; resume with the same command" in err and "Traceback" not in err


def test_run_csv_with_own_unlabelled_rows(tmp_path, capsys):
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(0, 0.3, (15, 2)), rng.normal(3, 0.3, (15, 2))])
    X[:, 1] *= 1000.0  # a column on another scale: standardisation keeps both informative
    labels = ["cat"] * 15 + ["dog"] * 15
    marks = {2: "", 3: "-1", 4: "unknown"}
    rows = ["x1,x2,label"]
    for i, (x, lab) in enumerate(zip(X, labels, strict=True)):
        shown = lab if i in (0, 1, 15, 16) else marks.get(i, "?")
        rows.append(f"{x[0]},{x[1]},{shown}")
    path = tmp_path / "tiny.csv"
    path.write_text("\n".join(rows) + "\n")
    code = main(["run", "--dataset", str(path), "--label-column", "label", "--k", "4",
                 "--n-splits", "1", "--models", "knn", "--out", str(tmp_path / "o"),
                 "--unlabeled-value", "unknown", "--no-progress"])
    assert code == 0
    folder, report = _report(tmp_path / "o")
    run = report["models"]["knn"]["runs"][0]
    assert run["predictions"] == labels and "accuracy" not in run
    assert report["classes"] == ["cat", "dog"]
    lines = (folder / "predictions.csv").read_text().splitlines()
    assert lines[0] == "node,knn" and lines[1] == "0,cat" and lines[-1] == "29,dog"
    assert "knn" in capsys.readouterr().out


def test_an_edited_or_another_file_of_the_same_name_is_refitted(tmp_path):
    """Resume reuses a result only for the same content read from the same file: a file
    relabelled between two runs of one command is refitted, and a file of the same name in
    another folder gets its own output folder."""
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0, 0.3, (10, 2)), rng.normal(3, 0.3, (10, 2))])
    out = tmp_path / "o"

    def run(path, first, second):
        rows = ["x1,x2,label"] + [
            f"{x[0]},{x[1]},{(first if i < 10 else second) if i in (0, 1, 10, 11) else ''}"
            for i, x in enumerate(X)]
        path.parent.mkdir(exist_ok=True)
        path.write_text("\n".join(rows) + "\n")
        assert main(["run", "--dataset", str(path), "--label-column", "label", "--k", "4",
                     "--n-splits", "1", "--models", "grf", "--out", str(out),
                     "--no-progress"]) == 0
        return sorted(out.glob("*/results.json"))

    [report] = run(tmp_path / "a" / "data.csv", "cat", "dog")
    first = json.loads(report.read_text())["models"]["grf"]["runs"][0]
    assert first["predictions"][0] == "cat"
    [report] = run(tmp_path / "a" / "data.csv", "dog", "cat")  # the classes swapped
    second = json.loads(report.read_text())["models"]["grf"]["runs"][0]
    assert not second.get("resumed") and second["predictions"][0] == "dog"
    assert len(run(tmp_path / "b" / "data.csv", "cat", "dog")) == 2  # its own folder


def test_user_tables_headers_byte_order_marks_and_missing_cells(tmp_path):
    """No header with string labels keeps its first row; a spreadsheet's UTF-8 byte-order
    mark does not stick to the first name; a NaN cell is named by its row before
    standardising; a header without data rows is said so."""
    def table(name, text):
        path = tmp_path / name
        path.write_bytes(text.encode("utf-8"))
        return str(path)

    plain = cli_inputs.load_table_problem(table("nohead.csv", "1,2,a\n3,4,b\n5,6,\n7,8,\n"))
    assert plain.n_samples == 4 and plain.classes.tolist() == ["a", "b"]
    assert plain.y.tolist() == [0, 1, -1, -1]
    marked = cli_inputs.load_table_problem(
        table("bom.csv", "\ufefflabel,x1,x2\na,1,2\nb,3,4\n,5,6\n"), label_column="label")
    assert marked.n_samples == 3 and marked.y.tolist() == [0, 1, -1]
    with pytest.raises(ValueError, match=r"nan.csv: 1 rows contain NaN or inf \(first: \[1\]\)"):
        cli_inputs.load_table_problem(table("nan.csv", "x,z,label\n1,2,a\n3,nan,b\n5,6,\n"))
    with pytest.raises(ValueError, match="a header and no data rows"):
        cli_inputs.load_table_problem(table("head.csv", "x1,x2,label\n"))


def test_standardisation_of_user_tables(tmp_path):
    rows = ["a,b,y"] + [f"{i},{1000 * (i % 3)},{i % 2}" for i in range(12)]
    (tmp_path / "t.csv").write_text("\n".join(rows) + "\n")
    scaled = cli_inputs.load_table_problem(str(tmp_path / "t.csv"))
    raw = cli_inputs.load_table_problem(str(tmp_path / "t.csv"), scale=False)
    np.testing.assert_allclose(scaled.X.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(scaled.X.std(axis=0), 1)
    assert raw.X[:, 1].max() == 2000 and raw.classes.tolist() == ["0", "1"]
    moons = cli_inputs.load_table_problem("two_moons")  # built-in sets keep their features
    assert abs(moons.X.std(axis=0) - 1).max() > 0.05


def test_run_own_graph_edge_list_labels_features(tmp_path, capsys):
    karate = nx.karate_club_graph()
    edges = ["source,target,weight"] + [f"n{a},n{b},{1 + (a + b) % 3}" for a, b in karate.edges]
    (tmp_path / "edges.csv").write_text("\n".join(edges) + "\n")
    clubs = {f"n{v}": karate.nodes[v]["club"] for v in karate.nodes}
    known = {"n0", "n33", "n1", "n32"}
    (tmp_path / "labels.csv").write_text(
        "node,label\n" + "".join(f"{v},{c if v in known else ''}\n" for v, c in clubs.items()))
    rng = np.random.default_rng(0)
    (tmp_path / "feats.csv").write_text(
        "node,f1,f2\n" + "".join(f"{v},{rng.normal()},{rng.normal()}\n" for v in clubs))
    code = main(["run", "--graph", str(tmp_path / "edges.csv"), "--labels",
                 str(tmp_path / "labels.csv"), "--features", str(tmp_path / "feats.csv"),
                 "--models", "grf,harmonic_mixture", "--out", str(tmp_path / "o"),
                 "--n-splits", "1", "--no-progress"])
    assert code == 0
    folder, report = _report(tmp_path / "o")
    assert folder.name.startswith("edges-grf+harmonic_mixture")
    assert report["graph"]["source"] == "file" and report["n_samples"] == 34
    lines = (folder / "predictions.csv").read_text().splitlines()
    predicted = dict(line.split(",")[:2] for line in lines[1:])
    accuracy = np.mean([predicted[v] == c for v, c in clubs.items()])
    assert accuracy > 0.8 and set(predicted.values()) == {"Mr. Hi", "Officer"}


def test_graph_label_and_feature_files_are_checked_per_node(tmp_path):
    (tmp_path / "edges.csv").write_text("a,b\nb,c\nc,d\n")
    (tmp_path / "labels.csv").write_text("node,label\na,x\nd,y\na,x\n")  # a repeat agrees
    problem = cli_inputs.load_graph_problem(tmp_path / "edges.csv",
                                            labels=tmp_path / "labels.csv")
    assert problem.y.tolist() == [0, -1, -1, 1]
    (tmp_path / "clash.csv").write_text("node,label\na,x\nd,y\na,y\n")
    with pytest.raises(ValueError, match="--labels: node 'a' has two different rows"):
        cli_inputs.load_graph_problem(tmp_path / "edges.csv", labels=tmp_path / "clash.csv")
    (tmp_path / "feats.csv").write_text("node,f\na,1\nb,inf\nc,2\nd,3\n")
    with pytest.raises(ValueError, match=r"--features feats.csv: 1 rows contain NaN or inf "
                                         r"\(first: \[1\]\)"):
        cli_inputs.load_graph_problem(tmp_path / "edges.csv", labels=tmp_path / "labels.csv",
                                      features=tmp_path / "feats.csv")


def test_run_own_graphml_with_label_attribute(tmp_path, capsys):
    nx.write_graphml(nx.karate_club_graph(), tmp_path / "karate.graphml")
    argv = ["run", "--graph", str(tmp_path / "karate.graphml"), "--label-attribute", "club",
            "--label-rate", "0.2", "--n-splits", "2", "--out", str(tmp_path), "--no-progress"]
    assert main(argv + ["--models", "grf,mincut"]) == 0
    _, report = _report(tmp_path)
    assert report["has_truth"] and report["models"]["grf"]["accuracy_mean"] > 0.8
    assert main(argv + ["--models", "grf,boltzmann"]) == 2  # needs features: refused
    assert "boltzmann learn from node features" in capsys.readouterr().err
    problem = cli_inputs.load_graph_problem(tmp_path / "karate.graphml",
                                            label_attribute="club")
    from graphssl.cli import _usable

    kept = _usable(list(MODELS), problem, explicit=False)  # 'all': skipped with a notice
    assert "grf" in kept and "boltzmann" not in kept and "harmonic_mixture" not in kept
    assert "skipping boltzmann, harmonic_mixture" in capsys.readouterr().err


def _small_budget_dm():
    from graphssl.estimators.diffusion_mixture import DiffusionMixtureClassifier

    return DiffusionMixtureClassifier(gamma=0.8, init="parzen", n_chains=2, n_iterations=40,
                                      burn_in=10, moves=(1, 0, 0))


def _small_budget_boltzmann():
    from graphssl.estimators.boltzmann import BoltzmannMRFClassifier

    return BoltzmannMRFClassifier(model="basic", n_restarts=1, max_iter=2)


def test_run_npz_path(tmp_path, monkeypatch):
    # every registered model through a user's .npz; the two slowest factories get small
    # budgets (their full CLI settings compile for half a minute on 2 cores: the models
    # themselves are checked in their own test files)
    monkeypatch.setitem(MODELS, "dirichlet_mixture", (_small_budget_dm, "small budget"))
    monkeypatch.setitem(MODELS, "boltzmann", (_small_budget_boltzmann, "small budget"))
    rng = np.random.default_rng(1)
    X = np.vstack([rng.normal(0, 0.3, (20, 3)), rng.normal(2, 0.3, (20, 3))]).astype(np.float32)
    np.savez(tmp_path / "mine.npz", X=X, y=np.repeat([0, 1], 20))
    code = main(["run", "--dataset", str(tmp_path / "mine.npz"), "--k", "5", "--label-rate",
                 "0.1", "--models", "all", "--n-splits", "1", "--out", str(tmp_path),
                 "--max-doublings", "0", "--no-progress"])
    assert code == 0
    folder, report = _report(tmp_path)
    assert folder.name.startswith("mine-all-")
    assert set(report["models"]) == set(MODELS)
    sampled = [n for n, m in report["models"].items() if m["converged"] is not None]
    assert {"potts_gibbs", "potts_sw"} <= set(sampled)
    for name in sampled:
        assert {"rhat_max", "ess_min", "converged"} <= set(report["models"][name]["runs"][0])


def test_registry_accepts_new_models(tmp_path):
    from graphssl.estimators.baselines import LGCClassifier

    register_model("lgc_half", lambda: LGCClassifier(alpha=0.5), "LGC alpha 0.5")
    try:
        assert main(["run", "--models", "lgc_half", "--n-splits", "1", "--out",
                     str(tmp_path), "--no-progress"]) == 0
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
        (["run", "--workers", "0"], "--workers"),
        (["run", "--target-rhat", "0.9"], "target_rhat"),
        (["run", "--graph", "g.txt"], "--graph"),
        (["run", "--graph", "missing.csv"], "does not exist"),
        (["run", "--features", "f.csv"], "--features: only with --graph"),
        (["run", "--graph", "g.csv", "--label-column", "club"], "--label-column: only with"),
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


@pytest.mark.parametrize("cells, match", [
    (["", "", "", ""], "the input labels 0 class(es); label at least one point"),
    (["a", "", "a", ""], "the input labels 1 class(es) ('a')"),
])
def test_a_table_labelling_fewer_than_two_classes_is_refused(cells, match, tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("x,z,label\n" + "".join(f"{i},{i % 2},{c}\n" for i, c in enumerate(cells)))
    code = main(["run", "--dataset", str(path), "--label-column", "label", "--models", "grf",
                 "--out", str(tmp_path / "o"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("graphssl: error: --label-column: ") and match in err


def test_empty_or_unwritable_out_refused_up_front(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--out", "", "--models", "grf"]) == 2
    assert "--out: empty" in capsys.readouterr().err
    (tmp_path / "afile").write_text("x")
    assert main(["run", "--out", "afile", "--models", "grf"]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["run", "--out", "afile/sub", "--models", "grf"]) == 2
    assert "--out: cannot write in" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing written


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["run", "--help"])
    assert stop.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "--graph" in text and "--scheduler" in text


def test_list(tmp_path, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "grf" in out and "two_moons" in out
    np.savez(tmp_path / "digit1.npz", X=np.zeros((4, 2)), y=np.array([0, 1, 0, 1]))
    assert main(["list", "--data-dir", str(tmp_path)]) == 0
    assert "digit1" in capsys.readouterr().out
    assert main(["list", "--data-dir", str(tmp_path / "nope")]) == 2


def test_results_are_strict_json():
    """One writer for every JSON file (``results.json`` and the suite's run records): NaN and
    inf become null, NumPy / JAX scalars and arrays plain numbers and lists."""
    import jax.numpy as jnp

    from graphssl.suite import strict_json

    report = {"rhat": float("nan"), "ess": np.float64(np.inf), "sizes": np.array([1, 2]),
              "n": np.int64(3), "nested": [{"ok": 0.5}], "flag": np.bool_(True),
              "jax": jnp.asarray([0.5, jnp.nan]), "jax_scalar": jnp.int32(2)}
    assert json.dumps(strict_json(report), allow_nan=False) == (
        '{"rhat": null, "ess": null, "sizes": [1, 2], "n": 3, "nested": [{"ok": 0.5}], '
        '"flag": true, "jax": [0.5, null], "jax_scalar": 2}')


def test_a_data_folder_that_is_a_file_is_named_by_its_source(tmp_path, monkeypatch, capsys):
    """A file given as --data-dir was reported as "does not exist"; a GRAPHSSL_DATA file was
    blamed on --data-dir after the listing had been printed."""
    npz = tmp_path / "set.npz"
    npz.write_bytes(b"")
    assert main(["run", "--dataset", "bupa", "--data-dir", str(npz), "--models", "grf"]) == 2
    assert f"--data-dir: {npz} is a file" in capsys.readouterr().err
    monkeypatch.setenv("GRAPHSSL_DATA", str(npz))
    assert main(["list"]) == 2
    captured = capsys.readouterr()
    assert f"GRAPHSSL_DATA: {npz} is a file" in captured.err and "models:" not in captured.out


def test_a_closed_stdout_still_writes_the_report(tmp_path, monkeypatch):
    """`graphssl run | head -1`: the broken pipe aborted the run before results.json."""
    import io

    class ClosedPipe(io.TextIOBase):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def fileno(self):
            raise io.UnsupportedOperation("no file descriptor")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.stdout", ClosedPipe())
    assert main(["run", "--models", "grf", "--no-progress", "--n-splits", "1"]) == 0
    assert list(tmp_path.glob("graphssl-output/*/results.json"))


def test_split_options_are_named_in_the_users_terms(capsys):
    """``--label-rate 0.0001`` was reported as "n_labeled must be an integer in [1, 1000]",
    ``--seed -1`` as numpy's "expected non-negative integer"."""
    assert main(["run", "--label-rate", "0.0001", "--models", "grf"]) == 2
    assert "--label-rate=0.0001 of 1000 points gives 0" in capsys.readouterr().err
    assert main(["run", "--seed", "-1", "--models", "grf"]) == 2
    assert "--seed: a whole number >= 0, got -1" in capsys.readouterr().err


def test_a_plus_minus_one_npz_is_explained(tmp_path, capsys):
    """Labels coded -1 / +1 read -1 as unlabelled; the error named --label-column, which an
    .npz does not have."""
    rng = np.random.default_rng(0)
    path = tmp_path / "pm1.npz"
    np.savez(path, X=rng.normal(size=(40, 2)), y=np.where(np.arange(40) % 2, 1, -1))
    assert main(["run", "--dataset", str(path), "--models", "grf"]) == 2
    err = capsys.readouterr().err
    assert "--dataset: the input labels 1 class(es)" in err and "-1 / +1" in err
