"""Export the graph: JSON Lines (one triple a line, with quality and TextIDs), GraphML
(networkx), and Neo4j-importable CSV (``nodes.csv`` + ``relationships.csv`` for
``neo4j-admin database import``).

Example::

    >>> import tempfile, pathlib
    >>> from medr2.kg.store import KGStore
    >>> from medr2.kg.export import export
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> export(KGStore(d / "kg.sqlite"), "jsonl", d / "kg.jsonl")
    0
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterator

from medr2.kg.store import KGStore

FORMATS = ("jsonl", "graphml", "csv")


def triple_records(kg: KGStore) -> Iterator[dict[str, Any]]:
    ents: dict[str, dict] = {}
    for t in kg.iter_triples():
        for e in (t["head_id"], t["tail_id"]):
            if e not in ents:
                ents[e] = kg.entity(e) or {"entity_id": e, "name": e, "type": None}
        srcs = kg.sources(t["triple_id"])
        attrs = {k: v for s in srcs for k, v in s["attrs"].items() if k in ("strength", "evidence_class")}
        yield {
            "triple_id": t["triple_id"], "head": ents[t["head_id"]]["name"], "head_id": t["head_id"],
            "head_type": ents[t["head_id"]]["type"], "relation": t["relation"], "tail": ents[t["tail_id"]]["name"],
            "tail_id": t["tail_id"], "tail_type": ents[t["tail_id"]]["type"], "schema_conf": t["schema_conf"],
            "evid_score": t["evid_score"], "q": t["q"], "tier": t["tier"],
            "components": {k: t[k] for k in ("entity_score", "relation_score", "type_score", "direction_score",
                                             "agreement", "support", "human")},
            "text_ids": sorted({s["text_id"] for s in srcs}), "extractors": t["extractors"], **attrs,
        }


def export(kg: KGStore, fmt: str, out: str | Path) -> int:
    """Write the graph; returns the number of triples written."""
    out = Path(out)
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")
    n = 0
    if fmt == "jsonl":
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", encoding="utf-8") as f:
            for rec in triple_records(kg):
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
                n += 1
        return n
    if fmt == "graphml":
        import networkx as nx

        g = nx.MultiDiGraph()
        for rec in triple_records(kg):
            for side in ("head", "tail"):
                g.add_node(rec[f"{side}_id"], name=rec[side], type=rec[f"{side}_type"] or "")
            g.add_edge(rec["head_id"], rec["tail_id"], key=rec["triple_id"], relation=rec["relation"],
                       q=rec["q"] or 0.0, tier=rec["tier"] or "", schema_conf=rec["schema_conf"] or 0.0,
                       evid_score=rec["evid_score"] or 0.0, text_ids=" ".join(rec["text_ids"]))
            n += 1
        out.parent.mkdir(parents=True, exist_ok=True)
        nx.write_graphml(g, out)
        return n
    # Neo4j CSV: a directory with nodes.csv and relationships.csv
    out.mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()
    with (out / "nodes.csv").open("w", newline="", encoding="utf-8") as fn, \
            (out / "relationships.csv").open("w", newline="", encoding="utf-8") as fr:
        wn, wr = csv.writer(fn), csv.writer(fr)
        wn.writerow(["id:ID", "name", "type", ":LABEL"])
        wr.writerow([":START_ID", ":END_ID", ":TYPE", "triple_id", "q:float", "tier", "schema_conf:float",
                     "evid_score:float", "text_ids:string[]"])
        for rec in triple_records(kg):
            for side in ("head", "tail"):
                if rec[f"{side}_id"] not in seen:
                    seen.add(rec[f"{side}_id"])
                    wn.writerow([rec[f"{side}_id"], rec[side], rec[f"{side}_type"] or "",
                                 "Entity;" + (rec[f"{side}_type"] or "Other")])
            wr.writerow([rec["head_id"], rec["tail_id"], rec["relation"].upper(), rec["triple_id"], rec["q"],
                         rec["tier"], rec["schema_conf"], rec["evid_score"], ";".join(rec["text_ids"])])
            n += 1
    return n
