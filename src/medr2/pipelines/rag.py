"""Retrieval-augmented answering: vanilla RAG (hybrid retrieval, coarse order, pack, answer) and
its Med-R2 ablations, each a flag on the same round: ``+reformulator`` (the formulate step
rewrites the query), ``+reranker`` (the fine EBM appraisal replaces the coarse order: relevance
first and F among comparably relevant passages, or F alone with ``appraise.order = "paper"``; the
relevance floor and conflict filtering drop rows, and a note says when none is left), ``+cot``
(a chain of thought before the answer), and their pairs. ``medr2`` (medr2.pipelines.medr2)
repeats the round under the stop rule.

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> s = PIPELINES["+reformulator+reranker"]
    >>> s.method.__name__, s.reformulate, s.fine_rerank, s.cot
    ('RAG', True, True, False)
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from medr2.apply.answer import FAILED, Answer
from medr2.appraise.appraiser import base_rows
from medr2.formulate.formulator import query_text
from medr2.llm.base import stage
from medr2.pipelines.base import Method
from medr2.schema import AskResult, EvidenceRow, RoundRecord


class RAG(Method):
    def answer(self, question: str, options: dict[str, str], res: AskResult) -> None:
        f = self.gated_formulate(question, res)
        if f is None:
            return
        e = self.engine
        reference: Optional[str] = None
        if (self.s.fine_rerank and e.appraiser.usefulness is not None and e.generator is not None
                and e.appraiser.usefulness_reads(question)):
            with stage("draft"):
                reference = self.draft(question, options, res)
        ans, rows = self.rounds_loop(question, options, f.query, f.question_type, reference, res)
        res.evidence = rows
        self.finish(res, ans)

    def rounds_loop(self, question, options, query, qtype, reference, res) -> tuple[Optional[Answer], list]:
        """One round for the single-pass methods (the iterating method overrides)."""
        rec = RoundRecord(round=1, query=query)
        ans, rows, _ = self.one_round(question, options, qtype, rec, reference, res)
        res.rounds.append(rec)
        if ans.method in FAILED:
            rec.stop, rec.stop_reason = True, "the generator failed"
        return ans, rows

    def one_round(self, question: str, options: dict[str, str], qtype: str, rec: RoundRecord,
                  reference: Optional[str], res: AskResult) -> tuple[Answer, list[EvidenceRow], Optional[np.ndarray]]:
        """Retrieve with ``rec.query``, appraise (fine rerank or evidence levels only), pack and
        answer; fills ``rec`` and returns (answer, evidence rows, the coarse set's vectors)."""
        e, notes = self.engine, []
        hits = self.retrieve(rec.query, notes)
        rec.coarse_ids = [h.passage_id for h in hits]
        vecs = None
        if hits and (self.s.fine_rerank or self.iterate):
            with stage("embed"):
                vecs = e.searcher.vectors(hits)
        if self.s.fine_rerank:
            rows = self.appraise(question, options, qtype, hits, vecs, reference, notes, res)
        else:
            with stage("evidence_level"):
                rows = base_rows(hits, e.leveler)
        evidence = self.pack(rows)
        ans = self.gated_generate(question, options, evidence, rows, res)
        ans.notes = notes + ans.notes
        rec.context_ids = [x.passage_id for x in evidence]
        rec.answer, rec.insufficient = ans.answer, ans.insufficient
        return ans, rows, vecs

    def appraise(self, question, options, qtype, hits, vecs, reference, notes, res) -> list[EvidenceRow]:
        """Med-R2's fine rerank with passage and knowledge-graph conflicts reported."""
        e = self.engine
        rows, conflicts = e.appraiser.appraise(question, options, qtype, hits, vecs, reference, notes,
                                               self.floor_min_passages(options))
        res.conflicts = [c.to_dict() for c in conflicts]
        kg_conf = e.graph_conflicts([h.passage_id for h in hits])
        if kg_conf:
            res.conflicts += [{"kind": "triple", **c} for c in kg_conf]
            notes.append(f"{len(kg_conf)} contradicting triple pair(s) in the knowledge graph touch these "
                         "passages (see conflicts)")
        unresolved = [c for c in conflicts if c.dropped is None]
        if unresolved:
            notes.append(f"{len(unresolved)} conflict(s) between passages of equal evidence level were kept: "
                         "the evidence disagrees")
        return rows

    def floor_min_passages(self, options: dict[str, str]) -> int:
        """``appraise.floor_min_passages`` where it applies: generated answers to multiple-choice
        questions (chosen on such answers; the loglik gate already weighs thin evidence down, and a
        free-text answer reads the floor to abstain); 0 elsewhere."""
        generated = bool(options) and self.engine.generator is not None and not self.use_loglik(options)
        return self.engine.config.appraise.floor_min_passages if generated else 0

    def next_query(self, query: str, ans: Optional[Answer]) -> str:
        """The next round's query adds the answer's reasoning (a log-likelihood answer's
        "rationale" is its option scores, which would only add noise to the query)."""
        if ans is None or not ans.rationale or ans.method == "loglik":
            return query
        return query_text(query, ans.rationale, max_chars=self.engine.config.query.max_query_chars) or query
