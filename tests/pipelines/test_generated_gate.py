"""The evidence gate for generated multiple-choice answers (``gate.generated_weight``,
medr2.apply.gate.decide_generated) through ``Method.gated_generate``: plumbing on a scripted
generator (it writes one letter without evidence and another with it, and scores the option
letters from fixed tables), so every branch is reached deterministically. The gate math itself is
tested in tests/apply/test_gate_math.py and with a real model in test_gate_pipeline.py."""

import json

import pytest

from medr2.apply.answer import CitedAnswerer, EvidenceItem
from medr2.apply.context import estimate_tokens
from medr2.apply.gate import combine
from medr2.config import Config
from medr2.llm.base import LLMError
from medr2.pipelines import Pipeline
from medr2.schema import AskResult, EvidenceRow, SourceType

Q = "Which drug slows kidney disease progression in type 2 diabetes?"
OPTS = {"A": "Metformin", "B": "An SGLT2 inhibitor", "C": "Insulin glargine"}
EV = [EvidenceItem(1, "p1", "Trial", "paper", 2, "SGLT2 inhibitors cut kidney failure by a third.", relevance=0.6)]
ROWS = [EvidenceRow(passage_id="p1", doc_id="d", title="Trial", source_type=SourceType.paper, level=2,
                    text=EV[0].text, kept=True, n=1, relevance=0.6)]


class ScriptedLLM:
    """Writes ``without`` when the answer schema has no citations (no evidence), ``with_ev`` when it
    has; explains whatever it is asked to; scores option letters from ``s0`` (no evidence in the
    prompt) or ``s1``. ``logprobs=False``: a backend that gives no token log-probabilities."""

    name = "scripted"
    temperature, seed = 0.0, 0

    def __init__(self, without: str, with_ev: str, s0=None, s1=None, logprobs: bool = True):
        self.without, self.with_ev, self.s0, self.s1, self.logprobs = without, with_ev, s0, s1, logprobs
        self.letter_calls: list[str] = []  # "without" / "with" per letter turn
        self.explained: list[str] = []
        self.prefills = 0

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        props = (json_schema or {}).get("properties", {})
        if list(props) == ["rationale"]:
            self.explained.append(messages[-1]["content"])
            out = {"rationale": "Because of the reasoning above."}
        elif "citations" in props:
            self.letter_calls.append("with")
            out = {"answer": self.with_ev, "citations": [1], "insufficient": False}
        else:
            self.letter_calls.append("without")
            again = self.letter_calls.count("without") > 1 and getattr(self, "without_after", None)
            out = {"answer": again or self.without}
            if "rationale" in props:
                out = {"rationale": "My own reasoning.", **out}
        if "rationale" in props and "answer" in props and "rationale" not in out:
            out = {"rationale": "Evidence [1] says so.", **out}
        return {"text": json.dumps(out), "prompt_tokens": 10, "completion_tokens": 5}

    def continuation_logprobs(self, prompt, continuation):
        if not self.logprobs:
            raise LLMError("this server does not echo prompt log-probabilities")
        self.prefills += 1
        table = self.s1 if "Evidence:" in prompt else self.s0
        return [table[continuation.strip()]]

    def count_tokens(self, text):
        return estimate_tokens(text)


class ScriptedEngine:
    def __init__(self, llm, weight: float, rationale: str = "after"):
        self.config = Config()
        self.config.gate.generated_weight = weight
        self.config.apply.choice_rationale = rationale
        self.generator, self.scorer = llm, None
        self.count_tokens = estimate_tokens
        self.answerers = {cot: CitedAnswerer(llm, cot, rationale_after=rationale == "after") for cot in (True, False)}
        self.recommender = None


def gate(llm, weight=0.5, method="vanilla_rag", rationale="after"):
    res = AskResult(question=Q, options=OPTS)
    ans = Pipeline(ScriptedEngine(llm, weight, rationale), method).gated_generate(Q, OPTS, list(EV), list(ROWS), res)
    return ans, res


def test_the_same_letter_with_and_without_evidence_needs_no_prefill():
    llm = ScriptedLLM("B", "B")
    ans, res = gate(llm)
    assert (ans.answer, ans.citations, res.evidence_used) == ("B", ["p1"], True)
    assert res.gate["mode"] == "combined" and "writes B" in res.gate["reason"]
    assert llm.prefills == 0 and llm.letter_calls == ["without", "with"]


def test_evidence_that_makes_the_model_sure_overturns_its_own_letter():
    s0 = {"A": -0.6, "B": -1.2, "C": -2.0}
    s1 = {"A": -3.0, "B": -0.1, "C": -4.0}
    llm = ScriptedLLM("A", "B", s0, s1)
    ans, res = gate(llm)
    comb = combine(s0, s1, 0.5)
    assert comb["B"] > comb["A"]
    assert (ans.answer, ans.citations, res.evidence_used) == ("B", ["p1"], True)
    assert res.gate["answer_without"] == "A" and res.gate["answer_with"] == "B" and llm.prefills == 6


def test_evidence_that_leaves_the_model_unsure_does_not_overturn_a_confident_letter():
    s0 = {"A": -0.05, "B": -4.0, "C": -4.0}
    s1 = {"A": -1.2, "B": -0.9, "C": -1.3}
    llm = ScriptedLLM("A", "B", s0, s1)
    ans, res = gate(llm)
    assert (ans.answer, ans.citations, res.evidence_used) == ("A", [], False)
    assert "did not overturn A" in res.gate["reason"] and res.gate["weight"] == 0.0
    assert any("no retrieval" in n for n in ans.notes)  # the model's own answer, uncited
    # a non-CoT method's letter turn is already its whole answer: not asked again
    assert llm.letter_calls == ["without", "with"]


def test_a_chain_of_thought_method_explains_its_own_letter_when_that_stands():
    llm = ScriptedLLM("A", "B", {"A": -0.05, "B": -4.0, "C": -4.0}, {"A": -1.2, "B": -0.9, "C": -1.3})
    ans, res = gate(llm, method="+cot")
    assert ans.answer == "A" and res.evidence_used is False
    # the evidence answer came explained (B, then set aside); the answer given explains A
    assert ans.rationale == "Because of the reasoning above." and "option A" in llm.explained[-1]
    # the letter without evidence was asked twice (alone, then to be explained), never with a chain of thought first
    assert llm.letter_calls == ["without", "with", "without"]


def test_a_generator_without_log_probabilities_keeps_the_evidence_letter_and_says_why():
    llm = ScriptedLLM("A", "B", logprobs=False)
    ans, res = gate(llm)
    assert ans.answer == "B" and res.evidence_used is True and res.gate["mode"] == "evidence"
    assert "no option log-probabilities" in res.gate["reason"]


@pytest.mark.parametrize("weight, mode, answer", [(1.0, "evidence", "B"), (0.0, "none", "A")])
def test_weight_one_is_plain_rag_and_zero_never_reads_the_evidence(weight, mode, answer):
    llm = ScriptedLLM("A", "B", {"A": -0.1, "B": -3.0, "C": -3.0}, {"A": -3.0, "B": -0.1, "C": -3.0})
    ans, res = gate(llm, weight=weight)
    assert (ans.answer, res.gate["mode"]) == (answer, mode) and llm.prefills == 0
    assert llm.letter_calls == (["with"] if weight == 1.0 else ["without"])


def test_a_free_text_question_is_not_weighed():
    llm = ScriptedLLM("A", "B")
    res = AskResult(question=Q)
    p = Pipeline(ScriptedEngine(llm, 0.5), "vanilla_rag")
    p.gated_generate(Q, {}, list(EV), list(ROWS), res)
    assert res.gate["mode"] == "evidence" and llm.letter_calls == ["with"]


def test_an_answer_without_evidence_that_fails_leaves_the_evidence_answer():
    # "A." is no option letter: the schema-validated letter turn fails (three tries), the evidence's B stands
    llm = ScriptedLLM("A.", "B", {"A": -0.1, "B": -3.0, "C": -3.0}, {"A": -3.0, "B": -0.1, "C": -3.0})
    ans, res = gate(llm)
    assert ans.answer == "B" and res.gate["mode"] == "evidence" and "the answer without the evidence failed" in res.gate["reason"]
    assert llm.prefills == 0 and ans.citations == ["p1"]


def test_an_evidence_answer_that_fails_gives_the_model_s_own():
    llm = ScriptedLLM("A", "B.")
    ans, res = gate(llm)
    assert (ans.answer, ans.citations, res.evidence_used) == ("A", [], False)
    assert "the answer with the evidence failed" in res.gate["reason"] and llm.letter_calls.count("without") == 1


def test_option_scores_that_are_all_minus_infinity_keep_the_evidence_letter():
    inf = float("-inf")
    llm = ScriptedLLM("A", "B", {"A": inf, "B": inf, "C": inf}, {"A": inf, "B": inf, "C": inf})
    ans, res = gate(llm)
    assert ans.answer == "B" and res.gate["mode"] == "evidence" and "no option log-probabilities" in res.gate["reason"]


def test_an_own_letter_that_changes_when_explained_stands_unexplained():
    llm = ScriptedLLM("A", "B", {"A": -0.05, "B": -4.0, "C": -4.0}, {"A": -1.2, "B": -0.9, "C": -1.3})
    p = Pipeline(ScriptedEngine(llm, 0.5), "+cot")
    llm.without_after = "C"  # a sampling backend: asked again, it writes another letter
    res = AskResult(question=Q, options=OPTS)
    ans = p.gated_generate(Q, OPTS, list(EV), list(ROWS), res)
    assert ans.answer == res.gate["answer"] == "A" and any("could not be had" in n for n in ans.notes)


def test_what_the_model_gives_without_evidence_is_asked_once_per_question():
    # the iterating method reaches the gate every round: the letter and the option scores without
    # evidence cannot change between rounds, so only the evidence side is asked again
    s0 = {"A": -0.6, "B": -1.2, "C": -2.0}
    s1 = {"A": -3.0, "B": -0.1, "C": -4.0}
    llm = ScriptedLLM("A", "B", s0, s1)
    p = Pipeline(ScriptedEngine(llm, 0.5), "medr2")
    first = p.gated_generate(Q, OPTS, list(EV), list(ROWS), AskResult(question=Q, options=OPTS))
    p._last = None  # a round that packed other passages
    second = p.gated_generate(Q, OPTS, list(EV), list(ROWS), AskResult(question=Q, options=OPTS))
    assert first.answer == second.answer == "B"
    assert llm.letter_calls == ["without", "with", "with"] and llm.prefills == 3 + 3 + 3
    # another question is its own
    p._last = None
    p.gated_generate("Another question?", OPTS, list(EV), list(ROWS), AskResult(question="Another question?", options=OPTS))
    assert llm.letter_calls.count("without") == 2


def test_loglik_scores_without_evidence_are_prefilled_once_per_question():
    s0 = {"A": -0.6, "B": -1.2, "C": -2.0}
    llm = ScriptedLLM("A", "B", s0, {"A": -3.0, "B": -0.1, "C": -4.0})
    p = Pipeline(ScriptedEngine(llm, 0.5), "vanilla_rag", answer_mode="loglik")
    for _ in range(2):
        res = AskResult(question=Q, options=OPTS)
        ans = p.gated_generate(Q, OPTS, list(EV), list(ROWS), res)
        assert ans.answer == "B" and res.gate["scores_without"]
    assert llm.prefills == 3 + 3 + 3 and llm.letter_calls == []


def test_a_failed_answer_without_evidence_is_asked_again():
    llm = ScriptedLLM("A.", "B", {"A": -0.1, "B": -3.0, "C": -3.0}, {"A": -3.0, "B": -0.1, "C": -3.0})
    p = Pipeline(ScriptedEngine(llm, 0.5), "vanilla_rag")
    for _ in range(2):
        p.gated_generate(Q, OPTS, list(EV), list(ROWS), AskResult(question=Q, options=OPTS))
    # three schema-validated tries per failed letter turn, both times
    assert llm.letter_calls.count("without") == 6


def test_the_floor_waiver_applies_to_generated_multiple_choice_answers_only():
    eng = ScriptedEngine(ScriptedLLM("A", "B"), 1.0)
    eng.config.appraise.floor_min_passages = 2
    assert Pipeline(eng, "medr2").floor_min_passages(OPTS) == 2
    assert Pipeline(eng, "+reranker").floor_min_passages(OPTS) == 2
    assert Pipeline(eng, "medr2", answer_mode="loglik").floor_min_passages(OPTS) == 0  # the loglik gate weighs it
    assert Pipeline(eng, "medr2").floor_min_passages({}) == 0  # free text: the floor decides abstention
    eng.generator = None
    assert Pipeline(eng, "medr2").floor_min_passages(OPTS) == 0  # extractive answers
