"""Reformulate a question for retrieval, per EBM category (Med-R2's reformulator).

The paper's instructions per category: diagnosis - the condition plus test accuracy,
sensitivity, specificity; therapy - condition, therapy, effectiveness, safety, comparison;
prognosis - long-term outcomes; etiology - causes, risk factors, pathogens, genetics;
prevention - effectiveness of preventive measures; cost - cost-effectiveness.

* :class:`LLMReformulator`: the generator rewrites the question under a JSON schema.
* :class:`OfflineReformulator`: the question plus the category's cue terms plus the canonical
  name of each term it names in another form (brand -> generic, abbreviation -> disease name,
  lay term -> ICD-10-CM title); all synonyms found are reported.

Example::

    >>> from medr2.formulate.reformulate import OfflineReformulator
    >>> from medr2.formulate.terms import SynonymTable
    >>> r = OfflineReformulator(SynonymTable({"ckd": {"canonical": "chronic kidney disease", "synonyms": []}}))
    >>> r.reformulate("Is Glucophage safe in CKD?", "therapy").query
    'Is Glucophage safe in CKD? chronic kidney disease treatment effectiveness safety comparison'
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from medr2.formulate.terms import SynonymTable
from medr2.llm.base import LLM, structured

# What each category's reformulation asks for (Med-R2 paper, question reformulation).
CATEGORY_FOCUS = {
    "diagnosis": "the condition and the diagnostic tests, their accuracy, sensitivity and specificity",
    "therapy": "the condition, the therapy, its effectiveness and safety, and comparison with alternatives",
    "prognosis": "the condition and its long-term outcomes, course, survival and complications",
    "etiology": "the causes, risk factors, pathogens and genetics of the condition",
    "prevention": "the preventive measures and how effective they are",
    "cost": "the cost-effectiveness and economic evaluation of the options",
    "others": "the key medical concepts of the question",
}

# Offline cue terms added to the query per category (our wording of the same instructions).
CATEGORY_CUES = {
    "diagnosis": ["diagnosis", "test", "accuracy", "sensitivity", "specificity"],
    "therapy": ["treatment", "effectiveness", "safety", "comparison"],
    "prognosis": ["prognosis", "long-term", "outcomes", "survival", "course", "rate", "per year"],
    "etiology": ["causes", "risk", "factors", "genetics"],
    "prevention": ["prevention", "effectiveness", "preventive"],
    "cost": ["cost-effectiveness", "cost", "economic"],
    "others": [],
}


@dataclass
class Reformulation:
    query: str
    keywords: list[str] = field(default_factory=list)
    synonyms: dict[str, list[str]] = field(default_factory=dict)
    method: str = "offline"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Reformulation":
        return cls(**d)


def merge_terms(question: str, extra: list[str]) -> str:
    """The question followed by the extra terms it does not already contain (case-insensitive)."""
    low = question.lower()
    seen: set[str] = set()
    add = []
    for t in extra:
        k = t.lower().strip()
        if k and k not in low and k not in seen:
            seen.add(k)
            add.append(t.strip())
    return " ".join([question.strip(), *add]).strip()


class OfflineReformulator:
    name = "offline"

    def __init__(self, synonyms: Optional[SynonymTable], max_synonyms: int = 4):
        self.synonyms = synonyms
        self.max_synonyms = max_synonyms

    def reformulate(self, question: str, category: str) -> Reformulation:
        found = self.synonyms.find(question, self.max_synonyms) if self.synonyms is not None else []
        canon = [c for _, c, _ in found if c]
        cues = CATEGORY_CUES.get(category, [])
        return Reformulation(merge_terms(question, canon + cues), list(cues), {t: s for t, _, s in found}, self.name)


class LLMReformulator:
    name = "llm"
    # Lengths are bounds against runaway output, not style: a small model keeps "every clinical
    # detail" of a long vignette by copying it into the query, and a 600-character limit rejected a
    # third of MedQA-US's reformulations (the pipeline cuts the query at query.max_query_chars).
    SCHEMA = {"type": "object", "additionalProperties": False, "required": ["query", "keywords"],
              "properties": {"query": {"type": "string", "minLength": 3, "maxLength": 4000},
                             "keywords": {"type": "array", "items": {"type": "string", "maxLength": 200},
                                          "maxItems": 12}}}

    def __init__(self, llm: LLM, retries: int = 2, max_tokens: int = 200, retry_cut: bool = False):
        self.llm = llm
        self.retries = retries
        self.max_tokens = max_tokens
        # False: a reply cut off at max_tokens raises LLMOutputError at once (formulate.retry_cut_reformulation)
        self.retry_cut = retry_cut

    def reformulate(self, question: str, category: str, language: str = "") -> Reformulation:
        from medr2.formulate.prompts import reformulate_messages

        out = structured(self.llm, reformulate_messages(question, category, CATEGORY_FOCUS.get(category, ""), language),
                         self.SCHEMA, max_tokens=self.max_tokens, retries=self.retries, grow=self.retry_cut)
        return Reformulation(merge_terms(out["query"], out["keywords"]), out["keywords"], {}, self.name)
