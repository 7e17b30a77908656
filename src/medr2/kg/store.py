"""Knowledge-graph storage: :class:`GraphSQL` holds the tables and methods, :class:`KGStore` runs
them on SQLite in the index directory (``kg.sqlite``), :class:`PGKGStore` in a PostgreSQL
namespace (the index's namespace + ``_kg``); the engines are :mod:`medr2.store.sqlite` and
:mod:`medr2.store.postgres`. The graph workflows take a :class:`GraphSQL`.

Every triple keeps its quality (SchemaConf and its four parts, EvidScore and its three parts,
Q(t), tier) as persistent attributes, and its provenance as source rows
(triple, TextID, extractor, surfaces, attributes such as a recommendation's strength). A
triple exists while at least one source supports it. Reviews are logged with who and when;
a rejected triple is remembered so that a rebuild does not bring it back.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.kg.store import KGStore
    >>> s = KGStore(pathlib.Path(tempfile.mkdtemp()) / "kg.sqlite")
    >>> s.counts()["triples"]
    0
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional

from medr2.store.postgres import PGFile
from medr2.store.sqlbase import SQLBase, ascii_lower, ident, insert_ignore, marks, upsert
from medr2.store.sqlite import SQLiteFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entities (entity_id TEXT PRIMARY KEY, name TEXT NOT NULL, type TEXT);
CREATE TABLE IF NOT EXISTS triples (
    triple_id TEXT PRIMARY KEY, head_id TEXT NOT NULL, relation TEXT NOT NULL, tail_id TEXT NOT NULL,
    entity_score REAL, relation_score REAL, type_score REAL, direction_score REAL, schema_conf REAL,
    agreement REAL, support REAL, human REAL, evid_score REAL, q REAL, tier TEXT,
    n_passages INTEGER, extractors TEXT, updated REAL);
CREATE INDEX IF NOT EXISTS triples_head ON triples(head_id);
CREATE INDEX IF NOT EXISTS triples_tail ON triples(tail_id);
CREATE INDEX IF NOT EXISTS triples_tier ON triples(tier);
CREATE TABLE IF NOT EXISTS sources (
    triple_id TEXT NOT NULL, text_id TEXT NOT NULL, doc_id TEXT NOT NULL, extractor TEXT NOT NULL,
    head_surface TEXT, tail_surface TEXT, relation_surface TEXT, head_level TEXT, tail_level TEXT,
    relation_level TEXT, attrs_json TEXT, PRIMARY KEY (triple_id, text_id, extractor));
CREATE INDEX IF NOT EXISTS sources_doc ON sources(doc_id);
CREATE INDEX IF NOT EXISTS sources_text ON sources(text_id);
CREATE TABLE IF NOT EXISTS kg_docs (doc_id TEXT PRIMARY KEY, content_hash TEXT, extractors TEXT, built REAL);
CREATE TABLE IF NOT EXISTS rejected (triple_id TEXT PRIMARY KEY, at REAL);
CREATE TABLE IF NOT EXISTS reviews (
    id INTEGER PRIMARY KEY AUTOINCREMENT, triple_id TEXT NOT NULL, action TEXT NOT NULL, reviewer TEXT,
    note TEXT, at REAL, before_json TEXT, after_json TEXT);
CREATE TABLE IF NOT EXISTS schema_relations (
    relation TEXT PRIMARY KEY, domain_json TEXT, range_json TEXT, inverse TEXT, "symmetric" INTEGER,
    polarity INTEGER, source TEXT, support INTEGER);
CREATE TABLE IF NOT EXISTS relation_synonyms (
    surface TEXT PRIMARY KEY, relation TEXT NOT NULL, score REAL, status TEXT, evidence_json TEXT);
CREATE TABLE IF NOT EXISTS inverse_pairs (a TEXT, b TEXT, score REAL, status TEXT, PRIMARY KEY (a, b));
CREATE TABLE IF NOT EXISTS macro_nodes (
    node_id TEXT PRIMARY KEY, doc_id TEXT NOT NULL, parent_id TEXT, title TEXT, depth INTEGER, ord INTEGER);
CREATE INDEX IF NOT EXISTS macro_doc ON macro_nodes(doc_id);
CREATE TABLE IF NOT EXISTS macro_passages (node_id TEXT, text_id TEXT, PRIMARY KEY (node_id, text_id));
CREATE INDEX IF NOT EXISTS macro_passages_text ON macro_passages(text_id);
CREATE TABLE IF NOT EXISTS cases (case_id TEXT PRIMARY KEY, question TEXT, answer TEXT, reasoning TEXT,
    source TEXT, method TEXT);
CREATE TABLE IF NOT EXISTS case_triples (
    id INTEGER PRIMARY KEY AUTOINCREMENT, case_id TEXT NOT NULL, ord INTEGER, head TEXT, relation TEXT, tail TEXT,
    head_id TEXT, tail_id TEXT, aligned_triple TEXT, align_score REAL);
CREATE INDEX IF NOT EXISTS case_triples_case ON case_triples(case_id);
CREATE TABLE IF NOT EXISTS case_support (case_id TEXT, text_id TEXT, score REAL, PRIMARY KEY (case_id, text_id));
"""

TRIPLE_COLUMNS = ["triple_id", "head_id", "relation", "tail_id", "entity_score", "relation_score", "type_score",
                  "direction_score", "schema_conf", "agreement", "support", "human", "evid_score", "q", "tier",
                  "n_passages", "extractors", "updated"]


def triple_id(head_id: str, relation: str, tail_id: str) -> str:
    h = hashlib.sha256("\x1f".join((head_id, relation, tail_id)).encode("utf-8")).hexdigest()
    return "t" + h[:16]


SOURCE_COLUMNS = ["triple_id", "text_id", "doc_id", "extractor", "head_surface", "tail_surface", "relation_surface",
                  "head_level", "tail_level", "relation_level", "attrs_json"]
SCHEMA_COLUMNS = ["relation", "domain_json", "range_json", "inverse", "symmetric", "polarity", "source", "support"]
CASE_TRIPLE_COLUMNS = ["id", "case_id", "ord", "head", "relation", "tail", "head_id", "tail_id", "aligned_triple",
                       "align_score"]

_MARK_DOC = upsert("kg_docs", ["doc_id", "content_hash", "extractors", "built"], ["doc_id"])
_PUT_ENTITY = ("INSERT INTO entities (entity_id, name, type) VALUES (?,?,?) ON CONFLICT (entity_id) DO UPDATE SET "
               "type=COALESCE(entities.type, excluded.type)")
_NEW_TRIPLE = insert_ignore("triples", ["triple_id", "head_id", "relation", "tail_id", "human", "updated"])
_PUT_SOURCE = upsert("sources", SOURCE_COLUMNS, ["triple_id", "text_id", "extractor"])
_REJECT = upsert("rejected", ["triple_id", "at"], ["triple_id"])
_PUT_SCHEMA = upsert("schema_relations", SCHEMA_COLUMNS, ["relation"])
_PUT_SYNONYM = upsert("relation_synonyms", ["surface", "relation", "score", "status", "evidence_json"], ["surface"])
_PUT_INVERSE = upsert("inverse_pairs", ["a", "b", "score", "status"], ["a", "b"])
_PUT_MACRO = upsert("macro_nodes", ["node_id", "doc_id", "parent_id", "title", "depth", "ord"], ["node_id"])
_PUT_MACRO_TEXT = insert_ignore("macro_passages", ["node_id", "text_id"])
_PUT_CASE = upsert("cases", ["case_id", "question", "answer", "reasoning", "source", "method"], ["case_id"])
_PUT_CASE_SUPPORT = upsert("case_support", ["case_id", "text_id", "score"], ["case_id", "text_id"])


class GraphSQL(SQLBase):
    """The graph store's methods, in SQL both engines run (:class:`KGStore`, :class:`PGKGStore`)."""

    SCHEMA = _SCHEMA
    SCHEMA_VERSION = 1
    MIGRATIONS: dict[int, tuple[str, ...]] = {}

    # -- documents ---------------------------------------------------------------------------------
    def docs(self) -> dict[str, tuple[str, list[str]]]:
        return {r[0]: (r[1], json.loads(r[2])) for r in self.db.execute("SELECT doc_id, content_hash, extractors FROM kg_docs")}

    def mark_doc(self, doc_id: str, content_hash: str, extractors: list[str]) -> None:
        self.db.execute(_MARK_DOC,
                        (doc_id, content_hash, json.dumps(sorted(extractors)), time.time()))

    def remove_doc(self, doc_id: str, extractors: Optional[Iterable[str]] = None) -> set[str]:
        """Remove a document's contribution (all of it, or only some extractors'); return the
        triples it touched. Triples left without a source are deleted."""
        if extractors is None:
            q, args = "SELECT DISTINCT triple_id FROM sources WHERE doc_id=?", [doc_id]
        else:
            ex = list(extractors)
            q = f"SELECT DISTINCT triple_id FROM sources WHERE doc_id=? AND extractor IN ({marks(len(ex))})"
            args = [doc_id, *ex]
        touched = {r[0] for r in self.db.execute(q, args)}
        if extractors is None:
            self.db.execute("DELETE FROM sources WHERE doc_id=?", (doc_id,))
            self.db.execute("DELETE FROM kg_docs WHERE doc_id=?", (doc_id,))
            for (node,) in self.db.execute("SELECT node_id FROM macro_nodes WHERE doc_id=?", (doc_id,)).fetchall():
                self.db.execute("DELETE FROM macro_passages WHERE node_id=?", (node,))
            self.db.execute("DELETE FROM macro_nodes WHERE doc_id=?", (doc_id,))
        else:
            self.db.execute(q.replace("SELECT DISTINCT triple_id", "DELETE"), args)
        self.drop_orphans(touched)
        return touched

    def drop_orphans(self, triple_ids: Iterable[str]) -> list[str]:
        gone = []
        for t in triple_ids:
            if self.db.execute("SELECT 1 FROM sources WHERE triple_id=? LIMIT 1", (t,)).fetchone() is None:
                self.db.execute("DELETE FROM triples WHERE triple_id=?", (t,))
                gone.append(t)
        return gone

    # -- triples -----------------------------------------------------------------------------------
    def put_entity(self, entity_id: str, name: str, etype: Optional[str]) -> None:
        self.db.execute(_PUT_ENTITY, (entity_id, name, etype))

    def entity(self, entity_id: str) -> Optional[dict[str, Any]]:
        r = self.db.execute("SELECT entity_id, name, type FROM entities WHERE entity_id=?", (entity_id,)).fetchone()
        return {"entity_id": r[0], "name": r[1], "type": r[2]} if r else None

    def entities(self, ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        ids = list(ids)
        out = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for r in self.db.execute(f"SELECT entity_id, name, type FROM entities WHERE entity_id IN ({marks(len(chunk))})",
                                     chunk):
                out[r[0]] = {"entity_id": r[0], "name": r[1], "type": r[2]}
        return out

    def is_rejected(self, tid: str) -> bool:
        return self.db.execute("SELECT 1 FROM rejected WHERE triple_id=?", (tid,)).fetchone() is not None

    def add_source(self, tid: str, head_id: str, relation: str, tail_id: str, src: dict[str, Any]) -> bool:
        """Add one supporting source; False when the triple was rejected by a reviewer."""
        if self.is_rejected(tid):
            return False
        self.db.execute(_NEW_TRIPLE, (tid, head_id, relation, tail_id, None, time.time()))
        self.db.execute(
            _PUT_SOURCE,
            (tid, src["text_id"], src["doc_id"], src["extractor"], src.get("head_surface"), src.get("tail_surface"),
             src.get("relation_surface"), src.get("head_level"), src.get("tail_level"), src.get("relation_level"),
             json.dumps(src.get("attrs") or {}, ensure_ascii=False)))
        return True

    def triple(self, tid: str) -> Optional[dict[str, Any]]:
        r = self.db.execute(f"SELECT {','.join(TRIPLE_COLUMNS)} FROM triples WHERE triple_id=?", (tid,)).fetchone()
        return self._row(r) if r else None

    def _row(self, r) -> dict[str, Any]:
        d = dict(zip(TRIPLE_COLUMNS, r))
        d["extractors"] = json.loads(d["extractors"]) if d["extractors"] else []
        return d

    def triples_by_ids(self, ids: Iterable[str]) -> list[dict[str, Any]]:
        ids = list(ids)
        out = []
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            out += [self._row(r) for r in self.db.execute(
                f"SELECT {','.join(TRIPLE_COLUMNS)} FROM triples WHERE triple_id IN ({marks(len(chunk))})", chunk)]
        return out

    def triples_of_entities(self, entity_ids: Iterable[str]) -> list[dict[str, Any]]:
        ids = list(entity_ids)
        out: dict[str, dict] = {}
        for i in range(0, len(ids), 400):
            chunk = ids[i:i + 400]
            ph = marks(len(chunk))
            for r in self.db.execute(f"SELECT {','.join(TRIPLE_COLUMNS)} FROM triples WHERE head_id IN ({ph}) "
                                     f"OR tail_id IN ({ph})", chunk + chunk):
                out[r[0]] = self._row(r)
        return list(out.values())

    def all_triple_ids(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT triple_id FROM triples")]

    def iter_triples(self) -> Iterator[dict[str, Any]]:
        for r in self.db.execute(f"SELECT {','.join(TRIPLE_COLUMNS)} FROM triples ORDER BY triple_id"):
            yield self._row(r)

    def sources(self, tid: str) -> list[dict[str, Any]]:
        cols = SOURCE_COLUMNS
        out = []
        for r in self.db.execute(f"SELECT {','.join(cols)} FROM sources WHERE triple_id=? ORDER BY text_id, extractor",
                                 (tid,)):
            d = dict(zip(cols, r))
            d["attrs"] = json.loads(d.pop("attrs_json") or "{}")
            out.append(d)
        return out

    def text_ids(self, tid: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT DISTINCT text_id FROM sources WHERE triple_id=? ORDER BY text_id",
                                              (tid,))]

    def triples_of_texts(self, text_ids: Iterable[str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        ids = list(text_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for t, tid in self.db.execute(f"SELECT text_id, triple_id FROM sources WHERE text_id IN ({marks(len(chunk))})",
                                          chunk):
                out.setdefault(t, []).append(tid)
        return out

    def doc_extractors(self, doc_ids: Iterable[str]) -> dict[str, list[str]]:
        ids = list(set(doc_ids))
        out = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for d, ex in self.db.execute(f"SELECT doc_id, extractors FROM kg_docs WHERE doc_id IN ({marks(len(chunk))})",
                                         chunk):
                out[d] = json.loads(ex)
        return out

    def reverse_support(self, head_id: str, relation: str, tail_id: str) -> int:
        r = self.db.execute("SELECT COUNT(DISTINCT s.text_id) FROM triples t JOIN sources s ON s.triple_id=t.triple_id "
                            "WHERE t.head_id=? AND t.relation=? AND t.tail_id=?", (tail_id, relation, head_id)).fetchone()
        return int(r[0] or 0)

    def set_quality(self, tid: str, values: dict[str, Any]) -> None:
        cols = [c for c in TRIPLE_COLUMNS if c in values and c != "triple_id"]
        vals = [json.dumps(values[c]) if c == "extractors" else values[c] for c in cols]
        self.db.execute(f"UPDATE triples SET {', '.join(c + '=?' for c in cols)}, updated=? WHERE triple_id=?",
                        (*vals, time.time(), tid))

    # -- review ------------------------------------------------------------------------------------
    def log_review(self, tid: str, action: str, reviewer: str, note: str, before: Any, after: Any) -> int:
        rows = self.db.execute("INSERT INTO reviews (triple_id, action, reviewer, note, at, before_json, after_json) "
                               "VALUES (?,?,?,?,?,?,?) RETURNING id",
                               (tid, action, reviewer, note, time.time(), json.dumps(before), json.dumps(after))
                               ).fetchall()  # read to the end: SQLite finishes the statement then
        return int(rows[0][0])

    def reviews(self, tid: Optional[str] = None) -> list[dict[str, Any]]:
        q = "SELECT id, triple_id, action, reviewer, note, at FROM reviews"
        rows = self.db.execute(q + (" WHERE triple_id=?" if tid else "") + " ORDER BY id", (tid,) if tid else ())
        return [dict(zip(["id", "triple_id", "action", "reviewer", "note", "at"], r)) for r in rows]

    def reject(self, tid: str) -> None:
        self.db.execute(_REJECT, (tid, time.time()))
        self.db.execute("DELETE FROM sources WHERE triple_id=?", (tid,))
        self.db.execute("DELETE FROM triples WHERE triple_id=?", (tid,))

    def set_human(self, tid: str, value: Optional[float]) -> None:
        self.db.execute("UPDATE triples SET human=? WHERE triple_id=?", (value, tid))

    # -- schema ------------------------------------------------------------------------------------
    def schema_rows(self) -> list[dict[str, Any]]:
        cols = SCHEMA_COLUMNS
        out = []
        for r in self.db.execute(f"SELECT {','.join(map(ident, cols))} FROM schema_relations ORDER BY relation"):
            d = dict(zip(cols, r))
            d["domain"] = json.loads(d.pop("domain_json"))
            d["range"] = json.loads(d.pop("range_json"))
            d["symmetric"] = bool(d["symmetric"])
            out.append(d)
        return out

    def put_schema(self, row: dict[str, Any]) -> None:
        self.db.execute(_PUT_SCHEMA,
                        (row["relation"], json.dumps(row["domain"]), json.dumps(row["range"]), row.get("inverse", ""),
                         int(bool(row.get("symmetric"))), int(row.get("polarity", 1)), row.get("source", "induced"),
                         int(row.get("support", 0))))

    def relation_synonyms(self) -> dict[str, dict[str, Any]]:
        return {r[0]: {"relation": r[1], "score": r[2], "status": r[3], "evidence": json.loads(r[4] or "{}")}
                for r in self.db.execute("SELECT surface, relation, score, status, evidence_json FROM relation_synonyms")}

    def put_relation_synonym(self, surface: str, relation: str, score: float, status: str, evidence: dict) -> None:
        self.db.execute(_PUT_SYNONYM,
                        (surface, relation, score, status, json.dumps(evidence)))

    def put_inverse(self, a: str, b: str, score: float, status: str) -> None:
        self.db.execute(_PUT_INVERSE, (a, b, score, status))

    def inverse_pairs(self) -> list[dict[str, Any]]:
        return [dict(zip(["a", "b", "score", "status"], r))
                for r in self.db.execute("SELECT a, b, score, status FROM inverse_pairs")]

    # -- macro graph -------------------------------------------------------------------------------
    def put_macro(self, doc_id: str, nodes: list[dict[str, Any]]) -> None:
        for (node,) in self.db.execute("SELECT node_id FROM macro_nodes WHERE doc_id=?", (doc_id,)).fetchall():
            self.db.execute("DELETE FROM macro_passages WHERE node_id=?", (node,))
        self.db.execute("DELETE FROM macro_nodes WHERE doc_id=?", (doc_id,))
        for n in nodes:
            self.db.execute(_PUT_MACRO,
                            (n["node_id"], doc_id, n["parent_id"], n["title"], n["depth"], n["ord"]))
            self.db.executemany(_PUT_MACRO_TEXT,
                                [(n["node_id"], t) for t in n.get("text_ids", [])])

    def macro_nodes_of_texts(self, text_ids: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict]] = {}
        ids = list(text_ids)
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for t, nid, title, depth, parent, doc in self.db.execute(
                    "SELECT mp.text_id, n.node_id, n.title, n.depth, n.parent_id, n.doc_id FROM macro_passages mp "
                    f"JOIN macro_nodes n ON n.node_id = mp.node_id WHERE mp.text_id IN ({marks(len(chunk))})",
                    chunk):
                out.setdefault(t, []).append({"node_id": nid, "title": title, "depth": depth, "parent_id": parent,
                                              "doc_id": doc})
        return out

    def macro_children(self, node_id: str) -> list[dict[str, Any]]:
        return [dict(zip(["node_id", "title", "depth"], r)) for r in self.db.execute(
            "SELECT node_id, title, depth FROM macro_nodes WHERE parent_id=? ORDER BY ord NULLS FIRST", (node_id,))]

    def macro_texts(self, node_id: str) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT text_id FROM macro_passages WHERE node_id=?", (node_id,))]

    def entities_of_macro(self, node_id: str, limit: int = 100) -> list[dict[str, Any]]:
        """Micro entities under a title node (through the passages they share), most frequent first."""
        q = ("SELECT e, COUNT(*) n FROM (SELECT t.head_id e FROM macro_passages mp JOIN sources s ON s.text_id=mp.text_id "
             "JOIN triples t ON t.triple_id=s.triple_id WHERE mp.node_id=? UNION ALL SELECT t.tail_id FROM macro_passages mp "
             "JOIN sources s ON s.text_id=mp.text_id JOIN triples t ON t.triple_id=s.triple_id WHERE mp.node_id=?) AS x "
             "GROUP BY e ORDER BY n DESC LIMIT ?")
        rows = self.db.execute(q, (node_id, node_id, limit)).fetchall()
        ents = self.entities([r[0] for r in rows])
        return [{**ents.get(e, {"entity_id": e, "name": e, "type": None}), "passages": n} for e, n in rows]

    def macro_of_entity(self, entity_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """Title nodes whose passages mention the entity in a triple (the other direction of the link)."""
        q = ("SELECT n.node_id, n.doc_id, n.title, n.depth, COUNT(DISTINCT mp.text_id) FROM triples t "
             "JOIN sources s ON s.triple_id=t.triple_id JOIN macro_passages mp ON mp.text_id=s.text_id "
             "JOIN macro_nodes n ON n.node_id=mp.node_id WHERE t.head_id=? OR t.tail_id=? "
             "GROUP BY n.node_id, n.doc_id, n.title, n.depth ORDER BY COUNT(DISTINCT mp.text_id) DESC LIMIT ?")
        return [dict(zip(["node_id", "doc_id", "title", "depth", "passages"], r))
                for r in self.db.execute(q, (entity_id, entity_id, limit))]

    def macro_nodes_titled(self, like: str, limit: int = 50) -> list[dict[str, Any]]:
        """Title nodes whose title contains ``like`` (ASCII letters in any case, as SQLite's LIKE)."""
        return [dict(zip(["node_id", "doc_id", "title", "depth"], r)) for r in self.db.execute(
            "SELECT node_id, doc_id, title, depth FROM macro_nodes WHERE LOWER(title) LIKE ? LIMIT ?",
            (f"%{ascii_lower(like)}%", limit))]

    # -- personalized graph ------------------------------------------------------------------------
    def put_case(self, case: dict[str, Any], triples: list[dict[str, Any]], support: list[tuple[str, float]]) -> None:
        self.db.execute("DELETE FROM case_triples WHERE case_id=?", (case["case_id"],))
        self.db.execute("DELETE FROM case_support WHERE case_id=?", (case["case_id"],))
        self.db.execute(_PUT_CASE,
                        (case["case_id"], case["question"], case["answer"], case["reasoning"], case.get("source", ""),
                         case.get("method", "")))
        for i, t in enumerate(triples):
            self.db.execute("INSERT INTO case_triples (case_id, ord, head, relation, tail, head_id, tail_id, "
                            "aligned_triple, align_score) VALUES (?,?,?,?,?,?,?,?,?)",
                            (case["case_id"], i, t["head"], t["relation"], t["tail"], t.get("head_id"), t.get("tail_id"),
                             t.get("aligned_triple"), t.get("align_score")))
        self.db.executemany(_PUT_CASE_SUPPORT,
                            [(case["case_id"], t, s) for t, s in support])

    def has_case(self, case_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM cases WHERE case_id=?", (case_id,)).fetchone() is not None

    def case_triples(self) -> list[dict[str, Any]]:
        cols = CASE_TRIPLE_COLUMNS
        return [dict(zip(cols, r)) for r in self.db.execute(f"SELECT {','.join(cols)} FROM case_triples ORDER BY id")]

    def case(self, case_id: str) -> Optional[dict[str, Any]]:
        r = self.db.execute("SELECT case_id, question, answer, reasoning, source, method FROM cases WHERE case_id=?",
                            (case_id,)).fetchone()
        if not r:
            return None
        d = dict(zip(["case_id", "question", "answer", "reasoning", "source", "method"], r))
        d["support"] = [{"text_id": t, "score": s} for t, s in self.db.execute(
            "SELECT text_id, score FROM case_support WHERE case_id=? ORDER BY score DESC NULLS LAST", (case_id,))]
        return d

    def cases(self) -> Iterator[dict[str, Any]]:
        for (cid,) in self.db.execute("SELECT case_id FROM cases ORDER BY case_id").fetchall():
            yield self.case(cid)

    # -- stats -------------------------------------------------------------------------------------
    def counts(self) -> dict[str, Any]:
        one = lambda q: self.db.execute(q).fetchone()[0]  # noqa: E731
        return {
            "triples": one("SELECT COUNT(*) FROM triples"),
            "entities": one("SELECT COUNT(DISTINCT e) FROM (SELECT head_id e FROM triples UNION SELECT tail_id FROM triples) "
                            "AS x"),
            "sources": one("SELECT COUNT(*) FROM sources"),
            "documents": one("SELECT COUNT(*) FROM kg_docs"),
            "passages": one("SELECT COUNT(DISTINCT text_id) FROM sources"),
            "tiers": dict(self.db.execute("SELECT tier, COUNT(*) FROM triples GROUP BY tier").fetchall()),
            "relations": dict(self.db.execute("SELECT relation, COUNT(*) FROM triples GROUP BY relation "
                                              "ORDER BY COUNT(*) DESC").fetchall()),
            "extractors": dict(self.db.execute("SELECT extractor, COUNT(*) FROM sources GROUP BY extractor").fetchall()),
            "reviews": one("SELECT COUNT(*) FROM reviews"),
            "rejected": one("SELECT COUNT(*) FROM rejected"),
            "macro_nodes": one("SELECT COUNT(*) FROM macro_nodes"),
            "cases": one("SELECT COUNT(*) FROM cases"),
            "case_triples": one("SELECT COUNT(*) FROM case_triples"),
        }


class KGStore(GraphSQL, SQLiteFile):
    def __init__(self, path: Path):
        super().__init__(path, self.SCHEMA, synchronous="NORMAL")


class PGKGStore(GraphSQL, PGFile):
    """The graph store in a PostgreSQL namespace."""

    def __init__(self, uri: str, namespace: str):
        super().__init__(uri, namespace, self.SCHEMA)
