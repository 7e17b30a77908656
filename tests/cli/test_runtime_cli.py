"""``medr2 build-runtime`` (idempotent) and ``medr2 doctor`` (which engine each model runs on),
on the per-session MEDR2_HOME whose runtime is built (``runtime_home``)."""

import json

import pytest
from click.testing import CliRunner

from medr2.cli import main


@pytest.fixture
def built(runtime_home, monkeypatch):
    monkeypatch.setenv("MEDR2_HOME", str(runtime_home))
    return runtime_home


def test_doctor_and_build_runtime_commands(built, tmp_path):
    r = CliRunner().invoke(main, ["build-runtime"])
    assert r.exit_code == 0, r.output
    assert r.stdout.count(": up to date") == 4
    # and the default configuration's terminology caches, so a first demo or ask does not build them
    assert "synonym table: " in r.stdout and "entity library: ready" in r.stdout
    assert list((built / "terms").glob("synonyms-*.json")) and list((built / "kg").glob("library-*.json"))
    r = CliRunner().invoke(main, ["doctor", "--json"])
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["dense"]["engine"] == "onnx" and rep["reranker"]["engine"] == "onnx"
    (tmp_path / "torch.toml").write_text('[dense]\nruntime = "torch"\n[rerank]\nruntime = "torch"\n')
    rep = json.loads(CliRunner().invoke(main, ["doctor", "--json", "--config", str(tmp_path / "torch.toml")]).stdout)
    assert rep["dense"]["engine"] == "torch" and rep["reranker"]["engine"] == "torch"


def test_doctor_reports_torch_and_the_missing_export(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDR2_HOME", str(tmp_path / "home"))
    r = CliRunner().invoke(main, ["doctor"])
    assert r.exit_code == 0, r.output
    assert "-> torch" in r.stdout and "medr2 build-runtime" in r.stdout
    (tmp_path / "onnx.toml").write_text('[rerank]\nruntime = "onnx"\n')
    r = CliRunner().invoke(main, ["doctor", "--config", str(tmp_path / "onnx.toml")])
    assert r.exit_code == 1 and "rerank.runtime = 'onnx'" in r.stdout
