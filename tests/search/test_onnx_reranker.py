"""medr2's reranker on ONNX Runtime: its exports agree with the torch model, share the card's
scoring with it, and are chosen (or refused) by ``rerank.runtime``; a changed model makes its
export stale. The exports live in a per-session MEDR2_HOME (``runtime_home``)."""

import json
import os
import shutil

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr

from medr2.config import RerankConfig
from medr2.index.runtime import MANIFEST, MODEL_FILE
from medr2.search.cross_encoder import (CARD, SHIPPED, WEIGHTS, CrossEncoderBase, CrossEncoderError,
                                        MiniCrossEncoder, OnnxCrossEncoder, choose_runtime, load_cross_encoder,
                                        reranker_status, runtime_name)
from medr2.search.rerank import load_reranker

SPEC = "bundled:medr2-reranker"
QUERIES = ["when should metformin be stopped in chronic kidney disease",
           "first-line urate-lowering therapy for gout",
           "treatment of persistent asthma in children"]
PASSAGES = [
    "Metformin is stopped when eGFR falls below 30 and its dose is reduced below 45 mL/min.",
    "Allopurinol is the first-line urate-lowering therapy for recurrent gout flares.",
    "Inhaled corticosteroids are the mainstay of treatment for persistent asthma in children.",
    "The mitochondrion is the site of oxidative phosphorylation in eukaryotic cells.",
    "Colchicine prophylaxis is given when starting urate-lowering therapy.",
    "Lactic acidosis is a rare but serious adverse effect of metformin. " * 10,
    "Influenza vaccination is recommended every year for adults over 65.",
]


@pytest.fixture
def built(runtime_home, monkeypatch):
    monkeypatch.setenv("MEDR2_HOME", str(runtime_home))
    return runtime_home


@pytest.fixture(scope="module")
def torch_fp32():
    return load_cross_encoder(SPEC, quantize=False, runtime="torch")


def all_logits(ce) -> np.ndarray:
    return np.concatenate([ce.logits(q, PASSAGES) for q in QUERIES])


def test_fp32_export_gives_the_torch_logits(built, torch_fp32):
    ce = load_cross_encoder(SPEC, quantize=False, runtime="onnx")
    assert isinstance(ce, OnnxCrossEncoder) and not ce.quantized and ce.runtime == "onnx"
    np.testing.assert_allclose(all_logits(ce), all_logits(torch_fp32), atol=1e-3)
    assert ce.logits("q", []).shape == (0,)


def test_int8_export_ranks_as_the_fp32_model(built, torch_fp32):
    ce = load_cross_encoder(SPEC)  # the default: int8, auto
    assert isinstance(ce, OnnxCrossEncoder) and ce.quantized
    got, want = all_logits(ce), all_logits(torch_fp32)  # 21 pairs, relevant and not
    assert pearsonr(got, want)[0] > 0.99 and spearmanr(got, want)[0] > 0.95
    for q, row in zip(QUERIES, got.reshape(len(QUERIES), -1)):  # each query's own passage ranks first
        assert int(np.argmax(row)) == QUERIES.index(q)
    int8 = reranker_status(SPEC, True).model_path.stat().st_size
    assert int8 < reranker_status(SPEC, False).model_path.stat().st_size / 3  # Gather (embeddings) quantised too


def test_both_engines_share_the_cards_scoring(built, torch_fp32):
    ce = load_cross_encoder(SPEC, quantize=False)
    assert isinstance(ce, CrossEncoderBase) and isinstance(torch_fp32, CrossEncoderBase)
    assert isinstance(torch_fp32, MiniCrossEncoder) and torch_fp32.runtime == "torch"
    keys = ("max_length", "a", "b", "prior", "sibling", "name", "batch_size")
    assert {k: getattr(ce, k) for k in keys} == {k: getattr(torch_fp32, k) for k in keys}
    docs = ["a", "a", "b", "c", "c", "d", "e"]
    np.testing.assert_allclose(ce.relevance(QUERIES[0], PASSAGES, docs),
                               torch_fp32.relevance(QUERIES[0], PASSAGES, docs), atol=1e-3)
    raw = ce.logits(QUERIES[0], PASSAGES)
    assert ce.relevance(QUERIES[0], PASSAGES, docs) == pytest.approx(
        ce.calibrate(ce.with_prior(ce.with_siblings(raw, docs))), rel=1e-6)


def test_runtime_choice_without_exports(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDR2_HOME", str(tmp_path / "home"))
    assert choose_runtime(SPEC)[0] == "torch"
    with pytest.raises(CrossEncoderError, match="rerank.runtime = 'onnx'.*not built.*medr2 build-runtime"):
        load_cross_encoder(SPEC, runtime="onnx")
    with pytest.raises(CrossEncoderError, match="medr2 build-runtime"):
        load_reranker(RerankConfig(runtime="onnx"))
    with pytest.raises(RuntimeError, match="sentence-transformers model"):
        load_reranker(RerankConfig(cross_encoder="BAAI/bge-reranker-v2-m3", runtime="onnx"))


def test_a_changed_model_makes_its_export_stale(built, tmp_path):
    """A trained model directory: its export is found by the content of its weights; changing
    them (a retrained model) makes it stale: auto falls back to torch, onnx refuses."""
    model = tmp_path / "model"
    model.mkdir()
    for f in (CARD, WEIGHTS):
        shutil.copy(SHIPPED / f, model / f)
    assert runtime_name(str(model), True) != runtime_name(SPEC, True)
    # the bundled export, placed where this directory's export goes: same bytes, so current
    for quantize in (True, False):
        src = reranker_status(SPEC, quantize).folder
        dst = src.parent / runtime_name(str(model), quantize)
        dst.mkdir()
        os.symlink(src / MODEL_FILE, dst / MODEL_FILE)
        shutil.copy(src / MANIFEST, dst / MANIFEST)
    assert choose_runtime(str(model))[0] == "onnx"
    assert isinstance(load_cross_encoder(str(model), runtime="onnx"), OnnxCrossEncoder)
    # re-choosing the calibration, prior or sibling weight (train-reranker --rechoose) keeps it
    card = json.loads((model / CARD).read_text())
    card["calibration"]["a"], card["prior"] = 0.5, 1.0
    (model / CARD).write_text(json.dumps(card, indent=2) + "\n")
    assert reranker_status(str(model)).current and load_cross_encoder(str(model), runtime="onnx").prior == 1.0
    # retrained weights make it stale
    (model / WEIGHTS).write_bytes((model / WEIGHTS).read_bytes() + b" ")
    status = reranker_status(str(model))
    assert status.state == "stale" and f"{WEIGHTS} changed" in status.reason
    assert choose_runtime(str(model))[0] == "torch"
    with pytest.raises(CrossEncoderError, match="stale.*medr2 build-runtime"):
        load_cross_encoder(str(model), runtime="onnx")
