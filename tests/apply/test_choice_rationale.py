"""Where the rationale of a multiple-choice answer goes (``apply.choice_rationale``, issue 35): a
chain of thought before the letter, or the letter the model gives without one and then, in a
second turn, its explanation. Plumbing with a recording fake model; the same letters with the
bundled SmolLM2 are in tests/pipelines/test_choice_rationale_pipeline.py."""

import json

from medr2.apply.answer import AFTER, EXPLANATION_CUT, CitedAnswerer, EvidenceItem, answer_schema, direct_answer
from medr2.apply.prompts import answer_messages, direct_messages
from medr2.eval.identity import run_identity
from medr2.llm.base import ContextWindowError

OPTS = {"A": "Aspirin", "B": "Heparin"}
EV = [EvidenceItem(1, "p1", "Anticoagulation", "guideline", 3, "Heparin is used for acute venous thromboembolism.")]
WHY = "Heparin is the anticoagulant the guideline names [1]."


class Recording:
    """Plumbing fake: records each call's messages and schema and fills the schema's fields;
    ``why`` is the explanation turn's reply text (None: a valid one)."""

    name = "recording"
    temperature = 0.0
    seed = 0

    def __init__(self, why=None, cited=(1,), finish="stop"):
        self.calls, self.why, self.cited, self.finish = [], why, list(cited), finish

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        self.calls.append((messages, json_schema))
        props = json_schema["properties"]
        if list(props) == ["rationale"] and isinstance(self.why, Exception):
            raise self.why
        if list(props) == ["rationale"] and self.why is not None:
            return {"text": self.why, "prompt_tokens": 10, "completion_tokens": 10, "finish_reason": self.finish}
        value = {"rationale": WHY, "citations": self.cited, "insufficient": False,
                 "answer": "B" if "enum" in props.get("answer", {}) else "Heparin."}
        return {"text": json.dumps({k: value[k] for k in props}), "prompt_tokens": 10, "completion_tokens": 10}


def test_after_gives_the_letter_of_the_plain_prompt_then_explains_it():
    llm = Recording()
    ans = CitedAnswerer(llm, cot=True, few_shot=2, rationale_after=True).answer("Which drug?", OPTS, EV)
    (first, s1), (second, s2) = llm.calls
    # the letter is asked exactly as a method without a chain of thought asks it
    items = [e.prompt_dict() for e in EV]
    assert first == answer_messages("Which drug?", OPTS, items, False, 2) and s1 == answer_schema(1, OPTS, False)
    # then the same conversation, the reply, and the request to explain that option
    assert second[:-2] == first and json.loads(second[-2]["content"])["answer"] == "B"
    assert second[-1]["content"].startswith("Explain in two or three sentences why option B (Heparin)")
    assert list(s2["properties"]) == ["rationale"]
    assert ans.answer == "B" and ans.rationale == WHY and ans.citations == ["p1"] and ans.notes[0] == AFTER


def test_a_looping_explanation_is_cut_before_its_loop_and_the_letter_stands():
    first = "Heparin treats acute venous thromboembolism, as the guideline says [1]."
    loop = '{"rationale": "' + first + ' It acts within minutes of the first dose. ' + "It acts within minutes of the first dose. " * 30
    llm = Recording(why=loop, finish="repetition")  # the backend stopped it for repetition
    ans = CitedAnswerer(llm, cot=True, few_shot=2, rationale_after=True).answer("Which drug?", OPTS, EV)
    assert ans.answer == "B" and ans.citations == ["p1"]
    assert ans.rationale.startswith(first) and ans.rationale.count("It acts within minutes of the first dose") <= 1
    assert EXPLANATION_CUT in ans.notes and len(llm.calls) == 2  # no repair turn: a greedy loop loops again
    own = direct_answer(Recording(why=loop, finish="repetition"), "Which drug?", OPTS, cot=True, max_tokens=200,
                        rationale_after=True)
    assert own.answer == "B" and own.rationale.startswith(first) and EXPLANATION_CUT in own.notes


def test_before_is_a_chain_of_thought_and_free_text_keeps_it():
    llm = Recording()
    CitedAnswerer(llm, cot=True, few_shot=1).answer("Which drug?", OPTS, EV)
    CitedAnswerer(llm, cot=True, few_shot=1, rationale_after=True).answer("What treats a clot?", {}, EV)
    assert len(llm.calls) == 2  # one call each: no explanation turn
    for msgs, schema in llm.calls:
        assert list(schema["properties"])[:2] == ["rationale", "answer"]
        assert "Think step by step in the rationale" in msgs[-1]["content"]


def test_an_explanation_that_fails_leaves_the_letter_standing():
    llm = Recording(why='{"rationale": ')  # cut off: never valid JSON
    ans = CitedAnswerer(llm, cot=True, few_shot=0, rationale_after=True).answer("Which drug?", OPTS, EV)
    assert ans.answer == "B" and ans.rationale == "" and ans.citations == ["p1"]
    assert any(n.startswith("no rationale for option B") for n in ans.notes)


def test_an_explanation_turn_that_cannot_be_made_keeps_the_letter():
    llm = Recording(why=ContextWindowError("the explanation turn does not fit"))
    ans = CitedAnswerer(llm, cot=True, few_shot=0, rationale_after=True).answer("Which drug?", OPTS, EV)
    assert ans.answer == "B" and ans.method == "llm" and ans.rationale == ""
    assert any("does not fit" in n for n in ans.notes)


def test_citations_and_sufficiency_are_the_letters_not_the_explanations():
    # the plain reply cites nothing: as without a chain of thought, the answer is unsupported,
    # whatever passages the explanation then names
    llm = Recording(cited=())
    ans = CitedAnswerer(llm, cot=True, few_shot=0, rationale_after=True).answer("Which drug?", OPTS, EV)
    plain = CitedAnswerer(Recording(cited=()), cot=False, few_shot=0).answer("Which drug?", OPTS, EV)
    assert ans.citations == plain.citations == [] and ans.insufficient is plain.insufficient is True
    assert ans.rationale == WHY


def test_direct_answer_follows_the_setting_and_a_method_without_rationale_ignores_it():
    llm = Recording()
    ans = direct_answer(llm, "Which drug?", OPTS, cot=True, max_tokens=64, rationale_after=True)
    assert llm.calls[0][0] == direct_messages("Which drug?", OPTS, False)
    assert list(llm.calls[0][1]["properties"]) == ["answer"] and list(llm.calls[1][1]["properties"]) == ["rationale"]
    assert llm.calls[1][0][-1]["content"].endswith("is the answer.")  # no passages to cite
    assert ans.answer == "B" and ans.rationale == WHY and ans.notes[0] == AFTER
    direct_answer(llm, "Which drug?", OPTS, cot=False, max_tokens=64, rationale_after=True)
    assert len(llm.calls) == 3 and list(llm.calls[2][1]["properties"]) == ["answer"]


def test_a_generated_chain_of_thought_run_does_not_resume_under_the_other_order():
    def ident(method, mode, order):
        return run_identity({"dataset": "medqa:30", "method": method, "answer_mode": mode,
                             "config": {"apply": {"choice_rationale": order, "few_shot": 2}}})

    assert ident("medr2", "generate", "before") != ident("medr2", "generate", "after")
    assert ident("+cot", "generate", "before") != ident("+cot", "generate", "after")
    # runs that write no rationale cannot read the setting: they resume whatever it says
    assert ident("medr2", "loglik", "before") == ident("medr2", "loglik", "after")
    assert ident("vanilla_rag", "generate", "before") == ident("vanilla_rag", "generate", "after")
    # trust runs answer free-text questions only: the setting is not theirs to compare
    trust = {"dataset": "ngc", "method": "trust", "answer_mode": "generate", "free_text": True}
    assert run_identity({**trust, "config": {"apply": {"few_shot": 2}}}) == run_identity(
        {**trust, "config": {"apply": {"few_shot": 2, "choice_rationale": "after"}}})
    # nor a run of free-text questions only (an eval set without options), nor the weighing of letters
    free = {"dataset": "guide", "method": "medr2", "answer_mode": "generate", "free_text": True,
            "multiple_choice": False}
    assert run_identity({**free, "config": {"apply": {"few_shot": 2, "choice_rationale": "after"},
                                            "gate": {"generated_weight": 1.0}}}) == run_identity(
        {**free, "config": {"apply": {"few_shot": 2, "choice_rationale": "before"}, "gate": {"generated_weight": 0.5}}})
    mc = {"dataset": "medqa:30", "method": "vanilla_rag", "answer_mode": "generate"}
    assert run_identity({**mc, "config": {"gate": {"generated_weight": 1.0}}}) != run_identity(
        {**mc, "config": {"gate": {"generated_weight": 0.5}}})
    # a run recorded before the setting existed had its rationale before the letter
    old = run_identity({"dataset": "medqa:30", "method": "medr2", "answer_mode": "generate",
                        "config": {"apply": {"few_shot": 2}}})
    assert old == ident("medr2", "generate", "before")
