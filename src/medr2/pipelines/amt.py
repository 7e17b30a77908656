"""The LLM-AMT-style baseline (Wang et al. 2023): the generator expands the query, hybrid
retrieval runs for every query, the generator keeps the passages it judges relevant and useful
(knowledge self-refinement), then answers from them with a chain of thought. Sizes: config [amt].

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> PIPELINES["llm_amt"].method.__name__
    'LLMAMT'
"""

from __future__ import annotations

from medr2.appraise.appraiser import base_rows
from medr2.apply.prompts import expand_messages, refine_messages
from medr2.formulate.formulator import query_text
from medr2.llm.base import LLMError, stage, structured
from medr2.pipelines.base import Method
from medr2.schema import AskResult, Hit, RoundRecord

VERDICT = {"type": "object", "required": ["relevant", "useful"],
           "properties": {"relevant": {"type": "boolean"}, "useful": {"type": "boolean"}}}


class LLMAMT(Method):
    def answer(self, question: str, options: dict[str, str], res: AskResult) -> None:
        e, cfg = self.engine, self.engine.config
        if e.generator is None:
            raise LLMError("the llm_amt baseline needs a generator (--llm): its expansion and refinement are LLM calls")
        queries = self.expand(question, res)
        pool: dict[str, Hit] = {}
        with stage("retrieve"):
            for q in queries:
                for h in e.retrieve(query_text(q, max_chars=cfg.query.max_query_chars) or question,
                                    cfg.appraise.coarse_k, self.exclude_docs):
                    pool.setdefault(h.passage_id, h)
        hits = e.rerank(question, list(pool.values()), cfg.appraise.coarse_k, res.notes)
        kept, verdicts = self.refine(question, hits)
        if not kept and hits:
            res.notes.append(f"the refiner kept no passage; answered from the top {cfg.amt.fallback_passages} "
                             "retrieved")
            kept = hits[:cfg.amt.fallback_passages]
        with stage("evidence_level"):
            rows = base_rows(hits, e.leveler)
        keep_ids = {h.passage_id for h in kept}
        for r in rows:
            if r.passage_id not in keep_ids:
                r.reason = "dropped: " + verdicts.get(r.passage_id, "not kept")
        evidence = self.pack(rows)
        ans = self.generate(question, options, evidence)
        res.rounds.append(RoundRecord(round=1, query=" | ".join(queries), coarse_ids=[h.passage_id for h in hits],
                                      context_ids=[x.passage_id for x in evidence], answer=ans.answer,
                                      insufficient=ans.insufficient))
        res.evidence = rows
        self.finish(res, ans)

    def expand(self, question: str, res: AskResult) -> list[str]:
        """The question and up to amt.max_expansions queries the generator writes for it."""
        a, queries = self.engine.config.amt, [question]
        with stage("expand"):
            try:
                got = structured(self.engine.generator, expand_messages(question), {
                    "type": "object", "required": ["queries"], "properties": {"queries": {
                        "type": "array", "minItems": 1, "maxItems": a.max_expansions,
                        "items": {"type": "string", "minLength": 3, "maxLength": a.expansion_chars}}}},
                    max_tokens=a.expansion_tokens)
                queries += [q for q in got["queries"] if q.strip() and q not in queries]
            except LLMError as err:
                res.notes.append(f"query expansion failed ({err}); searched with the question only")
        res.reformulation = {"method": "llm_amt", "queries": queries}
        return queries

    def refine(self, question: str, hits: list[Hit]) -> tuple[list[Hit], dict[str, str]]:
        """Knowledge self-refinement: the passages the generator judges relevant and useful, and
        its verdict on each (a failed verdict keeps the passage)."""
        a, kept, verdicts = self.engine.config.amt, [], {}
        with stage("refine"):
            for h in hits:
                try:
                    v = structured(self.engine.generator, refine_messages(question, h.text[:a.refine_chars]), VERDICT,
                                   max_tokens=a.refine_tokens)
                    ok = bool(v["relevant"] and v["useful"])
                    verdicts[h.passage_id] = "kept by the refiner" if ok else \
                        f"dropped by the refiner (relevant={v['relevant']}, useful={v['useful']})"
                except LLMError as err:
                    ok, verdicts[h.passage_id] = True, f"kept (refiner failed: {err})"
                if ok:
                    kept.append(h)
        return kept, verdicts
