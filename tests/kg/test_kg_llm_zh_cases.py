"""Knowledge graph: the LLM extractor path (normalisation of free relation text, extractor
agreement in EvidScore), Chinese graphs from the shared term lists, and the personalized graph
from solved cases with its fine-tuning export."""

import json
import shutil

import pytest
from click.testing import CliRunner

from medr2.cli import main
from medr2.config import KGConfig
from medr2.kg.build import KGBuilder, QualityModel, make_extractors
from medr2.kg.entities import EntityLibrary
from medr2.kg.store import KGStore
from medr2.schema import Document, Passage

from conftest import SHARED


def cli(*args, ok=True):
    r = CliRunner().invoke(main, [str(a) for a in args])
    if ok:
        assert r.exit_code == 0, r.output + str(r.exception)
    return r


class FakeExtractorLLM:
    """Plumbing fake: answers every extraction prompt with fixed JSON triples (named as a fake)."""

    name = "fake-extractor"

    def __init__(self, triples):
        self.triples = triples
        self.calls = 0

    def chat(self, messages, max_tokens=512, temperature=0.0, seed=0, json_schema=None):
        self.calls += 1
        text_id = json_schema["properties"]["triples"]["items"]["properties"]["text_id"]["enum"][0]
        return {"text": json.dumps({"triples": [dict(t, text_id=text_id) for t in self.triples]}),
                "prompt_tokens": 10, "completion_tokens": 10}


@pytest.fixture()
def lib():
    return EntityLibrary.from_entries([("drug:lisinopril", "lisinopril", "Drug", []),
                                       ("mesh:hypertension", "hypertension", "Disease", []),
                                       ("drug:warfarin", "warfarin", "Drug", [])])


def test_llm_triples_are_normalised_and_agreement_counts(tmp_path, lib):
    llm = FakeExtractorLLM([
        {"head": "Hypertension", "head_type": "Disease", "relation": "is treated with", "negated": False,
         "tail": "lisinopril", "tail_type": "Drug"},                     # reversed surface: swapped to treats
        {"head": "warfarin", "head_type": "Drug", "relation": "causes", "negated": False, "tail": "bleedng",
         "tail_type": "Symptom"},                                         # unmatched tail kept, low entity score
        {"head": "lisinopril", "head_type": "Drug", "relation": "does not prevent", "negated": False,
         "tail": "hypertension", "tail_type": "Disease"},
    ])
    cfg = KGConfig()
    kg = KGStore(tmp_path / "kg.sqlite")
    b = KGBuilder(kg, lib, make_extractors(["rules", "llm"], lib, llm), cfg)
    doc = Document(doc_id="d1")
    p = Passage(passage_id="p1", doc_id="d1", text="Hypertension is often treated with lisinopril.")
    touched = b.add_document(doc, [p], "h1")
    QualityModel(kg, cfg).recompute(touched)
    rows = {(kg.entity(t["head_id"])["name"], t["relation"], kg.entity(t["tail_id"])["name"]): t
            for t in kg.iter_triples()}
    both = rows[("lisinopril", "treats", "hypertension")]
    assert sorted(both["extractors"]) == ["llm", "rules"] and both["agreement"] == 1.0
    neg = rows[("lisinopril", "not_prevents", "hypertension")]
    assert neg["agreement"] == 0.5 and neg["evid_score"] < both["evid_score"]
    weak = rows[("warfarin", "causes", "bleedng")]
    assert weak["entity_score"] < both["entity_score"] and weak["q"] < both["q"]
    assert llm.calls == 1
    # the source keeps the model's own relation text
    assert {s["relation_surface"] for s in kg.sources(both["triple_id"])} == {"treats", "is treated with"}


class FixedExtractor:
    """Plumbing fake: an extractor under a real extractor's name that emits fixed candidates."""

    def __init__(self, name, triples):
        self.name, self.triples = name, triples

    def applies(self, doc):
        return True

    def extract(self, doc, passages):
        from medr2.kg.extract.base import Candidate

        return [Candidate(h, r, t, passages[0].passage_id, doc.doc_id, self.name, ht, tt)
                for h, r, t, ht, tt in self.triples]


def test_agreement_counts_only_the_extractors_that_can_produce_the_relation(tmp_path, lib):
    """The rule extractor never reads a scope field, so its silence does not count against a
    scope triple; it can read recommendations, so there its silence does (bench/README.md,
    "Quality discrimination", round 3)."""
    from medr2.kg.extract import can_produce

    assert not can_produce("rules", "considered_for") and can_produce("rules", "recommended_for")
    assert can_produce("structured", "considered_for") and not can_produce("structured", "treats")
    assert can_produce("someone-elses", "anything")
    cfg = KGConfig()
    kg = KGStore(tmp_path / "kg.sqlite")
    structured = FixedExtractor("structured", [("lisinopril", "considered_for", "hypertension", "Drug", "Disease"),
                                               ("warfarin", "recommended_for", "hypertension", "Drug", "Disease")])
    b = KGBuilder(kg, lib, [FixedExtractor("rules", []), structured], cfg)
    doc = Document(doc_id="d1")
    touched = b.add_document(doc, [Passage(passage_id="p1", doc_id="d1", text="Scope and recommendations.")], "h1")
    QualityModel(kg, cfg).recompute(touched)
    rows = {t["relation"]: t for t in kg.iter_triples()}
    assert rows["considered_for"]["agreement"] == 1.0
    assert rows["recommended_for"]["agreement"] == 0.5
    assert rows["considered_for"]["evid_score"] > rows["recommended_for"]["evid_score"]


def test_llm_extractor_needs_a_generator(lib):
    from medr2.llm.base import LLMError

    with pytest.raises(LLMError, match="needs a generator"):
        make_extractors(["llm"], lib, None)


ZH = SHARED / "corpora" / "chinese"


@pytest.mark.skipif(not (ZH / "medical_kg_dicts" / "disease.txt").is_file(), reason="../shared/data is absent")
def test_chinese_graph_from_shared_term_lists(tmp_path, encoder):
    d = ZH / "medical_kg_dicts"
    gbt = next((ZH / "tcm_terminology_gbt16751").glob("*.txt"))
    cfg = tmp_path / "zh.toml"
    cfg.write_text("[kg]\nterminologies = [" + ", ".join(
        f'"{x}"' for x in [f"zh:{d / 'disease.txt'}:Disease", f"zh:{d / 'symptom.txt'}:Symptom",
                           f"zh:{d / 'drug.txt'}:Drug", f"gbt16751:{gbt}"]) + "]\n")
    corpus = tmp_path / "zh"
    corpus.mkdir()
    (corpus / "gaoxueya.md").write_text(
        "---\nid: zh:htn\ntitle: 高血压诊疗要点\nsource_type: guideline\n---\n# 高血压诊疗要点\n\n## 临床表现\n\n"
        "高血压常表现为头痛、头晕。肥胖是糖尿病的危险因素。\n\n## 治疗\n\n"
        "糖尿病患者的血压控制更为重要。\n", encoding="utf-8")
    idx = tmp_path / "index"
    cli("ingest", corpus, "--index", idx, "--no-progress")
    rep = json.loads(cli("kg", "build", "--index", idx, "--config", cfg, "--json", "--no-progress").stdout)
    assert rep["counts"]["triples"] >= 2
    kg = KGStore(idx / "kg.sqlite")
    try:
        names = {(kg.entity(t["head_id"])["name"], t["relation"], kg.entity(t["tail_id"])["name"])
                 for t in kg.iter_triples()}
    finally:
        kg.close()
    assert {("头痛", "symptom_of", "高血压"), ("头晕", "symptom_of", "高血压"), ("肥胖", "risk_factor_for", "糖尿病")} <= names
    out = json.loads(cli("kg", "search", "高血压怎么治疗？", "--index", idx, "--config", cfg, "--json").stdout)
    assert any(lk["name"] == "高血压" for lk in out["links"]) and out["triples"]


def test_personalized_graph_cases_and_export(demo_index_dir, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(demo_index_dir, path)
    cli("kg", "build", "--index", path, "--no-progress")
    cases = tmp_path / "cases.jsonl"
    cases.write_text("\n".join(json.dumps(c) for c in [
        {"id": "c1", "question": "A man with type 2 diabetes and an eGFR of 25 takes metformin. What now?",
         "answer": "Stop metformin", "explanation": "Metformin causes lactic acidosis when kidney function is "
                                                    "poor; stop metformin below an eGFR of 30."},
        {"id": "c2", "question": "Which cough is typical of ACE inhibitors?", "answer": "Dry cough",
         "explanation": "ACE inhibitors cause a dry cough."},
        {"id": "m1", "question": "Drug of choice?", "opa": "A", "opb": "Insulin", "opc": "C", "opd": "D", "cop": 2,
         "exp": "Insulin is used to treat type 2 diabetes when other drugs fail."},
        {"id": "m2", "question": "No explanation here", "opa": "A", "opb": "B", "opc": "C", "opd": "D", "cop": 1,
         "exp": ""},
    ]) + "\n")
    out = cli("kg", "cases", cases, "--index", path, "--no-progress").output
    assert "3 added" in out
    assert "0 added, 3 already present" in cli("kg", "cases", cases, "--index", path, "--no-progress").output
    kg = KGStore(path / "kg.sqlite")
    try:
        c1 = kg.case("c1")
        chain = [t for t in kg.case_triples() if t["case_id"] == "c1"]
        assert c1["reasoning"].startswith("Metformin causes") and chain
        assert ("Metformin", "causes", "lactic acidosis") in {(t["head"], t["relation"], t["tail"]) for t in chain}
        assert c1["support"], "aligned to the general graph, the chain recalls supporting passages"
        assert kg.case("medmcqa:m1")["answer"] == "Insulin"
    finally:
        kg.close()
    found = json.loads(cli("kg", "search", "Does metformin cause lactic acidosis in kidney failure?", "--index", path,
                           "--cases", "--json").stdout)
    assert found["cases"]["cases"][0]["case_id"] == "c1"
    res = json.loads(cli("ask", "Does metformin cause lactic acidosis in kidney failure?", "--index", path, "--kg",
                         "--llm", "none", "--json").stdout)
    assert res["subgraph"]["cases"] and res["subgraph"]["cases"][0]["case_id"] == "c1"
    assert "Solved cases" in res["subgraph"]["prompt"]
    # a small evidence window: the statements and cases are held to half of it, the passages get the rest
    from medr2.util.text import count_tokens

    small = tmp_path / "small.toml"
    small.write_text("[apply]\ncontext_tokens = 200\n")
    tight = json.loads(cli("ask", "Does metformin cause lactic acidosis in kidney failure?", "--index", path, "--kg",
                           "--llm", "none", "--config", small, "--json").stdout)
    block = tight["subgraph"]["prompt"]
    assert len(block) < len(res["subgraph"]["prompt"]) and int(count_tokens(block) * 1.3) + 24 <= 100
    assert any("graph statements left out" in n for n in tight["notes"]) or not res["subgraph"]["triples"]
    # without a generator no model reads the passages: every one not dropped is in the context
    kept = [e for e in tight["evidence"] if e["kept"]]
    assert kept and all(e["kept"] for e in tight["evidence"] if not e["reason"].startswith("dropped"))
    out_file = tmp_path / "sft.json"
    cli("kg", "export-reasoning", "--index", path, "--out", out_file)
    recs = json.loads(out_file.read_text())
    assert recs and all(r["conversations"][0]["from"] == "human" for r in recs)
    assert any("Decompose" in r["conversations"][0]["value"] for r in recs)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert cli("kg", "cases", bad, "--index", path, ok=False).exit_code == 2
