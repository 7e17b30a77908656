"""Fine rerank score of Med-R2: F = f_h * f_g * (1 + alpha * f_u).

Multiplicative on purpose: a near-zero f_h or f_g sinks a passage whatever its usefulness.

Example::

    >>> from medr2.appraise.fine import fine_score
    >>> fine_score(7, 0.5, 0.4, alpha=1.0)
    4.9
"""

from __future__ import annotations

import math


def fine_score(f_h: float, f_g: float, f_u: float, alpha: float = 1.0) -> float:
    if not 1 <= f_h <= 9:
        raise ValueError(f"f_h must be in [1, 9], got {f_h}")
    if not 0 < f_g < 1:
        raise ValueError(f"f_g must be in (0, 1), got {f_g}")
    if f_u < 0 or math.isnan(f_u):
        raise ValueError(f"f_u must be >= 0, got {f_u}")
    return round(f_h * f_g * (1.0 + alpha * f_u), 6)
