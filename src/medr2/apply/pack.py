"""Fill the context window w with the best-scoring passages (Med-R2: default 4K tokens).

Example::

    >>> from medr2.apply.pack import pack
    >>> pack([("a", 3000), ("b", 2000), ("c", 900)], budget=4096)
    ['a', 'c']
"""

from __future__ import annotations


def pack(ranked: list[tuple[str, int]], budget: int) -> list[str]:
    """Greedy in rank order: take each passage that still fits (skip, do not stop, on one that does not)."""
    out, used = [], 0
    for pid, tokens in ranked:
        if used + tokens <= budget:
            out.append(pid)
            used += tokens
    return out
