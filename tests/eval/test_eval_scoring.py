"""Evaluation groundwork: answer extraction (MIRAGE's rules and ours), accuracy, benchmark
loaders, scoring MIRAGE's stored predictions."""

import json

import pytest
from click.testing import CliRunner
from conftest import shared

from medr2.cli import main
from medr2.eval.datasets import (DatasetError, load_mirage, load_mmlu_csv, load_pubmedqa, load_xmedbench,
                                 parse_option_block)
from medr2.eval.mirage import question_id, read_prediction, score_predictions
from medr2.eval.scoring import accuracy, batch_calibrated, extract_letter, mirage_letter


@pytest.mark.parametrize("text,letter", [
    ('{"answer_choice": "B"}', "B"),            # 'B"}' -> a letter then a double quote
    ('"answer_choice": "  C', "C"),             # a lone letter
    ('"answer_choice": "A or B"}', "A"),
    ('"answer_choice": "D, because"}', "D"),
    ('"answer_choice": "the best is Option C"}', "C"),
    ('"answer_choice": "Answer: D"}', "D"),
    ('"answer_choice": "B. Thumb"}', "B"),
    ('"answer_choice": "none of them"}', "A"),  # MIRAGE's default
    ('x "answer_choice": "C" y "answer_choice": "D"}', "D"),  # the last answer_choice
])
def test_mirage_rules(text, letter):
    assert mirage_letter(text) == letter


def test_robust_extraction_and_accuracy():
    opts = {"A": "Aspirin", "B": "Heparin", "C": "Warfarin"}
    assert extract_letter('{"answer": "B", "citations": [1]}', opts) == "B"
    assert extract_letter("The answer is (C).", opts) == "C"
    assert extract_letter("B) Heparin", opts) == "B"
    assert extract_letter("I would give warfarin here.", opts) == "C"
    assert extract_letter("aspirin or heparin", opts) is None
    assert extract_letter("", opts) is None and extract_letter("Answer: E", opts) is None
    # a lowercase word is no option letter, and option text counts only as whole words
    assert extract_letter("The correct answer is a beta blocker.", opts) is None
    yn = {"A": "yes", "B": "no", "C": "maybe"}
    assert extract_letter("It is not known.", yn) is None and extract_letter("The answer is no.", yn) == "B"
    assert accuracy([True] * 3 + [False]) == (0.75, 0.2165)
    assert accuracy([]) == (0.0, 0.0)


def test_loaders_on_small_files(tmp_path):
    assert parse_option_block("(A) Aspirin.\n(B) Heparin\n  sodium.\n") == {"A": "Aspirin", "B": "Heparin sodium"}
    x = tmp_path / "medqa-mcmle.jsonl"
    x.write_text(json.dumps({"question": "诊断应为", "option": "(A) 甲.\n(B) 乙.", "anwer": "(B)",
                             "source": "medqa-mcmle"}, ensure_ascii=False) + "\n")
    q = next(load_xmedbench(x))
    assert q.dataset == "medqa-mcmle" and q.options == {"A": "甲", "B": "乙"} and q.answer == "B"
    x.write_text('{"question": "q", "option": "", "anwer": "(B)"}\n')
    with pytest.raises(DatasetError, match="medqa-mcmle.jsonl:1"):
        list(load_xmedbench(x))
    # a multiple-answer key keeps every letter; a context is kept; an answer outside the options is refused
    x.write_text(json.dumps({"question": "q", "context": "abstract", "option": "(A) a\n(B) b\n(C) c", "anwer": "(CA)"})
                 + "\n" + json.dumps({"question": "q", "option": "(A) a\n(B) b", "anwer": "(D)"}) + "\n")
    with pytest.raises(DatasetError, match="medqa-mcmle.jsonl:2.*'D' is not among"):
        list(load_xmedbench(x))
    q = next(load_xmedbench(x))
    assert q.answer == "AC" and q.context == "abstract"
    pq = tmp_path / "ori_pqal.json"
    pq.write_text(json.dumps({"1": {"QUESTION": "q?", "CONTEXTS": ["c"], "final_decision": "perhaps"}}))
    with pytest.raises(DatasetError, match="1: final_decision 'perhaps'"):
        list(load_pubmedqa(pq))
    c = tmp_path / "anatomy_dev.csv"
    c.write_text('"Which bone?",Femur,Tibia,Ulna,Radius,E\n')
    with pytest.raises(DatasetError, match="anatomy_dev.csv:1: the answer 'E'"):
        list(load_mmlu_csv(c))
    c.write_text('"Which bone?",Femur,Tibia,Ulna,Radius,C\n')
    assert next(load_mmlu_csv(c)).options["C"] == "Ulna"
    c.write_text("only,three,fields\n")
    with pytest.raises(DatasetError, match="anatomy_dev.csv:1"):
        list(load_mmlu_csv(c))


def test_loaders_on_the_shared_benchmarks():
    m = list(load_mirage(shared("benchmarks/mirage/benchmark.json"), ["pubmedqa", "medqa"]))
    assert len(m) == 500 + 1273 and all(q.answer in q.options for q in m)
    assert any(q.pmid for q in m if q.dataset == "pubmedqa")
    p = list(load_pubmedqa(shared("benchmarks/pubmedqa/ori_pqal.json")))
    assert len(p) == 1000 and p[0].context and p[0].answer in "ABC"
    x = list(load_xmedbench(shared("benchmarks/xmedbench_dev/zh/medqa-mcmle.jsonl")))
    assert len(x) == 171 and all(q.answer in q.options for q in x)
    # every XMedBench file the shared data holds, English and Chinese
    sizes = {"en/medmcqa": 209, "en/medqa-usmle": 63, "en/mmlu-medical": 93, "en/pubmedqa": 50, "zh/cmb-single": 100,
             "zh/cmexam": 100, "zh/cmmlu-medical": 66, "zh/medqa-mcmle": 171}
    for name, n in sizes.items():
        qs = list(load_xmedbench(shared(f"benchmarks/xmedbench_dev/{name}.jsonl")))
        assert len(qs) == n and all(q.options and all(x in q.options for x in q.answer) for q in qs), name
        if name == "en/pubmedqa":
            assert all(q.context for q in qs) and set(qs[0].options.values()) == {"Yes", "No", "Maybe"}
        if name == "zh/cmexam":
            assert sum(len(q.answer) > 1 for q in qs) == 3  # its multiple-answer questions keep every letter
            assert {len(q.options) for q in qs} <= {4, 5}


def test_mirage_stored_predictions_are_scored(tmp_path):
    assert question_id("test_anatomy-002.json") == "anatomy-002"
    root = tmp_path / "prediction" / "medqa"
    (root / "cot" / "OpenAI" / "gpt-x").mkdir(parents=True)
    (root / "rag_32" / "OpenAI" / "gpt-x" / "medcorp" / "RRF-4").mkdir(parents=True)
    bench = {"medqa": {"0000": {"answer": "B"}, "0001": {"answer": "C"}}}
    (root / "cot/OpenAI/gpt-x/test_0000.json").write_text(json.dumps([json.dumps({"answer_choice": "B"})]))
    (root / "cot/OpenAI/gpt-x/test_0001.json").write_text(json.dumps([json.dumps({"answer_choice": "A. x"})]))
    (root / "rag_32/OpenAI/gpt-x/medcorp/RRF-4/test_0000.json").write_text("")  # empty file: wrong
    assert read_prediction(root / "rag_32/OpenAI/gpt-x/medcorp/RRF-4/test_0000.json") is None
    rows = score_predictions(tmp_path, bench)
    assert rows == [
        {"dataset": "medqa", "setting": "cot", "model": "gpt-x", "n": 2, "accuracy": 50.0, "std": 35.36,
         "missing": 0},
        {"dataset": "medqa", "setting": "rag_32/medcorp/RRF-4", "model": "gpt-x", "n": 1, "accuracy": 0.0, "std": 0.0,
         "missing": 1},
    ]
    # a file holding an empty string goes through MIRAGE's rules, whose default is "A"
    bench_a = {"medqa": {"0000": {"answer": "A"}, "0001": {"answer": "A"}}}
    (root / "rag_32/OpenAI/gpt-x/medcorp/RRF-4/test_0000.json").write_text(json.dumps([""]))
    (root / "rag_32/OpenAI/gpt-x/medcorp/RRF-4/test_0001.json").write_text(json.dumps([]))  # no string: wrong
    rag = [r for r in score_predictions(tmp_path, bench_a) if r["setting"].startswith("rag")]
    assert rag[0]["n"] == 2 and rag[0]["accuracy"] == 50.0


def test_mirage_scorer_reads_medr2_run_folders(tmp_path):
    """medr2's own runs (<dataset>/<method>/<model>/<id>.json) keep one row per method, and ids
    with an underscore are kept whole."""
    from medr2.eval.runner import run
    from medr2.schema import EvalQuestion

    qs = [EvalQuestion(dataset="medqa", id=f"q_{i}", question="?", options={"A": "a", "B": "b"}, answer="A")
          for i in range(4)]
    for method, letter in (("direct", "B"), ("vanilla_rag", "A")):
        run(qs, lambda q, x=letter: {"answer": x, "rationale": "", "citations": [], "usage": {}},
            tmp_path / "medqa" / method / "m", {"method": method}, progress=False)
    bench = {"medqa": {f"q_{i}": {"answer": "A"} for i in range(5)}}
    rows = score_predictions(tmp_path, bench)
    assert [(r["setting"], r["model"], r["n"], r["accuracy"], r["missing"]) for r in rows] == [
        ("direct", "m", 4, 0.0, 1), ("vanilla_rag", "m", 4, 100.0, 1)]


def test_eval_score_command_on_mirage_sample():
    pred = shared("benchmarks/mirage/prediction_sample")
    bench = shared("benchmarks/mirage/benchmark.json")
    r = CliRunner().invoke(main, ["eval", "score", "--mirage", str(pred), "--benchmark", str(bench), "--json"])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)
    assert len(rows) == 20 and {x["setting"] for x in rows} == {"cot", "rag_32/medcorp/RRF-4"}
    assert all(x["n"] == 5 for x in rows)
    assert {(x["dataset"], x["missing"]) for x in rows if x["dataset"] in ("mmlu", "pubmedqa")} == {
        ("mmlu", 1089 - 5), ("pubmedqa", 500 - 5)}
    mmlu = {(x["setting"], x["model"]): x["accuracy"] for x in rows if x["dataset"] == "mmlu"}
    assert mmlu[("cot", "gpt-4-32k")] == 100.0
    r = CliRunner().invoke(main, ["eval", "score", "--mirage", str(pred), "--benchmark", str(bench)])
    line = next(x for x in r.stdout.splitlines() if x.startswith("mmlu") and "cot" in x and "gpt-4-32k" in x)
    assert line.rstrip().endswith("89.44 (n = 1089)")  # MIRAGE's published accuracy beside the re-scored one


@pytest.mark.slow
def test_eval_run_resumes_and_scores(tmp_path, demo_index_dir):
    """An offline run (extractive answers) over a small XMedBench-format file: files in MIRAGE's
    layout, a manifest, resume after an interruption, shards, scoring."""
    qfile = tmp_path / "tiny.jsonl"
    rows = [{"question": "Which drug slows kidney disease progression in type 2 diabetes?",
             "option": "(A) SGLT2 inhibitor.\n(B) Paracetamol.", "anwer": "(A)", "source": "tiny"},
            {"question": "What is the first-line antibiotic for community-acquired pneumonia?",
             "option": "(A) Vancomycin.\n(B) Amoxicillin.", "anwer": "(B)", "source": "tiny"},
            {"question": "Which test diagnoses hypertension?",
             "option": "(A) Ambulatory blood pressure monitoring.\n(B) Chest X-ray.", "anwer": "(A)", "source": "tiny"}]
    qfile.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "runs"
    base = ["eval", "run", "--dataset", str(qfile), "--method", "vanilla_rag", "--index", str(demo_index_dir),
            "--llm", "none", "--out", str(out), "--no-progress"]
    r = CliRunner().invoke(main, base + ["--limit", "1"])  # an interrupted run: one question done
    assert r.exit_code == 0, r.output
    run_dir = out / "tiny" / "vanilla_rag" / "none"
    assert len(list(run_dir.glob("tiny-*.json"))) == 1
    r = CliRunner().invoke(main, base + ["--shard", "1/2"])
    assert json.loads(r.stdout)["questions"] == 1
    r = CliRunner().invoke(main, base)
    totals = json.loads(r.stdout)
    assert totals["questions"] == 3 and totals["skipped_existing"] == 2 and totals["answered"] == 1
    f = json.loads((run_dir / "tiny-1.json").read_text())
    assert json.loads(f[0])["answer_choice"] in "AB" and f[1]["gold"] == "A"
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["method"] == "vanilla_rag" and manifest["models"]["generator"] is None
    r = CliRunner().invoke(main, ["eval", "score", "--run", str(out), "--json"])
    scored = json.loads(r.stdout)
    assert scored[0]["n"] == 3 and scored[0]["method"] == "vanilla_rag" and 0 <= scored[0]["accuracy"] <= 100
    r = CliRunner().invoke(main, ["eval", "run", "--dataset", "medqa:10", "--index", str(demo_index_dir),
                                  "--out", str(out), "--llm", "none"])
    assert r.exit_code == 2 and "--benchmark" in r.output


@pytest.mark.slow
def test_eval_run_answers_only_the_listed_ids(tmp_path, demo_index_dir):
    """--ids FILE: the chosen questions of the (sub)set, nothing else; an id the set does not hold
    is refused by name before anything is answered."""
    qfile = tmp_path / "tiny.jsonl"
    rows = [{"question": q, "option": "(A) Yes.\n(B) No.", "anwer": "(A)", "source": "tiny"}
            for q in ("Do SGLT2 inhibitors slow kidney disease?", "Is amoxicillin first line for pneumonia?",
                      "Does ambulatory monitoring diagnose hypertension?")]
    qfile.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    ids = tmp_path / "ids.txt"
    ids.write_text("# chosen on dev\ntiny-3\n\ntiny-1\n")
    out = tmp_path / "runs"
    base = ["eval", "run", "--dataset", str(qfile), "--method", "vanilla_rag", "--index", str(demo_index_dir),
            "--llm", "none", "--out", str(out), "--no-progress", "--ids"]
    r = CliRunner().invoke(main, base + [str(ids)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["questions"] == 2
    assert sorted(f.name for f in (out / "tiny" / "vanilla_rag" / "none").glob("tiny-*.json")) == ["tiny-1.json",
                                                                                                   "tiny-3.json"]
    ids.write_text("tiny-2\ntiny-9\n")
    r = CliRunner().invoke(main, base + [str(ids)])
    assert r.exit_code == 2 and "tiny-9" in r.output and "not in this (sub)set" in r.output
    assert not (out / "tiny" / "vanilla_rag" / "none" / "tiny-2.json").exists()
    ids.write_text("# nothing\n")
    r = CliRunner().invoke(main, base + [str(ids)])
    assert r.exit_code == 2 and "lists no question id" in r.output


@pytest.mark.slow
def test_eval_run_marks_a_mixed_set_free_text_whatever_slice_it_answers(tmp_path, demo_index_dir, monkeypatch):
    """The settings a run compares hold for its whole subset: a set with an option-less question is
    marked free_text even when --limit answers only a multiple-choice one, so a later call that
    reaches the free-text question does not meet a manifest that ignored [recommend]."""
    import medr2.eval.runner as runner
    from medr2.schema import EvalQuestion

    qs = [EvalQuestion(dataset="mixed", id="mc", question="Which drug slows kidney disease in type 2 diabetes?",
                       options={"A": "SGLT2 inhibitor", "B": "Paracetamol"}, answer="A"),
          EvalQuestion(dataset="mixed", id="free", question="What do guidelines recommend for hypertension?")]
    monkeypatch.setattr(runner, "load_questions", lambda name, benchmark: list(qs))
    out = tmp_path / "runs"
    r = CliRunner().invoke(main, ["eval", "run", "--dataset", "mixed", "--method", "vanilla_rag", "--index",
                                  str(demo_index_dir), "--llm", "none", "--out", str(out), "--no-progress",
                                  "--limit", "1"])
    assert r.exit_code == 0, r.output
    run_dir = out / "mixed" / "vanilla_rag" / "none"
    assert sorted(f.name for f in run_dir.glob("*.json")) == ["manifest.json", "mc.json"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest.get("free_text") is True and "multiple_choice" not in manifest
    # the languages of the whole subset and of the index (English only: rerank.max_unknown_share is not compared)
    assert manifest["languages"] == {"questions": ["en"], "index": ["en"]}
    # a set of free-text questions only is marked so: no multiple-choice setting is compared
    monkeypatch.setattr(runner, "load_questions", lambda name, benchmark: list(qs[1:]))
    r = CliRunner().invoke(main, ["eval", "run", "--dataset", "free", "--method", "vanilla_rag", "--index",
                                  str(demo_index_dir), "--llm", "none", "--out", str(tmp_path / "free"), "--no-progress"])
    assert r.exit_code == 0, r.output
    free = tmp_path / "free" / "mixed" / "vanilla_rag" / "none" / "manifest.json"
    assert json.loads(free.read_text())["multiple_choice"] is False


def test_mirage_pmids_are_plain_numbers():
    m = list(load_mirage(shared("benchmarks/mirage/benchmark.json"), ["pubmedqa"]))
    assert all(q.pmid and q.pmid.isdigit() for q in m)
    assert m[0].pmid == m[0].id  # PubMedQA* ids are the PMIDs


@pytest.mark.slow
def test_eval_run_excludes_the_questions_own_abstract(tmp_path, encoder):
    """PubMedQA* protocol: a question is answered without the abstract it was written from
    (removed before fusion); --allow-own-source lets retrieval find it."""
    pqal = {"111": {"QUESTION": "Does metformin lower HbA1c in type 2 diabetes?",
                    "CONTEXTS": ["Metformin lowered HbA1c by 1.1% in adults with type 2 diabetes over 24 weeks."],
                    "LABELS": ["RESULTS"], "MESHES": ["Metformin"], "YEAR": "2001", "final_decision": "yes"},
            "222": {"QUESTION": "Is aspirin useful after stroke?",
                    "CONTEXTS": ["Aspirin after ischaemic stroke reduced recurrence in a cohort of 900 patients."],
                    "LABELS": ["RESULTS"], "MESHES": ["Aspirin"], "YEAR": "2003", "final_decision": "yes"},
            "333": {"QUESTION": "Does exercise lower HbA1c?",
                    "CONTEXTS": ["Supervised exercise lowered HbA1c in type 2 diabetes; metformin users also improved."],
                    "LABELS": ["RESULTS"], "MESHES": ["Exercise"], "YEAR": "2005", "final_decision": "yes"}}
    corpus = tmp_path / "ori_pqal.json"
    corpus.write_text(json.dumps(pqal))
    index = tmp_path / "index"
    r = CliRunner().invoke(main, ["ingest", str(corpus), "--index", str(index), "--format", "pubmedqa"])
    assert r.exit_code == 0, r.output
    bench = tmp_path / "benchmark.json"
    bench.write_text(json.dumps({"pubmedqa": {"111": {
        "question": "Does metformin lower HbA1c in type 2 diabetes?", "options": {"A": "yes", "B": "no", "C": "maybe"},
        "answer": "A", "PMID": [111]}}}))
    base = ["eval", "run", "--dataset", "pubmedqa", "--benchmark", str(bench), "--method", "vanilla_rag",
            "--index", str(index), "--llm", "none", "--no-progress"]
    docs = {}
    for name, extra in (("excluded", []), ("allowed", ["--allow-own-source"])):
        r = CliRunner().invoke(main, base + ["--out", str(tmp_path / name)] + extra)
        assert r.exit_code == 0, r.output
        run_dir = tmp_path / name / "pubmedqa" / "vanilla_rag" / "none"
        record = json.loads((run_dir / "111.json").read_text())[1]
        docs[name] = {c["doc_id"] for c in record["context"]}
        assert json.loads((run_dir / "manifest.json").read_text())["own_source_excluded"] is (name == "excluded")
    assert "pmid:111" in docs["allowed"]
    assert "pmid:111" not in docs["excluded"] and docs["excluded"]  # other abstracts are still found


def test_runner_retries_failed_answers_reads_raw_text_and_refuses_another_run(tmp_path):
    """Plumbing fakes as answer functions: a failed answer (server down) is asked again on
    resume, a free-text answer is read for its letter, and resuming a different run is refused."""
    from medr2.eval.runner import RunMismatch, run, score_run
    from medr2.schema import EvalQuestion

    qs = [EvalQuestion(dataset="medqa", id=f"q{i}", question="?", options={"A": "aspirin", "B": "heparin"}, answer="B")
          for i in range(4)]
    out = tmp_path / "medqa" / "vanilla_rag" / "m"
    manifest = {"dataset": "medqa:4", "subset_seed": 0, "method": "vanilla_rag", "index": "/a/index",
                "corpus": {"paper": {"documents": 3, "passages": 9}}, "config": {"llm": {"n_threads": 2, "generator": "a"}}}

    def flaky(q):  # plumbing fake: the server fails on q1, q2 answers in words, q3 says nothing usable
        if q.id == "q1":
            return {"answer": "", "rationale": "not answered", "insufficient": True, "error": "connection refused"}
        return {"answer": {"q0": "B", "q2": "I would give heparin.", "q3": "Insufficient evidence."}[q.id],
                "rationale": "", "citations": [], "usage": {}}

    totals = run(qs, flaky, out, manifest, progress=False)
    assert totals["answered"] == 4 and totals["errors"] == 1
    (row,) = score_run(tmp_path)
    assert (row["n"], row["accuracy"], row["errors"], row["unparsed"]) == (4, 50.0, 1, 1)
    rec = json.loads((out / "q2.json").read_text())[1]
    assert rec["prediction"] == "B" and rec["raw_answer"] == "I would give heparin."
    asked = []
    totals = run(qs, lambda q: asked.append(q.id) or {"answer": "B", "rationale": ""}, out,
                 dict(manifest, shard="0/1", config={"llm": {"n_threads": 8, "generator": "a"}}), progress=False)
    assert asked == ["q1"] and totals["retried_errors"] == 1  # only the failed one; threads may change
    with pytest.raises(RunMismatch, match="dataset"):  # another subset size is another draw of questions
        run(qs, flaky, out, dict(manifest, dataset="medqa:8"), progress=False)
    assert score_run(tmp_path)[0]["accuracy"] == 75.0
    with pytest.raises(RunMismatch, match="subset_seed"):
        run(qs, flaky, out, dict(manifest, subset_seed=1), progress=False)
    with pytest.raises(RunMismatch, match=r"config \[llm\]"):
        run(qs, flaky, out, dict(manifest, config={"llm": {"generator": "other"}}), progress=False)
    # a setting the first manifest did not record (added to medr2 since) does not block resuming
    run(qs, flaky, out, dict(manifest, config={"llm": {"generator": "a", "new_knob": 1}, "appraise": {"x": 1}}),
        progress=False)
    run(qs[:2], flaky, out, dict(manifest, shard="0/2"), progress=False)
    # the same corpora indexed at another path (a fresh checkout) resume; another corpus does not
    run(qs, flaky, out, dict(manifest, index="/elsewhere/index"), progress=False)
    with pytest.raises(RunMismatch, match="corpus"):
        run(qs, flaky, out, dict(manifest, corpus={"paper": {"documents": 4, "passages": 12}}), progress=False)
    assert (out / "manifest-0-2.json").exists() and (out / "manifest.json").exists()


def test_settings_a_run_cannot_read_do_not_block_resuming_it(tmp_path):
    """A run of a multiple-choice set never reads [recommend] (free-text answers), nor a
    non-TCM method [kg.cases], nor direct answering any retrieval or gate setting: changing them
    resumes; a setting it reads still refuses."""
    from medr2.eval.runner import RunMismatch, run
    from medr2.schema import EvalQuestion

    qs = [EvalQuestion(dataset="medqa", id=f"q{i}", question="?", options={"A": "a", "B": "b"}, answer="B")
          for i in range(2)]
    out = tmp_path / "medqa" / "medr2" / "m"
    cfg = {"recommend": {"max_items": 2}, "kg": {"cases": {"passages_k": 0}, "tier_weights": 1}, "gate": {"w": 0.5}}
    manifest = {"dataset": "medqa:2", "subset_seed": 0, "method": "medr2", "answer_mode": "loglik", "config": cfg}

    def answer(q):  # plumbing fake
        return {"answer": "B", "rationale": ""}

    run(qs[:1], answer, out, manifest, progress=False)
    changed = {"recommend": {"max_items": 4}, "kg": {"cases": {"passages_k": 3}, "tier_weights": 1}, "gate": {"w": 0.5}}
    assert run(qs, answer, out, dict(manifest, config=changed), progress=False)["answered"] == 1
    with pytest.raises(RunMismatch, match=r"config \[gate\]"):
        run(qs, answer, out, dict(manifest, config=dict(changed, gate={"w": 1.0})), progress=False)
    with pytest.raises(RunMismatch, match=r"config \[kg\]"):
        run(qs, answer, out, dict(manifest, config=dict(changed, kg={"cases": {"passages_k": 3}, "tier_weights": 2})),
            progress=False)
    cal = tmp_path / "medqa" / "medr2" / "c"  # calibrated loglik: options too
    run(qs[:1], answer, cal, dict(manifest, answer_mode="loglik-cal"), progress=False)
    assert run(qs, answer, cal, dict(manifest, answer_mode="loglik-cal", config=changed), progress=False)["answered"] == 1
    # a generated-answer run of multiple-choice questions does not read [recommend] either; one of
    # free-text questions (the manifest says so) does
    gen = tmp_path / "medqa" / "medr2" / "g"
    run(qs[:1], answer, gen, dict(manifest, answer_mode="generate"), progress=False)
    assert run(qs, answer, gen, dict(manifest, answer_mode="generate", config=changed), progress=False)["answered"] == 1
    free = tmp_path / "free" / "medr2" / "g"
    run(qs[:1], answer, free, dict(manifest, answer_mode="generate", free_text=True), progress=False)
    with pytest.raises(RunMismatch, match=r"config \[recommend\]"):
        run(qs, answer, free, dict(manifest, answer_mode="generate", free_text=True, config=changed), progress=False)
    # direct answering reads no retrieval, appraisal or gate setting; it reads the generator's
    direct = tmp_path / "medqa" / "direct" / "d"
    d_cfg = {"sparse": {"jieba_user_dicts": ["a.txt"]}, "gate": {"w": 0.5}, "llm": {"n_ctx": 2048},
             "query": {"max_query_chars": 4000, "max_question_chars": 20000}}
    d_manifest = dict(manifest, method="direct", config=d_cfg)
    run(qs[:1], answer, direct, d_manifest, progress=False)
    moved = dict(d_cfg, sparse={"jieba_user_dicts": []}, gate={"w": 1.0}, query={"max_query_chars": 100,
                                                                                 "max_question_chars": 20000})
    assert run(qs, answer, direct, dict(d_manifest, config=moved), progress=False)["answered"] == 1
    with pytest.raises(RunMismatch, match=r"config \[llm\]"):
        run(qs, answer, direct, dict(d_manifest, config=dict(d_cfg, llm={"n_ctx": 4096})), progress=False)
    with pytest.raises(RunMismatch, match=r"config \[query\]"):  # every question passes the length check
        run(qs, answer, direct, dict(d_manifest, config=dict(d_cfg, query={"max_question_chars": 10})), progress=False)


def test_a_run_recorded_before_a_setting_existed_resumes_only_at_its_old_value(tmp_path):
    """A manifest that lacks a setting added since (``ADDED_KEYS``) is read with the value that
    reproduces what it did: TCM-DiffRAG runs made before ``kg.cases.min_findings`` resume at 0
    and are refused at another value."""
    from medr2.eval.runner import RunMismatch, run
    from medr2.schema import EvalQuestion

    qs = [EvalQuestion(dataset="tcm", id=f"q{i}", question="?", options={"A": "a", "B": "b"}, answer="B")
          for i in range(3)]
    out = tmp_path / "tcm" / "tcm_diffrag" / "m"
    old = {"dataset": "tcm:3", "subset_seed": 0, "method": "tcm_diffrag", "answer_mode": "loglik",
           "config": {"kg": {"cases": {"k": 3, "passages_k": 3}}}}
    run(qs[:1], lambda q: {"answer": "B", "rationale": ""}, out, old, progress=False)
    routed = dict(old, config={"kg": {"cases": {"k": 3, "passages_k": 3, "min_findings": 2}}})
    with pytest.raises(RunMismatch, match=r"config \[kg\]"):  # the old manifest read with min_findings 0
        run(qs, lambda q: {"answer": "B", "rationale": ""}, out, routed, progress=False)
    now = dict(old, config={"kg": {"cases": {"k": 3, "passages_k": 3, "min_findings": 0}}})
    assert run(qs[:2], lambda q: {"answer": "B", "rationale": ""}, out, now, progress=False)["answered"] == 1


def test_a_second_process_on_the_same_run_is_refused(tmp_path):
    """Two runs writing one directory would answer the same questions twice, each beside the other
    (and time them so): while one holds the run, another stops at once and writes nothing. A whole
    run and a shard of it exclude each other; two different shards go side by side."""
    from medr2.eval.runner import RunBusy, _lock_run, run
    from medr2.schema import EvalQuestion

    qs = [EvalQuestion(dataset="medqa", id=f"q{i}", question="?", options={"A": "a", "B": "b"}, answer="B")
          for i in range(2)]
    out = tmp_path / "medqa" / "vanilla_rag" / "m"
    out.mkdir(parents=True)
    manifest = {"dataset": "medqa:2", "subset_seed": 0, "method": "vanilla_rag", "config": {}}
    asked = []

    def answer(q):  # plumbing fake
        asked.append(q.id)
        return {"answer": "B", "rationale": ""}

    def release(held):
        for fh in held:
            fh.close()

    held = _lock_run(out, None)  # what the first process holds while it answers the whole run
    with pytest.raises(RunBusy, match=r"another `medr2 eval run` is writing .*\(the run or a shard of it\)"):
        run(qs, answer, out, manifest, progress=False)
    with pytest.raises(RunBusy, match=r"\(the whole run\)"):  # its shards would answer the same questions
        run(qs[:1], answer, out, dict(manifest, shard="0/2"), progress=False)
    assert asked == [] and not list(out.glob("*.json"))
    release(held)

    held = _lock_run(out, "0/2")  # a process answering shard 0/2
    with pytest.raises(RunBusy, match=r"\(shard 0/2\)"):
        run(qs[:1], answer, out, dict(manifest, shard="0/2"), progress=False)
    with pytest.raises(RunBusy, match=r"\(the run or a shard of it\)"):
        run(qs, answer, out, manifest, progress=False)
    assert asked == []
    run(qs[1:], answer, out, dict(manifest, shard="1/2"), progress=False)  # another shard goes ahead
    assert asked == ["q1"]
    release(held)
    assert run(qs, answer, out, manifest, progress=False)["answered"] == 1 and asked == ["q1", "q0"]


def test_failures_to_retry_are_told_from_wrong_answers(tmp_path):
    """A call that could not be made is retried on resume; a model that never gave valid output
    is a wrong answer (asking again gives the same); records of older runs are read the same way."""
    from medr2.eval.runner import needs_answer
    from medr2.llm.base import LLMError, LLMOutputError
    from medr2.apply.answer import failed_answer

    assert failed_answer(LLMError("connection refused")).method == "error"
    assert failed_answer(LLMOutputError("gave no valid JSON")).method == "invalid_output"
    f = tmp_path / "q.json"

    def write(why, prediction="", **extra):
        f.write_text(json.dumps([json.dumps({"step_by_step_thinking": why, "answer_choice": prediction}),
                                 {"prediction": prediction, **extra}]))
        return needs_answer(f)

    assert write("not answered: the server at http://x is unreachable")  # an older record of a failure
    assert not write("not answered: m gave no valid JSON for the schema after 3 tries: ...")
    assert not write("log-likelihood ...", "B") and write("...", error="timeout") and not write("...", error=None)
    f.write_text("{broken")
    assert needs_answer(f) and needs_answer(tmp_path / "absent.json")


def test_a_killed_run_is_protected_and_messages_are_not_read_as_letters(tmp_path):
    """The manifest is written when a run starts, so a run killed half-way still refuses to be
    resumed with other settings; a failure or abstention message (method error / rule) is never
    parsed into a letter ("no" in "...gave no valid JSON" is not option B)."""
    from medr2.eval.runner import RunMismatch, run, score_run
    from medr2.schema import EvalQuestion

    yn = {"A": "yes", "B": "no", "C": "maybe"}
    qs = [EvalQuestion(dataset="pubmedqa", id=f"q{i}", question="?", options=yn, answer="B") for i in range(3)]
    out = tmp_path / "pubmedqa" / "vanilla_rag" / "m"
    manifest = {"dataset": "pubmedqa:3", "subset_seed": 0, "method": "vanilla_rag"}

    def killed(q):
        if q.id == "q1":
            raise KeyboardInterrupt
        return {"answer": "Insufficient evidence: the generator failed (m gave no valid JSON).", "method": "error",
                "error": "m gave no valid JSON", "insufficient": True}

    with pytest.raises(KeyboardInterrupt):
        run(qs, killed, out, manifest, progress=False)
    assert json.loads((out / "manifest.json").read_text())["dataset"] == "pubmedqa:3"
    rec = json.loads((out / "q0.json").read_text())[1]
    assert rec["prediction"] == "" and rec["error"] and not rec["correct"]
    with pytest.raises(RunMismatch, match="subset_seed"):
        run(qs, killed, out, dict(manifest, subset_seed=5), progress=False)
    run(qs, lambda q: {"answer": "Insufficient evidence: no passage says no.", "method": "rule", "insufficient": True},
        out, manifest, progress=False)
    (row,) = score_run(tmp_path)
    assert (row["accuracy"], row["insufficient"], row["unparsed"], row["errors"]) == (0.0, 3, 0, 0)


def test_batch_calibration_leaves_each_question_out():
    import math

    others = {"q2": {"A": -0.2, "B": -1.8}, "q3": {"A": -0.4, "B": -1.1}}

    def correction(q1):
        # calibrated score less the question's own normalised log-probability: the log of the
        # other questions' mean probability of each letter, so it must not depend on q1
        cal = batch_calibrated({"q1": q1, **others})["q1"]
        z = math.log(sum(math.exp(v) for v in q1.values()))
        return {k: round(cal[k] - (q1[k] - z), 9) for k in q1}

    assert correction({"A": -0.1, "B": -2.4}) == correction({"A": -3.0, "B": -0.05})
    # a letter favoured across the set is discounted: q1 prefers A only mildly, and gets B
    cal = batch_calibrated({"q1": {"A": -0.6, "B": -0.8}, **others})
    assert max(cal["q1"], key=cal["q1"].get) == "B"
    with pytest.raises(ValueError, match="at least two"):
        batch_calibrated({"q1": {"A": -0.1, "B": -2.0}})
