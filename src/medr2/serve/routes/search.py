"""Retrieval without an answer: ``POST /search`` (hybrid search with filters, at most
``serve.max_k`` hits) and ``GET /passages/{passage_id}`` (one passage with its document and the
graph statements extracted from it).

Example::

    >>> from medr2.serve.routes.search import router
    >>> [(r.path, sorted(r.methods)) for r in router.routes]
    [('/search', ['POST']), ('/passages/{passage_id}', ['GET'])]
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, HTTPException

from medr2.serve.deps import State, reader
from medr2.serve.guards import short
from medr2.serve.models import SearchBody
from medr2.serve.routes.kg import triple_brief

router = APIRouter(dependencies=[Depends(reader)])


def check_languages(store, languages: list[str]) -> None:
    """422 naming the ``languages`` the index holds no passage in (a filter on them finds nothing)."""
    if not languages:
        return
    held = {r[0] for r in store.db.execute("SELECT DISTINCT language FROM passages")}
    unknown = [short(x, 20) for x in languages if x not in held]
    if unknown:
        raise HTTPException(422, f"languages: unknown language code(s) {unknown[:10]}; the index holds passages in "
                                 f"{sorted(h for h in held if h)}")


@router.post("/search")
def search(body: SearchBody, st: State) -> dict[str, Any]:
    from medr2.api import Medr2
    from medr2.search.hybrid import QueryError

    sv = st.sv
    if body.k > sv.max_k:
        raise HTTPException(422, f"k is at most {sv.max_k} (serve.max_k)")
    if len(body.query) > sv.max_question_chars:
        raise HTTPException(413, f"query longer than {sv.max_question_chars} characters")
    try:
        with st.holder.use() as e:
            check_languages(e.index.store, body.languages)
            res = Medr2.over(e).search(body.query, k=body.k, source_types=body.source_types,
                                       year_min=body.year_min, year_max=body.year_max, languages=body.languages)
    except (QueryError, ValueError) as exc:
        raise HTTPException(422, short(exc, 500)) from None
    return json.loads(res.model_dump_json())


@router.get("/passages/{passage_id}")
def passage(passage_id: str, st: State) -> dict[str, Any]:
    from medr2.api import Medr2
    from medr2.kg.build import open_existing_kg

    with st.holder.use() as e:
        out = Medr2.over(e).passage(passage_id)
    if out is None:
        raise HTTPException(404, f"no passage {passage_id!r}")
    kg = open_existing_kg(st.index_dir)
    if kg is not None:
        try:
            tids = kg.triples_of_texts([passage_id]).get(passage_id, [])
            out["triples"] = [triple_brief(kg, t) for t in kg.triples_by_ids(tids)]
        finally:
            kg.close()
    return out
