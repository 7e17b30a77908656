"""Service settings (`medr2 serve`).

    >>> from medr2.config.serve import ServeConfig
    >>> ServeConfig().port
    8000
    >>> ServeConfig(host="10.0.0.5").allowed_hosts()
    ['localhost', '127.0.0.1', '[::1]', '10.0.0.5']
    >>> ServeConfig().allowed_hosts("0.0.0.0")
    ['localhost', '127.0.0.1', '[::1]']
"""

from __future__ import annotations

from typing import Optional

from pydantic import Field, field_validator

from medr2.config.base import Section


def bad_host_patterns(names: list[str]) -> list[str]:
    """The trusted-host entries that are not a name, ``*.domain`` or ``*``."""

    def ok(name: str) -> bool:
        if name == "*" or (name.startswith("*.") and "*" not in name[1:]):
            return True
        return bool(name.strip()) and "*" not in name

    return [n for n in names if not ok(n)]


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
    # Host header names a request may carry (others get 400): exact names, "*.example.org" for
    # subdomains, "*" for any. The address the server binds is added unless it is a wildcard.
    trusted_hosts: list[str] = Field(default_factory=lambda: ["localhost", "127.0.0.1", "::1"])

    @field_validator("trusted_hosts")
    @classmethod
    def _check_trusted_hosts(cls, names: list[str]) -> list[str]:
        bad = bad_host_patterns(names)
        if bad:
            raise ValueError(f"{bad} are not host names, '*.domain' or '*'")
        return names

    def allowed_hosts(self, bind: Optional[str] = None) -> list[str]:
        """The Host names to accept: ``trusted_hosts`` plus the bound address (``bind``, default
        ``host``) unless it is 0.0.0.0 or ::, with IPv6 addresses in brackets as Host headers
        carry them."""
        names = list(self.trusted_hosts)
        bind = bind or self.host
        if bind not in ("0.0.0.0", "::", "[::]", ""):
            names.append(bind)
        out: list[str] = []
        for name in names:
            name = f"[{name}]" if ":" in name and not name.startswith("[") else name
            if name not in out:
                out.append(name)
        return out
