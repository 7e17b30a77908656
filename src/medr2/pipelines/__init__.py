"""Question-answering methods as short compositions of stage calls over one engine.

An :class:`Engine` builds the components once (formulator, hybrid searcher with its coarse
reranker, appraiser, answerers, graph searcher); a method is a subclass of :class:`Method`
whose ``answer`` calls the stages in its order; :data:`PIPELINES` names every method, and the CLI,
the service and the evaluation harness read it; ``Pipeline(engine, name)`` builds one:

* ``direct`` / ``direct_cot`` - the generator alone (medr2.pipelines.direct);
* ``vanilla_rag`` and the Med-R2 ablations ``+reformulator``, ``+reranker``, ``+cot`` and their
  pairs (medr2.pipelines.rag);
* ``medr2`` - all three plus the iterative loop with the stop rule (medr2.pipelines.medr2);
* ``kg`` - graph mode (medr2.pipelines.graph); ``llm_amt`` - the LLM-AMT baseline (medr2.pipelines.amt).

A new method in about 30 lines: the fine rerank before the reformulator. It appraises what the
question itself retrieves and reformulates only when none of the kept evidence reaches level 4
(a controlled trial or better)::

    >>> from medr2.pipelines import RAG, Spec, register
    >>> from medr2.schema import RoundRecord
    >>> class RerankFirst(RAG):
    ...     def rounds_loop(self, question, options, query, qtype, reference, res):
    ...         rec = RoundRecord(round=1, query=query)
    ...         ans, rows, _ = self.one_round(question, options, qtype, rec, reference, res)
    ...         res.rounds.append(rec)
    ...         if any(r.kept and r.level <= 4 for r in rows):
    ...             return ans, rows
    ...         f = self.engine.formulator.formulate(question, reformulate=True)
    ...         res.reformulation = f.reformulation
    ...         rec = RoundRecord(round=2, query=f.query)
    ...         ans, rows, _ = self.one_round(question, options, qtype, rec, reference, res)
    ...         res.rounds.append(rec)
    ...         return ans, rows
    >>> register("rerank_first", Spec(RerankFirst, fine_rerank=True))

Run it on a one-file index with no generator (the answer is then extractive)::

    >>> import tempfile
    >>> from pathlib import Path
    >>> from medr2.config import Config
    >>> from medr2.index.index import Index
    >>> from medr2.ingest.pipeline import ingest
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "ckd.md").write_text("# Metformin in kidney disease\\n\\nMetformin is contraindicated "
    ...                               "when eGFR is below 30 mL/min/1.73 m2.\\n")
    >>> cfg = Config()
    >>> cfg.formulate.terminologies = []          # no drug / ICD-10 synonyms: faster to open
    >>> index = Index.open(d / "index", cfg, create=True)
    >>> _ = ingest(index, [d / "ckd.md"], progress=False)
    >>> engine = Engine(index, index.config, generator=None, scorer=None)
    >>> res = Pipeline(engine, "rerank_first").run("Can metformin be given when eGFR is below 30?")
    >>> [r.round for r in res.rounds], res.reformulation["method"], res.evidence[0].passage_id == res.rounds[1].context_ids[0]
    ([1, 2], 'offline', True)
    >>> engine.close(); del PIPELINES["rerank_first"]
"""

from medr2.apply.answer import ANSWER_MODES
from medr2.pipelines.base import Method, validate_options
from medr2.pipelines.engine import Engine
from medr2.pipelines.rag import RAG
from medr2.pipelines.registry import PIPELINES, Pipeline, Spec, register

__all__ = ["ANSWER_MODES", "Engine", "Method", "PIPELINES", "Pipeline", "RAG", "Spec", "register",
           "validate_options"]
