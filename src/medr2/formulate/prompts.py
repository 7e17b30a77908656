"""The prompts of question formulation (our wording): classify a question, rewrite it as a query.

Example::

    >>> classify_messages("Dose of metformin?")[1]
    {'role': 'user', 'content': 'Question: Dose of metformin?'}
"""

from __future__ import annotations

from medr2.formulate.labels import QUESTION_TYPES


def classify_messages(question: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": (
        "Classify a medical question. EBM category: diagnosis (tests, signs, identifying a condition), "
        "therapy (treatment, drugs, doses, management, harms of treatment), prognosis (outcomes, course, "
        "survival), etiology (causes, risk factors, genetics, pathogens), prevention (preventing disease), "
        "cost (costs, cost-effectiveness), others. Question type: one of " + ", ".join(QUESTION_TYPES) + ".")},
        {"role": "user", "content": f"Question: {question}"}]


def reformulate_messages(question: str, category: str, focus: str, language: str = "") -> list[dict[str, str]]:
    lang = f" Write the query and keywords in {language}." if language else ""
    return [{"role": "system", "content": (
        "Rewrite a medical question into a search query for a medical literature database. Keep every "
        "clinical detail, expand abbreviations, use standard medical terms, and add keywords. "
        f"This is a {category} question: the query should target {focus}.{lang}")},
        {"role": "user", "content": f"Question: {question}"}]
