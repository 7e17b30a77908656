"""The engine: every component a method draws from, built once per index and model set.

Example (an empty index, no generator: the coarse order is the fused one)::

    >>> import tempfile
    >>> from medr2.index.index import Index
    >>> from medr2.pipelines.engine import Engine
    >>> index = Index.open(tempfile.mkdtemp() + "/index", create=True)
    >>> e = Engine(index, index.config, generator=None, scorer=None)
    >>> e.model_names()["coarse_reranker"], e.index_languages()
    ('bundled:medr2-reranker', set())
    >>> e.close()
"""

from __future__ import annotations

import functools
import itertools
from pathlib import Path
from typing import Optional

from medr2.apply.answer import CitedAnswerer
from medr2.apply.context import token_counter
from medr2.apply.focus import SentenceFocus
from medr2.apply.judge import StatementJudge
from medr2.apply.recommend import Recommender
from medr2.appraise.appraiser import Appraiser
from medr2.appraise.recommendations import MAX_LIST_ITEMS
from medr2.appraise.conflicts import LLMConflicts, RuleConflicts
from medr2.appraise.doc_type import doc_typer_for
from medr2.appraise.evidence_level import EvidenceLeveler
from medr2.appraise.usefulness import UsefulnessScorer
from medr2.config import Config
from medr2.formulate.formulator import Formulator
from medr2.formulate.language import index_languages
from medr2.index.index import Index
from medr2.llm.base import LLM, LLMError
from medr2.llm.cache import LLMCache
from medr2.schema import Hit
from medr2.search.hybrid import HybridSearcher
from medr2.search.llm_rerank import LLMPointwiseReranker
from medr2.search.rerank import MedR2Reranker, coarse_rerank, load_reranker, reads


class Engine:
    """Components shared by every method: the formulator, the hybrid searcher with its coarse
    reranker, the evidence leveler and (built on first use) the fine appraiser and the graph
    searcher, and the two cited answerers (with and without a chain of thought)."""

    def __init__(self, index: Index, config: Config, generator: Optional[LLM], scorer: Optional[LLM],
                 cache: Optional[LLMCache] = None):
        self.index = index
        self.config = cfg = config
        self.generator = generator
        self.scorer = scorer
        self.cache = cache
        self.formulator = Formulator.build(cfg, generator)
        coarse = LLMPointwiseReranker(generator) if (cfg.appraise.llm_rerank and generator is not None) else None
        self.searcher = HybridSearcher(index, cfg, reranker=coarse or load_reranker(cfg.rerank, cfg.dense.device))
        self.leveler = EvidenceLeveler.from_config(cfg.appraise, generator)
        self.count_tokens = token_counter(generator)
        self._appraiser: Optional[Appraiser] = None
        self._graph = None
        self._tcm = None
        a = cfg.apply
        after = a.choice_rationale == "after"
        self.answerers = {cot: CitedAnswerer(generator, cot, a.few_shot, a.max_answer_tokens, cfg.llm.json_retries,
                                             rationale_after=after)
                          for cot in (True, False)}
        self.focus = self._focus(a.focus_sentences)
        self.recommender = self._recommender()

    def _recommender(self) -> Optional[Recommender]:
        """Recommendation answers (``[recommend]``): relevance by medr2's cross-encoder when it is
        the coarse reranker, else term overlap; list headers read from the passage's document;
        the abstention's similarity check with the index's encoder when it is the one the
        threshold was chosen for."""
        c = self.config.recommend
        if not c.enabled:
            return None
        judge, plain = None, c
        if self.generator is not None and c.llm_answer == "quote":  # the generator judges, the answer quotes
            c, judge = c.for_judge(), StatementJudge(self.generator)
        elif self.generator is not None:
            c = c.for_generator()
        rr = self.searcher.reranker
        scorer = None
        if isinstance(rr, MedR2Reranker):
            model = rr.model

            def scorer(question, texts):
                return model.calibrate(model.logits(question, texts))
        similarity = None
        if self.index.config.dense.model == c.abstain_dense_model:  # its threshold is on this encoder's scale
            def similarity(question, texts):
                enc = self.index.encoder
                return enc.encode_passages(texts) @ enc.encode_query(question)
        parts = (scorer, self.previous_texts, similarity, self.next_texts, self.reranker_reads)
        # a generator that cannot score " yes" (no token log-probabilities): the extractive selection, noted
        fallback = Recommender(plain, *parts) if judge is not None else None
        return Recommender(c, *parts, judge=judge, fallback=fallback)

    def previous_texts(self, passage_ids: list[str]) -> dict[str, list[str]]:
        """For each passage, the texts before it in its document's part under the same headings
        (a guideline summary's recommendations field, not its scope fields), nearest last: a list
        header's grade and the section heading a recommendation sits under. Each document is read
        once."""
        wanted, out = set(passage_ids), {}
        for ps in self._documents_of(passage_ids):
            texts: list[str] = []
            path = None
            for p in ps:
                if p.heading_path != path:
                    texts, path = [], p.heading_path
                if p.passage_id in wanted:
                    out[p.passage_id] = list(texts)
                texts.append(p.text)
        return out

    def _documents_of(self, passage_ids: list[str]):
        """The passages, in order, of each document that holds one of ``passage_ids``."""
        store = self.index.store
        rids = [r for r in (store.rowid_of(p) for p in passage_ids) if r is not None]
        for doc in {m["doc_id"] for m in store.passages(rids).values()}:
            yield store.doc_passages(doc)

    def next_texts(self, passage_ids: list[str], n: int = MAX_LIST_ITEMS) -> dict[str, list[tuple[str, str]]]:
        """For each passage, (passage id, text) of the next ``n`` passages in its document under the
        same headings, nearest first (where a list cut from its lead-in by segmentation goes on; an
        item may be a passage of its own, so as many passages as a list takes items);
        passages that end their part are left out. Each document is read once."""
        wanted, out = set(passage_ids), {}
        for ps in self._documents_of(passage_ids):
            for i, a in enumerate(ps):
                if a.passage_id in wanted:
                    after = list(itertools.takewhile(lambda b: b.heading_path == a.heading_path, ps[i + 1:i + 1 + n]))
                    if after:
                        out[a.passage_id] = [(b.passage_id, b.text) for b in after]
        return out

    def _focus(self, keep: int) -> Optional[SentenceFocus]:
        """The sentence focus (apply.focus_sentences > 0): scored by medr2's cross-encoder when
        it is the coarse reranker, else by term overlap."""
        if keep <= 0:
            return None
        rr = self.searcher.reranker
        if not isinstance(rr, MedR2Reranker):
            return SentenceFocus(keep, None)

        @functools.lru_cache(maxsize=8)  # asked once per passage: measured once per question and limit
        def reads_question(question: str, limit: float) -> bool:
            return self.reranker_reads(question)

        def scorer(question, sentences):
            ok = reads_question(question, self.config.rerank.max_unknown_share)
            return rr.model.logits(question, sentences) if ok else None
        return SentenceFocus(keep, scorer)

    def reranker_reads(self, text: str) -> bool:
        """Whether the coarse reranker's vocabulary reads ``text`` (``rerank.max_unknown_share``;
        a reranker without a vocabulary, the fused order or an LLM, reads everything)."""
        return reads(self.searcher.reranker, text, self.config.rerank.max_unknown_share)

    @classmethod
    def open(cls, index_path: str | Path, config: Optional[Config] = None, generator: Optional[str] = None,
             scorer: Optional[str] = None) -> "Engine":
        """An engine over the index at ``index_path`` with the models its config names
        (``generator`` / ``scorer`` override them; see medr2.llm.factory.load_models)."""
        from medr2.llm.factory import load_models

        index = Index.open(index_path, config)
        m = load_models(index.config, index_path, generator, scorer)
        return cls(index, index.config, m.generator, m.scorer, m.cache)

    def close(self) -> None:
        self.index.close()
        if self.cache is not None:
            self.cache.close()
        if self._graph is not None:
            self._graph.kg.close()

    @property
    def tcm(self):
        """TCM-DiffRAG's solved cases and GB/T 16751 terms (medr2.kg.tcm), read once: the cases
        from the index's knowledge graph (``medr2 kg cases FILE --format tcmbench``), the terms from
        the index's passages (an ingested GB/T 16751 text)."""
        if self._tcm is None:
            from medr2.kg.build import open_existing_kg
            from medr2.kg.tcm import CaseMatcher, TermIndex, cases_from_kg

            kg = open_existing_kg(self.index.path)
            try:
                cases = cases_from_kg(kg) if kg is not None else []
            finally:
                if kg is not None:
                    kg.close()
            if not cases:
                raise ValueError(f"the index {self.index.path} has no solved cases; add them with "
                                 f"`medr2 kg cases FILE --index {self.index.path}` (TCMBench JSON or JSON Lines)")
            c = self.config.kg.cases
            self._tcm = (CaseMatcher(cases, c.finding_weight, c.min_similarity), TermIndex.of_store(self.index.store))
        return self._tcm

    @property
    def appraiser(self) -> Appraiser:
        """Med-R2's fine rerank: evidence level, document-type fit, usefulness, conflicts."""
        if self._appraiser is None:
            a = self.config.appraise
            typer = doc_typer_for(a, self.index.encoder, self.generator)
            useful = (UsefulnessScorer(self.scorer, a.usefulness_passage_tokens,
                                       a.usefulness_order == "question_first")
                      if (a.usefulness and self.scorer is not None) else None)
            conflicts = {"rules": RuleConflicts(), "off": None}.get(a.conflicts) if a.conflicts != "llm" else (
                LLMConflicts(self.generator) if self.generator is not None else RuleConflicts())
            self._appraiser = Appraiser(self.leveler, typer, useful, conflicts, a.expected_doc_types, a.alpha,
                                        order=a.order, relevance_weight=a.relevance_weight,
                                        relevance_floor=a.relevance_floor,
                                        usefulness_languages=tuple(a.usefulness_languages))
        return self._appraiser

    @property
    def graph(self):
        """The graph searcher over the index's knowledge graph (built by ``medr2 kg build``)."""
        if self._graph is None:
            from medr2.kg.build import library_for, open_existing_kg
            from medr2.search.graph import GraphSearcher

            kg = open_existing_kg(self.index.path)
            if kg is None or not kg.counts()["triples"]:
                if kg is not None:
                    kg.close()
                raise ValueError(f"the index {self.index.path} has no knowledge graph; build it with "
                                 f"`medr2 kg build --index {self.index.path}`")
            self._graph = GraphSearcher(kg, library_for(self.config.kg), self.config, self.index)
        return self._graph

    def graph_conflicts(self, passage_ids: list[str]) -> list[dict]:
        """Triple-level conflicts touching these passages, when the index has a knowledge graph."""
        from medr2.kg.build import open_existing_kg
        from medr2.search.graph import passage_conflicts

        if not passage_ids:
            return []
        kg = self._graph.kg if self._graph is not None else open_existing_kg(self.index.path)
        if kg is None:
            return []
        try:
            return passage_conflicts(kg, passage_ids)
        finally:
            if self._graph is None:
                kg.close()

    def model_names(self) -> dict[str, Optional[str]]:
        return {"generator": getattr(self.generator, "name", None), "scorer": getattr(self.scorer, "name", None),
                "dense": self.config.dense.model, "coarse_reranker": self.searcher.reranker.name}

    def retrieve(self, query: str | list[str], k: int, exclude_docs: frozenset[str] = frozenset()) -> list[Hit]:
        """The fused pool of ``query`` (search's one fusion path, Milvus's server-side RRF
        included); several queries (a question and its reformulation) are fused by rank."""
        queries = [query] if isinstance(query, str) else list(query)
        return self.searcher.pool_many(queries, k, exclude_docs=exclude_docs)

    def rerank(self, query: str, hits: list[Hit], k: int, notes: list[str]) -> list[Hit]:
        """The coarse rerank to ``k``; a failing LLM reranker keeps the fused order, with a note, and
        so does a cross-encoder for what it cannot read (``rerank.max_unknown_share``)."""
        try:
            out, note = coarse_rerank(self.searcher.reranker, query, hits, k, self.config.rerank.max_unknown_share)
            if note and note not in notes:
                notes.append(note)
            return out
        except LLMError as err:
            notes.append(f"coarse reranker failed ({err}); kept the fused order")
            return hits[:k]

    def index_languages(self) -> set[str]:
        return index_languages(self.index.store.counts().get("languages", {}))
