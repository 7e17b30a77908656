"""The bundled demo corpus: every sample question finds its expected evidence."""

import json

import pytest

from medr2.demo import CORPUS, questions, run_demo
from medr2.index.index import Index
from medr2.ingest.pipeline import ingest
from medr2.search.hybrid import HybridSearcher

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_index(tmp_path_factory, encoder):
    idx = Index.open(tmp_path_factory.mktemp("demo") / "index", create=True, writable=True)
    report = ingest(idx, [CORPUS], progress=False)
    assert report.status == "ok", report.to_dict()
    yield idx
    idx.close()


def test_demo_corpus_covers_every_source_type_and_design(demo_index):
    st = demo_index.stats()
    assert set(st["by_source_type"]) == {"guideline", "paper", "entry", "book"}
    metas = [json.loads(m) for (m,) in demo_index.store.db.execute("SELECT meta_json FROM documents")]
    designs = {t for meta in metas for t in meta["publication_types"]}
    assert {"Meta-Analysis", "Randomized Controlled Trial", "Cohort Study", "Case-Control Study", "Case Reports",
            "Expert Opinion", "Practice Guideline", "Encyclopedia", "Textbook"} <= designs
    assert all(meta["extra"]["illustrative"] is True for meta in metas)


KNOWN_MISSES = {
    # "how fast" needs the prognosis reformulation of the Med-R2 pipeline (rate per year, long-term
    # outcomes); plain hybrid search ranks the meta-analysis's rate sentence below the top 10.
    "How fast does eGFR decline in people with type 2 diabetes and chronic kidney disease?",
}


def _case(q):
    marks = [pytest.mark.xfail(strict=True, reason="needs EBM reformulation")] if q["question"] in KNOWN_MISSES else []
    return pytest.param(q, marks=marks, id=q["question"][:40])


@pytest.mark.parametrize("q", [_case(q) for q in questions()])
def test_each_sample_question_finds_its_expected_evidence(demo_index, q):
    hits = HybridSearcher(demo_index).search(q["question"], k=10).hits
    assert any(h.doc_id in q["expected_doc_ids"] for h in hits[:3])
    assert any(p.lower() in h.text.lower() for h in hits for p in q["expected_phrases"])


def test_contradicting_statements_at_different_evidence_levels_are_both_retrievable(demo_index):
    s = HybridSearcher(demo_index)
    hits = s.search("stop metformin when eGFR falls below 60", k=10).hits
    docs = {h.doc_id for h in hits}
    assert "demo:opinion-metformin-egfr" in docs and "demo:guideline-t2d-ckd" in docs


def test_run_demo_end_to_end(tmp_path, encoder, capsys):
    assert run_demo(tmp_path / "idx", k=2) == 0
    out = capsys.readouterr().out
    assert "not clinical advice" in out and out.count("Q: ") == len(questions())
    assert run_demo(tmp_path / "idx", k=1, llm="none") == 0  # second run reuses the index, then answers
    out = capsys.readouterr().out
    assert "0 passages added" in out
    assert out.count("Answer (medr2, ") == len(questions()) and "Citations:" in out


@pytest.mark.parametrize("q", questions(), ids=lambda q: q["question"][:40])
def test_medr2_formulation_and_appraisal_put_the_expected_evidence_in_context(demo_index_dir, q):
    """Offline formulation + fine appraisal (no LLM): the context holds the expected evidence,
    including the question plain hybrid search misses (KNOWN_MISSES)."""
    from medr2.pipelines import Engine, Pipeline

    e = Engine.open(demo_index_dir, generator="none", scorer="none")
    try:
        res = Pipeline(e, "medr2").run(q["question"])
    finally:
        e.close()
    ctx = [r for r in res.evidence if r.kept]
    assert any(r.doc_id in q["expected_doc_ids"] for r in ctx[:5])
    assert any(p.lower() in r.text.lower() for r in ctx for p in q["expected_phrases"])
    assert res.citations and not res.insufficient
