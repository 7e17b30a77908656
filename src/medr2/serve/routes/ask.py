"""Answers: ``POST /ask`` (the JSON of ``medr2 ask --json``) and ``POST /ask/stream``
(server-sent events as the pipeline runs).

Answers go through a bounded pool of ``serve.llm_workers`` workers: a request that finds them
all busy for ``serve.queue_timeout_s`` gets 503 (with Retry-After), one that runs past
``serve.ask_timeout_s`` gets 504. Questions and answers are not logged unless
``serve.log_content``.

Example::

    >>> error_for(ValueError("options must differ")).status_code
    422
    >>> from medr2.llm.base import LLMError
    >>> error_for(LLMError("connection refused")).detail
    'the language model failed: connection refused'
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any, Callable, Optional

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import StreamingResponse

from medr2.serve.deps import State, reader
from medr2.serve.models import MODES, AskBody
from medr2.serve.state import ServeState

log = logging.getLogger("medr2.serve")

router = APIRouter(dependencies=[Depends(reader)])


def check_limits(st: ServeState, body: AskBody) -> None:
    """413 for a question over ``serve.max_question_chars``; 422 for too many or too long options."""
    sv = st.sv
    if len(body.question) > sv.max_question_chars:
        raise HTTPException(413, f"question is {len(body.question)} characters; the limit is "
                                 f"{sv.max_question_chars} (serve.max_question_chars)")
    if len(body.options) > 10 or any(len(v) > 500 for v in body.options.values()):
        raise HTTPException(422, "at most 10 options of at most 500 characters each")


def answer(st: ServeState, body: AskBody, listener: Optional[Callable[[str], None]] = None) -> dict[str, Any]:
    """Run the mode's pipeline on the current engine (in a worker thread); ``listener`` hears
    each stage's name as it starts."""
    from medr2.api import Medr2
    from medr2.llm.base import listen

    with st.holder.use() as e:
        kb = Medr2.over(e)
        if listener is not None:
            with listen(listener):
                res = kb.ask(body.question, body.options, pipeline=MODES[body.mode])
        else:
            res = kb.ask(body.question, body.options, pipeline=MODES[body.mode])
    out = json.loads(res.model_dump_json())
    st.metrics.add_usage(out.get("usage") or {})
    if st.sv.log_content:
        log.info("ask %r -> %r", body.question[:200], out.get("answer", "")[:200])
    return out


async def in_pool(st: ServeState, fn, *args):
    """``fn(*args)`` on an answer worker: 503 when none frees up within ``serve.queue_timeout_s``,
    504 when it runs past ``serve.ask_timeout_s`` (the worker finishes it and then frees)."""
    sv = st.sv
    loop = asyncio.get_running_loop()
    got = await loop.run_in_executor(None, st.slots.acquire, True, sv.queue_timeout_s)
    if not got:
        st.metrics.rejected_busy += 1
        raise HTTPException(503, f"all {sv.llm_workers} answer worker(s) are busy; retry later",
                            headers={"Retry-After": "10"})
    fut = loop.run_in_executor(st.pool, fn, *args)
    fut.add_done_callback(lambda _: st.slots.release())
    try:
        return await asyncio.wait_for(asyncio.shield(fut), sv.ask_timeout_s)
    except asyncio.TimeoutError:
        st.metrics.timeouts += 1
        raise HTTPException(504, f"no answer within {sv.ask_timeout_s:.0f} s (serve.ask_timeout_s); the model "
                                 "is slow or unavailable") from None


def error_for(exc: Exception) -> HTTPException:
    """The HTTP error for a failed answer: 422 bad input, 502 the model failed, 500 anything else."""
    from medr2.llm.base import LLMError
    from medr2.search.hybrid import QueryError

    if isinstance(exc, QueryError):
        return HTTPException(422, str(exc))
    if isinstance(exc, LLMError):
        return HTTPException(502, f"the language model failed: {exc}")
    if isinstance(exc, ValueError):
        return HTTPException(422, str(exc))
    return HTTPException(500, f"{type(exc).__name__}: {exc}")


@router.post("/ask")
async def ask(body: AskBody, st: State) -> dict[str, Any]:
    """The same JSON as ``medr2 ask --json`` (mode medr2, kg or vanilla)."""
    check_limits(st, body)
    try:
        return await in_pool(st, answer, st, body)
    except HTTPException:
        raise
    except Exception as exc:
        raise error_for(exc) from None


@router.post("/ask/stream")
async def ask_stream(body: AskBody, st: State) -> StreamingResponse:
    """Server-sent events: ``stage`` events as the pipeline runs, then ``answer`` (or ``error``)."""
    check_limits(st, body)
    queue: asyncio.Queue = asyncio.Queue()
    loop = asyncio.get_running_loop()

    def listener(name: str) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, ("stage", {"stage": name, "t": time.time()}))

    async def produce() -> None:
        try:
            out = await in_pool(st, answer, st, body, listener)
            await queue.put(("answer", out))
        except HTTPException as e:
            await queue.put(("error", {"status": e.status_code, "detail": e.detail}))
        except Exception as exc:
            e = error_for(exc)
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
