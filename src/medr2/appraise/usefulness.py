"""f_u usefulness: how much a passage lowers the proxy LM's loss on a reference answer (Med-R2).

f_u = max(loss without documents - loss with the passage, 0), loss = mean negative
log-likelihood per token of the reference answer. The reference is never a gold label: it is
the generator's own draft answer (or a stronger endpoint's), as the paper does to avoid label
leakage.

Example::

    >>> from medr2.appraise.usefulness import usefulness
    >>> usefulness(2.75, 1.25), usefulness(1.0, 1.4)
    (1.5, 0.0)
"""

from __future__ import annotations

from typing import Optional

from medr2.llm.base import LLM, mean_nll


def usefulness(loss_without: float, loss_with: float) -> float:
    return max(loss_without - loss_with, 0.0)


class UsefulnessScorer:
    def __init__(self, proxy: LLM, max_passage_tokens: int = 400):
        self.proxy = proxy
        self.max_passage_tokens = max_passage_tokens
        self.name = getattr(proxy, "name", "proxy")

    def _clip(self, text: str) -> str:
        words = text.split()
        # rough cap so prompt + answer fit a small context; 0.75 words a token
        cap = int(self.max_passage_tokens * 0.75)
        return " ".join(words[:cap])

    def loss(self, question: str, options: dict[str, str], passage: Optional[str], reference: str) -> float:
        from medr2.appraise.prompts import usefulness_prompt

        return mean_nll(self.proxy.continuation_logprobs(usefulness_prompt(question, options, passage and self._clip(passage)),
                                                         " " + reference.strip()))

    def score(self, question: str, options: dict[str, str], passages: list[str], reference: str) -> tuple[float, list[float]]:
        """Loss without documents, and f_u of each passage."""
        base = self.loss(question, options, None, reference)
        return base, [usefulness(base, self.loss(question, options, p, reference)) for p in passages]
