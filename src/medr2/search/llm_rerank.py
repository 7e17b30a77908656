"""LLM-scored pointwise coarse reranker: P("yes") that the passage helps answer the question,
from the log-probabilities of the continuations " yes" and " no" (``appraise.llm_rerank``; it
replaces the cross-encoder, medr2's shipped one by default, at many times its cost). P("yes") is also the passage's relevance
(``scores["relevance"]``), which the fine order and the relevance floor read (medr2.appraise.order).

Example::

    >>> from medr2.search.llm_rerank import p_yes
    >>> round(p_yes(-0.1, -2.4), 3)
    0.909
"""

from __future__ import annotations

import math

from medr2.llm.base import LLM
from medr2.schema import Hit
from medr2.search.prompts import relevance_prompt


def p_yes(logp_yes: float, logp_no: float) -> float:
    m = max(logp_yes, logp_no)
    a, b = math.exp(logp_yes - m), math.exp(logp_no - m)
    return a / (a + b)


def yes_probability(llm: LLM, prompt: str) -> float:
    """P(" yes") against P(" no") as the continuation of ``prompt`` (two scorings; the second
    reuses the prompt's cache where the model keeps one)."""
    return p_yes(sum(llm.continuation_logprobs(prompt, " yes")), sum(llm.continuation_logprobs(prompt, " no")))


class LLMPointwiseReranker:
    def __init__(self, llm: LLM, max_passage_words: int = 250):
        self.llm = llm
        self.max_passage_words = max_passage_words
        self.name = f"llm-pointwise:{getattr(llm, 'name', 'llm')}"

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> list[Hit]:
        for h in hits:
            prompt = relevance_prompt(query, " ".join(h.text.split()[: self.max_passage_words]))
            h.scores["rerank"] = round(yes_probability(self.llm, prompt), 6)
            h.scores["relevance"] = h.scores["rerank"]  # P(yes) is the relevance the fine order reads
            h.score = float(h.scores["rerank"])
        return sorted(hits, key=lambda h: -h.score)[:top_n]
