"""The public API is documented, and docs/API.md is generated from it and kept fresh."""

import importlib.util
from pathlib import Path

import pytest

GEN = Path(__file__).resolve().parents[1] / "docs" / "gen_api.py"


@pytest.fixture(scope="module")
def gen_api():
    spec = importlib.util.spec_from_file_location("gen_api", GEN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_public_function_class_and_module_has_a_docstring(gen_api):
    assert gen_api.missing_docstrings() == []


def test_a_missing_docstring_is_reported(gen_api, monkeypatch):
    import graphssl.metrics as metrics

    def undocumented(x):
        return x

    undocumented.__module__ = metrics.__name__
    monkeypatch.setattr(metrics, "undocumented", undocumented, raising=False)
    assert "graphssl.metrics.undocumented" in gen_api.missing_docstrings()


def test_api_page_is_up_to_date(gen_api):
    assert gen_api.API_PAGE.read_text() == gen_api.render(), (
        "docs/API.md is stale: run `python docs/gen_api.py`")
