"""The bundled dense encoder on ONNX Runtime: the fp32 export gives torch's vectors, the int8 one
is close and binds its own indexes, the runtime choice (auto / onnx / torch, stale exports), and
a search that never imports torch. The exports live in a per-session MEDR2_HOME (``runtime_home``)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from medr2.config import Config, DenseConfig
from medr2.index.dense import DenseEncoder, EncoderError, choose_runtime, load_encoder
from medr2.index.index import Index, IndexError_
from medr2.index.onnx_dense import OnnxDenseEncoder, dense_status
from medr2.index.runtime import MANIFEST, MODEL_FILE, check, runtime_root, thread_budget

INT8 = "bundled:all-MiniLM-L6-v2-int8"
TEXTS = [
    "Metformin should be dose-reduced when eGFR falls below 45 and stopped below 30.",
    "gout",
    "  Allopurinol lowers serum urate; colchicine prevents flares when urate-lowering therapy starts.  ",
    # longer than the model's 256 tokens: truncated the same way on both engines
    "Inhaled corticosteroids reduce airway inflammation in persistent asthma. " * 40,
    "慢性肾病患者使用二甲双胍",
]
DOCS = {
    "metformin.md": "# Metformin in kidney disease\n\nMetformin is stopped when eGFR falls below 30 and "
                    "dose-reduced below 45 because of the risk of lactic acidosis.\n",
    "gout.md": "# Gout\n\nAllopurinol is the first-line urate-lowering therapy for recurrent gout flares.\n",
    "asthma.md": "# Asthma\n\nInhaled corticosteroids are the mainstay of treatment for persistent asthma.\n",
}


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


@pytest.fixture
def built(runtime_home, monkeypatch):
    monkeypatch.setenv("MEDR2_HOME", str(runtime_home))
    return runtime_home


@pytest.fixture
def unbuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDR2_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def tiny_index(path, cfg=None) -> None:
    from medr2.ingest.pipeline import ingest

    folder = path.parent / (path.name + "-corpus")
    folder.mkdir(parents=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    with Index.open(path, cfg, create=True, writable=True) as idx:
        assert ingest(idx, [folder], progress=False).status == "ok"


def test_fp32_export_gives_the_torch_vectors(built):
    # the engines themselves (bf16 passage batches are tested in test_bf16_passages.py)
    torch_enc = load_encoder(DenseConfig(runtime="torch", passage_precision="fp32"))
    onnx_enc = load_encoder(DenseConfig(runtime="onnx", passage_precision="fp32"))
    assert isinstance(torch_enc, DenseEncoder) and isinstance(onnx_enc, OnnxDenseEncoder)
    assert onnx_enc.runtime == "onnx" and not onnx_enc.quantized and onnx_enc.dim == torch_enc.dim == 384
    assert onnx_enc.name == torch_enc.name
    got, want = onnx_enc.encode_passages(TEXTS), torch_enc.encode_passages(TEXTS)
    assert got.shape == want.shape and got.dtype == np.float32 and got.flags.c_contiguous
    assert cosines(got, want).min() > 0.9999  # and in the caller's order, though batches run by length
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert float(onnx_enc.encode_query("metformin") @ torch_enc.encode_query("metformin")) > 0.9999
    assert onnx_enc.encode_passages([]).shape == (0, 384)


def test_int8_encoder_is_close_to_fp32_and_has_its_own_name(built):
    fp32 = load_encoder(DenseConfig(runtime="onnx"))
    int8 = load_encoder(DenseConfig(model=INT8))
    assert isinstance(int8, OnnxDenseEncoder) and int8.quantized and int8.name == INT8
    assert cosines(int8.encode_passages(TEXTS), fp32.encode_passages(TEXTS)).min() > 0.98
    folder = dense_status(INT8).folder
    assert (folder / MODEL_FILE).stat().st_size < (dense_status("bundled:all-MiniLM-L6-v2").folder / MODEL_FILE
                                                   ).stat().st_size / 3
    man = json.loads((folder / MANIFEST).read_text())
    assert man["quantized"] and man["model"] == INT8 and man["max_length"] == 256 and man["versions"]["onnxruntime"]
    assert {s["path"].rsplit("/", 1)[-1] for s in man["sources"]} >= {"model.safetensors", "tokenizer.json"}


def test_runtime_choice_without_exports(unbuilt):
    assert choose_runtime(DenseConfig())[0] == "torch"  # auto
    assert choose_runtime(DenseConfig(runtime="torch"))[0] == "torch"
    with pytest.raises(EncoderError, match="medr2 build-runtime"):
        load_encoder(DenseConfig(runtime="onnx"))
    with pytest.raises(EncoderError, match="medr2 build-runtime"):
        load_encoder(DenseConfig(model=INT8))  # exists only as an export: never a silent fp32 fallback
    with pytest.raises(EncoderError, match="only on ONNX Runtime"):
        load_encoder(DenseConfig(model=INT8, runtime="torch"))
    with pytest.raises(EncoderError, match="no ONNX export"):
        load_encoder(DenseConfig(model="some/other-model", runtime="onnx"))
    assert runtime_root() == unbuilt / "runtime"


def test_runtime_choice_with_exports_and_a_stale_one(built, tmp_path, monkeypatch):
    assert choose_runtime(DenseConfig())[0] == "onnx"
    assert choose_runtime(DenseConfig(runtime="torch"))[0] == "torch"
    # a copy of the fp32 export whose manifest records another source file: stale
    home = tmp_path / "stale-home"
    src = dense_status("bundled:all-MiniLM-L6-v2").folder
    dst = home / "runtime" / src.name
    dst.mkdir(parents=True)
    os.symlink(src / MODEL_FILE, dst / MODEL_FILE)
    man = json.loads((src / MANIFEST).read_text())
    man["sources"][-1]["size"] += 1  # model.safetensors "changed"
    (dst / MANIFEST).write_text(json.dumps(man))
    monkeypatch.setenv("MEDR2_HOME", str(home))
    status = dense_status("bundled:all-MiniLM-L6-v2")
    assert status.state == "stale" and "model.safetensors changed" in status.reason
    assert choose_runtime(DenseConfig())[0] == "torch"
    with pytest.raises(EncoderError, match="stale.*medr2 build-runtime"):
        load_encoder(DenseConfig(runtime="onnx"))
    # the same bytes at another path stay current (the sha256 decides, not the path)
    man["sources"][-1]["size"] -= 1
    man["sources"][-1]["path"] = "/elsewhere/model.safetensors"
    (dst / MANIFEST).write_text(json.dumps(man))
    assert dense_status("bundled:all-MiniLM-L6-v2").current
    assert check(dst, []).state == "stale"  # built from other source files


def test_build_is_idempotent(built):
    from medr2.index.onnx_export import build_dense_runtime

    lines = []
    assert build_dense_runtime(log=lines.append) == {"all-minilm-l6-v2": "up to date",
                                                     "all-minilm-l6-v2-int8": "up to date"}
    assert lines == []


def test_thread_budget_without_torch(monkeypatch):
    monkeypatch.setenv("MEDR2_THREADS", "3")
    assert thread_budget() == 3
    monkeypatch.delenv("MEDR2_THREADS")
    assert thread_budget() >= 1


def test_int8_index_keeps_its_encoder(built, tmp_path):
    cfg = Config()
    cfg.dense.model = INT8
    tiny_index(tmp_path / "i8", cfg)
    with Index.open(tmp_path / "i8") as idx:  # no config: the index's own encoder
        assert idx.config.dense.model == INT8
        assert isinstance(idx.encoder, OnnxDenseEncoder) and idx.encoder.quantized
        from medr2.search.hybrid import HybridSearcher
        from medr2.search.rerank import FusedOrder

        hits = HybridSearcher(idx, reranker=FusedOrder()).search("when to stop metformin", k=1).hits
        assert hits[0].title == "Metformin in kidney disease"
    fp32 = Config()
    fp32.dense.model = "bundled:all-MiniLM-L6-v2"
    with pytest.raises(IndexError_, match="dense.model"):
        Index.open(tmp_path / "i8", fp32)
    # and an fp32 index refuses the int8 encoder
    tiny_index(tmp_path / "f32", Config())
    with pytest.raises(IndexError_, match="dense.model"):
        Index.open(tmp_path / "f32", cfg)


def test_search_with_the_runtime_built_never_imports_torch(built, tmp_path):
    tiny_index(tmp_path / "idx")
    script = (
        "import sys\n"
        "from medr2.cli import main\n"
        "try:\n"
        "    main(['search', 'when to stop metformin in kidney disease', '--index', sys.argv[1], '--k', '2'],\n"
        "         standalone_mode=False)\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "heavy = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]\n"
        "print('HEAVY', heavy, 'ORT', 'onnxruntime' in sys.modules)\n"
    )
    env = {**os.environ, "MEDR2_HOME": str(built)}
    p = subprocess.run([sys.executable, "-c", script, str(tmp_path / "idx")], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "relevance=" in p.stdout  # the reranker ran
    assert p.stdout.strip().splitlines()[-1] == "HEAVY [] ORT True"
