"""The knowledge graph: ``GET /kg/subgraph`` (the statements around an entity, as nodes and
edges), ``GET /kg/triples/{triple_id}`` (one statement with its sources and reviews),
``GET /kg/review-queue`` (conflicting and exploratory statements nobody has reviewed) and
``POST /kg/triples/{triple_id}/review`` (confirm or reject one; needs the bearer token,
``X-Reviewer`` names the reviewer). Every route answers 404 when the index has no graph.

Example::

    >>> from medr2.serve.routes.kg import router
    >>> [(r.path, sorted(r.methods)) for r in router.routes][-1]
    ('/kg/review-queue', ['GET'])
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request

from medr2.serve.deps import State, reader, writer
from medr2.serve.models import ReviewBody
from medr2.serve.state import ServeState

router = APIRouter()


def open_graph(st: ServeState):
    """The index's graph store (the caller closes it), or 404 when there is none."""
    from medr2.kg.build import open_existing_kg

    kg = open_existing_kg(st.index_dir)
    if kg is None:
        raise HTTPException(404, f"the index has no knowledge graph; build it with `medr2 kg build --index {st.index_dir}`")
    return kg


def triple_brief(kg, t: dict[str, Any]) -> dict[str, Any]:
    """One statement as the API shows it: names and types of both ends, its scores and tier, the
    passages it was read from."""
    ents = kg.entities([t["head_id"], t["tail_id"]])
    return {"triple_id": t["triple_id"], "head": ents.get(t["head_id"], {}).get("name", t["head_id"]),
            "head_id": t["head_id"], "head_type": ents.get(t["head_id"], {}).get("type"),
            "relation": t["relation"], "tail": ents.get(t["tail_id"], {}).get("name", t["tail_id"]),
            "tail_id": t["tail_id"], "tail_type": ents.get(t["tail_id"], {}).get("type"),
            "q": t["q"], "tier": t["tier"], "schema_conf": t["schema_conf"], "evid_score": t["evid_score"],
            "human": t["human"], "text_ids": kg.text_ids(t["triple_id"])}


@router.get("/kg/subgraph", dependencies=[Depends(reader)])
def subgraph(st: State, entity: str = Query(..., min_length=1, max_length=300), limit: int = Query(40, ge=1, le=200)):
    from medr2.kg.build import library_for
    from medr2.search.graph import GraphSearcher

    kg = open_graph(st)
    try:
        gs = GraphSearcher(kg, library_for(st.config.kg), st.config)
        links = gs.link(entity)
        triples = gs.subgraph(links, limit)
    finally:
        kg.close()
    nodes: dict[str, dict] = {}
    for t in triples:
        nodes.setdefault(t["head_id"], {"id": t["head_id"], "name": t["head"], "type": t["head_type"]})
        nodes.setdefault(t["tail_id"], {"id": t["tail_id"], "name": t["tail"], "type": t["tail_type"]})
    return {"links": [lk.__dict__ for lk in links], "nodes": list(nodes.values()),
            "edges": [{"triple_id": t["triple_id"], "source": t["head_id"], "target": t["tail_id"],
                       "relation": t["relation"], "q": t["q"], "tier": t["tier"], "score": t["score"],
                       "text_ids": t["text_ids"]} for t in triples]}


@router.get("/kg/triples/{triple_id}", dependencies=[Depends(reader)])
def triple(triple_id: str, st: State) -> dict[str, Any]:
    kg = open_graph(st)
    try:
        t = kg.triple(triple_id)
        if t is None:
            raise HTTPException(404, f"no triple {triple_id!r}")
        out = {**t, **triple_brief(kg, t), "sources": kg.sources(triple_id), "reviews": kg.reviews(triple_id)}
    finally:
        kg.close()
    with st.holder.use() as e:
        for s in out["sources"]:
            rid = e.index.store.rowid_of(s["text_id"])
            p = e.index.store.passages([rid]).get(rid) if rid is not None else None
            s["passage"] = {k: p[k] for k in ("doc_id", "title", "heading_path", "text")} if p else None
    return out


@router.post("/kg/triples/{triple_id}/review", dependencies=[Depends(writer)])
def review_triple(triple_id: str, body: ReviewBody, request: Request, st: State) -> dict[str, Any]:
    from medr2.kg.build import review, stored_config

    reviewer = (request.headers.get("x-reviewer") or "api")[:80]
    kg = open_graph(st)
    try:
        return st.jobs.run_now(lambda: review(kg, stored_config(kg), triple_id, body.action, reviewer, body.note))
    except KeyError as e:
        raise HTTPException(404, str(e.args[0])) from None
    finally:
        kg.close()


@router.get("/kg/review-queue", dependencies=[Depends(reader)])
def review_queue(st: State, limit: int = Query(50, ge=1, le=500)) -> dict[str, Any]:
    from medr2.search.graph import find_conflicts

    kg = open_graph(st)
    try:
        pairs = kg.db.execute("SELECT head_id, tail_id FROM triples GROUP BY head_id, tail_id HAVING COUNT(*) > 1 "
                              "LIMIT 2000").fetchall()
        conflicted: list[dict] = []
        for h, t in pairs:
            ts = [x for x in kg.triples_of_entities([h]) if x["tail_id"] == t and x["head_id"] == h]
            for c in find_conflicts(ts):
                conflicted += [x for x in ts if x["triple_id"] in c["triples"] and x["human"] is None]
        seen = {t["triple_id"] for t in conflicted}
        rest = [kg._row(r) for r in kg.db.execute(
            "SELECT triple_id, head_id, relation, tail_id, entity_score, relation_score, type_score, direction_score, "
            "schema_conf, agreement, support, human, evid_score, q, tier, n_passages, extractors, updated FROM triples "
            "WHERE tier='exploratory' AND human IS NULL ORDER BY q DESC LIMIT ?", (limit,))]
        items = [dict(triple_brief(kg, t), reason="conflict") for t in conflicted[:limit]]
        items += [dict(triple_brief(kg, t), reason="exploratory") for t in rest if t["triple_id"] not in seen]
    finally:
        kg.close()
    return {"items": items[:limit]}
