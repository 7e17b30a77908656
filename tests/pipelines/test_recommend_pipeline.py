"""Recommendation answers through a pipeline without a generator (the extractive path): ``ask
--json`` carries the recommendations and the uncovered parts; evidence without recommendations
keeps the quoted-sentence answer; the render shows grades and citations."""

import itertools
import json

import numpy as np
import pytest
from test_relevance_order import FakeEngine, hit

from medr2.apply.recommend import Recommender
from medr2.config import Config
from medr2.pipelines import Pipeline
from medr2.render import answer_lines

Q = "Should metformin be stopped when the eGFR falls below 30 mL/min?"
GUIDE = hit("g1", "guideline", 0.9, "- Metformin should be stopped when the eGFR falls below 30 mL/min (Level B).\n"
            "- Metformin should not be started when the eGFR is 30-45 mL/min (Level C).")
FLU = hit("g2", "guideline", 0.01, "- Influenza vaccination is recommended every autumn for adults (Grade A).")


def engine(hits, scorer=None):
    cfg = Config()
    cfg.recommend.overlap_weight, cfg.recommend.max_items = 0.0, 5  # the fake cross-encoder alone decides
    cfg.recommend.llm_answer = "write"  # with a generator the model writes (the quote-mode tests say "quote")
    e = FakeEngine(cfg, hits)
    e.recommender = Recommender(cfg.recommend, scorer or (lambda q, texts: np.asarray(
        [0.9 if "metformin" in t.lower() else 0.02 for t in texts])))
    return e


def test_a_guideline_question_is_answered_with_its_graded_recommendations():
    res = Pipeline(engine([GUIDE, FLU]), "vanilla_rag").run(Q)
    assert res.method == "extractive-recommendations" and not res.insufficient
    assert [(r.grade, r.direction, r.passage_id) for r in res.recommendations] == [
        ("Level B", "for", "g1"), ("Level C", "against", "g1")]
    assert res.citations == ["g1"]
    dumped = res.model_dump(mode="json")
    assert dumped["recommendations"][0]["statement"].startswith("Metformin should be stopped")
    text = "\n".join(answer_lines(res, explain=False))
    assert "Level B" in text and "[1]" in text


def test_no_applicable_recommendation_abstains():
    res = Pipeline(engine([FLU]), "vanilla_rag").run(Q)
    assert res.insufficient and res.recommendations == [] and res.citations == []
    assert res.answer.startswith("Insufficient evidence: the passages found do not contain a guideline recommendation")


def test_passages_without_recommendations_keep_the_sentence_answer():
    plain = hit("t1", "book", 0.9, "Metformin is cleared by the kidney. Lactic acidosis is rare.")
    res = Pipeline(engine([plain]), "vanilla_rag").run(Q)
    assert res.method == "extractive" and res.recommendations == []


class RecordingLLM:
    """Plumbing fake generator: records the prompts, answers with one cited sentence."""

    name, temperature, seed = "fake", 0.0, 0

    def __init__(self):
        self.prompts = []

    def chat(self, messages, json_schema=None, **kw):
        self.prompts.append(messages[-1]["content"])
        out = {"rationale": "The guideline says so [1].", "answer": "Stop metformin below an eGFR of 30 [1].",
               "citations": [1], "insufficient": False}
        return {"text": json.dumps({k: v for k, v in out.items() if k in json_schema["properties"]})}


@pytest.mark.parametrize("give", [True, False])
def test_with_a_generator_the_recommendations_structure_the_prompt_when_asked(give):
    from medr2.apply.answer import CitedAnswerer

    e = engine([GUIDE, FLU])
    e.config.recommend.prompt = give
    llm = RecordingLLM()
    e.generator = llm
    e.answerers = {cot: CitedAnswerer(llm, cot) for cot in (True, False)}
    res = Pipeline(e, "vanilla_rag").run(Q)
    assert res.method == "llm" and res.citations == ["g1"]
    assert [r.grade for r in res.recommendations] == ["Level B", "Level C"]  # listed either way
    block = "Guideline recommendations in the evidence that apply (strongest first):\n[1] (Level B; moderate)"
    assert (block in llm.prompts[-1]) is give
    assert ("state each one that applies, with its grade" in llm.prompts[-1]) is give


class PointingLLM(RecordingLLM):
    """Plumbing fake generator that names the recommendations instead of stating them."""

    def chat(self, messages, json_schema=None, **kw):
        self.prompts.append(messages[-1]["content"])
        out = {"rationale": "Both recommendations [1] bear on the question.",
               "answer": "The guideline recommendations [1] apply.", "citations": [1], "insufficient": False}
        return {"text": json.dumps({k: v for k, v in out.items() if k in json_schema["properties"]})}


@pytest.mark.parametrize("llm_cls", [PointingLLM, RecordingLLM])
def test_an_answer_that_only_points_at_the_recommendations_is_replaced_by_them(llm_cls):
    from medr2.apply.answer import CitedAnswerer

    e = engine([GUIDE, FLU])
    llm = llm_cls()
    e.generator = llm
    e.answerers = {cot: CitedAnswerer(llm, cot) for cot in (True, False)}
    res = Pipeline(e, "vanilla_rag").run(Q)
    if llm_cls is RecordingLLM:  # an answer that states something is kept as written
        assert res.method == "llm" and res.answer == "Stop metformin below an eGFR of 30 [1]."
        return
    assert res.method == "llm+quoted-recommendations" and res.citations == ["g1"]
    assert "Metformin should be stopped when the eGFR falls below 30" in res.answer and "Level B" in res.answer
    assert "named the recommendations without stating them" in res.notes[0]
    text = "\n".join(answer_lines(res, explain=False))
    assert "Recommendations that apply" not in text  # the answer is the list: not printed twice


def test_the_abstention_reads_similarity_only_with_the_encoder_it_was_chosen_for(demo_index_dir):
    """The real engine: the demo index's bundled encoder gives the cosine check; another encoder
    name in ``abstain_dense_model`` turns it off (its threshold is on that encoder's scale)."""
    from medr2.pipelines.engine import Engine

    cfg = Config()
    e = Engine.open(demo_index_dir, cfg, generator="none")
    try:
        sim = e.recommender.similarity
        assert sim is not None
        v = sim("Should metformin be stopped at a low eGFR?",
                ["Metformin should be stopped when the eGFR falls below 30.", "Offer influenza vaccination."])
        assert v.shape == (2,) and v[0] > v[1] and -1.0 <= v.min() <= v.max() <= 1.0
    finally:
        e.close()
    cfg.recommend.abstain_dense_model = "some-other-encoder"
    e = Engine.open(demo_index_dir, cfg, generator="none")
    try:
        assert e.recommender.similarity is None
    finally:
        e.close()


def test_the_engine_reads_the_passages_after_a_passage_under_the_same_headings(demo_index_dir):
    """Engine.next_texts on the real demo index: for a passage, the passages after it in its
    document while their headings are its own, nearest first (where a list cut from its lead-in
    goes on)."""
    from medr2.pipelines.engine import Engine

    e = Engine.open(demo_index_dir, Config(), generator="none")
    try:
        ps = e.index.store.doc_passages("demo:guideline-hypertension")
        i = next(i for i in range(len(ps) - 2) if ps[i].heading_path == ps[i + 1].heading_path)
        run = [q for q in itertools.takewhile(lambda q: q.heading_path == ps[i].heading_path, ps[i + 1:i + 3])]
        got = e.next_texts([ps[i].passage_id, "no-such-passage"], n=2)
        assert got == {ps[i].passage_id: [(q.passage_id, q.text) for q in run]}
        assert ps[-1].passage_id not in e.next_texts([ps[-1].passage_id])  # the document's last passage
        last = max(j for j in range(len(ps) - 1) if ps[j].heading_path != ps[j + 1].heading_path)
        assert e.next_texts([ps[last].passage_id]) == {}  # the next passage is under other headings
    finally:
        e.close()


def test_the_engine_gives_the_generator_path_its_own_selection():
    """Engine._recommender on a stand-in engine: without a generator the extractive selection,
    with one the ``llm_*`` selection (``RecommendConfig.for_generator``)."""
    from types import SimpleNamespace

    from medr2.pipelines.engine import Engine

    cfg = Config()
    cfg.recommend.max_items, cfg.recommend.llm_max_items, cfg.recommend.llm_answer = 4, 2, "write"
    fake = SimpleNamespace(config=cfg, searcher=SimpleNamespace(reranker=None), index=SimpleNamespace(config=cfg),
                           previous_texts=lambda ids: {}, next_texts=lambda ids: {}, generator=None,
                           reranker_reads=lambda text: True)
    assert Engine._recommender(fake).c.max_items == 4
    fake.generator = object()  # plumbing stand-in: only its presence is read
    assert Engine._recommender(fake).c.max_items == 2


def test_the_cosine_is_computed_only_where_it_decides():
    """``choose`` takes the question-statement cosine as a function and calls it only when the
    passage relevance alone would abstain; there a close statement withdraws the abstention."""
    from medr2.apply.answer import EvidenceItem
    from medr2.appraise.recommendations import extract

    c = Config().recommend
    r = Recommender(c, scorer=lambda q, t: np.full(len(t), 0.5))
    e = EvidenceItem(1, "g1", "Guide", "guideline", 3, "")
    cands = [(e, s) for s in extract("- Metformin should be stopped when the eGFR falls below 30 mL/min (Level B).")]
    rel = np.full(len(cands), 0.5)
    calls = []

    def cosine(value):
        def f():
            calls.append(value)
            return value
        return f
    assert not r.choose(Q, cands, rel, c.abstain_below + 0.1, cosine(0.0)).insufficient and calls == []
    assert r.choose(Q, cands, rel, c.abstain_below / 2, cosine(0.0)).insufficient and calls == [0.0]
    assert not r.choose(Q, cands, rel, c.abstain_below / 2, cosine(c.abstain_dense_below + 0.1)).insufficient
    assert r.choose(Q, cands, rel, c.abstain_below / 2, None).insufficient  # passage relevance alone


def test_the_section_a_recommendation_sits_under_reaches_json_and_the_render():
    sectioned = hit("g3", "guideline", 0.9, "Renal Function and Metformin\n"
                    "- Metformin should be stopped when the eGFR falls below 30 mL/min (Level B).")
    res = Pipeline(engine([sectioned]), "vanilla_rag").run(Q)
    (rec,) = res.recommendations
    assert rec.section == "Renal Function and Metformin"
    assert rec.statement.startswith("Metformin should be stopped")  # the heading is not quoted as advice
    assert json.loads(res.model_dump_json())["recommendations"][0]["section"] == "Renal Function and Metformin"
    assert '[1] Renal Function and Metformin: "Metformin should be stopped' in "\n".join(answer_lines(res, explain=False))


def test_a_list_read_from_the_next_passages_is_shown_with_where_it_goes_on():
    """A lead-in that ends its passage: ``ask --json`` quotes it with the items of the passages
    after it and names them (``continued_in``); the text render and the answer's notes say so."""
    lead = hit("g4", "guideline", 0.9, "- Metformin should be stopped in people who have:")
    e = engine([lead])
    e.recommender.following = lambda ids: {"g4": [("g5", "- an eGFR below 30 mL/min"), ("g6", "- lactic acidosis")]}
    res = Pipeline(e, "vanilla_rag").run(Q)
    (rec,) = res.recommendations
    assert rec.statement == "Metformin should be stopped in people who have: an eGFR below 30 mL/min; lactic acidosis."
    assert json.loads(res.model_dump_json())["recommendations"][0]["continued_in"] == ["g5", "g6"]
    assert "[1]'s list goes on in g5, g6" in "\n".join(answer_lines(res, explain=False))
    assert any("list's lead-in ends its passage" in n for n in res.notes)


def test_the_parts_no_recommendation_covers_are_printed_once():
    """The text render names the uncovered parts once under the list of a generated answer, and
    not at all where the answer is the quoted list (it says so itself)."""
    from medr2.schema import AskResult, Recommendation

    recs = [Recommendation(n=1, passage_id="g1", statement="Metformin should be stopped below 30.", grade="Level B"),
            Recommendation(n=2, passage_id="g2", statement="Offer an SGLT2 inhibitor.", grade="Level A")]
    res = AskResult(question=Q, answer="Stop it [1].", method="llm", recommendations=recs, uncovered=["what dose"])
    assert "\n".join(answer_lines(res, explain=False)).count("Not covered by these recommendations") == 1
    res.method = "extractive-recommendations"
    assert "Not covered by these recommendations" not in "\n".join(answer_lines(res, explain=False))


class JudgingLLM(RecordingLLM):
    """Plumbing fake generator: judges statements on metformin as applying; must not write."""

    def chat(self, messages, json_schema=None, **kw):
        raise AssertionError("the generator wrote an answer although it only judges (llm_answer = quote)")

    def continuation_logprobs(self, prompt, continuation):
        self.prompts.append(prompt)
        applies = "stopped" in prompt.split("Guideline recommendation: ", 1)[1]
        return [-0.05] if (continuation == " yes") == applies else [-3.0]

    def count_tokens(self, text):
        return len(text.split())


def test_in_quote_mode_the_generator_judges_and_the_answer_quotes():
    from medr2.apply.judge import JUDGED, StatementJudge

    e = engine([GUIDE, FLU])
    e.config.recommend.llm_answer = "quote"
    llm = JudgingLLM()
    e.generator = llm
    e.recommender = Recommender(e.config.recommend.for_judge(), None, judge=StatementJudge(llm))
    p = Pipeline(e, "vanilla_rag")
    res = p.run(Q)
    assert res.method == JUDGED and res.citations == ["g1"] and not res.insufficient
    # the judged selection: the "stopped" statement only (the other, same passage, judged not to apply)
    assert [r.grade for r in res.recommendations] == ["Level B"]
    assert res.answer.startswith("- [") and "Metformin should be stopped" in res.answer
    assert "judge:fake judged which statements apply" in " ".join(res.notes)
    assert p.quoting and p.coarse_k() >= e.config.recommend.extractive_k
    text = "\n".join(answer_lines(res, explain=False))
    assert "Recommendations that apply" not in text  # the answer is the list: not printed twice


class NoLogprobsLLM(JudgingLLM):
    """Plumbing fake generator of a server that gives no token log-probabilities."""

    def continuation_logprobs(self, prompt, continuation):
        from medr2.llm.base import NoLogprobsError

        raise NoLogprobsError("this endpoint cannot score continuations")


def test_in_quote_mode_a_generator_without_logprobs_leaves_the_choice_to_the_extractive_selection():
    from medr2.apply.judge import StatementJudge
    from medr2.apply.recommend_answer import EXTRACTIVE

    e = engine([GUIDE, FLU])
    e.config.recommend.llm_answer = "quote"
    e.generator = llm = NoLogprobsLLM()
    e.recommender = Recommender(e.config.recommend.for_judge(), None, judge=StatementJudge(llm),
                                fallback=Recommender(e.config.recommend, None))
    res = Pipeline(e, "vanilla_rag").run(Q)
    assert res.method == EXTRACTIVE and res.recommendations and not res.insufficient
    assert "the generator could not judge the statements" in " ".join(res.notes)


def test_the_engine_gives_quote_mode_a_judge_and_the_extractive_selection_behind_it():
    from types import SimpleNamespace

    from medr2.pipelines.engine import Engine

    cfg = Config()
    assert cfg.recommend.llm_answer == "quote"  # the default with a generator (dev choice of 2026-12-08)
    cfg.recommend.max_items, cfg.recommend.judge_max_items = 4, 2
    fake = SimpleNamespace(config=cfg, searcher=SimpleNamespace(reranker=None), index=SimpleNamespace(config=cfg),
                           previous_texts=lambda ids: {}, next_texts=lambda ids: {}, generator=object(),
                           reranker_reads=lambda text: True)
    r = Engine._recommender(fake)
    assert r.judge is not None and r.c.max_items == 2
    assert r.fallback.judge is None and r.fallback.c.max_items == 4


def test_in_quote_mode_evidence_without_recommendations_is_written_from_the_generator_window():
    """Quote mode packs every appraised passage for the judge; when none holds a recommendation the
    model writes the answer, from the window a written answer has (not from every passage)."""
    from medr2.apply.answer import CitedAnswerer
    from medr2.apply.judge import StatementJudge
    from medr2.pipelines.base import UNLIMITED_WINDOW

    plain = [hit(f"t{i}", "book", 0.9 - i / 100, f"Metformin fact {i}. " + "word " * 120) for i in range(8)]
    e = engine(plain)
    e.config.recommend.llm_answer = "quote"
    e.config.gate.enabled = False
    e.config.apply.context_tokens = 400
    e.generator = llm = RecordingLLM()
    llm.count_tokens = lambda text: len(text.split())
    e.answerers = {cot: CitedAnswerer(llm, cot) for cot in (True, False)}
    e.recommender = Recommender(e.config.recommend.for_judge(), None, judge=StatementJudge(llm))
    p = Pipeline(e, "vanilla_rag")
    res = p.run(Q)
    assert res.method == "llm" and not p.quoting and len(llm.prompts) == 1
    kept = [r for r in res.evidence if r.kept]
    assert 0 < len(kept) < len(plain) and [r.n for r in kept] == list(range(1, len(kept) + 1))
    assert any(r.reason.startswith("outside the context window (w = ") for r in res.evidence)
    assert all(f"Metformin fact {int(r.passage_id[1:])}." in llm.prompts[0] for r in kept)
    assert res.rounds[0].context_ids == [r.passage_id for r in kept]
    assert p.budget() != UNLIMITED_WINDOW


def test_quote_mode_quotes_only_evidence_that_holds_statements_to_quote():
    """Every pipeline's pack settles it (the graph pipeline calls it before reading its window): the
    quoted list needs candidate statements, else the model writes from its window."""
    from medr2.appraise.appraiser import base_rows
    from medr2.pipelines.base import UNLIMITED_WINDOW

    e = engine([GUIDE])
    e.config.recommend.llm_answer = "quote"
    e.generator = RecordingLLM()
    p = Pipeline(e, "vanilla_rag")
    p.quote_mode = True
    p.settle_quoting(base_rows([GUIDE], e.leveler))
    assert p.quoting and p.budget() == UNLIMITED_WINDOW
    plain = hit("t1", "book", 0.9, "Metformin is cleared by the kidney. Lactic acidosis is rare.")
    p.settle_quoting(base_rows([plain], e.leveler))
    assert not p.quoting and p.budget() != UNLIMITED_WINDOW and p.coarse_k() >= e.config.recommend.extractive_k
