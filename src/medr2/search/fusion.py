"""Fusion of dense and sparse candidate lists (pure functions).

Med-R2 takes the union of the dense and sparse candidate sets; every candidate keeps each
retriever's score and 1-based rank (None where that retriever did not return it). The union
is ordered by one of:

* ``union``: the weighted mean of min-max normalised scores (a missing score counts 0);
* ``rrf``: reciprocal rank fusion, sum of 1 / (k + rank) (Cormack, Clarke and Buettcher 2009;
  k = 60 there).

Example::

    >>> c = union_candidates([(1, 0.9), (2, 0.5)], [(2, 7.0), (3, 3.0)])
    >>> sorted(c)
    [1, 2, 3]
    >>> [i for i, _ in fuse(c, "rrf", rrf_k=60)]
    [2, 1, 3]
"""

from __future__ import annotations

from typing import Optional


def union_candidates(dense: list[tuple[int, float]], sparse: list[tuple[int, float]],
                     **more: list[tuple[int, float]]) -> dict[int, dict[str, Optional[float]]]:
    """Union of ranked lists; ``more`` adds retrievers by name (e.g. ``splade=[...]``)."""
    lists = {"dense": dense, "sparse": sparse, **more}
    out: dict[int, dict[str, Optional[float]]] = {}
    for name, ranked in lists.items():
        for rank, (i, score) in enumerate(ranked, 1):
            c = out.setdefault(i, {f: None for n in lists for f in (n, f"{n}_rank")})
            c[name] = float(score)
            c[f"{name}_rank"] = rank
    return out


def _retrievers(cands: dict[int, dict[str, Optional[float]]]) -> list[str]:
    first = next(iter(cands.values()), {})
    return [k[:-5] for k in first if k.endswith("_rank")]


def rrf_score(ranks: list[Optional[int]], k: int) -> float:
    return sum(1.0 / (k + r) for r in ranks if r is not None)


def minmax(values: dict[int, float]) -> dict[int, float]:
    if not values:
        return {}
    lo, hi = min(values.values()), max(values.values())
    if hi - lo < 1e-12:
        return {i: 1.0 for i in values}
    return {i: (v - lo) / (hi - lo) for i, v in values.items()}


def fuse(cands: dict[int, dict[str, Optional[float]]], method: str = "union", rrf_k: int = 60,
         dense_weight: float = 0.5) -> list[tuple[int, float]]:
    """Order candidates; returns (id, fused score) best first and stores ``fused`` in each.

    With ``union`` the dense retriever weighs ``dense_weight`` and the others share the rest.
    """
    names = _retrievers(cands)
    if method == "rrf":
        scored = {i: rrf_score([c[f"{n}_rank"] for n in names], rrf_k) for i, c in cands.items()}
    elif method == "union":
        others = [n for n in names if n != "dense"]
        weights = {n: (dense_weight if n == "dense" else (1 - dense_weight) / max(len(others), 1)) for n in names}
        norm = {n: minmax({i: c[n] for i, c in cands.items() if c[n] is not None}) for n in names}
        scored = {i: sum(weights[n] * norm[n].get(i, 0.0) for n in names) for i in cands}
    else:
        raise ValueError(f"unknown fusion method {method!r}; use 'union' or 'rrf'")
    for i, v in scored.items():
        cands[i]["fused"] = v

    def key(item):  # ties: better best rank first, then id for determinism
        i, v = item
        ranks = [cands[i][f"{n}_rank"] for n in names if cands[i][f"{n}_rank"] is not None]
        return (-v, min(ranks) if ranks else 10**9, i)

    return sorted(scored.items(), key=key)
