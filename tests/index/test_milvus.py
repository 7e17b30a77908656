"""The Milvus backend (Milvus Lite, a real embedded Milvus) against the embedded index.

Same data and parameters must give the same results up to ties: the same dense top-k with the
same cosine scores, the same BM25 scores (medr2 feeds its own tokens to Milvus's BM25), the
same filters, the same RRF order when Milvus fuses.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import small_config
from helpers import make_mixed_folder

from medr2.store.layout import BackendError, read_spec
from medr2.index.index import Index
from medr2.index.milvus import PENDING, encode_terms, filter_expr
from medr2.ingest.pipeline import ingest
from medr2.search.hybrid import Filters, HybridSearcher
from medr2.search.rerank import FusedOrder

pytestmark = pytest.mark.slow

QUERIES = ["stop metformin below eGFR 30 lactic acidosis", "inhaled corticosteroids for persistent asthma",
           "allopurinol urate lowering therapy gout", "statin after ischaemic stroke trial", "oral iron for anaemia",
           "therapy", "influenza vaccination older adults"]


def _same_up_to_ties(a: list[tuple[int, float]], b: list[tuple[int, float]], tol: float = 1e-4) -> None:
    """Equal score lists, and equal ids wherever the score is not tied with a neighbour."""
    assert len(a) == len(b)
    assert [s for _, s in a] == pytest.approx([s for _, s in b], abs=tol)
    scores = [s for _, s in a]
    for n, ((ia, sa), (ib, _)) in enumerate(zip(a, b)):
        tied = any(abs(sa - scores[m]) <= tol for m in (n - 1, n + 1) if 0 <= m < len(scores))
        if not tied:
            assert ia == ib


def test_terms_encoding_is_ascii_and_unambiguous():
    assert encode_terms(["metformin", "2"]) == "metformin 2"
    enc = encode_terms(["糖尿病", "zxab", "a_b"]).split()
    assert all(t.isascii() and t.isalnum() for t in enc)
    assert len(set(enc)) == 3 and "zxab" not in enc  # a word that looks like an encoding is encoded too
    assert filter_expr(["paper"], 2010, None, ["en"]) == 'source_type in ["paper"] and language in ["en"] and year >= 2010'
    assert filter_expr() == ""


@pytest.mark.parametrize("query", QUERIES)
def test_dense_and_bm25_equal_the_embedded_index(mixed_index, mixed_milvus_index, query):
    emb, mil = mixed_index[0], mixed_milvus_index[0]
    # the same passages got the same row ids
    assert emb.store.passages(range(1, 400)).keys() == mil.store.passages(range(1, 400)).keys()
    q = emb.encoder.encode_query(query)
    _same_up_to_ties(emb.search_dense(q, 10), mil.search_dense(q, 10))
    terms = emb.tokenizer.tokens(query)
    _same_up_to_ties(emb.search_sparse(terms, 10), mil.search_sparse(terms, 10, text=query))


@pytest.mark.parametrize("filters", [Filters(source_types=["paper"]), Filters(year_min=2010),
                                     Filters(languages=["zh"]), Filters(source_types=["guideline"], year_max=2030)])
def test_filters_equal_the_embedded_index(mixed_index, mixed_milvus_index, filters):
    emb, mil = mixed_index[0], mixed_milvus_index[0]
    for query in QUERIES[:3]:
        a = HybridSearcher(emb).search(query, k=5, filters=filters)
        b = HybridSearcher(mil).search(query, k=5, filters=filters)
        assert [h.passage_id for h in a.hits] == [h.passage_id for h in b.hits]


def test_rrf_fused_by_milvus_equals_local_rrf(mixed_index, mixed_milvus_index):
    emb, mil = mixed_index[0], mixed_milvus_index[0]
    for query in QUERIES:
        a = HybridSearcher(emb, reranker=FusedOrder()).search(query, k=8, fusion="rrf")
        b = HybridSearcher(mil, reranker=FusedOrder()).search(query, k=8, fusion="rrf")
        assert "fusion_ms" in b.timings_ms  # Milvus did the fusion
        _same_up_to_ties([(h.passage_id, h.scores["fused"]) for h in a.hits],
                         [(h.passage_id, h.scores["fused"]) for h in b.hits], tol=1e-6)


def test_stored_vectors_come_back_without_re_encoding(mixed_index, mixed_milvus_index):
    emb, mil = mixed_index[0], mixed_milvus_index[0]
    ids = sorted(emb.store.passages(range(1, 30)))[:7]
    assert np.allclose(emb.vectors_for(ids), mil.vectors_for(ids), atol=1e-6)


def test_killed_writer_leaves_nothing_visible(tmp_path, encoder):
    """Rows upserted but never committed and deletes recorded but never applied are finished
    when the index is next opened for writing."""
    folder = make_mixed_folder(tmp_path / "c")
    cfg = small_config()
    cfg.index.backend = "milvus"
    with Index.open(tmp_path / "i", cfg, create=True, writable=True) as idx:
        ingest(idx, [folder], progress=False)
        n = idx.mv.count()
        top = idx.store.next_rowid()
        # a killed commit: rows in Milvus above the store's highest row id
        vec = np.ones((2, idx.encoder.dim), dtype=np.float32) / np.sqrt(idx.encoder.dim)
        idx.mv.upsert(np.array([top, top + 1]), vec, ["metformin", "metformin"], None,
                      [("paper", "en", 2020)] * 2)
        # a killed delete: the store removed a document, Milvus was never told
        doomed = sorted(r for r, p in idx.store.passages(range(1, top)).items() if p["doc_id"] == "test:metformin-ckd")
        with idx.store.transaction():
            idx.store.delete_documents(["test:metformin-ckd"])
            idx._removing(doomed)
        assert idx.mv.count() == n + 2
    with Index.open(tmp_path / "i", writable=True) as again:
        assert json.loads(again.store.get_meta(PENDING)) == []
        assert again.mv.count() == n - len(doomed)
        hits = again.search_sparse(again.tokenizer.tokens("metformin"), 10)
        assert hits == []


def test_an_index_keeps_its_backend(tmp_path, encoder):
    folder = make_mixed_folder(tmp_path / "c")
    cfg = small_config()
    cfg.index.backend = "milvus"
    with Index.open(tmp_path / "i", cfg, create=True, writable=True):
        pass
    assert read_spec(tmp_path / "i")["vectors"] == "milvus"
    wrong = small_config()
    wrong.index.backend = "embedded"
    with pytest.raises(BackendError, match="index.backend='milvus'"):
        Index.open(tmp_path / "i", wrong, writable=True)
    assert folder.exists()


def _cli(*args, check=True, ok=(0,)):
    r = subprocess.run([sys.executable, "-m", "medr2.cli", *args], capture_output=True, text=True)
    if check:
        assert r.returncode in ok, r.stderr
    return r


def test_cli_ingest_search_stats_and_migrate(tmp_path, encoder):
    folder = make_mixed_folder(tmp_path / "c")
    for bad in ("corrupt.pdf", "latin1.txt", "empty.md", "image.bin"):
        (folder / bad).unlink()
    emb, mil = tmp_path / "emb", tmp_path / "mil"
    _cli("ingest", str(folder), "--index", str(emb), "--no-progress", ok=(0, 3))  # 3: a bad JSONL record
    _cli("ingest", str(folder), "--index", str(mil), "--backend", "milvus", "--no-progress", ok=(0, 3))
    assert (mil / "milvus.db").exists() and not (mil / "segments").exists()
    # search reads the backend from the directory
    a = json.loads(_cli("search", "metformin eGFR", "--index", str(emb), "--json").stdout)
    b = json.loads(_cli("search", "metformin eGFR", "--index", str(mil), "--json").stdout)
    assert [h["passage_id"] for h in a["hits"]] == [h["passage_id"] for h in b["hits"]]
    st = json.loads(_cli("index", "stats", "--index", str(mil), "--json").stdout)
    assert st["milvus"]["rows"] == st["passages"] > 0
    bad = _cli("ingest", str(folder), "--index", str(mil), "--backend", "embedded", check=False)
    assert bad.returncode == 2 and "index.backend='milvus'" in bad.stderr
    # migration: no re-embedding, same results, source untouched
    before = sorted(p.name for p in emb.rglob("*"))
    out = tmp_path / "migrated"
    r = _cli("index", "migrate", "--from", str(emb), "--to", f"milvus-lite:{tmp_path / 'm.db'}", "--out", str(out))
    assert "migrated" in r.stdout
    assert sorted(p.name for p in emb.rglob("*")) == before
    c = json.loads(_cli("search", "metformin eGFR", "--index", str(out), "--json").stdout)
    assert [h["passage_id"] for h in c["hits"]] == [h["passage_id"] for h in a["hits"]]
    again = _cli("index", "migrate", "--from", str(emb), "--to", "milvus-lite:x.db", "--out", str(out), check=False)
    assert again.returncode == 2 and "not empty" in again.stderr


def test_migration_does_not_load_the_encoder(tmp_path, encoder, monkeypatch):
    from medr2.index import index as index_mod
    from medr2.index.migrate import migrate_to_milvus

    folder = make_mixed_folder(tmp_path / "c")
    with Index.open(tmp_path / "emb", small_config(), create=True, writable=True) as idx:
        ingest(idx, [folder], progress=False)
        n_live = idx.store.counts()["passages"]

    def no_encoder(*a, **k):
        raise AssertionError("the migration must not embed")

    monkeypatch.setattr(index_mod, "load_encoder", no_encoder)
    assert migrate_to_milvus(tmp_path / "emb", f"milvus-lite:{tmp_path / 'm.db'}", tmp_path / "out") == n_live


def test_builtin_english_analyzer(tmp_path, encoder):
    folder = make_mixed_folder(tmp_path / "c")
    cfg = small_config()
    cfg.index.backend = "milvus"
    cfg.index.analyzer = "english"
    with Index.open(tmp_path / "i", cfg, create=True, writable=True) as idx:
        ingest(idx, [folder], progress=False)
        hits = idx.search_sparse([], 5, text="Metformin and the eGFR")
        docs = {idx.store.passages([i])[i]["doc_id"] for i, _ in hits}
        assert "test:metformin-ckd" in docs


def test_milvus_vectors_with_a_postgres_store(tmp_path, encoder, pg_uri, monkeypatch, mixed_index):
    """The full scale-out pair: vectors and terms in Milvus, documents and passages in PostgreSQL."""
    from psycopg.conninfo import conninfo_to_dict

    from medr2.index.store import PGStore
    from medr2.store.postgres import drop_namespace

    password = conninfo_to_dict(pg_uri).get("password")
    if password:  # backend.json keeps no password: reopening reads PGPASSWORD
        monkeypatch.setenv("PGPASSWORD", str(password))
    cfg = small_config()
    cfg.index.backend, cfg.index.store, cfg.index.store_uri = "milvus", "postgres", pg_uri
    path = tmp_path / "i"
    folder = make_mixed_folder(tmp_path / "c")
    try:
        with Index.open(path, cfg, create=True, writable=True) as idx:
            assert isinstance(idx.store, PGStore)
            ingest(idx, [folder], progress=False)
        spec = read_spec(path)
        assert spec["vectors"] == "milvus" and spec["store"] == "postgres" and not (path / "store.sqlite").exists()
        emb = mixed_index[0]
        with Index.open(path, writable=True) as idx:
            for query in QUERIES[:4]:
                a = HybridSearcher(emb).search(query, k=5)
                b = HybridSearcher(idx).search(query, k=5)
                assert [h.passage_id for h in a.hits] == [h.passage_id for h in b.hits]
            assert idx.remove_documents(["test:metformin-ckd"]) > 0
            assert all(h.doc_id != "test:metformin-ckd"
                       for h in HybridSearcher(idx).search("metformin eGFR lactic acidosis", k=10).hits)
    finally:
        if (path / "backend.json").exists():
            drop_namespace(pg_uri, read_spec(path)["namespace"])


def test_a_milvus_server_uri_shared_by_processes(tmp_path, encoder):
    """The same code on a server URI (``milvus-lite server`` speaks the Milvus gRPC protocol, as
    a standalone or cluster Milvus does): ingest through http://, then two separate processes
    search the same collection at once."""
    import shutil as sh
    import socket

    exe = sh.which("milvus-lite") or str(Path(sys.executable).parent / "milvus-lite")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([exe, "server", "--data-dir", str(tmp_path / "server-data"), "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.3)
        folder = make_mixed_folder(tmp_path / "c")
        idx_dir = tmp_path / "idx"
        _cli("ingest", str(folder), "--index", str(idx_dir), "--uri", f"milvus://127.0.0.1:{port}", "--no-progress",
             ok=(0, 3))
        assert read_spec(idx_dir)["milvus_uri"] == f"http://127.0.0.1:{port}"
        assert not (idx_dir / "milvus.db").exists()
        cmd = [sys.executable, "-m", "medr2.cli", "search", "metformin eGFR", "--index", str(idx_dir), "--json"]
        procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert all(p.returncode == 0 for p in procs), [e for _, e in outs]
        lists = [[h["passage_id"] for h in json.loads(o)["hits"]] for o, _ in outs]
        assert lists[0] == lists[1] and lists[0]
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_ask_and_search_fuse_alike_on_milvus(mixed_index, mixed_milvus_index):
    """One fusion path: a pipeline's retrieval and `search` give the same fused order on a Milvus
    index (RRF fused by the server in both), and the same order as the embedded index."""
    from medr2.pipelines import Engine, Pipeline

    for index in (mixed_milvus_index[0], mixed_index[0]):
        cfg = index.config.model_copy(deep=True)
        cfg.fusion.method = "rrf"
        cfg.rerank.cross_encoder = ""  # the fused order itself (the reranker reorders it alike in both)
        cfg.formulate.terminologies = []
        engine = Engine(index, cfg, generator=None, scorer=None)
        k = cfg.appraise.coarse_k
        for query in QUERIES[:4]:
            searched = engine.searcher.search(query, k=k)
            assert ("fusion_ms" in searched.timings_ms) == (index is mixed_milvus_index[0])
            asked = Pipeline(engine, "vanilla_rag").run(query)
            assert asked.rounds[0].coarse_ids == [h.passage_id for h in searched.hits]
            pool = engine.retrieve(query, k)
            assert [h.scores["fused"] for h in pool[:k]] == [h.scores["fused"] for h in searched.hits]
