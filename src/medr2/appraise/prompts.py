"""The prompts of evidence appraisal (our wording): usefulness, document type, evidence level and
conflicts. Passages are fenced as quoted data (:mod:`medr2.llm.prompting`).

Example::

    >>> usefulness_prompt("Dose?", {"A": "5 mg", "B": "10 mg"}, None)
    'Question: Dose?\\nA. 5 mg\\nB. 10 mg\\nAnswer:'
"""

from __future__ import annotations

from typing import Optional

from medr2.formulate.labels import DOC_TYPE_DESCRIPTIONS
from medr2.llm.prompting import fence, options_block, strip_evidence_tags


def usefulness_prompt(question: str, options: dict[str, str], passage: Optional[str],
                      question_first: bool = False) -> str:
    """Raw prompt for the proxy LM: documents (if any), question; the reference answer follows.
    ``question_first``: the question and options, then the document, so that the prompts of one
    question's passages share their opening (and the proxy its KV state).

    >>> usefulness_prompt("Dose?", {}, "Give 5 mg.", question_first=True)
    'Question: Dose?\\n\\nDocument: Give 5 mg.\\nAnswer:'
    """
    opts = ("\n" + options_block(options)) if options else ""
    if question_first:
        doc = f"\n\nDocument: {strip_evidence_tags(passage)}" if passage else ""
        return f"Question: {question}{opts}{doc}\nAnswer:"
    doc = f"Document: {strip_evidence_tags(passage)}\n\n" if passage else ""
    return f"{doc}Question: {question}{opts}\nAnswer:"


def doc_type_messages(passage: str) -> list[dict[str, str]]:
    lines = "\n".join(f"- {k}: {v}" for k, v in DOC_TYPE_DESCRIPTIONS.items())
    return [{"role": "system", "content": (
        "Rate how well a passage fits each document type, as probabilities from 0 to 1 that sum to 1.\n" + lines)},
        {"role": "user", "content": fence(1, passage)}]


def level_messages(passage: str, title: str, levels: list[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": (
        "Name the study design or source kind the passage comes from. Choose one of: " + ", ".join(levels)
        + ", unknown.")},
        {"role": "user", "content": f"Title: {title}\n" + fence(1, passage)}]


def conflict_messages(a: str, b: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": (
        "Do two medical passages make contradictory claims about the same thing (for example one says a drug "
        "is recommended and the other that it is contraindicated in the same situation)? Different topics or "
        "compatible details are not contradictions.")},
        {"role": "user", "content": fence(1, a) + "\n\n" + fence(2, b)}]
