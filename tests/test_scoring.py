"""Score math and checks of the Med-R2 pipeline as pure functions."""

import math

import numpy as np
import pytest

from medr2.appraise.conflicts import claims_conflict, ranges_overlap, resolve, sentence_claims, stated_range
from medr2.appraise.doc_type import F_G_FLOOR, doc_type_fit, normalise, softmax
from medr2.appraise.evidence_level import design_from_metadata, detect_design, f_h
from medr2.appraise.fine import fine_score
from medr2.search.llm_rerank import p_yes
from medr2.appraise.usefulness import usefulness
from medr2.apply.answer import EvidenceItem, answer_schema, check_citations, extractive_answer, finish, strip_bad_marks
from medr2.apply.pack import pack
from medr2.assess.stop_rule import answer_agreement, mean_shift, should_stop, token_f1
from medr2.formulate.labels import DOC_TYPES
from medr2.llm.base import Usage, extract_json, stage, track
from medr2.llm.llamacpp import grammar_schema
from medr2.llm.remote import continuation_from_echo


def test_fine_score_is_multiplicative_and_guards_its_ranges():
    assert fine_score(7, 0.5, 0.0) == 3.5
    assert fine_score(7, 0.5, 1.0, alpha=1.0) == 7.0
    assert fine_score(7, 0.5, 1.0, alpha=0.5) == 5.25
    # a near-zero document-type fit sinks a passage whatever its usefulness
    assert fine_score(9, F_G_FLOOR, 5.0) < fine_score(1, 0.5, 0.0)
    for bad in [(0, 0.5, 0), (10, 0.5, 0), (5, 0.0, 0), (5, 1.0, 0), (5, 0.5, -0.1), (5, 0.5, float("nan"))]:
        with pytest.raises(ValueError):
            fine_score(*bad)


def test_evidence_level_to_f_h():
    assert [f_h(e) for e in (1, 3, 9)] == [9, 7, 1]
    with pytest.raises(ValueError):
        f_h(0)


def test_usefulness_is_a_clipped_loss_drop():
    assert usefulness(2.5, 1.0) == 1.5
    assert usefulness(1.0, 2.0) == 0.0


def test_doc_type_fit_sums_expected_types_inside_open_interval():
    dist = normalise({"comparison": 2.0, "evaluation": 1.0, "definition": 1.0})
    assert math.isclose(sum(dist.values()), 1.0) and set(dist) == set(DOC_TYPES)
    assert math.isclose(doc_type_fit(dist, ["comparison", "evaluation"]), 0.75)
    assert doc_type_fit(dist, ["narration"]) == F_G_FLOOR
    assert doc_type_fit({t: 1 / 16 for t in DOC_TYPES}, DOC_TYPES) == 1 - F_G_FLOOR
    assert normalise({"definition": -3}) == {t: 1 / 16 for t in DOC_TYPES}
    p = softmax([1.0, 2.0, 3.0], 0.5)
    assert math.isclose(sum(p), 1.0) and p[2] > p[1] > p[0]
    with pytest.raises(ValueError):
        softmax([1.0], 0)


def test_p_yes_from_logprobs():
    assert math.isclose(p_yes(math.log(0.3), math.log(0.1)), 0.75)
    assert p_yes(-1000.0, -1.0) < 1e-6


def test_study_design_cues_and_metadata_precedence():
    assert detect_design("A randomised, double-blind, placebo-controlled trial of drug X") == "randomized controlled trial"
    assert detect_design("We report the case of a 54-year-old woman with ...") == "case report"
    assert detect_design("Meta-analysis of randomized controlled trials") == "meta-analysis"
    assert detect_design("A prospective cohort of 12,000 nurses followed for 10 years") == "cohort study"
    assert detect_design("Insulin is a peptide hormone.") is None
    assert design_from_metadata("guideline", ["Randomized Controlled Trial"]) == "guideline"
    assert design_from_metadata("paper", ["Journal Article", "Randomized Controlled Trial", "Review"]) == \
        "randomized controlled trial"
    assert design_from_metadata("paper", ["Journal Article"]) is None
    assert design_from_metadata("entry", []) == "encyclopedia"


def test_stop_rule_pieces():
    assert answer_agreement("b", ["B", "B", "C"], multiple_choice=True) == pytest.approx(2 / 3)
    assert answer_agreement("x", [], multiple_choice=True) == 0.0
    assert token_f1("metformin is first line", "metformin first line") == pytest.approx(0.857, abs=1e-3)
    assert token_f1("a", "b") == 0.0
    a = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert mean_shift(a, a) == 0.0
    assert mean_shift(a, np.array([[1.0, 1.0]])) == pytest.approx(math.sqrt(0.5))
    assert mean_shift(a, np.zeros((0, 2))) == float("inf")
    assert mean_shift(np.zeros((0, 2)), np.zeros((0, 2))) == 0.0
    assert should_stop(1.0, 0.1, 6.85) and not should_stop(0.5, 0.1, 6.85)
    assert should_stop(1.0, 0.0, 6.85) and not should_stop(0.0, 0.0, 6.85)
    assert not should_stop(1.0, float("inf"), 6.85)


def test_citations_outside_the_context_are_removed():
    assert check_citations([2, 2, 5, 0, 1], n=3) == ([2, 1], [5, 0])
    text, bad = strip_bad_marks("See [1] and [4].", n=2)
    assert text == "See [1] and [?]." and bad == [4]
    ev = [EvidenceItem(1, "pA", "t", "paper", 4, "x"), EvidenceItem(2, "pB", "t", "paper", 4, "y")]
    a = finish({"rationale": "Per [2] and [7].", "answer": "B", "citations": [9, 2], "insufficient": False}, ev,
               {"A": "a", "B": "b"})
    assert a.citations == ["pB"] and a.cited == [2] and "[?]" in a.rationale and not a.insufficient
    assert any("not in the context" in n for n in a.notes)
    uncited = finish({"answer": "yes", "citations": [], "insufficient": False}, ev, {})
    assert uncited.insufficient and uncited.citations == []


def test_answer_schema_admits_only_context_citations_and_option_letters():
    import jsonschema

    s = answer_schema(2, {"A": "x", "B": "y"}, cot=True)
    jsonschema.validate({"rationale": "r", "answer": "A", "citations": [1, 2], "insufficient": False}, s)
    for bad in [{"rationale": "r", "answer": "C", "citations": [1], "insufficient": False},
                {"rationale": "r", "answer": "A", "citations": [3], "insufficient": False},
                {"answer": "A", "citations": [1], "insufficient": False}]:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, s)
    assert "rationale" not in answer_schema(2, {}, cot=False)["properties"]
    # llama.cpp cannot unroll string length bounds; they are dropped for its grammar only
    g = grammar_schema({"type": "object", "properties": {"q": {"type": "string", "maxLength": 600}}})
    assert g == {"type": "object", "properties": {"q": {"type": "string"}}}


def test_extractive_answer_quotes_the_best_sentence_of_top_evidence():
    ev = [EvidenceItem(1, "pA", "g", "guideline", 3, "Stop metformin when the eGFR falls below 30. Check B12."),
          EvidenceItem(2, "pB", "o", "paper", 9, "Unrelated text about pneumonia.")]
    a = extractive_answer("When should metformin be stopped?", {}, ev)
    assert a.answer.startswith("Stop metformin") and a.citations == ["pA"] and a.method == "extractive"
    mc = extractive_answer("Which drug?", {"A": "metformin", "B": "aspirin"}, ev)
    assert mc.answer == "A" and mc.citations == ["pA"]


def test_pack_fills_the_window_in_rank_order():
    assert pack([("a", 3000), ("b", 2000), ("c", 900), ("d", 300)], 4096) == ["a", "c"]
    assert pack([("a", 5000)], 4096) == []


def test_conflict_rules_are_polarity_and_range_aware():
    assert stated_range("Stop metformin when the eGFR falls below 30 mL/min") == (float("-inf"), 30.0)
    assert stated_range("Continue metformin when the eGFR is 45 mL/min/1.73 m2 or higher") == (45.0, float("inf"))
    assert stated_range("When the eGFR is between 30 and 44 mL/min, reduce the dose") == (30.0, 44.0)
    assert not ranges_overlap((float("-inf"), 30.0), (45.0, float("inf")))
    assert ranges_overlap(None, (1.0, 2.0))
    stop60 = sentence_claims("Metformin should be stopped in everyone whose eGFR falls below 60 mL/min.")[0]
    cont30 = sentence_claims("Metformin can be continued at a reduced dose down to an eGFR of 30 mL/min.")[0]
    stop30 = sentence_claims("Metformin should be stopped when the eGFR falls below 30 mL/min.")[0]
    cont45 = sentence_claims("Metformin can be continued when the eGFR is 45 mL/min or higher.")[0]
    assert stop60.polarity == -1 and cont30.polarity == 1
    assert claims_conflict(stop60, cont30) is not None  # overlap on eGFR 30-60
    assert claims_conflict(stop30, cont45) is None  # different ranges: no conflict
    assert claims_conflict(stop60, sentence_claims("Aspirin is recommended after stroke.")[0]) is None
    assert sentence_claims("Metformin lowers glucose.") == []


def test_conflict_resolution_drops_the_lower_evidence_level():
    out = resolve([("g", "o", "r"), ("a", "b", "r2")], {"g": 3, "o": 9, "a": 4, "b": 4})
    assert out[0].dropped == "o" and out[1].dropped is None


def test_echoed_logprobs_cover_only_the_continuation():
    # offsets are ignored: a BOS string shifts them on some servers
    r = {"choices": [{"logprobs": {"tokens": ["<|begin_of_text|>", "Q", ":", " ye", "s", "\n"],
                                   "token_logprobs": [None, -1.0, -0.5, -0.25, -0.125, -3.0],
                                   "text_offset": [0, 17, 18, 19, 22, 23]}}]}
    assert continuation_from_echo(r, " yes") == [-0.25, -0.125]
    from medr2.llm.base import LLMError

    with pytest.raises(LLMError, match="no prompt log-probabilities"):
        continuation_from_echo({"choices": [{"text": "x"}]}, "x")
    with pytest.raises(LLMError, match="do not cover"):
        continuation_from_echo({"choices": [{"logprobs": {"tokens": ["a", "b"], "token_logprobs": [None, -1.0]}}]},
                               " long continuation")


def test_extract_json_finds_the_object_in_prose():
    assert extract_json('Sure! ```json\n{"a": "x}y", "b": {"c": 1}}\n``` done') == '{"a": "x}y", "b": {"c": 1}}'
    assert extract_json("no json") == "no json"


def test_usage_is_attributed_to_stages():
    from medr2.llm.base import record

    u, own = Usage(), Usage()
    with track(u):
        with stage("classify"):
            record(own, 10, 2, 0.5)
            record(own, 0, 0, 0.0, cached=True)
        with stage("generate"):
            record(own, 100, 20, 2.0)
    record(own, 1, 1, 1.0)  # outside any run: only the backend's own usage
    d = u.to_dict()
    assert d["calls"] == 2 and d["prompt_tokens"] == 110 and own.calls == 3
    assert d["stages"]["classify"]["cached_calls"] == 1 and d["stages"]["generate"]["completion_tokens"] == 20
    assert d["stages"]["generate"]["llm_seconds"] == 2.0 and d["stages"]["generate"]["seconds"] >= 0
    assert 0.0 <= d["outside_llm_share"] <= 1.0


def test_query_text_and_language_families():
    from medr2.formulate.formulator import query_text
    from medr2.formulate.language import language_family

    assert query_text("metformin", "Per [2] and [?], stop\x00 it\ufffd.", max_chars=30) == "metformin Per and , stop it ."[:30]
    assert len(query_text("x" * 5000, max_chars=4000)) == 4000
    assert [language_family(v) for v in ("eng", "English", "en-GB", "zh-Hans", "chi", None)] == \
        ["en", "en", "en", "zh", "zh", "en"]


def test_pipeline_settings_are_validated():
    from pydantic import ValidationError

    from medr2.config import Config
    from medr2.pipelines import validate_options
    from medr2.search.hybrid import QueryError

    for bad in ({"appraise": {"unknown_level": 0}}, {"appraise": {"levels": {"guideline": 12}}},
                {"appraise": {"doc_type_temperature": 0}}, {"assess": {"max_rounds": 0}},
                {"apply": {"cot": False}}):
        with pytest.raises(ValidationError):
            Config.model_validate(bad)
    assert validate_options({"a": " x ", "B": "y"}) == {"A": "x", "B": "y"}
    for bad in ({"A": "x"}, {"AB": "x", "C": "y"}, {"A": "", "B": "y"}, {"a": "x", "A": "y"}):
        with pytest.raises(QueryError):
            validate_options(bad)
