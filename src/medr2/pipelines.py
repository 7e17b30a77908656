"""Named QA pipelines sharing one set of components (FlashRAG-style: a method is a few flags on
one base, not a copy).

* ``direct`` - the generator alone, no retrieval; ``direct_cot`` the same, reasoning step by step
  first (MIRAGE's CoT setting).
* ``vanilla_rag`` - hybrid retrieval, coarse order, context packing, answer.
* ``+reformulator``, ``+reranker`` (fine EBM rerank with conflicts), ``+cot`` and their pairs
  (Med-R2 Table 10 ablations, each on top of vanilla RAG).
* ``medr2`` - all three plus the iterative loop with the stop rule (Algorithm 2).

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> sorted(PIPELINES)[:3]
    ['+cot', '+reformulator', '+reformulator+cot']
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from medr2.appraise.appraiser import Appraiser, base_rows
from medr2.appraise.coarse import load_reranker
from medr2.appraise.conflicts import LLMConflicts, RuleConflicts
from medr2.appraise.doc_type import EmbeddingDocTyper, LLMDocTyper
from medr2.appraise.evidence_level import EvidenceLeveler
from medr2.appraise.llm_rerank import LLMPointwiseReranker
from medr2.appraise.usefulness import UsefulnessScorer
from medr2.apply.answer import FAILED, Answer, CitedAnswerer, EvidenceItem, direct_answer
from medr2.apply.pack import pack
from medr2.assess.stop_rule import answer_agreement, mean_shift, should_stop
from medr2.config import Config
from medr2.formulate.classify import LLMClassifier, OfflineClassifier, classify_with_fallback
from medr2.formulate.reformulate import LLMReformulator, OfflineReformulator, Reformulation
from medr2.index.index import Index, IndexError_
from medr2.ingest.loaders.base import detect_language
from medr2.llm.base import LLM, LLMError, Usage, stage, structured, track
from medr2.llm.cache import LLMCache
from medr2.schema import AskResult, EvidenceRow, Hit, RoundRecord
from medr2.search.fusion import fuse
from medr2.search.hybrid import HybridSearcher, QueryError, validate_query


@dataclass(frozen=True)
class Settings:
    retrieve: bool = True
    reformulate: bool = False
    fine_rerank: bool = False
    cot: bool = False
    iterate: bool = False
    kg: bool = False  # quality-weighted graph retrieval + tier-conditioned prompt (medr2 ask --kg)
    amt: bool = False  # LLM-AMT-style baseline: query expansion, LLM knowledge refinement, reader


PIPELINES: dict[str, Settings] = {
    "direct": Settings(retrieve=False),
    "direct_cot": Settings(retrieve=False, cot=True),  # MIRAGE's CoT baseline: step-by-step, no retrieval
    "vanilla_rag": Settings(),
    "+reformulator": Settings(reformulate=True),
    "+reranker": Settings(fine_rerank=True),
    "+cot": Settings(cot=True),
    "+reformulator+reranker": Settings(reformulate=True, fine_rerank=True),
    "+reformulator+cot": Settings(reformulate=True, cot=True),
    "+reranker+cot": Settings(fine_rerank=True, cot=True),
    "medr2": Settings(reformulate=True, fine_rerank=True, cot=True, iterate=True),
    "kg": Settings(cot=True, kg=True),
    "llm_amt": Settings(cot=True, amt=True),
}

# Tokens reserved in the generator's window for the instructions, demonstrations and answer.
PROMPT_OVERHEAD_TOKENS = 900


def validate_options(options: Optional[dict[str, str]]) -> dict[str, str]:
    out = {}
    for k, v in (options or {}).items():
        key = str(k).strip().upper()
        if not (len(key) == 1 and key.isalpha()):
            raise QueryError(f"option key {k!r} must be one letter (A, B, C, ...)")
        if not str(v).strip():
            raise QueryError(f"option {key} has no text")
        if key in out:
            raise QueryError(f"option {key} is given twice")
        out[key] = str(v).strip()
    if len(out) == 1:
        raise QueryError("a multiple-choice question needs at least two options")
    return out


class Engine:
    """The components every pipeline draws from, built once per index and model set."""

    def __init__(self, index: Index, config: Config, generator: Optional[LLM], scorer: Optional[LLM],
                 cache: Optional[LLMCache] = None):
        self.index = index
        self.config = config
        self.generator = generator
        self.scorer = scorer
        self.cache = cache
        cfg = config
        method = cfg.formulate.method
        use_llm = generator is not None and method in ("auto", "llm")
        if method == "llm" and generator is None:
            raise LLMError("formulate.method = 'llm' needs a generator; set llm.generator or use 'offline'")
        self.offline_classifier = OfflineClassifier.load(cfg.formulate.classifier_path)
        self.offline_classifier.min_confidence = cfg.formulate.classifier_min_confidence
        # "auto" classifies offline with the bundled generator: on the benchmark it scored below the
        # offline classifier (bench/README.md); any other generator classifies.
        bundled = str(getattr(generator, "bundled", "") or "")
        llm_classify = use_llm and not (method == "auto" and bundled.startswith("bundled:qwen"))
        self.classifier = LLMClassifier(generator, cfg.llm.json_retries) if llm_classify else self.offline_classifier
        self._offline_reformulator: Optional[OfflineReformulator] = None
        self.reformulator = LLMReformulator(generator, cfg.llm.json_retries) if use_llm else None
        coarse = LLMPointwiseReranker(generator) if (cfg.appraise.llm_rerank and generator is not None) else None
        self.searcher = HybridSearcher(index, cfg, reranker=coarse or load_reranker(cfg.rerank, cfg.dense.device))
        self.leveler = EvidenceLeveler(cfg.appraise.levels, cfg.appraise.unknown_level,
                                       generator if cfg.appraise.level_llm else None)
        self._appraiser: Optional[Appraiser] = None
        self._graph = None
        self.answerer_cot = CitedAnswerer(generator, True, cfg.apply.few_shot, cfg.apply.max_answer_tokens,
                                          cfg.llm.json_retries)
        self.answerer_plain = CitedAnswerer(generator, False, cfg.apply.few_shot, cfg.apply.max_answer_tokens,
                                            cfg.llm.json_retries)

    @classmethod
    def open(cls, index_path: str | Path, config: Optional[Config] = None, generator: Optional[str] = None,
             scorer: Optional[str] = None) -> "Engine":
        from medr2.llm.factory import load_llm, open_cache

        index = Index.open(index_path, config)
        cfg = index.config
        cache = open_cache(cfg.llm, index_path)
        import os

        gen_spec = generator if generator is not None else (os.environ.get("MEDR2_LLM_URL") or cfg.llm.generator)
        gen = load_llm(gen_spec, cfg.llm, cache)
        # the scorer needs a reference answer, which only a generator gives
        sc = (load_llm(scorer if scorer is not None else cfg.llm.scorer, cfg.llm, cache)
              if cfg.appraise.usefulness and gen is not None else None)
        return cls(index, cfg, gen, sc, cache)

    def close(self) -> None:
        self.index.close()
        if self.cache is not None:
            self.cache.close()
        if self._graph is not None:
            self._graph.kg.close()

    def graph_conflicts(self, passage_ids: list[str]) -> list[dict]:
        """Triple-level conflicts among the triples read from these passages (and the graph's other
        triples on the same head and tail), when the index has a knowledge graph."""
        from medr2.kg.build import open_existing_kg
        from medr2.search.graph import find_conflicts

        if not passage_ids:
            return []
        kg = self._graph.kg if self._graph is not None else open_existing_kg(self.index.path)
        if kg is None:
            return []
        try:
            tids = {t for ts in kg.triples_of_texts(passage_ids).values() for t in ts}
            mine = kg.triples_by_ids(tids)
            pairs = {(t["head_id"], t["tail_id"]) for t in mine}
            more = [t for t in kg.triples_of_entities({h for h, _ in pairs}) if (t["head_id"], t["tail_id"]) in pairs]
            allt = list({t["triple_id"]: t for t in mine + more}.values())
            ents = kg.entities({t["head_id"] for t in allt} | {t["tail_id"] for t in allt})
            for t in allt:
                t["head"] = ents.get(t["head_id"], {}).get("name", t["head_id"])
                t["tail"] = ents.get(t["tail_id"], {}).get("name", t["tail_id"])
            out = find_conflicts(allt)
            for c in out:
                c["text_ids"] = {tid: kg.text_ids(tid) for tid in c["triples"]}
            return out
        finally:
            if self._graph is None:
                kg.close()

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

    @property
    def offline_reformulator(self) -> OfflineReformulator:
        if self._offline_reformulator is None:
            from medr2.formulate.terms import load_table

            f = self.config.formulate
            table = load_table(f.terminologies, f.synonym_files) if (f.terminologies or f.synonym_files) else None
            self._offline_reformulator = OfflineReformulator(table, f.max_synonyms)
        return self._offline_reformulator

    @property
    def appraiser(self) -> Appraiser:
        if self._appraiser is None:
            a = self.config.appraise
            typer = (LLMDocTyper(self.generator) if a.doc_type_method == "llm" and self.generator is not None
                     else EmbeddingDocTyper(self.index.encoder, a.doc_type_temperature))
            useful = UsefulnessScorer(self.scorer) if (a.usefulness and self.scorer is not None) else None
            conflicts = {"rules": RuleConflicts(), "off": None}.get(a.conflicts) if a.conflicts != "llm" else (
                LLMConflicts(self.generator) if self.generator is not None else RuleConflicts())
            self._appraiser = Appraiser(self.leveler, typer, useful, conflicts, self.config.formulate.expected_doc_types,
                                        a.alpha)
        return self._appraiser

    def model_names(self) -> dict[str, Optional[str]]:
        return {"generator": getattr(self.generator, "name", None), "scorer": getattr(self.scorer, "name", None),
                "dense": self.config.dense.model, "coarse_reranker": self.searcher.reranker.name}

    # -- retrieval: union of dense + sparse, fused; then coarse rerank to top k -----------------
    def retrieve(self, query: str, k: int, exclude_docs: frozenset[str] = frozenset()) -> list[Hit]:
        """``exclude_docs``: documents never returned (an evaluation question's own source, e.g.
        the PubMedQA abstract its question was written from); removed before fusion."""
        cands = self.searcher.candidates(query)
        if exclude_docs and cands:
            rows = self.index.store.passages(list(cands))
            for i in [i for i, r in rows.items() if r["doc_id"] in exclude_docs]:
                del cands[i]
        cfg = self.config
        ranked = fuse(cands, cfg.fusion.method, cfg.fusion.rrf_k, cfg.fusion.dense_weight)
        pool = ranked[: max(k, cfg.rerank.top_n)]
        return self.searcher.hits([i for i, _ in pool], cands)

    def rerank(self, query: str, hits: list[Hit], k: int, notes: list[str]) -> list[Hit]:
        try:
            return self.searcher.reranker.rerank(query, hits, k)
        except LLMError as err:
            notes.append(f"coarse reranker failed ({err}); kept the fused order")
            return hits[:k]

    def passage_vectors(self, hits: list[Hit]) -> np.ndarray:
        """Stored vectors of the hits (heading path + text, as indexed); encoded afresh only if absent."""
        rowids = [self.index.store.rowid_of(h.passage_id) for h in hits]
        if all(r is not None for r in rowids):
            try:
                return self.index.vectors_for(rowids)
            except IndexError_:
                pass
        return np.asarray(self.index.encoder.encode_passages([h.text for h in hits]), dtype=np.float32)

    def index_languages(self) -> set[str]:
        return {language_family(k) for k, v in self.index.store.counts().get("languages", {}).items() if v}


def language_family(value: Optional[str]) -> str:
    """'en' / 'zh' for the spellings loaders keep from metadata ('eng', 'English', 'zh-CN', 'chi'...).

    >>> [language_family(v) for v in ("eng", "en-US", "Chinese", "zh-CN", "fr")]
    ['en', 'en', 'zh', 'zh', 'fr']
    """
    v = (value or "en").strip().lower()
    if v.startswith(("zh", "chi", "cmn", "zho")):
        return "zh"
    if v.startswith(("en", "eng")):
        return "en"
    return v


def failed_answer(err: Exception) -> Answer:
    """The explicit answer when generation fails: ``error`` when the call could not be made
    (server, model file), ``invalid_output`` when the model never answered in the form asked."""
    from medr2.llm.base import LLMOutputError

    return Answer(f"Insufficient evidence: the generator failed ({err}).", insufficient=True,
                  method="invalid_output" if isinstance(err, LLMOutputError) else "error", notes=[str(err)])


def query_text(*parts: str, max_chars: int) -> str:
    """Join model-produced text into a retrieval query: [n] markers and control characters out,
    whitespace collapsed, cut to the query limit (never an error: it is not user input)."""
    text = " ".join(p for p in parts if p)
    text = re.sub(r"\[\d+\]|\[\?\]", " ", text)
    text = "".join(ch for ch in text if ch.isprintable() or ch in " \t\n").replace("\ufffd", " ")
    return " ".join(text.split())[:max_chars].strip()


# generate: the cited answer (with a chain of thought when the pipeline has one); loglik: the
# option letter the generator scores highest (prefill only); loglik-cal: the same, calibrated
# against a content-free prompt (medr2.apply.loglik).
ANSWER_MODES = ("generate", "loglik", "loglik-cal")


class Pipeline:
    def __init__(self, engine: Engine, name: str = "medr2", rounds: Optional[int] = None,
                 answer_mode: str = "generate"):
        if name not in PIPELINES:
            raise ValueError(f"unknown pipeline {name!r}; choose from {', '.join(PIPELINES)}")
        if answer_mode not in ANSWER_MODES:
            raise ValueError(f"answer mode is one of {', '.join(ANSWER_MODES)}, not {answer_mode!r}")
        self.answer_mode = answer_mode
        self.exclude_docs: frozenset[str] = frozenset()
        self.engine = engine
        self.name = name
        self.s = PIPELINES[name]
        if rounds is not None and rounds > 1 and not self.s.iterate:
            raise ValueError(f"--rounds applies to the iterating pipeline (medr2), not to {name}")
        self.rounds = rounds if rounds is not None else (engine.config.assess.max_rounds if self.s.iterate else 1)
        if self.rounds < 1:
            raise ValueError("rounds must be at least 1")

    def run(self, question: str, options: Optional[dict[str, str]] = None,
            exclude_docs: frozenset[str] = frozenset()) -> AskResult:
        """``exclude_docs``: document ids retrieval must not return (see Engine.retrieve)."""
        e, cfg = self.engine, self.engine.config
        self.exclude_docs = frozenset(exclude_docs)
        question = validate_query(question, cfg.query.max_question_chars, "query.max_question_chars")
        options = validate_options(options)
        usage = Usage()
        res = AskResult(question=question, options=options, pipeline=self.name, models=e.model_names())
        t0 = time.perf_counter()
        with track(usage):
            if self.s.kg:
                self._kg(question, options, res)
            elif self.s.amt:
                self._amt(question, options, res)
            elif not self.s.retrieve:
                if e.generator is None:
                    raise LLMError(f"the {self.name} pipeline answers with the generator alone; none is configured "
                                   "(give one with --llm)")
                with stage("generate"):
                    try:
                        ans = (self._loglik().answer(question, options, []) if self._use_loglik(options) else
                               direct_answer(e.generator, question, options, self.s.cot, cfg.apply.max_answer_tokens))
                    except LLMError as err:  # as in the retrieving pipelines: one failed answer, not a failed run
                        ans = failed_answer(err)
                self._finish(res, ans)
            else:
                self._rag(question, options, res)
        res.usage = usage.to_dict() | {"wall_seconds": round(time.perf_counter() - t0, 3)}
        return res

    def _formulate(self, question: str, res: AskResult, language: str = "") -> tuple[str, str]:
        e = self.engine
        with stage("classify"):
            cls, note = classify_with_fallback(e.classifier, e.offline_classifier, question)
        if note:
            res.notes.append(note)
        res.classification = cls.to_dict()
        query = question
        limit = e.config.query.max_query_chars
        if len(question) > limit:
            query = query_text(question, max_chars=limit)
            res.notes.append(f"the question is {len(question):,} characters; retrieval used its first {limit:,} "
                             "(query.max_query_chars)")
        if self.s.reformulate:
            with stage("reformulate"):
                ref: Optional[Reformulation] = None
                if e.reformulator is not None:
                    try:
                        ref = e.reformulator.reformulate(question, cls.ebm_category, language)
                    except LLMError as err:
                        res.notes.append(f"LLM reformulation failed ({err}); used the offline reformulator")
                if ref is None:
                    ref = e.offline_reformulator.reformulate(question, cls.ebm_category)
            res.reformulation = ref.to_dict()
            query = query_text(ref.query, max_chars=e.config.query.max_query_chars) or question
        return query, cls.question_type

    def _rag(self, question: str, options: dict[str, str], res: AskResult) -> None:
        e, cfg = self.engine, self.engine.config
        qlang = language_family(detect_language(question))
        langs = e.index_languages()
        if not langs:
            self._finish(res, Answer("Insufficient evidence: the index is empty; ingest documents first "
                                     "(medr2 ingest PATH --index DIR).", insufficient=True, method="rule"))
            return
        names = {"en": "English", "zh": "Chinese"}
        target = names.get(sorted(langs)[0], "") if qlang not in langs and len(langs) == 1 else ""
        query, qtype = self._formulate(question, res, target)
        if qlang not in langs and not (res.reformulation.get("method") == "llm"
                                       and language_family(detect_language(query)) in langs):
            self._finish(res, Answer(
                f"Insufficient evidence: the question is in '{qlang}' but the index holds only "
                f"{sorted(langs)} passages; ask in that language or ingest sources in '{qlang}'.",
                insufficient=True, method="rule"))
            return
        answerer = self._answerer(options)
        budget = self._budget()
        reference: Optional[str] = None
        if self.s.fine_rerank and e.appraiser.usefulness is not None and e.generator is not None:
            with stage("draft"):
                reference = self._draft(question, options, res)
        prev_vecs: Optional[np.ndarray] = None
        answers: list[str] = []
        ans: Optional[Answer] = None
        rows: list[EvidenceRow] = []
        used_reference = reference
        for t in range(1, self.rounds + 1):
            # The next round's query adds the answer's reasoning (a log-likelihood answer's
            # "rationale" is its option scores, which would only add noise to the query).
            rq = query if t == 1 or ans is None or not ans.rationale or ans.method == "loglik" else \
                (query_text(query, ans.rationale, max_chars=cfg.query.max_query_chars) or query)
            if t > 1 and rq == res.rounds[-1].query and reference == used_reference:
                # Every stage is deterministic: the same query and usefulness reference would bring
                # back the same evidence and answer (a log-likelihood answer adds nothing to the query).
                res.rounds[-1].stop = True
                res.rounds[-1].stop_reason = ("the next round would repeat this one: the answer gave no "
                                              "rationale to widen the query, so the same evidence would return")
                break
            used_reference = reference
            rec = RoundRecord(round=t, query=rq)
            notes: list[str] = []
            with stage("retrieve"):
                pool = e.retrieve(rq, cfg.appraise.coarse_k, self.exclude_docs)
            with stage("coarse_rerank"):
                hits = e.rerank(rq, pool, cfg.appraise.coarse_k, notes)
            rec.coarse_ids = [h.passage_id for h in hits]
            vecs = None
            if hits and (self.s.fine_rerank or self.s.iterate):
                with stage("embed"):
                    vecs = e.passage_vectors(hits)
            if self.s.fine_rerank:
                rows, conflicts = e.appraiser.appraise(question, options, qtype, hits, vecs, reference, notes)
                res.conflicts = [c.to_dict() for c in conflicts]
                kg_conf = e.graph_conflicts([h.passage_id for h in hits])
                if kg_conf:
                    res.conflicts += [{"kind": "triple", **c} for c in kg_conf]
                    notes.append(f"{len(kg_conf)} contradicting triple pair(s) in the knowledge graph touch these "
                                 "passages (see conflicts)")
                unresolved = [c for c in conflicts if c.dropped is None]
                if unresolved:
                    notes.append(f"{len(unresolved)} conflict(s) between passages of equal evidence level were kept: "
                                 "the evidence disagrees")
            else:
                with stage("evidence_level"):
                    rows = base_rows(hits, e.leveler)
            with stage("pack"):
                evidence = self._pack(rows, budget)
            with stage("generate"):
                try:
                    ans = answerer.answer(question, options, evidence)
                except LLMError as err:
                    ans = failed_answer(err)
            ans.notes = notes + ans.notes
            rec.context_ids = [x.passage_id for x in evidence]
            rec.answer, rec.insufficient = ans.answer, ans.insufficient
            if self.s.iterate:
                with stage("assess"):
                    self._assess(rec, vecs, prev_vecs, answers, bool(options), t)
                prev_vecs = vecs if vecs is not None else np.zeros((0, 1), dtype=np.float32)
            answers.append(ans.answer)
            res.rounds.append(rec)
            if ans.method in FAILED:  # another round would wait on the same failing generator
                rec.stop, rec.stop_reason = True, "the generator failed"
            if rec.stop:
                break
            if (self.s.fine_rerank and self.s.iterate and e.appraiser.usefulness is not None and ans.method == "llm"
                    and not ans.insufficient):
                reference = ans.answer if not options else f"{ans.answer}. {options.get(ans.answer, '')}"
        if self.s.iterate and res.rounds and not res.rounds[-1].stop:
            res.rounds[-1].stop_reason = f"reached T = {self.rounds} rounds"
        res.evidence = rows
        self._finish(res, ans)

    def _use_loglik(self, options: dict[str, str]) -> bool:
        if not self.answer_mode.startswith("loglik"):
            return False
        if not options:
            raise ValueError("--answer-mode loglik scores the options of a multiple-choice question; this one has none")
        return True

    def _answerer(self, options: dict[str, str]):
        """The answer step: letters scored in loglik mode, else the cited answerer (with a chain of
        thought when the pipeline has one)."""
        if self._use_loglik(options):
            return self._loglik()
        return self.engine.answerer_cot if self.s.cot else self.engine.answerer_plain

    def _loglik(self):
        from medr2.apply.loglik import LoglikAnswerer

        return LoglikAnswerer(self.engine.generator, calibrate=self.answer_mode == "loglik-cal")

    def _kg(self, question: str, options: dict[str, str], res: AskResult) -> None:
        """Graph mode: linked entities, the quality-ranked subgraph, the passages its triples come
        from united with the dense top-5, and a tier-conditioned prompt."""
        from medr2.apply.kg_prompt import cases_block, tier_block

        e, cfg = self.engine, self.engine.config
        self._formulate(question, res)
        with stage("graph"):
            g = e.graph.search(question)
        triples = g["triples"]
        order: list[str] = []
        for t in triples:
            order += [x for x in t["text_ids"] if x not in order]
        order += [p["passage_id"] for p in g["passages"] if p["passage_id"] not in order]
        rows_by_id = e.graph.passages_by_id(order)
        hits = [Hit(passage_id=pid, doc_id=r["doc_id"], title=r["title"] or "", source_type=r["source_type"],
                    heading_path=r["heading_path"], text=r["text"], language=r["language"] or "en", year=r["year"],
                    publication_types=r["publication_types"], score=0.0)
                for pid in order if (r := rows_by_id.get(pid)) is not None and r["doc_id"] not in self.exclude_docs]
        with stage("evidence_level"):
            rows = base_rows(hits, e.leveler)
        dense_ids = {p["passage_id"] for p in g["passages"]}
        for r in rows:
            r.reason = "dense top-5" if r.passage_id in dense_ids else ""
        cases = self._cases(question)
        risky = set(cfg.kg.high_risk_relations)
        # the statements and cases share the evidence window with the passages: measured, and held to
        # half of it (lowest-ranked statements first, then cases), numbered as if every passage fit
        budget, draft = self._budget(), {pid: i for i, pid in enumerate(order, 1)}
        while True:
            need = self._count(tier_block(triples, draft, risky, g["conflicts"])[0] + cases_block(cases))
            if need <= budget // 2 or not (triples or cases):
                break
            if triples:
                triples = triples[:len(triples) * 3 // 4]
            else:
                cases = cases[:-1]
        with stage("pack"):
            evidence = self._pack(rows, budget - need)
        numbers = {x.passage_id: x.n for x in evidence}
        block, shown, withheld = tier_block(triples, numbers, risky, g["conflicts"])
        block += cases_block(cases)
        if len(triples) < len(g["triples"]):
            res.notes.append(f"{len(g['triples']) - len(triples)} of {len(g['triples'])} graph statements left out: "
                             f"the statements may take half of the {budget}-token evidence window")
        with stage("generate"):
            try:
                ans = self._answerer(options).answer(question, options, evidence, graph=block or None)
            except LLMError as err:
                ans = failed_answer(err)
        if not g["triples"]:
            ans.notes.insert(0, "no entity of the question links to the knowledge graph; answered from the dense "
                                "passages only")
        keep = ("triple_id", "label", "head", "head_id", "head_type", "relation", "tail", "tail_id", "tail_type", "q",
                "tier", "schema_conf", "evid_score", "score", "relevance", "hop", "text_ids", "attrs")
        res.subgraph = {"links": g["links"], "triples": [{k: t.get(k) for k in keep} for t in shown],
                        "cases": [{k: c[k] for k in ("case_id", "score", "question", "answer", "matched")} for c in cases],
                        "withheld": [{k: t.get(k) for k in keep if k != "label"} for t in withheld],
                        "conflicts": g["conflicts"], "timings_ms": g["timings_ms"], "prompt": block}
        res.conflicts = [{"kind": "triple", **c} for c in g["conflicts"]]
        res.evidence = rows
        self._finish(res, ans)

    def _amt(self, question: str, options: dict[str, str], res: AskResult) -> None:
        """LLM-AMT-style baseline (Wang et al. 2023): the generator expands the query, hybrid
        retrieval runs for every query, the generator keeps the passages it judges relevant and
        useful (knowledge self-refinement), then answers from them with a chain of thought."""
        from medr2.apply.prompts import expand_messages, refine_messages

        e, cfg = self.engine, self.engine.config
        if e.generator is None:
            raise LLMError("the llm_amt baseline needs a generator (--llm): its expansion and refinement are LLM calls")
        queries = [question]
        with stage("expand"):
            try:
                got = structured(e.generator, expand_messages(question), {
                    "type": "object", "required": ["queries"], "properties": {"queries": {
                        "type": "array", "minItems": 1, "maxItems": 3,
                        "items": {"type": "string", "minLength": 3, "maxLength": 200}}}}, max_tokens=160)
                queries += [q for q in got["queries"] if q.strip() and q not in queries]
            except LLMError as err:
                res.notes.append(f"query expansion failed ({err}); searched with the question only")
        res.reformulation = {"method": "llm_amt", "queries": queries}
        pool: dict[str, Hit] = {}
        with stage("retrieve"):
            for q in queries:
                for h in e.retrieve(query_text(q, max_chars=cfg.query.max_query_chars) or question, cfg.appraise.coarse_k,
                                   self.exclude_docs):
                    pool.setdefault(h.passage_id, h)
        hits = e.rerank(question, list(pool.values()), cfg.appraise.coarse_k, res.notes)
        schema = {"type": "object", "required": ["relevant", "useful"],
                  "properties": {"relevant": {"type": "boolean"}, "useful": {"type": "boolean"}}}
        kept: list[Hit] = []
        verdicts: dict[str, str] = {}
        with stage("refine"):
            for h in hits:
                try:
                    v = structured(e.generator, refine_messages(question, h.text[:2000]), schema, max_tokens=24)
                    ok = bool(v["relevant"] and v["useful"])
                    verdicts[h.passage_id] = "kept by the refiner" if ok else \
                        f"dropped by the refiner (relevant={v['relevant']}, useful={v['useful']})"
                except LLMError as err:
                    ok, verdicts[h.passage_id] = True, f"kept (refiner failed: {err})"
                if ok:
                    kept.append(h)
        if not kept and hits:
            res.notes.append("the refiner kept no passage; answered from the top 3 retrieved")
            kept = hits[:3]
        with stage("evidence_level"):
            rows = base_rows(hits, e.leveler)
        keep_ids = {h.passage_id for h in kept}
        for r in rows:
            if r.passage_id not in keep_ids:
                r.reason = "dropped: " + verdicts.get(r.passage_id, "not kept")
        with stage("pack"):
            evidence = self._pack(rows, self._budget())
        with stage("generate"):
            try:
                ans = self._answerer(options).answer(question, options, evidence)
            except LLMError as err:
                ans = failed_answer(err)
        res.rounds.append(RoundRecord(round=1, query=" | ".join(queries), coarse_ids=[h.passage_id for h in hits],
                                      context_ids=[x.passage_id for x in evidence], answer=ans.answer,
                                      insufficient=ans.insufficient))
        res.evidence = rows
        self._finish(res, ans)

    def _cases(self, question: str, k: int = 2) -> list[dict]:
        """TCM-DiffRAG's personalized graph: solved cases matched on the question's triple path."""
        from medr2.kg.extract.rules import RuleExtractor
        from medr2.kg.personalized import match_cases

        e = self.engine
        if e.graph.kg.db.execute("SELECT 1 FROM cases LIMIT 1").fetchone() is None:
            return []
        with stage("cases"):
            got = match_cases(e.graph.kg, e.index.encoder, question, RuleExtractor(e.graph.linker), None, k=k)
        return got["cases"]

    def _assess(self, rec: RoundRecord, vecs, prev_vecs, answers: list[str], mc: bool, t: int) -> None:
        if t == 1 or prev_vecs is None:
            return
        cur = vecs if vecs is not None else np.zeros((0, 1), dtype=np.float32)
        rec.mu = mean_shift(prev_vecs, cur)
        rec.acc = round(answer_agreement(rec.answer, answers, mc), 4)
        rec.ratio = None if rec.mu in (0.0, float("inf")) else round(rec.acc / rec.mu, 4)
        rec.mu = None if rec.mu == float("inf") else round(rec.mu, 6)
        delta = self.engine.config.assess.delta
        rec.stop = should_stop(rec.acc, rec.mu if rec.mu is not None else float("inf"), delta)
        if rec.stop:
            rec.stop_reason = (f"Acc/mu = {rec.ratio} > delta = {delta}" if rec.ratio is not None
                               else "same evidence as the previous round and a consistent answer")

    def _draft(self, question: str, options: dict[str, str], res: AskResult) -> Optional[str]:
        """The generator's own answer without evidence: the usefulness reference (never a gold label).
        In log-likelihood mode that answer is the letter it scores highest with no evidence (one
        prefill, the same call as direct answering), not a generated draft."""
        from medr2.apply.answer import answer_schema
        from medr2.apply.prompts import draft_messages

        try:
            if self._use_loglik(options):
                a = self._loglik().answer(question, options, []).answer
            else:
                a = str(structured(self.engine.generator, draft_messages(question, options),
                                   answer_schema(0, options, cot=False, with_evidence=False),
                                   max_tokens=120)["answer"]).strip()
        except LLMError as err:
            res.notes.append(f"no draft answer for usefulness ({err}); f_u = 0")
            return None
        return f"{a}. {options[a]}" if options and a in options else a

    def _budget(self) -> int:
        cfg = self.engine.config
        w = cfg.appraise.context_tokens
        n_ctx = getattr(self.engine.generator, "n_ctx", None)
        if n_ctx:
            w = min(w, int(n_ctx) - PROMPT_OVERHEAD_TOKENS - cfg.apply.max_answer_tokens)
        return max(w, 128)

    def _count(self, text: str) -> int:
        g = self.engine.generator
        if g is not None:
            return int(g.count_tokens(text)) + 24  # + the evidence header
        from medr2.ingest.segment import count_tokens

        return int(count_tokens(text) * 1.3) + 24

    def _pack(self, rows: list[EvidenceRow], budget: int) -> list[EvidenceItem]:
        eligible = [r for r in rows if not r.reason.startswith("dropped")]
        chosen = set(pack([(r.passage_id, self._count(r.text)) for r in eligible], budget))
        clip: dict[str, str] = {}
        if eligible and not chosen:  # not even the best passage fits: give it, cut to the window
            top = eligible[0]
            clip[top.passage_id] = " ".join(top.text.split()[: max(budget * 2 // 3, 32)])
            chosen = {top.passage_id}
        items, n = [], 0
        for r in rows:
            if r.passage_id in chosen:
                n += 1
                r.kept, r.n = True, n
                r.reason = "in context" + (" (cut to fit the window)" if r.passage_id in clip else "")
                items.append(EvidenceItem(n, r.passage_id, r.title, r.source_type.value, r.level,
                                          clip.get(r.passage_id, r.text)))
            elif not r.reason:
                r.kept, r.reason = False, f"outside the context window (w = {budget} tokens)"
        return items

    @staticmethod
    def _finish(res: AskResult, ans: Optional[Answer]) -> None:
        if ans is None:
            return
        res.answer, res.rationale, res.citations = ans.answer, ans.rationale, ans.citations
        res.insufficient, res.method = ans.insufficient, ans.method
        res.notes.extend(ans.notes)
