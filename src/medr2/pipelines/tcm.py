"""TCM-DiffRAG (``tcm_diffrag``): a new case's findings matched to solved cases' triple paths
(findings -> syndrome -> therapy -> formula, the personalized graph of ``medr2 kg cases``), the
GB/T 16751 definitions of the options' and the matched paths' terms as cited evidence (the
general graph), the matched paths in the prompt, then the answer (a chain of thought when
generated). Every path names its case; every definition is a passage with its TextID.

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> PIPELINES["tcm_diffrag"].method.__name__, PIPELINES["tcm_diffrag"].cot
    ('TCMDiffRAG', True)
"""

from __future__ import annotations

from medr2.apply.kg_prompt import case_paths_block, definition_paths_block
from medr2.appraise.appraiser import base_rows
from medr2.kg.tcm import definition_match, findings
from medr2.llm.base import stage
from medr2.pipelines.base import Method
from medr2.schema import AskResult, Hit, SourceType

CASE_FIELDS = ("case_id", "score", "finding_score", "text_score", "matched", "nodes", "path", "answer", "reasoning")


class TCMDiffRAG(Method):
    def answer(self, question: str, options: dict[str, str], res: AskResult) -> None:
        e, c = self.engine, self.engine.config.kg.cases
        matcher, terms = e.tcm
        with stage("cases"):
            cases = matcher.match(question, c.k, exclude=self.exclude_docs)
        names = list(options.values()) + [n for m in cases for n in m["nodes"].values()]
        with stage("definitions"):
            hits, seen = [], set()
            for t in (t for n in names for t in terms.lookup_all(n)):
                if t.passage_id not in seen and len(hits) < c.max_definitions:
                    seen.add(t.passage_id)
                    hits.append(Hit(passage_id=t.passage_id, doc_id=t.doc_id, title=t.term,
                                    source_type=SourceType.entry, heading_path=[t.part, t.term], text=t.text,
                                    language="zh", score=1.0))
        with stage("evidence_level"):
            rows = base_rows(hits, e.leveler)
        for r in rows:
            r.reason = "GB/T 16751 definition"
        evidence = self.pack(rows)
        numbers = {x.passage_id: x.n for x in evidence}
        qf = findings(question)
        general = []
        for letter, text in options.items():
            entries = terms.lookup_all(text)
            if entries:
                pairs = {p: None for t in entries for p in definition_match(qf, t, c.min_similarity)} if qf else {}
                general.append({"option": letter, "term": "、".join(t.term for t in entries),
                                "n": numbers.get(entries[-1].passage_id), "pairs": [list(p) for p in pairs]})
        block = "\n\n".join(b for b in (definition_paths_block(general, len(qf)), case_paths_block(cases)) if b)
        ans = self.generate(question, options, evidence, graph=block or None)
        if not terms:
            ans.notes.append("the index holds no GB/T 16751 entries: no definitions were given (ingest the "
                             "standard's text)")
        res.subgraph = {"findings": qf, "definitions": general,
                        "cases": [{k: m[k] for k in CASE_FIELDS} for m in cases], "prompt": block}
        res.evidence = rows
        self.finish(res, ans)
