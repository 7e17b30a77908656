"""The web page (``/``), liveness and counts (``/health``, always open) and the Prometheus
counters (``/metrics``).

Example::

    >>> from medr2.serve.routes.health import router
    >>> [(r.path, sorted(r.methods)) for r in router.routes]
    [('/', ['GET']), ('/health', ['GET']), ('/metrics', ['GET'])]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, PlainTextResponse

from medr2.serve.deps import State

STATIC = Path(__file__).resolve().parents[1] / "static"

router = APIRouter()


@router.get("/", response_class=HTMLResponse, include_in_schema=False)
def page() -> HTMLResponse:
    return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))


@router.get("/health")
def health(st: State) -> dict[str, Any]:
    from medr2.kg.build import has_kg

    with st.holder.use() as e:
        counts = e.index.store.counts()
    kg = has_kg(st.index_dir)
    return {"status": "ok", "documents": counts["documents"], "passages": counts["passages"], "kg": kg,
            "generator": getattr(st.models.generator, "name", None), "workers": st.sv.llm_workers}


@router.get("/metrics", response_class=PlainTextResponse)
def prometheus(st: State) -> PlainTextResponse:
    return PlainTextResponse(st.metrics.render(), media_type="text/plain; version=0.0.4")
