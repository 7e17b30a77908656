"""Graph mode (``kg``; guideline-KG paper + TCM-DiffRAG): the question's linked entities, the
quality-ranked subgraph, the passages its triples were read from and the graph's dense top
passages united with the hybrid passage pool and ordered by the relevance model (the graph adds
recall; it does not narrow the window), solved cases matched on the question's triple path, and
a tier-conditioned prompt.

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> PIPELINES["kg"].method.__name__, PIPELINES["kg"].cot
    ('Graph', True)
"""

from __future__ import annotations

from medr2.apply.context import evidence_budget
from medr2.apply.kg_prompt import cases_block, fit_graph_block, tier_block
from medr2.appraise.appraiser import base_rows
from medr2.llm.base import stage
from medr2.pipelines.base import Method
from medr2.schema import AskResult, Hit

# What the answer record keeps of each statement and case.
TRIPLE_FIELDS = ("triple_id", "label", "head", "head_id", "head_type", "relation", "tail", "tail_id", "tail_type",
                 "q", "tier", "schema_conf", "evid_score", "score", "relevance", "hop", "text_ids", "attrs")
CASE_FIELDS = ("case_id", "score", "question", "answer", "matched")
# The statements and cases may take this share of the evidence window; the passages the rest (ours).
GRAPH_SHARE = 0.5
MATCHED_CASES = 2  # solved cases shown (ours)


class Graph(Method):
    def answer(self, question: str, options: dict[str, str], res: AskResult) -> None:
        e, cfg = self.engine, self.engine.config
        f = self.formulate(question, res)
        with stage("graph"):
            g = e.graph.search(question)
        order: list[str] = []
        for t in g["triples"]:
            order += [x for x in t["text_ids"] if x not in order]
        order += [p["passage_id"] for p in g["passages"] if p["passage_id"] not in order]
        # issue 36: the graph adds to passage retrieval instead of replacing it: the union of the
        # hybrid pool and the subgraph's passages, ordered by the relevance model
        pool = self.retrieve(f.query, res.notes)
        in_pool = {h.passage_id for h in pool}
        union = pool + [h for h in self.hits(order) if h.passage_id not in in_pool]
        with stage("coarse_rerank"):
            # read with what the pool was read with (a translated question where one was needed)
            ranked = e.rerank(self.anchor or f.query, union, len(union), res.notes)
        with stage("evidence_level"):
            rows = base_rows(ranked, e.leveler)
        from_graph = set(order)
        for r in rows:
            r.reason = ("graph + passage retrieval" if r.passage_id in from_graph and r.passage_id in in_pool else
                        "graph" if r.passage_id in from_graph else "passage retrieval")
        self.settle_quoting(rows)  # before the window is read: quote mode's is unlimited
        risky, budget = set(cfg.kg.high_risk_relations), self.budget()
        # the block is held to its share of the configured window (what a model is shown), also
        # on the extractive path, whose passage window is unlimited; measured with the passages
        # numbered as if every one fit
        window = evidence_budget(cfg, e.generator)
        triples, cases, need = fit_graph_block(g["triples"], self.cases(question), {p: i for i, p in enumerate(order, 1)},
                                               risky, g["conflicts"], int(window * GRAPH_SHARE), e.count_tokens)
        evidence = self.pack(rows, budget - need)
        block, shown, withheld = tier_block(triples, {x.passage_id: x.n for x in evidence}, risky, g["conflicts"])
        block += cases_block(cases)
        if len(triples) < len(g["triples"]):
            res.notes.append(f"{len(g['triples']) - len(triples)} of {len(g['triples'])} graph statements left out: "
                             f"the statements may take half of the {window}-token evidence window")
        ans = self.generate(question, options, evidence, graph=block or None)
        if not g["triples"]:
            ans.notes.insert(0, "no entity of the question links to the knowledge graph; answered from the dense "
                                "passages only")
        res.subgraph = {"links": g["links"], "triples": [{k: t.get(k) for k in TRIPLE_FIELDS} for t in shown],
                        "cases": [{k: c[k] for k in CASE_FIELDS} for c in cases],
                        "withheld": [{k: t.get(k) for k in TRIPLE_FIELDS if k != "label"} for t in withheld],
                        "conflicts": g["conflicts"], "timings_ms": g["timings_ms"], "prompt": block}
        res.conflicts = [{"kind": "triple", **c} for c in g["conflicts"]]
        res.evidence = rows
        self.finish(res, ans)

    def hits(self, order: list[str]) -> list[Hit]:
        """The passages in ``order`` as hits (an excluded document's never)."""
        rows_by_id = self.engine.graph.passages_by_id(order)
        return [Hit(passage_id=pid, doc_id=r["doc_id"], title=r["title"] or "", source_type=r["source_type"],
                    heading_path=r["heading_path"], text=r["text"], language=r["language"] or "en", year=r["year"],
                    publication_types=r["publication_types"], score=0.0)
                for pid in order if (r := rows_by_id.get(pid)) is not None and r["doc_id"] not in self.exclude_docs]

    def cases(self, question: str) -> list[dict]:
        """TCM-DiffRAG's personalized graph: solved cases matched on the question's triple path."""
        from medr2.kg.extract.rules import RuleExtractor
        from medr2.kg.personalized import match_cases

        e = self.engine
        if e.graph.kg.db.execute("SELECT 1 FROM cases LIMIT 1").fetchone() is None:
            return []
        with stage("cases"):
            got = match_cases(e.graph.kg, e.index.encoder, question, RuleExtractor(e.graph.linker), None,
                              k=MATCHED_CASES)
        return got["cases"]
