"""The formulate step as one component: classify the question (EBM category, question type),
cut it to the retrieval limit, and, when the method asks, reformulate it (the generator first,
the offline reformulator when it fails or is absent).

Example::

    >>> from medr2.config import Config
    >>> from medr2.formulate.formulator import Formulator, query_text
    >>> f = Formulator.build(Config(), generator=None)
    >>> got = f.formulate("Is metformin safe in chronic kidney disease?", reformulate=False)
    >>> got.query, got.reformulation
    ('Is metformin safe in chronic kidney disease?', None)
    >>> query_text("see [1] and [2]", "why?", max_chars=20)
    'see and why?'
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from medr2.config import Config
from medr2.formulate.classify import LLMClassifier, OfflineClassifier, classify_with_fallback
from medr2.formulate.reformulate import LLMReformulator, OfflineReformulator, Reformulation
from medr2.llm.base import LLM, LLMError, stage


def query_text(*parts: str, max_chars: int) -> str:
    """Join model-produced text into a retrieval query: [n] markers and control characters out,
    whitespace collapsed, cut to the query limit (never an error: it is not user input)."""
    text = " ".join(p for p in parts if p)
    text = re.sub(r"\[\d+\]|\[\?\]", " ", text)
    text = "".join(ch for ch in text if ch.isprintable() or ch in " \t\n").replace("\ufffd", " ")
    return " ".join(text.split())[:max_chars].strip()


@dataclass
class Formulation:
    """What the formulate step hands to retrieval: the query, the question type the appraisal
    needs, and what the answer record shows (classification, reformulation, notes)."""

    query: str
    question_type: str
    classification: dict[str, Any]
    reformulation: Optional[dict[str, Any]] = None
    notes: list[str] = field(default_factory=list)


class Formulator:
    def __init__(self, classifier, offline_classifier: OfflineClassifier, reformulator: Optional[LLMReformulator],
                 config: Config):
        self.classifier = classifier
        self.offline_classifier = offline_classifier
        self.reformulator = reformulator
        self.config = config
        self._offline_reformulator: Optional[OfflineReformulator] = None

    @classmethod
    def build(cls, cfg: Config, generator: Optional[LLM]) -> "Formulator":
        """``formulate.method``: "llm" needs a generator; "auto" uses one when configured, but
        classifies offline with the bundled Qwen (it scored below the offline classifier on the
        benchmark, bench/README.md); "offline" never calls the generator."""
        method = cfg.formulate.method
        use_llm = generator is not None and method in ("auto", "llm")
        if method == "llm" and generator is None:
            raise LLMError("formulate.method = 'llm' needs a generator; set llm.generator or use 'offline'")
        offline = OfflineClassifier.load(cfg.formulate.classifier_path)
        offline.min_confidence = cfg.formulate.classifier_min_confidence
        bundled = str(getattr(generator, "bundled", "") or "")
        llm_classify = use_llm and not (method == "auto" and bundled.startswith("bundled:qwen"))
        classifier = LLMClassifier(generator, cfg.llm.json_retries) if llm_classify else offline
        f = cfg.formulate
        reformulator = LLMReformulator(generator, cfg.llm.json_retries, f.reformulate_max_tokens,
                                       f.retry_cut_reformulation) if use_llm else None
        return cls(classifier, offline, reformulator, cfg)

    @property
    def offline_reformulator(self) -> OfflineReformulator:
        """Category cue terms plus terminology synonyms (the terminologies load on first use)."""
        if self._offline_reformulator is None:
            from medr2.formulate.terms import load_table

            f = self.config.formulate
            table = load_table(f.terminologies, f.synonym_files) if (f.terminologies or f.synonym_files) else None
            self._offline_reformulator = OfflineReformulator(table, f.max_synonyms)
        return self._offline_reformulator

    def _too_long_for_llm(self, question: str, notes: list[str]) -> bool:
        """True (with a note) when the question is longer than
        ``formulate.llm_reformulation_max_question_tokens``: reformulated offline instead."""
        limit = self.config.formulate.llm_reformulation_max_question_tokens
        if limit <= 0:
            return False
        n = self.reformulator.llm.count_tokens(question)
        if n <= limit:
            return False
        notes.append(f"the question has {n} tokens (over formulate.llm_reformulation_max_question_tokens = "
                     f"{limit}); used the offline reformulator")
        return True

    def formulate(self, question: str, reformulate: bool, language: str = "") -> Formulation:
        """``language``: the language the reformulation should be written in ('' = the question's)."""
        with stage("classify"):
            cls, note = classify_with_fallback(self.classifier, self.offline_classifier, question)
        out = Formulation(question, cls.question_type, cls.to_dict(), notes=[note] if note else [])
        limit = self.config.query.max_query_chars
        if len(question) > limit:
            out.query = query_text(question, max_chars=limit)
            out.notes.append(f"the question is {len(question):,} characters; retrieval used its first {limit:,} "
                             "(query.max_query_chars)")
        if reformulate:
            with stage("reformulate"):
                ref: Optional[Reformulation] = None
                if self.reformulator is not None and not self._too_long_for_llm(question, out.notes):
                    try:
                        ref = self.reformulator.reformulate(question, cls.ebm_category, language)
                    except LLMError as err:
                        out.notes.append(f"LLM reformulation failed ({err}); used the offline reformulator")
                if ref is None:
                    ref = self.offline_reformulator.reformulate(question, cls.ebm_category)
            out.reformulation = ref.to_dict()
            out.query = query_text(ref.query, max_chars=limit) or question
        return out
