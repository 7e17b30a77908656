"""The two metadata stores on both engines: the index store (SQLiteStore / PGStore) and the
graph store (KGStore / PGKGStore) run the same tests; then what only PostgreSQL has (namespaces,
advisory-lock serialisation across sessions, autocommit reads, connection errors), the index
directory's backend.json, and a knowledge graph built from the demo index on both engines."""

from __future__ import annotations

import json
import threading
import time

import pytest

from medr2.store.sqlbase import SchemaVersionError
from medr2.index.store import SQLiteStore
from medr2.kg.store import KGStore, triple_id
from medr2.schema import Document, DocumentMeta, Passage, Section, SourceType

ENGINES = ["sqlite", "postgres"]


@pytest.fixture(params=ENGINES)
def engine(request):
    return request.param


@pytest.fixture
def opener(engine, tmp_path, request):
    """``opener(kind)`` opens another connection to this test's store (kind: "index" or "kg")."""
    opened = []
    if engine == "postgres":
        from medr2.index.store import PGStore
        from medr2.kg.store import PGKGStore

        uri, ns = request.getfixturevalue("pg_uri"), request.getfixturevalue("pg_namespace")
        make = {"index": lambda: PGStore(uri, ns), "kg": lambda: PGKGStore(uri, ns + "_kg")}
    else:
        make = {"index": lambda: SQLiteStore(tmp_path / "store.sqlite"), "kg": lambda: KGStore(tmp_path / "kg.sqlite")}

    def open_(kind: str):
        s = make[kind]()
        opened.append(s)
        return s

    yield open_
    for s in opened:
        s.close()


@pytest.fixture
def store(opener):
    return opener("index")


@pytest.fixture
def kg(opener):
    return opener("kg")


def doc(doc_id="d1", title="Guide 50% off? ok", year=2020, st=SourceType.guideline, lang="en"):
    return Document(doc_id=doc_id, title=title, source_type=st,
                    meta=DocumentMeta(year=year, language=lang, publication_types=["Practice Guideline"]),
                    sections=[Section(title="Therapy", text="Use X.", children=[Section(title="Dose", text="10 mg")])])


def passages_of(d: Document, n=3):
    return [Passage(passage_id=f"p-{d.doc_id}-{i}", doc_id=d.doc_id, text=f"text {i} of {d.doc_id} with % and ?",
                    heading_path=["Therapy", "Dose"][: i % 3], start=10 * i, end=10 * i + 9, language=d.meta.language,
                    unit=i, ordinal=i) for i in range(n)]


def add(store, d: Document, n=3) -> list[int]:
    ps = passages_of(d, n)
    start = store.next_rowid()
    rowids = list(range(start, start + n))
    with store.transaction():
        store.put_document(d, "hash-" + d.doc_id, n)
        store.put_passages([(r, p, d.source_type.value, d.meta.year) for r, p in zip(rowids, ps)])
    return rowids


# -- index store -----------------------------------------------------------------------------------
def test_documents_and_passages_round_trip(store):
    d = doc()
    assert store.next_rowid() == 1 and store.doc_hash("d1") is None and not store.has_document("d1")
    rowids = add(store, d)
    assert rowids == [1, 2, 3] and store.next_rowid() == 4
    assert store.doc_hash("d1") == "hash-d1" and store.has_document("d1")
    assert store.get_document("d1") == d
    assert store.doc_passages("d1") == passages_of(d)
    got = store.passages([3, 1, 99])
    assert sorted(got) == [1, 3]
    p = got[3]
    assert (p["passage_id"], p["doc_id"], p["text"], p["heading_path"]) == ("p-d1-2", "d1", "text 2 of d1 with % and ?",
                                                                           ["Therapy", "Dose"])
    assert (p["start"], p["end"], p["language"], p["source_type"], p["year"], p["title"]) == \
        (20, 29, "en", "guideline", 2020, "Guide 50% off? ok")
    assert p["publication_types"] == ["Practice Guideline"]
    assert store.rowid_of("p-d1-1") == 2 and store.rowid_of("nope") is None
    assert sorted(store.live_rowids().tolist()) == [1, 2, 3]
    # a new version of the document replaces the row (upsert)
    with store.transaction():
        store.put_document(doc(title="New"), "hash-2", 3)
    assert store.get_document("d1").title == "New" and store.doc_hash("d1") == "hash-2"
    assert store.counts()["documents"] == 1


def test_next_rowid_never_reuses_deleted_ids(store):
    add(store, doc("a"))
    with store.transaction():
        assert sorted(store.delete_documents(["a"])) == [1, 2, 3]
    assert store.next_rowid() == 4


def test_delete_documents(store):
    ra, rb = add(store, doc("a")), add(store, doc("b"))
    with store.transaction():
        store.link_file_docs("f.json", ["a", "b"])
        assert sorted(store.delete_documents(["a", "zz"])) == ra
        assert store.delete_documents(["b"], keep_links=True) == rb
    assert not store.has_document("a") and store.doc_passages("a") == [] and store.passages(ra) == {}
    assert store.file_doc_ids("f.json") == {"b"}  # kept: a new version of b is coming
    assert store.counts()["passages"] == 0


def test_filter_rowids(store):
    add(store, doc("g", year=2010, st=SourceType.guideline, lang="en"), 2)
    add(store, doc("r", year=2020, st=SourceType.paper, lang="zh"), 2)
    add(store, doc("n", year=None, st=SourceType.book, lang="en"), 1)
    f = lambda **kw: sorted(store.filter_rowids(**kw).tolist())  # noqa: E731
    assert f() == [1, 2, 3, 4, 5]
    assert f(source_types=["paper"]) == [3, 4]
    assert f(source_types=["paper", "guideline"]) == [1, 2, 3, 4]
    assert f(languages=["en"]) == [1, 2, 5]
    assert f(year_min=2015) == [3, 4] and f(year_max=2015) == [1, 2] and f(year_min=2010, year_max=2020) == [1, 2, 3, 4]
    assert f(source_types=["guideline"], languages=["zh"]) == []


def test_files_bookkeeping(store):
    assert store.file_state("a.pdf") is None
    with store.transaction():
        store.mark_file("a.pdf", "sha1", 10, "ok", 2, 0)
        store.mark_file("b.pdf", "sha2", 20, "failed", 0, 1)
        store.link_file_docs("a.pdf", ["d1", "d2", "d1"])  # a repeated link is ignored
        store.link_file_docs("b.pdf", ["d2"])
    assert store.file_state("a.pdf") == ("sha1", "ok")
    store.mark_file("a.pdf", "sha3", 11, "partial", 1, 1)  # outside a transaction: autocommit
    assert store.file_state("a.pdf") == ("sha3", "partial")
    assert store.file_doc_ids("a.pdf") == {"d1", "d2"}
    assert store.linked_elsewhere("d2", "a.pdf") and not store.linked_elsewhere("d1", "a.pdf")
    store.unlink_file_docs("a.pdf", ["d2"])
    assert store.file_doc_ids("a.pdf") == {"d1"} and not store.linked_elsewhere("d2", "b.pdf")
    assert store.counts()["files"] == {"partial": 1, "failed": 1}


def test_segments_list(store):
    assert store.segments() == []
    with store.transaction():
        store.add_segment("s2", 10, "flat")
        time.sleep(0.01)
        store.add_segment("s1", 5, "hnsw")
    assert store.segments() == ["s2", "s1"]  # creation order
    store.remove_segments(["s2", "missing"])
    assert store.segments() == ["s1"]


def test_meta_and_schema_version(store, opener):
    assert store.get_meta("config") is None and store.get_meta("config", "x") == "x"
    store.set_meta("config", '{"a": "100%"}')
    store.set_meta("config", '{"a": "50%?"}')
    assert store.get_meta("config") == '{"a": "50%?"}'
    assert store.schema_version() == store.SCHEMA_VERSION == 1
    assert opener("index").get_meta("config") == '{"a": "50%?"}'  # another connection, same store


def test_newer_schema_version_is_refused(opener):
    s = opener("index")
    s.set_meta("schema_version", "99")
    with pytest.raises(SchemaVersionError, match="schema version 99.*upgrade medr2"):
        opener("index")


def test_migrations_run_once_on_both_engines(opener, monkeypatch):
    from medr2.index.store import StoreSQL

    s = opener("index")
    s.set_meta("schema_version", "0")
    s.close()
    monkeypatch.setitem(StoreSQL.MIGRATIONS, 1, ("ALTER TABLE segments ADD COLUMN note TEXT",))
    s = opener("index")
    assert s.schema_version() == 1
    s.db.execute("UPDATE segments SET note=? WHERE name=?", ("x", "none"))  # the column exists
    opener("index")  # at version 1: the migration does not run again (it would fail: column exists)


def test_counts(store):
    add(store, doc("g", st=SourceType.guideline, lang="en"), 2)
    add(store, doc("r", st=SourceType.paper, lang="zh"), 3)
    store.mark_file("a", "s", 1, "ok", 2, 0)
    c = store.counts()
    assert c["documents"] == 2 and c["passages"] == 5
    assert c["by_source_type"] == {"guideline": {"documents": 1, "passages": 2}, "paper": {"documents": 1, "passages": 3}}
    assert c["languages"] == {"en": 2, "zh": 3} and c["files"] == {"ok": 1}


def test_transaction_rolls_back_on_error(store, opener):
    other = opener("index")
    with pytest.raises(RuntimeError, match="boom"):
        with store.transaction():
            store.put_document(doc("a"), "h", 0)
            store.set_meta("k", "v")
            assert store.has_document("a")
            assert not other.has_document("a")  # not committed yet: invisible to another connection
            raise RuntimeError("boom")
    assert not store.has_document("a") and store.get_meta("k") is None
    # a failing statement rolls back the whole transaction too, and the store stays usable
    with pytest.raises(Exception):
        with store.transaction():
            store.put_document(doc("b"), "h", 0)
            store.add_segment("s", 1, "flat")
            store.add_segment("s", 1, "flat")  # primary key violation
    assert not store.has_document("b") and store.segments() == []
    add(store, doc("c"))
    assert other.has_document("c")


def test_nested_transactions_join_the_outer_one(store, opener):
    other = opener("index")
    with store.transaction():
        store.set_meta("a", "1")
        with store.transaction():
            store.set_meta("b", "2")
        assert other.get_meta("b") is None  # the inner block did not commit
    assert other.get_meta("a") == "1" and other.get_meta("b") == "2"
    with pytest.raises(KeyError):
        with store.transaction():
            store.set_meta("c", "3")
            with store.transaction():
                store.set_meta("d", "4")
                raise KeyError("inner")
    assert store.get_meta("c") is None and store.get_meta("d") is None


# -- graph store -----------------------------------------------------------------------------------
def src(text_id, doc_id="d1", extractor="rules", **kw):
    return {"text_id": text_id, "doc_id": doc_id, "extractor": extractor, "head_surface": "Metformin",
            "tail_surface": "T2D", "relation_surface": "treats", "head_level": "exact", "tail_level": "synonym",
            "relation_level": "exact", "attrs": kw or {"strength": "strong", "pct": "50%"}}


def test_kg_sources_triples_and_entities(kg):
    t1 = triple_id("drug:metformin", "treats", "dis:t2d")
    t2 = triple_id("drug:insulin", "treats", "dis:t2d")
    kg.put_entity("drug:metformin", "metformin", None)
    kg.put_entity("drug:metformin", "metformin", "Drug")  # a type fills a missing one
    kg.put_entity("drug:metformin", "metformin", "Other")  # ... and is not overwritten
    kg.put_entity("dis:t2d", "type 2 diabetes", "Disease")
    with kg.transaction():
        assert kg.add_source(t1, "drug:metformin", "treats", "dis:t2d", src("p1"))
        assert kg.add_source(t1, "drug:metformin", "treats", "dis:t2d", src("p2", doc_id="d2"))
        assert kg.add_source(t1, "drug:metformin", "treats", "dis:t2d", src("p1", extractor="llm"))
        assert kg.add_source(t1, "drug:metformin", "treats", "dis:t2d", src("p1", strength="weak"))  # replaces
        assert kg.add_source(t2, "drug:insulin", "treats", "dis:t2d", src("p3", doc_id="d2"))
    assert kg.entity("drug:metformin") == {"entity_id": "drug:metformin", "name": "metformin", "type": "Drug"}
    assert set(kg.entities(["dis:t2d", "drug:metformin", "x"])) == {"dis:t2d", "drug:metformin"}
    t = kg.triple(t1)
    assert (t["head_id"], t["relation"], t["tail_id"], t["human"], t["extractors"]) == \
        ("drug:metformin", "treats", "dis:t2d", None, [])
    srcs = kg.sources(t1)
    assert [(s["text_id"], s["extractor"]) for s in srcs] == [("p1", "llm"), ("p1", "rules"), ("p2", "rules")]
    assert srcs[1]["attrs"] == {"strength": "weak"} and srcs[0]["attrs"] == {"strength": "strong", "pct": "50%"}
    assert kg.text_ids(t1) == ["p1", "p2"]
    assert {k: sorted(v) for k, v in kg.triples_of_texts(["p1", "p3", "none"]).items()} == {"p1": [t1, t1], "p3": [t2]}
    assert sorted(t["triple_id"] for t in kg.triples_by_ids([t1, t2, "tnone"])) == sorted([t1, t2])
    assert sorted(t["triple_id"] for t in kg.triples_of_entities(["dis:t2d"])) == sorted([t1, t2])
    assert [t["triple_id"] for t in kg.triples_of_entities(["drug:insulin"])] == [t2]
    assert sorted(kg.all_triple_ids()) == [t["triple_id"] for t in kg.iter_triples()] == sorted([t1, t2])
    assert kg.reverse_support("dis:t2d", "treats", "drug:metformin") == 2  # t1 read as the reverse of (t2d, metformin)
    assert kg.reverse_support("drug:metformin", "treats", "dis:t2d") == 0
    kg.set_quality(t1, {"schema_conf": 0.75, "evid_score": 0.5, "q": 0.625, "tier": "extended", "n_passages": 2,
                        "extractors": ["llm", "rules"], "triple_id": "ignored"})
    t = kg.triple(t1)
    assert (t["schema_conf"], t["q"], t["tier"], t["n_passages"], t["extractors"]) == (0.75, 0.625, "extended", 2,
                                                                                   ["llm", "rules"])
    kg.set_human(t1, 1.0)
    assert kg.triple(t1)["human"] == 1.0


def test_kg_documents_review_reject_and_removal(kg):
    t1 = triple_id("a", "treats", "b")
    t2 = triple_id("c", "causes", "b")
    with kg.transaction():
        kg.add_source(t1, "a", "treats", "b", src("p1", doc_id="d1"))
        kg.add_source(t1, "a", "treats", "b", src("p2", doc_id="d2", extractor="llm"))
        kg.add_source(t2, "c", "causes", "b", src("p3", doc_id="d2"))
        kg.mark_doc("d1", "h1", ["rules"])
        kg.mark_doc("d2", "h2", ["rules", "llm"])
        kg.mark_doc("d2", "h2b", ["rules", "llm"])  # replaces
    assert kg.docs() == {"d1": ("h1", ["rules"]), "d2": ("h2b", ["llm", "rules"])}
    assert kg.doc_extractors(["d2", "d2", "x"]) == {"d2": ["llm", "rules"]}
    ids = [kg.log_review(t1, "confirm", "ann", "ok 100%", {"q": 0.5}, {"q": 0.9}),
           kg.log_review(t2, "confirm", "bob", "", None, None)]
    assert ids[1] > ids[0] >= 1
    assert [(r["id"], r["triple_id"], r["reviewer"], r["note"]) for r in kg.reviews(t1)] == [(ids[0], t1, "ann", "ok 100%")]
    assert len(kg.reviews()) == 2
    # only the llm extractor's contribution of d2 goes: t1 keeps its d1 source
    assert kg.remove_doc("d2", ["llm"]) == {t1}
    assert kg.text_ids(t1) == ["p1"] and kg.triple(t2) is not None
    # all of d2: t2 loses its only source and goes
    assert kg.remove_doc("d2") == {t2}
    assert kg.triple(t2) is None and "d2" not in kg.docs()
    with kg.transaction():
        kg.reject(t1)
    assert kg.triple(t1) is None and kg.sources(t1) == [] and kg.is_rejected(t1)
    assert not kg.add_source(t1, "a", "treats", "b", src("p9"))  # a rejected triple does not come back
    assert kg.triple(t1) is None
    # drop_orphans removes triples without a source only
    t3 = triple_id("x", "treats", "y")
    kg.add_source(t3, "x", "treats", "y", src("p4"))
    kg.db.execute("DELETE FROM sources WHERE triple_id=?", (t3,))
    assert kg.drop_orphans([t3, t1]) == [t3, t1] and kg.triple(t3) is None
    c = kg.counts()
    assert (c["triples"], c["reviews"], c["rejected"], c["documents"]) == (0, 2, 1, 1)


def test_kg_schema_tables_sort_like_sqlite(kg):
    for rel in ["treats", "Zeta", "_under", "b-rel", "ärzt"]:
        kg.put_schema({"relation": rel, "domain": ["Drug"], "range": ["Disease"], "symmetric": rel == "treats",
                       "polarity": 1, "support": 3})
    kg.put_schema({"relation": "treats", "domain": ["Drug", "Procedure"], "range": ["Disease"], "symmetric": True,
                   "source": "builtin"})
    rows = kg.schema_rows()
    assert [r["relation"] for r in rows] == sorted(["treats", "Zeta", "_under", "b-rel", "ärzt"])  # byte order
    treats = [r for r in rows if r["relation"] == "treats"][0]
    assert treats["domain"] == ["Drug", "Procedure"] and treats["symmetric"] is True and treats["source"] == "builtin"
    kg.put_relation_synonym("is treated by", "treats", 0.8, "suggested", {"jaccard": 0.5})
    kg.put_relation_synonym("is treated by", "treats", 0.9, "confirmed", {})
    assert kg.relation_synonyms() == {"is treated by": {"relation": "treats", "score": 0.9, "status": "confirmed",
                                                        "evidence": {}}}
    kg.put_inverse("treats", "treated_by", 0.7, "suggested")
    kg.put_inverse("treats", "treated_by", 0.8, "confirmed")
    assert kg.inverse_pairs() == [{"a": "treats", "b": "treated_by", "score": 0.8, "status": "confirmed"}]


def test_kg_macro_graph(kg):
    t1 = triple_id("drug:m", "treats", "dis:d")
    kg.put_entity("drug:m", "metformin", "Drug")
    kg.add_source(t1, "drug:m", "treats", "dis:d", src("p1"))
    kg.add_source(t1, "drug:m", "treats", "dis:d", src("p2"))
    nodes = [{"node_id": "m0", "parent_id": None, "title": "Diabetes Guide", "depth": 0, "ord": 0, "text_ids": []},
             {"node_id": "m2", "parent_id": "m0", "title": "Follow-up", "depth": 1, "ord": 2, "text_ids": ["p3"]},
             {"node_id": "m1", "parent_id": "m0", "title": "THERAPY 100%", "depth": 1, "ord": 1,
              "text_ids": ["p1", "p2", "p1"]}]
    kg.put_macro("d1", nodes)
    kg.put_macro("d1", nodes)  # again: replaces
    assert [c["node_id"] for c in kg.macro_children("m0")] == ["m1", "m2"]
    assert sorted(kg.macro_texts("m1")) == ["p1", "p2"]
    got = kg.macro_nodes_of_texts(["p1", "p3"])
    assert [n["node_id"] for n in got["p1"]] == ["m1"] and got["p1"][0]["parent_id"] == "m0"
    assert got["p3"][0]["title"] == "Follow-up"
    ents = kg.entities_of_macro("m1")
    assert {e["entity_id"]: e["passages"] for e in ents} == {"drug:m": 2, "dis:d": 2}
    assert [e for e in ents if e["entity_id"] == "drug:m"][0]["name"] == "metformin"
    assert kg.macro_of_entity("dis:d") == [{"node_id": "m1", "doc_id": "d1", "title": "THERAPY 100%", "depth": 1,
                                            "passages": 2}]
    # titles match ASCII letters in any case, as SQLite's LIKE; % in the text is a wildcard there too
    assert [n["node_id"] for n in kg.macro_nodes_titled("therapy")] == ["m1"]
    assert [n["node_id"] for n in kg.macro_nodes_titled("100%")] == ["m1"]
    assert sorted(n["node_id"] for n in kg.macro_nodes_titled("")) == ["m0", "m1", "m2"]
    assert kg.counts()["macro_nodes"] == 3
    assert kg.remove_doc("d1") == {t1}
    assert kg.counts()["macro_nodes"] == 0 and kg.macro_texts("m1") == []


def test_kg_cases(kg):
    case = {"case_id": "c1", "question": "Q?", "answer": "A", "reasoning": "R 50%", "source": "s"}
    chain = [{"head": "metformin", "relation": "treats", "tail": "t2d", "head_id": "drug:m", "tail_id": "dis:d",
              "aligned_triple": "t1", "align_score": 0.9},
             {"head": "x", "relation": "causes", "tail": "y"}]
    assert not kg.has_case("c1")
    with kg.transaction():
        kg.put_case(case, chain, [("p1", 0.2), ("p2", 0.9)])
        kg.put_case(dict(case, answer="B"), chain, [("p1", 0.3), ("p2", 0.9)])  # again: replaces
        kg.put_case({"case_id": "c0", "question": "q", "answer": "a", "reasoning": "r"}, [], [])
    assert kg.has_case("c1")
    c = kg.case("c1")
    assert (c["answer"], c["reasoning"], c["source"], c["method"]) == ("B", "R 50%", "s", "")
    assert c["support"] == [{"text_id": "p2", "score": 0.9}, {"text_id": "p1", "score": 0.3}]
    rows = kg.case_triples()
    assert [(r["case_id"], r["ord"], r["head"]) for r in rows] == [("c1", 0, "metformin"), ("c1", 1, "x")]
    assert rows[0]["id"] < rows[1]["id"] and rows[0]["align_score"] == 0.9 and rows[1]["head_id"] is None
    assert [c["case_id"] for c in kg.cases()] == ["c0", "c1"]
    assert kg.case("none") is None
    c = kg.counts()
    assert (c["cases"], c["case_triples"]) == (2, 2)


def test_kg_counts(kg):
    kg.put_entity("a", "A", "Drug")
    with kg.transaction():
        kg.add_source(triple_id("a", "treats", "b"), "a", "treats", "b", src("p1"))
        kg.add_source(triple_id("a", "causes", "c"), "a", "causes", "c", src("p1", extractor="llm"))
        kg.add_source(triple_id("a", "causes", "c"), "a", "causes", "c", src("p2"))
        kg.set_quality(triple_id("a", "treats", "b"), {"tier": "core"})
        kg.mark_doc("d1", "h", ["rules"])
    c = kg.counts()
    assert {k: c[k] for k in ("triples", "entities", "sources", "documents", "passages", "reviews", "rejected")} == \
        {"triples": 2, "entities": 3, "sources": 3, "documents": 1, "passages": 2, "reviews": 0, "rejected": 0}
    assert c["tiers"] == {"core": 1, None: 1}
    assert c["relations"] == {"treats": 1, "causes": 1} and c["extractors"] == {"rules": 2, "llm": 1}


def test_concurrent_read_modify_write_loses_nothing(opener):
    """Two connections (as two reviewers' processes) update the same triple and the same meta
    value in transactions, read-modify-write with a pause in between: every update survives."""
    first = opener("kg")
    tid = triple_id("a", "treats", "b")
    first.add_source(tid, "a", "treats", "b", src("p1"))
    first.set_quality(tid, {"n_passages": 0})
    n = 15
    errors = []

    def reviewer(name: str) -> None:
        kg = opener("kg")
        try:
            for i in range(n):
                with kg.transaction():
                    done = json.loads(kg.get_meta("confirmed_synonyms", "{}"))
                    count = kg.triple(tid)["n_passages"]
                    time.sleep(0.002)  # another reviewer would slip in here without the write lock
                    done[f"{name}-{i}"] = tid
                    kg.set_meta("confirmed_synonyms", json.dumps(done))
                    kg.set_quality(tid, {"n_passages": count + 1})
                    kg.log_review(tid, "confirm", name, "", None, None)
        except Exception as e:  # reported below: an exception in a thread would pass silently
            errors.append(e)

    threads = [threading.Thread(target=reviewer, args=(w,)) for w in ("ann", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert first.triple(tid)["n_passages"] == 2 * n
    assert len(json.loads(first.get_meta("confirmed_synonyms"))) == 2 * n
    assert len(first.reviews(tid)) == 2 * n


def test_one_store_shared_by_threads(opener):
    """The web service's pattern: one store object, readers in several threads while another
    thread writes in transactions; readers see committed states only."""
    kg = opener("kg")
    stop, errors, seen = threading.Event(), [], []

    def read() -> None:
        try:
            while not stop.is_set():
                kg.counts()
                seen.append(kg.db.execute("SELECT (SELECT COUNT(*) FROM triples), (SELECT COUNT(*) FROM sources)"
                                          ).fetchone())  # one statement: one snapshot
        except Exception as e:
            errors.append(e)

    readers = [threading.Thread(target=read) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        for i in range(20):
            with kg.transaction():
                tid = triple_id(f"h{i}", "treats", "t")
                kg.add_source(tid, f"h{i}", "treats", "t", src(f"p{i}"))
                kg.add_source(tid, f"h{i}", "treats", "t", src(f"q{i}"))
    finally:
        stop.set()
        for t in readers:
            t.join(60)
    assert not errors and seen
    assert kg.counts()["triples"] == 20
    if kg.path is None:  # PostgreSQL: the readers' connection is not the writer's, so only commits are visible
        assert all(s == 2 * t for t, s in seen)


# -- PostgreSQL only -----------------------------------------------------------------------------------
def test_pg_namespaces_keep_stores_apart(pg_uri, pg_namespace):
    from medr2.index.store import PGStore
    from medr2.kg.store import PGKGStore
    from medr2.store.postgres import drop_namespace, namespace_exists

    other = pg_namespace + "_b"
    a, k, b = PGStore(pg_uri, pg_namespace), PGKGStore(pg_uri, pg_namespace + "_kg"), PGStore(pg_uri, other)
    try:
        a.set_meta("who", "index a")
        k.set_meta("who", "graph of a")
        assert b.get_meta("who") is None and a.get_meta("who") == "index a" and k.get_meta("who") == "graph of a"
        add(a, doc("x"))
        assert a.counts()["documents"] == 1 and b.counts()["documents"] == 0
        assert namespace_exists(pg_uri, other)
    finally:
        for s in (a, k, b):
            s.close()
        drop_namespace(pg_uri, other)
    assert not namespace_exists(pg_uri, other)
    drop_namespace(pg_uri, other)  # absent: nothing to do


def test_pg_reads_do_not_leave_sessions_idle_in_transaction(pg_uri, pg_namespace):
    from medr2.index.store import PGStore
    from medr2.store.postgres import _connect

    s = PGStore(pg_uri, pg_namespace)
    watch = _connect(pg_uri, None)
    try:
        add(s, doc("a"))
        s.counts(), s.passages([1, 2]), s.get_meta("x")
        with s.transaction():
            s.set_meta("x", "1")
        s.get_document("a")
        states = [r[0] for r in watch.execute(
            "SELECT state FROM pg_stat_activity WHERE application_name='medr2' AND pid <> pg_backend_pid()")]
        assert states and all(st == "idle" for st in states), states
    finally:
        s.close()
        watch.close()


def test_pg_transactions_serialise_across_sessions(pg_uri, pg_namespace):
    """A second session's transaction waits for the first one's commit (the namespace's advisory lock)."""
    from medr2.index.store import PGStore

    a, b = PGStore(pg_uri, pg_namespace), PGStore(pg_uri, pg_namespace)
    order = []
    inside = threading.Event()

    def second() -> None:
        inside.wait(10)
        with b.transaction():
            order.append("b")

    t = threading.Thread(target=second)
    t.start()
    try:
        with a.transaction():
            inside.set()
            time.sleep(0.3)
            order.append("a")
        t.join(10)
        assert order == ["a", "b"]
    finally:
        a.close()
        b.close()


def test_pg_connection_error_names_the_uri_not_the_password():
    from medr2.index.store import PGStore
    from medr2.store.postgres import PGConnectionError

    with pytest.raises(PGConnectionError) as e:
        PGStore("postgresql://medr2:s3cret@127.0.0.1:1/medr2?connect_timeout=3", "x")
    msg = str(e.value)
    assert "postgresql://medr2:***@127.0.0.1:1/medr2" in msg and "s3cret" not in msg
    assert "PGPASSWORD" in msg and "running" in msg
    assert isinstance(e.value, OSError)  # reported like other I/O problems by the index and the CLI


def test_pg_bad_namespace():
    from medr2.index.store import PGStore

    with pytest.raises(ValueError, match="lower-case letters"):
        PGStore("postgresql://nowhere/db", 'bad"name')


def test_pg_sql_translation():
    from medr2.store.postgres import pg_query, pg_schema
    from medr2.index.store import StoreSQL

    assert pg_query("SELECT 'a?b%' , ? FROM t WHERE x LIKE ?") == "SELECT 'a?b%%' , %s FROM t WHERE x LIKE %s"
    ddl = " ".join(pg_schema(StoreSQL.SCHEMA))
    assert "REAL" not in ddl and "INTEGER" not in ddl and '"end" BIGINT' in ddl and 'TEXT COLLATE "C"' in ddl
    assert "GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY" in " ".join(pg_schema(KGStore.SCHEMA))


# -- the index directory's backend.json ---------------------------------------------------------------
def test_read_backend_spec(tmp_path):
    from medr2.store.layout import BackendError, read_backend_spec

    assert read_backend_spec(tmp_path) == {}
    f = tmp_path / "backend.json"
    spec = {"store": "postgres", "postgres_uri": "postgresql://u@h/db", "namespace": "idx1", "vectors": "milvus"}
    f.write_text(json.dumps(spec))
    assert read_backend_spec(tmp_path) == spec
    f.write_text('{"vectors": "milvus", "store": "sqlite"}')
    assert read_backend_spec(tmp_path) == {"vectors": "milvus", "store": "sqlite"}
    for bad, why in [("{nope", "not readable JSON"), ("[1]", "JSON object"), ('{"store": "mysql"}', "sqlite.*postgres"),
                     ('{"store": "postgres", "namespace": "a"}', "postgres_uri"),
                     ('{"store": "postgres", "postgres_uri": "postgresql://h/d", "namespace": "A-b"}', "namespace")]:
        f.write_text(bad)
        with pytest.raises(BackendError, match=why) as e:
            read_backend_spec(tmp_path)
        assert str(f) in str(e.value)


def test_open_kg_follows_backend_json(tmp_path, pg_uri, pg_namespace):
    from medr2.kg.store import PGKGStore
    from medr2.store.layout import is_index_dir
    from medr2.kg.build import has_kg, open_existing_kg, open_kg, withdraw_documents

    idx = tmp_path / "index"
    idx.mkdir()
    assert not is_index_dir(idx)
    with pytest.raises(FileNotFoundError, match="not a medr2 index"):
        open_kg(idx)
    (idx / "backend.json").write_text(json.dumps({"store": "postgres", "postgres_uri": pg_uri,
                                                  "namespace": pg_namespace}))
    assert is_index_dir(idx) and not has_kg(idx) and open_existing_kg(idx) is None
    assert withdraw_documents(idx, ["d1"]) is None
    kg = open_kg(idx)
    try:
        assert isinstance(kg, PGKGStore) and kg.namespace == pg_namespace + "_kg"
        kg.add_source(triple_id("a", "treats", "b"), "a", "treats", "b", src("p1", doc_id="d1"))
        kg.mark_doc("d1", "h", ["rules"])
    finally:
        kg.close()
    assert has_kg(idx) and not (idx / "kg.sqlite").exists()
    assert withdraw_documents(idx, ["d1"]) == {"triples_removed": 1, "triples_rescored": 0}


# -- end to end: the demo corpus in an index whose store is PostgreSQL ------------------------------------
def _cli(*args):
    from click.testing import CliRunner

    from medr2.cli import main

    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output + repr(r.exception)
    return r.stdout


def test_demo_index_and_graph_on_postgres(demo_index_dir, tmp_path, pg_uri, monkeypatch):
    """The demo corpus ingested with index.store = "postgres" (Index.open, ingestion), its graph
    built by ``medr2 kg build``, read by the CLI and the API, a document removed: documents,
    passages, search hits and every triple's quality equal the embedded index's."""
    from fastapi.testclient import TestClient

    from medr2.config import Config, KGConfig
    from medr2.demo import CORPUS
    from medr2.index.index import Index
    from medr2.index.store import PGStore
    from medr2.kg.store import PGKGStore
    from medr2.store.layout import read_backend_spec
    from medr2.store.postgres import drop_namespace
    from medr2.ingest.pipeline import ingest
    from medr2.kg.build import KGBuilder, library_for, make_extractors, sync_index
    from medr2.serve.app import create_app

    from psycopg.conninfo import conninfo_to_dict

    password = conninfo_to_dict(pg_uri).get("password")
    if password:  # backend.json keeps the URI without its password: later opens read PGPASSWORD
        monkeypatch.setenv("PGPASSWORD", str(password))
    cfg = Config()
    cfg.index.store, cfg.index.store_uri = "postgres", pg_uri
    path = tmp_path / "pg-index"
    with Index.open(path, cfg, create=True, writable=True) as idx:
        assert isinstance(idx.store, PGStore)
        assert ingest(idx, [CORPUS], progress=False).status == "ok"
    spec = read_backend_spec(path)
    assert spec["store"] == "postgres" and not (path / "store.sqlite").exists()
    ns = spec["namespace"]
    try:
        lite, pg = SQLiteStore(demo_index_dir / "store.sqlite"), PGStore(pg_uri, ns)
        try:
            ids = [d for (d,) in lite.db.execute("SELECT doc_id FROM documents ORDER BY doc_id")]
            assert ids == [d for (d,) in pg.db.execute("SELECT doc_id FROM documents ORDER BY doc_id")]
            assert len(ids) == 14
            for d in ids:
                assert pg.get_document(d) == lite.get_document(d) and pg.doc_passages(d) == lite.doc_passages(d)
            # the embedded index's graph, built here into a scratch file (the shared demo index stays as it is)
            kc = KGConfig()
            lib = library_for(kc)
            want = KGStore(tmp_path / "kg.sqlite")
            sync_index(lite, KGBuilder(want, lib, make_extractors(["rules", "structured"], lib), kc))
            expected = [{k: v for k, v in t.items() if k != "updated"} for t in want.iter_triples()]
            want.close()
        finally:
            lite.close()
            pg.close()
        report = json.loads(_cli("kg", "build", "--index", path, "--json", "--no-progress"))
        assert report["documents_added"] == 14 and report["counts"]["triples"] == len(expected) > 10
        kg = PGKGStore(pg_uri, ns + "_kg")
        try:
            assert [{k: v for k, v in t.items() if k != "updated"} for t in kg.iter_triples()] == expected
        finally:
            kg.close()
        query = "metformin dose in chronic kidney disease"
        hits = [json.loads(_cli("search", query, "--index", p, "--json", "--k", 5))["hits"] for p in (path, demo_index_dir)]
        assert [h["passage_id"] for h in hits[0]] == [h["passage_id"] for h in hits[1]]
        stats = json.loads(_cli("index", "stats", "--index", path, "--json"))
        assert stats["documents"] == 14 and stats["disk_bytes"]["store"] == 0  # the store is on the server
        # the API: health, documents, a passage with its triples, the review queue, a review
        monkeypatch.setenv("MEDR2_API_TOKEN", "tok")
        with TestClient(create_app(path, None, generator="none", scorer="none", trusted_hosts=["testserver"])) as c:
            h = c.get("/health").json()
            assert h["documents"] == 14 and h["kg"] is True
            assert c.get("/documents?limit=3").json()["total"] == 14
            pid = c.post("/search", json={"query": query, "k": 1}).json()["hits"][0]["passage_id"]
            assert "triples" in c.get(f"/passages/{pid}").json()
            queue = c.get("/kg/review-queue").json()["items"]
            target = (queue[0] if queue else expected[0])["triple_id"]
            r = c.post(f"/kg/triples/{target}/review", json={"action": "confirm", "note": "ok"},
                       headers={"Authorization": "Bearer tok"})
            assert r.status_code == 200, r.text
            assert c.get(f"/kg/triples/{target}").json()["human"] == 1.0
        # removing a document withdraws its triples from the graph on the server
        out = _cli("doc", "remove", ids[0], "--index", path)
        assert "removed 1 document(s)" in out and "knowledge graph:" in out
        kg = PGKGStore(pg_uri, ns + "_kg")
        try:
            assert ids[0] not in kg.docs()
        finally:
            kg.close()
    finally:
        drop_namespace(pg_uri, ns)
        drop_namespace(pg_uri, ns + "_kg")
