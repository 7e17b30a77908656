"""The bookkeeping of Med-R2's iterative rounds (Algorithm 2): each round after the first records
the evidence shift mu, the answer agreement Acc and their ratio, and stops when Acc / mu > delta;
a round that would repeat the previous one is not run.

Example::

    >>> import numpy as np
    >>> from medr2.schema import RoundRecord
    >>> from medr2.assess.rounds import assess_round
    >>> rec = RoundRecord(round=2, query="q", answer="B")
    >>> v = np.ones((3, 4), dtype=np.float32)
    >>> assess_round(rec, v, v, ["B"], multiple_choice=True, delta=6.85)
    >>> rec.stop, rec.acc, rec.mu, rec.stop_reason
    (True, 1.0, 0.0, 'same evidence as the previous round and a consistent answer')
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from medr2.assess.stop_rule import answer_agreement, mean_shift, should_stop
from medr2.schema import RoundRecord

NO_VECTORS = np.zeros((0, 1), dtype=np.float32)  # a round that retrieved nothing

REPEAT_REASON = ("the next round would repeat this one: the answer gave no rationale to widen the query, "
                 "so the same evidence would return")


def assess_round(rec: RoundRecord, vecs: Optional[np.ndarray], prev_vecs: np.ndarray, previous_answers: list[str],
                 multiple_choice: bool, delta: float) -> None:
    """Fill ``rec``'s mu, Acc, ratio and stop decision against the previous round's evidence
    vectors and answers (``vecs`` None: this round retrieved nothing)."""
    cur = vecs if vecs is not None else NO_VECTORS
    mu = mean_shift(prev_vecs, cur)
    rec.acc = round(answer_agreement(rec.answer, previous_answers, multiple_choice), 4)
    rec.ratio = None if mu in (0.0, float("inf")) else round(rec.acc / mu, 4)
    rec.mu = None if mu == float("inf") else round(mu, 6)
    rec.stop = should_stop(rec.acc, rec.mu if rec.mu is not None else float("inf"), delta)
    if rec.stop:
        rec.stop_reason = (f"Acc/mu = {rec.ratio} > delta = {delta}" if rec.ratio is not None
                           else "same evidence as the previous round and a consistent answer")


def mark_repeat(previous: RoundRecord) -> None:
    """Every stage is deterministic: the same query and usefulness reference would bring back the
    same evidence and answer, so the loop ends at the previous round."""
    previous.stop = True
    previous.stop_reason = REPEAT_REASON


def close_rounds(rounds: list[RoundRecord], max_rounds: int) -> None:
    """The last round's stop reason when the loop ran out of rounds."""
    if rounds and not rounds[-1].stop:
        rounds[-1].stop_reason = f"reached T = {max_rounds} rounds"
