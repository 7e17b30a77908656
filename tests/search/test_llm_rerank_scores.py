"""The LLM reranker's relevance probability from log-probabilities."""

import math

from medr2.search.llm_rerank import p_yes


def test_p_yes_from_logprobs():
    assert math.isclose(p_yes(math.log(0.3), math.log(0.1)), 0.75)
    assert p_yes(-1000.0, -1.0) < 1e-6

