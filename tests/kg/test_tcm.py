"""TCM-DiffRAG's pieces without a model: the TCMBench and GB/T 16751 readers, findings, question
aspects, case paths, the term index, definition matching, case matching and `medr2 kg cases`
on a TCMBench file (issue 37)."""

import json

import pytest
from helpers import run_cli
from tcm_fixture import write_world

from medr2.eval.datasets import DatasetError
from medr2.eval.runner import load_questions
from medr2.index.index import Index
from medr2.ingest.loaders.base import LoadError
from medr2.ingest.loaders.corpora import sniff
from medr2.ingest.loaders.tcmbench import grouped, read_tcmbench, split_options
from medr2.kg.build import open_kg
from medr2.kg.tcm import (Case, CaseMatcher, TermIndex, aspect, case_path, cases_from_kg, definition_match, findings,
                          similarity, tcm_case)
from medr2.terminology.sources import gbt16751_records, gbt16751_terms


@pytest.fixture()
def world(tmp_path):
    return write_world(tmp_path / "tcm")


cli = run_cli


def test_tcmbench_reader_keeps_cases_and_shared_options(world):
    skipped = []
    cvr = list(read_tcmbench(world["cvr"]))
    assert [it.id for it in cvr] == ["CVR-1-1", "CVR-1-2", "CVR-1-3", "CVR-2-1", "CVR-2-2"]
    assert cvr[0].context.startswith("某男，45岁") and cvr[0].stem == "该病例辨证为（  ）。"
    assert cvr[0].answer == "A" and cvr[0].answer_text == "肝火上炎证" and cvr[0].analysis
    assert [len(g) for g in grouped(iter(cvr))] == [3, 2]
    fku = list(read_tcmbench(world["fku"], skipped))
    assert len(fku) == 1 and fku[0].options["D"] == "真虚假实" and fku[0].context == ""
    assert len(skipped) == 1 and "example 2" in skipped[0]
    khc = list(read_tcmbench(world["khc"]))
    assert [it.answer_text for it in khc] == ["麻黄", "石膏"] and khc[1].options == khc[0].options
    assert khc[0].context == ""  # the shared content is the options, not a case


def test_tcmbench_errors_name_the_record(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"type": "FKU", "prefix_prompt": "", "example": [
        {"question": "问？\nA．甲\nB．乙", "answer": ["F"]}]}, ensure_ascii=False), encoding="utf-8")
    with pytest.raises(LoadError, match="example 1: the answer"):
        list(read_tcmbench(bad))
    with pytest.raises(DatasetError, match="example 1"):
        load_questions(str(bad), None)
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"type": "FKU", "prefix_prompt": "", "example": [
        {"question": "问？\nA．甲\nB．乙\nC．丙", "answer": x} for x in (["Ａ", "C"], "A,C", "AC")]},
        ensure_ascii=False), encoding="utf-8")
    assert [it.answer for it in read_tcmbench(good)] == ["AC", "AC", "AC"]


def test_options_in_full_width_letters_or_on_one_line_are_read():
    assert split_options("证属（  ）。\nＡ．肝火上炎\nＢ．肝阳上亢") == ("证属（  ）。", {"A": "肝火上炎", "B": "肝阳上亢"})
    # one line: the marks must run A, B, C in order; a letter inside a word is no mark
    assert split_options("维生素A缺乏可见（  ） A．夜盲 B．口渴 C．便溏") == (
        "维生素A缺乏可见（  ）", {"A": "夜盲", "B": "口渴", "C": "便溏"})
    assert split_options("证属（  ）。 A．肝火上炎") == ("证属（  ）。 A．肝火上炎", {})  # one option is none
    # lines win over inline marks: an option line's text may hold a letter
    assert split_options("问（ ）\nA．B超 检查\nB．CT")[1] == {"A": "B超 检查", "B": "CT"}


def test_eval_reads_tcmbench_files(world):
    qs = load_questions(str(world["cvr"]), None)
    assert [q.dataset for q in qs] == ["tcmbench-CVR"] * 5
    assert qs[1].question.startswith("某男，45岁") and qs[1].question.endswith("其治法为（  ）。")
    assert qs[1].options["B"] == "平肝潜阳" and qs[1].answer == "A"


def test_gbt16751_records_read_definitions_and_sniffing(world):
    recs = list(gbt16751_records(str(world["gbt"])))
    assert [(r.part_type, r.zh) for r in recs] == [("Syndrome", "肝火上炎证"), ("Syndrome", "肝阳上亢证"),
                                                  ("Syndrome", "脾气虚证"), ("Therapy", "清肝泻火法")]
    assert recs[0].alternatives == ["肝火上扰证"] and recs[0].definition.startswith("因肝火炽盛")
    assert list(gbt16751_terms(str(world["gbt"])))[0] == ("5.2.1", "Syndrome", "肝火上炎证",
                                                          ["syndrome/pattern of liver fire flaming up",
                                                           "syndrome of liver fire flaming up",
                                                           "pattern of liver fire flaming up", "肝火上扰证"])
    assert sniff(world["gbt"]) == "gbt16751" and sniff(world["cvr"]) == "tcmbench"


def test_findings_leave_out_demographics_and_the_question():
    f = findings("患者，男，38岁。近日来头痛，目赤，舌质红，舌苔黄，脉弦数。其证型为（  ）。")
    assert f == ["头痛", "目赤", "舌红", "苔黄", "脉弦数"]
    assert findings("舌红苔少脉细数，心烦。") == ["舌红", "苔少", "脉细数", "心烦"]
    assert findings("“至虚有盛候”的病机是（  ）。") == []  # a knowledge question has no findings


@pytest.mark.parametrize("stem, answer, expected", [
    ("该病例辨证为（  ）。", "肝火上炎证", "syndrome"),
    ("其治法为（  ）。", "清肝泻火", "therapy"),
    ("治疗应首选（  ）。", "龙胆泻肝汤", "formula"),
    ("其治法宜选用（  ）。", "小青龙汤", "formula"),
    ("若属肝火上炎证，诊断意义最小的症状是（  ）。", "心悸而烦", "finding"),
    ("其中医诊断是（  ）。", "胎动不安", "disease"),
    ("除主穴外，宜加取（  ）。", "肾俞、太溪", "acupoint"),
    ("“至虚有盛候”的病机是（  ）。", "真虚假实", "syndrome"),
    ("下列哪项是错误的？", "甲", "other"),
])
def test_aspect(stem, answer, expected):
    assert aspect(stem, answer) == expected


def test_similarity_respects_negation():
    assert similarity("口渴", "口不渴") == 0.0
    assert similarity("头痛", "头身疼痛") == 0.8
    assert similarity("脉弦数", "脉弦数或滑") == 1.0


def test_case_path_links_findings_to_the_syndrome_then_therapy_then_formula():
    t = case_path([("辨证为（  ）。", "肝火上炎证"), ("治疗应首选的方剂是（  ）。", "龙胆泻肝汤"),
                   ("其治法为（  ）。", "清肝泻火"), ("诊断意义最小的症状是（  ）。", "心悸")], ["头痛", "脉弦数"])
    assert [(x["head"], x["relation"], x["tail"]) for x in t] == [
        ("头痛", "indicates_syndrome", "肝火上炎证"), ("脉弦数", "indicates_syndrome", "肝火上炎证"),
        ("肝火上炎证", "treated_by", "清肝泻火"), ("清肝泻火", "prescribes", "龙胆泻肝汤"),
        ("诊断意义最小的症状是", "finding", "心悸")]


def test_term_index_definition_match_and_case_matching(world, tmp_path):
    idx_dir = tmp_path / "idx"
    cli("ingest", world["gbt"], "--index", idx_dir)
    idx = Index.open(idx_dir)
    try:
        terms = TermIndex.of_store(idx.store)
    finally:
        idx.close()
    assert terms.lookup("肝火上炎").term == "肝火上炎证" and terms.lookup("肝火上扰证").term == "肝火上炎证"
    assert [e.term for e in terms.lookup_all("清肝泻火，肝阳上亢")] == ["清肝泻火法", "肝阳上亢证"]
    assert terms.lookup("肺阴虚证") is None
    q = findings("患者，男，38岁。头痛，目赤，口苦，耳鸣，舌质红，苔黄，脉弦数。其证型为（  ）。")
    fire, yang = terms.lookup("肝火上炎证"), terms.lookup("肝阳上亢证")
    assert len(definition_match(q, fire)) == 7
    assert definition_match(q, yang) == [("头痛", "头目胀痛"), ("耳鸣", "耳鸣"), ("舌红", "舌红"), ("脉弦数", "脉弦细数")]

    items = list(read_tcmbench(world["cvr"]))
    cases = []
    for g in grouped(iter(items)):
        case, triples, support = tcm_case(g, terms)
        cases.append(Case(case["case_id"], case["question"], case["answer"], case["reasoning"],
                          [t["head"] for t in triples if t["relation"].startswith("indicates_")], triples))
        if g[0].group == "CVR-1":
            assert {t["tail"]: t.get("tail_id") for t in triples}["肝火上炎证"] == "gbt16751:Syndrome:5.2.1"
            assert len(support) == 2  # the syndrome's and the therapy's definitions (no formula entry)
    got = CaseMatcher(cases).match("某男。头痛，目赤，口苦，舌红，脉弦数。辨证为（ ）。", k=2)
    assert got[0]["case_id"] == "tcmbench:CVR-1" and got[0]["finding_score"] > got[1]["finding_score"]
    assert got[0]["nodes"] == {"syndrome": "肝火上炎证", "therapy": "清肝泻火", "formula": "龙胆泻肝汤"}
    assert CaseMatcher(cases).match("某男。头痛，口苦。", k=2, exclude=frozenset({"tcmbench:CVR-1"}))[0][
        "case_id"] == "tcmbench:CVR-2"


def test_kg_cases_reads_tcmbench_and_resumes(world, tmp_path):
    idx = tmp_path / "idx"
    cli("ingest", world["gbt"], world["cvr"], world["fku"], "--index", idx)
    r = cli("kg", "cases", world["cvr"], "--index", idx)
    assert "2 added (2 linked to GB/T 16751 entries)" in r.output
    r = cli("kg", "cases", world["fku"], "--index", idx)
    assert "1 added" in r.output and "empty question, skipped" in r.output
    assert "0 added" in cli("kg", "cases", world["cvr"], "--index", idx).output
    kg = open_kg(idx)
    try:
        cases = {c.case_id: c for c in cases_from_kg(kg)}
    finally:
        kg.close()
    assert set(cases) == {"tcmbench:CVR-1", "tcmbench:CVR-2", "tcmbench:FKU-7"}
    assert cases["tcmbench:CVR-1"].findings == ["头痛", "面赤", "目赤", "口苦", "急躁易怒", "舌红", "苔黄", "脉弦数"]
    assert cases["tcmbench:CVR-1"].reasoning.startswith("头痛面赤")
    assert cases["tcmbench:FKU-7"].findings == [] and cases["tcmbench:FKU-7"].answer == "真虚假实"


def test_kg_cases_without_the_standard_warns(world, tmp_path):
    idx = tmp_path / "idx"
    cli("ingest", world["cvr"], "--index", idx)
    r = cli("kg", "cases", world["cvr"], "--index", idx)
    assert "2 added (0 linked" in r.output and "no GB/T 16751 entries" in r.output


def test_case_paths_block_can_be_compact():
    from medr2.apply.kg_prompt import case_paths_block

    case = {"case_id": "tcmbench:CVR-1", "matched": [{"finding": "耳鸣", "case_finding": "耳鸣如潮", "sim": 1.0}],
            "nodes": {"syndrome": "肝阳上亢证"}, "question": "q", "answer": "肝阳上亢证", "reasoning": "肝阳亢于上。",
            "path": [{"head": "耳鸣如潮", "relation": "indicates_syndrome", "tail": "肝阳上亢证"},
                     {"head": "腰酸", "relation": "indicates_syndrome", "tail": "肝阳上亢证"}]}
    full = case_paths_block([case])
    assert "耳鸣如潮*, 腰酸" in full and "reasoning: 肝阳亢于上。" in full
    short = case_paths_block([case], reasoning_chars=0, shared_only=True)
    assert "findings: 耳鸣如潮*" in short and "腰酸" not in short and "reasoning" not in short
    assert "path: 辨证 肝阳上亢证" in short and len(short) < len(full)
