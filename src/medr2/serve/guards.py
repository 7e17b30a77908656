"""Guards in front of the routes: the request body limit, enforced while the body is read, and
validation errors that say where and why the input is wrong without sending the input back.

:class:`BodyLimit` is a pure ASGI middleware: a Content-Length over :func:`body_cap` is refused
before reading; any other body (chunked ones too) is counted message by message and refused
with 413 as soon as it passes the cap, so the service never holds more than the cap plus one
chunk of it. :func:`validation_error` answers 422 with each error's location, message and type
only; the values (which may be megabytes, or text that cannot be encoded) are left out.

Example::

    >>> body_cap("/documents", 50), body_cap("/ask", 50)
    (52494336, 1048576)
    >>> short("x" * 100), short(3), short("\\ud800abc")
    ('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...', 3, '?abc')
"""

from __future__ import annotations

from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BODY_LIMIT = 1 << 20  # JSON bodies; uploads have serve.max_upload_mb


def body_cap(path: str, max_upload_mb: int) -> int:
    """The most bytes a request to ``path`` may send: an upload plus its multipart framing, or 1 MiB."""
    return max_upload_mb * 1024 * 1024 + (1 << 16) if path == "/documents" else BODY_LIMIT


class BodyTooLarge(HTTPException):
    """Raised while reading a body that passed its cap (FastAPI lets HTTP errors from the body through)."""

    def __init__(self, cap: int) -> None:
        super().__init__(413, f"request body over the limit of {cap} bytes")


class BodyLimit:
    """413 for a request body over :func:`body_cap`: by its Content-Length before reading, else
    while reading (``max_upload_mb`` sizes the upload route's cap)."""

    def __init__(self, app: ASGIApp, max_upload_mb: int) -> None:
        self.app = app
        self.max_upload_mb = max_upload_mb

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = body_cap(scope["path"], self.max_upload_mb)
        n = Headers(scope=scope).get("content-length")
        if n is not None and (not n.isdigit() or int(n) > cap):
            await too_large(f"request body of {short(n)} bytes is over the limit of {cap} bytes")(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    raise BodyTooLarge(cap)
            return message

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except BodyTooLarge as e:  # read outside FastAPI's body parsing: answer here
            if started:
                raise
            await too_large(e.detail)(scope, receive, send)


def too_large(detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, 413, headers={"Connection": "close"})


def short(value: Any, limit: int = 60) -> Any:
    """A location part or message fit to send back: numbers as they are, text made encodable
    (a lone surrogate becomes ``?``) and cut to ``limit`` characters."""
    if isinstance(value, int):
        return value
    text = str(value).encode("utf-8", "replace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + "..."


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """422 with the location, message and type of (at most 20 of) the errors, never the input."""
    return JSONResponse({"detail": [{"loc": [short(p) for p in e.get("loc", ())], "msg": short(e.get("msg", ""), 300),
                                     "type": e.get("type")} for e in exc.errors()[:20]]}, 422)
