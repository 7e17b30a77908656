"""Ingest, search, remove and re-ingest on samples of the real corpora in ../shared/data."""

import json

import pytest
from conftest import shared, small_config

from medr2.index.index import Index
from medr2.ingest.pipeline import ingest
from medr2.search.hybrid import Filters, HybridSearcher

pytestmark = pytest.mark.slow


def _head(src, dst, n):
    with src.open(encoding="utf-8") as fh, dst.open("w", encoding="utf-8") as out:
        for i, line in enumerate(fh):
            if i >= n:
                break
            out.write(line)
    return dst


@pytest.fixture(scope="module")
def real(tmp_path_factory, encoder):
    ngc = shared("corpora/guidelines/ngc_summaries.jsonl")
    stax = shared("corpora/textbooks/microbiology.jsonl")
    pq = shared("benchmarks/pubmedqa/ori_pqal.json")
    mq = shared("corpora/medquad/medquad.jsonl")
    mp = shared("corpora/encyclopedia/medline_health_topics_en.csv")
    root = tmp_path_factory.mktemp("real")
    corpus = root / "corpus"
    corpus.mkdir()
    _head(ngc, corpus / "ngc.jsonl", 2)
    _head(stax, corpus / "microbiology.jsonl", 4)
    raw = json.loads(pq.read_text())
    sample = dict(list(raw.items())[:40])
    (corpus / "ori_pqal.json").write_text(json.dumps(sample))
    with mq.open(encoding="utf-8") as fh, (corpus / "medquad.jsonl").open("w", encoding="utf-8") as out:
        kept = 0
        for line in fh:  # 30 answered questions plus the unanswered ones between them
            out.write(line)
            kept += bool(json.loads(line).get("answer"))
            if kept >= 30:
                break
    _head(mp, corpus / "medlineplus.csv", 41)
    idx = Index.open(root / "index", small_config(batch_passages=256), create=True, writable=True)
    report = ingest(idx, [corpus], progress=False)
    yield idx, report, corpus, sample
    idx.close()


def test_all_formats_ingested_with_source_ids(real):
    idx, report, _, sample = real
    assert report.status == "ok", report.to_dict()
    st = idx.stats()
    assert set(st["by_source_type"]) == {"guideline", "book", "paper", "entry"}
    prefixes = {r[0].split(":")[0] for r in idx.store.db.execute("SELECT doc_id FROM documents")}
    assert prefixes == {"ngc", "openstax", "pmid", "medquad", "medlineplus"}
    assert st["by_source_type"]["paper"]["documents"] == len(sample)
    # NGC boilerplate was removed, knowledge kept
    doc = idx.store.get_document("ngc:2052")
    heads = [h for h, _ in doc.walk()]
    assert ("Recommendations", "Major Recommendations") in heads
    assert not any(h[-1] in ("Copyright Statement", "NGC Disclaimer") for h in heads)
    assert all(50 <= len(p.text) for p in idx.store.doc_passages("ngc:2052"))


def test_pubmedqa_questions_find_their_abstracts(real):
    idx, _, _, sample = real
    s = HybridSearcher(idx)
    found = 0
    for pmid, rec in sample.items():
        hits = s.search(rec["QUESTION"], k=3).hits
        found += any(h.doc_id == f"pmid:{pmid}" for h in hits)
    assert found / len(sample) >= 0.9


def test_heading_paths_of_real_hits(real):
    idx, _, _, _ = real
    hits = HybridSearcher(idx).search("thymectomy myasthenia gravis recommendation", k=5,
                                      filters=Filters(source_types=["guideline"])).hits
    assert hits[0].doc_id == "ngc:2052"
    assert hits[0].heading_path[0] in ("Recommendations", "Evidence Supporting the Recommendations", "Scope",
                                       "General", "Benefits/Harms of Implementing the Guideline Recommendations")
    hits = HybridSearcher(idx).search("bacteria microscopy", k=5, filters=Filters(source_types=["book"])).hits
    assert hits and hits[0].heading_path[0] == "Microbiology"


def test_remove_and_reingest_real_documents(real):
    idx, _, corpus, sample = real
    pmid, rec = next(iter(sample.items()))
    n = len(idx.store.doc_passages(f"pmid:{pmid}"))
    assert n >= len(rec["CONTEXTS"])  # a long context may take two passages
    assert idx.remove_documents([f"pmid:{pmid}"]) == n
    hits = HybridSearcher(idx).search(rec["QUESTION"], k=10).hits
    assert all(h.doc_id != f"pmid:{pmid}" for h in hits)
    # unchanged files stay a no-op; --force brings the removed document back
    assert ingest(idx, [corpus], progress=False).passages_added == 0
    again = ingest(idx, [corpus], force=True, progress=False)
    assert again.documents_added == 1 and again.passages_added == n
    assert HybridSearcher(idx).search(rec["QUESTION"], k=3).hits[0].doc_id == f"pmid:{pmid}"


def test_chinese_samples_search_with_jieba(tmp_path, encoder):
    src = shared("corpora/mixed_samples/Medical_Guideline_zh_sampled.json")
    pairs = json.loads(src.read_text(encoding="utf-8"))[:20]
    recs = [{"id": f"zh{i}", "title": q[:30], "text": a} for i, (q, a) in enumerate(pairs)]
    (tmp_path / "zh.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs), encoding="utf-8")
    idx = Index.open(tmp_path / "i", small_config(), create=True, writable=True)
    try:
        ingest(idx, [tmp_path / "zh.jsonl"], progress=False)
        assert idx.stats()["languages"].get("zh", 0) > 0
        q = recs[3]["text"][:40]
        terms = idx.tokenizer.tokens(q, "zh")
        sparse = idx.search_sparse(terms, 3)
        top = idx.store.passages([sparse[0][0]])[sparse[0][0]]
        assert top["doc_id"] == "jsonl:zh3"
        hits = HybridSearcher(idx).search(q, k=3, filters=Filters(languages=["zh"])).hits
        assert hits and all(h.language == "zh" for h in hits)
    finally:
        idx.close()
