"""Med-R2 (Algorithm 2): the reformulated, fine-reranked, chain-of-thought round repeated up to T
times; each round's query adds the last answer's reasoning, the usefulness reference becomes the
last answer, and the stop rule (Acc / mu > delta) ends the loop.

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> s = PIPELINES["medr2"]
    >>> s.method.__name__, s.method.iterate, s.reformulate, s.fine_rerank, s.cot
    ('MedR2', True, True, True, True)
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from medr2.apply.answer import FAILED, Answer, EvidenceItem
from medr2.assess.rounds import NO_VECTORS, assess_round, close_rounds, mark_repeat
from medr2.llm.base import stage
from medr2.pipelines.rag import RAG
from medr2.schema import AskResult, RoundRecord


class MedR2(RAG):
    iterate = True
    # the previous round's context and answer: a round that packs the same passages (in any order)
    # gives the generator nothing new, so its answer is repeated, not generated again; the round
    # keeps the previous round's numbering so the rationale's [n] still point at the right passages
    _last: Optional[tuple[list[EvidenceItem], Answer]] = None

    def gated_generate(self, question, options, evidence, rows, res) -> Answer:
        if self._last is not None and self._last[1].method not in FAILED and (
                self._last[0] == evidence or (self.engine.config.assess.repeat_same_passages
                                              and same_passages(self._last[0], evidence))):
            prev_items, prev = self._last
            if prev_items != evidence:
                renumber(rows, evidence, prev_items)
            return dataclasses.replace(prev, notes=[*prev.notes, "this round packed the same passages as the "
                                                    "previous one: its answer is repeated, not generated again"])
        ans = super().gated_generate(question, options, evidence, rows, res)
        self._last = (list(evidence), ans)
        return ans

    def rounds_loop(self, question: str, options: dict[str, str], query: str, qtype: str,
                    reference: Optional[str], res: AskResult) -> tuple[Optional[Answer], list]:
        e = self.engine
        prev_vecs: Optional[np.ndarray] = None
        answers: list[str] = []
        ans: Optional[Answer] = None
        rows: list = []
        used_reference = reference
        self._last = None
        for t in range(1, self.rounds + 1):
            rq = query if t == 1 else self.next_query(query, ans)
            if t > 1 and rq == res.rounds[-1].query and reference == used_reference:
                mark_repeat(res.rounds[-1])
                break
            used_reference = reference
            rec = RoundRecord(round=t, query=rq)
            ans, rows, vecs = self.one_round(question, options, qtype, rec, reference, res)
            with stage("assess"):
                if t > 1 and prev_vecs is not None:
                    assess_round(rec, vecs, prev_vecs, answers, bool(options), e.config.assess.delta)
            prev_vecs = vecs if vecs is not None else NO_VECTORS
            answers.append(ans.answer)
            res.rounds.append(rec)
            if ans.method in FAILED:  # another round would wait on the same failing generator
                rec.stop, rec.stop_reason = True, "the generator failed"
            if rec.stop:
                break
            if self.s.fine_rerank and e.appraiser.usefulness is not None and ans.method == "llm" \
                    and not ans.insufficient:
                reference = ans.answer if not options else f"{ans.answer}. {options.get(ans.answer, '')}"
        close_rounds(res.rounds, self.rounds)
        return ans, rows


def same_passages(a: list[EvidenceItem], b: list[EvidenceItem]) -> bool:
    """The same passages with the same shown text, whatever their order.

    >>> x, y = EvidenceItem(1, "p1", "t", "paper", 1, "a"), EvidenceItem(2, "p2", "t", "paper", 1, "b")
    >>> same_passages([x, y], [dataclasses.replace(y, n=1), dataclasses.replace(x, n=2)]), same_passages([x], [x, y])
    (True, False)
    """
    key = lambda items: sorted((x.passage_id, x.text) for x in items)  # noqa: E731
    return len(a) == len(b) and key(a) == key(b)


def renumber(rows: list, evidence: list[EvidenceItem], previous: list[EvidenceItem]) -> None:
    """Give this round's context (``evidence`` in place, and its rows) the previous round's order
    and numbers."""
    number = {x.passage_id: x.n for x in previous}
    for r in rows:
        if r.kept and r.passage_id in number:
            r.n = number[r.passage_id]
    evidence[:] = list(previous)
