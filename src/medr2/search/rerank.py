"""Coarse reranking, the last step of retrieval: one interface, a cross-encoder or the plain fused order.

Example::

    >>> from medr2.search.rerank import FusedOrder
    >>> from medr2.schema import Hit
    >>> hits = [Hit(passage_id="a", doc_id="d", score=0.2), Hit(passage_id="b", doc_id="d", score=0.9)]
    >>> [h.passage_id for h in FusedOrder().rerank("q", hits, top_n=1)]
    ['a']
"""

from __future__ import annotations

from typing import Protocol

from medr2.config import RerankConfig
from medr2.schema import Hit


class Reranker(Protocol):
    name: str

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> list[Hit]: ...


class FusedOrder:
    """Keeps the fusion order (used when no reranker is configured)."""

    name = "fused"

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> list[Hit]:
        return hits[:top_n]


class CrossEncoderReranker:
    """sentence-transformers CrossEncoder by hub id or local path (e.g. BAAI/bge-reranker-v2-m3)."""

    def __init__(self, model: str, batch_size: int = 16, device: str = "cpu"):
        self.name = model
        self.batch_size = batch_size
        try:
            from sentence_transformers import CrossEncoder

            self.model = CrossEncoder(model, device=device)
        except Exception as e:
            raise RuntimeError(
                f"cannot load cross-encoder {model!r} ({type(e).__name__}: {str(e)[:300]}); give a local "
                "model directory, or clear rerank.cross_encoder to keep the fused order"
            ) from None

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> list[Hit]:
        if not hits:
            return []
        pairs = [(query, h.text) for h in hits]
        scores = self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False)
        for h, s in zip(hits, scores):
            h.scores["rerank"] = float(s)
            h.score = float(s)
        ranked = sorted(hits, key=lambda h: -h.score)
        return ranked[:top_n]


def load_reranker(cfg: RerankConfig, device: str = "cpu") -> Reranker:
    if not cfg.cross_encoder:
        return FusedOrder()
    return CrossEncoderReranker(cfg.cross_encoder, cfg.batch_size, device)
