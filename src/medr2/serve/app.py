"""The HTTP API. ``create_app(index_dir)`` returns a FastAPI application; ``medr2 serve`` runs it
with uvicorn. The OpenAPI schema is at ``/openapi.json`` and the web page at ``/``.

This module only assembles the application: it loads the models once
(:func:`medr2.llm.factory.load_models`, as the CLI does), builds the shared
:class:`~medr2.serve.state.ServeState` (``app.state.serve``), adds the body-size limit, the
metrics and the log line, and includes the routers of :mod:`medr2.serve.routes`, one module per
resource (health and page, ask, search and passages, documents and jobs, knowledge graph). The
request bodies are in :mod:`medr2.serve.models`, the auth rules in :mod:`medr2.serve.deps`, the
body limit and the validation errors in :mod:`medr2.serve.guards`.

Reads (ask, search, passages, documents, graph) are open unless ``serve.protect_reads``; writes
(uploads, removals) and reviews need ``Authorization: Bearer <token>`` with the token from the
environment variable named by ``serve.token_env``. Answers go through a bounded pool of
``serve.llm_workers`` workers: a request that finds them all busy for ``serve.queue_timeout_s``
gets 503, one that runs past ``serve.ask_timeout_s`` gets 504. Questions and answers are not
logged unless ``serve.log_content``. A request whose Host header is not among
``serve.trusted_hosts`` (the loopback names by default) or the address the server binds gets 400.

Example::

    >>> body_cap("/documents", 50), body_cap("/ask", 50)
    (52494336, 1048576)
"""

from __future__ import annotations

import logging
import os
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Optional, Sequence

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.middleware.trustedhost import TrustedHostMiddleware

from medr2.config import Config
from medr2.serve.guards import BODY_LIMIT, BodyLimit, body_cap, validation_error
from medr2.serve.routes import ROUTERS
from medr2.serve.state import EngineHolder, ServeState, index_stamp

log = logging.getLogger("medr2.serve")
__all__ = ["BODY_LIMIT", "body_cap", "create_app"]


def create_app(index_dir: str | Path, config: Optional[Config] = None, generator: Optional[str] = None,
               scorer: Optional[str] = None, host: Optional[str] = None,
               trusted_hosts: Optional[Sequence[str]] = None) -> FastAPI:
    """The application over the index in ``index_dir``; ``config`` overrides the index's stored
    configuration, ``generator`` / ``scorer`` the model specs (see medr2.llm.factory.load_models),
    ``host`` the address the server binds (default ``serve.host``) and ``trusted_hosts`` the Host
    names it accepts (default ``serve.trusted_hosts``; see ServeConfig.allowed_hosts).
    Raises FileNotFoundError when ``index_dir`` is not an index."""
    from medr2.index.index import Index
    from medr2.store.layout import is_index_dir
    from medr2.llm.factory import load_models
    from medr2.pipelines import PIPELINES, Engine
    from medr2.serve.models import check_modes

    check_modes(PIPELINES)
    index_dir = Path(index_dir)
    if not is_index_dir(index_dir):
        raise FileNotFoundError(f"{index_dir} is not a medr2 index; build one with `medr2 ingest PATH --index {index_dir}`")
    probe = Index.open(index_dir, config)
    cfg = probe.config
    probe.close()
    sv = cfg.serve
    if trusted_hosts is not None:  # validated as a config file's list is, before any model loads
        sv = sv.model_validate({**sv.model_dump(), "trusted_hosts": list(trusted_hosts)})
    models = load_models(cfg, index_dir, generator, scorer)

    def new_engine() -> Engine:
        return Engine(Index.open(index_dir, config), cfg, models.generator, models.scorer, models.cache)

    holder = EngineHolder(new_engine, lambda e: index_stamp(e.index))  # reopens after other processes' writes
    st = ServeState.build(index_dir, cfg, config, models, holder,
                          token=os.environ.get(cfg.serve.token_env) or "")

    @asynccontextmanager
    async def lifespan(_app):
        yield
        st.close()

    app = FastAPI(title="medr2", version="0.1.0", lifespan=lifespan,
                  description="Evidence-based medical question answering that shows its evidence.")
    app.state.serve = st
    app.state.holder, app.state.jobs, app.state.metrics, app.state.config = st.holder, st.jobs, st.metrics, cfg
    # the last added middleware runs first: observe sees the body limit's and the host check's refusals too
    app.add_middleware(BodyLimit, max_upload_mb=cfg.serve.max_upload_mb)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=sv.allowed_hosts(host), www_redirect=False)
    app.middleware("http")(observe)
    for router in ROUTERS:
        app.include_router(router)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    return app


async def observe(request: Request, call_next):
    """Count and time every request by its route template; log a line without content (the
    concrete path only with ``serve.log_content``)."""
    st: ServeState = request.app.state.serve
    t = time.perf_counter()
    route = request.url.path
    try:
        response = await call_next(request)
    except Exception:
        st.metrics.observe(request.method, _route_label(request), 500, time.perf_counter() - t)
        raise
    dt = time.perf_counter() - t
    st.metrics.observe(request.method, _route_label(request), response.status_code, dt)
    log.info("%s %s %s %.1f ms", request.method, route if st.sv.log_content else _route_label(request),
             response.status_code, dt * 1000)
    return response


def _route_label(request: Request) -> str:
    r = request.scope.get("route")
    return getattr(r, "path", None) or "unmatched"


async def http_error(request: Request, exc: HTTPException):
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=getattr(exc, "headers", None))
