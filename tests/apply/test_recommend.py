"""Recommendation-level answers (issue 36): selection by relevance, near-duplicates, order by
strength, coverage of the question's parts, abstention, and the extractive answer's text."""

import numpy as np

from medr2.apply.answer import EvidenceItem
from medr2.apply.recommend import Recommender, near_duplicate, question_parts
from medr2.apply.recommend_answer import as_answer
from medr2.config import RecommendConfig

QUESTION = "Should quinine be used for muscle cramps, and what else can be tried?"
EV = [
    EvidenceItem(1, "p-quinine", "Muscle cramps", "guideline", 3,
                 "- Recommendation. Quinine derivatives should be avoided for routine treatment of cramps (Level A)."),
    EvidenceItem(2, "p-other", "Muscle cramps", "guideline", 3,
                 "- Naftidrofuryl, diltiazem and vitamin B complex may be considered for muscle cramps (Level C).\n"
                 "- Quinine derivatives should be avoided for the routine treatment of muscle cramps."),
    EvidenceItem(3, "p-gout", "Gout", "guideline", 3, "- Allopurinol should be offered for recurrent gout (1B)."),
]
# relevance by passage, as a cross-encoder would give it
REL = {"p-quinine": 0.9, "p-other": 0.6, "p-gout": 0.05}


def scorer_for(rel_by_text):
    def score(question, texts):
        return np.asarray([rel_by_text(t) for t in texts])
    return score


def by_passage(t):
    if "Allopurinol" in t:
        return REL["p-gout"]
    if "Naftidrofuryl" in t:
        return REL["p-other"]
    return REL["p-quinine"] if "(Level A)" in t else 0.85


def recommender(**kw):
    cfg = RecommendConfig(**{"min_relevance": 0.3, "keep_ratio": 0.5, "abstain_below": 0.2, "overlap_weight": 0.0,
                             "max_items": 5, "one_guideline": False, **kw})
    return Recommender(cfg, scorer_for(by_passage))


def test_question_parts():
    assert question_parts(QUESTION) == ["Should quinine be used for muscle cramps", "what else can be tried"]
    assert question_parts("Is X safe in pregnancy?") == ["Is X safe in pregnancy"]


def test_applicable_recommendations_are_chosen_deduplicated_and_ordered_by_strength():
    ra = recommender().answer(QUESTION, EV)
    assert ra.searched == 4 and not ra.insufficient
    # the unlabelled repeat of the quinine statement is a near-duplicate; gout is irrelevant
    assert [(r.passage_id, r.grade, r.strength) for r in ra.recommendations] == [
        ("p-quinine", "Level A", "strong"), ("p-other", "Level C", "weak")]
    assert ra.recommendations[0].direction == "against" and ra.recommendations[0].relevance == 0.9
    assert ra.answer.citations == ["p-quinine", "p-other"] and ra.answer.cited == [1, 2]
    assert ra.answer.method == "extractive-recommendations"
    lines = ra.answer.answer.splitlines()
    # the quote shows its grade as written, so the label adds the strength only
    assert lines[0].startswith("- [strong] Quinine derivatives should be avoided") and lines[0].endswith(
        "(Level A). [1]")
    assert ra.answer.recommendations == ra.recommendations


def test_overlap_weight_mixes_term_overlap_into_the_relevance():
    r = recommender(overlap_weight=0.5)
    cands = r.candidates(EV)
    ce = recommender().relevance(QUESTION, cands)
    mixed = r.relevance(QUESTION, cands)
    from medr2.apply.focus import overlap_scores
    ov = overlap_scores(QUESTION, [s.statement for _, s in cands])
    assert np.allclose(mixed, 0.5 * ce + 0.5 * ov)


def test_one_guideline_keeps_the_top_statement_s_guideline_only():
    ev = EV[:2] + [EvidenceItem(3, "p-x", "Other guideline", "guideline", 3,
                                "- Quinine should be avoided in cramps of pregnancy (Grade B).")]
    both = recommender(keep_ratio=0.0, min_relevance=0.01).answer(QUESTION, ev)
    one = recommender(keep_ratio=0.0, min_relevance=0.01, one_guideline=True).answer(QUESTION, ev)
    assert "Other guideline" in {x.title for x in both.recommendations}
    assert {x.title for x in one.recommendations} == {"Muscle cramps"}


def test_a_lower_ratio_floor_admits_more_and_max_items_caps():
    assert len(recommender(keep_ratio=0.0, min_relevance=0.01).answer(QUESTION, EV).recommendations) == 3
    assert len(recommender(keep_ratio=0.0, min_relevance=0.01, max_items=1).answer(QUESTION, EV).recommendations) == 1


def test_uncovered_parts_are_named():
    def score(question, texts):  # relevance to the quinine part only
        return np.asarray([by_passage(t) if "quinine" in question.lower() else 0.05 for t in texts])

    cfg = RecommendConfig(min_relevance=0.3, keep_ratio=0.5, abstain_below=0.2, overlap_weight=0.0, max_items=5)
    ra = Recommender(cfg, score).answer(QUESTION, EV)
    assert ra.uncovered == ["what else can be tried"]
    assert ra.answer.answer.endswith('These recommendations do not cover: "what else can be tried".')
    assert all(r.covers == ["Should quinine be used for muscle cramps"] for r in ra.recommendations)


def test_term_overlap_coverage_of_several_parts():
    r = Recommender(RecommendConfig(overlap_min_relevance=0.2, overlap_abstain_below=0.2, cover_share=0.5,
                                    keep_ratio=0.0, max_items=5))
    ra = r.answer("Should quinine be avoided, and is naftidrofuryl useful for cramps?", EV)
    assert {p for x in ra.recommendations for p in x.covers} == {"Should quinine be avoided",
                                                                 "is naftidrofuryl useful for cramps"}
    assert ra.uncovered == []


def with_relevance(rel):
    return [EvidenceItem(e.n, e.passage_id, e.title, e.source_type, e.level, e.text, relevance=rel) for e in EV]


def test_nothing_relevant_abstains_and_says_what_was_searched():
    # the best packed passage's relevance decides: 0.1 < abstain_below 0.2
    assert not recommender().answer(QUESTION, with_relevance(0.5)).insufficient
    ra = recommender().answer(QUESTION, with_relevance(0.1))
    assert ra.insufficient and ra.recommendations == []
    assert ra.answer.insufficient and ra.answer.citations == []
    assert "do not contain a guideline recommendation that applies" in ra.answer.answer
    assert "(4 recommendation(s) in 3 passage(s) were read)" in ra.answer.answer


def test_a_statement_close_to_the_question_overrides_a_low_passage_relevance():
    """The cross-encoder, trained on passages, scores some answerable guideline questions near 0;
    abstention then also needs no statement within abstain_dense_below in the embedding space."""
    def similarity(near):
        return lambda q, texts: np.asarray([near if "Quinine" in t else 0.1 for t in texts])
    low = with_relevance(0.1)
    r = Recommender(recommender(abstain_dense_below=0.6).c, scorer_for(by_passage), similarity=similarity(0.7))
    ra = r.answer(QUESTION, low)
    assert not ra.insufficient and ra.recommendations
    r = Recommender(recommender(abstain_dense_below=0.6).c, scorer_for(by_passage), similarity=similarity(0.5))
    assert r.answer(QUESTION, low).insufficient
    # without an encoder the passage relevance alone decides
    assert Recommender(recommender(abstain_dense_below=0.6).c, scorer_for(by_passage)).answer(QUESTION, low).insufficient
    assert r.best_similarity(QUESTION, r.candidates(low)) == 0.5


def test_the_generator_path_keeps_its_own_selection():
    c = RecommendConfig(min_relevance=0.2, keep_ratio=0.7, max_items=4, one_guideline=True,
                        llm_min_relevance=0.3, llm_keep_ratio=0.6, llm_max_items=2, llm_one_guideline=False)
    g = c.for_generator()
    assert (g.min_relevance, g.keep_ratio, g.max_items, g.one_guideline) == (0.3, 0.6, 2, False)
    assert (c.min_relevance, c.max_items) == (0.2, 4) and g.abstain_below == c.abstain_below


def test_evidence_without_recommendations_is_left_to_the_sentence_answer():
    ev = [EvidenceItem(1, "p", "Anatomy", "textbook", 5, "The femur is the longest bone of the body.")]
    assert recommender().answer("Which bone is longest?", ev).searched == 0


def test_term_overlap_without_a_cross_encoder_uses_its_own_floors():
    r = Recommender(RecommendConfig(overlap_min_relevance=0.5, overlap_abstain_below=0.4), scorer=None)
    ra = r.answer("Should quinine be avoided for cramps?", EV)
    assert ra.recommendations and all("uinine" in x.statement for x in ra.recommendations)
    assert r.answer("Which vaccine prevents shingles?", EV).insufficient


def test_list_header_grade_is_inherited_through_the_document():
    ev = [EvidenceItem(1, "p2", "PPH", "guideline", 3, "- Uterotonic agents should be first-line for atony.")]
    prev = {"p2": ["Postpartum hemorrhage.", "The following are based on consensus and expert opinion (Level C):"]}
    r = Recommender(RecommendConfig(overlap_weight=0.0), scorer_for(lambda t: 0.9), previous=lambda ids: {i: prev[i] for i in ids})
    (rec,) = r.answer("first-line treatment for uterine atony?", ev).recommendations
    assert (rec.grade, rec.strength) == ("Level C", "weak")


# one guideline's treatment section, as NGC summaries write it: a heading line inside the text
CDI = [
    EvidenceItem(1, "p-mild", "CDI guideline", "guideline", 3,
                 "- Testing for cure should not be done.\nManagement of Mild-to-Moderate CDI\n"
                 "- Patients should be treated with metronidazole 500 mg orally for 10 days."),
    EvidenceItem(2, "p-severe", "CDI guideline", "guideline", 3,
                 "- Patients should be treated with vancomycin 125 mg four times daily for 10 days."),
]
CDI_BEFORE = {"p-mild": ["Diagnosis", "- Only stools from patients with diarrhea should be tested."],
              "p-severe": ["Management of Severe CDI"]}


def cdi_recommender(**kw):
    cfg = RecommendConfig(**{"overlap_weight": 1.0, "min_relevance": 0.0, "keep_ratio": 0.0, "max_items": 5, **kw})
    return Recommender(cfg, scorer_for(lambda t: 0.5), previous=lambda ids: {i: CDI_BEFORE[i] for i in ids})


def test_statements_carry_the_section_heading_they_sit_under():
    cands = cdi_recommender().candidates(CDI)
    # the heading inside the passage applies to the statement after it, and is no part of the one
    # before it (that one sits under the heading before the passage)
    assert [(s.statement, s.section) for _, s in cands] == [
        ("Testing for cure should not be done.", "Diagnosis"),
        ("Patients should be treated with metronidazole 500 mg orally for 10 days.", "Management of Mild-to-Moderate CDI"),
        ("Patients should be treated with vancomycin 125 mg four times daily for 10 days.", "Management of Severe CDI")]


def test_the_section_heading_decides_between_statements_that_tie_on_their_own_words():
    q = "How should severe CDI be treated?"
    ra = cdi_recommender(max_items=1).answer(q, CDI)
    (rec,) = ra.recommendations
    assert "vancomycin" in rec.statement and rec.section == "Management of Severe CDI"
    # without the headings the two treatment statements tie and the first one read wins
    (plain,) = cdi_recommender(max_items=1, section_headings=False).answer(q, CDI).recommendations
    assert "metronidazole" in plain.statement and plain.section is None


def test_outside_guidelines_only_graded_statements_count():
    ev = [EvidenceItem(1, "op", "Opinion", "paper", 9, "I believe metformin should be stopped below an eGFR of 45."),
          EvidenceItem(2, "rct", "Trial", "paper", 2, "Metformin should be continued to an eGFR of 30 (Grade B).")]
    assert [s.statement[:20] for _, s in recommender().candidates(ev)] == ["Metformin should be "]


def test_near_duplicate():
    assert near_duplicate("Quinine should be avoided for routine cramps.",
                          "Quinine derivatives should be avoided for routine treatment of cramps.", 0.8)
    assert not near_duplicate("Offer metformin.", "Avoid quinine.", 0.5)
    # the same words with other numbers say something else; a grade tag's digits are no quantity
    assert not near_duplicate("Breast milk may be ingested up to 4 h before elective surgery.",
                              "Breast milk may be ingested up to 6 h before elective surgery.", 0.8)
    assert near_duplicate("Clear liquids may be ingested up to 2 h before surgery (1A).",
                          "Clear liquids may be ingested for up to 2 h before surgery (Level B).", 0.8)


def test_fill_parts_passes_over_a_repeat_to_the_next_statement_for_the_part():
    # the best statement for the second part repeats the chosen one; the next best is taken
    ev = [EvidenceItem(1, "p-adult", "Fasting", "guideline", 3,
                       "- Adults may be given a light meal up to 6 h before elective procedures (Level A).\n"
                       "- Infants may be given a light meal up to 6 h before elective procedures.\n"
                       "- Infants may be given breast milk up to 4 h before elective procedures.")]
    q = "How long before elective procedures must an adult stop a light meal, and what about infants?"

    def score(question, texts):
        if question.startswith("what about"):
            return np.asarray([0.9 if "Infants may be given a light" in t else 0.6 if "breast milk" in t else 0.0
                               for t in texts])
        return np.asarray([0.9 if "(Level A)" in t else 0.1 for t in texts])
    cfg = RecommendConfig(min_relevance=0.3, keep_ratio=0.5, abstain_below=0.2, overlap_weight=0.0, max_items=1,
                          one_guideline=True, fill_parts=True, fill_min_relevance=0.5)
    ra = Recommender(cfg, score).answer(q, ev)
    assert [r.statement[:22] for r in ra.recommendations] == ["Adults may be given a ", "Infants may be given b"]


def test_insufficient_answer_lists_every_part_as_uncovered():
    ra = recommender().answer(QUESTION, with_relevance(0.01))
    assert as_answer(ra, 3).uncovered == question_parts(QUESTION)


def test_look_alike_statements_in_one_passage_each_get_their_own_section():
    ev = [EvidenceItem(1, "p", "CDI guideline", "guideline", 3,
                       "- Patients should be treated with metronidazole 500 mg for 10 days.\nSevere CDI\n"
                       "- Patients should be treated with vancomycin 125 mg for 10 days.")]
    r = Recommender(RecommendConfig(), scorer_for(lambda t: 0.5), previous=lambda ids: {i: ["Mild CDI"] for i in ids})
    cands = r.candidates(ev)
    # the first sits under the heading before its passage, the second under the one inside it
    assert [(s.statement.split()[5], s.section) for _, s in cands] == [("metronidazole", "Mild CDI"),
                                                                       ("vancomycin", "Severe CDI")]


def test_a_heading_ends_the_bullet_above_it_and_a_wrapped_line_is_no_heading():
    from medr2.appraise.recommendations import extract

    text = ("- Vaginal nitric oxide donors should not be used (Level B).\nNon-pharmacological Methods\n"
            "Healthcare professionals should offer membrane sweeping (Level A).")
    a, b = extract(text)
    assert a.statement == "Vaginal nitric oxide donors should not be used (Level B)." and a.section is None
    assert b.statement.startswith("Healthcare professionals should offer") and b.section == "Non-pharmacological Methods"
    (w,) = extract("- Patients with severe CDI should be treated with oral\nVancomycin 125 mg four times daily\n"
                   "rather than metronidazole (strong recommendation).")
    assert "Vancomycin 125 mg four times daily" in w.statement and w.section is None


def test_a_lead_in_that_ends_its_passage_takes_its_items_from_the_next_passages():
    """The list a passage's last recommendation opens is read from the passages after it
    (``following``); the quote holds the items and names the passages they come from."""
    ev = [EvidenceItem(1, "p-lead", "Chest pain", "guideline", 3, "Consider resting echocardiography if the person has:")]
    after = {"p-lead": [("p-i1", "- a heart murmur"), ("p-i2", "- signs of heart failure"), ("p-x", "Offer an ECG.")]}
    asked = []

    def following(ids):
        asked.append(list(ids))
        return {i: after[i] for i in ids if i in after}
    r = Recommender(RecommendConfig(overlap_weight=0.0), scorer_for(lambda t: 0.9), following=following)
    (rec,) = r.answer("When should I consider echocardiography?", ev).recommendations
    assert rec.statement == "Consider resting echocardiography if the person has: a heart murmur; signs of heart failure."
    assert rec.continued_in == ["p-i1", "p-i2"] and rec.passage_id == "p-lead" and asked == [["p-lead"]]
    # a passage whose list ends before the passage does asks nothing
    asked.clear()
    done = [EvidenceItem(1, "p-full", "Chest pain", "guideline", 3,
                         "Consider an echo if the person has:\n- a murmur\nOffer an ECG first.")]
    recs = r.answer("When should I consider echocardiography?", done).recommendations
    assert any(x.statement == "Consider an echo if the person has: a murmur." for x in recs) and asked == []
    # a list cut in the middle goes on with the next passage's items ("; AND" joins no clause)
    cut = [EvidenceItem(1, "p-cut", "AF", "guideline", 3, "Anticoagulants should be considered for patients with AF and:"
                        "\n - Who have a CHADS2 score of 1 or more; AND")]
    after["p-cut"] = [("p-c2", "- Who cannot achieve adequate anticoagulation with warfarin"), ("p-c3", "Of note")]
    (rec,) = r.answer("Which patients with AF should get anticoagulants?", cut).recommendations
    assert rec.statement == ("Anticoagulants should be considered for patients with AF and: Who have a CHADS2 score of "
                             "1 or more; Who cannot achieve adequate anticoagulation with warfarin.")
    assert rec.continued_in == ["p-c2"]


def test_one_guideline_is_the_one_with_the_most_relevant_passage_or_statement():
    """``guideline_by``: "passage" lists the guideline whose packed passage the coarse reranker
    found most relevant, its own best statement first, even when another guideline holds the best
    single statement; "statement" lists the best statement's guideline; without passage
    relevance "passage" falls back to the statement."""
    a1 = EvidenceItem(1, "a1", "Epilepsy in pregnancy", "guideline", 3,
                      "- Valproate may be considered as transferring little into breast milk (Level B).", relevance=0.6)
    a2 = EvidenceItem(2, "a2", "Epilepsy in pregnancy", "guideline", 3,
                      "- Lamotrigine levels should be monitored after delivery (Level C).", relevance=0.3)
    b1 = EvidenceItem(3, "b1", "Thrombophilia in pregnancy", "guideline", 3,
                      "- Warfarin does not accumulate in breast milk and may be used (Grade B).", relevance=0.2)
    rel = {"Valproate": 0.5, "Lamotrigine": 0.45, "Warfarin": 0.7}
    score = scorer_for(lambda t: next(v for k, v in rel.items() if k in t))
    q = "Which drugs get into breast milk?"
    cfg = RecommendConfig(min_relevance=0.3, keep_ratio=0.5, abstain_below=0.05, overlap_weight=0.0, max_items=4,
                          one_guideline=True, guideline_by="passage")
    got = Recommender(cfg, score).answer(q, [a1, a2, b1]).recommendations
    assert [r.passage_id for r in got] == ["a1", "a2"]
    cfg.guideline_by = "statement"
    assert [r.passage_id for r in Recommender(cfg, score).answer(q, [a1, a2, b1]).recommendations] == ["b1"]
    cfg.guideline_by = "passage"
    bare = [EvidenceItem(e.n, e.passage_id, e.title, "guideline", 3, e.text) for e in (a1, a2, b1)]
    assert [r.passage_id for r in Recommender(cfg, score).answer(q, bare).recommendations] == ["b1"]


def test_the_guideline_of_the_best_passage_needs_a_statement_that_reaches_the_floor():
    """A passage the reranker ranks first whose statements all fall below ``min_relevance`` does
    not choose the guideline: the best statement's guideline answers."""
    a = EvidenceItem(1, "a1", "Guide A", "guideline", 3, "- Aspirin may be considered for pain (Level C).",
                     relevance=0.9)
    b = EvidenceItem(2, "b1", "Guide B", "guideline", 3, "- Metformin should be stopped below 30 (Level B).",
                     relevance=0.3)
    score = scorer_for(lambda t: 0.05 if "Aspirin" in t else 0.8)
    cfg = RecommendConfig(min_relevance=0.2, keep_ratio=0.5, abstain_below=0.05, overlap_weight=0.0,
                          one_guideline=True, guideline_by="passage")
    assert [r.passage_id for r in Recommender(cfg, score).answer("Should metformin be stopped?", [a, b]).recommendations] \
        == ["b1"]


def test_a_question_the_scorer_cannot_read_is_chosen_by_term_overlap():
    def unreadable(question, texts):
        raise AssertionError("the relevance model was asked to score a question it cannot read")

    cfg = RecommendConfig(overlap_min_relevance=0.2, overlap_abstain_below=0.1, one_guideline=False)
    read_none = Recommender(cfg, unreadable, reads=lambda q: False).answer(QUESTION, EV)
    overlap = Recommender(cfg, None).answer(QUESTION, EV)
    assert [r.statement for r in read_none.recommendations] == [r.statement for r in overlap.recommendations]
    assert read_none.recommendations  # quinine statements share the question's words
    # a question it reads goes to the scorer
    assert Recommender(cfg, scorer_for(by_passage), reads=lambda q: True).answer(QUESTION, EV).recommendations


def test_fill_parts_adds_the_best_statement_for_a_part_nothing_chosen_covers():
    # whole question: the quinine statements only reach the keep ratio; the second part ("what else can be
    # tried") is answered by naftidrofuryl alone
    def score(question, texts):
        if question.startswith("what else"):
            return np.asarray([0.7 if "Naftidrofuryl" in t else 0.05 for t in texts])
        return np.asarray([0.9 if "(Level A)" in t else 0.2 if "Naftidrofuryl" in t else 0.05 for t in texts])

    kw = dict(min_relevance=0.3, keep_ratio=0.5, abstain_below=0.2, overlap_weight=0.0, max_items=1,
              one_guideline=True)
    off = Recommender(RecommendConfig(**kw, fill_parts=False), score).answer(QUESTION, EV)
    on = Recommender(RecommendConfig(**kw, fill_parts=True, fill_min_relevance=0.5), score).answer(QUESTION, EV)
    high = Recommender(RecommendConfig(**kw, fill_parts=True, fill_min_relevance=0.8), score).answer(QUESTION, EV)
    assert [r.passage_id for r in off.recommendations] == ["p-quinine"] and off.uncovered == ["what else can be tried"]
    # beyond max_items, one statement for the uncovered part; the part is then covered
    assert [r.passage_id for r in on.recommendations] == ["p-quinine", "p-other"] and on.uncovered == []
    assert [r.passage_id for r in high.recommendations] == ["p-quinine"]  # below the fill floor: nothing added
    # a one-part question is never filled, and the generator path keeps its own setting (off)
    one = Recommender(RecommendConfig(**kw, fill_parts=True, fill_min_relevance=0.0), score).answer(
        "Should quinine be used for muscle cramps?", EV)
    assert len(one.recommendations) == 1
    assert not RecommendConfig(fill_parts=True).for_generator().fill_parts


def test_fill_parts_reads_stored_part_relevance_when_given():
    r = Recommender(RecommendConfig(min_relevance=0.3, keep_ratio=0.5, abstain_below=0.2, overlap_weight=0.0,
                                    max_items=1, one_guideline=False, fill_parts=True, fill_min_relevance=0.5),
                    scorer_for(by_passage))
    cands = r.candidates(EV)
    rel = r.relevance(QUESTION, cands)
    calls = []

    def stored(part, idx):
        calls.append(part)
        return np.asarray([0.9 if "allopurinol" in cands[i][1].statement.lower() else 0.0 for i in idx])
    ra = r.choose(QUESTION, cands, rel, 0.9, None, stored)
    assert calls and "p-gout" in [x.passage_id for x in ra.recommendations]
