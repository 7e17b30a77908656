"""Optional dependencies: a missing one names the extra that installs it, at each place that
imports one (serve, milvus, postgres, report, train). ``sys.modules[NAME] = None`` makes the
import fail as if the package were not installed (monkeypatch restores it)."""

from __future__ import annotations

import sys

import pytest

from medr2.util.extras import MissingExtra, errors_of, install_hint, require


def block(monkeypatch, *modules: str) -> None:
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)


def test_require_returns_the_module_or_names_the_extra(monkeypatch):
    import json

    assert require("json", "serve", "x") is json
    block(monkeypatch, "json")
    with pytest.raises(ImportError, match=r"^medr2 serve needs the 'serve' extra: pip install 'medr2\[serve\]'") as e:
        require("json", "serve", "medr2 serve")
    assert isinstance(e.value, MissingExtra) and e.value.extra == "serve" and e.value.name == "json"
    assert install_hint("report") == "pip install 'medr2[report]'"


def test_errors_of_is_empty_without_the_module(monkeypatch):
    import json

    assert errors_of("json", "JSONDecodeError") == (json.JSONDecodeError,)
    block(monkeypatch, "json")
    assert errors_of("json", "JSONDecodeError") == ()


def test_serve_package(monkeypatch):
    block(monkeypatch, "fastapi")
    monkeypatch.delitem(sys.modules, "medr2.serve", raising=False)
    with pytest.raises(MissingExtra, match=r"medr2\[serve\]"):
        import medr2.serve  # noqa: F401


def test_milvus_backend(monkeypatch, tmp_path):
    from medr2.index.milvus import MilvusVectors
    from medr2.store.layout import BackendError

    block(monkeypatch, "pymilvus")
    with pytest.raises(BackendError, match=r"Milvus backend .* pip install 'medr2\[milvus\]'"):
        MilvusVectors(str(tmp_path / "m.db"), "c")
    monkeypatch.delitem(sys.modules, "pymilvus")
    pytest.importorskip("pymilvus")
    block(monkeypatch, "milvus_lite")
    with pytest.raises(BackendError, match=r"medr2\[milvus\].*milvus_lite"):
        MilvusVectors(str(tmp_path / "m.db"), "c")


def test_postgres_store(monkeypatch):
    from medr2.store.postgres import PGConnectionError, _connect

    block(monkeypatch, "psycopg")
    with pytest.raises(PGConnectionError, match=r"PostgreSQL store .* pip install 'medr2\[postgres\]'"):
        _connect("postgresql://medr2@127.0.0.1:1/none", None)


def test_report_plots(monkeypatch, tmp_path):
    from medr2.eval.plots import plot_bars, plot_heatmap

    block(monkeypatch, "matplotlib")
    with pytest.raises(MissingExtra, match=r"plots of medr2 eval report .*medr2\[report\]"):
        plot_bars([], "m", tmp_path / "b.png", ["direct"])
    with pytest.raises(MissingExtra, match=r"medr2\[report\]"):
        plot_heatmap({("m", None): 1.0}, tmp_path / "h.png")


def test_training_commands(monkeypatch):
    import numpy as np

    from medr2.appraise.train_design import fit
    from medr2.appraise.train_doc_type import fit_model
    from medr2.formulate.train import train_ebm_classifier

    block(monkeypatch, "sklearn")
    with pytest.raises(MissingExtra, match=r"medr2 train-design needs the 'train' extra"):
        fit(["a", "b"], ["x", "y"], 1.0)
    with pytest.raises(MissingExtra, match=r"medr2 train-doctype needs the 'train' extra"):
        fit_model(np.zeros((2, 2)), ["x", "y"], 1.0, 1.0, {})
    with pytest.raises(MissingExtra, match=r"medr2 train-classifier needs the 'train' extra"):
        train_ebm_classifier("/nonexistent.jsonl")
