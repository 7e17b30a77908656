"""The generator as the judge of which guideline statements apply (recommend.llm_answer =
"quote"): the prompt, P("yes"), the judged selection in place of the cross-encoder, coverage by
term overlap, and the judged config."""

import numpy as np
import pytest

from medr2.apply.answer import Answer, EvidenceItem
from medr2.apply.judge import JUDGED, StatementJudge, as_judged, judge_prompt
from medr2.apply.recommend import Recommender
from medr2.config import RecommendConfig


class YesWhereLLM:
    """Plumbing fake: log P(" yes") high where the prompt's recommendation holds a marker word."""

    name = "fake"

    def __init__(self, marker: str):
        self.marker, self.prompts = marker, []

    def continuation_logprobs(self, prompt, continuation):
        self.prompts.append(prompt)
        statement = prompt.split("Guideline recommendation: ", 1)[1].split("\n\n", 1)[0]
        likely = (continuation == " yes") == (self.marker in statement.lower())
        return [-0.05] if likely else [-3.0]


def test_the_prompt_puts_the_question_first_and_strips_evidence_tags():
    p = judge_prompt("Is quinine right?", "Quinine </evidence> should be avoided.")
    assert p.startswith("Question: Is quinine right?\n\nGuideline recommendation: Quinine")
    assert "</evidence>" not in p and p.endswith("Answer yes or no.\nAnswer:")


def test_the_judge_gives_p_yes_per_statement():
    llm = YesWhereLLM("quinine")
    p = StatementJudge(llm)("Is quinine right for cramps?", ["Quinine should be avoided.", "Statins are advised."])
    assert p.shape == (2,) and p[0] > 0.9 and p[1] < 0.1
    assert len(llm.prompts) == 4  # " yes" and " no" for each statement
    assert StatementJudge(llm)("q", []).shape == (0,)


QUESTION = "Should quinine be used for muscle cramps, and what else can be tried?"
EV = [
    EvidenceItem(1, "p-quinine", "Muscle cramps", "guideline", 3,
                 "- Quinine derivatives should be avoided for routine treatment of cramps (Level A)."),
    EvidenceItem(2, "p-other", "Muscle cramps", "guideline", 3,
                 "- Naftidrofuryl and diltiazem may be considered for muscle cramps (Level C)."),
    EvidenceItem(3, "p-gout", "Gout", "guideline", 3, "- Allopurinol should be offered for recurrent gout (1B)."),
]


def judged_config(**kw) -> RecommendConfig:
    return RecommendConfig(**{"judge_overlap_weight": 0.0, "judge_min_relevance": 0.5, "judge_keep_ratio": 0.5,
                              "judge_max_items": 5, "abstain_below": 0.2, **kw}).for_judge()


def never(question, texts):
    raise AssertionError("the cross-encoder was asked although the generator judges")


def test_the_judge_replaces_the_cross_encoder():
    seen = []

    def judge(question, texts):
        seen.append((question, list(texts)))
        return np.asarray([0.95 if "Naftidrofuryl" in t else 0.1 for t in texts])

    # a reranker that could not read the question sends it to term overlap only without a judge
    r = Recommender(judged_config(), never, reads=lambda q: False, judge=judge)
    ra = r.answer(QUESTION, [EvidenceItem(**{**e.__dict__, "relevance": 0.8}) for e in EV])
    assert [x.passage_id for x in ra.recommendations] == ["p-other"]  # the judge's choice, not the wording's
    assert ra.recommendations[0].relevance == 0.95
    # one call for the whole question: no part is filled and coverage reads term overlap
    assert len(seen) == 1 and seen[0][0] == QUESTION and len(seen[0][1]) == 3


def test_coverage_of_parts_reads_term_overlap_under_the_judge():
    judge = StatementJudge(YesWhereLLM("quinine"))
    ra = Recommender(judged_config(), never, judge=judge).answer(
        QUESTION, [EvidenceItem(**{**e.__dict__, "relevance": 0.8}) for e in EV])
    assert [x.passage_id for x in ra.recommendations] == ["p-quinine"]
    assert ra.recommendations[0].covers == ["Should quinine be used for muscle cramps"]
    assert ra.uncovered == ["what else can be tried"]


def test_a_low_best_passage_relevance_still_abstains_under_the_judge():
    judge = StatementJudge(YesWhereLLM("quinine"))
    ra = Recommender(judged_config(), never, judge=judge).answer(
        QUESTION, [EvidenceItem(**{**e.__dict__, "relevance": 0.05}) for e in EV])
    assert ra.insufficient and ra.recommendations == []


def test_the_judged_selection_has_its_own_constants_and_fills_no_parts():
    c = RecommendConfig(overlap_weight=0.75, min_relevance=0.2, keep_ratio=0.7, max_items=4, one_guideline=True,
                        fill_parts=True, judge_overlap_weight=0.5, judge_min_relevance=0.1, judge_keep_ratio=0.9,
                        judge_max_items=2, judge_one_guideline=False)
    j = c.for_judge()
    assert (j.overlap_weight, j.min_relevance, j.keep_ratio, j.max_items, j.one_guideline, j.fill_parts) == (
        0.5, 0.1, 0.9, 2, False, False)
    assert (c.overlap_weight, c.max_items, c.fill_parts) == (0.75, 4, True) and j.abstain_below == c.abstain_below
    with pytest.raises(ValueError):
        RecommendConfig(llm_answer="summarise")


def test_a_judged_answer_names_its_judge_instead_of_no_llm():
    ans = as_judged(Answer("- [strong] X [1]", notes=["no LLM: 1 applicable recommendation(s) of 3 read", "other"]),
                    "judge:fake")
    assert ans.method == JUDGED
    assert ans.notes == ["judge:fake judged which statements apply; 1 applicable recommendation(s) of 3 read", "other"]


def test_an_abstention_on_passage_relevance_asks_the_judge_nothing():
    ra = Recommender(judged_config(), never, judge=never).answer(
        QUESTION, [EvidenceItem(**{**e.__dict__, "relevance": 0.05}) for e in EV])
    assert ra.insufficient and ra.searched == 3
    abstained = as_judged(Answer("Insufficient evidence: ...", insufficient=True,
                                 notes=["no LLM: recommendation answer (medr2.apply.recommend); abstained"]), "judge:fake")
    assert abstained.notes == ["quote mode: recommendation answer (medr2.apply.recommend); abstained"]


def test_a_judge_that_fails_hands_the_choice_to_the_fallback_with_a_note():
    from medr2.llm.base import LLMError, NoLogprobsError

    def no_logprobs(question, texts):
        raise NoLogprobsError("this endpoint cannot score continuations")

    def down(question, texts):
        raise LLMError("LLM endpoint failed after 1 tries")

    ev = [EvidenceItem(**{**e.__dict__, "relevance": 0.8}) for e in EV]
    plain = Recommender(RecommendConfig(), None)  # the extractive selection: term overlap here
    ra = Recommender(judged_config(), never, judge=no_logprobs, fallback=plain).answer(QUESTION, ev)
    assert not ra.judged and [x.passage_id for x in ra.recommendations] == ["p-quinine"]
    assert ra.answer.notes[-1].startswith("quote mode: the generator could not judge the statements "
                                          "(this endpoint cannot score continuations); they were chosen by term overlap")
    judged = Recommender(judged_config(), never, judge=StatementJudge(YesWhereLLM("quinine")), fallback=plain)
    assert judged.answer(QUESTION, ev).judged
    with pytest.raises(LLMError):  # without a fallback the error is the caller's to report
        Recommender(judged_config(), never, judge=no_logprobs).answer(QUESTION, ev)
    with pytest.raises(LLMError, match="failed after"):  # a server that is down is no reason to fall back
        Recommender(judged_config(), never, judge=down, fallback=plain).answer(QUESTION, ev)
