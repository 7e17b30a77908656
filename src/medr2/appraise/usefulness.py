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

from typing import Callable, Optional

from medr2.llm.base import LLM, mean_nll


def usefulness(loss_without: float, loss_with: float) -> float:
    return max(loss_without - loss_with, 0.0)


def clip_to_tokens(text: str, budget: int, count: Optional[Callable[[str], int]]) -> str:
    """The longest run of whole leading words of ``text`` that ``count`` measures at most
    ``budget`` tokens (without a tokenizer: 0.75 words a token).

    >>> clip_to_tokens("a b c d e f", 3, lambda t: len(t.split())), clip_to_tokens("a b c d", 4, None)
    ('a b c', 'a b c')
    """
    words = text.split()
    if count is None:
        return " ".join(words[: int(budget * 0.75)])
    if count(text) <= budget:
        return text
    lo, hi = 0, len(words)  # words[:lo] fits; words[:hi + 1] does not (or hi is all of them)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(" ".join(words[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo])


class UsefulnessScorer:
    def __init__(self, proxy: LLM, max_passage_tokens: int = 400, question_first: bool = False):
        self.proxy = proxy
        self.max_passage_tokens = max_passage_tokens
        self.question_first = question_first  # appraise.usefulness_order
        self.name = getattr(proxy, "name", "proxy")

    def _clip(self, text: str) -> str:
        """The passage cut to ``max_passage_tokens`` of the proxy's tokens (whole words)."""
        return clip_to_tokens(text, self.max_passage_tokens, getattr(self.proxy, "count_tokens", None))

    def loss(self, question: str, options: dict[str, str], passage: Optional[str], reference: str) -> float:
        from medr2.appraise.prompts import usefulness_prompt

        prompt = usefulness_prompt(question, options, passage and self._clip(passage), self.question_first)
        return mean_nll(self.proxy.continuation_logprobs(prompt, " " + reference.strip()))

    def score(self, question: str, options: dict[str, str], passages: list[str], reference: str) -> tuple[float, list[float]]:
        """Loss without documents, and f_u of each passage."""
        base = self.loss(question, options, None, reference)
        return base, [usefulness(base, self.loss(question, options, p, reference)) for p in passages]
