"""The generator as the judge of which guideline statements apply (``recommend.llm_answer =
"quote"``, issue 36): for each candidate statement, read after the section heading it sits
under, the probability that the model continues "Does this recommendation answer the question or
a part of it?" with " yes" rather than " no". Pointwise, so a statement's score does not depend on
the others; the question comes first, so llama.cpp's prefix cache reads it once per question.

The bundled 1.5B model ranks a guideline's statements better than medr2's cross-encoder (trained
on passages) or term overlap do (bench/README.md, "Recommendation answers": within-question
ROC-AUC on the dev questions), at the price of two short scorings per statement.

Example::

    >>> from medr2.apply.judge import StatementJudge
    >>> class Fake:  # log-probabilities: " yes" likelier where the text names cramps
    ...     def continuation_logprobs(self, prompt, continuation):
    ...         cramps = "recommendation: Quinine" in prompt
    ...         return [-0.1] if (continuation == " yes") == cramps else [-2.5]
    >>> judge = StatementJudge(Fake())
    >>> [round(float(p), 2) for p in judge("Is quinine right for cramps?", ["Quinine should be avoided.",
    ...                                                                      "Statins are advised."])]
    [0.92, 0.08]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from medr2.apply.answer import Answer
from medr2.llm.base import LLM
from medr2.llm.prompting import strip_evidence_tags
from medr2.search.llm_rerank import yes_probability


def judge_prompt(question: str, statement: str) -> str:
    """Raw prompt whose continuation " yes" / " no" says whether a statement answers the question
    (the statement is quoted data: evidence tags are stripped)."""
    return (f"Question: {question}\n\nGuideline recommendation: {strip_evidence_tags(statement)}\n\n"
            "Does this recommendation answer the question or a part of it? Answer yes or no.\nAnswer:")


class StatementJudge:
    """(question, statements) -> P("yes") per statement, from a generator's log-probabilities."""

    def __init__(self, llm: LLM):
        self.llm = llm
        self.name = f"judge:{getattr(llm, 'name', 'llm')}"

    def __call__(self, question: str, statements: Sequence[str]) -> np.ndarray:
        return np.asarray([yes_probability(self.llm, judge_prompt(question, s)) for s in statements],
                          dtype=np.float64)


# Answer.method of a quoted list whose statements the generator judged (recommend.llm_answer = "quote")
JUDGED = "judged-recommendations"


def as_judged(ans: Answer, judge: str) -> Answer:
    """The extractive answer of a judged selection (:func:`medr2.apply.recommend_answer.as_answer`),
    marked as such: its method, and notes that name the judge (or the mode, on an abstention)
    instead of "no LLM"."""
    ans.method = JUDGED
    lead = "quote mode: " if ans.insufficient else f"{judge} judged which statements apply; "
    ans.notes = [lead + n[len("no LLM: "):] if n.startswith("no LLM: ") else n for n in ans.notes]
    return ans
