"""The trained appraisal ingredients (issue 34, section 3): the weak-label rules, training both
models on a tiny public-data-shaped folder, loading the shipped artefacts, the config switches,
clear errors for missing artefacts, and (with ../shared/data) that no evaluation item is trained on."""

import csv
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import shared

from medr2.appraise.design_labels import design_of_mesh, wording_design
from medr2.appraise.design_model import DesignModel
from medr2.appraise.doc_type import (DocTypeModel, EmbeddingDocTyper, LLMDocTyper, TrainedDocTyper,
                                     doc_typer_for)
from medr2.appraise.evidence_level import EvidenceLeveler
from medr2.appraise.weak_labels import (MEDQUAD_QTYPE_TYPES, NGC_FIELD_TYPES, PUBMED_SECTION_TYPES,
                                        recommendation_type, results_type)
from medr2.config import AppraiseConfig
from medr2.formulate.labels import DOC_TYPES

ROOT = Path(__file__).resolve().parents[2]

# -- a tiny folder shaped like ../shared/data ----------------------------------------------------

TOPICS = ["asthma", "gout", "anemia", "psoriasis", "migraine", "glaucoma", "scabies", "rickets", "lupus", "tetanus",
          "mumps", "rosacea", "vertigo", "eczema", "sciatica", "bursitis", "cholera", "typhoid"]


def _w(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def make_tiny_data(root: Path) -> Path:
    jl = lambda rows: "".join(json.dumps(r) + "\n" for r in rows)  # noqa: E731
    meshes = [["Animals", "Rats", "Male"], ["Humans", "Retrospective Studies"], ["Humans", "Cross-Sectional Studies"]]
    bodies = ["Rats were fed a diet and their livers were weighed after the laboratory exposure in cages.",
              "Medical records of patients treated for {t} were reviewed retrospectively and outcomes followed.",
              "Participants with {t} completed a questionnaire once at a single visit in the clinic survey."]
    pq = {}
    for i in range(45):
        t, k = TOPICS[i % len(TOPICS)], i % 3
        pq[str(1000 + i)] = {"CONTEXTS": [f"To study {t} in this population and to learn more about it today.",
                                          bodies[k].format(t=t) + f" Record {i} of the series in {t} was kept."],
                             "LABELS": ["OBJECTIVE", "METHODS"], "MESHES": meshes[k], "YEAR": "2001",
                             "LONG_ANSWER": f"Our findings about {t} suggest a careful approach is warranted in care."}
    _w(root / "benchmarks/pubmedqa/ori_pqal.json", json.dumps(pq))
    _w(root / "benchmarks/pubmedqa/test_ground_truth.json", json.dumps({"1001": "yes"}))
    answers = {"information": "{t} is a disease of the body that is defined as a long-term condition of the organ system.",
               "symptoms": "Signs and symptoms of {t} include fever, pain, swelling, a rash, tiredness and weakness in most.",
               "treatment": "Treatment of {t} may include medicines, surgery, rest and physical therapy chosen by the team."}
    mq = [{"qid": f"{q}-{i}", "doc_id": f"{q}-{i}", "focus": t, "question": f"What about {t} ({q}) ?", "qtype": q,
           "answer": a.format(t=t.capitalize()) + f" Entry {i}."}
          for q, a in answers.items() for i, t in enumerate(TOPICS)]
    _w(root / "corpora/medquad/medquad.jsonl", jl(mq))
    ngc = [{"ngc_id": i, "title": f"Guideline on {t}", "sections": [{"section": "Recommendations", "fields": [
        {"name": "Major Recommendations", "field_id": "151",
         "text": f"Clinicians should offer an assessment of {t} to every adult at risk, and should avoid delay in "
                 f"care. Specialists should review the plan within a month and must document the reasons for any "
                 f"change in treatment (strong recommendation, moderate-quality evidence)."}]}]}
        for i, t in enumerate(TOPICS)]
    _w(root / "corpora/guidelines/ngc_summaries.jsonl", jl(ngc))
    _w(root / "corpora/guidelines/raw_guideline_chunks_en.jsonl", jl([["Offer statins to adults at high risk."]]))
    mods = [{"module_id": f"m{i}", "book": "Anatomy and Physiology 2e", "path": ["Unit"], "title": f"The {t} system",
             "text": f"The {t} system works because cells exchange ions across membranes, which allows muscles to "
                     f"contract and the organs to keep their balance over time. Hormones released into the blood "
                     f"signal distant tissues, so the body adjusts its heart rate and breathing.", "glossary": []}
            for i, t in enumerate(TOPICS)]
    _w(root / "corpora/textbooks/anatomy_physiology_2e.jsonl", jl(mods))
    _w(root / "corpora/textbooks/microbiology.jsonl", jl(mods[:1]))
    with (root / "corpora/encyclopedia").mkdir(parents=True, exist_ok=True) or \
            open(root / "corpora/encyclopedia/medline_health_topics_en.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "title", "also_called", "summary", "url"])
        for i, t in enumerate(TOPICS):
            w.writerow([i, t, "", f"{t.capitalize()} is a common health problem that is defined by its signs. It is "
                                  f"what doctors call a condition of the body that many people have. Your doctor can "
                                  f"tell you more about it and about the tests used to find it. NIH: an institute.", ""])
    cases = [[f"A case of {t}: A 34-year-old man presented with pain on day one; he was admitted, treated and "
              f"discharged on day nine after his fever resolved and he recovered."] for t in TOPICS]
    _w(root / "corpora/mixed_samples/case_reports_en.jsonl", jl(cases))
    _w(root / "corpora/pubmed/pubmed_abstracts_299.json",
       json.dumps([f"Study of {t}\nIn a randomized controlled trial, adults with {t} received a drug or placebo."
                   for t in TOPICS]))
    return root


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_data(tmp_path_factory.mktemp("tiny-data"))


# -- rules -----------------------------------------------------------------------------------

def test_weak_label_rules_map_onto_the_16_types():
    targets = set(MEDQUAD_QTYPE_TYPES.values()) | set(NGC_FIELD_TYPES.values()) | set(PUBMED_SECTION_TYPES.values())
    assert targets - {"results", "recommendations"} <= set(DOC_TYPES)
    assert results_type("The AUC was 0.81 and sensitivity 90%.") == "evaluation"
    assert results_type("Mortality was 4% vs 9% in controls.") == "comparison"
    assert results_type("Forty patients were enrolled.") is None
    assert recommendation_type("Level A: good and consistent evidence.") == "classification"
    assert recommendation_type("Do not use aspirin in children.") == "command"
    assert recommendation_type("The evidence was reviewed in 2010.") is None


def test_design_rules_take_the_most_specific_heading_and_mask_wording():
    assert design_of_mesh(["Humans", "Cross-Sectional Studies", "Retrospective Studies"]) == "cross-sectional study"
    assert design_of_mesh(["Humans", "Cohort Studies", "Surveys and Questionnaires"]) == "cohort study"
    assert design_of_mesh(["Humans", "Case-Control Studies", "Retrospective Studies"]) == "case-control study"
    assert design_of_mesh(["Humans", "Animals", "Prospective Studies"]) == "cohort study"  # humans studied
    assert design_of_mesh(["Mice, Inbred C57BL", "Humans"]) == "laboratory or animal study"
    design, text = wording_design("We did a prospective cohort study of 200 nurses.")
    assert design == "cohort study" and "cohort" not in text


# -- the leveler's combination (a stand-in model, so every branch is reached) ----------------

class Fixed:
    meta = {"per_design": {"cohort study": 50, "case report": 30, "randomized controlled trial": 12,
                           "meta-analysis": 2}}

    def __init__(self, p):
        self.p = p

    def proba(self, text, source_type=""):
        return dict(self.p)


def test_leveler_order_model_then_cues_then_llm_then_model_guess():
    levels = AppraiseConfig().levels
    sure = EvidenceLeveler(levels, design_model=Fixed({"cohort study": 0.9, "case report": 0.1}), min_confidence=0.5,
                           min_support=10)
    assert sure.assess("paper", [], "", "A randomised trial.").source == "model"  # sure model beats the cue
    # ... but not a cue naming a design it saw too rarely (2 meta-analyses) or never (expert opinion)
    for text, design in [("A meta-analysis of 12 trials.", "meta-analysis"), ("In my view, this is wrong.", "expert opinion")]:
        r = sure.assess("paper", [], "", text)
        assert (r.design, r.source) == (design, "text")
    unsure = EvidenceLeveler(levels, design_model=Fixed({"cohort study": 0.4, "case report": 0.6}), min_confidence=0.7)
    r = unsure.assess("paper", [], "", "Patients were randomly assigned to two arms.")
    assert (r.design, r.source) == ("randomized controlled trial", "text")
    r = unsure.assess("paper", [], "", "We measured things.")
    assert (r.design, r.source, r.level) == ("case report", "model", levels["case report"])
    r = unsure.assess("paper", ["Meta-Analysis"], "", "We measured things.")
    assert (r.design, r.source) == ("meta-analysis", "metadata")
    assert EvidenceLeveler(levels).assess("paper", [], "", "We measured things.").source == "default"


# -- training on the tiny folder ---------------------------------------------------------------

def test_doc_type_training_loading_and_distribution(tiny, tmp_path, encoder):
    from medr2.appraise.train_doc_type import train_doc_typer

    corpora = ("medquad", "medlineplus", "case_reports")
    card = train_doc_typer(tiny, tmp_path / "a", seed=0, dev_fraction=0.3, per_label=20, per_source=12,
                           encoder=encoder, corpora=corpora)
    assert set(card["per_type"]) == {"definition", "description", "problem-solving", "narration"}
    assert "prediction" in card["unsupervised_types"] and card["dev"]["n"] > 0
    model = DocTypeModel.load(tmp_path / "a" / "doc_type.npz")
    typer = TrainedDocTyper(model, encoder)
    d_sym, d_case = typer.distributions(["Symptoms of gout include pain, fever, swelling and a rash.",
                                         "A 60-year-old woman presented on day one; she was admitted and discharged."])
    for d in (d_sym, d_case):
        assert set(d) == set(DOC_TYPES) and abs(sum(d.values()) - 1) < 1e-5
        assert d["prediction"] < 1e-6  # never supervised: the model gives it nothing
    assert d_sym["description"] > d_case["description"] and d_case["narration"] > d_sym["narration"]
    train_doc_typer(tiny, tmp_path / "b", seed=0, dev_fraction=0.3, per_label=20, per_source=12, encoder=encoder,
                    corpora=corpora)
    again = DocTypeModel.load(tmp_path / "b" / "doc_type.npz")
    assert np.array_equal(model.weights, again.weights) and model.temperature == again.temperature  # seeded


def test_design_training_and_leveler(tiny, tmp_path):
    from medr2.appraise.train_design import train_design_model

    levels = AppraiseConfig().levels
    card = train_design_model(tiny, tmp_path, levels, seed=0, dev_fraction=0.3, not_study_per_class=10)
    assert {"laboratory or animal study", "cohort study", "cross-sectional study", "case report", "textbook",
            "guideline", "encyclopedia"} <= set(card["per_design"])
    assert "1001" not in json.dumps(card) and card["min_confidence"] in [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01]
    model = DesignModel.load(tmp_path / "design.npz")
    p = model.proba("Rats were fed a diet and their livers were weighed in cages.", "paper")
    assert abs(sum(p.values()) - 1) < 1e-5 and "textbook" not in p
    assert max(p, key=p.get) == "laboratory or animal study"
    assert "textbook" in model.proba("The system works because cells exchange ions.", "other")


# -- shipped artefacts, config switches, errors -------------------------------------------------

def test_shipped_models_load_and_defaults_use_them():
    a = AppraiseConfig()
    assert a.doc_type_method == "auto" and a.level_method == "trained"
    m = DocTypeModel.load()
    assert m.weights.shape == (16, 384) and m.meta["encoder"].lower() == "bundled:all-minilm-l6-v2"
    p = m.proba(np.ones((2, 384), dtype=np.float32) / np.sqrt(384))
    assert np.allclose(p.sum(axis=1), 1.0)
    lv = EvidenceLeveler.from_config(a)
    assert isinstance(lv.model, DesignModel) and lv.min_confidence == a.design_min_confidence
    assert EvidenceLeveler.from_config(a.model_copy(update={"level_method": "cues"})).model is None


def test_doc_typer_switch(encoder):
    a = AppraiseConfig()
    assert isinstance(doc_typer_for(a, encoder), TrainedDocTyper)
    assert isinstance(doc_typer_for(a.model_copy(update={"doc_type_method": "embedding"}), encoder), EmbeddingDocTyper)
    llm = object()
    assert isinstance(doc_typer_for(a.model_copy(update={"doc_type_method": "llm"}), encoder, llm), LLMDocTyper)
    # "auto" (the default) uses the trained model only on the encoder it was trained on
    other = type("E", (), {"name": "bundled:multilingual-e5-small", "dim": 384,
                           "encode_passages": lambda self, t: np.ones((len(t), 384), dtype=np.float32)})()
    assert isinstance(doc_typer_for(a, other), EmbeddingDocTyper)
    with pytest.raises(ValueError, match="doc_type_method"):
        doc_typer_for(a.model_copy(update={"doc_type_method": "trained"}), other)


def test_missing_artefacts_and_wrong_encoder_are_clear_errors(tmp_path):
    a = AppraiseConfig()
    with pytest.raises(FileNotFoundError, match="train-doctype"):
        doc_typer_for(a.model_copy(update={"doc_type_model": str(tmp_path / "none.npz")}), None)
    with pytest.raises(FileNotFoundError, match="train-design"):
        EvidenceLeveler.from_config(a.model_copy(update={"design_model": str(tmp_path / "none.npz")}))
    other = type("E", (), {"name": "bge-base", "dim": 768})()
    with pytest.raises(ValueError, match="doc_type_method"):
        TrainedDocTyper(DocTypeModel.load(), other)
    with pytest.raises(ValueError, match="384-d"):
        TrainedDocTyper(DocTypeModel.load()).distributions(["x"], np.ones((1, 8), dtype=np.float32))


# -- with the shared data: nothing evaluated is trained on --------------------------------------

def test_training_never_sees_the_labelled_sets():
    from medr2.appraise.design_labels import pubmedqa_examples
    from medr2.appraise.train_doc_type import doc_type_examples
    from medr2.appraise.weak_labels import heldout

    data = shared("benchmarks/pubmedqa/ori_pqal.json").parents[2]
    shared("corpora/mixed_samples/case_reports_en.jsonl")
    test_ids = set(json.loads((data / "benchmarks/pubmedqa/test_ground_truth.json").read_text()))
    levels_set = {json.loads(x)["pmid"] for x in (ROOT / "bench/data/evidence_levels_pubmedqa.jsonl").read_text().splitlines() if x}
    labelled = [json.loads(x) for x in (ROOT / "bench/data/doc_types_labelled.jsonl").read_text().splitlines() if x]
    eval_docs = {r["doc_id"] for r in labelled}
    assert len(labelled) >= 100 and all(heldout(r["doc_id"]) for r in labelled if r["corpus"] not in ("pubmed299", "nice"))
    design = list(pubmedqa_examples(data))
    pmids = {e.group.split(":")[1] for e in design}
    assert len(design) > 200 and not pmids & (test_ids | levels_set)
    ex = doc_type_examples(data, seed=0, per_label=40, per_source=20, corpora=("pubmedqa", "case_reports"))
    assert {e.label for e in ex} <= set(DOC_TYPES) and not {e.group for e in ex} & eval_docs
    assert not {e.group.split(":")[1] for e in ex if e.group.startswith("pmid:")} & (test_ids | levels_set)


def test_train_commands_write_loadable_models(tiny, tmp_path, encoder):
    from click.testing import CliRunner

    from medr2.cli.train_appraisal import train_design, train_doctype

    r = CliRunner().invoke(train_design, ["--data", str(tiny), "--out", str(tmp_path / "design"), "--dev-fraction", "0.3"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["min_confidence"] > 0 and DesignModel.load(tmp_path / "design" / "design.npz").designs
    r = CliRunner().invoke(train_doctype, ["--data", str(tmp_path / "missing"), "--out", str(tmp_path / "dt")])
    assert r.exit_code == 2 and "is not a folder" in r.output
    r = CliRunner().invoke(train_doctype, ["--data", str(tmp_path), "--out", str(tmp_path / "dt")])
    assert r.exit_code == 2 and "missing" in r.output  # a folder without the public data: a clear error
