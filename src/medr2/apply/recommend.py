"""Recommendation-level answers (issue 36): the guideline recommendations of the packed evidence
that apply to the question, graded, cited and ordered by strength, with the parts of the
question that none of them covers. On the extractive path (no generator) this list *is* the
answer: it contains only what the guidelines say. With a generator it is given to the model as
the structure of its answer (:mod:`medr2.apply.prompts`).

Selection (constants in ``[recommend]``, chosen on dev questions):

1. every recommendation of every packed passage (:func:`medr2.appraise.recommendations.extract`)
   outside method, scope and harms sections, ungraded ones taking the grade of their list's
   header, each with the section heading it sits under (``section_headings``); outside
   guidelines only graded statements count;
2. relevance of each to the question: the calibrated cross-encoder on ``title: statement``
   mixed with the share of the question's content words that the statement, read after its
   section heading, holds (``overlap_weight``), or that share alone when no cross-encoder is loaded
   (with ``llm_answer = "quote"`` the generator judges each statement: medr2.apply.judge);
3. when the best packed passage's relevance (the coarse reranker's) is below ``abstain_below``
   and no statement is close to the question in the index's embedding space (cosine below
   ``abstain_dense_below``, read only with the encoder it was chosen for), none applies:
   insufficient evidence, saying what was searched (without a relevance model: the best
   statement's overlap below ``overlap_abstain_below``);
4. otherwise the best, then every other statement at least ``min_relevance`` and ``keep_ratio``
   times the best, skipping near-duplicates (same direction, ``duplicate_overlap`` of the shorter
   one's content words), up to ``max_items``, from the best statement's guideline only when
   ``one_guideline`` (with a generator the ``llm_*`` values replace these four:
   :meth:`medr2.config.RecommendConfig.for_generator`);
   4b. with ``fill_parts``, a part of a several-part question that no chosen statement covers gets
   the statement most relevant to that part alone (at least ``fill_min_relevance``), beyond ``max_items``;
5. ordered by strength (graded strength, or firm before conditional wording), then relevance.

Example::

    >>> from medr2.apply.answer import EvidenceItem
    >>> from medr2.apply.recommend import Recommender
    >>> from medr2.config import RecommendConfig
    >>> ev = [EvidenceItem(1, "p1", "Muscle cramps", "guideline", 3,
    ...       "- Quinine should be avoided for routine treatment of muscle cramps (Level A).\\n"
    ...       "- Naftidrofuryl may be considered for muscle cramps (Level C).")]
    >>> r = Recommender(RecommendConfig(), scorer=None).answer("Should quinine treat muscle cramps?", ev)
    >>> [(x.grade, x.n) for x in r.recommendations], r.insufficient
    ([('Level A', 1)], False)
"""

from __future__ import annotations

import copy
import re
from typing import Callable, Optional, Sequence, Union

import numpy as np

from medr2.apply.answer import EvidenceItem
from medr2.apply.focus import content_words, overlap_scores
from medr2.appraise.recommendations import (Statement, advice_section, continued, extract, header_grade, lead_items,
                                             section_heading)
from medr2.apply.recommend_answer import RecommendationAnswer, as_answer
from medr2.config import RecommendConfig
from medr2.llm.base import NoLogprobsError
from medr2.schema import Recommendation

Scorer = Callable[[str, list[str]], np.ndarray]  # (question, texts) -> calibrated relevance
_PART = re.compile(r"\?\s*|[;,]?\s+(?:and|or|but)\s+(?=(?:what|which|how|when|where|why|who|should|is|are|does|do|"
                   r"can|could|would|will|must)\b)", re.I)


def question_parts(question: str) -> list[str]:
    """The parts a question asks, split at question marks and at a conjunction that starts a
    new question ("..., and what benefit can I promise?").

    >>> question_parts("Should I refer her for thymectomy, and what benefit can I promise?")
    ['Should I refer her for thymectomy', 'what benefit can I promise']
    """
    return [p.strip(" ,;.") for p in _PART.split(question) if len(content_words(p)) >= 1]


def covers(statement: str, part: str, share: float) -> bool:
    """Whether a statement holds ``share`` of a question part's content words (a five-letter
    prefix counts: "screened" covers "screening")."""
    return bool(overlap_scores(part, [statement])[0] >= share) if content_words(part) else False


_BRACKETED = re.compile(r"\([^()]*\)|\[[^\[\]]*\]")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def quantities(text: str) -> set[str]:
    """The numbers a statement states outside brackets (its grade tag's digits left out)."""
    return set(_NUMBER.findall(_BRACKETED.sub(" ", text)))


def near_duplicate(a: str, b: str, share: float) -> bool:
    """Two statements sharing ``share`` of the shorter one's content words and stating the same
    numbers: "Breast milk may be ingested up to 4 h before ..." repeats nothing of "A light meal
    may be ingested up to 6 h before ...".

    >>> near_duplicate("Clear liquids may be ingested up to 2 h before surgery.",
    ...                "Clear liquids may be ingested for up to 2 h before elective surgery.", 0.8)
    True
    >>> near_duplicate("Breast milk may be ingested up to 4 h before surgery.",
    ...                "Infant formula may be ingested up to 6 h before surgery.", 0.5)
    False
    """
    wa, wb = content_words(a), content_words(b)
    if not wa or not wb:
        return False
    qa, qb = quantities(a), quantities(b)
    if qa and qb and qa != qb:
        return False
    return len(wa & wb) / min(len(wa), len(wb)) >= share


def with_section(section: Optional[str], statement: str) -> str:
    """The text whose term overlap with the question (or a part of it) is a statement's: the
    statement after the section heading it sits under."""
    return f"{section}. {statement}" if section else statement


class Recommender:
    """Chooses the applicable recommendations of the packed evidence (module docstring)."""

    def __init__(self, config: RecommendConfig, scorer: Optional[Scorer] = None,
                 previous: Optional[Callable[[list[str]], dict[str, list[str]]]] = None,
                 similarity: Optional[Scorer] = None,
                 following: Optional[Callable[[list[str]], dict[str, list[tuple[str, str]]]]] = None,
                 reads: Optional[Callable[[str], bool]] = None, judge: Optional[Scorer] = None,
                 fallback: Optional["Recommender"] = None):
        """``scorer``: calibrated relevance of texts to a question (medr2's cross-encoder), or None
        for term overlap. ``previous``: for the passage ids given, the texts before each in its
        document under the same headings (nearest last), for a list header's grade and the section
        heading a statement sits under; None reads none. ``similarity``:
        cosine of the question and each text in the index's embedding space (the abstention's
        second signal), or None when the index's encoder is not the one ``abstain_dense_model``
        names. ``following``: for the passage ids given, (passage id, text) of the next passages in
        its document under the same headings, nearest first, where a list's lead-in that ends a
        passage finds its items; None reads none. ``reads``: whether ``scorer`` can read a question
        (medr2.search.rerank: its vocabulary knows most of the question's word pieces); a question it
        cannot read is scored by term overlap, with the overlap's floors. ``judge``: the generator's
        P("yes") that a statement (after its section heading) answers the question
        (medr2.apply.judge), read in place of ``scorer``; coverage then reads term overlap.
        ``fallback``: the selection used, with a note, when the judge cannot score (a generator that
        gives no token log-probabilities: NoLogprobsError); None, or any other LLMError, goes through."""
        self.c, self.scorer, self.previous, self.similarity = config, scorer, previous, similarity
        self.following, self.reads, self.judge, self.fallback = following, reads, judge, fallback

    @property
    def overlap_only(self) -> bool:
        """Relevance is term overlap alone: neither a judge nor a cross-encoder is read."""
        return self.scorer is None and self.judge is None

    def candidates(self, evidence: Sequence[EvidenceItem]) -> list[tuple[EvidenceItem, Statement]]:
        read = [(e, extract(e.text)) for e in evidence if advice_section(e.heading_path)]
        self.continue_lists(read)
        wanted = [e.passage_id for e, stmts in read
                  if stmts and (self.c.section_headings or any(s.grade is None for s in stmts))]
        before = self.previous(wanted) if (wanted and self.previous is not None and self.c.header_lookback) else {}
        out, seen = [], set()
        for e, stmts in read:
            earlier = before.get(e.passage_id, [])[-self.c.header_lookback:]
            inherited = header_grade(earlier)
            # the nearest heading before the passage, read once for its statements
            above = section_heading(earlier) if (self.c.section_headings and earlier) else None
            for s in stmts:
                if s.grade is None and inherited[0] is not None:
                    s.grade, s.strength = inherited
                # the heading in force in its own passage (extract), else the nearest one before the passage
                s.section = (s.section or above) if self.c.section_headings else None
                if s.grade is None and e.source_type != "guideline":
                    continue  # a paper's or an opinion's "should" is not a guideline recommendation
                key = " ".join(s.statement.lower().split())
                if key not in seen:
                    seen.add(key)
                    out.append((e, s))
        return out

    def continue_lists(self, read: list[tuple[EvidenceItem, list[Statement]]]) -> None:
        """A passage that ends inside a list ("... if the person has:", and maybe some items): the
        list takes the items that open the next passages of its document (in place)."""
        open_ = {e.passage_id: i for i, (e, stmts) in enumerate(read) if stmts and stmts[-1].open_list}
        if not open_ or self.following is None:
            return
        for pid, after in self.following(list(open_)).items():
            stmts = read[open_[pid]][1]
            items, used, cut = lead_items([text for _, text in after], stmts[-1].items)
            if items:
                stmts[-1] = continued(stmts[-1], items, [p for p, _ in after[:used]], cut)

    def mix(self, question: str, texts: Sequence[tuple[Optional[str], str, Optional[str]]]) -> np.ndarray:
        """Relevance of (title, statement, section) texts to a question: (1 - ``overlap_weight``) x
        the cross-encoder on "title: statement" + ``overlap_weight`` x the term overlap of the
        section and statement (a statement is read with the heading it sits under, "Management of
        Severe CDI"); the overlap alone without a cross-encoder."""
        ce, overlap = self.halves(question, texts)
        return overlap if ce is None else (1 - self.c.overlap_weight) * ce + self.c.overlap_weight * overlap

    def halves(self, question: str, texts: Sequence[tuple[Optional[str], str, Optional[str]]]
               ) -> tuple[Optional[np.ndarray], np.ndarray]:
        """The two parts :meth:`mix` weighs: the judge's or else the cross-encoder's relevance (None
        without either) and the term overlap, each over the same (title, statement, section) texts."""
        if not texts:
            return (None if self.overlap_only else np.zeros(0)), np.zeros(0)
        read = [with_section(sec, st) for _, st, sec in texts]  # each statement after its section heading
        overlap = overlap_scores(question, read)
        if self.judge is not None:
            return np.asarray(self.judge(question, read)), overlap
        if self.scorer is None:
            return None, overlap
        ce = np.asarray(self.scorer(question, [f"{t}: {st}" if t else st for t, st, _ in texts]), dtype=np.float64)
        return ce, overlap

    def relevance(self, question: str, cands: list[tuple[EvidenceItem, Statement]]) -> np.ndarray:
        return self.mix(question, [(e.title, s.statement, s.section) for e, s in cands])

    def choose(self, question: str, cands: list[tuple[EvidenceItem, Statement]],
               rel: Union[np.ndarray, Callable[[], np.ndarray]],
               best_passage: Optional[float] = None,
               best_similarity: Union[None, float, Callable[[], Optional[float]]] = None,
               part_relevance: Optional[Callable[[str, list[int]], np.ndarray]] = None) -> RecommendationAnswer:
        """Steps 3-5 of the module docstring over scored candidates (pure; the bench replays it).
        ``best_passage``: the best calibrated relevance of a packed passage (the coarse
        reranker's), which decides abstention together with ``best_similarity`` (the highest
        cosine of the question and a statement, or a function computing it, called only where
        the passage relevance alone would abstain; None: passage relevance alone); when
        ``best_passage`` is None, no statement reaching the floor does (``overlap_*`` floors
        without a cross-encoder). ``part_relevance(part, indices)``: the relevance of those
        candidates to one part of the question (None: computed with :meth:`mix`), read by
        ``fill_parts``. ``rel`` may be a function: called after a passage-relevance abstention."""
        c = self.c
        parts = question_parts(question) or [question]
        if not cands:
            return RecommendationAnswer([], parts, parts, True, 0)
        if best_passage is None or self.overlap_only:
            rel = rel() if callable(rel) else rel
        if self.overlap_only:
            abstain, floor = float(rel.max()) < c.overlap_abstain_below, c.overlap_min_relevance
        elif best_passage is not None:
            abstain = best_passage < c.abstain_below
            sim = best_similarity() if (abstain and callable(best_similarity)) else best_similarity
            abstain = abstain and (sim is None or sim < c.abstain_dense_below)
            floor = c.min_relevance
        else:  # passages without a relevance score: no statement reaching the floor
            abstain, floor = float(rel.max()) < c.min_relevance, c.min_relevance
        if abstain:
            return RecommendationAnswer([], parts, parts, True, len(cands))
        rel = rel() if callable(rel) else rel
        order = sorted(range(len(cands)), key=lambda i: -rel[i])
        source = self.source(cands, order, rel, floor)
        if source is not None:  # the list comes from that guideline, its best statement first
            order = [i for i in order if cands[i][0].title == source]
        best = float(rel[order[0]])
        chosen = [order[0]]
        top_source = cands[order[0]][0].title
        for i in order[1:]:
            if len(chosen) >= c.max_items:
                break
            if c.one_guideline and cands[i][0].title != top_source:
                continue
            if rel[i] < max(floor, c.keep_ratio * best):
                break
            if self.repeats(cands, i, chosen):
                continue
            chosen.append(i)
        if c.fill_parts and len(parts) > 1:
            self.fill(parts, cands, order, chosen, part_relevance)
        chosen.sort(key=lambda i: (-cands[i][1].rank, -rel[i]))
        recs = []
        for i in chosen:
            e, s = cands[i]
            recs.append(Recommendation(
                n=e.n, passage_id=e.passage_id, title=e.title, statement=s.statement, grade=s.grade,
                strength=s.strength, direction=s.direction, population=s.population, section=s.section,
                continued_in=s.continued_in, relevance=round(float(rel[i]), 4)))
        self.coverage(parts, recs)
        covered = {p for r in recs for p in r.covers}
        return RecommendationAnswer(recs, parts, [p for p in parts if p not in covered], False, len(cands))

    def fill(self, parts: list[str], cands: list[tuple[EvidenceItem, Statement]], order: list[int],
             chosen: list[int], part_relevance: Optional[Callable[[str, list[int]], np.ndarray]] = None) -> None:
        """Step 4b (``fill_parts``): for each part of the question that no chosen statement covers
        (relevance to the part at least ``cover_min_relevance``), the candidate of ``order`` most
        relevant to that part among those that are no near-duplicate of a chosen one, when at least
        ``fill_min_relevance`` (in place)."""
        c = self.c
        score = part_relevance or (lambda part, idx: self.mix(
            part, [(cands[i][0].title, cands[i][1].statement, cands[i][1].section) for i in idx]))
        pool = [i for i in order if not c.one_guideline or cands[i][0].title == cands[order[0]][0].title]
        for part in parts:
            rel = dict(zip(pool, score(part, pool)))
            if any(rel.get(j, 0.0) >= c.cover_min_relevance for j in chosen):
                continue
            fresh = [i for i in pool if i not in chosen and not self.repeats(cands, i, chosen)]
            best = max(fresh, key=lambda i: rel[i], default=None)
            if best is not None and rel[best] >= c.fill_min_relevance:
                chosen.append(best)

    def repeats(self, cands: list[tuple[EvidenceItem, Statement]], i: int, chosen: list[int]) -> bool:
        """Whether candidate ``i`` is a near-duplicate of a chosen one with the same direction
        (opposite advice is never a repeat)."""
        return any(cands[i][1].direction == cands[j][1].direction and
                   near_duplicate(cands[i][1].statement, cands[j][1].statement, self.c.duplicate_overlap)
                   for j in chosen)

    def source(self, cands: list[tuple[EvidenceItem, Statement]], order: list[int], rel: np.ndarray,
               floor: float) -> Optional[str]:
        """The guideline (title) a ``one_guideline`` list comes from: with ``guideline_by =
        "passage"`` the one holding the most relevant packed passage that has a candidate reaching
        ``floor`` (the coarse reranker reads whole passages: on dev it named the right guideline
        more often than the best single statement did), else that of the best statement; None: no
        restriction."""
        if not self.c.one_guideline:
            return None
        if self.c.guideline_by == "passage":
            scored = [(e.relevance, -k) for k, (e, _) in enumerate(cands) if e.relevance is not None and rel[k] >= floor]
            if scored:
                return cands[-max(scored)[1]][0].title
        return cands[order[0]][0].title

    def best_similarity(self, question: str, cands: list[tuple[EvidenceItem, Statement]]) -> Optional[float]:
        """The highest cosine of the question and a candidate statement (None without an encoder
        or candidates)."""
        if self.similarity is None or not cands:
            return None
        return float(np.max(self.similarity(question, [s.statement for _, s in cands])))

    def coverage(self, parts: list[str], recs: list[Recommendation]) -> None:
        """Which parts of the question each chosen recommendation covers. A one-part question is
        covered by every chosen recommendation (each passed the relevance bar against it). With
        several parts, a part is covered by a statement whose relevance to that part alone (the
        same cross-encoder and overlap mix) is at least ``cover_min_relevance``, or, without a
        cross-encoder, that holds ``cover_share`` of its content words."""
        if len(parts) == 1:
            for r in recs:
                r.covers = list(parts)
            return
        if self.judge is None and self.scorer is not None and recs:
            texts = [(r.title, r.statement, r.section) for r in recs]
            for p in parts:
                for r, x in zip(recs, self.mix(p, texts)):
                    if x >= self.c.cover_min_relevance:
                        r.covers.append(p)
            return
        for r in recs:
            r.covers = [p for p in parts if covers(r.statement, p, self.c.cover_share)]

    def answer(self, question: str, evidence: Sequence[EvidenceItem]) -> RecommendationAnswer:
        """The recommendation answer of a free-text question over the packed evidence; its
        ``answer`` field is the extractive answer (cited quotes, one per line)."""
        if self.judge is None and self.scorer is not None and self.reads is not None and not self.reads(question):
            overlap = copy.copy(self)
            overlap.scorer = overlap.reads = None
            return overlap.answer(question, evidence)
        cands = self.candidates(evidence)
        rels = [e.relevance for e in evidence if e.relevance is not None]
        best = max(rels) if rels else None
        try:
            ra = self.choose(question, cands, lambda: self.relevance(question, cands), best,
                             lambda: self.best_similarity(question, cands))
        except NoLogprobsError as err:  # a server that is down or failing is reported, not worked around
            if self.judge is None or self.fallback is None:
                raise
            ra = self.fallback.answer(question, evidence)
            how = "the cross-encoder" if self.fallback.scorer is not None else "term overlap"
            ra.answer.notes.append(f"quote mode: the generator could not judge the statements ({err}); they were "
                                   f"chosen by {how}, as without a generator")
            return ra
        ra.answer, ra.judged = as_answer(ra, len(evidence)), self.judge is not None
        return ra
