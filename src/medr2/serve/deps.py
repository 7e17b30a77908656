"""FastAPI dependencies the routers share: the application's :class:`ServeState`, and the
bearer-token rules.

Reads (ask, search, passages, documents, jobs, graph) are open unless ``serve.protect_reads``;
writes (uploads, removals) and reviews need ``Authorization: Bearer <token>`` with the token from
the environment variable named by ``serve.token_env``; with no token set they are refused (403).

Example::

    >>> from pathlib import Path
    >>> from fastapi import HTTPException
    >>> from medr2.config import Config
    >>> from medr2.serve.state import ServeState
    >>> st = ServeState.build(Path("idx"), Config(), None, models=None, holder=None, token="s3cret")
    >>> check_token(st, "Bearer s3cret") is None
    True
    >>> try:
    ...     check_token(st, "Bearer guess")
    ... except HTTPException as e:
    ...     print(e.status_code, e.headers)
    401 {'WWW-Authenticate': 'Bearer'}
    >>> st.close()
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Request

from medr2.serve.state import ServeState


def get_state(request: Request) -> ServeState:
    """The state ``create_app`` built for this application."""
    return request.app.state.serve


State = Annotated[ServeState, Depends(get_state)]
"""A route parameter typed ``st: State`` receives the application's :class:`ServeState`."""


def check_token(st: ServeState, authorization: str) -> None:
    """Raise 403 when writes are off (no token configured), 401 unless ``authorization`` carries it."""
    if not st.token:
        raise HTTPException(403, f"writes and reviews are disabled: set the {st.sv.token_env} environment variable "
                                 "when starting medr2 serve")
    if not authorization.lower().startswith("bearer ") or not hmac.compare_digest(authorization[7:].strip(), st.token):
        raise HTTPException(401, "a valid bearer token is required (Authorization: Bearer <token>)",
                            headers={"WWW-Authenticate": "Bearer"})


def writer(request: Request, st: State) -> None:
    """Writes and reviews: the bearer token, always."""
    check_token(st, request.headers.get("authorization", ""))


def reader(request: Request, st: State) -> None:
    """Reads: the bearer token only when ``serve.protect_reads``."""
    if st.sv.protect_reads:
        check_token(st, request.headers.get("authorization", ""))
