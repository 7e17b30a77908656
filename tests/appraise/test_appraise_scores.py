"""Appraisal score math as pure functions: fine score, evidence level, usefulness, document-type fit, study design, conflicts."""

import math

import pytest

from medr2.appraise.conflicts import claims_conflict, ranges_overlap, resolve, sentence_claims, stated_range
from medr2.appraise.doc_type import F_G_FLOOR, doc_type_fit, normalise, softmax
from medr2.appraise.evidence_level import design_from_metadata, detect_design, f_h
from medr2.appraise.fine import fine_score
from medr2.appraise.usefulness import usefulness
from medr2.formulate.labels import DOC_TYPES


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

