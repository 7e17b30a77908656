"""LLM plumbing as pure functions: echoed log-probabilities, JSON extraction, usage by stage."""

import pytest

from medr2.llm.base import Usage, extract_json, stage, track
from medr2.llm.remote import continuation_from_echo


def test_echoed_logprobs_cover_only_the_continuation():
    # offsets are ignored: a BOS string shifts them on some servers
    r = {"choices": [{"logprobs": {"tokens": ["<|begin_of_text|>", "Q", ":", " ye", "s", "\n"],
                                   "token_logprobs": [None, -1.0, -0.5, -0.25, -0.125, -3.0],
                                   "text_offset": [0, 17, 18, 19, 22, 23]}}]}
    assert continuation_from_echo(r, " yes") == [-0.25, -0.125]
    from medr2.llm.base import LLMError

    with pytest.raises(LLMError, match="no prompt log-probabilities"):
        continuation_from_echo({"choices": [{"text": "x"}]}, "x")
    with pytest.raises(LLMError, match="do not cover"):
        continuation_from_echo({"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": [None, -1.0]}}]},
                               " long continuation")



def test_extract_json_finds_the_object_in_prose():
    assert extract_json('Sure! ```json\n{"a": "x}y", "b": {"c": 1}}\n``` done') == '{"a": "x}y", "b": {"c": 1}}'
    assert extract_json("no json") == "no json"



def test_usage_is_attributed_to_stages():
    from medr2.llm.base import record

    u, own = Usage(), Usage()
    with track(u):
        with stage("classify"):
            record(own, 10, 2, 0.5)
            record(own, 0, 0, 0.0, cached=True)
        with stage("generate"):
            record(own, 100, 20, 2.0)
    record(own, 1, 1, 1.0)  # outside any run: only the backend's own usage
    d = u.to_dict()
    assert d["calls"] == 2 and d["prompt_tokens"] == 110 and own.calls == 3
    assert d["stages"]["classify"]["cached_calls"] == 1 and d["stages"]["generate"]["completion_tokens"] == 20
    assert d["stages"]["generate"]["llm_seconds"] == 2.0 and d["stages"]["generate"]["seconds"] >= 0
    assert 0.0 <= d["outside_llm_share"] <= 1.0

