"""The HTTP API. ``create_app(index_dir)`` returns a FastAPI application; ``medr2 serve`` runs it
with uvicorn. The OpenAPI schema is at ``/openapi.json`` and the web page at ``/``.

Reads (ask, search, passages, documents, graph) are open unless ``serve.protect_reads``; writes
(uploads, removals) and reviews need ``Authorization: Bearer <token>`` with the token from the
environment variable named by ``serve.token_env``. Answers go through a bounded pool of
``serve.llm_workers`` workers: a request that finds them all busy for ``serve.queue_timeout_s``
gets 503, one that runs past ``serve.ask_timeout_s`` gets 504. Questions and answers are not
logged unless ``serve.log_content``.

Example::

    >>> from medr2.serve.app import AskBody
    >>> AskBody(question="Is metformin safe in CKD?").mode
    'medr2'
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, Optional

from fastapi import Depends, FastAPI, File, HTTPException, Query, Request, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from medr2.config import Config
from medr2.serve.state import EngineHolder, Jobs, Metrics

log = logging.getLogger("medr2.serve")
STATIC = Path(__file__).parent / "static"
_SAFE_NAME = re.compile(r"^[\w][\w.\- ]{0,120}$")
MODES = {"medr2": "medr2", "kg": "kg", "vanilla": "vanilla_rag"}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskBody(_Body):
    question: str = Field(min_length=1)
    options: dict[str, str] = Field(default_factory=dict)
    mode: Literal["medr2", "kg", "vanilla"] = "medr2"


class SearchBody(_Body):
    query: str = Field(min_length=1)
    k: int = Field(10, ge=1)
    source_types: list[str] = Field(default_factory=list)
    year_min: Optional[int] = None
    year_max: Optional[int] = None
    languages: list[str] = Field(default_factory=list)


class ReviewBody(_Body):
    action: Literal["confirm", "reject"]
    note: str = Field("", max_length=2000)


def create_app(index_dir: str | Path, config: Optional[Config] = None, generator: Optional[str] = None,
               scorer: Optional[str] = None) -> FastAPI:
    from medr2.index.index import Index
    from medr2.llm.factory import load_llm, open_cache
    from medr2.pipelines import Engine

    from medr2.index.postgres import is_index_dir
    from medr2.kg.build import has_kg, open_existing_kg

    index_dir = Path(index_dir)
    if not is_index_dir(index_dir):
        raise FileNotFoundError(f"{index_dir} is not a medr2 index; build one with `medr2 ingest PATH --index {index_dir}`")
    probe = Index.open(index_dir, config)
    cfg = probe.config
    probe.close()
    sv = cfg.serve
    cache = open_cache(cfg.llm, index_dir)
    gen_spec = generator if generator is not None else (os.environ.get("MEDR2_LLM_URL") or cfg.llm.generator)
    gen = load_llm(gen_spec, cfg.llm, cache)
    sc = load_llm(scorer if scorer is not None else cfg.llm.scorer, cfg.llm, cache) \
        if cfg.appraise.usefulness and gen is not None else None

    def new_engine() -> Engine:
        return Engine(Index.open(index_dir, config), cfg, gen, sc, cache)

    holder = EngineHolder(new_engine)
    jobs = Jobs()
    metrics = Metrics()
    pool = ThreadPoolExecutor(max_workers=sv.llm_workers, thread_name_prefix="medr2-llm")
    slots = threading.BoundedSemaphore(sv.llm_workers)
    token = os.environ.get(sv.token_env) or ""

    @asynccontextmanager
    async def lifespan(_app):
        yield
        pool.shutdown(wait=False, cancel_futures=True)
        holder.close()
        if cache is not None:
            cache.close()

    app = FastAPI(title="medr2", version="0.1.0", lifespan=lifespan,
                  description="Evidence-based medical question answering that shows its evidence.")
    app.state.holder, app.state.jobs, app.state.metrics, app.state.config = holder, jobs, metrics, cfg

    # -- middleware: metrics and a log line without content ------------------------------------
    body_limit = 1 << 20  # JSON bodies; uploads have serve.max_upload_mb

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        n = request.headers.get("content-length")
        cap = sv.max_upload_mb * 1024 * 1024 + (1 << 16) if request.url.path == "/documents" else body_limit
        if n is not None and (not n.isdigit() or int(n) > cap):
            return JSONResponse({"detail": f"request body of {n} bytes is over the limit of {cap} bytes"}, 413)
        return await call_next(request)

    @app.middleware("http")
    async def observe(request: Request, call_next):
        t = time.perf_counter()
        route = request.url.path
        try:
            response = await call_next(request)
        except Exception:
            metrics.observe(request.method, _route_label(request), 500, time.perf_counter() - t)
            raise
        dt = time.perf_counter() - t
        metrics.observe(request.method, _route_label(request), response.status_code, dt)
        log.info("%s %s %s %.1f ms", request.method, route if sv.log_content else _route_label(request),
                 response.status_code, dt * 1000)
        return response

    def _route_label(request: Request) -> str:
        r = request.scope.get("route")
        return getattr(r, "path", None) or "unmatched"

    # -- auth ------------------------------------------------------------------------------------
    def _check(request: Request) -> None:
        if not token:
            raise HTTPException(403, f"writes and reviews are disabled: set the {sv.token_env} environment variable "
                                     "when starting medr2 serve")
        got = request.headers.get("authorization", "")
        if not got.lower().startswith("bearer ") or not hmac.compare_digest(got[7:].strip(), token):
            raise HTTPException(401, "a valid bearer token is required (Authorization: Bearer <token>)",
                                headers={"WWW-Authenticate": "Bearer"})

    def writer(request: Request) -> None:
        _check(request)

    def reader(request: Request) -> None:
        if sv.protect_reads:
            _check(request)

    # -- pages -----------------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))

    @app.get("/health")
    def health() -> dict[str, Any]:
        with holder.use() as e:
            counts = e.index.store.counts()
        kg = has_kg(index_dir)
        return {"status": "ok", "documents": counts["documents"], "passages": counts["passages"], "kg": kg,
                "generator": getattr(gen, "name", None), "workers": sv.llm_workers}

    @app.get("/metrics", response_class=PlainTextResponse)
    def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4")

    # -- ask -------------------------------------------------------------------------------------
    def _validate(body: AskBody) -> None:
        if len(body.question) > sv.max_question_chars:
            raise HTTPException(413, f"question is {len(body.question)} characters; the limit is "
                                     f"{sv.max_question_chars} (serve.max_question_chars)")
        if len(body.options) > 10 or any(len(v) > 500 for v in body.options.values()):
            raise HTTPException(422, "at most 10 options of at most 500 characters each")

    def _answer(body: AskBody, listener=None) -> dict[str, Any]:
        from medr2.llm.base import listen
        from medr2.pipelines import Pipeline

        with holder.use() as e:
            if listener is not None:
                with listen(listener):
                    res = Pipeline(e, MODES[body.mode]).run(body.question, body.options)
            else:
                res = Pipeline(e, MODES[body.mode]).run(body.question, body.options)
        out = json.loads(res.model_dump_json())
        metrics.add_usage(out.get("usage") or {})
        if sv.log_content:
            log.info("ask %r -> %r", body.question[:200], out.get("answer", "")[:200])
        return out

    async def _in_pool(fn, *args):
        loop = asyncio.get_running_loop()
        got = await loop.run_in_executor(None, slots.acquire, True, sv.queue_timeout_s)
        if not got:
            metrics.rejected_busy += 1
            raise HTTPException(503, f"all {sv.llm_workers} answer worker(s) are busy; retry later",
                                headers={"Retry-After": "10"})
        fut = loop.run_in_executor(pool, fn, *args)
        fut.add_done_callback(lambda _: slots.release())
        try:
            return await asyncio.wait_for(asyncio.shield(fut), sv.ask_timeout_s)
        except asyncio.TimeoutError:
            metrics.timeouts += 1
            raise HTTPException(504, f"no answer within {sv.ask_timeout_s:.0f} s (serve.ask_timeout_s); the model "
                                     "is slow or unavailable") from None

    def _errors(exc: Exception) -> HTTPException:
        from medr2.llm.base import LLMError
        from medr2.search.hybrid import QueryError

        if isinstance(exc, QueryError):
            return HTTPException(422, str(exc))
        if isinstance(exc, LLMError):
            return HTTPException(502, f"the language model failed: {exc}")
        if isinstance(exc, ValueError):
            return HTTPException(422, str(exc))
        return HTTPException(500, f"{type(exc).__name__}: {exc}")

    @app.post("/ask", dependencies=[Depends(reader)])
    async def ask(body: AskBody) -> dict[str, Any]:
        """The same JSON as ``medr2 ask --json`` (mode medr2, kg or vanilla)."""
        _validate(body)
        try:
            return await _in_pool(_answer, body)
        except HTTPException:
            raise
        except Exception as exc:
            raise _errors(exc) from None

    @app.post("/ask/stream", dependencies=[Depends(reader)])
    async def ask_stream(body: AskBody) -> StreamingResponse:
        """Server-sent events: ``stage`` events as the pipeline runs, then ``answer`` (or ``error``)."""
        _validate(body)
        queue: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def listener(name: str) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, ("stage", {"stage": name, "t": time.time()}))

        async def produce() -> None:
            try:
                out = await _in_pool(_answer, body, listener)
                await queue.put(("answer", out))
            except HTTPException as e:
                await queue.put(("error", {"status": e.status_code, "detail": e.detail}))
            except Exception as exc:
                e = _errors(exc)
                await queue.put(("error", {"status": e.status_code, "detail": e.detail}))
            await queue.put(None)

        async def events():
            task = asyncio.create_task(produce())
            yield "event: accepted\ndata: {}\n\n"
            while True:
                item = await queue.get()
                if item is None:
                    break
                kind, data = item
                yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"
            await task

        return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    # -- search and documents ------------------------------------------------------------------------
    @app.post("/search", dependencies=[Depends(reader)])
    def search(body: SearchBody) -> dict[str, Any]:
        from medr2.search.hybrid import Filters, QueryError

        if body.k > sv.max_k:
            raise HTTPException(422, f"k is at most {sv.max_k} (serve.max_k)")
        if len(body.query) > sv.max_question_chars:
            raise HTTPException(413, f"query longer than {sv.max_question_chars} characters")
        try:
            f = Filters(list(body.source_types), body.year_min, body.year_max, list(body.languages))
            with holder.use() as e:
                res = e.searcher.search(body.query, k=body.k, filters=f)
        except (QueryError, ValueError) as exc:
            raise HTTPException(422, str(exc)) from None
        return json.loads(res.model_dump_json())

    @app.get("/passages/{passage_id}", dependencies=[Depends(reader)])
    def passage(passage_id: str) -> dict[str, Any]:
        with holder.use() as e:
            rid = e.index.store.rowid_of(passage_id)
            if rid is None:
                raise HTTPException(404, f"no passage {passage_id!r}")
            p = e.index.store.passages([rid])[rid]
            doc = e.index.store.get_document(p["doc_id"])
        out = {**p, "document": {"doc_id": doc.doc_id, "title": doc.title, "source_type": doc.source_type.value,
                                 "year": doc.meta.year, "origin": doc.meta.origin, "url": doc.meta.url,
                                 "publication_types": doc.meta.publication_types} if doc else None}
        kg = open_existing_kg(index_dir)
        if kg is not None:
            try:
                tids = kg.triples_of_texts([passage_id]).get(passage_id, [])
                out["triples"] = [_triple_brief(kg, t) for t in kg.triples_by_ids(tids)]
            finally:
                kg.close()
        return out

    @app.get("/documents", dependencies=[Depends(reader)])
    def documents(limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0)) -> dict[str, Any]:
        with holder.use() as e:
            db = e.index.store.db
            total = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
            rows = db.execute("SELECT doc_id, title, source_type, year, n_passages FROM documents ORDER BY doc_id "
                              "LIMIT ? OFFSET ?", (limit, offset)).fetchall()
        return {"total": total, "documents": [dict(zip(["doc_id", "title", "source_type", "year", "passages"], r))
                                              for r in rows]}

    @app.post("/documents", status_code=202, dependencies=[Depends(writer)])
    async def upload(file: UploadFile = File(...)) -> dict[str, Any]:
        name = Path(file.filename or "").name
        if not name or not _SAFE_NAME.match(name) or name.startswith(".") or ".." in name:
            raise HTTPException(400, f"unsafe file name {file.filename!r}: use letters, digits, '.', '-', '_'")
        limit = sv.max_upload_mb * 1024 * 1024
        import shutil
        import tempfile

        job_dir = Path(tempfile.mkdtemp(prefix="medr2-upload-"))  # outside the index: ingestion skips its own dir
        dest = job_dir / name
        size = 0
        with open(dest, "wb") as f:
            while chunk := await file.read(1 << 20):
                size += len(chunk)
                if size > limit:
                    f.close()
                    shutil.rmtree(job_dir, ignore_errors=True)
                    raise HTTPException(413, f"upload larger than {sv.max_upload_mb} MB (serve.max_upload_mb)")
                f.write(chunk)
        if size == 0:
            shutil.rmtree(job_dir, ignore_errors=True)
            raise HTTPException(400, f"{name} is empty")

        def ingest_job(job) -> dict[str, Any]:
            from medr2.ingest.pipeline import ingest as run_ingest

            try:
                with Index.open(index_dir, config, writable=True) as idx:
                    rep = run_ingest(idx, [dest], progress=False)
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)
            detail = {"file": name, "bytes": size, "status": rep.status, "documents_added": rep.documents_added,
                      "passages_added": rep.passages_added,
                      "problems": [str(p) for p in rep.failed_files + rep.record_problems][:20]}
            detail["kg"] = _sync_kg()
            holder.reload()
            return detail

        job = jobs.submit("ingest", ingest_job)
        return {"job": job.to_dict(), "status_url": f"/jobs/{job.id}"}

    def _sync_kg() -> Optional[dict[str, Any]]:
        if not has_kg(index_dir):
            return None
        from medr2.kg.build import KGBuilder, library_for, make_extractors, open_kg, stored_config, sync_index

        kg = open_kg(index_dir)
        try:
            kc = stored_config(kg)
            lib = library_for(kc)
            names = [n for n in kc.extractors if n != "llm"]
            with Index.open(index_dir, config) as idx:
                rep = sync_index(idx.store, KGBuilder(kg, lib, make_extractors(names, lib), kc))
            return {k: rep[k] for k in ("documents_added", "documents_removed", "triples_recomputed")}
        finally:
            kg.close()

    @app.get("/jobs/{job_id}", dependencies=[Depends(reader)])
    def job_status(job_id: str) -> dict[str, Any]:
        job = jobs.get(job_id)
        if job is None:
            raise HTTPException(404, f"no job {job_id!r}")
        return job.to_dict()

    @app.delete("/documents/{doc_id:path}", dependencies=[Depends(writer)])
    def delete_document(doc_id: str) -> dict[str, Any]:
        from medr2.kg.build import withdraw_documents

        def remove() -> dict[str, Any]:
            with Index.open(index_dir, config, writable=True) as idx:
                if not idx.store.has_document(doc_id):
                    raise HTTPException(404, f"no document {doc_id!r}")
                n = idx.remove_documents([doc_id])
            kg = withdraw_documents(index_dir, [doc_id])
            holder.reload()
            return {"removed": doc_id, "passages": n, "kg": kg}

        return jobs.run_now(remove)

    # -- knowledge graph ---------------------------------------------------------------------------
    def _kg():
        kg = open_existing_kg(index_dir)
        if kg is None:
            raise HTTPException(404, f"the index has no knowledge graph; build it with `medr2 kg build --index {index_dir}`")
        return kg

    def _triple_brief(kg, t: dict[str, Any]) -> dict[str, Any]:
        ents = kg.entities([t["head_id"], t["tail_id"]])
        return {"triple_id": t["triple_id"], "head": ents.get(t["head_id"], {}).get("name", t["head_id"]),
                "head_id": t["head_id"], "head_type": ents.get(t["head_id"], {}).get("type"),
                "relation": t["relation"], "tail": ents.get(t["tail_id"], {}).get("name", t["tail_id"]),
                "tail_id": t["tail_id"], "tail_type": ents.get(t["tail_id"], {}).get("type"),
                "q": t["q"], "tier": t["tier"], "schema_conf": t["schema_conf"], "evid_score": t["evid_score"],
                "human": t["human"], "text_ids": kg.text_ids(t["triple_id"])}

    @app.get("/kg/subgraph", dependencies=[Depends(reader)])
    def subgraph(entity: str = Query(..., min_length=1, max_length=300), limit: int = Query(40, ge=1, le=200)):
        from medr2.kg.build import library_for
        from medr2.search.graph import GraphSearcher

        kg = _kg()
        try:
            gs = GraphSearcher(kg, library_for(cfg.kg), cfg)
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

    @app.get("/kg/triples/{triple_id}", dependencies=[Depends(reader)])
    def triple(triple_id: str) -> dict[str, Any]:
        kg = _kg()
        try:
            t = kg.triple(triple_id)
            if t is None:
                raise HTTPException(404, f"no triple {triple_id!r}")
            out = {**t, **_triple_brief(kg, t), "sources": kg.sources(triple_id), "reviews": kg.reviews(triple_id)}
        finally:
            kg.close()
        with holder.use() as e:
            for s in out["sources"]:
                rid = e.index.store.rowid_of(s["text_id"])
                p = e.index.store.passages([rid]).get(rid) if rid is not None else None
                s["passage"] = {k: p[k] for k in ("doc_id", "title", "heading_path", "text")} if p else None
        return out

    @app.post("/kg/triples/{triple_id}/review", dependencies=[Depends(writer)])
    def review_triple(triple_id: str, body: ReviewBody, request: Request) -> dict[str, Any]:
        from medr2.kg.build import review, stored_config

        reviewer = (request.headers.get("x-reviewer") or "api")[:80]
        kg = _kg()
        try:
            return jobs.run_now(lambda: review(kg, stored_config(kg), triple_id, body.action, reviewer, body.note))
        except KeyError as e:
            raise HTTPException(404, str(e.args[0])) from None
        finally:
            kg.close()

    @app.get("/kg/review-queue", dependencies=[Depends(reader)])
    def review_queue(limit: int = Query(50, ge=1, le=500)) -> dict[str, Any]:
        from medr2.search.graph import find_conflicts

        kg = _kg()
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
            items = [dict(_triple_brief(kg, t), reason="conflict") for t in conflicted[:limit]]
            items += [dict(_triple_brief(kg, t), reason="exploratory") for t in rest if t["triple_id"] not in seen]
        finally:
            kg.close()
        return {"items": items[:limit]}

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, exc: HTTPException):
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    return app
