"""The evidence gate's score math (medr2.apply.gate): pure functions, every branch."""

import math

import pytest

from medr2.apply.gate import (agree_decision, best_letter, combine, confidence, decide, decide_generated, log_softmax,
                              relevance_gate, skip_loglik, use_decision)

S0 = {"A": math.log(0.7), "B": math.log(0.2), "C": math.log(0.1)}  # confident in A without evidence
S1_WEAK = {"A": math.log(0.3), "B": math.log(0.4), "C": math.log(0.3)}  # evidence: unsure, leans B
S1_STRONG = {"A": math.log(0.05), "B": math.log(0.9), "C": math.log(0.05)}  # evidence: sure of B


def test_log_softmax_renormalises_over_the_options_and_keeps_minus_infinity():
    out = log_softmax({"A": -5.0, "B": -6.0, "C": float("-inf")})
    assert math.isclose(sum(math.exp(v) for v in out.values()), 1.0)
    assert out["C"] == float("-inf") and math.isclose(out["A"] - out["B"], 1.0)
    with pytest.raises(ValueError, match="finite"):
        log_softmax({"A": float("-inf")})


def test_combine_is_the_weighted_sum_of_log_probabilities():
    c = combine(S0, S1_WEAK, 0.5)
    for k in S0:
        assert math.isclose(c[k], 0.5 * math.log({"A": .7, "B": .2, "C": .1}[k]) + 0.5 * math.log({"A": .3, "B": .4, "C": .3}[k]))
    assert best_letter(combine(S0, S1_WEAK, 0.0)) == "A" and best_letter(combine(S0, S1_WEAK, 1.0)) == "B"
    with pytest.raises(ValueError, match="weight"):
        combine(S0, S1_WEAK, 1.5)
    with pytest.raises(ValueError, match="different options"):
        combine(S0, {"A": 0.0, "B": 0.0}, 0.5)


def test_unsure_evidence_does_not_overturn_a_confident_answer_but_sure_evidence_does():
    keep = decide(S0, S1_WEAK, relevance=0.8, min_relevance=0.1, weight=0.5)
    assert (keep.answer, keep.mode, keep.evidence_used) == ("A", "combined", True)
    assert "did not overturn A" in keep.reason and keep.answer_with == "B"
    flip = decide(S0, S1_STRONG, relevance=0.8, min_relevance=0.1, weight=0.5)
    assert flip.answer == "B" and "changed the answer from A" in flip.reason
    assert math.isclose(flip.confidence_with, 0.9) and math.isclose(flip.confidence_without, 0.7)
    same = decide(S0, S0, relevance=0.8, min_relevance=0.1, weight=0.5)
    assert same.answer == "A" and "picks A" in same.reason


def test_irrelevant_evidence_is_not_used_and_the_decision_says_why():
    d = decide(S0, S1_STRONG, relevance=0.03, min_relevance=0.1, weight=1.0)
    assert (d.answer, d.mode, d.evidence_used, d.weight) == ("A", "none", False, 0.0)
    assert "0.030 < gate.min_relevance 0.1" in d.reason
    assert relevance_gate(None, 0.5) is None  # no relevance model: relevance cannot veto
    assert relevance_gate(0.5, 0.5) is None and relevance_gate(0.49, 0.5)
    s = skip_loglik(S0, 0.03, "not relevant")
    assert s.answer == "A" and not s.evidence_used and s.answer_with == "" and s.to_dict()["scores_with"] == {}


def test_weight_one_is_plain_rag_and_weight_zero_never_reads_evidence():
    rag = decide(S0, S1_WEAK, relevance=None, min_relevance=0.5, weight=1.0)
    assert (rag.answer, rag.mode) == ("B", "evidence")
    none = decide(S0, S1_STRONG, relevance=0.9, min_relevance=0.0, weight=0.0)
    assert (none.answer, none.mode, none.evidence_used) == ("A", "none", False)
    d = rag.to_dict()
    assert set(d["scores_with"]) == {"A", "B", "C"} and d["confidence_with"] == round(confidence(S1_WEAK), 4)
    assert use_decision(None, 0.2).evidence_used and "no relevance model" in use_decision(None, 0.2).reason


def test_generated_letters_are_weighed_between_the_two_the_model_wrote():
    # the model wrote A without evidence and C with it, though the evidence scores favour B:
    # B is never the answer (no one wrote it); A stays unless the evidence lifts C above it
    s1 = {"A": math.log(0.3), "B": math.log(0.45), "C": math.log(0.25)}
    keep = decide_generated("A", "C", S0, s1, relevance=0.4, weight=0.5)
    assert (keep.answer, keep.evidence_used, keep.weight) == ("A", False, 0.0) and "did not overturn A" in keep.reason
    lift = decide_generated("A", "C", S0, {"A": math.log(0.02), "B": math.log(0.03), "C": math.log(0.95)}, 0.4, 0.5)
    assert (lift.answer, lift.evidence_used, lift.weight) == ("C", True, 0.5) and lift.mode == "combined"
    # the larger the weight, the more the written-with-evidence letter wins
    lean = {"A": math.log(0.3), "B": math.log(0.3), "C": math.log(0.4)}
    assert [decide_generated("A", "C", S0, lean, 0.4, w).answer for w in (0.5, 0.95)] == ["A", "C"]
    # ties go to the evidence's letter
    flat = {"A": math.log(0.5), "C": math.log(0.5)}
    assert decide_generated("A", "C", flat, flat, None, 0.5).answer == "C"
    with pytest.raises(ValueError, match="agree"):
        decide_generated("A", "A", S0, s1, 0.4, 0.5)
    with pytest.raises(ValueError, match="not one of the scored options"):
        decide_generated("A", "D", S0, s1, 0.4, 0.5)
    same = agree_decision(0.4, "B", 0.5)
    assert (same.answer, same.evidence_used, same.answer_without, same.answer_with) == ("B", True, "B", "B")


def test_an_unused_evidence_reason_says_whether_it_pointed_to_the_same_option():
    # the confidence rule leaves the evidence out in both cases; the reason tells them apart
    same = decide({"A": -0.1, "B": -3.0}, {"A": -0.5, "B": -1.0}, 0.6, 0.0, 0.5, confidence_gain=True)
    other = decide({"A": -0.1, "B": -3.0}, {"A": -0.9, "B": -0.6}, 0.6, 0.0, 0.5, confidence_gain=True)
    assert not same.evidence_used and not other.evidence_used
    assert "picks the same option (A)" in same.reason
    assert "would pick B" in other.reason and "same option" not in other.reason
