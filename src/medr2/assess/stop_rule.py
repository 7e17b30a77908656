"""Med-R2 Algorithm 2 stop rule: stop when Acc / mu > delta (delta = 6.85), at most T rounds.

mu is the distance between the mean embeddings of consecutive rounds' coarse sets; Acc is a
label-free answer stability score: the agreement of this round's answer with the previous
rounds' answers (exact option match for multiple choice, token F1 for free answers).

Example::

    >>> from medr2.assess.stop_rule import answer_agreement, should_stop
    >>> answer_agreement("B", ["B", "C"], multiple_choice=True)
    0.5
    >>> should_stop(acc=1.0, mu=0.1, delta=6.85)
    True
"""

from __future__ import annotations

import math
import re
from collections import Counter

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


def mean_shift(prev: np.ndarray, cur: np.ndarray) -> float:
    """mu: L2 distance between the mean embeddings of two coarse sets."""
    if len(prev) == 0 and len(cur) == 0:
        return 0.0  # nothing retrieved twice: the evidence did not move
    if len(prev) == 0 or len(cur) == 0:
        return float("inf")
    return float(np.linalg.norm(np.asarray(prev).mean(axis=0) - np.asarray(cur).mean(axis=0)))


def token_f1(a: str, b: str) -> float:
    ta, tb = Counter(_WORD.findall(a.lower())), Counter(_WORD.findall(b.lower()))
    common = sum((ta & tb).values())
    if common == 0:
        return 0.0
    p, r = common / sum(ta.values()), common / sum(tb.values())
    return 2 * p * r / (p + r)


def answer_agreement(current: str, previous: list[str], multiple_choice: bool) -> float:
    if not previous:
        return 0.0
    if multiple_choice:
        return sum(current.strip().upper() == p.strip().upper() for p in previous) / len(previous)
    return sum(token_f1(current, p) for p in previous) / len(previous)


def should_stop(acc: float, mu: float, delta: float) -> bool:
    """Acc / mu > delta; identical evidence (mu = 0) stops only if the answer agrees at all."""
    if mu <= 1e-9:
        return acc > 0
    if math.isinf(mu):
        return False
    return acc / mu > delta
