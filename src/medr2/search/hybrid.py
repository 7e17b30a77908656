"""Hybrid retrieval as in Med-R2: dense and sparse candidates united, fused, coarse-reranked.

Example: a query is checked and its whitespace collapsed before it is searched::

    >>> from medr2.search.hybrid import Filters, validate_query
    >>> validate_query("  metformin   eGFR 30 ", max_chars=100)
    'metformin eGFR 30'
    >>> Filters(source_types=["guideline"], year_min=2015).active
    True

Searching an index::

    >>> from medr2.index.index import Index                       # doctest: +SKIP
    >>> from medr2.search.hybrid import HybridSearcher             # doctest: +SKIP
    >>> s = HybridSearcher(Index.open(".demo/index"))               # doctest: +SKIP
    >>> s.search("metformin in chronic kidney disease", k=3).hits[0].scores   # doctest: +SKIP
    {'dense': 0.62, 'dense_rank': 1, 'sparse': 9.1, 'sparse_rank': 2, 'fused': 0.97}
"""

from __future__ import annotations

import time
import unicodedata
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from medr2.config import Config
from medr2.index.index import Index, IndexError_
from medr2.schema import Hit, SearchResult, SourceType
from medr2.search.fusion import fuse, rrf_score, union_candidates
from medr2.search.rerank import Reranker, coarse_rerank, load_reranker
from medr2.util.text import detect_language


class QueryError(ValueError):
    """A query that cannot be searched; the message says why."""


def validate_query(query, max_chars: int, setting: str = "query.max_query_chars") -> str:
    if isinstance(query, bytes):
        try:
            query = query.decode("utf-8")
        except UnicodeDecodeError:
            raise QueryError("the query is binary data, not UTF-8 text") from None
    if not isinstance(query, str):
        raise QueryError(f"the query must be text, got {type(query).__name__}")
    if not query.strip():
        raise QueryError("the query is empty; give a question or keywords")
    if len(query) > max_chars:
        raise QueryError(
            f"the query is {len(query):,} characters; the limit is {max_chars:,} ({setting})"
        )
    bad = sum(1 for ch in query if (unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn") and ch not in "\t\n\r")
              or ch == "\ufffd")
    if bad:
        raise QueryError(f"the query holds {bad} control or undecodable character(s): binary data is not a query")
    return " ".join(query.split())


@dataclass
class Filters:
    source_types: list[str] = field(default_factory=list)
    year_min: Optional[int] = None
    year_max: Optional[int] = None
    languages: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        valid = {s.value for s in SourceType}
        bad = [s for s in self.source_types if s not in valid]
        if bad:
            raise QueryError(f"unknown source type(s) {bad}; choose from {sorted(valid)}")

    @property
    def active(self) -> bool:
        return bool(self.source_types or self.languages or self.year_min is not None or self.year_max is not None)


class HybridSearcher:
    def __init__(self, index: Index, config: Optional[Config] = None, reranker: Optional[Reranker] = None):
        self.index = index
        self.config = config or index.config
        self.reranker = reranker or load_reranker(self.config.rerank, self.config.dense.device)

    def candidates(self, query: str, filters: Optional[Filters] = None,
                   timings: Optional[dict[str, float]] = None,
                   context: Optional[dict] = None) -> dict[int, dict[str, Optional[float]]]:
        """The union of dense and sparse candidates with each retriever's score and rank
        (``context``, when given, receives the query vector, terms and filter used)."""
        cfg = self.config.fusion
        context = context if context is not None else {}
        timings = timings if timings is not None else {}
        allowed = None
        if filters is not None and filters.active:
            allowed = self.index.allowed(filters.source_types, filters.year_min, filters.year_max,
                                         filters.languages)
        context["allowed"] = allowed
        t = time.perf_counter()
        dense = []
        if cfg.dense_k > 0:
            qvec = context["qvec"] = self.index.encoder.encode_query(query)
            timings["encode_ms"] = (time.perf_counter() - t) * 1000
            t = time.perf_counter()
            dense = self.index.search_dense(qvec, cfg.dense_k, allowed)
            timings["dense_ms"] = (time.perf_counter() - t) * 1000
        t = time.perf_counter()
        sparse = []
        if cfg.sparse_k > 0:
            terms = context["terms"] = self.index.tokenizer.tokens(query, detect_language(query))
            sparse = self.index.search_sparse(terms, cfg.sparse_k, allowed, text=query)
        timings["sparse_ms"] = (time.perf_counter() - t) * 1000
        if self.index.splade is not None:
            t = time.perf_counter()
            splade = self.index.search_splade(query, cfg.sparse_k, allowed)
            timings["splade_ms"] = (time.perf_counter() - t) * 1000
            return union_candidates(dense, sparse, splade=splade)
        return union_candidates(dense, sparse)

    def search(self, query, k: int = 10, filters: Optional[Filters] = None, fusion: Optional[str] = None) -> SearchResult:
        query = validate_query(query, self.config.query.max_query_chars)
        if k < 1:
            raise QueryError("k must be at least 1")
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        hits = self.pool(query, k, filters, fusion, timings=timings)
        t = time.perf_counter()
        hits, note = coarse_rerank(self.reranker, query, hits, k, self.config.rerank.max_unknown_share)
        timings["rerank_ms"] = (time.perf_counter() - t) * 1000
        timings["total_ms"] = (time.perf_counter() - t0) * 1000
        return SearchResult(query=query, hits=hits[:k], timings_ms=timings, notes=[note] if note else [])

    def pool(self, query: str, k: int, filters: Optional[Filters] = None, fusion: Optional[str] = None,
             exclude_docs: frozenset[str] = frozenset(), timings: Optional[dict[str, float]] = None) -> list[Hit]:
        """The fused candidates the coarse reranker reads: the top max(k, rerank.top_n) of the
        union, in fused order. The one fusion path of ``search`` and every pipeline: on an index
        that fuses server-side (Milvus hybrid search) RRF runs there. ``exclude_docs``: documents
        never returned (an evaluation question's own source), removed before fusion."""
        timings = timings if timings is not None else {}
        ctx: dict = {}
        cands = self.candidates(query, filters, timings, ctx)
        n_cands = len(cands)
        if exclude_docs and cands:
            rows = self.index.store.passages(list(cands))
            for i in [i for i, r in rows.items() if r["doc_id"] in exclude_docs]:
                del cands[i]
        method = fusion or self.config.fusion.method
        cfg = self.config.fusion
        if method == "rrf" and hasattr(self.index, "fuse_rrf") and self.index.splade is None and "qvec" in ctx \
                and "terms" in ctx:
            # the server fuses (Milvus hybrid search); the candidates keep each retriever's score
            t = time.perf_counter()
            ranked = [(i, v) for i, v in self.index.fuse_rrf(ctx["qvec"], ctx["terms"], query, cfg.dense_k,
                                                              cfg.sparse_k, n_cands, cfg.rrf_k, ctx["allowed"])
                      if i in cands]
            for i, v in ranked:
                cands[i]["fused"] = v
            timings["fusion_ms"] = (time.perf_counter() - t) * 1000
        else:
            ranked = fuse(cands, method, cfg.rrf_k, cfg.dense_weight)
        pool = ranked[: max(k, self.config.rerank.top_n)]
        return self.hits([i for i, _ in pool], cands)

    def pool_many(self, queries: list[str], k: int, exclude_docs: frozenset[str] = frozenset()) -> list[Hit]:
        """Several phrasings of one question (the question and its reformulation): each query's
        pool, fused by reciprocal rank (fusion.rrf_k), cut to max(k, rerank.top_n). A passage
        keeps the scores of the first query that found it; ``expanded`` is its fused score and
        ``best_rank`` its best rank in any one query's pool (the reranker's prior reads it)."""
        if len(queries) == 1:
            return self.pool(queries[0], k, exclude_docs=exclude_docs)
        first: dict[str, Hit] = {}
        ranks: dict[str, list[Optional[int]]] = {}
        for qi, q in enumerate(queries):
            for rank, h in enumerate(self.pool(q, k, exclude_docs=exclude_docs), 1):
                first.setdefault(h.passage_id, h)
                ranks.setdefault(h.passage_id, [None] * len(queries))[qi] = rank
        fused = {pid: rrf_score(r, self.config.fusion.rrf_k) for pid, r in ranks.items()}
        order = sorted(fused, key=lambda pid: (-fused[pid], min(r for r in ranks[pid] if r is not None)))
        out = []
        for pid in order[: max(k, self.config.rerank.top_n)]:
            h = first[pid]
            h.scores["expanded"] = round(fused[pid], 6)
            h.scores["best_rank"] = min(r for r in ranks[pid] if r is not None)
            h.score = fused[pid]
            out.append(h)
        return out

    def vectors(self, hits: list[Hit]) -> np.ndarray:
        """Stored vectors of the hits (heading path + text, as indexed); encoded afresh only if absent."""
        rowids = [self.index.store.rowid_of(h.passage_id) for h in hits]
        if all(r is not None for r in rowids):
            try:
                return self.index.vectors_for(rowids)
            except IndexError_:
                pass
        return np.asarray(self.index.encoder.encode_passages([h.text for h in hits]), dtype=np.float32)

    def hits(self, rowids: list[int], cands: dict[int, dict[str, Optional[float]]]) -> list[Hit]:
        rows = self.index.store.passages(rowids)
        out = []
        for i in rowids:
            r = rows.get(i)
            if r is None:  # removed since the segments were read
                continue
            c = cands[i]
            out.append(Hit(
                passage_id=r["passage_id"], doc_id=r["doc_id"], title=r["title"] or "",
                source_type=r["source_type"], heading_path=r["heading_path"], text=r["text"],
                language=r["language"] or "en", year=r["year"], publication_types=r["publication_types"],
                score=float(c.get("fused") or 0.0), scores=dict(c),
            ))
        return out

