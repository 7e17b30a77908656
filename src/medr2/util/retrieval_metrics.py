"""Retrieval metrics with binary relevance (pure functions).

Example::

    >>> recall_at_k(["a", "x", "b"], {"a", "b", "c"}, 2)
    0.3333333333333333
    >>> mrr(["x", "a"], {"a"})
    0.5
    >>> round(ndcg_at_k(["a", "x", "b"], {"a", "b"}, 3), 4)
    0.9197
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence


def recall_at_k(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Share of the gold items found in the top k."""
    if not gold:
        return 0.0
    return len(set(ranked[:k]) & gold) / len(gold)


def mrr(ranked: Sequence[str], gold: set[str], k: int | None = None) -> float:
    """Reciprocal rank of the first gold item (0 when none is ranked, or none within k)."""
    for i, item in enumerate(ranked[:k] if k else ranked, 1):
        if item in gold:
            return 1.0 / i
    return 0.0


def ndcg_at_k(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Normalised discounted cumulative gain with binary gains."""
    dcg = sum(1.0 / math.log2(i + 1) for i, item in enumerate(ranked[:k], 1) if item in gold)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(gold), k) + 1))
    return dcg / ideal if ideal else 0.0


def mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        return float("nan")
    v = sorted(values)
    pos = (len(v) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)
