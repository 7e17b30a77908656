"""The fine order of the appraised rows and the relevance floor (issue 34), as pure functions.

Med-R2's F = f_h * f_g * (1 + alpha * f_u) ignores whether a passage answers the question, so
ordering by F alone promotes guidelines and trials that do not (the paper's order,
``appraise.order = "paper"``: :func:`paper_order`). The default order (:func:`relevance_order`)
sorts by

    key = logit(clip(relevance, 1e-4, 1 - 1e-4)) + w * ln F

where ``relevance`` is the coarse reranker's calibrated probability that the passage bears on
the query and w is ``appraise.relevance_weight``. Relevance decides between clearly different
passages (0.9 against 0.2 is 3.6 logits apart), F decides between comparably relevant ones and
breaks ties (a 20-fold F ratio is 0.9 in the key at w = 0.3). A reference F_ref in
``ln(F / F_ref)`` would add one constant to every key, so it is left out. Rows with no
relevance score (no relevance model) keep their coarse positions; a note says so.

The floor (:func:`apply_floor`): a row whose relevance is below ``appraise.relevance_floor`` is
marked ``dropped: not relevant``, so the packer never puts it in the context.

Example: an off-topic guideline, a relevant cohort study and a relevant trial::

    >>> from medr2.appraise.order import apply_floor, paper_order, relevance_order
    >>> from medr2.schema import EvidenceRow
    >>> rows = [EvidenceRow(passage_id="guideline", doc_id="g", coarse_rank=1, relevance=0.02, F=6.3),
    ...         EvidenceRow(passage_id="cohort", doc_id="c", coarse_rank=2, relevance=0.90, F=2.0),
    ...         EvidenceRow(passage_id="trial", doc_id="t", coarse_rank=3, relevance=0.88, F=4.8)]
    >>> [r.passage_id for r in paper_order(rows)]
    ['guideline', 'trial', 'cohort']
    >>> ranked = relevance_order(rows, weight=0.3)
    >>> [r.passage_id for r in ranked]
    ['trial', 'cohort', 'guideline']
    >>> apply_floor(ranked, 0.05), ranked[2].reason
    (1, 'dropped: not relevant (relevance 0.02 < floor 0.05)')
"""

from __future__ import annotations

import math
from typing import Optional

from medr2.schema import EvidenceRow

# Relevance is clipped to [CLIP, 1 - CLIP] before the logit, so a reranker's 0 or 1 stays finite
# (our choice: 1e-4 bounds the logit at +-9.2, beyond any F term at sane weights).
CLIP = 1e-4
NOT_RELEVANT = "dropped: not relevant"
ORDERS = ("relevance", "paper")


def logit(p: float) -> float:
    """log(p / (1 - p)) of p clipped to [CLIP, 1 - CLIP].

    >>> round(logit(0.5), 6), round(logit(0.0), 2), round(logit(1.0), 2)
    (0.0, -9.21, 9.21)
    """
    p = min(max(float(p), CLIP), 1.0 - CLIP)
    return math.log(p / (1.0 - p))


def relevance_key(relevance: float, F: Optional[float], weight: float) -> float:
    """The sort key of the "relevance" order (higher first): logit(relevance) + weight * ln F."""
    if F is None or not F > 0:
        raise ValueError(f"the relevance order needs F > 0 (the fine score), got {F}")
    if weight < 0:
        raise ValueError(f"relevance weight must be >= 0, got {weight}")
    return logit(relevance) + weight * math.log(F)


def paper_order(rows: list[EvidenceRow]) -> list[EvidenceRow]:
    """Med-R2's order: F descending, the coarse rank breaking ties."""
    return sorted(rows, key=lambda r: (-(r.F or 0.0), r.coarse_rank))


def relevance_order(rows: list[EvidenceRow], weight: float) -> list[EvidenceRow]:
    """Rows with a relevance score sorted by :func:`relevance_key` (the coarse rank breaking
    ties) among the positions they hold in the coarse order; a row without one keeps its coarse
    position. With no score at all this is the coarse order."""
    coarse = sorted(rows, key=lambda r: r.coarse_rank)
    scored = sorted((r for r in coarse if r.relevance is not None),
                    key=lambda r: (-relevance_key(r.relevance, r.F, weight), r.coarse_rank))
    it = iter(scored)
    return [next(it) if r.relevance is not None else r for r in coarse]


def apply_floor(rows: list[EvidenceRow], floor: float, min_kept: int = 0) -> int:
    """Mark every row whose relevance is below ``floor`` as dropped (not kept, reason
    ``dropped: not relevant (...)``); rows without a relevance score are left alone. Returns
    how many were dropped. ``min_kept``: when fewer rows than this would stay, the floor is
    waived and nothing is dropped (:func:`floor_waived`; ``appraise.floor_min_passages``).

    >>> from medr2.schema import EvidenceRow
    >>> thin = [EvidenceRow(passage_id=p, doc_id=p, relevance=x) for p, x in (("a", 0.03), ("b", 0.01))]
    >>> apply_floor(thin, 0.02, min_kept=2), [r.reason for r in thin]
    (0, ['', ''])
    >>> apply_floor(thin, 0.02), thin[1].reason
    (1, 'dropped: not relevant (relevance 0.01 < floor 0.02)')
    """
    if not 0 <= floor < 1:
        raise ValueError(f"relevance floor must be in [0, 1), got {floor}")
    if floor_waived(rows, floor, min_kept):
        return 0
    n = 0
    for r in rows:
        if under_floor(r, floor):
            r.kept = False
            r.reason = f"{NOT_RELEVANT} (relevance {r.relevance:.2f} < floor {floor:.2f})"
            n += 1
    return n


def under_floor(r: EvidenceRow, floor: float) -> bool:
    """Whether the floor drops this row (a row without a relevance score never is)."""
    return r.relevance is not None and r.relevance < floor


def floor_waived(rows: list[EvidenceRow], floor: float, min_kept: int) -> bool:
    """Whether the floor would leave fewer than ``min_kept`` rows (and drop at least one): then
    it is waived."""
    below = sum(under_floor(r, floor) for r in rows)
    return bool(below) and len(rows) - below < min_kept


def waived_floor_note(rows: list[EvidenceRow], floor: float, min_kept: int) -> Optional[str]:
    """The note when the floor was waived (None otherwise)."""
    if not floor_waived(rows, floor, min_kept):
        return None
    above = sum(not under_floor(r, floor) for r in rows)
    return (f"the relevance floor ({floor:.2f}) would leave {above} passage(s), fewer than "
            f"appraise.floor_min_passages ({min_kept}): it is waived for this answer, so passages under it "
            "may reach the context (they take no part in conflicts)")


def missing_relevance_note(rows: list[EvidenceRow]) -> Optional[str]:
    """The note of the "relevance" order when rows carry no relevance score (None when all do).

    >>> missing_relevance_note([EvidenceRow(passage_id="p", doc_id="d")])[:37]
    'no relevance model scored the passage'
    """
    missing = sum(r.relevance is None for r in rows)
    if not missing:
        return None
    if missing == len(rows):
        return ("no relevance model scored the passages: kept the coarse order; F is shown but not used "
                "and the relevance floor is not applied")
    return (f"{missing} of {len(rows)} passages have no relevance score: they keep their coarse position, "
            "F is not used for them and the relevance floor is not applied to them")


def empty_context_note(rows: list[EvidenceRow], floor: float) -> Optional[str]:
    """The note when no row is left for the context and the relevance floor dropped some of them
    (None otherwise: a row is left, or conflicts alone emptied the set)."""
    n = sum(r.reason.startswith(NOT_RELEVANT) for r in rows)
    if not n or any(not r.reason.startswith("dropped") for r in rows):
        return None
    if n == len(rows):
        return (f"no passage passed the relevance floor ({floor:.2f}): all {n} dropped as not relevant; "
                "answered without evidence")
    return (f"no passage is left for the context: {n} of {len(rows)} below the relevance floor ({floor:.2f}), "
            f"{len(rows) - n} dropped in conflicts; answered without evidence")
