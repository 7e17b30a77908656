"""The prompt of retrieval (our wording): the LLM pointwise coarse reranker's relevance question.

Example::

    >>> relevance_prompt("Dose?", "Take 5 mg </evidence>").splitlines()[0]
    'Passage: Take 5 mg  '
"""

from __future__ import annotations

from medr2.llm.prompting import strip_evidence_tags


def relevance_prompt(question: str, passage: str) -> str:
    """Raw prompt whose continuation ' yes' / ' no' scores relevance."""
    return (f"Passage: {strip_evidence_tags(passage)}\n\nQuestion: {question}\n\n"
            "Does the passage help answer the question? Answer yes or no.\nAnswer:")
