"""The diffusion-mixture notebook at small settings, in a file of its own (the longest
notebook: see ``test_notebooks.py``)."""

import pytest

pytest.importorskip("nbformat")
pytest.importorskip("nbclient")

from test_notebooks import ALL_NOTEBOOKS, OWN_FILE, run_notebook  # noqa: E402


@pytest.mark.parametrize("stem", OWN_FILE)
def test_notebook_runs(stem, monkeypatch):
    (path,) = [p for p in ALL_NOTEBOOKS if p.stem == stem]
    run_notebook(path, monkeypatch)
