"""The coarse reranker scores only what its vocabulary reads (``rerank.max_unknown_share``): the
bundled English cross-encoder leaves a Chinese question in the fused order with no relevance, and a
Chinese passage under an English question in its fused position, unscored."""

import json

import pytest
from helpers import run_cli

from medr2.schema import Hit
from medr2.search.rerank import FusedOrder, MedR2Reranker, coarse_rerank, unread

EN = [("en-metformin", "Metformin is contraindicated when eGFR falls below 30 mL/min/1.73 m2."),
      ("zh-liver", "原发性肝癌的首选治疗是手术切除，不能切除者可行介入治疗。"),
      ("en-mito", "The mitochondrion is the site of oxidative phosphorylation."),
      ("en-dose", "Metformin dose should be reduced when eGFR is between 30 and 45.")]


def hits(rows=EN):
    return [Hit(passage_id=p, doc_id=p, text=t, score=1.0 / (i + 1)) for i, (p, t) in enumerate(rows)]


class Reversing(FusedOrder):
    """A fake model (plumbing only): reads ASCII, puts the last passage first, scores everything 0.5."""

    name = "reversing"

    def unknown_shares(self, texts):
        return [sum(not c.isascii() for c in t) / max(1, len(t)) for t in texts]

    def rerank(self, query, hs, top_n):
        for h in hs:
            h.scores["relevance"] = 0.5
        return list(reversed(hs))[:top_n]


def test_unreadable_passages_keep_their_fused_slot_and_the_rest_are_reordered_around_them():
    out, note = coarse_rerank(Reversing(), "metformin dose", hits(), 4, 0.2)
    assert [h.passage_id for h in out] == ["en-dose", "zh-liver", "en-mito", "en-metformin"]
    assert "relevance" not in out[1].scores and all(out[i].scores["relevance"] == 0.5 for i in (0, 2, 3))
    assert note.startswith("1 of 4 passages are in a script the coarse reranker (reversing) cannot read")
    # cut to 1, the unread passage is not among those returned: no note
    out, note = coarse_rerank(Reversing(), "metformin dose", hits(), 1, 0.2)
    assert [h.passage_id for h in out] == ["en-dose"] and note is None


class Dropping(Reversing):
    def rerank(self, query, hs, top_n):
        return hs[:1]


def test_a_reranker_that_loses_passages_is_a_clear_error():
    with pytest.raises(RuntimeError, match="returned 1 of the 3"):
        coarse_rerank(Dropping(), "metformin dose", hits(), 4, 0.2)


def test_an_unreadable_question_keeps_the_fused_order_unscored_and_one_reads_everything():
    stale = hits()
    stale[0].scores["relevance"] = 0.9  # from an earlier rerank with another phrasing
    out, note = coarse_rerank(Reversing(), "二甲双胍的剂量", stale, 3, 0.2)
    assert [h.passage_id for h in out] == ["en-metformin", "zh-liver", "en-mito"]
    assert all("relevance" not in h.scores for h in out) and "cannot read the question" in note
    out, note = coarse_rerank(Reversing(), "二甲双胍的剂量", hits(), 3, 1.0)  # the old behaviour
    assert note is None and out[0].passage_id == "en-dose" and out[0].scores["relevance"] == 0.5
    out, note = coarse_rerank(FusedOrder(), "二甲双胍的剂量", hits(), 2, 0.2)  # no vocabulary to ask
    assert note is None and [h.passage_id for h in out] == ["en-metformin", "zh-liver"]
    assert unread([0.2, 0.21], 0.2) == [False, True]


@pytest.fixture(scope="module")
def shipped():
    return MedR2Reranker("bundled:medr2-reranker")


def test_the_shipped_reranker_cannot_read_chinese_and_says_so(shipped):
    shares = shipped.unknown_shares(["Metformin dose in chronic kidney disease", "患者，男，45岁。反复上腹痛3年。"])
    assert shares[0] == 0.0 and shares[1] > 0.4
    out, note = coarse_rerank(shipped, "患者，男，45岁。反复上腹痛3年，最可能的诊断是", hits(), 4, 0.2)
    assert [h.passage_id for h in out] == [p for p, _ in EN] and "medr2-reranker" in note
    assert all(h.scores.get("relevance") is None for h in out)
    out, note = coarse_rerank(shipped, "metformin dose in kidney disease", hits(), 4, 0.2)
    zh = next(h for h in out if h.passage_id == "zh-liver")
    assert out.index(zh) == 1 and zh.scores.get("relevance") is None and note.startswith("1 of 4")
    scored = [h for h in out if h is not zh]
    assert scored[0].passage_id in ("en-dose", "en-metformin") and scored[-1].passage_id == "en-mito"
    assert scored[0].scores["relevance"] > 0.5 > scored[-1].scores["relevance"]


def test_search_and_ask_on_a_chinese_question_report_the_fused_order(tmp_path):
    docs = tmp_path / "zh.jsonl"
    docs.write_text("".join(json.dumps({"id": f"d{i}", "title": t, "text": x}, ensure_ascii=False) + "\n"
                            for i, (t, x) in enumerate([("肝癌", "原发性肝癌的首选治疗是手术切除。"),
                                                        ("胃溃疡", "消化性溃疡的治疗首选质子泵抑制剂，疗程4至8周。")])),
                    encoding="utf-8")
    idx = tmp_path / "idx"
    run_cli("ingest", docs, "--index", idx)
    out = json.loads(run_cli("search", "消化性溃疡首选什么药物治疗", "--index", idx, "--json").stdout)
    assert out["hits"] and all(h["scores"].get("relevance") is None for h in out["hits"])
    assert any("cannot read the question" in n for n in out["notes"])
    res = json.loads(run_cli("ask", "消化性溃疡首选什么药物治疗？", "--index", idx, "--llm", "none", "--json").stdout)
    assert any("cannot read the question" in n for n in res["notes"])
    assert res["evidence"] and all(r["relevance"] is None for r in res["evidence"])


def test_a_sentence_transformers_cross_encoder_measures_unknown_pieces_with_its_own_tokenizer():
    """CrossEncoderReranker (a user's sentence-transformers model) reads its model's tokenizer and
    length limit; here the bundled MiniLM tokenizer stands in for the model (none is offline)."""
    from types import SimpleNamespace

    from medr2.search.cross_encoder import tokenizer
    from medr2.search.rerank import CrossEncoderReranker

    ce = CrossEncoderReranker.__new__(CrossEncoderReranker)
    ce.name, ce.model = "st-model", SimpleNamespace(tokenizer=tokenizer(), max_seq_length=256)
    shares = ce.unknown_shares([EN[0][1], EN[1][1]])
    assert shares[0] == 0.0 and shares[1] > 0.5
    out, note = coarse_rerank(ce, "原发性肝癌的首选治疗", hits(), 2, 0.2)
    assert [h.passage_id for h in out] == ["en-metformin", "zh-liver"] and "relevance" not in out[0].scores
    assert note
