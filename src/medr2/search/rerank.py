"""Coarse reranking, the last step of retrieval: one interface, a cross-encoder or the plain fused order.

The default is medr2's own cross-encoder (``bundled:medr2-reranker``, shipped in
``medr2/models/reranker`` and rebuilt by ``medr2 train-reranker``); a directory written by that
command, or any sentence-transformers CrossEncoder (a hub id or path such as
BAAI/bge-reranker-v2-m3 or MedCPT's cross-encoder) works too. Every cross-encoder sets
``scores["rerank"]`` (its raw score) and ``scores["relevance"]`` (a probability: calibrated for
medr2's models, the model's own sigmoid otherwise), which the appraisal reads. medr2's own
models run on ONNX Runtime once ``medr2 build-runtime`` has exported them (``rerank.runtime``).

Example::

    >>> from medr2.search.rerank import FusedOrder
    >>> from medr2.schema import Hit
    >>> hits = [Hit(passage_id="a", doc_id="d", score=0.2), Hit(passage_id="b", doc_id="d", score=0.9)]
    >>> [h.passage_id for h in FusedOrder().rerank("q", hits, top_n=1)]
    ['a']
"""

from __future__ import annotations

from typing import Optional, Protocol, Sequence

import numpy as np

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


def _set_scores(hits: list[Hit], raw, relevance, top_n: int) -> list[Hit]:
    for h, s, p in zip(hits, raw, relevance):
        h.score = h.scores["rerank"] = round(float(s), 6)
        h.scores["relevance"] = round(float(p), 6)
    return sorted(hits, key=lambda h: -h.score)[:top_n]


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
        pairs = [(query, h.embedding_text()) for h in hits]
        scores = np.asarray(self.model.predict(pairs, batch_size=self.batch_size, show_progress_bar=False),
                            dtype=np.float64).reshape(len(hits), -1)[:, -1]
        # most rerankers end in a sigmoid; a raw logit is squashed the same way
        inside = bool(np.all((scores >= 0) & (scores <= 1)))
        return _set_scores(hits, scores, scores if inside else 1 / (1 + np.exp(-scores)), top_n)

    def unknown_shares(self, texts: list[str]) -> np.ndarray:
        from medr2.search.cross_encoder import hf_unknown_shares

        return hf_unknown_shares(self.model.tokenizer, texts, int(getattr(self.model, "max_seq_length", None) or 512))


class MedR2Reranker:
    """medr2's own cross-encoder (:mod:`medr2.search.cross_encoder`), calibrated relevance."""

    def __init__(self, spec: str, batch_size: int = 32, quantize: bool = True, runtime: str = "auto",
                 max_length: int = 0):
        from medr2.search.cross_encoder import load_cross_encoder

        self.model = load_cross_encoder(spec, quantize=quantize, batch_size=batch_size, runtime=runtime,
                                        max_length=max_length)
        self.name = self.model.name
        self.runtime = self.model.runtime  # "onnx" or "torch"

    def rerank(self, query: str, hits: list[Hit], top_n: int) -> list[Hit]:
        if not hits:
            return []
        raw = self.model.logits(query, [h.embedding_text() for h in hits])
        # an expanded pool (question + reformulation, fused) records each passage's best rank in
        # any one query's list: the prior trusts the phrasing that found it best
        ranks = [int(h.scores.get("best_rank") or i + 1) for i, h in enumerate(hits)]
        score = self.model.with_prior(self.model.with_siblings(raw, [h.doc_id for h in hits]), ranks)
        return _set_scores(hits, score, self.model.calibrate(score), top_n)

    def unknown_shares(self, texts: list[str]) -> np.ndarray:
        return self.model.unknown_shares(texts)


def load_reranker(cfg: RerankConfig, device: str = "cpu") -> Reranker:
    if not cfg.cross_encoder:
        return FusedOrder()
    from medr2.search.cross_encoder import is_model_dir

    if cfg.cross_encoder.lower() == "bundled:medr2-reranker" or is_model_dir(cfg.cross_encoder):
        return MedR2Reranker(cfg.cross_encoder, cfg.batch_size, cfg.quantize, cfg.runtime, cfg.max_length)
    if cfg.runtime == "onnx":
        raise RuntimeError(f"rerank.runtime = 'onnx' runs medr2's own cross-encoders; {cfg.cross_encoder!r} is a "
                           "sentence-transformers model, which runs on torch: set rerank.runtime to 'auto' or 'torch'")
    return CrossEncoderReranker(cfg.cross_encoder, cfg.batch_size, device)


def unread(shares: Sequence[float], max_unknown: float) -> list[bool]:
    """Which texts a model cannot read: more than ``max_unknown`` of their word pieces unknown to
    its vocabulary (``rerank.max_unknown_share``; 1 reads everything).

    >>> unread([0.0, 0.69, 0.2], 0.2)
    [False, True, False]
    """
    return [float(x) > max_unknown for x in shares]


def reads(reranker: Reranker, text: str, max_unknown: float) -> bool:
    """Whether ``reranker`` can read ``text`` (:func:`unread`); one without ``unknown_shares`` (the
    fused order, an LLM) reads everything."""
    shares = getattr(reranker, "unknown_shares", None)
    return shares is None or max_unknown >= 1.0 or not unread(shares([text]), max_unknown)[0]


def _unscore(hits: list[Hit]) -> None:
    """Drop the relevance and rerank scores an earlier rerank may have left on these hits."""
    for h in hits:
        h.scores.pop("relevance", None)
        h.scores.pop("rerank", None)


def coarse_rerank(reranker: Reranker, query: str, hits: list[Hit], top_n: int,
                  max_unknown: float = 1.0) -> tuple[list[Hit], Optional[str]]:
    """The coarse rerank to ``top_n`` with a note, reading only what the model can read.

    A cross-encoder whose vocabulary lacks a text's script (the bundled MiniLM maps about 70% of a
    Chinese question's pieces to its unknown token) scores noise, and a calibrated noise score
    would reorder the evidence, pass the relevance floor and feed the evidence gate. So a query it
    cannot read keeps the fused order and no passage gets a relevance score; passages it cannot read
    keep their fused positions unscored, the others are reordered among the remaining positions.
    Downstream a passage without relevance keeps its coarse position (medr2.appraise.order) and the
    gate weighs such evidence by its weight alone. A reranker without ``unknown_shares`` (the fused
    order, an LLM) reads everything.

    >>> class Ascii(FusedOrder):  # a toy model that reads ASCII only and orders by length
    ...     def unknown_shares(self, texts): return [sum(not c.isascii() for c in t) / len(t) for t in texts]
    ...     def rerank(self, query, hits, top_n): return sorted(hits, key=lambda h: -len(h.text))[:top_n]
    >>> hits = [Hit(passage_id=p, doc_id=p, text=t) for p, t in (("a", "short"), ("b", "肝癌"), ("c", "longer one"))]
    >>> out, note = coarse_rerank(Ascii(), "dose?", hits, 3, 0.2)
    >>> [h.passage_id for h in out], note
    (['c', 'b', 'a'], '1 of 3 passages are in a script the coarse reranker (fused) cannot read: they keep their fused position, unscored')
    >>> out, note = coarse_rerank(Ascii(), "剂量？", hits, 2, 0.2)
    >>> [h.passage_id for h in out], note[:60]
    (['a', 'b'], 'the coarse reranker (fused) cannot read the question (100% o')
    """
    shares = getattr(reranker, "unknown_shares", None)
    if shares is None or max_unknown >= 1.0 or not hits:
        return reranker.rerank(query, hits, top_n), None
    q = float(shares([query])[0])
    if q > max_unknown:
        kept = hits[:top_n]
        _unscore(kept)  # scores of an earlier rerank (another phrasing of the question) would be stale
        return kept, (f"the coarse reranker ({reranker.name}) cannot read the question ({q:.0%} of its word "
                      f"pieces are unknown to the model, over rerank.max_unknown_share {max_unknown}): "
                      "kept the fused order, with no relevance scores")
    skip = unread(shares([h.embedding_text() for h in hits]), max_unknown)
    if not any(skip):
        return reranker.rerank(query, hits, top_n), None
    readable = [h for h, u in zip(hits, skip) if not u]
    scored = reranker.rerank(query, readable, len(readable)) if readable else []
    if len(scored) != len(readable):
        raise RuntimeError(f"the coarse reranker {reranker.name} returned {len(scored)} of the {len(readable)} "
                           "passages it was given to order")
    it = iter(scored)
    merged = [h if u else next(it) for h, u in zip(hits, skip)][:top_n]
    _unscore([h for h, u in zip(hits, skip) if u])
    n = sum(skip[:top_n])
    if not n:
        return merged, None
    return merged, (f"{n} of {len(merged)} passages are in a script the coarse reranker ({reranker.name}) "
                    "cannot read: they keep their fused position, unscored")
