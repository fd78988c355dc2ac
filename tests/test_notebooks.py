"""Every notebook in notebooks/ runs top to bottom at small settings (GRAPHSSL_SMALL=1).

The diffusion-mixture notebook, the longest (~90 s), runs from its own file
(``test_notebook_diffusion_mixture.py``) so that the test processes (``--dist loadfile``)
share the notebooks out instead of running all of them one after another."""

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ALL_NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
OWN_FILE = ("dirichlet_diffusion_mixture",)  # run by test_notebook_diffusion_mixture.py
NOTEBOOKS = [p for p in ALL_NOTEBOOKS if p.stem not in OWN_FILE]


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no notebook"
    missing = set(OWN_FILE) - {p.stem for p in ALL_NOTEBOOKS}
    assert not missing, f"OWN_FILE names notebooks that do not exist: {missing}"


def run_notebook(path, monkeypatch):
    """Execute ``path`` at small settings; fail on the first error output."""
    monkeypatch.setenv("GRAPHSSL_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors, f"{path.name}: {errors[0].get('ename')}: {errors[0].get('evalue')}"
    assert os.environ.get("GRAPHSSL_SMALL") == "1"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs(path, monkeypatch):
    run_notebook(path, monkeypatch)
