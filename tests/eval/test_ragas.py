"""RAGAS-style metrics: the math (pure) and the judge plumbing with a fake judge (named as such)."""

import json

import pytest

from medr2.eval.ragas import (average_precision, cosine, entity_recall, faithfulness, judge_metrics, ragas_scores,
                              recall, spread)


def test_score_math():
    assert faithfulness([True, True, False, False]) == 0.5 and faithfulness([]) is None
    assert average_precision([True, True]) == 1.0
    assert average_precision([False, True]) == 0.5
    assert average_precision([False, False]) == 0.0 and average_precision([]) is None
    assert recall([True, False, False]) == pytest.approx(1 / 3)
    assert entity_recall({"a", "b", "c", "d"}, {"a", "b", "x"}) == 0.5 and entity_recall(set(), {"a"}) is None
    assert cosine([1, 0], [1, 0]) == 1.0 and cosine([1, 0], [0, 1]) == 0.0 and cosine([0, 0], [1, 1]) == 0.0
    s = spread([0.5, 1.0, None])
    assert s["mean"] == 0.75 and s["std"] == 0.3536 and s["runs"] == 2  # sample std (n - 1)


class FakeJudge:
    """Plumbing fake: says true for every statement containing a keyword; can be told to break."""

    name = "fake-judge"

    def __init__(self, keyword="metformin", broken=False):
        self.keyword = keyword
        self.broken = broken
        self.seeds = []

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        self.seeds.append(seed)
        stmts = messages[-1]["content"].split("Statements:\n", 1)[1].split("\n\nReturn")[0].splitlines()
        verdicts = [self.keyword in s.lower() for s in stmts]
        if self.broken:
            verdicts = verdicts[:-1]
        return {"text": json.dumps({"verdicts": verdicts}), "prompt_tokens": 1, "completion_tokens": 1}


def test_judge_metrics_with_a_fake_judge():
    m = judge_metrics(FakeJudge(), "Metformin is first-line treatment. Insulin is never needed here.",
                      "Metformin is the first-line drug. Lifestyle change comes first.",
                      ["Offer metformin first.", "Unrelated passage about asthma."])
    assert m["faithfulness"] == 0.5 and m["context_precision"] == 1.0 and m["context_recall"] == 0.5


def test_judged_conflict_reads_contradictions_worded_differently():
    """The lexical test misses "should be considered" against "avoid"; the judge (a plumbing
    fake here: it flags statements holding its keyword) is asked about each requirement."""
    from medr2.eval.report import ragas_table
    from medr2.eval.trust import conflicts
    from medr2.eval.trust_run import ragas_summary

    required = ["Avoid valproate in women of childbearing potential.", "Offer lamotrigine as first-line treatment."]
    answer = "Valproate should be considered for this young woman."
    assert not conflicts(answer, required)  # the lexical test: no shared polarity cue
    judge = FakeJudge(keyword="valproate")
    m = judge_metrics(judge, answer, "Lamotrigine.", ["passage"], required=required)
    assert m["conflict"] == 1.0
    assert judge_metrics(FakeJudge(keyword="zzz"), answer, "Lamotrigine.", ["passage"], required=required)[
        "conflict"] == 0.0
    assert "conflict" not in judge_metrics(judge, answer, "Lamotrigine.", ["passage"])
    out = ragas_scores(answer, "Lamotrigine.", ["passage"], judge, runs=2, required=required)
    assert out["conflict"]["mean"] == 1.0 and out["conflict"]["runs"] == 2
    summary = ragas_summary([out, ragas_scores(answer, "x y z.", ["p"], FakeJudge(keyword="zzz"), required=required)])
    assert summary["conflict"] == 0.5
    table = ragas_table({"passage": {"n": 2, "ragas": summary}})
    assert "conflict rate (judge)" in table and "| passage |" in table and "0.500" in table


def test_repeated_judge_runs_and_failures():
    judge = FakeJudge()
    out = ragas_scores("Metformin helps a lot here.", "Metformin is the first-line drug.", ["metformin text"], judge,
                       runs=3)
    assert judge.seeds[::3] == [0, 1, 2] or sorted(set(judge.seeds)) == [0, 1, 2]
    assert out["faithfulness"]["runs"] == 3 and out["faithfulness"]["std"] == 0.0
    broken = ragas_scores("Metformin helps a lot here.", "Metformin is the drug here.", ["x"], FakeJudge(broken=True))
    assert broken["judge_failures"] == 1 and broken["faithfulness"]["mean"] is None
