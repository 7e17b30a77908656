"""Fine appraisal of the coarse set (Med-R2): evidence level, document-type fit, usefulness,
F = f_h * f_g * (1 + alpha * f_u), the fine order, the relevance floor, conflict filtering;
every factor kept on the row.

The fine order is ``appraise.order`` (medr2.appraise.order): "relevance" (the coarse reranker's
calibrated relevance first, F among comparably relevant passages; rows below
``appraise.relevance_floor`` are dropped as not relevant before conflicts are looked for, so an
off-topic passage never knocks out a relevant one) or "paper" (F alone, Med-R2's order).

Example: the evidence level of each coarse hit (the rows vanilla RAG packs); the fine score
adds document-type fit, usefulness and conflicts (``Appraiser.appraise``)::

    >>> from medr2.appraise.appraiser import base_rows
    >>> from medr2.appraise.evidence_level import EvidenceLeveler
    >>> from medr2.config import AppraiseConfig
    >>> from medr2.schema import Hit
    >>> a = AppraiseConfig()
    >>> hit = Hit(passage_id="p1", doc_id="pmid:1", title="Metformin after eGFR decline", source_type="paper",
    ...           publication_types=["Randomized Controlled Trial"], text="Patients were randomized to ...")
    >>> row = base_rows([hit], EvidenceLeveler(a.levels, a.unknown_level))[0]
    >>> row.level, row.design, row.f_h
    (4, 'randomized controlled trial', 6)
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from medr2.appraise.conflicts import Conflict, resolve
from medr2.appraise.doc_type import doc_type_fit
from medr2.appraise.evidence_level import EvidenceLeveler, f_h
from medr2.appraise.fine import fine_score
from medr2.appraise.order import (ORDERS, apply_floor, empty_context_note, missing_relevance_note, paper_order,
                                  relevance_order, under_floor, waived_floor_note)
from medr2.appraise.usefulness import UsefulnessScorer
from medr2.formulate.labels import DOC_TYPES
from medr2.llm.base import LLMError, stage
from medr2.schema import EvidenceRow, Hit
from medr2.util.text import detect_language


def base_rows(hits: list[Hit], leveler: EvidenceLeveler) -> list[EvidenceRow]:
    """Rows with the evidence level of each hit, in coarse order (no fine score yet), and its
    relevance when the coarse reranker gave one (``hit.scores["relevance"]``)."""
    rows = []
    for rank, h in enumerate(hits, 1):
        lv = leveler.assess(h.source_type.value, h.publication_types, h.title, h.text)
        rows.append(EvidenceRow(passage_id=h.passage_id, doc_id=h.doc_id, title=h.title, source_type=h.source_type,
                                heading_path=h.heading_path, text=h.text, coarse_rank=rank,
                                coarse_score=round(float(h.score), 6), relevance=_relevance(h), level=lv.level,
                                design=lv.design, level_source=lv.source, f_h=f_h(lv.level)))
    return rows


def _relevance(h: Hit) -> Optional[float]:
    v = h.scores.get("relevance")
    return None if v is None else round(float(v), 6)


class Appraiser:
    """``order``, ``relevance_weight``, ``relevance_floor``: appraise.order, .relevance_weight,
    .relevance_floor (the engine passes its config)."""

    def __init__(self, leveler: EvidenceLeveler, doc_typer, usefulness: Optional[UsefulnessScorer], conflicts,
                 expected_doc_types: dict[str, list[str]], alpha: float = 1.0, *, order: str,
                 relevance_weight: float, relevance_floor: float, usefulness_languages: tuple[str, ...] = ()):
        if order not in ORDERS:
            raise ValueError(f"appraise.order is one of {', '.join(ORDERS)}, not {order!r}")
        if relevance_weight < 0 or not 0 <= relevance_floor < 1:
            raise ValueError(f"relevance weight must be >= 0 and floor in [0, 1) (got {relevance_weight}, "
                             f"{relevance_floor})")
        self.order, self.relevance_weight, self.relevance_floor = order, relevance_weight, relevance_floor
        self.leveler = leveler
        self.doc_typer = doc_typer
        self.usefulness = usefulness
        self.conflicts = conflicts
        self.expected = expected_doc_types
        self.alpha = alpha
        self.usefulness_languages = tuple(usefulness_languages)

    def usefulness_reads(self, question: str) -> bool:
        """Whether the usefulness proxy reads the question's language (appraise.usefulness_languages;
        empty = every language)."""
        return not self.usefulness_languages or detect_language(question) in self.usefulness_languages

    def appraise(self, question: str, options: dict[str, str], question_type: str, hits: list[Hit],
                 vectors: Optional[np.ndarray], reference: Optional[str], notes: list[str],
                 min_kept: int = 0) -> tuple[list[EvidenceRow], list[Conflict]]:
        """The appraised rows in the fine order and the conflicts found. ``min_kept``: the relevance
        floor is waived when fewer rows would pass it (the caller decides when: generated
        multiple-choice answers, ``appraise.floor_min_passages``)."""
        with stage("evidence_level"):
            rows = base_rows(hits, self.leveler)
        if not rows:
            return rows, []
        with stage("doc_type"):
            try:
                dists = self.doc_typer.distributions([r.text for r in rows], vectors)
            except LLMError as e:
                notes.append(f"document types not computed ({e}); every type equally likely")
                dists = [{t: 1.0 / len(DOC_TYPES) for t in DOC_TYPES} for _ in rows]
        expected = self.expected.get(question_type) or self.expected.get("factual", [])
        for r, d in zip(rows, dists):
            r.doc_type = max(d, key=d.get)
            r.f_g = round(doc_type_fit(d, expected), 6)
        fus = [0.0] * len(rows)
        if self.usefulness is not None and not self.usefulness_reads(question):
            notes.append(f"usefulness not computed: the proxy model reads {', '.join(self.usefulness_languages)}, "
                         f"the question is '{detect_language(question)}' (appraise.usefulness_languages); f_u = 0 "
                         "for every passage")
        elif self.usefulness is not None and reference:
            with stage("usefulness"):
                try:
                    _, fus = self.usefulness.score(question, options, [r.text for r in rows], reference)
                except LLMError as e:
                    notes.append(f"usefulness not computed ({e}); f_u = 0 for every passage")
                    fus = [0.0] * len(rows)
        elif self.usefulness is not None:
            notes.append("no reference answer (no generator): f_u = 0 for every passage")
        for r, fu in zip(rows, fus):
            r.f_u = round(fu, 6)
            r.F = fine_score(r.f_h, r.f_g, r.f_u, self.alpha)
        rows = self.ordered(rows, notes, min_kept)
        # a row the floor would have dropped (kept only because the floor was waived) takes no part
        # in conflicts: evidence level decides a conflict, and an off-topic guideline must not
        # knock out a relevant study
        live = [r for r in rows if not r.reason.startswith("dropped") and not self.below_floor(r)]
        found: list[Conflict] = []
        if self.conflicts is not None:
            with stage("conflicts"):
                pairs = self.conflicts.pairs([(r.passage_id, r.text) for r in live],
                                             {r.passage_id: r.doc_id for r in live})
                found = resolve(pairs, {r.passage_id: r.level for r in live})
            by_id = {r.passage_id: r for r in rows}
            for c in found:
                if c.dropped:
                    keep = c.b if c.dropped == c.a else c.a
                    by_id[c.dropped].reason = (f"dropped: conflicts with {keep} (level {by_id[keep].level} beats "
                                               f"{by_id[c.dropped].level}); {c.reason}")
        if self.order == "relevance":
            _note(notes, empty_context_note(rows, self.relevance_floor))
        return rows, found

    def below_floor(self, r: EvidenceRow) -> bool:
        return self.order == "relevance" and under_floor(r, self.relevance_floor)

    def ordered(self, rows: list[EvidenceRow], notes: list[str], min_kept: int = 0) -> list[EvidenceRow]:
        """The rows in the fine order; in the relevance order, those under the floor marked dropped
        (unless fewer than ``min_kept`` would stay)."""
        if self.order == "paper":
            return paper_order(rows)
        rows = relevance_order(rows, self.relevance_weight)
        _note(notes, missing_relevance_note(rows))
        _note(notes, waived_floor_note(rows, self.relevance_floor, min_kept))
        apply_floor(rows, self.relevance_floor, min_kept)
        return rows


def _note(notes: list[str], note: Optional[str]) -> None:
    if note and note not in notes:
        notes.append(note)
