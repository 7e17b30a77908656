"""Building and keeping the knowledge graph (workflow steps: I/O here, the math in
:mod:`medr2.kg.quality`, the schema logic in :mod:`medr2.kg.normalize`).

* :class:`KGBuilder` adds or removes one document's contribution (its triples' sources, its
  macro nodes) and records which triples it touched;
* :class:`QualityModel` recomputes SchemaConf, EvidScore, Q(t) and the tier of given triples;
* :func:`sync_index` brings the graph in line with an index: new or changed documents are
  extracted, removed ones withdrawn, only touched triples recomputed;
* :func:`review` confirms (human verification 1.0) or rejects (removed, remembered) a triple,
  logged with who and when.

Example::

    >>> from medr2.kg.build import macro_nodes
    >>> from medr2.schema import Document, Passage, Section
    >>> d = Document(doc_id="d", title="Guide", sections=[Section(title="Therapy", text="Use X.")])
    >>> [(n["title"], n["depth"], n["text_ids"]) for n in macro_nodes(d, [Passage(passage_id="p1", doc_id="d",
    ...     text="Use X.", heading_path=["Therapy"])])]
    [('Guide', 0, []), ('Therapy', 1, ['p1'])]
"""

from __future__ import annotations

import getpass
import hashlib
import json
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from medr2.config import Config, KGConfig
from medr2.kg import quality as Qm
from medr2.kg.entities import EntityLibrary, load_library, norm
from medr2.kg.extract import can_produce, extractor_relations
from medr2.kg.extract.base import Candidate
from medr2.kg.normalize import (induce_constraints, induce_inverses, map_relation, pairs_by_relation,
                                rank_relation_synonyms)
from medr2.kg.relations import RELATIONS, type_satisfies
from medr2.kg.store import GraphSQL, KGStore, PGKGStore, triple_id
from medr2.schema import Document, Passage
from medr2.store.layout import KG_SUFFIX, is_index_dir, read_backend_spec, uses_postgres
from medr2.store.postgres import namespace_exists

KG_FILE = "kg.sqlite"


def open_kg(index_dir: str | Path) -> GraphSQL:
    """The index's knowledge graph (created empty when absent): ``kg.sqlite`` in the directory, or
    the PostgreSQL namespace ``NAMESPACE_kg`` when the directory's ``backend.json`` says
    ``"store": "postgres"``."""
    p = Path(index_dir)
    if not is_index_dir(p):
        raise FileNotFoundError(f"{p} is not a medr2 index (no store.sqlite); create it with `medr2 ingest`")
    spec = read_backend_spec(p)
    if uses_postgres(spec):
        return PGKGStore(spec["postgres_uri"], spec["namespace"] + KG_SUFFIX)
    return KGStore(p / KG_FILE)


def has_kg(index_dir: str | Path) -> bool:
    """Whether the index has a knowledge graph (without creating one)."""
    p = Path(index_dir)
    spec = read_backend_spec(p)
    if uses_postgres(spec):
        return namespace_exists(spec["postgres_uri"], spec["namespace"] + KG_SUFFIX)
    return (p / KG_FILE).is_file()


def open_existing_kg(index_dir: str | Path) -> Optional[GraphSQL]:
    """The index's knowledge graph, or None when it has none."""
    return open_kg(index_dir) if has_kg(index_dir) else None


def library_for(cfg: KGConfig) -> EntityLibrary:
    return load_library(cfg.terminologies, cfg.synonym_files, cfg.fuzzy_min)


def _node_id(doc_id: str, path: tuple[str, ...]) -> str:
    return "m" + hashlib.sha256("\x1f".join((doc_id, *path)).encode("utf-8")).hexdigest()[:16]


def macro_nodes(doc: Document, passages: list[Passage]) -> list[dict[str, Any]]:
    """TCM-DiffRAG macro graph of one document: a title node for the document and for every
    heading of its tree (parent-child edges), each heading linked to the passages cut under it."""
    root = _node_id(doc.doc_id, ())
    nodes = {(): {"node_id": root, "parent_id": None, "title": doc.title or doc.doc_id, "depth": 0, "ord": 0,
                  "text_ids": []}}
    for i, (path, _) in enumerate(doc.walk()):
        for k in range(1, len(path) + 1):
            sub = tuple(path[:k])
            if sub not in nodes:
                nodes[sub] = {"node_id": _node_id(doc.doc_id, sub), "parent_id": nodes[sub[:-1]]["node_id"],
                              "title": sub[-1], "depth": k, "ord": i, "text_ids": []}
    for p in passages:
        path = tuple(p.heading_path)
        while path not in nodes and path:
            path = path[:-1]
        nodes[path]["text_ids"].append(p.passage_id)
    return list(nodes.values())


class QualityModel:
    def __init__(self, kg: KGStore, cfg: KGConfig):
        self.kg = kg
        self.cfg = cfg
        seed_schema(kg)
        self.schema = {r["relation"]: r for r in kg.schema_rows()}
        used = json.loads(kg.get_meta("extractors_used", "[]"))
        self.constant = {"agreement"} if len(used) <= 1 else set()

    def constraint(self, rel: str) -> tuple[list[str], list[str], bool]:
        row = self.schema.get(rel)
        if row:
            return row["domain"], row["range"], row["symmetric"]
        return [], [], False

    def recompute(self, tids: Iterable[str]) -> int:
        tids = list(dict.fromkeys(tids))
        n = 0
        for i in range(0, len(tids), 500):
            rows = self.kg.triples_by_ids(tids[i:i + 500])
            ents = self.kg.entities({r["head_id"] for r in rows} | {r["tail_id"] for r in rows})
            for r in rows:
                self._one(r, ents)
                n += 1
        return n

    def _one(self, t: dict[str, Any], ents: dict[str, dict]) -> None:
        cfg, ms = self.cfg, self.cfg.match_scores
        srcs = self.kg.sources(t["triple_id"])
        if not srcs:
            return
        best = lambda key: max(ms.get(s[key] or "unmatched", ms["unmatched"]) for s in srcs)  # noqa: E731
        e_score = Qm.entity_score(best("head_level"), best("tail_level"))
        r_score = best("relation_level")
        ht = (ents.get(t["head_id"]) or {}).get("type")
        tt = (ents.get(t["tail_id"]) or {}).get("type")
        dom, rng, sym = self.constraint(t["relation"])
        constrained = bool(dom or rng)
        h_ok, t_ok = type_satisfies(ht, dom), type_satisfies(tt, rng)
        type_s = Qm.type_score(h_ok, t_ok, constrained)
        given = None if (h_ok is None or t_ok is None) else (h_ok and t_ok)
        sh, st = type_satisfies(tt, dom), type_satisfies(ht, rng)
        swapped = None if (sh is None or st is None) else (sh and st)
        texts = {s["text_id"] for s in srcs}
        rev = self.kg.reverse_support(t["head_id"], t["relation"], t["tail_id"])
        dir_s = Qm.direction_score(sym, given if constrained else None, swapped if constrained else None, rev, len(texts))
        schema = Qm.schema_conf(e_score, r_score, type_s, dir_s, cfg.schema_weights)
        producing = {s["extractor"] for s in srcs}
        # the extractors that ran on its documents and can produce its relation at all
        applicable = producing | {e for ex in self.kg.doc_extractors({s["doc_id"] for s in srcs}).values()
                                  for e in ex if can_produce(e, t["relation"])}
        agree = Qm.agreement_score(len(producing & applicable), len(applicable))
        support = Qm.support_score(len(texts), cfg.support_saturation)
        evid = Qm.evid_score({"agreement": agree, "support": support, "human": t["human"]}, cfg.evid_weights,
                             self.constant)
        q = Qm.fuse(schema, evid, cfg.schema_weight)
        self.kg.set_quality(t["triple_id"], {
            "entity_score": round(e_score, 4), "relation_score": round(r_score, 4), "type_score": type_s,
            "direction_score": dir_s, "schema_conf": round(schema, 4), "agreement": round(agree, 4),
            "support": round(support, 4), "evid_score": round(evid, 4), "q": round(q, 4),
            "tier": Qm.tier(q, cfg.core_min, cfg.extended_min), "n_passages": len(texts),
            "extractors": sorted(producing)})


def seed_schema(kg: KGStore) -> None:
    have = {r["relation"] for r in kg.schema_rows()}
    for r in RELATIONS.values():
        if r.name not in have:
            kg.put_schema({"relation": r.name, "domain": list(r.domain), "range": list(r.range), "inverse": r.inverse,
                           "symmetric": r.symmetric, "polarity": r.polarity, "source": "builtin", "support": 0})


class KGBuilder:
    def __init__(self, kg: KGStore, library: EntityLibrary, extractors: list, cfg: KGConfig):
        self.kg = kg
        self.library = library
        self.extractors = extractors
        self.cfg = cfg
        for surface, eid in json.loads(kg.get_meta("confirmed_synonyms", "{}")).items():
            library.add_confirmed(surface, eid)
        seed_schema(kg)
        kg.set_meta("kg_config", cfg.model_dump_json())
        self.synonyms = kg.relation_synonyms()
        self.candidates = 0
        self.skipped_rejected = 0

    def add_document(self, doc: Document, passages: list[Passage], content_hash: str) -> set[str]:
        """Replace the document's contribution with fresh extraction; return the touched triples."""
        ran = [ex for ex in self.extractors if ex.applies(doc)]
        cands: list[Candidate] = []
        for ex in ran:
            cands.extend(ex.extract(doc, passages))
        self.candidates += len(cands)
        with self.kg.transaction():
            touched = self.kg.remove_doc(doc.doc_id)
            for c in cands:
                tid = self._add(c)
                if tid:
                    touched.add(tid)
            self.kg.put_macro(doc.doc_id, macro_nodes(doc, passages))
            self.kg.mark_doc(doc.doc_id, content_hash, [ex.name for ex in ran])
            used = set(json.loads(self.kg.get_meta("extractors_used", "[]"))) | {ex.name for ex in ran}
            self.kg.set_meta("extractors_used", json.dumps(sorted(used)))
        return touched

    def _entity(self, surface: str, eid: Optional[str], level: Optional[str], hint: Optional[str]):
        if eid and level:
            name, etype = self.library.name_of(eid)
            if eid.startswith(("term:", "dose:")) or etype is None:
                name, etype = surface.strip(), hint
            return eid, name, etype or hint, level
        m = self.library.match(surface, hint)
        return m.entity_id, m.name, m.type or hint, m.level

    def _add(self, c: Candidate) -> Optional[str]:
        if c.extractor == "llm":
            rel, swap, rlevel = map_relation(c.relation, self.synonyms)
        else:
            rel, swap, rlevel = c.relation, False, ("exact" if c.extractor == "structured" else "synonym")
            cue = (c.attrs.get("cue") or "").lower()
            if c.extractor == "rules" and cue.split(" ")[:1] == [rel.split("_")[0]]:
                rlevel = "exact"
        h = self._entity(c.head, c.head_id, c.head_level, c.head_type)
        t = self._entity(c.tail, c.tail_id, c.tail_level, c.tail_type)
        if swap:
            h, t = t, h
        if h[0] == t[0] or not norm(h[1]) or not norm(t[1]):
            return None
        for eid, name, etype, _ in (h, t):
            self.kg.put_entity(eid, name, etype)
        tid = triple_id(h[0], rel, t[0])
        ok = self.kg.add_source(tid, h[0], rel, t[0], {
            "text_id": c.text_id, "doc_id": c.doc_id, "extractor": c.extractor,
            "head_surface": c.tail if swap else c.head, "tail_surface": c.head if swap else c.tail,
            "relation_surface": c.relation, "head_level": h[3], "tail_level": t[3], "relation_level": rlevel,
            "attrs": c.attrs})
        if not ok:
            self.skipped_rejected += 1
            return None
        return tid

    def remove_document(self, doc_id: str) -> set[str]:
        with self.kg.transaction():
            return self.kg.remove_doc(doc_id)

    def induce_schema(self) -> dict[str, Any]:
        """Induce domain/range for relations the builtin schema lacks, inverse pairs, and rank
        relation synonyms for unmatched LLM surfaces (stored as suggestions, reviewable)."""
        rows = self.kg.db.execute("SELECT t.head_id, t.relation, t.tail_id, h.type, tl.type FROM triples t "
                                  "LEFT JOIN entities h ON h.entity_id=t.head_id "
                                  "LEFT JOIN entities tl ON tl.entity_id=t.tail_id").fetchall()
        typed: dict[str, list] = {}
        for h, r, t, ht, tt in rows:
            typed.setdefault(r, []).append((ht, tt))
        schema = {r["relation"]: r for r in self.kg.schema_rows()}
        induced = induce_constraints(typed, self.cfg.induce_min_share, self.cfg.induce_min_support)
        new = 0
        with self.kg.transaction():
            for rel, c in induced.items():
                if rel in schema and schema[rel]["source"] in ("builtin", "edited"):
                    continue
                self.kg.put_schema({"relation": rel, "domain": c["domain"], "range": c["range"], "inverse": "",
                                    "symmetric": False, "polarity": -1 if rel.startswith("not_") else 1,
                                    "source": "induced", "support": c["support"]})
                new += 1
            pairs = pairs_by_relation([(h, r, t) for h, r, t, _, _ in rows])
            inv = induce_inverses(pairs, min_support=self.cfg.induce_min_support)
            for a, b, s in inv:
                self.kg.put_inverse(a, b, s, "suggested")
            unmatched = {r for (r,) in self.kg.db.execute(
                "SELECT DISTINCT t.relation FROM triples t JOIN sources s ON s.triple_id=t.triple_id "
                "WHERE s.relation_level='unmatched'")}
            ranked = rank_relation_synonyms({k: v for k, v in pairs.items() if k in unmatched or k in RELATIONS},
                                            sorted(RELATIONS))
            for r in ranked:
                if self.synonyms.get(r["surface"], {}).get("status") != "confirmed":
                    self.kg.put_relation_synonym(r["surface"], r["relation"], r["score"], "suggested", r["evidence"])
        moved = self.remap_relations() if ranked else set()
        return {"constraints": new, "inverse_pairs": len(inv), "relation_synonyms": len(ranked), "remapped": moved}

    def remap_relations(self) -> set[str]:
        """Move sources whose relation surface now maps elsewhere (a new or confirmed synonym)."""
        self.synonyms = self.kg.relation_synonyms()
        touched: set[str] = set()
        rows = self.kg.db.execute("SELECT s.triple_id, s.text_id, s.extractor, s.relation_surface, t.head_id, t.tail_id, "
                                  "t.relation FROM sources s JOIN triples t ON t.triple_id=s.triple_id "
                                  "WHERE s.extractor='llm' AND s.relation_level IN ('unmatched','suggestion','synonym')"
                                  ).fetchall()
        with self.kg.transaction():
            for tid, text, ex, surface, h, t, rel in rows:
                new_rel, swap, level = map_relation(surface, self.synonyms)
                if new_rel == rel and not swap:
                    continue
                nh, nt = (t, h) if swap else (h, t)
                src = [s for s in self.kg.sources(tid) if s["text_id"] == text and s["extractor"] == ex][0]
                self.kg.db.execute("DELETE FROM sources WHERE triple_id=? AND text_id=? AND extractor=?", (tid, text, ex))
                src["relation_level"] = level
                nid = triple_id(nh, new_rel, nt)
                if self.kg.add_source(nid, nh, new_rel, nt, src):
                    touched.add(nid)
                touched.add(tid)
            touched -= set(self.kg.drop_orphans(touched))
        return touched


def sync_index(index_store, builder: KGBuilder, progress: Optional[Callable[[int, int, str], None]] = None
               ) -> dict[str, Any]:
    """Bring the graph in line with the index's documents; recompute only what changed."""
    t0 = time.time()
    current = dict(index_store.db.execute("SELECT doc_id, content_hash FROM documents").fetchall())
    known = builder.kg.docs()
    wanted = {ex.name for ex in builder.extractors}
    touched: set[str] = set()
    removed = [d for d in known if d not in current]
    for d in removed:
        touched |= builder.remove_document(d)
    todo = [d for d, h in current.items()
            if d not in known or known[d][0] != h or not _ran_all(known[d][1], wanted, builder, d, index_store)]
    n_passages = 0
    for i, d in enumerate(sorted(todo)):
        doc = index_store.get_document(d)
        passages = index_store.doc_passages(d)
        n_passages += len(passages)
        touched |= builder.add_document(doc, passages, current[d])
        if progress:
            progress(i + 1, len(todo), d)
    t_extract = time.time() - t0
    schema = builder.induce_schema() if todo or removed else {"remapped": set()}
    touched |= schema.pop("remapped", set())
    qm = QualityModel(builder.kg, builder.cfg)
    stamp = Qm.quality_stamp(qm.constant, extractor_relations())
    if builder.kg.get_meta("quality_stamp") != stamp:  # agreement's informativeness or the rules changed
        touched = set(builder.kg.all_triple_ids())
    t1 = time.time()
    with builder.kg.transaction():
        n = qm.recompute(t for t in touched if builder.kg.triple(t) is not None)
        builder.kg.set_meta("quality_stamp", stamp)  # after the rescore: a crash in it leaves the old one
    return {"documents_added": len(todo), "documents_removed": len(removed), "passages": n_passages,
            "candidates": builder.candidates, "triples_recomputed": n, "rejected_skipped": builder.skipped_rejected,
            "schema": schema, "extract_seconds": round(t_extract, 2), "quality_seconds": round(time.time() - t1, 2),
            "seconds": round(time.time() - t0, 2),
            "passages_per_s": round(n_passages / t_extract, 1) if t_extract > 0 and n_passages else None}


def _ran_all(done: list[str], wanted: set[str], builder: KGBuilder, doc_id: str, index_store) -> bool:
    """Whether every wanted extractor that applies to the document already ran on it."""
    missing = wanted - set(done)
    if not missing:
        return True
    doc = index_store.get_document(doc_id)
    return not any(ex.applies(doc) for ex in builder.extractors if ex.name in missing)


def review(kg: KGStore, cfg: KGConfig, tid: str, action: str, reviewer: Optional[str] = None, note: str = ""
           ) -> dict[str, Any]:
    """Confirm (human verification = 1.0, quality recomputed) or reject (triple removed and
    remembered) one triple; logged with reviewer and time. Only the triple (and its reverse,
    whose direction score reads it) is recomputed."""
    if action not in ("confirm", "reject"):
        raise ValueError(f"review action must be confirm or reject, not {action!r}")
    before = kg.triple(tid)
    if before is None:
        raise KeyError(f"no triple {tid!r} in the knowledge graph (see `medr2 kg show ENTITY`)")
    who = reviewer or _user()
    t0 = time.time()
    with kg.transaction():
        if action == "confirm":
            kg.set_human(tid, 1.0)
            srcs = kg.sources(tid)
            confirmed = json.loads(kg.get_meta("confirmed_synonyms", "{}"))
            for s in srcs:  # the reviewed surfaces become confirmed synonyms of their entities
                if s["head_level"] in ("suggestion", "fuzzy"):
                    confirmed[norm(s["head_surface"] or "")] = before["head_id"]
                if s["tail_level"] in ("suggestion", "fuzzy"):
                    confirmed[norm(s["tail_surface"] or "")] = before["tail_id"]
            kg.set_meta("confirmed_synonyms", json.dumps(confirmed, ensure_ascii=False))
            qm = QualityModel(kg, cfg)
            rev = triple_id(before["tail_id"], before["relation"], before["head_id"])
            qm.recompute([tid] + ([rev] if kg.triple(rev) else []))
            after = kg.triple(tid)
        else:
            kg.reject(tid)
            rev = triple_id(before["tail_id"], before["relation"], before["head_id"])
            if kg.triple(rev):
                QualityModel(kg, cfg).recompute([rev])
            after = None
        kg.log_review(tid, action, who, note, before, after)
    return {"triple_id": tid, "action": action, "reviewer": who, "before": before, "after": after,
            "seconds": round(time.time() - t0, 4)}


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no login name in some containers
        return "unknown"


def make_extractors(names: list[str], library: EntityLibrary, llm=None) -> list:
    from medr2.kg.extract.rules import RuleExtractor
    from medr2.kg.extract.structured import StructuredExtractor

    out = []
    for n in names:
        if n == "rules":
            out.append(RuleExtractor(library))
        elif n == "structured":
            out.append(StructuredExtractor(library))
        elif n == "llm":
            from medr2.kg.extract.llm import LLMExtractor

            out.append(LLMExtractor(llm))
        else:
            raise ValueError(f"unknown extractor {n!r}; use rules, structured, llm or all")
    return out


def kg_config(config: Optional[Config]) -> KGConfig:
    return (config or Config()).kg


def stored_config(kg: KGStore, given: Optional[KGConfig] = None) -> KGConfig:
    """The settings the graph was built with (so that a later review or removal scores alike),
    unless the caller gives its own."""
    if given is not None:
        return given
    raw = kg.get_meta("kg_config")
    return KGConfig.model_validate_json(raw) if raw else KGConfig()


def withdraw_documents(index_dir: str | Path, doc_ids: Iterable[str], cfg: Optional[KGConfig] = None
                       ) -> Optional[dict[str, int]]:
    """Remove documents' contributions from the index's graph (if it has one): a triple goes only
    when no remaining passage supports it; the others are rescored."""
    kg = open_existing_kg(index_dir)
    if kg is None:
        return None
    try:
        cfg = stored_config(kg, cfg)
        before = kg.counts()["triples"]
        touched: set[str] = set()
        with kg.transaction():
            for d in doc_ids:
                touched |= kg.remove_doc(d)
            alive = [t for t in touched if kg.triple(t) is not None]
            QualityModel(kg, cfg).recompute(alive)
        return {"triples_removed": before - kg.counts()["triples"], "triples_rescored": len(alive)}
    finally:
        kg.close()
