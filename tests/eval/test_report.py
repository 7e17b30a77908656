"""Evaluation reports: the table builders (pure) and `medr2 eval report` on run directories in
the runner's real layout (the answers come from a plumbing fake answer function)."""

import json

import pytest
from click.testing import CliRunner

from medr2.cli import main
from medr2.eval.report import ablation_table, improvement_grid, methods_table, trust_table
from medr2.eval.runner import run
from medr2.schema import EvalQuestion

ROWS = [
    {"dataset": "medqa", "method": "direct", "model": "q", "n": 100, "accuracy": 40.0, "std": 4.9},
    {"dataset": "medqa", "method": "vanilla_rag", "model": "q", "n": 100, "accuracy": 45.0, "std": 5.0},
    {"dataset": "medqa", "method": "+reranker", "model": "q", "n": 100, "accuracy": 50.0, "std": 5.0},
    {"dataset": "medqa", "method": "medr2", "model": "q", "n": 100, "accuracy": 55.0, "std": 5.0},
    {"dataset": "pubmedqa", "method": "direct", "model": "q", "n": 100, "accuracy": 60.0, "std": 4.9},
    {"dataset": "pubmedqa", "method": "medr2", "model": "q", "n": 100, "accuracy": 58.0, "std": 4.9},
]


def test_methods_table_bolds_the_best_per_dataset_and_average():
    t = methods_table(ROWS, "q")
    lines = t.splitlines()
    assert lines[0] == "| method | medqa | pubmedqa | Avg |"
    direct = next(x for x in lines if x.startswith("| direct"))
    medr2 = next(x for x in lines if x.startswith("| medr2"))
    assert "**60.00 ± 4.90**" in direct and "**55.00 ± 5.00**" in medr2
    # vanilla_rag and +reranker ran on medqa only: no Avg, and they do not shrink the others' to medqa
    assert medr2.endswith("| **56.50** |") and direct.endswith("| 50.00 |")  # (55 + 58) / 2, (40 + 60) / 2
    assert next(x for x in lines if x.startswith("| vanilla_rag")).endswith("| – |")
    assert "N per dataset: medqa 100, pubmedqa 100" in t and "every other method" not in t
    assert "No Avg for a method run on one dataset only: vanilla_rag" in t
    both = methods_table([r for r in ROWS if r["method"] in ("direct", "medr2")], "q")
    assert next(x for x in both.splitlines() if x.startswith("| medr2")).endswith("| **56.50** |")
    assert "every method ran on" not in both and "No Avg" not in both
    # a method on two of three datasets narrows the others' Avg to those two
    grid = ROWS + [{"dataset": "mmlu", "method": "direct", "model": "q", "n": 100, "accuracy": 30.0, "std": 4.6}]
    g = methods_table(grid, "q")
    assert "Avg over the datasets every other method ran on: medqa, pubmedqa" in g
    assert next(x for x in g.splitlines() if x.startswith("| direct")).endswith("| 50.00 |")
    # with one dataset in all, every method is averaged over it
    one = methods_table([r for r in ROWS if r["dataset"] == "medqa"], "q")
    assert next(x for x in one.splitlines() if x.startswith("| vanilla_rag")).endswith("| 45.00 |")
    # A partial run (fewer questions) shows its N and is never bold, however high.
    part = methods_table(ROWS + [{"dataset": "medqa", "method": "llm_amt", "model": "q", "n": 9, "accuracy": 88.9,
                                  "std": 10.5},
                                 {"dataset": "pubmedqa", "method": "llm_amt", "model": "q", "n": 100, "accuracy": 50.0,
                                  "std": 5.0}], "q")
    amt = next(x for x in part.splitlines() if x.startswith("| llm_amt"))
    assert "88.90 ± 10.50 (N = 9, partial)" in amt and "**" not in amt and amt.endswith("| 69.45 (partial) |")
    assert next(x for x in part.splitlines() if x.startswith("| medr2")).endswith("| **56.50** |")


def test_ablation_table_deltas_against_vanilla_rag():
    t = ablation_table(ROWS, "q")
    assert "| +reranker | 100 | 50.00 | 100 | +5.00 |" in t and "| medr2 | 100 | 55.00 | 100 | +10.00 |" in t
    assert "Avg over: medqa" in t
    assert ablation_table([r for r in ROWS if r["method"] != "vanilla_rag"], "q") is None
    ll = [dict(r, method=r["method"] + "+loglik") for r in ROWS]
    tl = ablation_table(ll, "q")
    assert "| vanilla_rag+loglik | 100 | 45.00 | 100 | +0.00 |" in tl
    # A scored letter has no chain of thought and medr2 runs one round: those columns do not apply.
    assert "| ✓ | ✓ | – | – | medr2+loglik |" in tl and "do not apply" in tl
    assert "| ✓ | ✓ | ✓ | ✓ | medr2 |" in t and "do not apply" not in t
    # A partial run: its average is over other questions than vanilla RAG's, so without marks
    # there is no Δ, and with marks Δ is over the questions both answered.
    part = [dict(r, n=4, accuracy=75.0) if r["method"] == "medr2" and r["dataset"] == "medqa" else r for r in ROWS]
    assert "| medr2 | 4 | 75.00 | – | – |" in ablation_table(part, "q")
    marks = {("medqa", "vanilla_rag", "q"): {"a": True, "b": True, "c": True, "d": False, "e": True},
             ("medqa", "medr2", "q"): {"a": True, "b": True, "c": False, "d": True},
             ("medqa", "+reranker", "q"): {"a": True, "b": False, "c": False, "d": False, "e": True}}
    t = ablation_table(part, "q", marks)
    assert "| medr2 | 4 | 75.00 | 4 | +0.00 |" in t  # 3 of 4 right, as vanilla RAG on those 4
    assert "| +reranker | 100 | 50.00 | 5 | -40.00 |" in t and "Δ is paired" in t


def test_loglik_variants_follow_their_method_and_cost_is_tabled():
    from medr2.eval.report import _order, cost_table

    assert _order(["medr2", "direct+loglik", "vanilla_rag", "direct"]) == ["direct", "direct+loglik", "vanilla_rag",
                                                                           "medr2"]
    assert _order(["medr2+loglik", "direct+loglik-cal", "direct+loglik", "medr2+loglik-cal"]) == [
        "direct+loglik", "direct+loglik-cal", "medr2+loglik", "medr2+loglik-cal"]
    t = cost_table([dict(r, seconds=2.5) for r in ROWS], "q")
    assert "| direct | 2.5 | 2.5 |" in t and "| vanilla_rag | 2.5 | – |" in t
    assert cost_table(ROWS, "q") is None
    paused = cost_table([dict(r, seconds=900.0, median_seconds=3.0) for r in ROWS], "q")  # mean moved by a pause
    assert "| direct | 3.0 | 3.0 |" in paused


def test_trust_table_and_grid():
    t = trust_table({"full": {"n": 10, "required_in_context": 0.9, "omission": 0.1, "conflict_rate": 0.0,
                              "unsupported": 0.25, "invalid_citation": None, "grounded_precision": 0.8,
                              "insufficient_rate": 0.1, "seconds_uncached": 12.34}})
    assert "| full | 10 | 90.0% | 10.0% | 0.0% | 25.0% | – | 80.0% | 10.0% | 12.3 |" in t
    rows = [dict(r, context_tokens=4096 if r["method"] == "medr2" else None) for r in ROWS]
    assert improvement_grid(rows) == {("q", 4096): ((55 - 40) + (58 - 60)) / 2}  # per dataset, then averaged
    # two windows of a loglik run, each against direct+loglik on its own datasets only
    ll = [{"dataset": "medqa", "method": "direct+loglik", "model": "q", "accuracy": 40.0},
          {"dataset": "pubmedqa", "method": "direct+loglik", "model": "q", "accuracy": 60.0},
          {"dataset": "medqa", "method": "medr2+loglik@1024", "model": "q", "accuracy": 44.0, "context_tokens": 1024},
          {"dataset": "medqa", "method": "medr2+loglik@4096", "model": "q", "accuracy": 50.0, "context_tokens": 4096}]
    assert improvement_grid(ll) == {("q loglik", 1024): 4.0, ("q loglik", 4096): 10.0}
    # with per-question marks, each window is compared with direct on the questions both answered
    marks = {("medqa", "direct+loglik", "q"): {"a": False, "b": True, "c": False},
             ("medqa", "medr2+loglik@1024", "q"): {"a": True, "b": True},
             ("medqa", "medr2+loglik@4096", "q"): {"a": False, "b": False, "c": True}}
    assert improvement_grid(ll, marks=marks) == {("q loglik", 1024): 50.0, ("q loglik", 4096): 0.0}


def test_eval_report_end_to_end(tmp_path):
    qs = [EvalQuestion(dataset="medqa", id=f"q{i}", question="?", options={"A": "a", "B": "b"}, answer="A")
          for i in range(10)]
    runs = tmp_path / "runs"

    def fake_answer(correct_every):  # plumbing fake: answers A on every n-th question
        return lambda q: {"answer": "A" if int(q.id[1:]) % correct_every == 0 else "B", "rationale": "",
                          "citations": [], "usage": {}}

    for method, model, every, ctx in (("direct", "small", 3, None), ("medr2", "small", 1, 1200),
                                      ("direct", "big", 2, None), ("medr2", "big", 1, 4096)):
        d = runs / "medqa" / method / model
        run(qs, fake_answer(every), d, {"method": method, "subset_seed": 7, "commit": "abc",
                                        "config": {"appraise": {"context_tokens": ctx}}}, progress=False)
    runs2 = tmp_path / "runs2"  # the small model's medr2 again at another window, in its own run dir
    run(qs, fake_answer(2), runs2 / "medqa" / "medr2" / "small", {"method": "medr2", "subset_seed": 7, "commit": "abc",
        "config": {"appraise": {"context_tokens": 4096}}}, progress=False)
    trust = tmp_path / "trust"
    trust.mkdir()
    (trust / "summary.json").write_text(json.dumps({"passage": {"n": 2, "omission": 0.5, "conflict_rate": 0.0,
                                                                "unsupported": 0.5, "invalid_citation": 0.0,
                                                                "grounded_precision": 0.5, "insufficient_rate": 0.0}}))
    out = tmp_path / "report"
    r = CliRunner().invoke(main, ["eval", "report", str(runs), str(runs2), "--trust", str(trust), "--out", str(out)])
    assert r.exit_code == 0, r.output + str(r.exception)
    md = (out / "report.md").read_text()
    assert "## small" in md and "## big" in md and "**100.00 ± 0.00**" in md
    assert "Trust metrics" in md and "| passage | 2 |" in md
    assert "| medr2@1200 | **100.00 ± 0.00** |" in md and "| medr2@4096 | 50.00 ± 15.81 |" in md
    assert "| direct |" in md and "direct@" not in md
    assert "### Answers given against gold answers" in md and "| medqa | gold | 10 | 10 | 0 | – |" in md
    for png in ("bars-small.png", "bars-big.png", "heatmap.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert CliRunner().invoke(main, ["eval", "report", "--out", str(out)]).exit_code == 2


def test_two_run_directories_answering_the_same_run_are_refused_by_name(tmp_path):
    from medr2.eval.report import collect

    qs = [EvalQuestion(dataset="medqa", id=f"q{i}", question="?", options={"A": "a", "B": "b"}, answer="A")
          for i in range(4)]
    dirs = []
    for name, letter in (("one", "A"), ("two", "B")):
        d = tmp_path / name
        run(qs, lambda q, x=letter: {"answer": x, "rationale": "", "citations": [], "usage": {}}, d / "medqa" / "medr2" / "m",
            {"method": "medr2", "config": {"apply": {"context_tokens": 1024}}}, progress=False)
        dirs.append(d)
    with pytest.raises(ValueError, match=r"medr2 on medqa \(m\) was answered in both .*one and .*two"):
        collect(dirs)
    # direct answering reads no evidence: at another window it is still the same run
    direct = [tmp_path / "d1", tmp_path / "d2"]
    for d, ctx in zip(direct, (1024, 4096)):
        run(qs, lambda q: {"answer": "A", "rationale": "", "citations": [], "usage": {}}, d / "medqa" / "direct" / "m",
            {"method": "direct", "config": {"apply": {"context_tokens": ctx}}}, progress=False)
    with pytest.raises(ValueError, match="direct on medqa"):
        collect(direct)
    # one directory named twice (by two paths) is read once
    assert len(collect([direct[0], direct[0] / ".." / "d1"])[0]) == 1
    assert len(collect(dirs[:1])[0]) == 1


def test_paired_table_compares_on_shared_questions_with_mcnemar():
    from medr2.eval.report import paired_table
    from medr2.eval.scoring import mcnemar_p

    direct = {f"q{i}": i < 4 for i in range(10)}  # right on q0-q3
    rag = {f"q{i}": i < 8 for i in range(6)}  # a partial run: q0-q5, right on all of them
    marks = {("mmlu", "direct+loglik", "m"): direct, ("mmlu", "vanilla_rag+loglik", "m"): rag,
             ("mmlu", "direct_cot", "m"): rag, ("pubmedqa", "medr2", "m"): rag}  # medr2: no direct run there
    t = paired_table(marks, "m")
    assert "| mmlu | vanilla_rag+loglik | direct+loglik | 6 | 66.7 | 100.0 | +33.3 | 2 / 0 | 0.500 |" in t
    assert "| mmlu | direct_cot | direct+loglik | 6 |" in t  # no generated direct run: the loglik one
    assert "| medr2 |" not in t and "| direct+loglik | direct" not in t and paired_table(marks, "other") is None
    assert mcnemar_p(2, 0) == 0.5 and mcnemar_p(0, 12) < 0.001
    # calibrated loglik: direct+loglik-cal is compared with direct+loglik, medr2+loglik-cal with direct+loglik-cal
    marks = {("mmlu", "direct+loglik", "m"): direct, ("mmlu", "direct+loglik-cal", "m"): rag,
             ("mmlu", "medr2+loglik-cal", "m"): direct}
    t = paired_table(marks, "m")
    assert "| mmlu | direct+loglik-cal | direct+loglik | 6 |" in t and "| mmlu | medr2+loglik-cal | direct+loglik-cal | 6 |" in t


def test_answer_table_shows_which_answers_each_method_gives():
    from medr2.eval.report import answer_counts, answer_table

    gold = {f"q{i}": "A" if i < 5 else "B" for i in range(10)}  # 5 A, 5 B
    direct = {i: {"gold": g, "prediction": "A"} for i, g in gold.items()}  # always A
    rag = {i: {"gold": g, "prediction": g if i != "q0" else ""} for i, g in list(gold.items())[:6]}  # partial, 1 unparsed
    assert answer_counts(direct) == {"predicted": {"A": 10}, "gold": {"A": 5, "B": 5}}
    t = answer_table({("mmlu", "direct", "m"): answer_counts(direct),
                      ("mmlu", "vanilla_rag", "m"): answer_counts(rag)}, "m")
    assert "| dataset | answers of | N | A | B | none | shift from gold |" in t
    assert "| mmlu | gold | 10 | 5 | 5 | 0 | – |" in t  # the largest run's questions
    assert "| mmlu | direct | 10 | 10 | 0 | 0 | 0.50 |" in t
    # the partial run against the gold of its own 6 questions (5 A, 1 B): q0's A became no answer
    assert "| mmlu | vanilla_rag | 6 | 4 | 1 | 1 | 0.17 |" in t
    assert t.index("| direct |") < t.index("| vanilla_rag |") and answer_table({}, "m") is None
