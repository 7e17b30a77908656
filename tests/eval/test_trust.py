"""Trust metrics (guideline-KG paper) as pure functions, and the mode comparison over the NGC
required-knowledge questions (bench/data/ngc_questions.jsonl) when ../shared/data is present."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from medr2.cli import main
from medr2.eval.trust import (answered_fresh, claim_sentences, clauses, conflicts, grounded_precision, holds,
                              invalid_citation_rate, omission, rescore, score_answer, summarize,
                              unsupported_claim_rate)

from conftest import ROOT, SHARED

REQ = "Offer an SGLT2 inhibitor to adults with type 2 diabetes and CKD."


def test_pure_metrics():
    assert holds("... offer an  SGLT2 inhibitor to adults with type 2 diabetes and CKD. ...", REQ)
    long = "x " * 80 + "the end of a long recommendation"
    assert holds("start " + long[:150], long)  # split by segmentation: its first 100 characters
    assert omission([REQ, "Stop metformin below eGFR 30."], [REQ]) == 0.5
    assert omission([], ["anything"]) == 0.0
    assert invalid_citation_rate(["p1", "p9"], ["p1", "p2"]) == 0.5 and invalid_citation_rate([], ["p1"]) is None
    assert grounded_precision([REQ, "unrelated"], [REQ]) == 0.5 and grounded_precision([], [REQ]) is None
    assert conflicts("SGLT2 inhibitors should not be used in CKD.", [REQ])
    assert not conflicts("Offer an SGLT2 inhibitor.", [REQ])
    assert not conflicts("The evidence is unclear.", [REQ])
    # Quoting a required recommendation is no conflict with its required exception of opposite
    # polarity; an unrelated negative sentence is none either.
    rule = "Routine universal screening should not be performed for pregnant women at low risk."
    exception = "Women who are HIV-positive should be offered screening because of the risk of reactivation."
    assert not conflicts(f"- {rule} [1]", [rule, exception])
    assert not conflicts("Do not drive after the procedure. Offer an SGLT2 inhibitor [1].", [REQ])
    assert conflicts("Screening should not be offered to women who are HIV-positive.", [rule, exception])
    sents = claim_sentences("B", "SGLT2 inhibitors slow CKD [1]. Everyone should exercise daily.")
    assert [c for _, c in sents] == [[1], []]
    assert unsupported_claim_rate(sents, {1: "SGLT2 inhibitors slow the progression of CKD."}) == 0.5
    # a sentence citing a passage that shares none of its words is unsupported too
    assert unsupported_claim_rate([("SGLT2 inhibitors slow CKD [1].", [1])], {1: "Warfarin dosing."}) == 1.0


def test_conflict_reads_clauses_not_remarks_about_the_evidence():
    # cases read by hand in the generated trust rows (bench/README.md): a remark about what the
    # passage lacks, a condition and counselling on a fact carry no polarity of their own ...
    thym = "For patients with myasthenia gravis, thymectomy is recommended to increase the probability of remission."
    assert not conflicts("The guideline recommends thymectomy for myasthenia gravis, but it does not specify the "
                         "probability of remission.", [thym])
    atony = "Uterotonic agents should be the first-line treatment for postpartum hemorrhage due to uterine atony."
    assert not conflicts("Uterotonic agents: first-line treatment for uterine atony; if not effective, laparotomy.",
                         [atony])
    ec = "EC providers should advise women using enzyme-inducing drugs that the effectiveness of UPA-EC could be reduced."
    assert not conflicts("The guideline advises against using UPA-EC with enzyme-inducing drugs.", [ec])
    # ... while the clause that recommends is still read, and the reverse of a recommendation
    # against (worded "advised not to", "avoid") is a conflict
    ct = "CT imaging should not be used to diagnose sport-related concussion but might rule out skull fracture."
    assert conflicts("The guideline recommends CT imaging for suspected sport-related concussion, but not for all.",
                     [ct])
    bf = "Breastfeeding women should be advised not to breastfeed for a week after they have taken UPA-EC."
    assert not conflicts("Women should not breastfeed for a week after taking UPA-EC.", [bf])
    assert conflicts("Breastfeeding women can take UPA-EC.", [bf])
    quinine = "The use of quinine derivatives for muscle cramps should be avoided for routine treatment of cramps."
    assert not conflicts("The guideline recommends avoiding quinine derivatives for routine treatment of cramps.",
                         [quinine])
    # a condition is not the recommendation: "when ..." names the case, the main clause says what to do
    prog = "A progestogen is generally not indicated when low-dose vaginal estrogen is administered for VVA."
    assert not conflicts("The guideline recommends using low-dose vaginal estrogen for atrophy.", [prog])
    assert conflicts("A progestogen is indicated with vaginal estrogen.", [prog])
    # "recommends X not as first-line" is against X; a quote-like restatement agrees
    met = "Metformin alone should not be used as first-line therapy for ovulation induction in women with PCOS."
    assert not conflicts("The guideline recommends metformin alone not as first-line therapy for ovulation "
                         "induction in women with PCOS.", [met])
    assert conflicts("Yes, metformin should be the first drug for ovulation induction in a woman with PCOS. "
                     "The guideline agrees.", [met])
    # a paraphrase of one required recommendation is about that one, not its neighbour of the
    # opposite polarity that shares the population
    af = ["The AAFP recommends against dual treatment with anticoagulant and antiplatelet therapy in most patients "
          "who have atrial fibrillation.", "The AAFP recommends that patients who have atrial fibrillation receive "
          "chronic anticoagulation."]
    assert not conflicts("The guideline recommends against dual treatment with anticoagulant and antiplatelet "
                         "therapy in patients who have atrial fibrillation.", af)
    assert conflicts("Patients who have atrial fibrillation should not receive chronic anticoagulation.", af)
    assert conflicts("You cannot give chronic anticoagulation to patients with atrial fibrillation.", af)
    # an abbreviation ("T. gondii") does not end the required sentence and flip its polarity
    amnio = "Amniocentesis should not be offered for T. gondii infection at less than 18 weeks and should be offered later."
    assert not conflicts("Amniocentesis should not be offered for T. gondii infection before 18 weeks.", [amnio])


def test_clauses():
    assert clauses("Offer X [1]; if it fails, give insulin. Avoid T. gondii exposure, e.g. cat litter.") == [
        "Offer X", "if it fails", "give insulin.", "Avoid T. gondii exposure, e.g. cat litter."]
    assert clauses("Use A, but not B") == ["Use A", "but not B"]


def test_score_answer_layout():
    res = {"answer": "Offer an SGLT2 inhibitor [1].", "rationale": "", "citations": ["p1"], "insufficient": False,
           "evidence": [{"passage_id": "p1", "text": REQ, "kept": True, "n": 1},
                        {"passage_id": "p2", "text": "Other.", "kept": False, "n": None}]}
    m = score_answer(res, [REQ])
    assert m["omission"] == 0.0 and m["grounded_precision"] == 1.0 and m["invalid_citation"] == 0.0
    assert m["unsupported"] == 0.0 and not m["conflict"]


def test_rescore_a_stored_row():
    """A stored row keeps only its context (in context order); rescoring it gives score_answer's
    metrics, with the context number taken from the position when the row does not store it."""
    other = "Metformin is first-line for type 2 diabetes."
    res = {"answer": "Offer an SGLT2 inhibitor [2].", "rationale": "Metformin first [1]. The guideline does not "
           "mention insulin.", "citations": ["p2", "p1"], "insufficient": False,
           "evidence": [{"passage_id": "p1", "text": other, "kept": True, "n": 1},
                        {"passage_id": "p3", "text": "Dropped.", "kept": False, "n": None},
                        {"passage_id": "p2", "text": REQ, "kept": True, "n": 2}]}
    m = score_answer(res, [REQ])
    assert m["unsupported"] == 0.0 and m["grounded_precision"] == 0.5  # the remark on insulin is no claim
    row = {"answer": res["answer"], "rationale": res["rationale"], "citations": res["citations"],
           "metrics": {**m, "unsupported": 0.9},
           "evidence": [{"passage_id": "p1", "text": other}, {"passage_id": "p2", "text": REQ}]}
    assert rescore(row, [REQ]) == m
    swapped = {**row, "evidence": [{"passage_id": "p2", "text": REQ, "n": 2}, {"passage_id": "p1", "text": other, "n": 1}]}
    assert rescore(swapped, [REQ]) == m
    # numbered by position instead, [1] would point at the SGLT2 passage: the metformin claim is unsupported
    positional = {**row, "evidence": [{"passage_id": "p2", "text": REQ}, {"passage_id": "p1", "text": other}]}
    assert rescore(positional, [REQ])["unsupported"] == 1.0


def test_uncached_seconds():
    fresh = {"calls": 2, "stages": {"generate": {"calls": 2, "cached_calls": 0}}}
    cached = {"calls": 1, "stages": {"generate": {"calls": 1, "cached_calls": 1}}}
    metrics = {"omission": 0.0, "conflict": False, "unsupported": 0.0, "invalid_citation": None,
               "grounded_precision": None, "insufficient": False}
    rows = [{"metrics": metrics, "seconds": 10.0, "usage": fresh}, {"metrics": metrics, "seconds": 0.5, "usage": cached},
            {"metrics": metrics, "seconds": 0.1}]  # the oracle: no model call
    s = summarize(rows)
    assert s["seconds"] == (10.0 + 0.5 + 0.1) / 3 and s["seconds_uncached"] == 10.0
    assert answered_fresh(fresh) and not answered_fresh(cached) and not answered_fresh(None)
    assert not answered_fresh({"calls": 0, "stages": {}})


QUESTIONS = ROOT / "bench" / "data" / "ngc_questions.jsonl"
NGC = SHARED / "corpora" / "guidelines" / "ngc_summaries.jsonl"


def test_question_set_is_well_formed():
    qs = [json.loads(x) for x in QUESTIONS.read_text().splitlines()]
    assert len(qs) >= 100 and len({q["id"] for q in qs}) == len(qs)
    assert all(1 <= len(q["required"]) <= 3 and q["question"] for q in qs)


@pytest.mark.skipif(not NGC.is_file(), reason="../shared/data (NGC summaries) is absent")
def test_trust_modes_end_to_end(tmp_path, encoder):
    qs = [json.loads(x) for x in QUESTIONS.read_text().splitlines()][:2]
    ids = {q["ngc_id"] for q in qs}
    sub = tmp_path / "ngc.jsonl"
    with open(NGC, encoding="utf-8") as f:
        sub.write_text("".join(line for line in f if json.loads(line)["ngc_id"] in ids), encoding="utf-8")
    qfile = tmp_path / "q.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in qs))
    idx = tmp_path / "index"
    assert CliRunner().invoke(main, ["ingest", str(sub), "--index", str(idx), "--no-progress"]).exit_code == 0
    assert CliRunner().invoke(main, ["kg", "build", "--index", str(idx), "--no-progress"]).exit_code == 0
    out = tmp_path / "trust"
    base = ["eval", "trust", "--questions", str(qfile), "--index", str(idx), "--llm", "none", "--out", str(out)]
    r = CliRunner().invoke(main, base)
    assert r.exit_code == 2 and "no_rag" in r.output  # the direct mode needs a generator
    args = base + ["--mode", "passage", "--mode", "full", "--mode", "oracle_kg"]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0, r.output + str(r.exception)
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary) == {"passage", "full", "oracle_kg"}
    assert summary["oracle_kg"]["grounded_precision"] == 1.0 and summary["oracle_kg"]["omission"] < 1.0
    assert summary["oracle_kg"]["invalid_citation"] == 0.0
    # what the context holds, per mode: the oracle's context is the required passages themselves
    assert summary["oracle_kg"]["required_in_context"] == 1.0
    assert all(0.0 <= summary[m]["required_in_context"] <= 1.0 for m in ("passage", "full"))
    assert "required in context" in r.output
    assert "| oracle_kg | 2 |" in r.output
    # question by question: every mode answers question 1 before question 2 is asked
    done = [ln.split()[0] for ln in r.output.splitlines() if ln.startswith(("1/2 ", "2/2 "))]
    assert done == ["1/2"] * 3 + ["2/2"] * 3, r.output
    rag_args = ["eval", "trust", "--questions", str(qfile), "--index", str(idx), "--llm", "none", "--mode", "oracle_kg",
                "--ragas", "--out", str(tmp_path / "rag")]
    rag = CliRunner().invoke(main, rag_args)
    assert rag.exit_code == 0, rag.output + str(rag.exception)
    rs = json.loads((tmp_path / "rag" / "summary.json").read_text())["oracle_kg"]["ragas"]
    assert 0.0 <= rs["context_entity_recall"] <= 1.0 and 0.0 < rs["answer_similarity"] <= 1.0
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.json") if p.name not in ("summary.json", "manifest.json")}
    assert CliRunner().invoke(main, args).exit_code == 0  # resumes: nothing answered again
    assert {p: p.stat().st_mtime_ns for p in before} == before
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["models"]["generator"] is None and manifest["modes"] == ["passage", "full", "oracle_kg"]
    assert "medr2" in manifest["versions"]
    # resuming with --ragas adds the metrics to the rows already answered, from their stored evidence
    r = CliRunner().invoke(main, base + ["--mode", "oracle_kg", "--ragas"])
    assert r.exit_code == 0, r.output + str(r.exception)
    assert "ragas" in json.loads((out / "summary.json").read_text())["oracle_kg"]
    assert all("ragas" in json.loads(p.read_text()) for p in (out / "oracle_kg").glob("*.json"))
    # a stored conflict flag made by an earlier version of the test is recomputed from the answer
    row_file = sorted((out / "passage").glob("*.json"))[0]
    row = json.loads(row_file.read_text())
    assert row["metrics"]["conflict"] is False
    row["metrics"]["conflict"] = True
    row_file.write_text(json.dumps(row))
    assert CliRunner().invoke(main, args).exit_code == 0
    assert json.loads(row_file.read_text())["metrics"]["conflict"] is False
    assert json.loads((out / "summary.json").read_text())["passage"]["conflict_rate"] == 0.0
    # so is every other metric, from the stored answer and its numbered context
    assert all("n" in e for e in row["evidence"])
    row = json.loads(row_file.read_text())
    kept = dict(row["metrics"])
    row["metrics"]["unsupported"], row["metrics"]["omission"] = 0.123, 0.456
    row_file.write_text(json.dumps(row))
    assert CliRunner().invoke(main, args).exit_code == 0
    assert json.loads(row_file.read_text())["metrics"] == kept
    # rows answered with other settings are not reused: the run says what differs and writes nothing
    cfg = tmp_path / "other.toml"
    cfg.write_text("[recommend]\nmax_items = 7\n")
    r = CliRunner().invoke(main, args + ["--config", str(cfg)])
    assert r.exit_code == 2 and "config [recommend]" in r.output and "another --out" in r.output
    assert json.loads(row_file.read_text())["metrics"] == kept


def test_trust_modes_and_report_order_name_registered_methods():
    """One registry of method names: the trust modes and the report's method order read it."""
    from medr2.eval.report import METHOD_ORDER
    from medr2.eval.trust import MODES
    from medr2.pipelines import PIPELINES

    assert {m for m in MODES.values() if m} <= set(PIPELINES)
    assert sorted(METHOD_ORDER) == sorted(PIPELINES)


def test_rows_of_a_mode_not_asked_for_still_guard_the_directory(tmp_path):
    from medr2.eval.trust_run import TrustError, check_same_settings

    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "q1.json").write_text("{}")
    (tmp_path / "manifest.json").write_text(json.dumps({"models": {}, "config": {"recommend": {"max_items": 4}},
                                                        "finished": None}))
    check_same_settings(tmp_path, ["no_rag"], {}, {"recommend": {"max_items": 4}})
    with pytest.raises(TrustError, match=r"full holds rows answered with a different config \[recommend\]"):
        check_same_settings(tmp_path, ["no_rag"], {}, {"recommend": {"max_items": 2}})
    # settings an answer cannot read (the web service's) do not count
    check_same_settings(tmp_path, ["passage"], {}, {"recommend": {"max_items": 4}, "serve": {"port": 1}})
