"""The fine order (relevance first, F among comparably relevant passages; or the paper's F), the
relevance floor and their notes: pure functions, and the Appraiser with a fake document typer."""

import math

import pytest
from pydantic import ValidationError

from medr2.appraise.appraiser import Appraiser
from medr2.appraise.conflicts import RuleConflicts
from medr2.appraise.doc_type import normalise
from medr2.appraise.evidence_level import EvidenceLeveler
from medr2.appraise.order import (NOT_RELEVANT, apply_floor, empty_context_note, floor_waived, logit, missing_relevance_note,
                                  paper_order, relevance_key, relevance_order)
from medr2.config import AppraiseConfig
from medr2.schema import EvidenceRow, Hit


def row(pid, rank, relevance, F):
    return EvidenceRow(passage_id=pid, doc_id=f"doc-{pid}", coarse_rank=rank, relevance=relevance, F=F)


def ids(rows):
    return [r.passage_id for r in rows]


def test_relevance_decides_between_clearly_different_passages():
    # an off-topic guideline (F 6.3) against a relevant expert opinion (F 0.3): a 21-fold F
    rows = [row("guideline", 1, 0.10, 6.3), row("opinion", 2, 0.90, 0.3)]
    assert ids(relevance_order(rows, 0.3)) == ["opinion", "guideline"]
    assert ids(paper_order(rows)) == ["guideline", "opinion"]
    # the key is logit(relevance) + w ln F
    assert math.isclose(relevance_key(0.9, 0.3, 0.3), math.log(9) + 0.3 * math.log(0.3))


def test_F_orders_comparably_relevant_passages_and_breaks_ties():
    rows = [row("cohort", 1, 0.80, 1.2), row("trial", 2, 0.82, 4.8), row("meta", 3, 0.80, 8.1)]
    assert ids(relevance_order(rows, 0.3)) == ["meta", "trial", "cohort"]
    # w = 0: relevance alone, the coarse rank breaking exact ties
    assert ids(relevance_order(rows, 0.0)) == ["trial", "cohort", "meta"]
    tied = [row("b", 2, 0.5, 2.0), row("a", 1, 0.5, 2.0)]
    assert ids(relevance_order(tied, 0.3)) == ["a", "b"]
    # a larger weight lets F overturn a wider relevance gap
    gap = [row("relevant", 1, 0.7, 0.3), row("strong", 2, 0.5, 6.3)]
    assert ids(relevance_order(gap, 0.1)) == ["relevant", "strong"]
    assert ids(relevance_order(gap, 1.0)) == ["strong", "relevant"]


def test_logit_is_clipped_and_key_guards_its_inputs():
    assert math.isfinite(logit(0.0)) and math.isfinite(logit(1.0)) and math.isclose(logit(1.0), -logit(0.0))
    assert math.isclose(logit(1e-9), logit(1e-4))
    for bad in [(0.5, None, 0.3), (0.5, 0.0, 0.3), (0.5, 1.0, -0.1)]:
        with pytest.raises(ValueError):
            relevance_key(*bad)


def test_rows_without_relevance_keep_their_coarse_positions():
    none = [row("c", 3, None, 9.0), row("a", 1, None, 0.5), row("b", 2, None, 4.0)]
    assert ids(relevance_order(none, 0.3)) == ["a", "b", "c"]  # the coarse order, not F's
    note = missing_relevance_note(none)
    assert "no relevance model" in note and "coarse order" in note and "floor is not applied" in note
    mixed = [row("a", 1, 0.1, 5.0), row("b", 2, None, 1.0), row("c", 3, 0.9, 1.0)]
    assert ids(relevance_order(mixed, 0.3)) == ["c", "b", "a"]  # b stays second
    assert missing_relevance_note(mixed).startswith("1 of 3 passages have no relevance score")
    assert missing_relevance_note([row("a", 1, 0.4, 1.0)]) is None


def test_floor_drops_rows_below_it_with_the_numbers():
    rows = [row("a", 1, 0.02, 5.0), row("b", 2, 0.05, 1.0), row("c", 3, None, 1.0), row("d", 4, 0.9, 1.0)]
    assert apply_floor(rows, 0.05) == 1
    assert rows[0].reason == "dropped: not relevant (relevance 0.02 < floor 0.05)" and not rows[0].kept
    assert [r.reason for r in rows[1:]] == ["", "", ""]  # at the floor, unscored, above: kept in play
    assert apply_floor([row("x", 1, 0.0, 1.0)], 0.0) == 0  # floor 0 drops nothing
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError):
            apply_floor(rows, bad)


def test_empty_context_note_only_when_nothing_is_left():
    rows = [row("a", 1, 0.01, 5.0), row("b", 2, 0.03, 1.0)]
    apply_floor(rows, 0.05)
    assert empty_context_note(rows, 0.05) == ("no passage passed the relevance floor (0.05): all 2 dropped as not "
                                              "relevant; answered without evidence")
    rows.append(row("c", 3, 0.6, 1.0))
    assert empty_context_note(rows, 0.05) is None
    rows[2].reason = "dropped: conflicts with a (level 3 beats 9); ..."
    assert "1 dropped in conflicts" in empty_context_note(rows, 0.05)
    conflict_only = [row("x", 1, 0.9, 1.0)]
    conflict_only[0].reason = "dropped: conflicts with y"
    assert empty_context_note(conflict_only, 0.05) is None


def test_appraise_config_validates_the_order_weight_and_floor():
    a = AppraiseConfig()
    assert a.order == "relevance" and a.relevance_weight >= 0 and 0 <= a.relevance_floor < 1
    assert AppraiseConfig(order="paper", relevance_weight=0, relevance_floor=0).order == "paper"
    for bad in ({"relevance_weight": -0.1}, {"relevance_floor": 1.0}, {"relevance_floor": -0.01},
                {"order": "F"}):
        with pytest.raises(ValidationError):
            AppraiseConfig(**bad)


# -- the Appraiser with a fake document typer -------------------------------------------------
class FixedTyper:
    """Document-type distributions fixed per passage id prefix in the text ("fit:high" ...)."""

    DISTS = {"high": normalise({"instruction": 9.0, "description": 1.0}),
             "low": normalise({"description": 9.0, "instruction": 1.0})}

    def distributions(self, passages, vectors=None):
        return [self.DISTS["high" if "fit:high" in p else "low"] for p in passages]


def hit(pid, source, relevance, text="", pubtypes=()):
    scores = {} if relevance is None else {"relevance": relevance, "rerank": 3.0}
    return Hit(passage_id=pid, doc_id=f"doc-{pid}", title=pid, source_type=source, text=text or f"{pid} fit:high",
               publication_types=list(pubtypes), scores=scores)


def appraiser(order="relevance", weight=0.3, floor=0.05, conflicts=None):
    a = AppraiseConfig()
    return Appraiser(EvidenceLeveler(a.levels, a.unknown_level), FixedTyper(), None, conflicts,
                     a.expected_doc_types, a.alpha, order=order, relevance_weight=weight, relevance_floor=floor)


HITS = [hit("guideline", "guideline", 0.02),  # level 3: the highest F, off topic
        hit("trial", "paper", 0.85, pubtypes=["Randomized Controlled Trial"]),
        hit("entry", "entry", 0.90, text="entry fit:low")]


def test_appraiser_orders_by_relevance_and_drops_rows_under_the_floor():
    notes = []
    rows, _ = appraiser().appraise("q", {}, "procedural", [h.model_copy(deep=True) for h in HITS], None, None, notes)
    assert ids(rows) == ["trial", "entry", "guideline"]
    assert [r.relevance for r in rows] == [0.85, 0.9, 0.02]  # copied from the coarse reranker
    assert rows[0].F > rows[1].F and rows[2].F == max(r.F for r in rows)
    assert rows[2].reason.startswith(NOT_RELEVANT) and not rows[2].kept
    assert notes == []


def test_paper_order_is_the_old_sort_and_applies_no_floor():
    notes = []
    rows, _ = appraiser("paper").appraise("q", {}, "procedural", [h.model_copy(deep=True) for h in HITS], None,
                                          None, notes)
    assert ids(rows) == ["guideline", "trial", "entry"]  # F descending: f_h 7, 6, 1
    assert [r.F for r in rows] == sorted((r.F for r in rows), reverse=True)
    assert all(r.reason == "" for r in rows) and notes == []


def test_no_relevance_model_keeps_the_coarse_order_with_one_note():
    hits = [hit("entry", "entry", None, text="entry fit:low"), hit("guideline", "guideline", None)]
    notes = []
    ap = appraiser()
    for _ in range(2):  # a second round of the same question adds no second note
        rows, _ = ap.appraise("q", {}, "procedural", [h.model_copy(deep=True) for h in hits], None, None, notes)
    assert ids(rows) == ["entry", "guideline"]  # F would put the guideline first
    assert all(r.relevance is None and r.reason == "" for r in rows)
    assert len(notes) == 1 and "no relevance model" in notes[0]


def test_everything_under_the_floor_says_so():
    hits = [hit("a", "guideline", 0.01), hit("b", "paper", 0.04)]
    notes = []
    rows, _ = appraiser().appraise("q", {}, "procedural", hits, None, None, notes)
    assert all(r.reason.startswith(NOT_RELEVANT) for r in rows)
    assert notes == ["no passage passed the relevance floor (0.05): all 2 dropped as not relevant; "
                     "answered without evidence"]


def test_an_off_topic_passage_cannot_knock_out_a_relevant_one_in_a_conflict():
    stop = "Metformin should be stopped in everyone whose eGFR falls below 60 mL/min. fit:high"
    cont = "Metformin can be continued at a reduced dose down to an eGFR of 30 mL/min. fit:high"
    hits = [hit("guideline", "guideline", 0.01, text=stop), hit("cohort", "paper", 0.9, text=cont,
                                                                   pubtypes=["Cohort Study"])]
    rows, found = appraiser(conflicts=RuleConflicts()).appraise(
        "q", {}, "procedural", [h.model_copy(deep=True) for h in hits], None, None, [])
    assert found == [] and rows[0].passage_id == "cohort" and rows[0].reason == ""
    # the paper's order keeps today's behaviour: the guideline's higher level wins the conflict
    rows, found = appraiser("paper", conflicts=RuleConflicts()).appraise(
        "q", {}, "procedural", [h.model_copy(deep=True) for h in hits], None, None, [])
    assert found and found[0].dropped == "cohort"


def test_appraiser_refuses_unknown_orders_and_bad_numbers():
    for kw in ({"order": "F"}, {"weight": -1.0}, {"floor": 1.0}):
        with pytest.raises(ValueError):
            appraiser(**kw)


class CountingScorer:
    """A usefulness scorer that counts its calls and gives every passage f_u = 0.5."""

    def __init__(self):
        self.calls = 0

    def score(self, question, options, passages, reference):
        self.calls += 1
        return [], [0.5] * len(passages)


def test_usefulness_is_skipped_for_a_language_the_proxy_does_not_read():
    a, scorer = AppraiseConfig(), CountingScorer()
    ap = Appraiser(EvidenceLeveler(a.levels, a.unknown_level), FixedTyper(), scorer, None, a.expected_doc_types,
                   a.alpha, order="relevance", relevance_weight=0.3, relevance_floor=0.05,
                   usefulness_languages=tuple(a.usefulness_languages))
    hits = lambda: [h.model_copy(deep=True) for h in HITS]  # noqa: E731
    notes = []
    rows, _ = ap.appraise("2型糖尿病患者首选哪种降糖药？", {}, "factual", hits(), None, "二甲双胍", notes)
    assert scorer.calls == 0 and all(r.f_u == 0 for r in rows)
    assert any("usefulness not computed" in n and "'zh'" in n and "usefulness_languages" in n for n in notes)
    notes = []
    rows, _ = ap.appraise("Which drug is first line in type 2 diabetes?", {}, "factual", hits(), None, "metformin",
                          notes)
    assert scorer.calls == 1 and all(r.f_u == 0.5 for r in rows) and not any("usefulness" in n for n in notes)
    assert ap.usefulness_reads("Which drug?") and not ap.usefulness_reads("哪种降糖药？")
    ap.usefulness_languages = ()  # a multilingual scorer: every language
    assert ap.usefulness_reads("哪种降糖药？")


def test_the_floor_is_waived_only_when_too_few_rows_would_pass_it():
    thin = [row("a", 1, 0.03, 1.0), row("b", 2, 0.01, 1.0), row("c", 3, 0.005, 1.0)]
    assert floor_waived(thin, 0.02, 2) and not floor_waived(thin, 0.02, 1) and not floor_waived(thin, 0.02, 0)
    assert not floor_waived([row("a", 1, 0.5, 1.0)], 0.02, 5)  # nothing below the floor: nothing to waive
    assert floor_waived([row("a", 1, 0.01, 1.0)], 0.02, 1)  # all below: an empty context otherwise
    assert not floor_waived(thin + [row("d", 4, None, 1.0)], 0.02, 2)  # an unscored row stays, so two do


def test_appraiser_waives_the_floor_for_a_thin_context_and_says_so():
    hits = [hit("on", "paper", 0.03), hit("off1", "entry", 0.01), hit("off2", "entry", 0.004)]
    notes = []
    rows, _ = appraiser(floor=0.02).appraise("q", {"A": "a"}, "procedural", [h.model_copy(deep=True) for h in hits],
                                            None, None, notes, min_kept=2)
    assert not any(r.reason.startswith(NOT_RELEVANT) for r in rows)
    assert len(notes) == 1 and "the relevance floor (0.02) would leave 1 passage(s)" in notes[0]
    assert "appraise.floor_min_passages (2)" in notes[0]
    notes = []
    rows, _ = appraiser(floor=0.02).appraise("q", {"A": "a"}, "procedural", [h.model_copy(deep=True) for h in hits],
                                            None, None, notes)
    assert sum(r.reason.startswith(NOT_RELEVANT) for r in rows) == 2 and notes == []


def test_a_waived_row_cannot_knock_out_a_relevant_one_in_a_conflict():
    # an off-topic guideline (level 3) contradicting a relevant cohort (level 6): with the floor in
    # force the guideline never reaches the conflict check; waived, it must still not win it
    class Contradict:
        def pairs(self, items, docs):
            ids = {pid for pid, _ in items}
            return [("guideline", "cohort", "opposite claims")] if {"guideline", "cohort"} <= ids else []

    hits = [hit("guideline", "guideline", 0.01), hit("cohort", "paper", 0.9, pubtypes=["Cohort Study"])]
    notes = []
    rows, found = appraiser(floor=0.02, conflicts=Contradict()).appraise(
        "q", {"A": "a"}, "procedural", [h.model_copy(deep=True) for h in hits], None, None, notes, min_kept=3)
    by_id = {r.passage_id: r for r in rows}
    assert not by_id["cohort"].reason.startswith("dropped") and not by_id["guideline"].reason.startswith("dropped")
    assert found == [] and any("waived" in n for n in notes)
