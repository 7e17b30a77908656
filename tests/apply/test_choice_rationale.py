"""Where the rationale of a multiple-choice answer goes (``apply.choice_rationale``, issue 35): a
chain of thought before the letter, or the letter first and then its explanation. Plumbing with a
recording fake model; the real ordering with the bundled SmolLM2 is in
tests/pipelines/test_choice_rationale_pipeline.py."""

import json

from medr2.apply.answer import CitedAnswerer, EvidenceItem, direct_answer
from medr2.eval.identity import run_identity

OPTS = {"A": "Aspirin", "B": "Heparin"}
EV = [EvidenceItem(1, "p1", "Anticoagulation", "guideline", 3, "Heparin is used for acute venous thromboembolism.")]


class Recording:
    """Plumbing fake: records each call's messages and schema, replies with the schema's fields in
    the schema's order (the order a grammar-constrained model writes them in)."""

    name = "recording"
    temperature = 0.0
    seed = 0

    def __init__(self):
        self.calls = []

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        self.calls.append((messages, json_schema))
        value = {"rationale": "Heparin is the anticoagulant named [1].", "citations": [1], "insufficient": False,
                 "answer": "B" if "enum" in json_schema["properties"]["answer"] else "Heparin."}
        reply = {k: value[k] for k in json_schema["properties"]}
        return {"text": json.dumps(reply), "prompt_tokens": 10, "completion_tokens": 10}


def test_after_asks_for_the_letter_first_and_shows_it_so():
    llm = Recording()
    ans = CitedAnswerer(llm, cot=True, few_shot=2, rationale_after=True).answer("Which drug?", OPTS, EV)
    msgs, schema = llm.calls[0]
    assert list(schema["properties"])[:2] == ["answer", "rationale"]
    assert "Give the answer first, then explain it" in msgs[-1]["content"]
    assert "before the answer" not in msgs[-1]["content"]
    demos = [m["content"] for m in msgs if m["role"] == "assistant"]
    assert demos and all(d.startswith('{"answer"') for d in demos)
    # the answer keeps its rationale and citations whatever the order
    assert ans.answer == "B" and ans.rationale.startswith("Heparin") and ans.citations == ["p1"]


def test_before_is_a_chain_of_thought_and_free_text_keeps_it():
    llm = Recording()
    CitedAnswerer(llm, cot=True, few_shot=1).answer("Which drug?", OPTS, EV)
    CitedAnswerer(llm, cot=True, few_shot=1, rationale_after=True).answer("What treats a clot?", {}, EV)
    for msgs, schema in llm.calls:  # the default, and a question without options under "after"
        assert list(schema["properties"])[:2] == ["rationale", "answer"]
        assert "Think step by step in the rationale" in msgs[-1]["content"]
        assert all(m["content"].startswith('{"rationale"') for m in msgs if m["role"] == "assistant")


def test_direct_answer_follows_the_setting_and_a_method_without_rationale_ignores_it():
    llm = Recording()
    ans = direct_answer(llm, "Which drug?", OPTS, cot=True, max_tokens=64, rationale_after=True)
    assert list(llm.calls[0][1]["properties"]) == ["answer", "rationale"] and ans.answer == "B"
    direct_answer(llm, "Which drug?", OPTS, cot=False, max_tokens=64, rationale_after=True)
    assert list(llm.calls[1][1]["properties"]) == ["answer"]
    assert "Give the answer first" not in llm.calls[1][0][-1]["content"]


def test_a_generated_chain_of_thought_run_does_not_resume_under_the_other_order():
    def ident(method, mode, order):
        return run_identity({"dataset": "medqa:30", "method": method, "answer_mode": mode,
                             "config": {"apply": {"choice_rationale": order, "few_shot": 2}}})

    assert ident("medr2", "generate", "before") != ident("medr2", "generate", "after")
    assert ident("+cot", "generate", "before") != ident("+cot", "generate", "after")
    # runs that write no rationale cannot read the setting: they resume whatever it says
    assert ident("medr2", "loglik", "before") == ident("medr2", "loglik", "after")
    assert ident("vanilla_rag", "generate", "before") == ident("vanilla_rag", "generate", "after")
    # a run recorded before the setting existed had its rationale before the letter
    old = run_identity({"dataset": "medqa:30", "method": "medr2", "answer_mode": "generate",
                        "config": {"apply": {"few_shot": 2}}})
    assert old == ident("medr2", "generate", "before")
