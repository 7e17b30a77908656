"""Graph retrieval over the quality-aware knowledge graph (guideline-KG paper) and the
macro-micro union of TCM-DiffRAG.

1. Entity linking of the question: exact name or synonym (confidence 1.0), segmentation
   (0.95: a segment of the question, from jieba for Chinese or content-word n-grams for English,
   equals an entity's name after light normalisation or covers most of it), fuzzy only when the
   first two give fewer than three candidates.
2. Subgraph: triples up to two hops from the linked entities; each ranked by its
   construction-time Q(t) times its normalised link relevance (link confidence, decayed per hop).
3. Passage channel: the dense top-5 passages, independently.
4. Triple-level conflicts (same head and tail, contradicting relations) are reported.
5. Union retrieval: passages by snippet search united with the passages the matched triples map
   to, each marked with how it was found and its macro (heading) path.

Example::

    >>> from medr2.search.graph import rank_triples
    >>> ranked = rank_triples([{"triple_id": "a", "q": 0.9, "relevance": 0.5}, {"triple_id": "b", "q": 0.6,
    ...                                                                          "relevance": 1.0}])
    >>> [(t["triple_id"], t["score"]) for t in ranked]
    [('b', 0.6), ('a', 0.45)]
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass
from typing import Any, Optional

from medr2.config import Config
from medr2.kg.entities import GENERIC, EntityLibrary, _singular, norm
from medr2.kg.relations import RELATIONS, conflicting
from medr2.kg.store import KGStore

_HAN = re.compile(r"[\u3400-\u9fff]")
_STOP = {"what", "which", "when", "where", "who", "why", "how", "is", "are", "was", "were", "the", "a", "an", "of",
         "in", "for", "to", "with", "and", "or", "does", "do", "did", "should", "can", "could", "would", "be",
         "patient", "patients", "best", "most", "first", "line", "treatment", "therapy", "recommended", "use",
         "used", "there", "this", "that", "on", "at", "by", "from", "as", "it", "its", "their", "than", "about",
         "management", "manage", "treat", "treated", "initial", "option", "options", "year", "old", "man", "woman"}


@dataclass
class Link:
    entity_id: str
    name: str
    type: Optional[str]
    confidence: float
    how: str  # exact | segment | fuzzy
    surface: str


def rank_triples(triples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Order by Q(t) x normalised link relevance (pure)."""
    top = max((t["relevance"] for t in triples), default=0.0) or 1.0
    for t in triples:
        t["relevance_norm"] = round(t["relevance"] / top, 4)
        t["score"] = round((t["q"] or 0.0) * t["relevance_norm"], 4)
    return sorted(triples, key=lambda t: (-t["score"], t["triple_id"]))


def find_conflicts(triples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pairs of triples joining the same head and tail with contradicting relations."""
    by_pair: dict[tuple[str, str], list[dict]] = {}
    for t in triples:
        by_pair.setdefault((t["head_id"], t["tail_id"]), []).append(t)
    out = []
    for (h, tl), ts in by_pair.items():
        for i in range(len(ts)):
            for j in range(i + 1, len(ts)):
                a, b = ts[i], ts[j]
                if conflicting(a["relation"], b["relation"]):
                    hi, lo = (a, b) if (a["q"] or 0) >= (b["q"] or 0) else (b, a)
                    out.append({"head": a.get("head", h), "tail": a.get("tail", tl),
                                "triples": [hi["triple_id"], lo["triple_id"]],
                                "relations": [hi["relation"], lo["relation"]], "q": [hi["q"], lo["q"]],
                                "preferred": hi["triple_id"] if (hi["q"] or 0) > (lo["q"] or 0) else None})
    return out


def passage_conflicts(kg: KGStore, passage_ids: list[str]) -> list[dict[str, Any]]:
    """Triple-level conflicts among the triples read from these passages and the graph's other
    triples on the same head and tail; each names the passages its triples come from."""
    if not passage_ids:
        return []
    tids = {t for ts in kg.triples_of_texts(passage_ids).values() for t in ts}
    mine = kg.triples_by_ids(tids)
    pairs = {(t["head_id"], t["tail_id"]) for t in mine}
    more = [t for t in kg.triples_of_entities({h for h, _ in pairs}) if (t["head_id"], t["tail_id"]) in pairs]
    allt = list({t["triple_id"]: t for t in mine + more}.values())
    ents = kg.entities({t["head_id"] for t in allt} | {t["tail_id"] for t in allt})
    for t in allt:
        t["head"] = ents.get(t["head_id"], {}).get("name", t["head_id"])
        t["tail"] = ents.get(t["tail_id"], {}).get("name", t["tail_id"])
    out = find_conflicts(allt)
    for c in out:
        c["text_ids"] = {tid: kg.text_ids(tid) for tid in c["triples"]}
    return out


class GraphSearcher:
    def __init__(self, kg: KGStore, library: EntityLibrary, config: Config, index=None):
        self.kg = kg
        self.cfg = config.kg
        self.config = config
        self.index = index
        # names of the entities in the graph (their own, and every library name that maps to them)
        in_graph = {r[0]: (r[1], r[2]) for r in kg.db.execute(
            "SELECT e.entity_id, e.name, e.type FROM entities e WHERE e.entity_id IN "
            "(SELECT head_id FROM triples UNION SELECT tail_id FROM triples)")}
        names: dict[str, list] = {}
        for eid, (name, _) in in_graph.items():
            k = norm(name)
            if k and k not in GENERIC:
                names.setdefault(k, [eid, "exact"])
        for k, (eid, level) in library.names.items():
            if eid in in_graph and k not in names:
                names[k] = [eid, level]
        entities = {eid: [name, etype] for eid, (name, etype) in in_graph.items()}
        self.linker = EntityLibrary(entities, names, self.cfg.fuzzy_min)
        self.token_index: dict[str, set[str]] = {}
        for k, (eid, _) in names.items():
            if _HAN.search(k):
                continue
            for w in set(k.split(" ")):
                if len(w) > 3 and w not in _STOP and w not in GENERIC:
                    self.token_index.setdefault(_singular(w), set()).add(k)
        self.zh_names = [k for k in names if _HAN.search(k)]

    # -- 1. linking ------------------------------------------------------------------------------
    def link(self, question: str) -> list[Link]:
        found: dict[str, Link] = {}
        for m in self.linker.mentions(question):
            found.setdefault(m.entity_id, Link(m.entity_id, m.name, m.type, self.cfg.link_exact, "exact", m.surface))
        for seg in self._segments(question):
            for k in self._segment_matches(seg):
                eid = self.linker.names[k][0]
                if eid not in found:
                    name, etype = self.linker.name_of(eid)
                    found[eid] = Link(eid, name, etype, self.cfg.link_segment, "segment", seg)
        if len(found) < self.cfg.fuzzy_when_fewer_than:
            for seg in self._segments(question, fuzzy=True):
                m = self.linker.match(seg, fuzzy=True)
                if m.level == "fuzzy" and m.entity_id not in found:
                    found[m.entity_id] = Link(m.entity_id, m.name, m.type, round(self.cfg.link_segment * 0.9, 4),
                                              "fuzzy", seg)
        return sorted(found.values(), key=lambda lk: (-lk.confidence, lk.name))

    def _segments(self, text: str, fuzzy: bool = False) -> list[str]:
        if _HAN.search(text):
            import jieba

            return [w for w in jieba.lcut(text) if len(w) >= 2 and _HAN.search(w)]
        words = [w for w in norm(text).split(" ") if w]
        content = [w for w in words if w not in _STOP and len(w) > 2]
        if fuzzy:
            grams = [" ".join(words[i:i + n]) for n in (3, 2) for i in range(len(words) - n + 1)
                     if words[i] not in _STOP and words[i + n - 1] not in _STOP]
            return grams + [w for w in content if len(w) >= 5]
        return content

    def _segment_matches(self, seg: str) -> list[str]:
        if _HAN.search(seg):
            return [k for k in self.zh_names if seg == k or (len(seg) >= 2 and seg in k and len(seg) * 2 >= len(k))][:5]
        cands = self.token_index.get(_singular(seg), set())
        out = []
        for k in cands:
            content = [w for w in k.split(" ") if w not in _STOP]
            if len(content) <= 2:  # the segment covers at least half of the name's content words
                out.append(k)
        return sorted(out, key=len)[:5]

    # -- 2. subgraph -----------------------------------------------------------------------------
    def subgraph(self, links: list[Link], max_triples: Optional[int] = None) -> list[dict[str, Any]]:
        conf = {lk.entity_id: lk.confidence for lk in links}
        frontier = dict(conf)
        seen: dict[str, dict[str, Any]] = {}
        for hop in range(1, self.cfg.max_hops + 1):
            if not frontier:
                break
            decay = self.cfg.hop_decay ** (hop - 1)
            nxt: dict[str, float] = {}
            found = self.kg.triples_of_entities(list(frontier))
            for t in found:
                rel = max(frontier.get(t["head_id"], 0.0), frontier.get(t["tail_id"], 0.0)) * decay
                if t["triple_id"] not in seen or seen[t["triple_id"]]["relevance"] < rel:
                    seen[t["triple_id"]] = {**t, "relevance": rel, "hop": hop}
                for e in (t["head_id"], t["tail_id"]):
                    if e not in conf and e not in frontier:
                        nxt[e] = max(nxt.get(e, 0.0), frontier.get(t["head_id"] if e == t["tail_id"] else t["tail_id"], 0.0)
                                     * (t["q"] or 0.0))
            if hop < self.cfg.max_hops and nxt:
                # hubs (an outcome such as "mortality" shared by many guidelines) lead everywhere: a
                # neighbour's expansion weight falls with the log of its degree
                deg = dict(self.kg.db.execute(
                    "SELECT e, COUNT(*) FROM (SELECT head_id e FROM triples WHERE head_id IN ({0}) UNION ALL "
                    "SELECT tail_id FROM triples WHERE tail_id IN ({0})) AS x GROUP BY e".format(
                        ",".join("?" * len(nxt))), list(nxt) * 2).fetchall()) if len(nxt) <= 400 else {}
                nxt = {e: v / math.log(2 + deg.get(e, 1)) for e, v in nxt.items()}
            # expand through the best-supported neighbours only
            frontier = dict(sorted(nxt.items(), key=lambda kv: -kv[1])[:50])
            for e, v in frontier.items():
                conf.setdefault(e, v)
        ranked = rank_triples(list(seen.values()))[: max_triples or self.cfg.max_triples]
        ents = self.kg.entities({t["head_id"] for t in ranked} | {t["tail_id"] for t in ranked})
        for t in ranked:
            t["head"] = ents.get(t["head_id"], {}).get("name", t["head_id"])
            t["tail"] = ents.get(t["tail_id"], {}).get("name", t["tail_id"])
            t["head_type"] = ents.get(t["head_id"], {}).get("type")
            t["tail_type"] = ents.get(t["tail_id"], {}).get("type")
            srcs = self.kg.sources(t["triple_id"])
            t["text_ids"] = sorted({s["text_id"] for s in srcs})
            t["attrs"] = {k: v for s in srcs for k, v in s["attrs"].items() if k in ("strength", "evidence_class")}
            t["relevance"] = round(t["relevance"], 4)
        return ranked

    def conflicts_for(self, triples: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Conflicts among the retrieved triples and the graph's other triples on the same pairs."""
        pairs = {(t["head_id"], t["tail_id"]) for t in triples}
        more = [t for t in self.kg.triples_of_entities({h for h, _ in pairs})
                if (t["head_id"], t["tail_id"]) in pairs]
        names = {(t["head_id"], t["tail_id"]): (t.get("head"), t.get("tail")) for t in triples}
        for t in more:
            t["head"], t["tail"] = names.get((t["head_id"], t["tail_id"]), (t["head_id"], t["tail_id"]))
        return find_conflicts(list({t["triple_id"]: t for t in triples + more}.values()))

    # -- 3. passages -----------------------------------------------------------------------------
    def dense_passages(self, question: str, k: Optional[int] = None) -> list[dict[str, Any]]:
        if self.index is None:
            return []
        qvec = self.index.encoder.encode_query(question)
        got = self.index.search_dense(qvec, k or self.cfg.dense_passages)
        rows = self.index.store.passages([r for r, _ in got])
        return [{**rows[r], "score": round(float(s), 4), "via": ["dense"]} for r, s in got if r in rows]

    def passages_by_id(self, text_ids: list[str]) -> dict[str, dict[str, Any]]:
        if self.index is None:
            return {}
        rowids = {t: self.index.store.rowid_of(t) for t in text_ids}
        rows = self.index.store.passages([r for r in rowids.values() if r is not None])
        return {rows[r]["passage_id"]: rows[r] for r in rows}

    def search(self, question: str, max_triples: Optional[int] = None) -> dict[str, Any]:
        """Links, the quality-ranked subgraph with provenance, conflicts and the dense top-5."""
        t0 = time.perf_counter()
        links = self.link(question)
        t1 = time.perf_counter()
        triples = self.subgraph(links, max_triples)
        t2 = time.perf_counter()
        conflicts = self.conflicts_for(triples) if triples else []
        dense = self.dense_passages(question)
        t3 = time.perf_counter()
        return {"links": [asdict(lk) for lk in links], "triples": triples, "conflicts": conflicts, "passages": dense,
                "timings_ms": {"link": round((t1 - t0) * 1000, 2), "subgraph": round((t2 - t1) * 1000, 2),
                               "passages": round((t3 - t2) * 1000, 2), "total": round((t3 - t0) * 1000, 2)}}

    # -- 5. macro-micro union ----------------------------------------------------------------------
    def union(self, question: str, k: Optional[int] = None, triples: Optional[list[dict[str, Any]]] = None
              ) -> list[dict[str, Any]]:
        """Snippets by similarity (hybrid search, top k) united with the passages the matched
        triples map to; each passage says how it was found and carries its heading path."""
        from medr2.search.hybrid import HybridSearcher

        k = k or self.cfg.union_k
        out: dict[str, dict[str, Any]] = {}
        if self.index is not None:
            for h in HybridSearcher(self.index, self.config).search(question, k=k).hits:
                out[h.passage_id] = {"passage_id": h.passage_id, "doc_id": h.doc_id, "title": h.title,
                                     "heading_path": h.heading_path, "text": h.text, "source_type": h.source_type.value,
                                     "via": ["snippet"], "triples": []}
        if triples is None:
            triples = self.subgraph(self.link(question))
        mapped: list[str] = []
        for t in triples:
            for tid in t["text_ids"]:
                if tid in out:
                    if "triple" not in out[tid]["via"]:
                        out[tid]["via"].append("triple")
                    out[tid]["triples"].append(t["triple_id"])
                elif tid not in mapped:
                    mapped.append(tid)
        rows = self.passages_by_id(mapped)
        for tid in mapped:
            r = rows.get(tid)
            if r is None:
                continue
            out[tid] = {"passage_id": tid, "doc_id": r["doc_id"], "title": r["title"], "heading_path": r["heading_path"],
                        "text": r["text"], "source_type": r["source_type"], "via": ["triple"],
                        "triples": [t["triple_id"] for t in triples if tid in t["text_ids"]]}
        macro = self.kg.macro_nodes_of_texts(list(out))
        for pid, rec in out.items():
            rec["macro"] = [n["title"] for n in sorted(macro.get(pid, []), key=lambda n: n["depth"])]
        return list(out.values())


def relation_label(rel: str) -> str:
    r = RELATIONS.get(rel)
    return (("not " if rel.startswith("not_") else "") + (rel[4:] if rel.startswith("not_") else rel)).replace("_", " ") \
        if r or rel else rel
