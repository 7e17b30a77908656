"""Sentence focus (issue 35 §2): the prompt shows a passage's best sentences, the citation still
points at the whole passage, and the evidence table keeps the full text beside what was shown."""

import numpy as np
import pytest

from medr2.apply.context import pack_rows
from medr2.apply.focus import SentenceFocus, join_kept, overlap_scores
from medr2.schema import EvidenceRow

PASSAGE = ("Chronic kidney disease is common in type 2 diabetes. Trials enrolled adults from 28 countries. "
           "In the control arms, eGFR declined by an average of 4.1 mL/min/1.73 m2 per year. "
           "Most trials were sponsored by manufacturers. Follow-up was short.")


def test_overlap_focus_keeps_the_sentences_that_answer_in_order():
    f = SentenceFocus(keep=2)
    sents, kept = f.choose("How fast does eGFR decline per year in diabetes?", PASSAGE)
    assert len(sents) == 5 and kept == [0, 2]
    text = f.text("How fast does eGFR decline per year in diabetes?", PASSAGE)
    assert text.startswith("Chronic kidney") and "declined by an average" in text and "manufacturers" not in text
    assert text.endswith("...") and text.count("...") == 2  # the gaps are marked
    assert f.text("anything", "One sentence only. And a second.") == "One sentence only. And a second."


def test_a_scorer_decides_when_given_and_ties_keep_the_earlier_sentence():
    calls = []

    def scorer(q, sents):
        calls.append(len(sents))
        return np.array([0.0, 0.0, 0.0, 5.0, 0.0])

    f = SentenceFocus(keep=2, scorer=scorer)
    assert f.method == "relevance model"
    assert f.choose("q", PASSAGE)[1] == [0, 3] and calls == [5]
    with pytest.raises(ValueError, match="focus_sentences"):
        SentenceFocus(keep=0)


def test_a_scorer_that_cannot_read_the_question_leaves_it_to_term_overlap():
    f = SentenceFocus(keep=2, scorer=lambda q, sents: None)  # e.g. a Chinese question, an English model
    q = "How fast does eGFR decline per year in diabetes?"
    assert f.choose(q, PASSAGE)[1] == SentenceFocus(keep=2).choose(q, PASSAGE)[1] == [0, 2]


def test_overlap_scores_and_join():
    assert overlap_scores("", ["a b c"]).tolist() == [0.0]
    assert overlap_scores("declines of eGFR", ["eGFR declined."])[0] == 1.0  # prefix match counts
    assert join_kept(["A.", "B.", "C."], [1]) == "... B. ..."
    assert join_kept(["A.", "B.", "C."], [0, 1, 2]) == "A. B. C."


def test_pack_rows_counts_and_shows_the_focused_text_and_keeps_the_citation():
    rows = [EvidenceRow(passage_id="p1", doc_id="d1", text=PASSAGE, title="T"),
            EvidenceRow(passage_id="p2", doc_id="d2", text="Short passage.", title="U")]
    focused = SentenceFocus(keep=1).texts("eGFR decline per year", {r.passage_id: r.text for r in rows})
    assert set(focused) == {"p1"} and focused["p1"][1:] == (1, 5)
    seen = []
    items = pack_rows(rows, 1000, lambda t: seen.append(t) or len(t.split()), focused)
    assert [i.n for i in items] == [1, 2] and items[0].passage_id == "p1"
    assert items[0].text == focused["p1"][0] and "declined" in items[0].text and "manufacturers" not in items[0].text
    assert rows[0].text == PASSAGE and rows[0].focus == items[0].text  # the table keeps the full passage
    assert "focused: 1 of 5 sentences" in rows[0].reason and rows[1].focus is None
    assert focused["p1"][0] in seen and PASSAGE not in seen  # counted by what the prompt shows


@pytest.mark.slow
def test_the_pipeline_focuses_with_the_shipped_reranker(demo_index_dir):
    from medr2.config import Config
    from medr2.pipelines import Engine, Pipeline

    cfg = Config()
    cfg.apply.focus_sentences = 2
    e = Engine.open(demo_index_dir, cfg, generator="none", scorer="none")
    try:
        assert e.focus is not None and e.focus.method == "relevance model"
        res = Pipeline(e, "medr2").run("How fast does eGFR decline in people with type 2 diabetes and chronic kidney "
                                       "disease?")
    finally:
        e.close()
    kept = [r for r in res.evidence if r.kept]
    shortened = [r for r in kept if r.focus]
    assert shortened and all(len(r.focus) < len(r.text) and "focused: 2 of" in r.reason for r in shortened)
    assert any("declined by an average" in (r.focus or r.text) for r in kept)
    assert res.citations and set(res.citations) <= {r.passage_id for r in kept}  # citations name whole passages
