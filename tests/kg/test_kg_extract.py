"""Extraction and normalisation: dictionary NER with matching levels, relation cues (direction,
negation, coordination, doses, Chinese), the structured guideline reader, relation synonyms and
induced constraints. The small libraries here are built from hand-written entries (plumbing of
the real terminology readers is covered in test_kg_build.py)."""

import pytest

from medr2.kg.entities import EntityLibrary
from medr2.kg.extract.rules import RuleExtractor
from medr2.kg.extract.structured import StructuredExtractor, parse_grade, polarity_of
from medr2.kg.normalize import induce_constraints, induce_inverses, map_relation, rank_relation_synonyms
from medr2.kg.relations import conflicting, type_satisfies
from medr2.schema import Document, Passage, Section, SourceType


@pytest.fixture(scope="module")
def lib():
    return EntityLibrary.from_entries([
        ("drug:lisinopril", "lisinopril", "Drug", ["zestril"]),
        ("drug:metformin", "metformin", "Drug", ["glucophage"]),
        ("drug:aspirin", "aspirin", "Drug", []),
        ("drug:warfarin", "warfarin", "Drug", []),
        ("drug:amiodarone", "amiodarone", "Drug", []),
        ("drug:amoxicillin", "amoxicillin", "Drug", []),
        ("mesh:hypertension", "hypertension", "Disease", ["high blood pressure"]),
        ("icd10:E11", "type 2 diabetes mellitus", "Disease", ["type 2 diabetes"]),
        ("mesh:reye syndrome", "Reye syndrome", "Disease", []),
        ("mesh:pneumonia", "pneumonia", "Disease", []),
        ("hpo:fever", "fever", "Symptom", []),
        ("hpo:cough", "cough", "Symptom", []),
        ("mesh:smoking", "smoking", "Exposure", []),
        ("mesh:lung neoplasms", "lung neoplasms", "Disease", ["lung cancer"]),
        ("mesh:hba1c", "glycated hemoglobin test", "Test", ["hba1c"]),
        ("mesh:thymectomy", "thymectomy", "Procedure", []),
        ("icd10:G70.0", "myasthenia gravis", "Disease", []),
        ("zh:高血压", "高血压", "Disease", []),
        ("zh:卡托普利", "卡托普利", "Drug", []),
        ("zh:头痛", "头痛", "Symptom", []),
        ("zh:吸烟", "吸烟", "Exposure", []),
        ("zh:肺癌", "肺癌", "Disease", []),
    ])


def triples(lib, sentence):
    return [(c.head, c.relation, c.tail) for c in RuleExtractor(lib).sentence_triples(sentence)]


def test_match_levels(lib):
    assert lib.match("Lisinopril").level == "exact"
    assert lib.match("high blood pressure").level == "synonym"
    assert lib.match("patients with hypertension").level == "suggestion"
    assert lib.match("hypertensoin").level == "fuzzy"
    m = lib.match("quality of life")
    assert m.level == "unmatched" and m.entity_id.startswith("term:")


def test_ner_longest_match_and_brand_case(lib):
    ms = lib.mentions("Type 2 diabetes and high blood pressure; Glucophage was stopped.")
    assert [(m.entity_id, m.level) for m in ms] == [("icd10:E11", "synonym"), ("mesh:hypertension", "synonym"),
                                                    ("drug:metformin", "synonym")]
    # a brand name in lower case mid-sentence is usually a common word: not a mention
    assert [m.entity_id for m in lib.mentions("they take zestril daily")] == []


@pytest.mark.parametrize("sentence,expected", [
    ("Lisinopril is commonly used to treat hypertension.", [("Lisinopril", "treats", "hypertension")]),
    ("Hypertension is often treated with lisinopril.", [("lisinopril", "treats", "Hypertension")]),
    ("Metformin does not treat hypertension.", [("Metformin", "not_treats", "hypertension")]),
    ("There is no evidence that aspirin prevents pneumonia.", [("aspirin", "not_prevents", "pneumonia")]),
    ("Aspirin should not be given to children with Reye syndrome.",
     [("Aspirin", "contraindicated_in", "Reye syndrome")]),
    ("Smoking is a major risk factor for lung cancer.", [("Smoking", "risk_factor_for", "lung cancer")]),
    ("Warfarin interacts with amiodarone.", [("Warfarin", "interacts_with", "amiodarone")]),
    ("Give amoxicillin 500 mg three times daily.", [("500 mg three times daily", "dose_of", "amoxicillin")]),
    ("Fever and cough are common symptoms of pneumonia.",
     [("Fever", "symptom_of", "pneumonia"), ("cough", "symptom_of", "pneumonia")]),
    ("Pneumonia typically presents with fever and cough.",
     [("fever", "symptom_of", "Pneumonia"), ("cough", "symptom_of", "Pneumonia")]),
    ("Metformin is recommended for patients with type 2 diabetes.",
     [("Metformin", "recommended_for", "type 2 diabetes")]),
    ("Type 2 diabetes is monitored with HbA1c.", []),  # no cue for "monitored": nothing invented
    ("Metformin and lisinopril were taken with food.", []),
])
def test_rule_cues(lib, sentence, expected):
    assert triples(lib, sentence) == expected


def test_coordinated_heads(lib):
    got = triples(lib, "Lisinopril, metformin and aspirin are used to treat hypertension.")
    assert ("Lisinopril", "treats", "hypertension") in got and ("aspirin", "treats", "hypertension") in got


@pytest.mark.parametrize("sentence,expected", [
    ("卡托普利可用于治疗高血压。", [("卡托普利", "treats", "高血压")]),
    ("吸烟是肺癌的危险因素。", [("吸烟", "risk_factor_for", "肺癌")]),
    ("高血压常表现为头痛。", [("头痛", "symptom_of", "高血压")]),
    ("卡托普利不能治疗肺癌。", [("卡托普利", "not_treats", "肺癌")]),
])
def test_chinese_cues(lib, sentence, expected):
    assert triples(lib, sentence) == expected


def test_extract_keeps_text_ids(lib):
    p = Passage(passage_id="pX", doc_id="d1", text="Hypertension is treated with lisinopril. Warfarin interacts with "
                                                     "amiodarone.")
    got = RuleExtractor(lib).extract(Document(doc_id="d1"), [p])
    assert {(c.text_id, c.doc_id, c.extractor) for c in got} == {("pX", "d1", "rules")}
    assert all(c.attrs["sentence"] for c in got)


def test_grades_and_polarity():
    assert parse_grade("Offer thymectomy (Level B).") == {"strength": "B"}
    assert parse_grade("(Strong recommendation, moderate-quality evidence)") == {"strength": "Strong",
                                                                                 "evidence_class": "moderate"}
    assert parse_grade("Use X [A; Class I evidence].") == {"strength": "A", "evidence_class": "I"}
    assert parse_grade("Nothing graded here.") == {}
    assert polarity_of("Clinicians should not prescribe antibiotics.") == -1
    assert polarity_of("Consider metformin as first-line therapy.") == 1
    assert polarity_of("There is insufficient evidence to recommend for or against X (Level U).") == 0
    assert polarity_of("Myasthenia gravis is a disease.") == 0
    assert polarity_of("Quinine is likely effective, but avoiding it for routine cramps is advised.") == -1
    assert polarity_of("Women should be advised not to breastfeed for a week.") == -1
    assert polarity_of("A 3 mg dose of LNG can be considered.") == 1
    # a negation in a relative clause says who, not what to do
    assert polarity_of("Offer insulin to patients who do not respond to metformin.") == 1
    assert polarity_of("Do not offer prophylaxis to people who are not taking rituximab.") == -1
    assert polarity_of("Metformin is not as effective as clomiphene for ovulation induction.") == -1


def ngc_doc():
    rec = ("For patients with nonthymomatous autoimmune myasthenia gravis, thymectomy is recommended as an option "
           "to increase the probability of remission (Level B).\n"
           "Do not use aspirin in patients with myasthenia gravis (Level C).")
    fields = [("Scope", "Disease/Condition(s)", "Nonthymomatous autoimmune myasthenia gravis"),
              ("Scope", "Target Population", "Adults with myasthenia gravis"),
              ("Scope", "Interventions and Practices Considered", "Thymectomy\nAspirin"),
              ("Scope", "Major Outcomes Considered", "- Survival\n- Remission"),
              ("Recommendations", "Major Recommendations", rec)]
    secs = {}
    for top, name, text in fields:
        secs.setdefault(top, []).append(Section(title=name, text=text))
    doc = Document(doc_id="ngc:1", title="Thymectomy", source_type=SourceType.guideline,
                   sections=[Section(title=t, children=c) for t, c in secs.items()])
    passages = [Passage(passage_id=f"p{i}", doc_id="ngc:1", text=text, heading_path=[top, name])
                for i, (top, name, text) in enumerate(fields)]
    # two short scope fields merged into one passage by segmentation: still traced by content
    passages[0] = Passage(passage_id="p0", doc_id="ngc:1", text=fields[0][2] + "\n\n" + fields[1][2],
                          heading_path=["Scope"])
    return doc, passages


def test_structured_extractor(lib):
    doc, passages = ngc_doc()
    ex = StructuredExtractor(lib)
    assert ex.applies(doc)
    got = {(c.head, c.relation, c.tail, c.text_id): c for c in ex.extract(doc, passages)}
    keys = {(h, r, t) for h, r, t, _ in got}
    assert ("Thymectomy", "considered_for", "Nonthymomatous autoimmune myasthenia gravis") in keys
    assert ("Nonthymomatous autoimmune myasthenia gravis", "in_population", "Adults with myasthenia gravis") in keys
    assert ("Nonthymomatous autoimmune myasthenia gravis", "outcome_considered", "Survival") in keys
    rec = [c for (h, r, t, p), c in got.items() if r == "recommended_for" and h.lower() == "thymectomy"]
    assert rec and rec[0].attrs["strength"] == "B" and rec[0].text_id == "p4"
    neg = [c for (h, r, t, p), c in got.items() if r == "not_recommended_for"]
    assert neg and neg[0].head.lower() == "aspirin" and neg[0].attrs["strength"] == "C"
    pop = [c for (h, r, t, p), c in got.items() if r == "in_population"][0]
    assert pop.text_id == "p0" and pop.tail_type == "Population"  # the merged passage holds the field
    assert not ex.applies(Document(doc_id="x", source_type=SourceType.paper))


def test_map_relation_levels():
    assert map_relation("treats") == ("treats", False, "exact")
    assert map_relation("treated_by") == ("treats", True, "synonym")
    assert map_relation("is caused by") == ("causes", True, "synonym")
    assert map_relation("does not prevent") == ("not_prevents", False, "synonym")
    assert map_relation("risk factr for")[:1] == ("risk_factor_for",) and map_relation("risk factr for")[2] == "fuzzy"
    rel, swap, level = map_relation("is metabolised by")
    assert level == "unmatched" and rel == "is_metabolised_by"
    syn = {"is_metabolised_by": {"relation": "interacts_with", "status": "confirmed", "evidence": {}}}
    assert map_relation("is metabolised by", syn) == ("interacts_with", False, "synonym")


def test_relation_synonyms_never_merge_direction_or_polarity():
    pairs = {"treats": {("a", "x"), ("b", "y"), ("c", "z")},
             "helps_with": {("a", "x"), ("b", "y")},           # same direction: a synonym
             "is_helped_by": {("x", "a"), ("y", "b")},         # reversed arguments: an inverse, not a synonym
             "not_treats": {("d", "w")}}
    ranked = {r["surface"]: r for r in rank_relation_synonyms(pairs, ["treats", "not_treats"])}
    assert ranked["helps_with"]["relation"] == "treats"
    assert "is_helped_by" not in ranked or ranked["is_helped_by"]["relation"] != "treats"
    assert induce_inverses({"treats": pairs["treats"], "is_helped_by": {("x", "a"), ("y", "b"), ("z", "c")}},
                           min_support=3) == [("treats", "is_helped_by", 1.0)]


def test_induced_constraints():
    typed = {"metabolises": [("Drug", "Chemical")] * 8 + [("Disease", "Chemical")] + [(None, "Chemical")]}
    c = induce_constraints(typed, min_share=0.2, min_support=3)
    assert c["metabolises"]["domain"] == ["Drug"] and c["metabolises"]["range"] == ["Chemical"]


def test_types_and_conflicts():
    assert type_satisfies("Drug", ("Intervention",)) is True
    assert type_satisfies("Disease", ("Intervention",)) is False
    assert type_satisfies(None, ("Intervention",)) is None
    assert conflicting("treats", "not_treats") and conflicting("recommended_for", "not_recommended_for")
    assert not conflicting("treats", "symptom_of")


def test_head_of_an_unknown_longer_phrase_is_a_suggestion(lib):
    lv = lambda text: [(m.entity_id, m.level) for m in lib.mentions(text)]  # noqa: E731
    assert lv("Offer it for pulmonary hypertension.") == [("mesh:hypertension", "suggestion")]  # a narrower concept
    assert lv("Offer it in severe hypertension.") == [("mesh:hypertension", "exact")]  # severity does not narrow it
    assert lv("Offer it to adults with hypertension.") == [("mesh:hypertension", "exact")]
    assert lv("Lisinopril treats hypertension.") == [("drug:lisinopril", "exact"), ("mesh:hypertension", "exact")]


def test_user_synonym_files_and_gbt_terms(tmp_path):
    from medr2.kg.entities import gbt16751_entries, load_library

    f = tmp_path / "syn.tsv"
    f.write_text("# team list\nheart attack\tMI|myocardial infarction\tDisease\nACEi\tACE inhibitor\tDrug\n")
    lib = load_library([], [str(f)], cache_dir=tmp_path / "cache")
    assert [(m.entity_id, m.level, m.type) for m in lib.mentions("After an MI, start an ACE inhibitor.")] == \
        [("user:heart attack", "synonym", "Disease"), ("user:acei", "synonym", "Drug")]
    assert (tmp_path / "cache").glob("library-*.json")
    bad = tmp_path / "bad.tsv"
    bad.write_text("no tab here\n")
    with pytest.raises(ValueError, match="expected 'term<TAB>synonym"):
        load_library([], [str(bad)], cache_dir=tmp_path / "cache2")
    gbt = tmp_path / "gbt.txt"
    gbt.write_text("中医临床诊疗术语 第2部分：证候\n2.1\n    阴证  yin syndrome/pattern\n    与阳证相对。泛指一类证候。\n"
                   "2.5.2\n    里寒证  syndrome/pattern of internal cold\n    内寒证\n    因寒邪偏盛所致。\n", encoding="utf-8")
    got = {e[1]: e for e in gbt16751_entries(str(gbt))}
    assert got["阴证"][2] == "Syndrome" and "yin pattern" in got["阴证"][3]
    assert "内寒证" in got["里寒证"][3] and "syndrome of internal cold" in got["里寒证"][3]
