"""The fine order and the relevance floor through the pipelines, on a fake engine (hand-built
hits with a relevance score, a fake encoder; no model is loaded): the fine-rerank methods use
``appraise.order`` and the floor, the baselines keep the coarse order and pack what they find."""

import numpy as np
import pytest

from medr2.apply.answer import CitedAnswerer
from medr2.apply.context import estimate_tokens
from medr2.appraise.evidence_level import EvidenceLeveler
from medr2.config import Config
from medr2.formulate.formulator import Formulation
from medr2.pipelines import Pipeline
from medr2.pipelines.engine import Engine
from medr2.schema import Hit

QUESTION = "Should metformin be stopped when the eGFR falls below 30 mL/min?"
DIM = 8


class FakeEncoder:
    """Type descriptions as fixed vectors; every passage gets the same one (below), so f_g is
    equal for all and F differs by evidence level only."""

    def encode_passages(self, texts):
        rng = np.random.default_rng(0)
        return rng.normal(size=(len(texts), DIM)).astype(np.float32)


class FakeFormulator:
    def formulate(self, question, reformulate, language=""):
        return Formulation(query=question, question_type="procedural", classification={"question_type": "procedural"})


class FakeSearcher:
    reranker = type("R", (), {"name": "fake-relevance"})()

    def vectors(self, hits):
        return np.ones((len(hits), DIM), dtype=np.float32) / np.sqrt(DIM)


class FakeEngine:
    """What the methods draw from the engine; the appraiser is built by Engine's own code."""

    def __init__(self, config: Config, hits: list[Hit]):
        self.config, self.hits = config, hits
        self.generator = self.scorer = None
        self.index = type("I", (), {"encoder": FakeEncoder()})()
        self.formulator, self.searcher = FakeFormulator(), FakeSearcher()
        a = config.appraise
        self.leveler = EvidenceLeveler(a.levels, a.unknown_level)
        self.count_tokens = estimate_tokens
        self.answerers = {cot: CitedAnswerer(None, cot) for cot in (True, False)}
        self.focus = None  # no sentence focus (apply.focus_sentences = 0)
        self.recommender = None  # no recommendation answers (recommend.enabled = false)
        self._appraiser = None
        self.appraiser = Engine.appraiser.fget(self)

    def index_languages(self):
        return {"en"}

    def model_names(self):
        return {"coarse_reranker": self.searcher.reranker.name}

    def retrieve(self, query, k, exclude_docs=frozenset()):
        return [h.model_copy(deep=True) for h in self.hits]

    def rerank(self, query, hits, k, notes):
        return hits[:k]

    def graph_conflicts(self, passage_ids):
        return []


def hit(pid, source, relevance, text, pubtypes=()):
    scores = {} if relevance is None else {"relevance": relevance}
    return Hit(passage_id=pid, doc_id=f"doc-{pid}", title=pid, source_type=source, text=text,
               publication_types=list(pubtypes), scores=scores)


GUIDELINE = hit("guideline", "guideline", 0.02, "Influenza vaccination is recommended every autumn for adults.")
TRIAL = hit("trial", "paper", 0.92, "Stop metformin when the eGFR falls below 30 mL/min; continue above 45.",
            ["Randomized Controlled Trial"])
ENTRY = hit("entry", "entry", 0.03, "Metformin is a biguanide used in type 2 diabetes.")


def run(name, hits, **appraise):
    cfg = Config()
    for k, v in appraise.items():
        setattr(cfg.appraise, k, v)
    return Pipeline(FakeEngine(cfg, hits), name).run(QUESTION)


def test_fine_rerank_orders_by_relevance_and_keeps_irrelevant_rows_out_of_the_context():
    res = run("+reranker", [GUIDELINE, ENTRY, TRIAL], relevance_floor=0.05, relevance_weight=0.3)
    assert [r.passage_id for r in res.evidence] == ["trial", "guideline", "entry"]
    assert [r.passage_id for r in res.evidence if r.kept] == ["trial"]
    assert res.evidence[0].relevance == 0.92 and res.evidence[0].F is not None
    dropped = {r.passage_id: r.reason for r in res.evidence if not r.kept}
    assert dropped == {"guideline": "dropped: not relevant (relevance 0.02 < floor 0.05)",
                       "entry": "dropped: not relevant (relevance 0.03 < floor 0.05)"}
    assert res.rounds[0].context_ids == ["trial"] and res.citations == ["trial"]


def test_paper_order_restores_F_and_packs_the_off_topic_guideline_first():
    res = run("+reranker", [ENTRY, TRIAL, GUIDELINE], order="paper")
    assert [r.passage_id for r in res.evidence] == ["guideline", "trial", "entry"]  # f_h 7, 6, 1
    assert all(r.kept for r in res.evidence) and res.evidence[0].n == 1


def test_when_nothing_passes_the_floor_the_answer_says_so():
    res = run("+reranker", [GUIDELINE, ENTRY], relevance_floor=0.05)
    assert res.insufficient and not any(r.kept for r in res.evidence)
    assert "no passage passed the relevance floor (0.05): all 2 dropped as not relevant; answered without evidence" \
        in res.notes
    assert res.rounds[0].context_ids == []


@pytest.mark.parametrize("name", ["vanilla_rag", "+reformulator"])
def test_baselines_keep_the_coarse_order_and_no_floor(name):
    res = run(name, [GUIDELINE, ENTRY, TRIAL])
    assert [r.passage_id for r in res.evidence] == ["guideline", "entry", "trial"]
    assert all(r.kept for r in res.evidence) and [r.relevance for r in res.evidence] == [0.02, 0.03, 0.92]
    assert not any("relevance" in n for n in res.notes if not n.startswith("evidence gate:"))  # no floor note


def test_without_a_relevance_model_the_fine_rerank_keeps_the_coarse_order_and_says_so():
    plain = [h.model_copy(update={"scores": {}}) for h in (ENTRY, TRIAL, GUIDELINE)]
    res = run("+reranker", plain)
    assert [r.passage_id for r in res.evidence] == ["entry", "trial", "guideline"]
    assert all(r.kept and r.relevance is None for r in res.evidence)
    fine_notes = [n for n in res.notes if not n.startswith("evidence gate:")]
    assert sum("no relevance model" in n for n in fine_notes) == 1
    assert any(n.startswith("evidence gate: the answer reads the evidence") for n in res.notes)


class ReformulatingFormulator:
    def formulate(self, question, reformulate, language=""):
        q = question + " therapy treatment" if reformulate else question
        return Formulation(query=q, question_type="procedural", classification={"question_type": "procedural"},
                           reformulation={"method": "offline", "query": q} if reformulate else None)


class RecordingEngine(FakeEngine):
    def __init__(self, config, hits):
        super().__init__(config, hits)
        self.formulator, self.calls = ReformulatingFormulator(), []

    def retrieve(self, query, k, exclude_docs=frozenset()):
        self.calls.append(("retrieve", query))
        return super().retrieve(query, k, exclude_docs)

    def rerank(self, query, hits, k, notes):
        self.calls.append(("rerank", query))
        return hits[:k]


def test_a_reformulation_expands_retrieval_and_the_reranker_reads_the_question():
    e = RecordingEngine(Config(), [TRIAL, GUIDELINE])
    Pipeline(e, "+reformulator", answer_mode="generate").run(QUESTION)
    assert e.calls == [("retrieve", [QUESTION + " therapy treatment", QUESTION]), ("rerank", QUESTION)]
    e = RecordingEngine(Config(), [TRIAL, GUIDELINE])
    Pipeline(e, "vanilla_rag", answer_mode="generate").run(QUESTION)  # no reformulation: one query
    assert e.calls == [("retrieve", [QUESTION]), ("rerank", QUESTION)]


class LetterLLM:
    """Answers every multiple-choice prompt with option A citing passage 1 (plumbing only)."""

    name = "letters"
    temperature, seed = 0.0, 0

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        import json

        props = (json_schema or {}).get("properties", {})
        out = {"answer": "A"} | ({"citations": [1], "insufficient": False} if "citations" in props else {})
        if "rationale" in props:
            out = {"rationale": "Because [1]."} | out
        return {"text": json.dumps(out), "prompt_tokens": 10, "completion_tokens": 5}

    def count_tokens(self, text):
        return estimate_tokens(text)


@pytest.mark.parametrize("answer_mode, options, waived", [("generate", {"A": "Stop", "B": "Continue"}, True),
                                                          ("generate", None, False)])
def test_a_thin_context_waives_the_floor_for_generated_multiple_choice_answers(answer_mode, options, waived):
    cfg = Config()
    cfg.appraise.relevance_floor, cfg.appraise.floor_min_passages = 0.05, 2
    eng = FakeEngine(cfg, [GUIDELINE, ENTRY, TRIAL])
    eng.generator = LetterLLM()
    eng.answerers = {cot: CitedAnswerer(eng.generator, cot) for cot in (True, False)}
    res = Pipeline(eng, "+reranker", answer_mode=answer_mode).run(QUESTION, options)
    kept = [r.passage_id for r in res.evidence if r.kept]
    if waived:  # one passage passes the floor: the two under it reach the context too, with a note
        assert kept == ["trial", "guideline", "entry"] and any("is waived for this answer" in n for n in res.notes)
    else:  # a free-text question reads the floor as it is
        assert kept == ["trial"] and not any("waived" in n for n in res.notes)
