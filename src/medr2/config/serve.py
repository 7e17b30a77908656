"""Service settings (`medr2 serve`).

    >>> from medr2.config.serve import ServeConfig
    >>> ServeConfig().port
    8000
"""

from __future__ import annotations

from pydantic import Field

from medr2.config.base import Section


class ServeConfig(Section):
    """`medr2 serve`: the HTTP API and web page."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    # Bearer token for writes and reviews, read from this environment variable (never from a
    # file of settings, never logged). Without it, writes are refused.
    token_env: str = "MEDR2_API_TOKEN"
    protect_reads: bool = False  # reads need the token too
    max_question_chars: int = Field(2000, ge=10)
    max_upload_mb: int = Field(20, ge=1)
    max_k: int = Field(100, ge=1)
    # Generator calls go through a bounded pool: llama.cpp runs one at a time; an HTTP endpoint more.
    llm_workers: int = Field(1, ge=1)
    queue_timeout_s: float = Field(30.0, gt=0)  # waiting for a free worker before 503
    ask_timeout_s: float = Field(600.0, gt=0)  # an answer taking longer gives 504
    log_content: bool = False  # write questions and answers to the log
