"""TCM-DiffRAG (``tcm_diffrag``): a new case's findings matched to solved cases' triple paths
(findings -> syndrome -> therapy -> formula, the personalized graph of ``medr2 kg cases``), the
GB/T 16751 definitions of the options' and the matched paths' terms as cited evidence (the
general graph), the matched paths in the prompt, then the answer (a chain of thought when
generated). The definitions are those of the terms the question names, then the options', then
the matched paths' (``kg.cases.max_definitions`` in all). Every path names its case; every
definition is a passage with its TextID. With ``kg.cases.passages_k`` the hybrid retrieval's
top passages come first in the evidence window (the union of plain retrieval and the graphs).

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> PIPELINES["tcm_diffrag"].method.__name__, PIPELINES["tcm_diffrag"].cot
    ('TCMDiffRAG', True)
"""

from __future__ import annotations

from medr2.apply.kg_prompt import case_paths_block, definition_paths_block
from medr2.appraise.appraiser import base_rows
from medr2.apply.answer import Answer, EvidenceItem, failed_answer
from medr2.formulate.formulator import query_text
from medr2.kg.tcm import definition_match, findings, option_scores
from medr2.llm.base import LLMError, stage
from medr2.pipelines.rag import RAG
from medr2.schema import AskResult, Hit, SourceType

CASE_FIELDS = ("case_id", "score", "finding_score", "text_score", "matched", "nodes", "path", "answer", "reasoning")


class TCMDiffRAG(RAG):
    def answer(self, question: str, options: dict[str, str], res: AskResult) -> None:
        e, c = self.engine, self.engine.config.kg.cases
        qf = findings(question)
        if len(qf) < c.min_findings:  # before the case graph is read: a knowledge item needs none
            self.knowledge_item(question, options, qf, res)
            return
        matcher, terms = e.tcm
        with stage("cases"):
            cases = matcher.match(question, c.k, self.exclude_docs, qf) if c.k else []
        names = list(options.values()) + [n for m in cases for n in m["nodes"].values()]
        with stage("definitions"):
            hits, seen = [], set()
            # the terms the question names ("若属肝火上炎证，……"), the options', the matched paths'
            named = terms.mentioned(question) + [t for n in names for t in terms.lookup_all(n)]
            for t in named:
                if t.passage_id not in seen and len(hits) < c.max_definitions:
                    seen.add(t.passage_id)
                    hits.append(Hit(passage_id=t.passage_id, doc_id=t.doc_id, title=t.term,
                                    source_type=SourceType.entry, heading_path=[t.part, t.term], text=t.text,
                                    language="zh", score=1.0))
        retrieved, notes = [], []
        if c.passages_k:
            query = query_text(question, max_chars=e.config.query.max_query_chars)
            retrieved = [h for h in self.retrieve(query, notes)[:c.passages_k] if h.passage_id not in seen]
        with stage("evidence_level"):
            rows = base_rows(retrieved + hits, e.leveler)
        for r in rows[len(retrieved):]:
            r.reason = "GB/T 16751 definition"
        evidence = self.pack(rows)
        numbers = {x.passage_id: x.n for x in evidence}
        general = []
        for letter, text in options.items():
            entries = terms.lookup_all(text)
            if entries:
                pairs = {p: None for t in entries for p in definition_match(qf, t, c.min_similarity)} if qf else {}
                general.append({"option": letter, "term": "、".join(t.term for t in entries),
                                "n": numbers.get(entries[-1].passage_id), "pairs": [list(p) for p in pairs]})
        block = "\n\n".join(b for b in (definition_paths_block(general, len(qf)),
                                          case_paths_block(cases, c.reasoning_chars, c.shared_findings_only)) if b)
        support = option_scores(options, general, cases, len(qf)) if options else {}
        if e.generator is None and options:
            ans = self.path_answer(options, support, general, evidence)
        elif self.use_loglik(options) and c.path_weight > 0:
            ans = self.fused_answer(question, options, evidence, block, support, c.path_weight)
        else:
            ans = self.generate(question, options, evidence, graph=block or None)
        ans.notes = notes + ans.notes
        if not terms:
            ans.notes.append("the index holds no GB/T 16751 entries: no definitions were given (ingest the "
                             "standard's text)")
        res.subgraph = {"findings": qf, "definitions": general, "option_support": support,
                        "cases": [{k: m[k] for k in CASE_FIELDS} for m in cases], "prompt": block}
        res.evidence = rows
        self.finish(res, ans)

    def knowledge_item(self, question: str, options: dict[str, str], qf: list[str], res: AskResult) -> None:
        """A question with fewer than ``kg.cases.min_findings`` case findings, answered by vanilla
        RAG's round (:class:`RAG`: hybrid retrieval in coarse order, packed, behind the evidence
        gate; a generated answer keeps this pipeline's chain of thought, as ``+cot``)."""
        res.notes.append(f"{len(qf)} case finding(s) in the question (fewer than kg.cases.min_findings = "
                         f"{self.engine.config.kg.cases.min_findings}): a knowledge item, answered from retrieval "
                         "without the case graph")
        res.subgraph = {"findings": qf, "definitions": [], "option_support": {}, "cases": [], "prompt": "",
                        "knowledge_item": True}
        RAG.answer(self, question, options, res)

    def fused_answer(self, question: str, options: dict[str, str], evidence: list[EvidenceItem], block: str,
                     support: dict[str, dict], weight: float) -> Answer:
        """Log-likelihood answer with each option's graph support added (``kg.cases.path_weight``)."""
        lk = self.loglik()
        with stage("generate"):
            try:
                scores, why = lk.letter_scores(question, options, evidence, block or None)
            except LLMError as err:
                return failed_answer(err)
        fused = {k: s + weight * support[k]["score"] for k, s in scores.items()}
        why += (f"; + {weight} x graph support: " + ", ".join(f"{k} {support[k]['score']}" for k in options)
                + " = " + ", ".join(f"{k} {v:.3f}" for k, v in fused.items()))
        return lk.as_answer(fused, why, len(evidence))

    @staticmethod
    def path_answer(options: dict[str, str], scores: dict[str, dict], general: list[dict],
                    evidence: list[EvidenceItem]) -> Answer:
        """Without a model: the option the two graphs support most (medr2.kg.tcm.option_scores),
        citing its definition; insufficient when none is supported or two tie."""
        ranked = sorted(scores.items(), key=lambda kv: -kv[1]["score"])
        best, top = ranked[0]
        by_id = {x.passage_id: x for x in evidence}
        if top["score"] <= 0 or (len(ranked) > 1 and ranked[1][1]["score"] == top["score"]):
            return Answer("", "No option is supported more than the others by the matched case paths or the "
                              "options' definitions.", insufficient=True, method="tcm-paths",
                          notes=["no LLM: the answer is the option the case paths and definitions support most"])
        d = next((g for g in general if g["option"] == best), None)
        cited = [d["n"]] if d and d.get("n") else []
        why = [f"{best}. {options[best]}"]
        if d and d["pairs"]:
            why.append(f"its definition [{d['n']}] lists {len(d['pairs'])} of the case's findings")
        if top["cases"]:
            why.append("matched solved cases reached it: " + ", ".join(top["cases"]))
        return Answer(best, "; ".join(why) + ".", [x.passage_id for x in evidence if x.n in cited], cited,
                      method="tcm-paths",
                      notes=["no LLM: the answer is the option the case paths and definitions support most"]
                      + ["option scores: " + ", ".join(f"{k} {v['score']}" for k, v in scores.items())])
